"""What ctc-doctor costs against the workload it diagnoses: wall time and the peak resident memory of the
whole process tree (the command, the arms' child, compile workers), each run alone in fresh processes with
a fresh inductor cache.

The workload alone is what a user runs: build the model, one eager pass of its calls, then the same
calls through `torch.compile` (inductor) once; with `--train`, whole training steps (forward, loss,
backward, the optimizer's step). The script reads /proc itself and runs the workload by hand, so the
same script measures another ctc-doctor (`--python`: another checkout's environment) beside this one.
The doctor is `ctc-doctor bench TARGET` (`--train` for training steps).

    .venv/bin/python benchmarks/doctor_cost.py [--targets cost_targets:gpt2_45m,...] [--train] [--repeat 1]

Prints one row per target: wall seconds and peak GiB of each, their ratios, and the report's own account
(`cost.summary`, its time and memory ratios) beside them.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

ALONE = r"""
import sys, torch
sys.path.insert(0, {here!r})
from ctc_doctor.analyzer.target import load_workload
workload = load_workload({target!r}, seed=0)
train = {train!r}
model = workload.model
def one_pass(fn):
    optimizer = workload.optimizer(model.parameters()) if train and workload.optimizer is not None else None
    for call in workload.calls():
        if train:
            out = fn(*call.args, **dict(call.kwargs))
            loss = workload.loss_fn(out) if workload.loss_fn else (out.loss if hasattr(out, "loss") else out.sum())
            loss.backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad()
        else:
            with torch.no_grad():
                fn(*call.args, **dict(call.kwargs))
one_pass(model)
one_pass(torch.compile(model))
"""


def tree_rss_bytes(root: int) -> int:
    """Resident memory of `root` and every process below it (/proc; its own reader, so that the same
    script measures any version of ctc-doctor)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    children.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
        stack.extend(children.get(pid, []))
    return total


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run `argv`; its wall seconds, the peak resident memory of its process tree (GiB), its exit code."""
    with tempfile.TemporaryDirectory() as cwd:  # not the repository: `python -m` would import its ctc_doctor first
        return _measure(argv, env, cwd)


def _measure(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.05)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode:
        print(f"  {' '.join(argv[2:5])}... failed ({proc.returncode}): {stderr[-800:]}", file=sys.stderr)
    return time.perf_counter() - t0, peak / 2**30, proc.returncode


def _env(cache: str) -> dict[str, str]:
    """benchmarks/ importable (the cost targets), and a fresh inductor cache."""
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "TORCHINDUCTOR_CACHE_DIR": cache}


def _doctor(python: str, target: str, train: bool, extra: list[str]) -> tuple[float, float, str]:
    """`ctc-doctor bench TARGET`: wall, tree peak GiB, and what its report says of its own cost."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [python, "-m", "ctc_doctor", "bench", target, "-q", "--json", out, *(["--train"] if train else []), *extra]
        wall, peak, code = measure(cmd, _env(cache))
        said = ""
        if code == 0 and os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                cost = json.load(fh).get("cost") or {}
            said = f"{cost.get('summary')} (time {cost.get('time_ratio')}x, memory {cost.get('memory_ratio')}x)"
        return wall, peak, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cost_targets:gpt2_45m", help="comma-separated TARGETs (benchmarks/ is on the path)")
    parser.add_argument("--train", action="store_true", help="training steps: bench --train, and the workload's own steps")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternated; medians are printed")
    parser.add_argument("--extra", default="", help="more ctc-doctor options, e.g. '--budget 120'")
    parser.add_argument("--python", default=sys.executable, help="the Python whose ctc-doctor is measured (another checkout's venv)")
    args = parser.parse_args()
    head = ("target", "alone s", "alone GiB", "doctor s", "doctor GiB", "time x", "memory x")
    print(f"{head[0]:<26} " + " ".join(f"{h:>10}" for h in head[1:]) + "   the report says")
    for target in args.targets.split(","):
        alone_s, alone_gib, doc_s, doc_gib, said = [], [], [], [], ""
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache:
                code = ALONE.format(here=str(HERE), target=target, train=args.train)
                wall, peak, _ = measure([sys.executable, "-c", code], _env(cache))
            alone_s.append(wall)
            alone_gib.append(peak)
            wall, peak, said = _doctor(args.python, target, args.train, args.extra.split())
            doc_s.append(wall)
            doc_gib.append(peak)
        a_s, a_g, d_s, d_g = (statistics.median(x) for x in (alone_s, alone_gib, doc_s, doc_gib))
        row = (a_s, a_g, d_s, d_g, d_s / a_s, d_g / a_g)
        print(f"{target:<26} " + " ".join(f"{x:10.2f}" for x in row) + f"   {said}")


if __name__ == "__main__":
    main()
