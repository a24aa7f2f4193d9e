"""`ctc-doctor sweep diff`: what changed between two sweeps, per target and for the fleet.

Targets match by their manifest line. Within a target, break sites match like `ctc-doctor diff`:
on (gb type, file, line, module paths), then on (gb type, file, function, module paths) so a site
whose line moved is the same site. Recompile causes match on (kind, source, dim). A regression: a
target gained a break site or a recompile cause, went from clean to anything else, stopped reaching
a verdict (failed, error, timeout), went from pass to fail (its numerics), or - with benchmarks on
both sides - got slower, compiles longer or uses more memory beyond the noise `Thresholds` allow
(stated in the output). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..reports.diff import pair_up
from .summary import dashboard, passed
from .summary_models import Dashboard, SweepCause, SweepSite, SweepSummary, SweepTarget, TargetBench

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


@dataclass(frozen=True)
class Thresholds:
    """How much a benchmark number may move before it counts: a change inside them is noise."""

    speedup: float = 0.05
    """A speedup drop counts beyond this fraction, or beyond the measured spread when that is wider
    (eager's plus compiled's IQR over median, the larger of the two sweeps')."""
    compile: float = 0.25
    """A cold compile time rise counts beyond this fraction and `compile_s` seconds (compile times are
    measured once: no spread to go by)."""
    compile_s: float = 1.0
    memory: float = 0.10
    """A memory-ratio drop (the compiled model keeps more of eager's peak) counts beyond this fraction."""

    def speedup_limit(self, before: TargetBench, after: TargetBench) -> float:
        return max(self.speedup, before.spread or 0.0, after.spread or 0.0)

    def describe(self) -> str:
        return (
            f"speedup -{self.speedup:.0%} or the measured spread if wider; compile time +{self.compile:.0%} "
            f"and +{self.compile_s:g} s; memory ratio -{self.memory:.0%}"
        )


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
    perf: dict[str, tuple[float, float, bool]] = field(default_factory=dict)
    """speedup, compile s, memory ratio: (before, after, beyond the noise threshold), when both
    sweeps measured it and it moved."""
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.status[0] != self.status[1]
            or self.new_sites
            or self.fixed_sites
            or self.new_causes
            or self.gone_causes
            or self.counts
            or any(beyond for _, _, beyond in self.perf.values())
            or self.regressions
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
    fleet: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """The dashboards' numbers before and after (pass rate, geomean speedups, compile s, memory ratio)."""
    fleet_regressions: list[str] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def regressions(self) -> list[str]:
        return [f"{c.target}: {r}" for c in self.changes for r in c.regressions] + [f"fleet: {r}" for r in self.fleet_regressions]


def _perf(change: TargetChange, b: TargetBench | None, a: TargetBench | None, limits: Thresholds) -> None:
    """Speedup, compile time and memory ratio: moved beyond the noise, a regression or an improvement."""
    if b is None or a is None:
        return
    if b.speedup and a.speedup and b.error is None and a.error is None:
        limit = limits.speedup_limit(b, a)
        drop = 1 - a.speedup / b.speedup
        beyond = abs(drop) > limit
        change.perf["speedup"] = (b.speedup, a.speedup, beyond)
        if beyond:
            said = f"speedup {b.speedup:.2f}x -> {a.speedup:.2f}x ({-drop:+.0%}; noise {limit:.0%})"
            (change.regressions if drop > 0 else change.improvements).append(said)
    if b.compile_s is not None and a.compile_s is not None and b.compile_s > 0:
        rise = a.compile_s / b.compile_s - 1
        beyond = abs(rise) > limits.compile and abs(a.compile_s - b.compile_s) > limits.compile_s
        change.perf["compile s"] = (b.compile_s, a.compile_s, beyond)
        if beyond:
            said = f"compile {b.compile_s:.1f} -> {a.compile_s:.1f} s ({rise:+.0%})"
            (change.regressions if rise > 0 else change.improvements).append(said)
    if b.memory_ratio and a.memory_ratio:
        drop = 1 - a.memory_ratio / b.memory_ratio
        beyond = abs(drop) > limits.memory
        change.perf["memory ratio"] = (b.memory_ratio, a.memory_ratio, beyond)
        if beyond:
            said = f"memory ratio {b.memory_ratio:.2f}x -> {a.memory_ratio:.2f}x ({-drop:+.0%})"
            (change.regressions if drop > 0 else change.improvements).append(said)


def _compare(b: SweepTarget, a: SweepTarget, limits: Thresholds) -> TargetChange:
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
        _perf(change, b.bench, a.bench, limits)
    change.regressions += [f"new break site {site_text(s)}" for s in change.new_sites]
    change.regressions += [f"new recompile cause: {c.summary} ({c.recompiles} recompile(s))" for c in change.new_causes]
    if b.status == "clean" and a.status != "clean":
        change.regressions.append(f"was clean, now {a.status}" + (f": {a.reason}" if a.reason else ""))
    elif a.status in _NO_VERDICT and b.status not in _NO_VERDICT:
        change.regressions.append(f"{b.status} -> {a.status}" + (f": {a.reason}" if a.reason else ""))
    elif comparable and passed(b) and not passed(a):
        why = (a.bench.numerics or "numerics") if a.bench is not None and a.bench.numerics_ok is False else (a.bench and a.bench.error)
        change.regressions.append(f"pass -> fail: {why or 'its compiled arm failed'}")
    return change


def _fleet(out: SweepDiff, b: Dashboard | None, a: Dashboard | None) -> None:
    """The dashboards side by side (over the targets in both sweeps); the fleet's own regressions: a
    geometric-mean speedup that fell, a mean compile time that rose (a drift no one target may show)."""
    if b is None or a is None:
        return
    for name in ("pass_rate", "geomean_speedup", "geomean_best_speedup", "mean_compile_s", "p90_compile_s", "geomean_memory_ratio"):
        out.fleet[name] = (getattr(b, name), getattr(a, name))
    limits = out.thresholds
    if b.geomean_speedup and a.geomean_speedup and a.geomean_speedup < b.geomean_speedup * (1 - limits.speedup):
        out.fleet_regressions.append(f"geomean speedup {b.geomean_speedup:.2f}x -> {a.geomean_speedup:.2f}x")
    if b.mean_compile_s and a.mean_compile_s and a.mean_compile_s > b.mean_compile_s * (1 + limits.compile):
        if a.mean_compile_s - b.mean_compile_s > limits.compile_s:
            out.fleet_regressions.append(f"mean compile {b.mean_compile_s:.1f} -> {a.mean_compile_s:.1f} s")


def diff_sweeps(before: SweepSummary, after: SweepSummary, thresholds: Thresholds | None = None) -> SweepDiff:
    out = SweepDiff(thresholds=thresholds or Thresholds())
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
        change = _compare(old, row, out.thresholds)
        if change.changed:
            out.changes.append(change)
        else:
            out.unchanged += 1
    out.removed = [r.target for r in before.targets if r.target not in names_after]
    for name in ("break_sites", "graph_breaks", "recompiles"):
        out.totals[name] = (getattr(before.totals, name), getattr(after.totals, name))
    for status in sorted({*before.totals.statuses, *after.totals.statuses}):
        out.totals[status] = (before.totals.statuses.get(status, 0), after.totals.statuses.get(status, 0))
    common = {r.target for r in after.targets} & set(rows_before)
    if before.totals.dashboard is not None and after.totals.dashboard is not None:
        kept = [r for r in before.targets if r.target in common], [r for r in after.targets if r.target in common]
        _fleet(out, dashboard(kept[0]), dashboard(kept[1]))
    return out


_PERF_WORDS = ("speedup ", "compile ", "memory ratio ")


def _is_perf(text: str) -> bool:
    return text.startswith(_PERF_WORDS)


def _fleet_text(name: str, b: float | None, a: float | None) -> str:
    def show(v: float | None) -> str:
        if v is None:
            return "—"
        return f"{v:.0%}" if name == "pass_rate" else f"{v:.1f} s" if "compile" in name else f"{v:.2f}x"

    return f"{name.removesuffix('_s').replace('_', ' ')} {show(b)} -> {show(a)}"


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
        lines += [f"  slower {r}" if r.startswith("speedup") else f"  worse  {r}" for r in c.regressions if _is_perf(r)]
        lines += [f"  better {r}" for r in c.improvements]
    lines += [f"added:   {t}" for t in d.added]
    lines += [f"removed: {t}" for t in d.removed]
    lines.append(f"targets: {len(d.changes)} changed, {d.unchanged} unchanged, {len(d.added)} added, {len(d.removed)} removed")
    totals = [f"{name} {b} -> {a}" for name, (b, a) in d.totals.items() if b != a]
    lines.append("fleet: " + (", ".join(totals) if totals else "no change"))
    if d.fleet:
        moved = [_fleet_text(name, b, a) for name, (b, a) in d.fleet.items() if b is not None or a is not None]
        lines.append("dashboard: " + ", ".join(moved))
        lines.append(f"thresholds: {d.thresholds.describe()}")
    lines += [f"note: {n}" for n in d.notes]
    regressions = d.regressions
    if regressions:
        lines.append(f"REGRESSIONS ({len(regressions)}):")
        lines += [f"  - {r}" for r in regressions]
    else:
        lines.append("no regressions")
    return "\n".join(lines) + "\n"
