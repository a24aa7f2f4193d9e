"""What the training-step matrix costs: the benchmark's wall time as arms are added, as ratios.

On the built-in training example (`ctc_doctor.fixtures.zoo:train_step`: a 2-block GPT-like model,
AdamW, batches of 16, 24 and 32 tokens), through ctc-doctor's own benchmark with inductor on CPU and
a fresh inductor cache per arm, in the order a user would add them:

    base        eager, compiled, compiled_optimizer (the optimizer's step compiled too)
    +modular    each top-level part compiled on its own (on by default for training steps)
    +shapes     --shape-arms: dynamic=True, the varying dims marked, padded to buckets
    +modes      --modes max-autotune-no-cudagraphs (one arm per mode)

For each it prints the benchmark's wall time, the number of arms, the time per arm, and the ratio to
`base`; then each arm's cold compile and steps/s from the widest run. No fixes or bisection run (they
are the analysis' cost, measured by `analysis_overhead.py` and `bisect_cost.py`).

    .venv/bin/python benchmarks/train_matrix.py [--iters 10] [--backend inductor]
"""

from __future__ import annotations

import argparse
import time

from ctc_doctor import AnalyzeOptions, BenchOptions, analyze
from ctc_doctor.fixtures.zoo import train_step


def _run(backend: str, iters: int, **kw: object) -> tuple[float, list]:  # type: ignore[type-arg]
    options = AnalyzeOptions(
        explain=False,
        train=True,
        backend="aot_eager",
        bench=BenchOptions(backend=backend, iters=iters, warmup=1, **kw),  # type: ignore[arg-type]
    )
    t0 = time.perf_counter()
    report = analyze(train_step(), options)
    wall = time.perf_counter() - t0
    b = report.benchmark
    assert b is not None, report.errors
    return b.duration_s or wall, b.arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    steps = [
        ("base", {"regional": False}),
        ("+modular", {"regional": True}),
        ("+shapes", {"regional": True, "shape_arms": True}),
        ("+modes", {"regional": True, "shape_arms": True, "modes": ("max-autotune-no-cudagraphs",)}),
    ]
    base = None
    arms: list = []  # type: ignore[type-arg]
    print(f"{'matrix':<10} {'arms':>4} {'bench s':>8} {'s/arm':>6} {'vs base':>8}")
    for name, kw in steps:
        seconds, arms = _run(args.backend, args.iters, **kw)
        base = base or seconds
        print(f"{name:<10} {len(arms):>4} {seconds:>8.1f} {seconds / len(arms):>6.1f} {seconds / base:>7.2f}x", flush=True)
    print(f"\n{'arm':<36} {'cold compile':>12} {'steps/s':>8} {'vs eager':>8}")
    for arm in arms:
        compile_s = f"{arm.compile_time_s:.1f} s" if arm.compile_time_s is not None else ""
        rate = f"{arm.steps_per_s:.0f}" if arm.steps_per_s else (arm.error or "")[:30]
        speedup = f"{arm.speedup_vs_eager:.2f}x" if arm.speedup_vs_eager else ""
        print(f"{arm.name:<36} {compile_s:>12} {rate:>8} {speedup:>8}")


if __name__ == "__main__":
    main()
