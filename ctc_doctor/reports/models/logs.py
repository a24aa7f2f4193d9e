"""Logs read offline: parse statistics, sources, and the ranks of one job and how they diverge."""

from __future__ import annotations

from pydantic import Field

from .base import DivergenceKind, LogKind, _Model


class ParseStats(_Model):
    """How the log files read (offline reports): what was used, ignored, unknown or unreadable."""

    lines: int = 0
    """Lines read."""
    records: int = 0
    """torch log records recognised (a trace event, or one TORCH_LOGS message)."""
    used: int = 0
    """Records that went into this report."""
    ignored: int = 0
    """Known records the report does not use (chromium events, tensor descriptions, bytecode dumps...)."""
    unknown: int = 0
    """Records of a kind this ctc-doctor does not know (a newer torch); `--strict` fails on them."""
    unknown_kinds: dict[str, int] = Field(default_factory=dict)
    """Unknown record kind -> count."""
    unreadable: int = 0
    """Records or lines that could not be read; `--strict` fails on them."""
    problems: dict[str, int] = Field(default_factory=dict)
    """Unreadable by cause: `bad JSON`, `payload without a record`, `payload checksum mismatch`, `file cut off mid-record`..."""
    examples: list[str] = Field(default_factory=list)
    """The first unreadable or unknown records as `file:line: what`."""
    foreign_lines: int = 0
    """Lines that are not torch log records, e.g. the program's own output in a captured stderr."""
    payloads_truncated: int = 0
    """Payloads longer than the size cap, kept only in part (the count is still right)."""
    truncated_files: list[str] = Field(default_factory=list)
    """Files that end in the middle of a record (a job killed while writing)."""


class LogSource(_Model):
    """Where an offline report came from (`ctc-doctor logs`)."""

    kind: LogKind
    """`torch_trace` (TORCH_TRACE structured logs) or `torch_logs` (TORCH_LOGS text)."""
    paths: list[str] = Field(default_factory=list)
    """The paths as given."""
    files: list[str] = Field(default_factory=list)
    """Every file read."""
    ranks: list[int] = Field(default_factory=list)
    """Distributed ranks found (empty for a single-process job)."""
    torch: str | None = None
    """torch version the logs were written by, when they say."""


class RankSummary(_Model):
    """What one rank of a distributed job compiled (offline reports of multi-rank logs)."""

    rank: int
    """The rank."""
    files: list[str] = Field(default_factory=list)
    """Its log files."""
    compiles: int = 0
    """Frame compiles (compilation_metrics records)."""
    graphs: int = 0
    """Graphs compiled."""
    graph_break_count: int = 0
    """Graph-break events."""
    break_sites: list[str] = Field(default_factory=list)
    """Ids of the break sites it hit."""
    recompile_count: int = 0
    """Recompilations."""
    recompiles: list[str] = Field(default_factory=list)
    """Ids of its recompiles."""
    compile_time_s: float = 0.0
    """Total frame compile time, seconds."""


class RankDivergence(_Model):
    """Ranks that compiled differently from the others: collectives can then hang or time out."""

    kind: DivergenceKind
    """root_cause (the first compile where ranks differ, and what differed), break_sites, recompiles or compiles."""
    ranks: list[int]
    """The ranks that differ from the majority (or from rank 0 on a tie)."""
    message: str
    """What differs, readable on its own."""
    items: list[str] = Field(default_factory=list)
    """Break-site or recompile ids involved."""
