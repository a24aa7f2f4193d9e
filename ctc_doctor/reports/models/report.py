"""The report itself, its verdict, and its assembly by each producer (see the package's docstring)."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from ...version import __version__
from .base import SCHEMA_VERSION, Verdict, _Model
from .bench import Benchmark, StrategyRow
from .bisect import AccuracyBisect, Bisect
from .compile_time import CompileMetric, CompileProfile
from .cost import DoctorCost
from .findings import (
    CompiledObject,
    DdpSplit,
    FrameCalls,
    Graph,
    GraphBreakSite,
    GuardSet,
    PerfHint,
    Recompile,
    RecompileCause,
    RecompileCliff,
)
from .fixes import FixResult, ShapeProbe, Suggestion, TorchBug
from .logs import LogSource, ParseStats, RankDivergence, RankSummary
from .run_info import Environment, ErrorRecord, ExplainCheck, RunInfo, Summary, Target


class Report(_Model):
    """A ctc-doctor report."""

    schema_version: str = SCHEMA_VERSION
    """Report schema version, `major.minor`."""
    target: Target
    """What was analyzed."""
    environment: Environment
    """Versions and settings."""
    run: RunInfo
    """How it was produced."""
    summary: Summary
    """Headline numbers and verdict."""
    graph_breaks: list[GraphBreakSite] = Field(default_factory=list)
    """Deduplicated break sites, most costly first."""
    recompiles: list[Recompile] = Field(default_factory=list)
    """Recompilations in the order they happened."""
    recompile_causes: list[RecompileCause] = Field(default_factory=list)
    """The causes of those recompiles: each recompile id belongs to exactly one."""
    graphs: list[Graph] = Field(default_factory=list)
    """Every graph compiled."""
    perf_hints: list[PerfHint] = Field(default_factory=list)
    """Performance hints torch logged."""
    ddp_splits: list[DdpSplit] = Field(default_factory=list)
    """Compiles DDPOptimizer split at gradient-bucket boundaries (not graph breaks; schema 1.12)."""
    compile_metrics: list[CompileMetric] = Field(default_factory=list)
    """Per frame compile."""
    compile_profile: CompileProfile | None = None
    """Where compile time went: by phase, compile, cause; caches (schema 1.11; None: no compile metrics)."""
    guards: list[GuardSet] = Field(default_factory=list)
    """Guards installed, per compile id."""
    explain: ExplainCheck | None = None
    """torch._dynamo.explain cross-check (None when skipped or unavailable)."""
    notes: list[str] = Field(default_factory=list)
    """Caveats: degraded capture on older torch, explain disagreements, skipped phases."""
    errors: list[ErrorRecord] = Field(default_factory=list)
    """What failed; a failed run still reports what it found before."""
    redacted: bool = False
    """True when paths, the home directory, user and host names were removed (`--redact`)."""
    bisect: Bisect | None = None
    """Module bisection (None when not run: no breaks found, or --no-bisect)."""
    suggestions: list[Suggestion] = Field(default_factory=list)
    """What to change, per cause, ranked like the sites they address (empty when none apply)."""
    fix: FixResult | None = None
    """The safe suggestions applied to a copy and verified (None when `fix` did not run)."""
    shape_probe: ShapeProbe | None = None
    """Dynamic-shape probing (None without --probe-shapes)."""
    benchmark: Benchmark | None = None
    """Eager vs compiled vs fixed vs regional (None when not run)."""
    source: LogSource | None = None
    """Offline reports (`ctc-doctor logs`): the logs they were read from (None for a live analysis)."""
    parse_stats: ParseStats | None = None
    """Offline reports: records used, ignored, unknown and unreadable."""
    ranks: list[RankSummary] = Field(default_factory=list)
    """Offline reports of multi-rank logs: what each rank compiled."""
    divergence: list[RankDivergence] = Field(default_factory=list)
    """Reports of several ranks (logs, `run --nproc`): ranks that compiled differently."""
    compiled: list[CompiledObject] = Field(default_factory=list)
    """script: every `torch.compile` the script made (empty for `build()` targets and logs)."""
    comparison: list[StrategyRow] = Field(default_factory=list)
    """`run --compare`: the script run once per way of compiling it, its pace under each (schema 1.10)."""
    accuracy: AccuracyBisect | None = None
    """Where compiled goes wrong (None: no compiled run failed the numerics check, or not run; schema 1.14)."""
    recompile_cliffs: list[RecompileCliff] = Field(default_factory=list)
    """Frames that hit the recompile limit and ran eagerly from then on (schema 1.14)."""
    frame_calls: list[FrameCalls] = Field(default_factory=list)
    """Each compiled frame: the entries a compiled version served and those that ran eagerly, by call
    (a live analysis; schema 1.17)."""
    torch_bugs: list[TorchBug] = Field(default_factory=list)
    """Compiles that crashed inside PyTorch, and backends that compute a graph wrong, each ready to file
    (schema 1.17; wrong results and other backends' bugs, 1.19)."""
    cost: DoctorCost | None = None
    """What the doctor itself cost: wall time and peak memory per phase, against the workload's own (schema 1.13)."""

    @property
    def analyzed_compile(self) -> CompiledObject | None:
        """script: the compiled object the report analyzes (None for `build()` targets and logs)."""
        return next((o for o in self.compiled if o.analyzed), None)

    @property
    def lora_rank(self) -> int | None:
        """script: the largest LoRA rank any compiled module held (None: no LoRA layer)."""
        return max((o.lora_rank for o in self.compiled if o.lora_rank), default=None)


FAILED_PHASES = ("eager", "compile", "timeout", "script")
"""Errors of these phases make the verdict `failed` (a script that exits with an error included)."""


def refresh_verdict(report: Report) -> None:
    """Recount `summary.expected_recompiles` and the verdict from the report's recompiles and errors
    (after recompiles were marked expected, or several ranks merged)."""
    s = report.summary
    s.expected_recompiles = sum(1 for rc in report.recompiles if rc.expected)
    s.expected_break_sites = sum(1 for site in report.graph_breaks if site.expected)
    if not s.analysis_run:
        return  # bisection only: the verdict is the bisection's (whether a module fails fullgraph=True)
    failed = s.verdict == "failed" or any(e.phase in FAILED_PHASES for e in report.errors)
    s.verdict = compute_verdict(s.unique_break_sites - s.expected_break_sites, s.recompile_count - s.expected_recompiles, failed)


def compute_verdict(summary_breaks: int, recompiles: int, failed: bool) -> Verdict:
    """The verdict from counts: failed wins, then breaks and recompiles."""
    if failed:
        return "failed"
    if summary_breaks and recompiles:
        return "graph_breaks_and_recompiles"
    if summary_breaks:
        return "graph_breaks"
    if recompiles:
        return "recompiles"
    return "clean"


# --- assembling a report (see the module's docstring) -----------------------------------------------


def started_now() -> str:
    """The start time a report records: now, UTC, ISO-8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def elapsed_s(t0: float) -> float:
    """Seconds since `t0` (a `time.perf_counter()` reading), as a report records a duration."""
    return round(time.perf_counter() - t0, 3)


def summarize(
    *,
    graph_breaks: Sequence[GraphBreakSite] = (),
    recompiles: Sequence[Recompile] = (),
    graphs: Sequence[Graph] = (),
    compile_metrics: Sequence[CompileMetric] = (),
    graph_count: int,
    frames_skipped: int = 0,
    failed: bool,
    analysis_run: bool = True,
) -> Summary:
    """The headline counts and verdict of these findings (none: a run that compiled nothing).

    `graph_count` is the producer's: the first call's graphs (live), the first compiles' (logs, which
    do not mark calls). `failed`: the eager pass, a compile or the deadline failed.
    """
    return Summary(
        graph_count=graph_count,
        graphs_compiled=len(graphs),
        graph_break_count=sum(s.occurrences for s in graph_breaks),
        unique_break_sites=len(graph_breaks),
        expected_break_sites=sum(1 for s in graph_breaks if s.expected),
        recompile_count=len(recompiles),
        frames_skipped=frames_skipped,
        analysis_run=analysis_run,
        compile_time_s=round(sum(m.duration_s or 0.0 for m in compile_metrics), 4),
        verdict=compute_verdict(sum(1 for s in graph_breaks if not s.expected), len(recompiles), failed),
    )


def unknown_environment(
    *,
    python: str | None = None,
    torch: str | None = None,
    platform: str | None = None,
    device: str | None = None,
    backend: str | None = None,
) -> Environment:
    """The environment of a run that was not observed (logs, a run that left nothing): what is known,
    `unknown` for the rest."""
    return Environment(
        python=python or "unknown",
        torch=torch or "unknown",
        platform=platform or "unknown",
        device=device or "unknown",
        backend=backend or "unknown",
    )


def assemble_report(
    *,
    target: Target,
    environment: Environment,
    summary: Summary,
    command: str = "",
    started_at: str = "",
    t0: float | None = None,
    seed: int | None = None,
    exit_code: int | None = None,
    script_error: str | None = None,
    stopped: str | None = None,
    **sections: Any,
) -> Report:
    """A report of `target` from its sections (`graph_breaks`, `notes`, `source`...: `Report` fields).

    The run header: `command` and `started_at` as given, the wall time since `t0` (None: not timed,
    0 s), the seed set before each phase, and for a script its `exit_code`, `script_error` and why it
    `stopped`.
    """
    return Report(
        target=target,
        environment=environment,
        run=RunInfo(
            command=command,
            started_at=started_at,
            duration_s=elapsed_s(t0) if t0 is not None else 0.0,
            tool_version=__version__,
            seed=seed,
            exit_code=exit_code,
            script_error=script_error,
            stopped=stopped,
        ),
        summary=summary,
        **sections,
    )
