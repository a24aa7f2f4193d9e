"""Analysis overhead: a whole `ctc-doctor TARGET` process against ONE plain `torch.compile` run.

For each model, two commands run as separate processes (so imports, model building and Dynamo's
first-compile costs count on both sides), interleaved, `--repeat` times:

  plain  python -m ctc_doctor.fixtures.capture NAME      torch.compile(model, backend="eager") over the
                                                         workload's calls, nothing else
  ours   ctc-doctor NAME --no-bisect --no-fix --no-bench --json OUT
                                                         the analysis: compiled run under capture, eager
                                                         pass, explain's view, report, suggestions, JSON,
                                                         and the summary (to a pipe, as in a CI log)

NAME is a zoo fixture or a TARGET (`--target benchmarks/hf_models.py:led`). It prints the medians,
the ratio ours/plain per model, the median ratio and the worst (target <= 1.10x). Python's bytecode
cache is on for both (PYTHONDONTWRITEBYTECODE is dropped), as on a user's machine.

    .venv/bin/python benchmarks/analysis_overhead.py [--repeat 5] [--only NAME ...] [--target T ...] [--skip-transformers]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="fixture names (default: the whole zoo)")
    parser.add_argument("--target", nargs="*", default=[], help="TARGETs to add (module:builder or file.py:builder)")
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    from ctc_doctor.fixtures.registry import all_fixtures

    fixtures = all_fixtures()
    names = (
        args.only
        if args.only is not None
        else [n for n, s in fixtures.items() if not (args.skip_transformers and "transformers" in s.tags)]
    )
    names = [*names, *args.target]
    python = sys.executable
    doctor = str(Path(python).parent / "ctc-doctor")
    out = os.path.join(tempfile.mkdtemp(prefix="ctc-overhead-"), "report.json")
    # warm-up: the bytecode cache and the OS file cache
    _wall([python, "-m", "ctc_doctor.fixtures.capture", "clean"])
    _wall([doctor, "demo", "--fixture", "clean", "--no-bisect", "--no-fix", "--no-bench", "--json", out])

    print(f"{'model':36s} {'plain s':>8s} {'ours s':>8s} {'ratio':>6s}   (median of {args.repeat})")
    ratios = {}
    for name in names:
        plain, ours = [], []
        for _ in range(args.repeat):
            plain.append(_wall([python, "-m", "ctc_doctor.fixtures.capture", name]))
            target = name if ":" in name else fixtures[name].target
            ours.append(_wall([doctor, target, "--no-bisect", "--no-fix", "--no-bench", "--json", out]))
        p, o = statistics.median(plain), statistics.median(ours)
        ratios[name] = o / p
        print(f"{name:36s} {p:8.2f} {o:8.2f} {o / p:6.2f}", flush=True)
    worst = max(ratios, key=ratios.__getitem__)
    print(
        f"analysis / plain compile: {statistics.median(ratios.values()):.2f}x median, {ratios[worst]:.2f}x worst ({worst}); target <= 1.10x"
    )


if __name__ == "__main__":
    main()
