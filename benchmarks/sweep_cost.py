"""What a sweep row costs per target: the diagnosis alone, `--bench` (eager and compiled arms, adaptive
timing), `--bench` with the old fixed timing (`--iters 20`), and `--full` (bisection, fix checks, every
arm), each as a sweep with --jobs 1 over the same manifest.

The manifest: zoo fixtures (clean, a break, a recompile, repeated blocks) and, with transformers
installed, two tiny transformers models of the built-in manifest. It prints each target's seconds per
mode, the median per mode and its ratio to the diagnosis, and how many timed passes the adaptive rule
ran per arm (its median and range).

    .venv/bin/python benchmarks/sweep_cost.py [--backend inductor] [--device cuda] [--modes diagnose bench fixed full]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ZOO = ["clean", "print_in_forward", "shape_change_dim0", "repeated_blocks"]
HF = ["GPT2Model", "BertModel"]
MODES = {
    "diagnose": [],
    "bench": ["--bench"],
    "fixed": ["--bench"],  # + `--iters 20` on every line: the timing before it was adaptive
    "full": ["--full"],
}


def _targets() -> list[str]:
    out = [f"ctc_doctor.fixtures.zoo:{name}" for name in ZOO]
    try:
        import transformers  # noqa: F401
    except ImportError:
        return out
    return out + [f"ctc_doctor.fixtures.hf_sweep:{name}" for name in HF]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="inductor", help="the benchmark's backend (--bench-backend on every line)")
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    parser.add_argument("--timeout", default="900")
    parser.add_argument("--device", default=None, help="the sweep's --device (cuda on a GPU machine)")
    args = parser.parse_args()
    targets = _targets()
    seconds: dict[str, dict[str, float]] = {}
    timing: dict[str, float] = {}
    """Per mode: seconds of timed passes over every target and arm (median x passes), from the reports."""
    passes: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            extra = f" --bench-backend {args.backend}" + (" --iters 20" if mode == "fixed" else "")
            lines = [t + (extra if mode != "diagnose" else "") for t in targets]
            manifest = Path(tmp) / f"{mode}.txt"
            manifest.write_text("\n".join(lines) + "\n")
            out = Path(tmp) / mode
            command = [sys.executable, "-m", "ctc_doctor", "sweep", str(manifest), "--jobs", "1", "-q", "--out", str(out)]
            device = ["--device", args.device] if args.device else []
            subprocess.run([*command, "--timeout", args.timeout, *device, *MODES[mode]], check=True)
            summary = json.loads((out / "summary.json").read_text())
            seconds[mode] = {}
            timing[mode] = 0.0
            for target, row in zip(targets, summary["targets"], strict=True):
                seconds[mode][target] = row["duration_s"]
                bench = json.loads((out / row["report"]).read_text()).get("benchmark") or {} if row.get("report") else {}
                timed = [a["latency_ms"] for a in bench.get("arms", []) if a.get("latency_ms")]
                timing[mode] += sum(t["n"] * t["median"] / 1000 for t in timed)
                if mode == "bench":
                    passes += [t["n"] for t in timed]
                if row["status"] in ("error", "timeout", "failed"):
                    print(f"  {mode}: {target}: {row['status']}: {row.get('reason')}", file=sys.stderr)
    width = max(len(t.rsplit(":", 1)[-1]) for t in targets)
    print(f"{'target':<{width}}  " + "  ".join(f"{m:>9}" for m in args.modes))
    for target in targets:
        print(f"{target.rsplit(':', 1)[-1]:<{width}}  " + "  ".join(f"{seconds[m][target]:>8.1f}s" for m in args.modes))
    medians = {m: statistics.median(seconds[m].values()) for m in args.modes}
    print(f"{'median':<{width}}  " + "  ".join(f"{medians[m]:>8.1f}s" for m in args.modes))
    base = medians.get("diagnose")
    if base:
        print(f"{'vs diagnose':<{width}}  " + "  ".join(f"{medians[m] / base:>8.2f}x" for m in args.modes))
    if any(timing.values()):
        print("timed passes, all targets: " + ", ".join(f"{m} {timing[m]:.1f} s" for m in args.modes if timing[m]))
    if passes:
        print(f"adaptive timing: {statistics.median(passes):.0f} timed passes per arm (median; {min(passes)}-{max(passes)})")


if __name__ == "__main__":
    main()
