"""The bench phase, one package: eager vs compiled vs compiled-with-fixes vs regional compilation, measured.

- `phase`: `run_bench`, the phase itself: the benchmark's settings, the arms planned, measured (in the
  arms' child, else in this process), concluded (the best arm, the job, the machine's load);
- `loop`: the one arm loop, with two executors: this process's `runner`, or the arms' child (`child`,
  whose other side is `analyzer/workers/bench`);
- `runner`: one arm's passes, compiles, timings and numerics (`ArmRunner`);
- `arms`: which arms there are and their copies of the model; `aot`: the ahead-of-time arms;
- `numbers`: the statistics (settled medians, spread, pace, the budget); `options`: `BenchOptions`;
- `crash`: a compiled arm that crashed inside PyTorch, triaged.
"""

from .options import BenchOptions
from .phase import BenchSection, measure_arm, plan_arms, run_bench
from .runner import ArmRunner

__all__ = ["ArmRunner", "BenchOptions", "BenchSection", "measure_arm", "plan_arms", "run_bench"]
