"""What the accuracy bisection costs against one full compile of the model.

A 12-block model (each block a LayerNorm, a Linear and a residual; one block computes 5 % more only while
compiled, so the compiled model gives wrong results) and, with `--width`, a wider one. For each, print

    one full compile of the model and a call (the compile a user pays once): wall time and peak RSS,
    the accuracy bisection: its wall time and peak RSS, the ratios, its trials, and what it found.

Peak RSS is the process's high-water mark (VmHWM) reset before each step (`running.device`), so each
figure is that step's own peak over the same imports and model.

The bisection runs as the doctor runs it after a failing benchmark arm: on a fresh model, one eager call
records each module's inputs, then each module is compiled alone (identical blocks once) and judged
against its own float64 run.

    .venv/bin/python benchmarks/accuracy_cost.py [--blocks 12] [--wrong 7] [--width 256] [--backend inductor]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

# a fresh inductor cache for each run: a warm one from an earlier run makes every compile look cheap
# (the bisection runs after the full compile in the same cache, as the doctor's runs after its arms)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ctc-accuracy-cost-"))

import torch  # noqa: E402 - after the cache folder is set

from ctc_doctor import Workload  # noqa: E402
from ctc_doctor.analyzer import torch_internals as ti
from ctc_doctor.analyzer.phases.bisect.accuracy import AccuracyOptions, Trigger, run_accuracy_bisect
from ctc_doctor.analyzer.phases.context import PhaseContext
from ctc_doctor.analyzer.running.device import peak_memory_mb, reset_peak_memory
from ctc_doctor.analyzer.running.settings import RunSettings


class Block(torch.nn.Module):
    def __init__(self, width: int, wrong: bool) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)
        self.wrong = wrong

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(self.norm(x))
        if self.wrong and torch.compiler.is_compiling():
            h = h * 1.05
        return x + torch.tanh(h)


class Blocks(torch.nn.Module):
    def __init__(self, blocks: int, width: int, wrong: int) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(width, width)
        self.blocks = torch.nn.ModuleList(Block(width, i == wrong) for i in range(blocks))
        self.head = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def _full_compile(model: torch.nn.Module, x: torch.Tensor, backend: str) -> tuple[float, float]:
    ti.fresh_dynamo_state()
    reset_peak_memory("cpu")
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)
    seconds = time.perf_counter() - t0
    peak = peak_memory_mb("cpu") or 0.0
    ti.reset_dynamo_quietly()
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--wrong", type=int, default=7, help="the block that is wrong under compile")
    parser.add_argument("--width", type=int, action="append", help="block widths to measure [default: 64 and 512]")
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, backend {args.backend}")
    # the process's first compile of such ops pays the backend's one-time start-up (about 8 s of C++
    # toolchain here): not the model's, nor the bisection's
    _full_compile(Blocks(1, 8, -1).eval(), torch.randn(2, 3, 8), args.backend)
    print(f"{'model':<20} {'compile':>8} {'peak':>8} {'bisect':>8} {'peak':>8} {'time':>6} {'memory':>6} {'trials':>6}  found")
    for width in args.width or [64, 512]:
        torch.manual_seed(0)
        model = Blocks(args.blocks, width, args.wrong).eval()
        x = torch.randn(8, 32, width)
        full, full_peak = _full_compile(model, x, args.backend)
        workload = Workload(model, (x,))
        ctx = PhaseContext(workload=workload, calls=workload.calls(), settings=RunSettings(backend=args.backend))
        reset_peak_memory("cpu")
        t0 = time.perf_counter()
        result = run_accuracy_bisect(ctx, AccuracyOptions(), model, Trigger("the compiled arm", args.backend))
        bisect = time.perf_counter() - t0
        peak = peak_memory_mb("cpu") or 0.0
        found = f"{result.module_path} ({result.module_class})" if result.module_path is not None else "nothing"
        label = f"{args.blocks} blocks x {width}"
        print(
            f"{label:<20} {full:>7.2f}s {full_peak:>6.0f}MB {bisect:>7.2f}s {peak:>6.0f}MB {bisect / full:>5.1f}x "
            f"{peak / full_peak if full_peak else float('nan'):>5.2f}x {result.trial_count:>6}  {found}"
        )


if __name__ == "__main__":
    main()
