"""Compare two reports: which break sites were fixed, which are new, what changed in the counts.

Break sites match as the same site across runs (`GraphBreakSite.key`): on (gb_type, file, line) of
the user's frame plus module paths; a site whose line moved (the fix edited the file above it)
matches on (gb_type, file, function, module paths) in a second pass. Files compare by their last two
path components, so reports from two checkouts or machines still match.
Recompiles match on (function, file, failed-guard kinds, module paths); recompile causes on (guard kind,
source, dim), when both reports have them (schema 1.6+). Benchmark arms of the same name
are compared (compile time, latency, speedup) but never count as regressions. No torch import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ReportError
from .models import GraphBreakSite, Recompile, RecompileCause, Report, file_key

_VERDICT_RANK = {"clean": 0, "recompiles": 1, "graph_breaks": 2, "graph_breaks_and_recompiles": 3, "failed": 4}
_COUNTS = ("graph_count", "graph_break_count", "unique_break_sites", "recompile_count", "frames_skipped")


T = TypeVar("T")


def pair_up(
    before: list[T], after: list[T], exact: Callable[[T], Hashable], loose: Callable[[T], Hashable]
) -> tuple[list[tuple[T, T]], list[T], list[T]]:
    """Match sites of two runs: first on `exact` keys (same line), then the rest on `loose` keys (the
    line moved). Returns (pairs, only in before, only in after)."""
    remaining = list(after)
    pairs: list[tuple[T, T]] = []
    unmatched = []
    for site in before:
        match = next((s for s in remaining if exact(s) == exact(site)), None)
        if match is None:
            unmatched.append(site)
            continue
        remaining.remove(match)
        pairs.append((site, match))
    gone = []
    for site in unmatched:
        match = next((s for s in remaining if loose(s) == loose(site)), None)
        if match is None:
            gone.append(site)
        else:
            remaining.remove(match)
            pairs.append((site, match))
    return pairs, gone, remaining


def _recompile_key(rc: Recompile, paths: bool = True) -> tuple[Any, ...]:
    kinds = tuple(sorted({g.kind for g in rc.failed_guards}))
    return (rc.function, file_key(rc.file), kinds, tuple(rc.module_paths) if paths else ())


def _cause_key(cause: RecompileCause) -> tuple[Any, ...]:
    return (cause.kind, cause.source, cause.dim)


@dataclass
class ReportDiff:
    """What changed from `before` to `after`."""

    fixed: list[GraphBreakSite] = field(default_factory=list)
    new: list[GraphBreakSite] = field(default_factory=list)
    unchanged: list[tuple[GraphBreakSite, GraphBreakSite]] = field(default_factory=list)
    recompiles: list[tuple[tuple[Any, ...], int, int]] = field(default_factory=list)
    """(function, file, guard kinds, module paths), count before, count after; only where they differ."""
    causes_fixed: list[RecompileCause] = field(default_factory=list)
    """Recompile causes of `before` that `after` does not have."""
    causes_new: list[RecompileCause] = field(default_factory=list)
    """Recompile causes only `after` has."""
    causes_changed: list[tuple[RecompileCause, RecompileCause]] = field(default_factory=list)
    """Causes in both whose recompile counts differ (before, after)."""
    counts: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Summary numbers before and after (compile time included)."""
    verdict: tuple[str, str] = ("", "")
    bisect: tuple[list[str], list[str]] | None = None
    """Smallest failing modules before and after, when both reports bisected."""
    benchmark: dict[str, dict[str, tuple[float | None, float | None]]] = field(default_factory=dict)
    """Per arm present in both benchmarks: cold compile s, latency ms (median) and speedup, before and after.
    Timings are reported, never counted as regressions (they are noisy across machines and runs)."""
    regressions: list[str] = field(default_factory=list)
    """Everything that got worse, one line each."""
    notes: list[str] = field(default_factory=list)


def diff_reports(before: Report, after: Report) -> ReportDiff:
    """Compare two reports of the same schema major version."""
    major_b, major_a = before.schema_version.split(".")[0], after.schema_version.split(".")[0]
    if major_b != major_a:
        raise ReportError(
            f"cannot diff schema {before.schema_version} against {after.schema_version}: field names differ between major versions"
        )
    out = ReportDiff()
    if before.schema_version != after.schema_version:
        out.notes.append(
            f"schema versions differ ({before.schema_version} vs {after.schema_version}); fields new in the later one are ignored"
        )
    if before.target.name != after.target.name:
        out.notes.append(f"different workloads: {before.target.name} vs {after.target.name}")
    if (before.environment.torch, before.environment.backend) != (after.environment.torch, after.environment.backend):
        out.notes.append(
            f"environments differ: torch {before.environment.torch}/{before.environment.backend} vs "
            f"torch {after.environment.torch}/{after.environment.backend}"
        )

    # reports read from logs carry no module paths: match on source locations alone then
    paths = before.source is None and after.source is None
    if before.source is not None or after.source is not None:
        out.notes.append("a report read from logs has no module paths: sites and recompiles match on source location only")
    out.unchanged, out.fixed, out.new = pair_up(
        before.graph_breaks,
        after.graph_breaks,
        lambda s: s.key(across_runs=True, module_paths=paths),
        lambda s: s.key(across_runs=True, line_moved=True, module_paths=paths),
    )

    rb = Counter(_recompile_key(r, paths) for r in before.recompiles)
    ra = Counter(_recompile_key(r, paths) for r in after.recompiles)
    for key in sorted(set(rb) | set(ra), key=str):
        if rb[key] != ra[key]:
            out.recompiles.append((key, rb[key], ra[key]))

    if before.recompile_causes or after.recompile_causes:
        if (before.recompiles and not before.recompile_causes) or (after.recompiles and not after.recompile_causes):
            out.notes.append("one report has no recompile causes (schema < 1.6): causes are not compared")
        else:
            causes_after = {_cause_key(c): c for c in after.recompile_causes}
            for cause in before.recompile_causes:
                other = causes_after.pop(_cause_key(cause), None)
                if other is None:
                    out.causes_fixed.append(cause)
                elif len(other.recompiles) != len(cause.recompiles):
                    out.causes_changed.append((cause, other))
            out.causes_new = list(causes_after.values())

    for name in (*_COUNTS, "compile_time_s"):
        out.counts[name] = (getattr(before.summary, name), getattr(after.summary, name))
    out.verdict = (before.summary.verdict, after.summary.verdict)
    if before.bisect is not None and after.bisect is not None:
        if before.bisect.untried or after.bisect.untried:  # what one never tried would read as fixed or new
            out.notes.append("bisections not compared: one stopped with modules untried")
        else:
            out.bisect = (before.bisect.smallest_failing, after.bisect.smallest_failing)
    if before.benchmark is not None and after.benchmark is not None:
        arms_after = {a.name: a for a in after.benchmark.arms}
        for arm in before.benchmark.arms:
            other_arm = arms_after.get(arm.name)
            if other_arm is None:
                continue
            out.benchmark[arm.name] = {
                "compile_time_s": (arm.compile_time_s, other_arm.compile_time_s),
                "latency_ms": (
                    arm.latency_ms.median if arm.latency_ms else None,
                    other_arm.latency_ms.median if other_arm.latency_ms else None,
                ),
                "speedup_vs_eager": (arm.speedup_vs_eager, other_arm.speedup_vs_eager),
            }

    if not (before.summary.analysis_run and after.summary.analysis_run):
        out.notes.append("one report is bisection only: its counts were not measured and are not compared")
    else:
        for site in out.new:
            f = site.place()
            out.regressions.append(f"new break site {site.gb_type} at {file_key(f.file)}:{f.line}")
        for name in _COUNTS:
            b, a = out.counts[name]
            if a > b:
                out.regressions.append(f"{name} went up: {b} -> {a}")
        for cause in out.causes_new:
            out.regressions.append(f"new recompile cause: {cause.summary} ({len(cause.recompiles)} recompile(s))")
        for (function, file, kinds, _), b, a in out.recompiles:
            if a > b:
                out.regressions.append(f"more recompiles of {function} ({file}) on {', '.join(kinds) or '?'}: {b} -> {a}")
    if _VERDICT_RANK[out.verdict[1]] > _VERDICT_RANK[out.verdict[0]]:
        out.regressions.append(f"verdict got worse: {out.verdict[0]} -> {out.verdict[1]}")
    if out.bisect is not None:
        added = [p for p in out.bisect[1] if p not in out.bisect[0]]
        if added:
            out.regressions.append("new smallest failing module(s): " + ", ".join(p or "(root)" for p in added))
    return out


def render_diff_text(d: ReportDiff) -> str:
    """Plain text, for the terminal and CI logs."""
    lines = [f"verdict: {d.verdict[0]} -> {d.verdict[1]}"]
    for name, (b, a) in d.counts.items():
        if name == "compile_time_s":
            lines.append(f"  {name}: {b:.2f} -> {a:.2f}")
        else:
            delta = a - b
            lines.append(f"  {name}: {b} -> {a}" + (f" ({delta:+})" if delta else ""))
    lines.append(f"break sites: {len(d.fixed)} fixed, {len(d.new)} new, {len(d.unchanged)} unchanged")
    for site in d.fixed:
        f = site.place()
        lines.append(f"  fixed  {site.gb_type} at {file_key(f.file)}:{f.line} ({', '.join(site.module_paths) or '—'})")
    for site in d.new:
        f = site.place()
        lines.append(f"  new    {site.gb_type} at {file_key(f.file)}:{f.line} ({', '.join(site.module_paths) or '—'})")
    for before, after in d.unchanged:
        f = after.place()
        extra = f" (occurrences {before.occurrences} -> {after.occurrences})" if before.occurrences != after.occurrences else ""
        lines.append(f"  same   {after.gb_type} at {file_key(f.file)}:{f.line}{extra}")
    if d.causes_fixed or d.causes_new or d.causes_changed:
        lines.append(f"recompile causes: {len(d.causes_fixed)} gone, {len(d.causes_new)} new, {len(d.causes_changed)} changed")
        for cause in d.causes_fixed:
            lines.append(f"  gone   {cause.summary} ({len(cause.recompiles)} recompile(s))")
        for cause in d.causes_new:
            lines.append(f"  new    {cause.summary} ({len(cause.recompiles)} recompile(s))")
        for b_cause, a_cause in d.causes_changed:
            lines.append(f"  same   {a_cause.summary}: recompiles {len(b_cause.recompiles)} -> {len(a_cause.recompiles)}")
    for (function, file, kinds, _), b, a in d.recompiles:
        lines.append(f"recompiles of {function} ({file}) on {', '.join(kinds) or '?'}: {b} -> {a}")
    for arm, values in d.benchmark.items():
        parts = []
        for name, unit in (("compile_time_s", " s"), ("latency_ms", " ms"), ("speedup_vs_eager", "x")):
            was, now = values[name]
            if was is not None or now is not None:
                parts.append(f"{name} {'—' if was is None else f'{was:.3g}'} -> {'—' if now is None else f'{now:.3g}'}{unit}")
        if parts:
            lines.append(f"benchmark {arm}: " + ", ".join(parts))
    if d.bisect is not None:
        lines.append(f"smallest failing: {', '.join(d.bisect[0]) or 'none'} -> {', '.join(d.bisect[1]) or 'none'}")
    for note in d.notes:
        lines.append(f"note: {note}")
    if d.regressions:
        lines.append(f"REGRESSIONS ({len(d.regressions)}):")
        lines.extend(f"  - {r}" for r in d.regressions)
    else:
        lines.append("no regressions")
    return "\n".join(lines) + "\n"
