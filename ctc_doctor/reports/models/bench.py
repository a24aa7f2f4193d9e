"""The benchmark: its arms, their latency and compile figures, CUDA graphs, isolation, machine load, and
`run --compare`'s strategy rows."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Objective, Verdict, _Model
from .cost import ReferenceRun
from .findings import RecompileCause
from .fixes import NumericsCheck


class LatencyStats(_Model):
    """Steady-state latency of one pass over the workload's calls."""

    median: float
    """Median, milliseconds."""
    iqr: float
    """Interquartile range, milliseconds."""
    n: int
    """Timed passes."""
    unstable: str | None = None
    """Why this figure cannot be trusted as a steady figure, when it cannot: a spread over 25 % of the
    median, too few steady samples, compiles during the timed passes, a busy machine (schema 1.13). A
    verdict or a speedup that rests on it says so."""
    retimed: str | None = None
    """Its first timing had other processes on the cores: once they left, it was timed again and this is
    that figure (schema 1.17)."""


class BenchmarkArm(_Model):
    """One way of running the model, measured."""

    name: str
    """eager, compiled, compiled[MODE] (`--modes`), or one of the optional arms: compiled_optimizer,
    compiled_fixed, fixed[S1] (that fix alone) or fixed[-S1] (every fix but that one), regional,
    regional_fixed, modular, submodules (schema 1.22: the clean submodules of a `compile-submodules`
    suggestion compiled alone, the rest eager), dynamic, marked, padded, aot, aot_regional, aot_fixed."""
    description: str = ""
    """What the arm runs, one line."""
    compile_time_s: float | None = None
    """Cold compile time: Dynamo frame compile time (backend included) of the first pass, fresh inductor cache."""
    compile_phases: dict[str, float] = Field(default_factory=dict)
    """The cold pass's compile seconds per phase (`CompileMetric.phases`), backward compiles included (schema 1.11)."""
    backward_compile_s: float | None = None
    """The cold pass's backward-graph compiles (training; not in compile_time_s; schema 1.11)."""
    warm_compile_time_s: float | None = None
    """Compile time again after `torch._dynamo.reset()`, with the cache the cold run filled."""
    first_pass_s: float | None = None
    """Wall time of the first pass (compile plus first run)."""
    steps_per_s: float | None = None
    """Calls per second at the median pass (training steps per second when the workload has an
    optimizer; schema 1.10)."""
    break_even_calls: int | None = None
    """The call (step) from which this arm's total time, its first pass (compile included) and then steady
    calls, beats eager's; None when it is not faster (schema 1.10)."""
    latency_ms: LatencyStats | None = None
    """Steady-state latency per pass."""
    speedup_vs_eager: float | None = None
    """Eager median latency / this arm's median latency."""
    graph_count: int | None = None
    """Graphs compiled over the arm (cold pass)."""
    graph_break_count: int | None = None
    """Graph breaks over the arm."""
    recompile_count: int | None = None
    """Recompilations over the arm."""
    recompile_causes: list[RecompileCause] = Field(default_factory=list)
    """The arm's own recompiles, folded into causes (ids local to the arm): why an arm recompiled,
    e.g. a per-layer guard that makes regional compilation recompile once per block."""
    peak_memory_mb: float | None = None
    """CUDA: peak allocated by the caching allocator. CPU (Linux): peak resident set size of the process during the arm."""
    peak_reserved_mb: float | None = None
    """CUDA: the caching allocator's peak reserved memory (allocated plus cached) in the arm's process during
    the arm (schema 1.16)."""
    max_abs_error: float | None = None
    """Largest absolute difference from eager outputs (information: `numerics` is the verdict)."""
    max_rel_error: float | None = None
    """Largest relative difference from eager outputs (reports before 1.9; from 1.9 see `numerics`)."""
    numerics_ok: bool | None = None
    """Passes the numerics judgement against eager's (`numerics`)."""
    numerics: NumericsCheck | None = None
    """The numerics judgement of the arm's cold pass (schema 1.9; None for eager, the baseline)."""
    error: str | None = None
    """Why the arm failed or was cut short, one line."""
    error_type: str | None = None
    """The type of the exception that failed it (`BackendCompilerFailed`, `VariantError`...), when one did
    (schema 1.18): what the verdicts and the triage read, not `error`'s text."""
    warm_start_compile_s: float | None = None
    """`compiled` with --aot (inductor): compile time of a pass in empty caches after loading the cold
    pass' cache artifacts (`torch.compiler.load_cache_artifacts`): a new process with the caches shipped."""
    load_time_s: float | None = None
    """AOT arms: loading the compiled package(s), what a deployed process pays instead of compiling."""
    code: str | None = None
    """The lines to paste for this arm's way of compiling, when it is more than `torch.compile(model)`
    (the optimizer's step, dynamic=True, the marks; schema 1.10)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """AOT arms: export mode (strict or non-strict), dynamic dims, export time, package size, the
    packages of a regional arm (class, exported instance, instances that load it)."""
    cudagraphs: CudaGraphStats | None = None
    """Compiled arms under CUDA graphs (`--mode reduce-overhead`/`max-autotune`, backend `cudagraphs`):
    step marking, recordings, skips and re-recordings with torch's reasons (schema 1.8)."""
    crash: str | None = None
    """The arm's child process died while running it: the signal (SIGSEGV, SIGABRT...) or `exit status N`;
    `error` says so, and no verdict picks the arm (schema 1.12)."""
    out_of_memory: bool = False
    """The arm ran out of memory (its `peak_memory_mb` is what it reached); it is not a loss for compile:
    the verdict says the arm could not be measured (schema 1.13)."""
    memory_cap: str | None = None
    """`--memory-limit`: what this compiled arm was allowed to hold, the workload's own peak (the eager and
    compiled arms') plus the limit, and how (the heap's RLIMIT_DATA on the host, the GPU's share on CUDA);
    past it, it ran out of memory, and its error says so. None: not capped (no limit, or the eager and
    compiled arms, which are the workload itself) (schema 1.20)."""
    timed_compiles: int = 0
    """Compiles during the timed passes (recompiles past the first passes): the steady state was never
    reached, and `latency_ms.unstable` names the causes (schema 1.13)."""
    busy: float | None = None
    """Other processes' CPU while this arm was timed, in cores (schema 1.13; None: not measured)."""
    stderr_tail: list[str] = Field(default_factory=list)
    """A crashed arm: the child process' last lines of stderr (schema 1.12)."""


class CudaGraphStats(_Model):
    """What CUDA graphs did in one benchmark arm, from torch's `cudagraphs` log and counters."""

    step_marked: bool
    """Each call began with `torch.compiler.cudagraph_mark_step_begin()` (outputs kept across calls are copies)."""
    recordings: int = 0
    """CUDA graphs recorded (a new input size, a new path through the tree, a re-recording)."""
    skip_count: int = 0
    """Graph compiles without CUDA graphs over the arm's compiles (cold and warm-cache: a graph counts
    once per compile; torch's `cudagraph_skips` counter, which also counts skips torch does not log)."""
    skips: dict[str, int] = Field(default_factory=dict)
    """Skip reason -> times, as torch logged it (`skipping cudagraphs due to cpu device`, a mutated input, ...)."""
    rerecords: dict[str, int] = Field(default_factory=dict)
    """Re-recording reason -> times (`function=... reason=...`: an input's address or a static input changed)."""
    warnings: dict[str, int] = Field(default_factory=dict)
    """Torch's other warnings on CUDA graphs -> times (a graph recorded per distinct input size, ...)."""


class BenchIsolation(_Model):
    """Where the benchmark's arms ran, and what running them in a child process cost (schema 1.12)."""

    isolated: bool
    """Every arm ran in a child process (`python -m ctc_doctor.analyzer.workers.bench`), so a crash costs
    that arm; False: every arm ran in the analysing process."""
    reason: str
    """Why: the default, --no-isolate-arms, or a target a child cannot rebuild (or a child that could not)."""
    child_processes: int = 0
    """Children started: one, plus one after each crash."""
    startup_s: float = 0.0
    """Seconds the children took to start (import torch, rebuild the workload, one eager call), all starts."""
    replay_s: float = 0.0
    """Seconds children started after a crash spent re-running the eager arm and the numerics reference
    (what the arms after a crash are judged against)."""
    crashed: list[str] = Field(default_factory=list)
    """The arms whose child process died."""
    restarts: int = 0
    """A supervised run (`settings.isolation` `supervised`): the times the run was started again after a
    crash in an arm, each going on from the arm after it (schema 1.20)."""
    first_start_s: float = 0.0
    """Seconds the first child took from its start to its first arm: Python, the imports and the
    workload's build, what a fresh process of the user's pays before its first call (the report's own
    cost account counts it on the workload's side) (schema 1.20)."""


class Benchmark(_Model):
    """Eager vs compiled vs compiled-with-fixes (and regional compilation), measured."""

    device: str
    """Device the arms ran on."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """backend, mode, iters, warmup, grad mode, tolerance, fresh cache, torch threads."""
    arms: list[BenchmarkArm] = Field(default_factory=list)
    """Measured arms, eager first."""
    job_steps: int | None = None
    """`--steps N`: the user's job length in calls (training steps; schema 1.10)."""
    job_best_arm: str | None = None
    """The arm with the least total time (first pass with its compile, then steady calls) for `job_steps`."""
    best_arm: str | None = None
    """The best arm with correct numerics for the objective: the fastest (latency, balanced; of arms
    within noise of it, the one that compiles fastest) or the one that compiles fastest (compile)."""
    best_arm_reason: str | None = None
    """Why, with the numbers; says when the arms are within noise of each other."""
    objective: Objective = "balanced"
    """What `best_arm` and the suggestion ranking optimise (`--objective`)."""
    within_noise: list[str] = Field(default_factory=list)
    """Arms whose latency cannot be told apart from the best arm's (median difference within the spread)."""
    duration_s: float = 0.0
    """Wall time of the benchmark."""
    notes: list[str] = Field(default_factory=list)
    """Caveats."""
    cold_start: str | None = None
    """With AOT arms: the cheapest way for a new process to get a compiled model (JIT compile, warm
    cache, or loading an AOT package built once), with the numbers."""
    isolation: BenchIsolation | None = None
    """Where the arms ran (a child process, or this one) and why, and what the child processes cost (schema 1.12)."""
    machine: MachineLoad | None = None
    """How busy the machine was while the arms were timed (schema 1.13)."""
    kept: str | None = None
    """What the arms' numerics judgement kept and where: eager's results and the reference's differences
    from them, in memory or in a temporary file (schema 1.13)."""
    reference: ReferenceRun | None = None
    """The benchmark's own numerics reference (training steps, or no fix phase before it): where it ran and
    what it cost; None when its arms were judged by the fix phase's (schema 1.16)."""
    compiler_warmup_s: float | None = None
    """Seconds the compiler's one-time costs took in the process that ran the arms: a tiny function
    compiled before the first compiled arm (the backend's imports, the C++ compiler's checks, its first
    kernel), which every arm's compile time leaves out. The workload pays them in its first compile: the
    report's own cost account counts them on its side (schema 1.20)."""


class MachineLoad(_Model):
    """Whether other work shared the machine while the benchmark timed its arms (pyperf's rule: a figure
    from a busy machine is not a figure) (schema 1.13)."""

    cores: int
    """CPU cores this process may run on."""
    threads: int
    """Threads torch computes with (`torch.get_num_threads()`)."""
    load_average: float | None = None
    """The 1-minute load average when the benchmark started."""
    other_cpu: float | None = None
    """The most CPU, in cores, other processes used while an arm was timed."""
    gpu_processes: list[str] = Field(default_factory=list)
    """Other processes holding the GPU (`pid name memory`), when it can be read."""
    busy: bool = False
    """The machine was busy: the timings are less reliable and the verdict says so."""
    note: str | None = None
    """What was seen, one line (also printed on the terminal)."""


class StrategyRow(_Model):
    """One run of the script under one way of compiling it (`run --compare`), timed by its own calls."""

    strategy: str
    """eager (nothing compiled), default (the script's own options), dynamic, static, or a mode."""
    exit_code: int | None = None
    """The script's exit code under this strategy."""
    error: str | None = None
    """Why it gave no pace: the script failed, or too few calls for a steady one."""
    calls: int = 0
    """Calls of the analyzed object."""
    first_call_s: float | None = None
    """First call to second: the first step, compile included."""
    period_ms: float | None = None
    """Median call-to-call time over the later half of the run: the steady step."""
    period_iqr_ms: float | None = None
    """Their IQR (schema 1.13)."""
    period_n: int = 0
    """The periods it rests on (schema 1.13)."""
    unstable: str | None = None
    """Why the pace cannot be trusted as a steady figure (a spread over 25 % of the median, other processes on
    the cores while it ran); the speedup and the verdict say so (schema 1.13)."""
    busy: float | None = None
    """Other processes' CPU, in cores, while this row's run of the script ran (None: not measured; schema 1.16)."""
    steps_per_s: float | None = None
    """1000 / period_ms."""
    speedup: float | None = None
    """Eager's period over this one's (None without an eager row)."""
    break_even_calls: int | None = None
    """The call from which this strategy's total time (first step + steady steps) beats eager's; None:
    never (not faster), or no eager row."""
    compile_time_s: float = 0.0
    """Total frame compile time of the run."""
    graphs_compiled: int = 0
    """Graphs compiled over the run."""
    calls_s: float | None = None
    """The time its calls took, recompiles included (`CompiledObject.calls_s`; schema 1.15)."""
    recompiles: int = 0
    """Recompilations over the run."""
    expected_recompiles: int = 0
    """Of those, the one-offs a decoding loop pays by design."""
    verdict: Verdict = "clean"
    """The run's verdict under this strategy."""
    loss_call: int | None = None
    """`run --compare`: the call whose loss is compared with eager's, the latest kept in both runs (calls
    0, 1, 2, 4, 8... are kept; schema 1.11)."""
    loss: float | None = None
    """The loss that call returned under this strategy."""
    loss_change: float | None = None
    """The largest |loss - eager's loss| / |eager's loss| over the calls kept in both runs, up to `loss_call`."""
    loss_tolerance: float | None = None
    """The relative change allowed: STEP_LOSS_TOLERANCE, or DROPOUT_LOSS_TOLERANCE when the model has a
    dropout (compiled code draws other random numbers than eager)."""
    loss_ok: bool | None = None
    """False: this strategy's training drifted from eager's beyond the tolerance; it is never the fastest."""
