"""`summary.json` of a sweep: pydantic models, validated on read like the report. No torch import."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..reports.models import Environment, GuardKind

SWEEP_SCHEMA_VERSION = "1.4"

Status = Literal["clean", "recompiles", "graph_breaks", "graph_breaks_and_recompiles", "failed", "error", "timeout", "skipped"]
"""A report's verdict; `error` (no usable report: import error, builder raised, crash, script failed),
`timeout` (past the per-target limit), `skipped` (never run: the built-in manifest could not build it)."""

STATUS_ORDER: tuple[Status, ...] = (
    "clean", "recompiles", "graph_breaks", "graph_breaks_and_recompiles", "failed", "error", "timeout", "skipped"
)  # fmt: skip


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SweepSite(_Model):
    """One break site of a target, as `sweep diff` keys it."""

    gb_type: str
    gb_id: str | None = None
    """The graph-break registry id (GB0170), when torch gave one."""
    file: str
    """The last two components of the file where it breaks: the innermost frame's (a library's, for a
    break in library code; before schema 1.2, the user's frame when there was one)."""
    line: int
    function: str
    module_paths: list[str] = Field(default_factory=list)
    occurrences: int = 1
    own_code: bool = True
    own_file: str | None = None
    """A break in library code: the last two components of the user's own frame that reached it (1.2)."""
    own_line: int | None = None
    expected: bool = False
    """A framework wrapper's by-design break (`GraphBreakSite.expected`; 1.2)."""


class SweepCause(_Model):
    """One recompile cause of a target."""

    kind: GuardKind
    source: str | None = None
    dim: int | None = None
    summary: str
    recompiles: int
    """How many recompiles this cause explains."""


class TargetBench(_Model):
    """A target's benchmark, as the fleet dashboard reads it (`--bench`/`--full`; schema 1.3)."""

    eager_ms: float | None = None
    """Eager's median latency per pass (every call of the workload), milliseconds."""
    compiled_ms: float | None = None
    """The whole-model compiled arm's median latency, milliseconds."""
    speedup: float | None = None
    """Eager median / compiled median."""
    spread: float | None = None
    """The speedup's relative noise: eager's IQR/median plus compiled's (a change inside it is noise)."""
    best_arm: str | None = None
    """The benchmark's best arm with correct numerics (`Benchmark.best_arm`)."""
    best_speedup: float | None = None
    """The best arm's speedup over eager (1.0 when the best arm is eager)."""
    compile_s: float | None = None
    """The compiled arm's cold compile seconds (fresh caches)."""
    warm_compile_s: float | None = None
    """The compiled arm's compile seconds again with the caches the cold pass filled."""
    peak_memory_eager_mb: float | None = None
    peak_memory_compiled_mb: float | None = None
    memory_ratio: float | None = None
    """Eager peak / compiled peak (PyTorch's compression ratio: above 1 the compiled model uses less).
    CUDA: the allocator's peak; CPU: the process's peak resident set, a rough figure."""
    numerics_ok: bool | None = None
    """The compiled arm's numerics judgement (None: not judged)."""
    numerics: str | None = None
    """Why the numerics failed, one line."""
    error: str | None = None
    """The compiled arm's error, when it failed (its latency, then, is not a speedup)."""
    backend: str | None = None
    device: str | None = None
    duration_s: float | None = None
    """The benchmark's wall time."""


class SweepTarget(_Model):
    """One manifest line and what its run found."""

    target: str
    """The manifest line: a `build` TARGET (with its options) or `run ... -- script` line."""
    index: int
    """Its position in the whole manifest."""
    status: Status
    reason: str | None = None
    """Why the status is error, timeout, failed or skipped: the one-line error of the run."""
    exit_code: int | None = None
    """The child process's exit code (None: killed at the timeout, or never run)."""
    graph_count: int = 0
    graph_break_count: int = 0
    break_sites: list[SweepSite] = Field(default_factory=list)
    recompile_count: int = 0
    recompile_causes: list[SweepCause] = Field(default_factory=list)
    bench: TargetBench | None = None
    """The benchmark's numbers (`--bench`, `--full`; a build target that reached the benchmark; schema 1.3)."""
    group: str | None = None
    """The manifest's `[group]` this target is listed under (schema 1.3)."""
    duration_s: float = 0.0
    report: str | None = None
    """The target's full JSON report, relative to the sweep directory (None when none was written)."""
    log: str | None = None
    """The child's output (stdout and stderr), relative to the sweep directory."""


class Dashboard(_Model):
    """The four numbers PyTorch's own compile dashboard tracks, over a fleet or a group (schema 1.3)."""

    targets: int
    """Targets that ran (skipped ones excluded)."""
    passed: int
    """Targets that compiled and reached a verdict, with correct numerics where they were judged."""
    pass_rate: float
    benchmarked: int = 0
    """Targets with a measured speedup (the means below are over these)."""
    geomean_speedup: float | None = None
    """Geometric mean of the compiled arm's speedup over eager."""
    geomean_best_speedup: float | None = None
    """Geometric mean of the best arm's speedup (eager counts as 1.0)."""
    mean_compile_s: float | None = None
    """Mean cold compile seconds of the compiled arm."""
    p90_compile_s: float | None = None
    geomean_memory_ratio: float | None = None
    """Geometric mean of eager peak / compiled peak."""


class Totals(_Model):
    """Fleet totals."""

    targets: int
    statuses: dict[str, int] = Field(default_factory=dict)
    """Targets per status, in STATUS_ORDER."""
    break_sites: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    duration_s: float = 0.0
    """Sum of the targets' durations (the sweep's wall time is `wall_s`)."""
    dashboard: Dashboard | None = None
    """Pass rate, speedup, compile time and memory over the fleet (schema 1.3)."""
    groups: dict[str, Dashboard] = Field(default_factory=dict)
    """The same per manifest `[group]` (schema 1.3)."""


class SweepSummary(_Model):
    """`OUT/summary.json`."""

    schema_version: str = SWEEP_SCHEMA_VERSION
    kind: Literal["sweep"] = "sweep"
    manifest: str
    """The manifest's path as given, or `transformers` for the built-in one."""
    manifest_digest: str
    """sha256 of the manifest's target lines (after comments): shards of one manifest share it."""
    manifest_size: int
    """Targets in the whole manifest (before sharding)."""
    shards: list[str] = Field(default_factory=list)
    """The shards this summary holds, `I/N` (empty: the whole manifest in one run)."""
    options: list[str] = Field(default_factory=list)
    """Options passed to every target's run (backend, device, timeout, ...)."""
    jobs: int = 1
    started_at: str
    wall_s: float
    tool_version: str
    environment: Environment | None = None
    """The targets' environment (from their reports; None when no target wrote one)."""
    targets: list[SweepTarget] = Field(default_factory=list)
    """In manifest order."""
    totals: Totals
    notes: list[str] = Field(default_factory=list)
    stopped_by: str | None = None
    """What stopped the sweep before every target ran: `SIGINT` (Ctrl-C), `SIGTERM` (a cancelled CI job,
    a scheduler's limit); None when it ran to the end (schema 1.3)."""


def sweep_schema_text() -> str:
    """The JSON Schema of `summary.json`, as committed in `summary.schema.json`."""
    import json

    from ..reports.io import described_schema

    schema = described_schema(SweepSummary, "sweep", SWEEP_SCHEMA_VERSION)
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
