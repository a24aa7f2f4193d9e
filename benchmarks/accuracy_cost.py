"""What the accuracy bisection costs against one full compile of the model.

A 12-block model (each block a LayerNorm, a Linear and a residual; one block computes 5 % more only while
compiled, so the compiled model gives wrong results) and, with `--width`, a wider one. For each, print

    one full compile of the model and a call (the compile a user pays once),
    the accuracy bisection (its trials, its wall time), the ratio, and what it found.

The bisection runs as the doctor runs it after a failing benchmark arm: on a fresh model, one eager call
records each module's inputs, then each module is compiled alone (identical blocks once) and judged
against its own float64 run.

    .venv/bin/python benchmarks/accuracy_cost.py [--blocks 12] [--wrong 7] [--width 256] [--backend inductor]
"""

from __future__ import annotations

import argparse
import time

import torch

from ctc_doctor import Workload
from ctc_doctor.analyzer import torch_internals as ti
from ctc_doctor.analyzer.phases.bisect.accuracy import AccuracyOptions, Trigger, run_accuracy_bisect
from ctc_doctor.analyzer.phases.context import PhaseContext
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


def _full_compile(model: torch.nn.Module, x: torch.Tensor, backend: str) -> float:
    ti.fresh_dynamo_state()
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)
    seconds = time.perf_counter() - t0
    ti.reset_dynamo_quietly()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--wrong", type=int, default=7, help="the block that is wrong under compile")
    parser.add_argument("--width", type=int, action="append", help="block widths to measure [default: 64 and 512]")
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, backend {args.backend}")
    print(f"{'model':<22} {'full compile':>12} {'bisection':>10} {'ratio':>6} {'trials':>6}  found")
    for width in args.width or [64, 512]:
        torch.manual_seed(0)
        model = Blocks(args.blocks, width, args.wrong).eval()
        x = torch.randn(8, 32, width)
        full = _full_compile(model, x, args.backend)
        workload = Workload(model, (x,))
        ctx = PhaseContext(workload=workload, calls=workload.calls(), settings=RunSettings(backend=args.backend))
        t0 = time.perf_counter()
        result = run_accuracy_bisect(ctx, AccuracyOptions(), model, Trigger("the compiled arm", args.backend))
        bisect = time.perf_counter() - t0
        found = f"{result.module_path} ({result.module_class})" if result.module_path is not None else "nothing"
        label = f"{args.blocks} blocks x {width}"
        print(f"{label:<22} {full:>11.2f}s {bisect:>9.2f}s {bisect / full:>5.1f}x {result.trial_count:>6}  {found}")


if __name__ == "__main__":
    main()
