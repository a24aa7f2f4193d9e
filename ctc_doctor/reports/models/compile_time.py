"""Compile time: torch's own compile metrics per compile, and where the time went."""

from __future__ import annotations

from pydantic import Field

from .base import _Model


class CompileMetric(_Model):
    """Compile metrics of one frame compile (from torch's compilation_metrics)."""

    compile_id: str
    """Compile id."""
    function: str | None = None
    """Compiled function name."""
    file: str | None = None
    """Its file."""
    line: int | None = None
    """Its first line."""
    duration_s: float | None = None
    """Whole frame compile time in seconds."""
    backend_compile_time_s: float | None = None
    """Time spent in the backend."""
    op_count: int | None = None
    """Graph op count (None when no graph was produced)."""
    guard_count: int | None = None
    """Guards installed."""
    shape_env_guard_count: int | None = None
    """Symbolic-shape guards."""
    cache_size: int | None = None
    """Cache entries for this code object before this compile."""
    fail_type: str | None = None
    """Exception type when the compile failed or the frame was skipped."""
    fail_reason: str | None = None
    """Its message (first line)."""
    fail_file: str | None = None
    """A compile that failed: the user's file Dynamo was tracing when it did (schema 1.17)."""
    fail_line: int | None = None
    """Its line."""
    restart_reasons: list[str] = Field(default_factory=list)
    """First lines of the reasons Dynamo restarted analysis."""
    recompile_reason: str | None = None
    """First failed guard when this compile was a recompile."""
    call_index: int | None = None
    """The workload call (0 = first) during which this compile happened (schema 1.14; None: logs)."""
    backward_s: float | None = None
    """Its backward graph's compile, at the first backward (not in `duration_s`; schema 1.11)."""
    module_paths: list[str] = Field(default_factory=list)
    """The modules whose code the compiled frame runs, outermost first (live analyses; schema 1.11)."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds per compile phase, forward and backward together (`readers.compile_time.PHASES`: dynamo,
    aot_autograd, inductor, codegen, kernel_compile); they add up to duration_s + backward_s (schema 1.11)."""
    graph_passes_s: float | None = None
    """Of those, Inductor's pre-grad, joint-graph and post-grad FX passes (schema 1.11)."""
    caches: dict[str, list[int]] = Field(default_factory=dict)
    """{cache: [hits, misses]}: fx_graph, aot_autograd (and their `_remote` twins), as torch counted them."""


class CostRow(_Model):
    """One line of the compile profile: a compile or a cause, and what it cost."""

    key: str
    """The compile id (`0/1`) or the cause id (`C1`)."""
    label: str
    """The compiled function and its module path, or the cause's summary."""
    seconds: float
    """Its compile seconds (a cause: its recompiles', frames and backward graphs)."""
    share: float
    """Of the profile's total."""
    cause: str | None = None
    """A compile: the recompile cause it belongs to (None: a first compile)."""


class CompileProfile(_Model):
    """Where compile time went (schema 1.11): by phase, by compile, by recompile cause, and the caches.
    From the report's own compiles (the analysis backend's; a script's own backend under `run`)."""

    total_s: float
    """Every frame compile and backward compile of the report."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds per phase (dynamo, aot_autograd, inductor, codegen, kernel_compile, other); they add up to total_s."""
    backward_s: float = 0.0
    """Of total_s, the backward graphs' compiles."""
    graph_passes_s: float | None = None
    """Of total_s, Inductor's FX graph passes."""
    first_compile_s: float = 0.0
    """Of total_s, the first compiles (the rest is recompiles)."""
    compiles: list[CostRow] = Field(default_factory=list)
    """Each compile, costliest first."""
    causes: list[CostRow] = Field(default_factory=list)
    """Each recompile cause, costliest first."""
    modules: list[CostRow] = Field(default_factory=list)
    """Compile seconds by module, costliest first: an estimate, each compile's seconds shared among the
    modules its graph's ops came from (`Graph.module_ops`) by op count; repeated blocks fold into one row
    (`h.*`, key `h.*`, label with their count). Live analyses with a recorded graph (schema 1.12)."""
    caches: dict[str, list[int]] = Field(default_factory=dict)
    """{cache: [hits, misses]} over the compiles."""
    backend: str | None = None
    """The backend that compiled (phases past Dynamo exist only for aot_eager and inductor)."""
