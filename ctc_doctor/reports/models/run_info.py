"""The run's header: summary and verdict counts, the target, the environment, the run, its errors, the
explain cross-check."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import ExplainMethod, Phase, TargetKind, Verdict, _Model


class Summary(_Model):
    """Headline numbers and the verdict."""

    graph_count: int
    """Graphs compiled during the first call: how fragmented one forward is (1 = one graph)."""
    graphs_compiled: int = 0
    """Graphs compiled over the whole workload, recompiles included."""
    graph_break_count: int
    """Graph-break events over the whole workload, repeats included."""
    unique_break_sites: int
    """Deduplicated break sites (`graph_breaks[]`)."""
    recompile_count: int
    """Recompilations over the whole workload."""
    expected_recompiles: int = 0
    """Of `recompile_count`, the one-offs a loop pays by design (`Recompile.expected`): not in the verdict."""
    expected_break_sites: int = 0
    """Of `unique_break_sites`, a framework wrapper's by-design breaks (`GraphBreakSite.expected`): not in
    the verdict (schema 1.11)."""
    frames_skipped: int = 0
    """Functions Dynamo gave up on entirely (run fully eager)."""
    analysis_run: bool = True
    """False for `ctc-doctor bisect` alone: the counts above are then zero, not measured."""
    compile_time_s: float
    """Total frame compile time over the workload, seconds."""
    verdict: Verdict
    """clean, graph_breaks, recompiles, graph_breaks_and_recompiles, or failed."""
    wrong_results: str | None = None
    """Compiled gives wrong results: one line with the figures, and the module that diverges when the
    accuracy bisection found it (`accuracy`); None when no compiled run failed the numerics check (schema 1.14)."""


class Target(_Model):
    """What was analyzed."""

    kind: TargetKind = "build"
    """build (a `build()` TARGET), script (`ctc-doctor run -- script`), logs (`ctc-doctor logs`)."""
    spec: str
    """The TARGET as given (`pkg.mod:build`, `file.py:build`, `demo`), or the script's command line."""
    command: list[str] = Field(default_factory=list)
    """script: the command as passed to Python (`train.py --epochs 1`, `-m pkg.serve`)."""
    name: str
    """Workload name."""
    model_class: str
    """Class of the root model."""
    parameters: int
    """Parameter count."""
    modules: int
    """Number of modules in `named_modules()`."""
    calls: int = 1
    """Calls run: the first plus the variants."""
    train: bool = False
    """Whether forward+backward was analyzed."""
    inputs: list[str] = Field(default_factory=list)
    """Signature of each call's inputs, e.g. `x: float32[4, 8]`."""
    weights: Literal["real", "none", "twin"] = "real"
    """`none` (schema 1.24): built on the meta device (`--weights none`): the findings are Dynamo's on meta
    tensors, exactly what it finds on the real model or a stop (an error of phase `weights`); the fix checks,
    the benchmark and the accuracy bisection were not run. `twin` (schema 1.25): that run stopped, and the
    findings are a small real twin's (`twin`), the same phases left out."""
    twin: str | None = None
    """What the twin is (schema 1.25): its class built from the model's config with fewer layers (narrower
    where needed), random weights, the builder's own inputs."""
    twin_scale: float | None = None
    """The model's layers over the twin's (schema 1.26): what a count made once a layer scales by (a gate
    on recompiles counts those inside a numbered layer so)."""


class Environment(_Model):
    """Versions and settings the run used."""

    python: str
    """Python version."""
    torch: str
    """torch version."""
    transformers: str | None = None
    """transformers version, when installed."""
    platform: str
    """OS and machine."""
    device: str
    """Device the model ran on."""
    backend: str
    """torch.compile backend used for the analysis."""
    unavailable: list[str] = Field(default_factory=list)
    """Capture and benchmark features this torch lacks, as `feature: what the report loses`
    (structured trace, guard user stacks, perf hints, explain, GB ids, compile cache artifacts, cudagraph step marks)."""


class RunInfo(_Model):
    """How and when the report was produced."""

    command: str
    """The command line."""
    started_at: str
    """ISO-8601 start time (UTC)."""
    duration_s: float
    """Wall time of the whole run (a `build()` target's from the command's start, the model's build included)."""
    tool_version: str
    """ctc-doctor version."""
    seed: int | None = None
    """Random seed set before building the workload."""
    exit_code: int | None = None
    """script: the script's exit code (the first rank that failed, with several)."""
    script_error: str | None = None
    """script: the last error line when it raised (`ValueError: ... (at train.py:42)`), or how its process
    died when a signal killed it (`the script's process died (SIGSEGV)`, schema 1.12)."""
    stopped: str | None = None
    """script: why it did not run to its end: `max_steps`, `timeout`, `interrupted` (None: it did)."""
    ranks: int = 1
    """script: the processes it ran as (`--nproc`)."""


class ErrorRecord(_Model):
    """Something that went wrong during the run (the report is still written)."""

    phase: Phase
    """Where: load, eager, explain, compile, capture, bisect, report, timeout; `interrupted` (schema 1.16): a
    signal stopped the run there (SIGTERM, Ctrl-C), its name as the type."""
    type: str
    """Exception type name."""
    message: str
    """One-line message."""
    hint: str | None = None
    """What the failure means and what to do, when it is a known one (a CUDA-graphs overwrite, a
    mark_dynamic constraint violation, the recompile limit)."""


class ExplainCheck(_Model):
    """What `torch._dynamo.explain` reported on the first call, as a cross-check."""

    graph_count: int
    """explain's graph count."""
    graph_break_count: int
    """explain's break count (always graph_count - 1)."""
    break_reasons: int
    """Number of break reasons explain listed."""
    op_count: int
    """Total ops over explain's graphs."""
    missed_sites: int = 0
    """Break sites ctc-doctor found on the first call that explain did not list."""
    method: ExplainMethod = "separate_call"
    """`same_trace`: explain's view (graphs, their break reasons and ops) taken from the compiled run the
    capture watched, at no extra trace; `separate_call`: a `torch._dynamo.explain` call of its own."""
