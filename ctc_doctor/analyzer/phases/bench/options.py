"""How to benchmark (`BenchOptions`): the options every side of the benchmark reads (the phase, its arms,
the parent's side of isolated arms, the child that runs them), apart so that none imports another for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchOptions:
    """How to benchmark. Defaults are the CLI defaults."""

    backend: str = "inductor"
    """torch.compile backend of the compiled arms."""
    mode: str | None = None
    """torch.compile mode (default, reduce-overhead, max-autotune); inductor only."""
    iters: int | None = None
    """Timed passes per arm; None (the default): adaptive, `AUTO_MIN` passes at least, then more until the
    median is known to within 2 % (`settled`), `AUTO_MAX` passes or `AUTO_BUDGET_S` of timing."""
    warmup: int = 3
    """Untimed passes before timing."""
    regional: bool = True
    """Add regional-compilation arms when the model has repeated blocks."""
    fresh_cache: bool = True
    """A fresh, empty inductor cache per arm, so arms cannot warm each other."""
    objective: str = "balanced"
    """What the best arm optimises: latency, compile or balanced."""
    max_iters: int | None = None
    """Timed passes at most: more than `iters` are run while the spread is wide (default 3 x iters; adaptive: AUTO_MAX)."""
    aot: bool = False
    """Add the ahead-of-time arms: aot (torch.export + AOTInductor), aot_regional, aot_fixed."""
    aot_strict: bool = False
    """Export in strict mode (Dynamo traces, as torch.compile does) instead of non-strict."""
    job_steps: int | None = None
    """The user's job length in calls (training steps): the arm with the least total time for it is named too."""
    shape_arms: bool = False
    """When the calls' shapes vary: add `dynamic` (dynamic=True) and `marked` (mark_dynamic on every varying
    dim) beside `compiled`, which is torch's automatic dynamic shapes."""
    modes: tuple[str, ...] = ()
    """More inductor modes, one arm each (`compiled[max-autotune]`), beside `compiled` in `mode`."""
    per_fix: bool = True
    """With 2 or more fixes applied, measure each on its own: `fixed[S1]` (that fix alone) when 2 or 3
    were applied, `fixed[-S1]` (every fix but that one) beyond, so no suggestion shows the combination's numbers."""
    arms: tuple[str, ...] = ()
    """Measure only these optional arms (`vocabulary.ARMS`; `fixed`: every per-fix arm) beside eager, compiled
    and the `modes` arms; empty: every arm that applies. Each compiled arm costs a cold compile."""
    add_arms: tuple[str, ...] = ()
    """Optional arms measured beside the default ones (`--arms +compiled_optimizer`): the opt-in arms of
    training steps, which the default leaves out."""
    isolate: bool = False
    """Run the arms in a child process that rebuilds the workload from `target` (`child`), so a
    crash (segfault, abort) costs that arm; the CLI's default. Off, or with a target a child cannot
    rebuild (the Python API's workload objects), they run in this process."""
    target: str | None = None
    """Importable TARGET the child rebuilds the workload from; default: the run's spec."""
    repro_dir: str | None = None
    """Where the repro and issue text of a crash inside PyTorch in the compiled arm go (None: the report only)."""
    arm_memory_mb: int | None = None
    """Cap each arm's memory: the arms' child process's heap (RLIMIT_DATA) on the host, its share of the GPU
    (`torch.cuda.set_per_process_memory_fraction`) on CUDA; an arm that needs more fails as out of memory."""
    stage: str | None = None
    """A supervised run's checkpoint folder (`cli.supervise`): the arms run in this process, a checkpoint
    before each (`staged`), and a crash in one is the supervising process's to go on from, in a new stage."""
    memory_limit_mb: int | None = None
    """`--memory-limit`: each compiled arm past the workload's own (eager and compiled) may add this much
    beyond their peak, wherever the arms run; past it, it fails as out of memory (`running.memory.arm_cap`)."""
