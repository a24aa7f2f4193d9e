"""`ingest(paths) -> Report`: the live analyzer's report, read from logs of a run you cannot repeat.

Torch-free. Takes TORCH_TRACE directories (every rank) or files, and TORCH_LOGS text captures, in any
mix: with a trace present, text logs add only their perf hints (the trace has none). Break sites are
deduplicated and ranked by `findings` exactly as in a live analysis; recompiles carry classified
failed guards; compile metrics and guard counts come per compile id. Module paths are filled only
from what the logs say: torch 2.13's logs name no nn.Module paths, so they stay empty (a note says
so) rather than being guessed. Multi-rank logs get per-rank counts and a list of diverging ranks.
The report is assembled from these sections, and its summary counted, by `reports.models`
(`assemble_report`, `summarize`).
"""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ...errors import LogsInvalid
from ...reports import models as rm
from ...reports.compile_id import qualified
from ...reports.ranks import divergence as rank_divergence
from ...reports.ranks import root_cause
from ..readers.assembly import derive
from ..readers.expected import mark_one_offs
from ..readers.findings import (
    BreakRecord,
    break_record,
    compile_metric,
    group_break_sites,
    guard_set,
    is_skipped_frame,
)
from ..readers.logfiles import (
    ParseCounter,
    TextMessage,
    TraceRecord,
    classify_paths,
    read_text_log,
    read_trace,
)
from ..readers.parsing import classify_guard, split_recompile_reasons
from ..readers.sources import function_name
from ..readers.wrappers import ddp_splits

# Frame failures that are Dynamo giving up on a frame (it ran eager), not a crash of the job.
_SKIP_FAILS = frozenset({"Unsupported", "SkipFrame", "SkipCodeRecursiveException", "RecompileLimitExceeded"})
_RECOMPILE_HEADER = re.compile(r"^Recompiling function (?P<func>\S+) in (?P<file>.+):(?P<line>\d+)\s*$")


@dataclass
class _RankState:
    files: set[str] = field(default_factory=set)
    compiles: int = 0
    graphs: int = 0
    first_graphs: int = 0
    breaks: int = 0
    compile_time_s: float = 0.0


@dataclass
class _Recompile:
    rank: int | None
    compile_id: str
    reasons: list[str]
    function: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass
class _Ingest:
    counter: ParseCounter = field(default_factory=ParseCounter)
    ranks: dict[int | None, _RankState] = field(default_factory=lambda: defaultdict(_RankState))
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    backward: dict[str, dict[str, Any]] = field(default_factory=dict)
    """bwd_compilation_metrics by compile id: the backward graphs' compiles."""
    graph_ids: list[str] = field(default_factory=list)
    recompiles: list[_Recompile] = field(default_factory=list)
    guards: list[rm.GuardSet] = field(default_factory=list)
    perf_hints: list[rm.PerfHint] = field(default_factory=list)
    ddp_children: list[tuple[str | None, str]] = field(default_factory=list)
    """DDPOptimizer's subgraphs: (compile id, submodule name)."""
    skipped: set[str] = field(default_factory=set)
    ops: dict[str, int] = field(default_factory=dict)
    torch_version: str | None = None
    python_version: str | None = None
    cuda: bool = False
    inductor: bool = False
    notes: list[str] = field(default_factory=list)
    limit_warnings: int = 0


def ingest(paths: list[str], *, keep_guard_text: bool = False, command: str = "") -> rm.Report:
    """Read the logs and build the report. Raises `LogsInvalid` when nothing in them is a torch log."""
    started_at = rm.started_now()
    t0 = time.perf_counter()
    inputs = classify_paths(paths)
    state = _Ingest()

    def records() -> Iterator[BreakRecord]:
        for path in inputs.trace_files:
            for rec in read_trace(path, state.counter, keep_guard_text=keep_guard_text):
                found = _trace_record(state, rec)
                if found is not None:
                    yield found
        for path in inputs.text_files:
            for msg in read_text_log(path, state.counter):
                found = _text_message(state, msg, hints_only=bool(inputs.trace_files))
                if found is not None:
                    yield found

    sites = group_break_sites(records(), skipped_compiles=state.skipped, ops_by_compile=state.ops)
    if state.counter.records == 0:
        raise LogsInvalid(f"{', '.join(paths)}: no torch log records found")
    kind: rm.LogKind = "torch_trace" if inputs.trace_files else "torch_logs"
    report = _report(state, sites, inputs.trace_files + inputs.text_files, paths, kind, command, started_at, t0)
    mark_one_offs(report)
    try:
        from ..phases.suggest import suggest

        report.suggestions = suggest(report, None)  # rules on gb_types and guards; no model needed
    except Exception as exc:  # noqa: BLE001 - the findings still stand
        report.errors.append(rm.ErrorRecord(phase="suggest", type=type(exc).__name__, message=str(exc)[:500]))
    derive(report)
    return report


def _trace_record(state: _Ingest, rec: TraceRecord) -> BreakRecord | None:
    rank = rec.rank
    cid = qualified(rec.compile_id, rank)
    rs = state.ranks[rank]
    rs.files.add(rec.file)
    if rec.kind == "artifact:dynamo_graph_break_reason" and rec.payload:
        found = break_record(rec.payload, cid, rank=rank)
        if found is None:
            state.counter.problem(rec.file, rec.line, "graph-break record without a location")
            return None
        state.counter.used += 1
        rs.breaks += 1
        return found
    state.counter.used += 1
    if rec.kind == "bwd_compilation_metrics" and cid is not None:
        state.backward[cid] = rec.data
        rs.compile_time_s += float(rec.data.get("duration_us") or 0) / 1e6
        return None
    if rec.kind == "compilation_metrics" and cid is not None:
        m = rec.data
        state.metrics[cid] = m
        rs.compiles += 1
        rs.compile_time_s += float(m.get("entire_frame_compile_time_s") or 0.0)
        if is_skipped_frame(m):
            state.skipped.add(cid)
        if isinstance(m.get("graph_op_count"), int):
            state.ops[cid] = m["graph_op_count"]
        state.torch_version = state.torch_version or m.get("pytorch_version")
        state.python_version = state.python_version or (str(m.get("python_version") or "").split(" ")[0] or None)
        state.cuda = state.cuda or bool(m.get("cuda_version"))
        state.inductor = state.inductor or m.get("inductor_compile_time_s") is not None
    elif rec.kind == "artifact:recompile_reasons" and cid is not None:
        state.recompiles.append(_Recompile(rank, cid, split_recompile_reasons(rec.payload or "")))
    elif rec.kind == "dynamo_output_graph" and cid is not None:
        state.graph_ids.append(cid)
        rs.graphs += 1
        if (rec.compile_id or "").endswith("/0"):
            rs.first_graphs += 1
    elif rec.kind == "dynamo_cpp_guards_str" and cid is not None:
        state.guards.append(guard_set(cid, rec.payload))
    elif rec.kind == "optimize_ddp_split_child":
        state.ddp_children.append((cid, str(rec.data.get("name"))))
    elif rec.kind == "artifact:torch_version" and rec.payload:
        version = re.search(r'"pytorch_version":\s*"([^"]+)"', rec.payload)
        state.torch_version = state.torch_version or (version.group(1) if version else None)
    return None


def _text_message(state: _Ingest, msg: TextMessage, *, hints_only: bool) -> BreakRecord | None:
    counter = state.counter
    rank = msg.rank
    cid = qualified(msg.compile_id, rank)
    artifact = msg.artifact
    if artifact == "perf_hints":
        counter.used += 1
        state.perf_hints.append(rm.PerfHint(message=msg.text.strip(), compile_id=cid, logger=f"{msg.logger}.__perf_hints"))
        return None
    if hints_only or artifact not in ("graph_breaks", "recompiles", "recompiles_verbose", None):
        counter.ignored += 1
        return None
    state.ranks[rank].files.add(msg.file)
    if artifact == "graph_breaks":
        found = break_record(msg.text, cid, rank=rank)
        if found is None or found.parsed.file is None:
            counter.problem(msg.file, msg.line, "graph-break message without a location")
            return None
        counter.used += 1
        state.ranks[rank].breaks += 1
        return found
    if artifact in ("recompiles", "recompiles_verbose"):
        head, _, rest = msg.text.partition("\n")
        m = _RECOMPILE_HEADER.match(head.strip())
        if m is None:
            if artifact == "recompiles":
                counter.problem(msg.file, msg.line, "recompile message without its header")
            else:
                counter.ignored += 1
            return None
        reasons: list[str] = []
        for line in rest.splitlines():
            stripped = line.strip()
            body = stripped[2:]
            if stripped.startswith("- ") and reasons and (body.startswith("User stack trace:") or body[:1].isspace()):
                reasons[-1] += "\n" + body  # the guard's user stack, one "- " line at a time
            elif stripped.startswith("- "):
                reasons.append(body)
            elif reasons and stripped and not stripped.startswith("triggered by"):
                reasons[-1] += "\n" + stripped
        counter.used += 1
        state.recompiles.append(_Recompile(rank, cid or "?", reasons, m.group("func"), m.group("file"), int(m.group("line"))))
        return None
    # a plain torch log line (no artifact): keep the recompile-limit warnings, they explain eager frames
    if "recompile_limit" in msg.text or "cache_size_limit" in msg.text:
        counter.used += 1
        state.limit_warnings += 1
        if state.limit_warnings == 1:
            state.notes.append(f"torch hit the recompile limit: {msg.text.strip().splitlines()[0][:300]}")
    else:
        counter.ignored += 1
    return None


def _recompile_entries(state: _Ingest) -> list[rm.Recompile]:
    out = []
    for i, r in enumerate(state.recompiles, 1):
        m = state.metrics.get(r.compile_id, {})
        out.append(
            rm.Recompile(
                id=f"R{i}",
                function=function_name(r.function or str(m.get("co_name") or "?")),
                file=r.file or str(m.get("co_filename") or "?"),
                line=r.line if r.line is not None else int(m.get("co_firstlineno") or 0),
                compile_id=r.compile_id,
                failed_guards=[rm.FailedGuard(**classify_guard(reason)) for reason in r.reasons],
                rank=r.rank,
            )
        )
    return out


class _Findings(TypedDict):
    """The sections the summary counts: passed as they are to `summarize` and to the report."""

    graph_breaks: list[rm.GraphBreakSite]
    recompiles: list[rm.Recompile]
    graphs: list[rm.Graph]
    compile_metrics: list[rm.CompileMetric]


def _report(
    state: _Ingest,
    sites: list[rm.GraphBreakSite],
    files: list[str],
    paths: list[str],
    kind: rm.LogKind,
    command: str,
    started_at: str,
    t0: float,
) -> rm.Report:
    recompiles = _recompile_entries(state)
    real_ranks = sorted(r for r in state.ranks if r is not None)
    rank_rows = []
    if real_ranks:
        for r in real_ranks:
            rs = state.ranks[r]
            rank_rows.append(
                rm.RankSummary(
                    rank=r,
                    files=sorted(rs.files),
                    compiles=rs.compiles,
                    graphs=rs.graphs,
                    graph_break_count=rs.breaks,
                    break_sites=[s.id for s in sites if r in s.ranks],
                    recompile_count=sum(1 for rc in recompiles if rc.rank == r),
                    recompiles=[rc.id for rc in recompiles if rc.rank == r],
                    compile_time_s=round(rs.compile_time_s, 4),
                )
            )
    divergence = rank_divergence(rank_rows, sites, recompiles)

    graphs = []
    for cid in state.graph_ids:
        m = state.metrics.get(cid, {})
        graphs.append(
            rm.Graph(
                compile_id=cid,
                op_count=int(m.get("graph_op_count") or 0),
                node_count=int(m.get("graph_node_count") or 0),
                input_count=int(m.get("graph_input_count") or 0),
            )
        )
    compile_metrics = [compile_metric(cid, m, state.backward.get(cid)) for cid, m in state.metrics.items()]
    errors = [
        rm.ErrorRecord(phase="compile", type=cm.fail_type, message=f"{cm.compile_id}: {cm.fail_reason or cm.fail_type}")
        for cm in compile_metrics
        if cm.fail_type and cm.fail_type not in _SKIP_FAILS
    ]

    notes = list(state.notes)
    if kind == "torch_trace":
        notes.append(
            "Read from TORCH_TRACE logs: module paths are left empty (the trace names no nn.Module paths); "
            "`graph_count` counts the graphs of first compiles (x/0), as logs do not mark calls."
        )
        if not state.perf_hints:
            notes.append("TORCH_TRACE carries no perf hints: add a TORCH_LOGS=perf_hints capture to the command to see them.")
    else:
        notes.append(
            "Read from TORCH_LOGS text: it has no compile metrics or graph counts (0 here) and no module paths; "
            "repeats of a break are counted but their stacks were suppressed by torch. TORCH_TRACE has more."
        )
    if divergence:
        notes.append(f"{len(divergence)} divergence(s) between ranks: ranks that compile differently can hang collectives.")

    found = _Findings(graph_breaks=sites, recompiles=recompiles, graphs=graphs, compile_metrics=compile_metrics)
    label = os.path.basename(os.path.normpath(paths[0])) if paths else "logs"
    report = rm.assemble_report(
        target=rm.Target(
            kind="logs",
            spec=" ".join(paths),
            name=label + (f" (+{len(paths) - 1})" if len(paths) > 1 else ""),
            model_class="unknown (logs)",
            parameters=0,
            modules=0,
            calls=0,
        ),
        environment=rm.unknown_environment(
            python=state.python_version,
            torch=state.torch_version,
            device="cuda" if state.cuda else None,
            backend="inductor" if state.inductor else None,
        ),
        summary=rm.summarize(
            **found,
            graph_count=max((rs.first_graphs for rs in state.ranks.values()), default=0),  # x/0 compiles
            frames_skipped=len(state.skipped),
            failed=bool(errors),
        ),
        command=command,
        started_at=started_at,
        t0=t0,
        **found,
        perf_hints=state.perf_hints,
        ddp_splits=ddp_splits(state.ddp_children, []),
        guards=state.guards,
        notes=notes,
        errors=errors,
        source=rm.LogSource(kind=kind, paths=list(paths), files=list(files), ranks=real_ranks, torch=state.torch_version),
        parse_stats=state.counter.stats(),
        ranks=rank_rows,
        divergence=divergence,
    )
    cause = root_cause(report)
    if cause is not None:
        report.divergence.insert(0, cause)
    return report
