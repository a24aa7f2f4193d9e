"""What ctc-doctor costs against the workload it diagnoses: wall time and the peak resident memory of the
whole process tree (the command, the arms' child, compile workers), each run alone in fresh processes with
a fresh inductor cache.

The workload alone is what a user runs: build the model, one eager pass of its calls, then the same
calls through `torch.compile` (inductor) once; with `--train`, whole training steps (forward, loss,
backward, the optimizer's step). The script reads /proc itself and runs the workload by hand, so the
same script measures another ctc-doctor (`--python`: another checkout's environment) beside this one.
The doctor is `ctc-doctor bench TARGET` (`--train` for training steps).

    .venv/bin/python benchmarks/doctor_cost.py [--targets cost_targets:gpt2_45m,...] [--train] [--repeat 1]
    python3 benchmarks/doctor_cost.py --device cuda --targets gpu_targets:gpt2_small_bf16

Prints one row per target: wall seconds and peak GiB of each, their ratios, and the report's own account
(`cost.summary`, its time and memory ratios, the best arm) beside them. With `--device cuda` both run on
the GPU, and the peak GPU memory in use by the tree's processes (NVML per process, CUDA contexts
included; other jobs on the card do not count) is measured beside RSS; the workload's own allocator
peak is quoted after the report's account. `--limit-share 0.3` gives the doctor `--memory-limit` 0.3x
the workload's own measured peak (the fit-beside-the-model check).
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
from ctc_doctor.analyzer.services.target import load_workload
from ctc_doctor.analyzer.running.calls import to_device
workload = load_workload({target!r}, seed=0)
train, device = {train!r}, {device!r}
model = workload.model.to(device)
calls = [(to_device(c.args, device), to_device(dict(c.kwargs), device)) for c in workload.calls()]
def one_pass(fn):
    optimizer = workload.optimizer(model.parameters()) if train and workload.optimizer is not None else None
    for args, kwargs in calls:
        if train:
            out = fn(*args, **kwargs)
            loss = workload.loss_fn(out) if workload.loss_fn else (out.loss if hasattr(out, "loss") else out.sum())
            loss.backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad()
        else:
            with torch.no_grad():
                fn(*args, **kwargs)
one_pass(model)
one_pass(torch.compile(model))
if device.startswith("cuda"):
    torch.cuda.synchronize()
    print(f"allocated peak {{torch.cuda.max_memory_allocated() / 2**30:.2f}} GiB", file=sys.stderr)
"""


def tree_pids(root: int) -> list[int]:
    """`root` and every process below it (/proc; its own reader, so that the same script measures any
    version of ctc-doctor)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    children.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def tree_rss_bytes(pids: list[int]) -> int:
    """Resident memory of the processes."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


def gpu_used_bytes(pids: list[int]) -> tuple[int | None, int | None]:
    """GPU memory in use (NVML, on every GPU): by these processes (NVML's per-process figure, CUDA contexts
    included; another job on the card does not count; None when NVML lists none of them, as in a container
    whose process ids it does not see), and in all on the cards. (None, None) without NVML."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        wanted, used, seen, total = set(pids), 0, False, 0
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            total += int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid in wanted and proc.usedGpuMemory:
                    used, seen = used + int(proc.usedGpuMemory), True
        return (used if seen else None), total
    except Exception:  # noqa: BLE001 - no NVML, no GPU: the column stays empty
        return None, None


class Run:
    """One measured command: wall seconds, peak resident memory of its tree and peak GPU memory its tree
    used (GiB, NVML per process; where NVML sees none of the tree's processes, the cards' memory in use
    above what it was before the command, `gpu_how`), exit code and stderr."""

    def __init__(self, argv: list[str], env: dict[str, str], gpu: bool) -> None:
        with tempfile.TemporaryDirectory() as cwd:  # not the repository: `python -m` would import its ctc_doctor first
            base = gpu_used_bytes([])[1] if gpu else None
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            peak, own_peak, card_peak = 0, None, None
            while proc.poll() is None:
                pids = tree_pids(proc.pid)
                peak = max(peak, tree_rss_bytes(pids))
                if gpu:
                    own, card = gpu_used_bytes(pids)
                    if own is not None:
                        own_peak = max(own_peak or 0, own)
                    if card is not None and base is not None:
                        card_peak = max(card_peak or 0, card - base)
                time.sleep(0.05)
            self.wall = time.perf_counter() - t0
            self.stderr = proc.stderr.read() if proc.stderr else ""
        self.rss_gib, self.code = peak / 2**30, proc.returncode
        chosen = own_peak if own_peak is not None else card_peak
        self.gpu_gib = chosen / 2**30 if chosen is not None else None
        self.gpu_how = "per process" if own_peak is not None else "the cards' total above the start" if card_peak is not None else None
        if proc.returncode:
            print(f"  {' '.join(argv[2:5])}... failed ({proc.returncode}): {self.stderr[-800:]}", file=sys.stderr)


def _env(cache: str) -> dict[str, str]:
    """benchmarks/ importable (the cost targets), and a fresh inductor cache."""
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "TORCHINDUCTOR_CACHE_DIR": cache}


def _doctor(python: str, target: str, train: bool, device: str, extra: list[str]) -> tuple[Run, str]:
    """`ctc-doctor bench TARGET`: its run, and what its report says of its own cost."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        on = ["--device", device] if device != "cpu" else []
        cmd = [python, "-m", "ctc_doctor", "bench", target, "-q", "--json", out, *(["--train"] if train else []), *on, *extra]
        run = Run(cmd, _env(cache), device.startswith("cuda"))
        said = ""
        if run.code == 0 and os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                report = json.load(fh)
            cost = report.get("cost") or {}
            best = (report.get("benchmark") or {}).get("best_arm")
            said = f"{cost.get('summary')} (time {cost.get('time_ratio')}x, memory {cost.get('memory_ratio')}x); best: {best}"
            ref = cost.get("reference") or {}
            if ref:
                said += f"; reference: {ref.get('method')} {ref.get('placement')} x{ref.get('slices')} ({ref.get('room_basis')})"
        return run, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cost_targets:gpt2_45m", help="comma-separated TARGETs (benchmarks/ is on the path)")
    parser.add_argument("--train", action="store_true", help="training steps: bench --train, and the workload's own steps")
    parser.add_argument("--device", default="cpu", help="cuda: both on the GPU, and the peak GPU memory in use beside RSS")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternated; medians are printed")
    parser.add_argument("--extra", default="", help="more ctc-doctor options, e.g. '--budget 120'")
    parser.add_argument("--python", default=sys.executable, help="the Python whose ctc-doctor is measured (another checkout's venv)")
    parser.add_argument(
        "--limit-share",
        type=float,
        default=None,
        help="give the doctor --memory-limit this share of the workload's own measured peak (e.g. 0.3: the fit-beside-the-model check)",
    )
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    head = ("target", "alone s", "alone GiB", "doctor s", "doctor GiB", "time x", "memory x")
    head += ("alone GPU", "doctor GPU", "GPU x") if gpu else ()
    print(f"{head[0]:<26} " + " ".join(f"{h:>10}" for h in head[1:]) + "   the report says", flush=True)
    for target in args.targets.split(","):
        alone: list[Run] = []
        doctor: list[Run] = []
        said = ""
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache:
                code = ALONE.format(here=str(HERE), target=target, train=args.train, device=args.device)
                alone.append(Run([sys.executable, "-c", code], _env(cache), gpu))
            extra = args.extra.split()
            if args.limit_share:
                peak_gib = alone[-1].gpu_gib if gpu else alone[-1].rss_gib
                if not peak_gib:
                    sys.exit(f"{target}: the workload's own peak was not measured (NVML), so --limit-share has nothing to share")
                extra += ["--memory-limit", str(max(1, int(args.limit_share * (peak_gib or 0) * 1024)))]
                print(f"  {target}: --memory-limit {extra[-1]} ({args.limit_share:g} x the workload's own peak)", flush=True)
            run, said = _doctor(args.python, target, args.train, args.device, extra)
            doctor.append(run)

        def med(runs: list[Run], what: str) -> float:
            return statistics.median(getattr(r, what) or 0.0 for r in runs)

        a_s, a_g, d_s, d_g = med(alone, "wall"), med(alone, "rss_gib"), med(doctor, "wall"), med(doctor, "rss_gib")
        row = [a_s, a_g, d_s, d_g, d_s / a_s, d_g / a_g]
        if gpu:
            a_gpu, d_gpu = med(alone, "gpu_gib"), med(doctor, "gpu_gib")
            row += [a_gpu, d_gpu, d_gpu / a_gpu if a_gpu else float("nan")]
            said += "; alone: " + alone[-1].stderr.strip().splitlines()[-1] if alone[-1].stderr.strip() else ""
            hows = {r.gpu_how for r in alone + doctor} - {None}
            said += f"; GPU memory: {', '.join(sorted(hows))}" if hows else "; GPU memory: not read (NVML)"
        print(f"{target:<26} " + " ".join(f"{x:10.2f}" for x in row) + f"   {said}", flush=True)


if __name__ == "__main__":
    main()
