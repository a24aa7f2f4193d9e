"""What protecting the run from a crash in one of the benchmark's arms costs: `ctc-doctor bench` with the
arms isolated (the default: the command supervises the run, which measures the arms in its own process
with a checkpoint before each, `cli/supervise.py`) against `--no-isolate-arms`, whole-command wall seconds
(median of `--repeat` runs, alternated), per backend, and the same per arm; beside it the report's own
account (`benchmark.isolation`: the restarts after a crash and the eager replay each costs).

With `--crash`, it also times the planted model of the tests (tests/targets/user_targets.py
`crashes_by_arm`) whose compiled arm aborts and whose regional arm segfaults: what a crash costs (the run
started again from its checkpoint: Python, the imports, the model built again, the eager replay), against
the same model's arms run with the eager backend.

    .venv/bin/python benchmarks/bench_isolation.py [--fixture per_layer_cache] [--backends eager,inductor]
                                                    [--iters 10] [--repeat 3] [--crash]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _bench(target: str, backend: str, iters: int, isolated: bool, env: dict[str, str]) -> tuple[float, dict]:
    """One `ctc-doctor bench`: its wall seconds and the report's benchmark section."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        args = [sys.executable, "-m", "ctc_doctor", "bench", target, "--bench-backend", backend, "--iters", str(iters)]
        args += ["--warmup", "1", "--no-fix", "-q", "--json", out] + ([] if isolated else ["--no-isolate-arms"])
        t0 = time.perf_counter()
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args[2:])} failed ({done.returncode}): {done.stderr[-2000:]}")
        with open(out, encoding="utf-8") as fh:
            return wall, json.load(fh)["benchmark"]


def _compare(target: str, backend: str, iters: int, repeat: int, env: dict[str, str]) -> None:
    walls: dict[bool, list[float]] = {True: [], False: []}
    last: dict[bool, dict] = {}
    for _ in range(repeat):
        for isolated in (False, True):
            wall, bench = _bench(target, backend, iters, isolated, env)
            walls[isolated].append(wall)
            last[isolated] = bench
    plain, iso = statistics.median(walls[False]), statistics.median(walls[True])
    arms = len(last[True]["arms"])
    isolation = last[True]["isolation"]
    print(
        f"{target.rpartition(':')[2]:<18} {backend:<9} arms {arms}  in-process {plain:6.2f} s  isolated {iso:6.2f} s  "
        f"+{iso - plain:5.2f} s ({(iso / plain - 1) * 100:+.0f} %), {(iso - plain) / arms:+.2f} s per arm;  "
        f"{isolation['reason'][:40]}..., bench phase {last[False]['duration_s']:.2f} -> {last[True]['duration_s']:.2f} s"
    )


def _crash(iters: int, repeat: int, env: dict[str, str]) -> None:
    env = {**env, "PYTHONPATH": str(REPO / "tests" / "targets")}
    target = "user_targets:crashes_by_arm"
    for backend in ("eager", "ctc_test_arm_crashes"):
        walls, bench = [], {}
        for _ in range(repeat):
            wall, bench = _bench(target, backend, iters, True, env)
            walls.append(wall)
        iso = bench["isolation"]
        crashed = ", ".join(f"{a['name']} {a['crash']}" for a in bench["arms"] if a.get("crash")) or "none"
        print(
            f"crashes_by_arm     {backend:<21} {statistics.median(walls):6.2f} s  restarts {iso.get('restarts', 0)}  "
            f"children {iso['child_processes']}  replay {iso['replay_s']:.2f} s  crashed: {crashed}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default="per_layer_cache")
    parser.add_argument("--backends", default="eager,inductor")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()
    env = {**os.environ}
    for backend in args.backends.split(","):
        _compare(f"ctc_doctor.fixtures.zoo:{args.fixture}", backend, args.iters, args.repeat, env)
    if args.crash:
        _crash(args.iters, args.repeat, env)


if __name__ == "__main__":
    main()
