"""`ctc-doctor sweep`: how the wall time scales with --jobs, and what a sweep costs per target over
running the same targets one by one with `ctc-doctor TARGET` (the hand-written loop it replaces).

One manifest of zoo fixtures (by default 8: clean, breaks, recompiles) is swept with --jobs 1, 2
and N (the machine's default), each `--repeat` times (medians), and also run as a plain sequential
loop of `ctc-doctor TARGET --no-bisect --no-fix --no-bench --json R -q` processes. It prints:

  speed-up    wall(--jobs 1) / wall(--jobs K)            (ideal: K, up to the cores)
  overhead    wall(--jobs 1) / wall(sequential loop)     (the sweep's own cost per target; ~1.0)

    .venv/bin/python benchmarks/sweep_scaling.py [--repeat 3] [--jobs 1 2 4] [--only clean ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from analysis_overhead import _wall  # the sibling script: one way to time a whole process

DEFAULT = [
    "clean",
    "print_in_forward",
    "data_dependent_if",
    "shape_change_dim0",
    "dtype_change",
    "deep_break",
    "two_causes",
    "logging_call",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="*", default=None, help="job counts to time [default: 1, 2 and the machine's default]")
    parser.add_argument("--only", nargs="*", default=DEFAULT, help="zoo fixtures in the manifest")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ctc_doctor.sweep.runner import default_jobs

    jobs = args.jobs or sorted({1, 2, default_jobs()})
    targets = [f"ctc_doctor.fixtures.zoo:{name}" for name in args.only]
    cli = [sys.executable, "-m", "ctc_doctor"]
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "models.txt"
        manifest.write_text("\n".join(targets) + "\n")
        walls: dict[str, list[float]] = {"loop": [], **{f"jobs {k}": [] for k in jobs}}
        for _ in range(args.repeat):  # interleaved: drift in the machine hits every arm alike
            walls["loop"].append(
                sum(_wall([*cli, t, "--no-bisect", "--no-fix", "--no-bench", "-q", "--json", os.path.join(tmp, "r.json")]) for t in targets)
            )
            for k in jobs:
                walls[f"jobs {k}"].append(
                    _wall([*cli, "sweep", str(manifest), "--jobs", str(k), "--out", os.path.join(tmp, f"out{k}"), "-q"])
                )
    med = {name: statistics.median(values) for name, values in walls.items()}
    print(f"{len(targets)} targets, {args.repeat} repeat(s), {os.cpu_count()} core(s); median wall:")
    print(f"  sequential loop of ctc-doctor TARGET   {med['loop']:7.1f} s  ({med['loop'] / len(targets):.1f} s per target)")
    for k in jobs:
        wall = med[f"jobs {k}"]
        print(
            f"  sweep --jobs {k:<3}                      {wall:7.1f} s  speed-up {med['jobs 1'] / wall:.2f}x"
            if "jobs 1" in med
            else f"  sweep --jobs {k}  {wall:7.1f} s"
        )
    if "jobs 1" in med:
        print(f"overhead of the sweep, --jobs 1 / loop: {med['jobs 1'] / med['loop']:.2f}x")


if __name__ == "__main__":
    main()
