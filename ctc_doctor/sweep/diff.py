"""`ctc-doctor sweep diff`: what changed between two sweeps, per target and for the fleet.

Targets match by their manifest line. Within a target, break sites match like `ctc-doctor diff`:
on (gb type, file, line, module paths), then on (gb type, file, function, module paths) so a site
whose line moved is the same site. Recompile causes match on (kind, source, dim). A regression: a
target gained a break site or a recompile cause, went from clean to anything else, or stopped
reaching a verdict (failed, error, timeout). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..reports.diff import pair_up
from .models import SweepCause, SweepSite, SweepSummary, SweepTarget

_NO_VERDICT = ("failed", "error", "timeout")


def _exact(site: SweepSite) -> tuple[object, ...]:
    return (site.gb_type, site.file, site.line, tuple(site.module_paths))


def _loose(site: SweepSite) -> tuple[object, ...]:
    return (site.gb_type, site.file, site.function, tuple(site.module_paths))


def _cause_key(cause: SweepCause) -> tuple[object, ...]:
    return (cause.kind, cause.source, cause.dim)


def site_text(site: SweepSite) -> str:
    where = ", ".join(site.module_paths) or "—"
    return f"{site.gb_id + ' ' if site.gb_id else ''}{site.gb_type} at {site.file}:{site.line} ({where})"


@dataclass
class TargetChange:
    target: str
    status: tuple[str, str]
    new_sites: list[SweepSite] = field(default_factory=list)
    fixed_sites: list[SweepSite] = field(default_factory=list)
    new_causes: list[SweepCause] = field(default_factory=list)
    gone_causes: list[SweepCause] = field(default_factory=list)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """graph_count, break sites, recompile_count before and after, where they differ."""
    regressions: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.status[0] != self.status[1] or self.new_sites or self.fixed_sites or self.new_causes or self.gone_causes or self.counts
        )


@dataclass
class SweepDiff:
    changes: list[TargetChange] = field(default_factory=list)
    """Targets in both sweeps that changed, in the later manifest's order."""
    unchanged: int = 0
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def regressions(self) -> list[str]:
        return [f"{c.target}: {r}" for c in self.changes for r in c.regressions]


def _compare(b: SweepTarget, a: SweepTarget) -> TargetChange:
    change = TargetChange(a.target, (b.status, a.status))
    comparable = b.status not in (*_NO_VERDICT, "skipped") and a.status not in (*_NO_VERDICT, "skipped")
    if comparable:
        _, change.fixed_sites, change.new_sites = pair_up(b.break_sites, a.break_sites, _exact, _loose)
        after = {_cause_key(c): c for c in a.recompile_causes}
        for cause in b.recompile_causes:
            if after.pop(_cause_key(cause), None) is None:
                change.gone_causes.append(cause)
        change.new_causes = list(after.values())
        for name, before_n, after_n in (
            ("graphs", b.graph_count, a.graph_count),
            ("break sites", len(b.break_sites), len(a.break_sites)),
            ("recompiles", b.recompile_count, a.recompile_count),
        ):
            if before_n != after_n:
                change.counts[name] = (before_n, after_n)
    change.regressions += [f"new break site {site_text(s)}" for s in change.new_sites]
    change.regressions += [f"new recompile cause: {c.summary} ({c.recompiles} recompile(s))" for c in change.new_causes]
    if b.status == "clean" and a.status != "clean":
        change.regressions.append(f"was clean, now {a.status}" + (f": {a.reason}" if a.reason else ""))
    elif a.status in _NO_VERDICT and b.status not in _NO_VERDICT:
        change.regressions.append(f"{b.status} -> {a.status}" + (f": {a.reason}" if a.reason else ""))
    return change


def diff_sweeps(before: SweepSummary, after: SweepSummary) -> SweepDiff:
    out = SweepDiff()
    if before.manifest_digest != after.manifest_digest:
        out.notes.append("the manifests differ: targets only in one sweep are listed as added or removed")
    if before.environment and after.environment:
        b, a = before.environment, after.environment
        if (b.torch, b.device, b.backend) != (a.torch, a.device, a.backend):
            out.notes.append(
                f"environments differ: torch {b.torch} on {b.device} ({b.backend}) vs torch {a.torch} on {a.device} ({a.backend})"
            )
    for summary, name in ((before, "before"), (after, "after")):
        if summary.shards and any("missing" in n for n in summary.notes):
            out.notes.append(f"the {name} sweep is missing shards: its absent targets count as removed or added")
    rows_before = {r.target: r for r in before.targets}
    names_after = {r.target for r in after.targets}
    for row in after.targets:
        old = rows_before.get(row.target)
        if old is None:
            out.added.append(row.target)
            continue
        change = _compare(old, row)
        if change.changed:
            out.changes.append(change)
        else:
            out.unchanged += 1
    out.removed = [r.target for r in before.targets if r.target not in names_after]
    for name in ("break_sites", "graph_breaks", "recompiles"):
        out.totals[name] = (getattr(before.totals, name), getattr(after.totals, name))
    for status in sorted({*before.totals.statuses, *after.totals.statuses}):
        out.totals[status] = (before.totals.statuses.get(status, 0), after.totals.statuses.get(status, 0))
    return out


def render_sweep_diff(d: SweepDiff) -> str:
    """Plain text for a terminal or CI log: per target, then the fleet's totals and the regressions."""
    lines = []
    for c in d.changes:
        status = c.status[1] if c.status[0] == c.status[1] else f"{c.status[0]} -> {c.status[1]}"
        lines.append(f"{c.target}: {status}")
        lines += [f"  new    {site_text(s)}" for s in c.new_sites]
        lines += [f"  fixed  {site_text(s)}" for s in c.fixed_sites]
        lines += [f"  new    recompile cause: {x.summary} ({x.recompiles})" for x in c.new_causes]
        lines += [f"  gone   recompile cause: {x.summary} ({x.recompiles})" for x in c.gone_causes]
        lines += [f"  {name}: {b} -> {a}" for name, (b, a) in c.counts.items()]
    lines += [f"added:   {t}" for t in d.added]
    lines += [f"removed: {t}" for t in d.removed]
    lines.append(f"targets: {len(d.changes)} changed, {d.unchanged} unchanged, {len(d.added)} added, {len(d.removed)} removed")
    totals = [f"{name} {b} -> {a}" for name, (b, a) in d.totals.items() if b != a]
    lines.append("fleet: " + (", ".join(totals) if totals else "no change"))
    lines += [f"note: {n}" for n in d.notes]
    regressions = d.regressions
    if regressions:
        lines.append(f"REGRESSIONS ({len(regressions)}):")
        lines += [f"  - {r}" for r in regressions]
    else:
        lines.append("no regressions")
    return "\n".join(lines) + "\n"
