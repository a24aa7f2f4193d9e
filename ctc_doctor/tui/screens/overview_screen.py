"""OverviewScreen: verdict, counts, compile time, best speedup, what ran, target and environment."""

from __future__ import annotations

from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...reports.advice import next_steps
from ...reports.labels import benchmark_headline, bisect_summary_line, module_label
from ...reports.models import Report
from ...reports.render import divergence_text, header_text, logs_text, rank_table, verdict_panel
from ...reports.views.compile_time import profile_text
from .section_screen import PanelScreen

NOT_RUN = "not run"


def _counts(report: Report) -> Table:
    s = report.summary
    table = Table(title="counts", title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column("what", style="dim", no_wrap=True)
    table.add_column("value", no_wrap=True)
    measured = s.analysis_run
    rows = [
        ("graphs in first compiles" if report.source else "graphs on the first call", str(s.graph_count) if measured else NOT_RUN),
        ("graphs compiled (all calls)", str(s.graphs_compiled) if measured else NOT_RUN),
        ("graph-break events", str(s.graph_break_count) if measured else NOT_RUN),
        ("unique break sites", str(s.unique_break_sites) if measured else NOT_RUN),
        ("recompiles", str(s.recompile_count) if measured else NOT_RUN),
        ("functions skipped (ran eager)", str(s.frames_skipped) if measured else NOT_RUN),
        ("compile time (analysis backend)", f"{s.compile_time_s:.2f} s" if measured else NOT_RUN),
    ]
    best = _best_arm(report)
    rows.append(("best speedup vs eager", best))
    for what, value in rows:
        table.add_row(what, Text(value, style="dim" if value == NOT_RUN else "bold"))
    return table


def _best_arm(report: Report) -> str:
    b = report.benchmark
    if b is None:
        return NOT_RUN
    arm = next((a for a in b.arms if a.name == b.best_arm), None)
    if arm is None or arm.speedup_vs_eager is None:
        return "no arm with correct numerics"
    return f"{arm.speedup_vs_eager:.2f}x ({arm.name}, {b.settings.get('backend', '?')} on {b.device})"


def _phases(report: Report) -> Table:
    """What ran: each optional phase with its one-line result, or `not run`."""
    table = Table(title="phases", title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column("phase", style="dim", no_wrap=True)
    table.add_column("result")
    b = report.bisect
    if b is None:
        bisect = Text(NOT_RUN, style="dim")
    else:
        found = (
            f"smallest failing: {module_label(b.smallest_failing, 60)}"
            if b.smallest_failing
            else "no answer: stopped before it ended"
            if b.untried
            else "no failing submodule"
        )
        bisect = Text(f"{found} · {bisect_summary_line(b)}")
    table.add_row("bisection", bisect)
    if report.suggestions:
        auto = sum(s.auto_applicable for s in report.suggestions)
        table.add_row("suggestions", Text(f"{len(report.suggestions)} ({auto} auto-applicable)"))
    else:
        table.add_row("suggestions", Text("none apply" if report.summary.analysis_run else NOT_RUN, style="dim"))
    f = report.fix
    if f is None:
        table.add_row("fix", Text(NOT_RUN, style="dim"))
    elif f.applied and f.verification is not None:
        table.add_row("fix", Text(f"applied {', '.join(f.applied)} on a copy: {f.verification.summary or ''}", style="green"))
    else:
        table.add_row("fix", Text("nothing safe and effective to apply", style="yellow"))
    p = report.shape_probe
    if p is None:
        table.add_row("shape probe", Text(NOT_RUN, style="dim"))
    else:
        table.add_row(
            "shape probe",
            Text("recommended: " + "; ".join(p.recommended) if p.recommended else f"{len(p.dims)} dim(s) probed, nothing to mark"),
        )
    if report.benchmark is None:
        table.add_row("benchmark", Text(NOT_RUN, style="dim"))
    else:
        table.add_row("benchmark", Text(benchmark_headline(report.benchmark) or "no arm finished"))
    e = report.explain
    table.add_row(
        "explain cross-check",
        Text(NOT_RUN, style="dim")
        if e is None
        else Text(f"{e.graph_count} graph(s), {e.break_reasons} break reason(s), missed {e.missed_sites} site(s) found here"),
    )
    return table


def _target(report: Report) -> Table:
    t, e, r = report.target, report.environment, report.run
    table = Table(title="target and environment", title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column("what", style="dim", no_wrap=True)
    table.add_column("value")
    rows = [
        ("target", t.spec),
        ("model", f"{t.model_class}, {t.parameters:,} parameters, {t.modules} modules"),
        ("calls", f"{t.calls}{' (forward + backward)' if t.train else ''}"),
        *[(f"inputs of call {i}", sig) for i, sig in enumerate(t.inputs)],
        ("torch", e.torch),
        ("transformers", e.transformers or "—"),
        ("python", e.python),
        ("platform", e.platform),
        ("device / backend", f"{e.device} / {e.backend}"),
        ("command", r.command),
        ("started", f"{r.started_at} · took {r.duration_s:.1f} s · ctc-doctor {r.tool_version} · schema {report.schema_version}"),
    ]
    for what, value in rows:
        table.add_row(what, Text(value))
    return table


def overview(report: Report) -> list[RenderableType]:
    parts: list[RenderableType] = [header_text(report), verdict_panel(report)]
    parts.extend(p for p in (logs_text(report), rank_table(report), divergence_text(report)) if p is not None)
    parts += [_counts(report), Text("")]
    profile = profile_text(report)
    parts += [profile, Text("")] if profile is not None else []
    parts += [_phases(report), Text(""), _target(report)]
    if report.errors:
        errors = Text()
        for err in report.errors:
            errors.append(f"[{err.phase}] {err.type}: {err.message}\n", style="red")
        parts.append(Panel(errors, title="errors (the report holds what was found before them)", title_align="left"))
    if report.notes:
        notes = Text()
        for note in report.notes:
            notes.append(f"• {note}\n", style="dim")
        parts.append(Panel(notes, title="notes", title_align="left"))
    steps = next_steps(report)
    if steps:
        body = Text()
        for i, step in enumerate(steps, 1):
            body.append(f"{i}. {step}\n")
        parts.append(Panel(body, title="what to do next", title_align="left"))
    return parts


class OverviewScreen(PanelScreen):
    SECTION = "overview"

    def view(self) -> list[RenderableType]:
        return overview(self.report)
