"""Offline ingestion speed and memory: `ctc-doctor logs` vs `tlparse` on the same trace files.

    python benchmarks/ingest_speed.py [--copies 60] [--repeat 3]

1. The committed real capture (tests/data/logs/showcase_trace, decompressed: tlparse reads plain files).
2. A large synthetic trace: that capture repeated `--copies` times with fresh frame ids, so every copy
   is a new set of compiles (~1.9 MB per copy), the way a long job with many compiled functions looks.

Both tools run as commands (process start-up included, as a user sees them), best of `--repeat`,
with peak RSS of the child. tlparse writes its HTML site to a temporary folder; `ctc-doctor logs`
writes its JSON report. Prints times, the ratio tlparse/ctc-doctor (> 1: we are faster) and memory.
No assertions: this is a measurement (`make bench`). tlparse is optional: `pip install tlparse`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "tests" / "data" / "logs" / "showcase_trace"
_FRAME = re.compile(r'"frame_id": (\d+)')


def run(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB of the child, return code) of one command run in a fresh process."""
    # each measurement in its own wrapper process, so RUSAGE_CHILDREN's max is this command's alone
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n"
        "dt = time.perf_counter() - t\n"
        "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def best(cmd: list[str], repeat: int, before: object = None) -> tuple[float, float, int]:
    results = []
    for _ in range(repeat):
        if callable(before):
            before()
        results.append(run(cmd))
    return min(results)


def synthetic(source: str, copies: int, path: Path) -> None:
    """The capture repeated with frame ids shifted per copy: distinct compiles, same record mix."""
    with path.open("w", encoding="utf-8") as fh:
        for k in range(copies):
            shift = k * 1000
            fh.write(_FRAME.sub(lambda m, shift=shift: f'"frame_id": {int(m.group(1)) + shift}', source) if shift else source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=60, help="copies of the capture in the large trace [60]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept [3]")
    args = parser.parse_args()

    tlparse = shutil.which("tlparse") or (
        str(Path(sys.executable).parent / "tlparse") if (Path(sys.executable).parent / "tlparse").exists() else None
    )
    doctor = [sys.executable, "-m", "ctc_doctor", "logs"]
    gz = next(CAPTURE.glob("*.log.gz"))
    source = gzip.decompress(gz.read_bytes()).decode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "dedicated_log_torch_trace_small.log"
        small.write_text(source, encoding="utf-8")
        large = Path(tmp) / "dedicated_log_torch_trace_large.log"
        t = time.perf_counter()
        synthetic(source, args.copies, large)
        print(
            f"synthetic trace: {args.copies} copies of the capture, {large.stat().st_size / 2**20:.0f} MB, "
            f"written in {time.perf_counter() - t:.1f} s"
        )
        out_dir = Path(tmp) / "tl_out"

        def clear() -> None:
            shutil.rmtree(out_dir, ignore_errors=True)

        print(f"{'trace':<10} {'size':>8} {'ctc-doctor logs':>16} {'peak RSS':>9} {'tlparse':>9} {'peak RSS':>9} {'tlparse/ours':>13}")
        for name, path in (("capture", small), ("synthetic", large)):
            ours = best([*doctor, str(path), "--json", str(Path(tmp) / "r.json"), "-q"], args.repeat)
            if ours[2] != 0:
                raise SystemExit(f"ctc-doctor logs failed on {path} (exit {ours[2]})")
            size = f"{path.stat().st_size / 2**20:.1f} MB"
            if tlparse:
                theirs = best([tlparse, str(path), "-o", str(out_dir), "--overwrite", "--no-browser"], args.repeat, before=clear)
                ratio = f"{theirs[0] / ours[0]:.2f}x"
                print(f"{name:<10} {size:>8} {ours[0]:>14.2f} s {ours[1]:>6.0f} MB {theirs[0]:>7.2f} s {theirs[1]:>6.0f} MB {ratio:>13}")
            else:
                print(f"{name:<10} {size:>8} {ours[0]:>14.2f} s {ours[1]:>6.0f} MB {'(tlparse not installed: pip install tlparse)':>30}")
        # in-process: the ingest itself, without interpreter start-up and imports
        from ctc_doctor.analyzer.doors.offline import ingest

        for name, path in (("capture", small), ("synthetic", large)):
            t = time.perf_counter()
            report = ingest([str(path)])
            dt = time.perf_counter() - t
            mb = path.stat().st_size / 2**20
            print(
                f"in-process ingest of {name}: {dt:.2f} s ({mb / dt:.0f} MB/s), {report.summary.unique_break_sites} site(s), "
                f"{report.summary.graph_break_count} break event(s), {len(report.compile_metrics)} compiles"
            )
        print(
            f"this process's peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
            f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)"
        )


if __name__ == "__main__":
    main()
