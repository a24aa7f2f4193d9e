"""Report entries from raw compile events, shared by the live analysis and offline log ingestion.

Torch-free. Both paths reduce what torch wrote (structured-trace events in-process, or the same
events and TORCH_LOGS text read back from files) to `BreakRecord`s and compilation-metrics dicts;
the functions here deduplicate, rank and describe them the same way, so a live report and an
offline report of the same workload agree site for site.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...reports import models as rm
from .compile_time import add_costs
from .gb_registry import registry_hints, registry_ids_for
from .parsing import ParsedBreak, parse_break_text
from .sources import RawFrame, classify_file, function_name, is_tool_frame, source_line
from .text import guard_line_count
from .wrappers import mark_wrapper_breaks

UNKNOWN_FUNCTION = "?"
"""Function name of a frame known only by file:line (a TORCH_LOGS break whose stack torch suppressed)."""


@dataclass
class BreakRecord:
    """One graph-break event: the parsed message and the stack down to the break (outermost first)."""

    compile_id: str | None
    parsed: ParsedBreak
    gb_type: str
    stack: list[RawFrame]
    rank: int | None = None


def break_record(
    payload: str,
    compile_id: str | None,
    *,
    outer: list[RawFrame] | None = None,
    exc_gb_type: str | None = None,
    exc_stack: list[RawFrame] | None = None,
    rank: int | None = None,
) -> BreakRecord | None:
    """Parse a `dynamo_graph_break_reason` payload (or TORCH_LOGS graph_breaks message) into a record.

    `exc_stack` is the live exception's real_stack (the frames Dynamo was tracing); `outer` is the
    compiled frame's call stack from `dynamo_start`, whose last frame `exc_stack` starts with. Without
    them the stack is the payload's "User code traceback". None when the text names no location.
    """
    parsed = parse_break_text(payload)
    stack = (outer or [])[:-1] + exc_stack if exc_stack else list(parsed.frames)
    if parsed.file is not None and parsed.line is not None and (not stack or stack[-1][:2] != (parsed.file, parsed.line)):
        stack = stack + [(parsed.file, parsed.line, stack[-1][2] if stack else UNKNOWN_FUNCTION, None)]
    if not stack:
        return None
    return BreakRecord(compile_id, parsed, exc_gb_type or parsed.gb_type, stack, rank)


def frame(file: str, line: int, function: str, code: str | None = None) -> rm.Frame:
    return rm.Frame(file=file, line=line, function=function_name(function), code=code or source_line(file, line))


def below_the_tool(stack: list[RawFrame]) -> list[RawFrame]:
    """Drop the frames that called the model: the CLI, click, pytest... down to ctc-doctor's own call
    (and the runpy frames with which `ctc-doctor run` starts a script)."""
    last = -1
    for i, f in enumerate(stack):
        own, library = classify_file(f[0])
        if not own and library == "ctc_doctor":
            last = i
    while last >= 0 and last + 1 < len(stack) and _is_runpy(stack[last + 1][0]):
        last += 1
    return stack[last + 1 :]


def _is_runpy(path: str) -> bool:
    return path == "<frozen runpy>" or os.path.basename(path) == "runpy.py"


def group_break_sites(
    records: Iterable[BreakRecord],
    *,
    skipped_compiles: set[str] | frozenset[str] = frozenset(),
    ops_by_compile: dict[str, int] | None = None,
    attribute: Callable[[list[tuple[str, int]]], Iterable[str]] | None = None,
    class_name: Callable[[list[str]], str | None] | None = None,
    path_order: Callable[[str], Any] | None = None,
) -> list[rm.GraphBreakSite]:
    """Deduplicate break records into ranked sites: same gb_type, same innermost frame, same own frame.

    A record known only by file:line (its stack suppressed as a duplicate) joins the site with the
    same gb_type and location. `attribute(frames)` gives module paths where a model is at hand.
    Records may be a generator: only one representative per site is kept, and `skipped_compiles` and
    `ops_by_compile` are read after the last record (a reader may still be filling them).
    """
    ops_by_compile = ops_by_compile or {}
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    by_location: dict[tuple[str, str, int], tuple[Any, ...]] = {}
    for rec in records:
        inner = rec.stack[-1]
        # the user's own frame is below whatever called the model (a script calling analyze(), a test)
        own = next((f for f in reversed(below_the_tool(rec.stack)) if classify_file(f[0])[0]), None)
        if len(rec.stack) == 1 and inner[2] == UNKNOWN_FUNCTION and (rec.gb_type, inner[0], inner[1]) in by_location:
            key = by_location[(rec.gb_type, inner[0], inner[1])]
        else:
            key = (rec.gb_type, inner[0], inner[1], own[:2] if own else None)
        group = groups.get(key)
        if group is None:
            ids = rec.parsed.registry_ids or registry_ids_for(rec.gb_type)
            group = groups[key] = {
                "record": rec,
                "ids": ids,
                "hints": rec.parsed.hints or (registry_hints(ids[0]) if ids else []),
                "own": own,
                "compile_ids": {},  # insertion-ordered set: a hot site can repeat in thousands of compiles
                "records": 0,
                "paths": set(),
                "ranks": set(),
            }
            by_location.setdefault((rec.gb_type, inner[0], inner[1]), key)
        elif group["record"].stack[-1][2] == UNKNOWN_FUNCTION and inner[2] != UNKNOWN_FUNCTION:
            group["record"] = rec  # a full stack beats a suppressed one
        group["records"] += 1
        if attribute is not None:
            group["paths"].update(attribute([(f[0], f[1]) for f in rec.stack]))
        if rec.rank is not None:
            group["ranks"].add(rec.rank)
        if rec.compile_id is not None:
            group["compile_ids"].setdefault(rec.compile_id, None)

    sites = []
    for group in groups.values():
        rec = group["record"]
        stack = rec.stack
        file, line, func, code = stack[-1]
        own_code, library = classify_file(file)
        visible = [f for f in below_the_tool(stack[:-1]) if not is_tool_frame(f[0])] + [stack[-1]]
        paths = sorted(group["paths"], key=path_order) if path_order else sorted(group["paths"])
        own = group["own"]
        sites.append(
            rm.GraphBreakSite(
                id="",
                gb_type=rec.gb_type,
                registry_ids=group["ids"],
                reason=rec.parsed.reason or rec.gb_type,
                explanation=rec.parsed.explanation,
                hints=group["hints"],
                user_frame=frame(file, line, func, code),
                own_frame=frame(*own) if own and not own_code else None,
                user_stack=[frame(*f) for f in visible],
                module_paths=paths,
                module_class=class_name(paths) if class_name else None,
                occurrences=len(group["compile_ids"]) or group["records"],
                compile_ids=list(group["compile_ids"]),
                own_code=own_code,
                library=library,
                frame_skipped=any(c in skipped_compiles for c in group["compile_ids"]),
                ops_in_split_graphs=sum(ops_by_compile.get(c, 0) for c in group["compile_ids"]),
                ranks=sorted(group["ranks"]),
            )
        )
    mark_wrapper_breaks(sites)
    # the user's and the libraries' sites first, a wrapper's by-design ones last
    sites.sort(key=lambda s: (bool(s.expected), -s.occurrences, -s.ops_in_split_graphs, s.user_frame.file, s.user_frame.line))
    for i, site in enumerate(sites, 1):
        site.id = f"B{i}"
    return sites


def guard_set(compile_id: str, payload: str | None) -> rm.GuardSet:
    """A guards record as the readers keep it: the tree (with --guards), or just its guard count as digits."""
    text = payload or ""
    if text.isdigit():
        return rm.GuardSet(compile_id=compile_id, count=int(text))
    return rm.GuardSet(compile_id=compile_id, count=guard_line_count(text), tree=text)


def is_skipped_frame(metrics: dict[str, Any]) -> bool:
    """Dynamo gave up on the whole frame (it ran fully eager): a failure and no graph."""
    return bool(metrics.get("fail_type")) and not metrics.get("graph_op_count")


def compile_metric(compile_id: str, m: dict[str, Any], backward: dict[str, Any] | None = None) -> rm.CompileMetric:
    """One `compilation_metrics` dict (and its `bwd_compilation_metrics`, when the backward compiled) as a
    report row, with its phases and caches (`readers.compile_time`)."""

    def first_line(value: Any) -> str | None:
        if not value:
            return None
        return str(value).strip().splitlines()[0][:300]

    def number(key: str) -> Any:
        value = m.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    reasons = m.get("restart_reasons")
    metric = rm.CompileMetric(
        compile_id=compile_id,
        function=function_name(str(m.get("co_name"))) if m.get("co_name") else None,
        file=m.get("co_filename") if isinstance(m.get("co_filename"), str) else None,
        line=number("co_firstlineno"),
        duration_s=number("entire_frame_compile_time_s"),
        backend_compile_time_s=number("backend_compile_time_s"),
        op_count=number("graph_op_count"),
        guard_count=number("guard_count"),
        shape_env_guard_count=number("shape_env_guard_count"),
        cache_size=number("cache_size"),
        fail_type=m.get("fail_type") if isinstance(m.get("fail_type"), str) else None,
        fail_reason=first_line(m.get("fail_reason")),
        restart_reasons=[r for r in (first_line(x) for x in (reasons if isinstance(reasons, list) else [])) if r],
        recompile_reason=first_line(m.get("recompile_reason")),
        fail_file=m.get("fail_user_frame_filename") if isinstance(m.get("fail_user_frame_filename"), str) else None,
        fail_line=number("fail_user_frame_lineno"),
    )
    return add_costs(metric, m, backward)
