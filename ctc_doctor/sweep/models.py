"""`summary.json` of a sweep: pydantic models, validated on read like the report. No torch import."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..reports.models import Environment, GuardKind

SWEEP_SCHEMA_VERSION = "1.2"

Status = Literal["clean", "recompiles", "graph_breaks", "graph_breaks_and_recompiles", "failed", "error", "timeout", "skipped"]
"""A report's verdict; `error` (no usable report: import error, builder raised, crash, script failed),
`timeout` (past the per-target limit), `skipped` (never run: the built-in manifest could not build it)."""

STATUS_ORDER: tuple[Status, ...] = (
    "clean", "recompiles", "graph_breaks", "graph_breaks_and_recompiles", "failed", "error", "timeout", "skipped"
)  # fmt: skip


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


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
    duration_s: float = 0.0
    report: str | None = None
    """The target's full JSON report, relative to the sweep directory (None when none was written)."""
    log: str | None = None
    """The child's output (stdout and stderr), relative to the sweep directory."""


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


def sweep_schema_text() -> str:
    """The JSON Schema of `summary.json`, as committed in `summary.schema.json`."""
    import json

    schema = SweepSummary.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ctc-doctor/sweep/{SWEEP_SCHEMA_VERSION}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
