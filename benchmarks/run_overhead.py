"""`ctc-doctor run -- SCRIPT` against running the script plainly, with the same backend.

For each fixture script, these commands run as separate processes, interleaved, `--repeat` times:

  plain    python SCRIPT ARGS                        (torchrun --nproc-per-node N for two ranks)
  capture  ctc-doctor run --no-bisect --no-fix --json OUT -- SCRIPT ARGS
           the script under capture, then its report: one eager call of the compiled module for
           module paths, findings, suggestions, the JSON and the summary
  full     ctc-doctor run --json OUT -- SCRIPT ARGS  (the default: + bisection and verified fixes)

It prints the medians and the ratios capture/plain (the target is <= 1.2x) and full/plain (what
the bisection and the fixes cost on top). The scripts pass `--backend` themselves, so plain and
ours compile the same way. Python's bytecode cache is on for all (PYTHONDONTWRITEBYTECODE dropped).

    .venv/bin/python benchmarks/run_overhead.py [--repeat 3] [--only train ...] [--no-full]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from analysis_overhead import REPO, _wall  # the sibling script: one way to time a whole process

SCRIPTS = REPO / "ctc_doctor" / "fixtures" / "scripts"

# name -> (ranks, script and its arguments)
CASES: dict[str, tuple[int, list[str]]] = {
    "train (eager)": (1, [str(SCRIPTS / "train.py"), "--backend", "eager", "--steps", "20"]),
    "train (inductor)": (1, [str(SCRIPTS / "train.py"), "--backend", "inductor", "--steps", "20"]),
    "two_ranks (eager, 2 ranks)": (2, [str(SCRIPTS / "two_ranks.py"), "--backend", "eager", "--steps", "20"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="case names starting with these words")
    parser.add_argument("--no-full", action="store_true", help="skip the default run (bisection and fixes)")
    args = parser.parse_args()

    python = sys.executable
    doctor = str(Path(python).parent / "ctc-doctor")
    out = os.path.join(tempfile.mkdtemp(prefix="ctc-run-overhead-"), "report.json")
    print(f"{'script':28s} {'plain s':>8s} {'capture s':>9s} {'ratio':>6s} {'full s':>7s} {'ratio':>6s}")
    ratios = []
    for name, (ranks, script) in CASES.items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        plain_cmd = (
            [python, *script]
            if ranks == 1
            else [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *script]
        )
        ours = [doctor, "run", "--nproc", str(ranks), "--json", out]
        arms = {"plain": plain_cmd, "capture": [*ours, "--no-bisect", "--no-fix", "--", *script]}
        if not args.no_full:
            arms["full"] = [*ours, "--", *script]
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        _wall(plain_cmd)  # warm the page cache and the inductor cache, as a second run would find them
        for _ in range(args.repeat):
            for arm, cmd in arms.items():
                times[arm].append(_wall(cmd))
        med = {arm: statistics.median(t) for arm, t in times.items()}
        ratio = med["capture"] / med["plain"]
        ratios.append(ratio)
        full = f"{med['full']:7.2f} {med['full'] / med['plain']:5.2f}x" if "full" in med else ""
        print(f"{name:28s} {med['plain']:8.2f} {med['capture']:9.2f} {ratio:5.2f}x {full}", flush=True)
    if ratios:
        print(f"capture/plain: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x (target <= 1.20x)")


if __name__ == "__main__":
    main()
