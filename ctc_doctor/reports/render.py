"""Render a Report for a terminal with rich: verdict, ranked break sites, recompiles, bisection,
suggestions with their measured effect, the verified fix, the benchmark, and next steps.

The words come from `labels` (short texts) and `advice` (what to do next); this module lays them out."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .advice import next_steps
from .labels import (
    STATUS_STYLE,
    TORCH_LOG_NOTE,
    UNSTABLE_KEY,
    VERDICTS,
    WARNING_NOTE,
    benchmark_headline,
    cause_headline,
    cause_of,
    cliff_line,
    compile_time_text,
    compiled_line,
    cost_text,
    crash_cell,
    cudagraph_text,
    ddp_split_text,
    doctor_cost_text,
    eager_frames_line,
    fix_lists,
    folded_counts,
    graphs_text,
    module_label,
    module_path_of,
    numerics_cell,
    numerics_text,
    recompiles_text,
    script_outcome,
    short_path,
    site_marks,
    speedup_cell,
    stderr_tail_text,
    suggestion_status,
    torch_bug_lines,
    torch_bug_title,
    unstable_lines,
    verdict_label,
    verification_numerics,
)
from .models import Benchmark, GraphBreakSite, Recompile, Report, Suggestion
from .views.bisection import render_bisect
from .views.compile_time import profile_text


def header_text(report: Report) -> Text:
    t, e = report.target, report.environment
    text = Text()
    text.append("ctc-doctor ", style="bold")
    text.append(f"{t.name} ", style="bold cyan")
    src = report.source
    if src is not None:
        ranks = f", ranks {', '.join(str(r) for r in src.ranks)}" if src.ranks else ""
        text.append(f"(from logs: {src.kind.replace('_', ' ')}, {len(src.files)} file(s){ranks})\n")
    else:
        meta = {"none": ", without the weights: on meta tensors", "twin": ", without the weights: a real twin's findings"}.get(
            t.weights, ""
        )
        text.append(
            f"({t.model_class}, {t.parameters:,} params, {t.modules} modules, {t.calls} call(s){', train' if t.train else ''}{meta})\n"
        )
    outcome = script_outcome(report)
    if outcome is not None:
        failed = bool(report.run.exit_code) or report.run.stopped in ("timeout", "interrupted")
        text.append("script: ", style="bold")
        text.append(outcome + "\n", style="red" if failed else "")
        for obj in report.compiled:
            text.append(f"compiled: {compiled_line(obj)}\n")
    text.append(
        f"torch {e.torch} · python {e.python} · {e.platform} · device {e.device} · backend {e.backend}"
        + (f" · transformers {e.transformers}" if e.transformers else ""),
        style="dim",
    )
    if e.unavailable:
        text.append(f"\nnot in torch {e.torch}: " + "; ".join(e.unavailable), style="yellow")
    return text


def verdict_panel(report: Report) -> Panel:
    s = report.summary
    style, label, _ = VERDICTS[s.verdict]
    lines = Text()
    stop = next((e for e in report.errors if e.phase == "weights"), None)
    if stop is not None:  # --weights none: the code needed real values (no findings: they would be partial)
        lines.append("NO ANSWER WITHOUT THE WEIGHTS\n", style=style)
        lines.append(stop.message)
        return Panel(lines, title="verdict", expand=False)
    if not s.analysis_run:
        b = report.bisect
        if b is None:
            headline = "BISECTION DID NOT RUN"
        else:
            headline = "FAILS fullgraph=True" if s.verdict != "clean" else "PASSES fullgraph=True"
            if b.untried and not b.smallest_failing:
                headline = "NO ANSWER: the bisection stopped before it ended"
        lines.append(headline + " (bisection only)\n", style=style)
        found = f"{len(b.smallest_failing)} smallest failing module(s)" if b else "bisection did not run"
        lines.append(f"{found} · break and recompile counts not measured: run `ctc-doctor TARGET` for them")
        return Panel(lines, title="verdict", expand=False)
    if s.wrong_results:
        lines.append(f"WRONG RESULTS UNDER COMPILE: {s.wrong_results}\n", style="bold red")
    if s.verdict == "clean" and s.expected_break_sites and not s.graphs_compiled:
        label = "NOTHING OF YOUR MODEL WAS COMPILED: the framework wrapper's frames break before any op, and your model ran eagerly"
    elif s.verdict == "clean" and s.expected_break_sites:
        label = "CLEAN: your model's code compiles without breaks; the framework wrapper's own breaks are by design"
    elif s.verdict == "clean" and s.expected_recompiles:
        label = "CLEAN: one graph per call; its only recompiles are expected one-offs"
    lines.append(label + "\n", style=style)
    lines.append(
        f"{graphs_text(report)} · {s.graph_break_count} break event(s) at "
        f"{s.unique_break_sites} site(s)"
        + (f" ({s.expected_break_sites} a wrapper's, expected)" if s.expected_break_sites else "")
        + f" · {recompiles_text(s)}"
        + (f" from {len(report.recompile_causes)} cause(s)" if report.recompile_causes else "")
        + (f" · {s.frames_skipped} function(s) skipped (ran eager)" if s.frames_skipped else "")
        + f" · {compile_time_text(report)}"
    )
    for cliff in report.recompile_cliffs:
        lines.append("\n" + cliff_line(cliff, report.target.calls if report.target.kind in ("build", "script") else None), style="yellow")
        if cliff.cost:
            lines.append(f" · {cliff.cost}", style="yellow")
    eager = eager_frames_line(report)
    if eager:
        lines.append("\n" + eager, style="yellow")
    split = ddp_split_text(report.ddp_splits)
    if split:
        lines.append("\n" + split, style="green")
    if report.fix is not None and report.fix.verification is not None and report.fix.applied:
        v = report.fix.verification
        lines.append(f"\nwith fixes {', '.join(report.fix.applied)} (verified on a copy): {v.summary}", style="green")
    if report.benchmark is not None:
        line = benchmark_headline(report.benchmark)
        if line:
            lines.append("\n" + line)
    return Panel(lines, title="verdict", expand=False)


def _suggestion_table(report: Report, limit: int = 12) -> Table:
    table = Table(title="suggestions (ctc-doctor fix verifies the auto-applicable ones on a copy)", title_justify="left", expand=True)
    table.add_column("id", no_wrap=True)
    table.add_column("for", no_wrap=True)
    table.add_column("class", no_wrap=True)
    table.add_column("what to do", ratio=3, overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("measured", ratio=2, overflow="fold")
    for s in report.suggestions[:limit]:
        status = suggestion_status(s, report.fix)
        measured = _measured(s)
        applies = ",".join(s.applies_to[:4]) + (f" +{len(s.applies_to) - 4}" if len(s.applies_to) > 4 else "")
        table.add_row(
            s.id,
            applies or "model",
            s.category or s.kind,
            escape(s.title),
            Text(status, style=STATUS_STYLE.get(status, "")),
            escape(measured),
        )
    return table


def _fix_panel(report: Report) -> Panel | None:
    fix = report.fix
    if fix is None:
        return None
    body: list[object] = []
    text = Text()
    if fix.applied and fix.verification is not None:
        v = fix.verification
        text.append(f"applied {', '.join(fix.applied)} to a copy: {v.summary}", style="green")
        text.append(verification_numerics(v, fix.backend))
    else:
        text.append("nothing applied", style="yellow")
    for label, ids in fix_lists(fix):
        text.append(f"\n{label}: {ids}", style="dim")
    if fix.remaining:
        more = f" (+{len(fix.remaining) - 4} more)" if len(fix.remaining) > 4 else ""
        text.append(f"\nstill left: {'; '.join(fix.remaining[:4])}{more}", style="dim")
    for note in fix.notes:
        text.append(f"\n{note}", style="dim")
    body.append(text)
    return Panel(Group(*body), title="fix (verified on a copy; your model is unchanged)", expand=True)  # type: ignore[arg-type]


def _fix_diffs(report: Report, width: int) -> list[object]:
    """The applied fixes' diffs, outside any panel, never re-wrapped (a wrapped line is no patch): a diff
    with a line wider than the terminal is pointed to instead (`--diff` prints it whole)."""
    if report.fix is None:
        return []
    by_id = {s.id: s for s in report.suggestions}
    parts: list[object] = []
    for sid in report.fix.applied:
        s = by_id.get(sid)
        if s is not None and s.diff:
            from rich.syntax import Syntax  # pygments: only when there is a diff to show

            parts.append(Text(f"{sid}: {s.title}", style="bold"))
            if max(len(line) for line in s.diff.splitlines()) > width:
                where = short_path(s.file or "?")
                parts.append(Text(f"    its diff is wider than this terminal: `--diff` prints the patch whole ({where})", style="dim"))
                continue
            parts.append(Syntax(s.diff.rstrip("\n"), "diff", theme="ansi_dark", background_color="default", word_wrap=False))
    return parts


COMPACT_BELOW = 100
"""Terminals narrower than this get stacked rows instead of tables (CI logs and pipes are 80)."""


def _indented(text: str | Text, style: str = "", indent: int = 4) -> Padding:
    return Padding(text if isinstance(text, Text) else Text(text, style=style), (0, 0, 0, indent), expand=False)


def _break_rows(sites: list[GraphBreakSite], top: int) -> Group:
    parts: list[object] = [Text("Graph breaks, most costly first", style="bold")]
    for site in sites[:top]:
        frame = site.own_frame or site.user_frame
        head = Text(f"{site.id}  ", style="bold")
        head.append(", ".join(site.registry_ids[:2]) or "—", style="bold")
        head.append(f"  ×{site.occurrences}  ")
        head.append(module_label(site.module_paths, None))
        if site.module_class:
            head.append(f" ({site.module_class})", style="dim")
        parts.append(head)
        parts.append(_indented(f"{short_path(frame.file, 200)}:{frame.line}" + (f"  {frame.code}" if frame.code else ""), "cyan"))
        if not site.own_code:
            parts.append(_indented(f"in {site.library}: {short_path(site.user_frame.file, 200)}:{site.user_frame.line}", "dim"))
        reason = Text(site.reason)
        for mark in site_marks(site):
            reason.append(f" ({mark})", style="bold")
        parts.append(_indented(reason))
        if site.expected:
            parts.append(_indented(f"expected, {site.wrapper}'s by design: {site.expected}", "green"))
        elif site.hints:
            parts.append(_indented(f"hint: {site.hints[0]}", "dim"))
        cost = cost_text(site)
        if cost:
            parts.append(_indented(cost, "dim"))
    return Group(*parts)  # type: ignore[arg-type]


def _recompile_rows(recompiles: list[Recompile], causes: dict[str, str]) -> Group:
    parts: list[object] = [Text("Recompile events, by function" + (" (cause ids from above)" if causes else ""), style="bold")]
    for g in _event_groups(recompiles, causes):
        head = Text(f"  {g.function} ", style="bold")
        head.append(f"{module_label(g.paths, None)}  {short_path(g.file, 200)}:{g.line}  ×{g.count}")
        if g.cause_ids:
            head.append(f"  {', '.join(g.cause_ids)}", style="yellow")
        parts.append(head)
        for kind, reason in g.guards:
            parts.append(_indented(f"{kind}: {reason}", "dim", 6))
    return Group(*parts)  # type: ignore[arg-type]


def _suggestion_rows(report: Report, limit: int = 12) -> Group:
    parts: list[object] = [Text("suggestions (ctc-doctor fix verifies the auto-applicable ones on a copy)", style="bold")]
    for s in report.suggestions[:limit]:
        status = suggestion_status(s, report.fix)
        head = Text(f"{s.id} ", style="bold")
        head.append(f"[{s.category or s.kind} · ")
        head.append(status, style=STATUS_STYLE.get(status, ""))
        head.append("] ")
        head.append(", ".join(s.applies_to) or "model", style="dim")
        head.append(f": {s.title}")
        parts.append(head)
        measured = _measured(s)
        if measured:
            parts.append(_indented(measured, "dim"))
    return Group(*parts)  # type: ignore[arg-type]


def _bench_rows(b: Benchmark) -> Group:
    settings = b.settings
    parts: list[object] = [
        Text(
            f"benchmark: {settings.get('backend')} mode={settings.get('mode')} on {b.device}, "
            f"{settings.get('iters')} timed pass(es), {settings.get('grad')}",
            style="bold",
        )
    ]
    for a in b.arms:
        head = Text(f"  {a.name}{' ★' if a.name == b.best_arm else ''}", style="bold" if a.name == b.best_arm else "")
        if a.latency_ms:
            head.append(f"  latency {a.latency_ms.median:.3f} ± {a.latency_ms.iqr:.3f} ms (n={a.latency_ms.n})")
            if a.latency_ms.unstable:
                head.append(" unstable", style="yellow")
            elif a.latency_ms.retimed:
                head.append(" (timed again once the load passed)", style="dim")
        if a.crash:
            head.append(f"  {crash_cell(a)}", style="red")
        if a.speedup_vs_eager is not None and a.name != "eager":
            head.append(f" ({speedup_cell(b, a)} eager)")
        parts.append(head)
        facts = []
        if a.compile_time_s is not None:
            facts.append(f"cold compile {a.compile_time_s:.2f} s")
        if a.warm_compile_time_s is not None:
            facts.append(f"warm {a.warm_compile_time_s:.2f} s")
        if a.load_time_s is not None:
            facts.append(f"load {a.load_time_s:.2f} s")
        for label, value in (("graphs", a.graph_count), ("breaks", a.graph_break_count), ("recompiles", a.recompile_count)):
            if value is not None:
                facts.append(f"{label} {value}")
        if a.peak_memory_mb is not None:
            facts.append(f"peak {a.peak_memory_mb:.0f} MB")
        if a.numerics is not None or a.max_abs_error is not None:
            facts.append(numerics_text(a.numerics) if a.numerics else f"max abs err {numerics_cell(a)}")
        if facts:
            parts.append(_indented(" · ".join(facts), "dim", 6))
    return Group(*parts)  # type: ignore[arg-type]


def _measured(s: Suggestion) -> str:
    measured = verdict_label(s)
    if not measured and s.verified is not None:
        measured = s.verified.summary or s.verified.error or ""
        if s.verified.error and s.verified.summary and not s.verified.summary.startswith("failed"):
            measured = f"{s.verified.summary}; {s.verified.error}"
    if s.verified is not None and s.verified.moved_break:
        measured += " (the break moved: a workaround)"
    return measured


def bench_table(b: Benchmark) -> Table:
    settings = b.settings
    title = (
        f"benchmark: {settings.get('backend')} mode={settings.get('mode')} on {b.device}, "
        f"{settings.get('iters')} timed pass(es), {settings.get('grad')}"
    )
    table = Table(title=title, title_justify="left", expand=True)
    for col in (
        "arm",
        "cold\ncompile",
        "warm\ncompile",
        "latency\n(median ± IQR, n)",
        "speed-\nup",
        "graphs",
        "breaks",
        "recom-\npiles",
        "peak\nMB",
        "error vs\neager's",
    ):
        table.add_column(
            col,
            no_wrap=True,
            justify="left" if col == "arm" else "right",
            min_width=max((len(a.name) + 2 for a in b.arms), default=5) if col == "arm" else None,
        )

    def num(value: float | int | None, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    for a in b.arms:
        latency = f"{a.latency_ms.median:.3f} ± {a.latency_ms.iqr:.3f} ms ({a.latency_ms.n})" if a.latency_ms else crash_cell(a)
        name = Text(a.name + (" ★" if a.name == b.best_arm else ""), style="bold" if a.name == b.best_arm else "")
        table.add_row(
            name,
            num(a.compile_time_s, ".2f") + (" s" if a.compile_time_s is not None else ""),
            num(a.warm_compile_time_s, ".2f")
            + (" s" if a.warm_compile_time_s is not None else "")
            + (f"load {a.load_time_s:.2f} s" if a.load_time_s is not None else ""),
            latency,
            speedup_cell(b, a),
            num(a.graph_count, "d"),
            num(a.graph_break_count, "d"),
            num(a.recompile_count, "d"),
            num(a.peak_memory_mb, ".0f"),
            numerics_cell(a),
        )
    return table


def _bench_parts(b: Benchmark, compact: bool = False) -> list[object]:
    parts: list[object] = [_bench_rows(b) if compact else bench_table(b)]
    shaky = unstable_lines(b)
    if shaky and not compact:
        parts.append(Text(UNSTABLE_KEY, style="dim"))
    for line in shaky:
        parts.append(Text(line, style="yellow"))
    if b.best_arm_reason:
        label = f"best for {b.objective}: " if b.best_arm else ""
        parts.append(Text(f"{label}{b.best_arm_reason}", style="bold"))
    if b.cold_start:
        parts.append(Text(f"cold start of a new process: {b.cold_start}", style="bold"))
    for a in b.arms:
        if a.error:
            parts.append(Text(f"{a.name}: {a.error}", style="red" if a.latency_ms is None else "yellow"))
        if a.stderr_tail:
            parts.append(Text(f"  {a.name} stderr: {stderr_tail_text(a)}", style="dim"))
        for cause in a.recompile_causes:
            parts.append(Text(f"{a.name} recompiles, {cause_headline(cause)}", style="yellow"))
        graphs = cudagraph_text(a)
        if graphs:
            parts.append(
                Text(
                    graphs,
                    style="yellow" if a.cudagraphs and (a.cudagraphs.skip_count or a.cudagraphs.skips or a.cudagraphs.rerecords) else "dim",
                )
            )
    for note in b.notes:
        parts.append(Text(f"benchmark note: {note}", style="dim"))
    return parts


def _break_table(sites: list[GraphBreakSite], top: int) -> Table:
    # report strings are data (and logs read offline are anyone's text): Text cells, never markup
    table = Table(title="Graph breaks, most costly first", title_justify="left", show_lines=False, expand=True)
    table.add_column("id", no_wrap=True)
    table.add_column("location", overflow="fold", ratio=1)
    table.add_column("module", overflow="fold")
    table.add_column("GB", no_wrap=True)
    table.add_column("×", justify="right")
    table.add_column("reason / first hint", overflow="fold", ratio=2)
    for site in sites[:top]:
        frame = site.own_frame or site.user_frame
        loc = Text(f"{short_path(frame.file, 200)}:{frame.line}")
        if not site.own_code:
            loc.append(f"\nin {site.library}: {short_path(site.user_frame.file, 200)}:{site.user_frame.line}", style="dim")
        if frame.code:
            loc.append(f"\n{frame.code}", style="dim")
        cell = Text(site.reason)
        for mark in site_marks(site):
            cell.append(f" ({mark})", style="bold")
        if site.expected:
            cell.append(f"\nexpected, {site.wrapper}'s by design: {site.expected}", style="green")
        elif site.hints:
            cell.append(f"\nhint: {site.hints[0]}", style="dim")
        cost = cost_text(site)
        if cost:
            cell.append(f"\n{cost}", style="dim")
        module = Text(module_label(site.module_paths))
        if site.module_class:
            module.append(f"\n{site.module_class}", style="dim")
        table.add_row(site.id, loc, module, ", ".join(site.registry_ids[:2]) or "—", str(site.occurrences), cell)
    return table


def cause_text(report: Report) -> Group:
    """The recompile causes, each with where it struck and what addresses it: the disease before the symptoms."""
    n = len(report.recompile_causes)
    parts: list[object] = [Text(f"Recompile causes ({n}; every recompile event below belongs to one)", style="bold")]
    for cause in report.recompile_causes:
        parts.append(Padding(Text(cause_headline(cause), style="yellow"), (0, 0, 0, 2), expand=False))
        details = []
        if cause.functions:
            details.append(
                "in " + ", ".join(cause.functions[:4]) + (f" (+{len(cause.functions) - 4} more)" if len(cause.functions) > 4 else "")
            )
        where = [f"modules {module_label(cause.module_paths, None)}"] if cause.module_paths else []
        if cause.first_call is not None:
            where.append(f"first in call {cause.first_call}" + (f" ({cause.trigger})" if cause.trigger else ""))
        if cause.user_stack:
            f = cause.user_stack[-1]
            where.append(f"guard from {short_path(f.file, 200)}:{f.line}" + (f" `{f.code}`" if f.code else ""))
        if cause.suggestion_ids:
            where.append(f"see {', '.join(cause.suggestion_ids)}")
        if where:
            details.append(" · ".join(where))
        for line in details:
            parts.append(Padding(Text(line, style="dim"), (0, 0, 0, 6), expand=False))
    return Group(*parts)  # type: ignore[arg-type]


@dataclass
class _EventGroup:
    """Recompile events of one function and module set (Dynamo's resume functions of a forward fold in)."""

    function: str
    file: str
    line: int
    paths: list[str]
    count: int
    cause_ids: list[str]
    guards: list[tuple[str, str]]
    """(kind, first reason, its sources as module paths) of the first three guard kinds."""


def _event_groups(recompiles: list[Recompile], causes: dict[str, str]) -> list[_EventGroup]:
    groups: dict[tuple[str, str, tuple[str, ...]], list[Recompile]] = defaultdict(list)
    for rc in recompiles:
        groups[(rc.function, rc.file, tuple(rc.module_paths))].append(rc)
    out = []
    for (function, file, paths), items in groups.items():
        kinds: dict[str, str] = {}
        for rc in items:
            for g in rc.failed_guards:
                kinds.setdefault(g.kind, module_path_of(g.reason))
        ids = list(dict.fromkeys(causes[rc.id] for rc in items if rc.id in causes))
        out.append(_EventGroup(function, file, min(rc.line for rc in items), list(paths), len(items), ids, list(kinds.items())[:3]))
    return out


def _recompile_table(recompiles: list[Recompile], causes: dict[str, str]) -> Table:
    title = "Recompile events, by function" + (" (cause ids from above)" if causes else "")
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column("function", overflow="fold", ratio=1)
    table.add_column("module", overflow="fold")
    table.add_column("×", justify="right")
    table.add_column("failed guard (kind: guard)", overflow="fold", ratio=2)
    for g in _event_groups(recompiles, causes):
        guard_text = "\n".join(f"{k}: {v}" for k, v in g.guards)
        if g.cause_ids:
            guard_text = f"{', '.join(g.cause_ids)} · {guard_text}"
        label = Text(g.function)
        label.append(f"\n{short_path(g.file, 200)}:{g.line}", style="dim")
        table.add_row(label, Text(module_label(g.paths)), str(g.count), Text(guard_text))
    return table


def probe_text(report: Report) -> Text:
    p = report.shape_probe
    assert p is not None
    text = Text("shape probe: ", style="bold")
    rows = [f"{d.argument}[{d.dim}] {d.size}->{d.probed_size}: {d.outcome.replace('_', ' ')}" for d in p.dims]
    text.append("; ".join(rows) or "no tensor inputs")
    if p.recommended:
        text.append("\nrecommended: " + "; ".join(p.recommended), style="green")
        if p.verified is not None:
            text.append(f" (verified: {'no recompiles with them' if p.verified else 'still recompiles'})")
    return text


def logs_text(report: Report) -> Text | None:
    """Offline reports: what was read and how well (parse_stats), one or two lines."""
    src, st = report.source, report.parse_stats
    if src is None or st is None:
        return None
    text = Text("logs: ", style="bold")
    text.append(f"{len(src.files)} file(s), {st.lines:,} lines, {st.records:,} records, {st.used:,} used, {st.ignored:,} ignored")
    if st.foreign_lines:
        text.append(f", {st.foreign_lines:,} other line(s)")
    if st.payloads_truncated:
        text.append(f", {st.payloads_truncated} payload(s) cut at the size cap")
    bad = st.unreadable or st.unknown or st.truncated_files
    if bad:
        parts = [f"{n} {cause}" for cause, n in st.problems.items()] + [f"{n} unknown '{k}'" for k, n in st.unknown_kinds.items()]
        text.append(f"\n{st.unreadable} unreadable, {st.unknown} unknown: " + "; ".join(parts[:6]), style="yellow")
        if st.truncated_files:
            text.append(f" · cut off: {', '.join(short_path(f) for f in st.truncated_files[:3])}", style="yellow")
    return text


def rank_table(report: Report) -> Table | None:
    """Offline reports of multi-rank logs: one row per rank, diverging ranks marked."""
    if not report.ranks:
        return None
    odd = {r for d in report.divergence for r in d.ranks}
    table = Table(title="ranks", title_justify="left", box=None, pad_edge=False)
    for name in ("rank", "compiles", "graphs", "break events", "sites", "recompiles", "compile s"):
        table.add_column(name, justify="left" if name in ("rank", "sites") else "right", no_wrap=True)
    for r in report.ranks:
        table.add_row(
            Text(f"{r.rank}{' ≠' if r.rank in odd else ''}", style="bold yellow" if r.rank in odd else ""),
            str(r.compiles),
            str(r.graphs),
            str(r.graph_break_count),
            Text(",".join(r.break_sites) or "—"),
            str(r.recompile_count),
            f"{r.compile_time_s:.2f}",
        )
    return table


def divergence_text(report: Report) -> Text | None:
    if not report.divergence:
        return None
    text = Text("ranks diverge (collectives can hang when ranks compile differently):\n", style="bold yellow")
    for d in report.divergence:
        text.append(f"  {d.kind.replace('_', ' ')}: ", style="yellow")
        text.append(f"{d.message}\n")
    return text


def render_summary(report: Report, console: Console, *, top: int = 10) -> None:
    """Print the human summary of a report."""
    compact = console.width < COMPACT_BELOW  # stacked rows, not tables: every cell whole at 80 columns
    parts: list[object] = [header_text(report), verdict_panel(report)]
    parts.extend(p for p in (logs_text(report), rank_table(report), divergence_text(report)) if p is not None)
    if report.graph_breaks:
        parts.append(_break_rows(report.graph_breaks, top) if compact else _break_table(report.graph_breaks, top))
        if len(report.graph_breaks) > top:
            parts.append(Text(f"{len(report.graph_breaks) - top} more site(s) in the JSON report", style="dim"))
    if report.recompile_causes:
        parts.append(cause_text(report))
    profile = profile_text(report)
    if profile is not None:
        parts.append(profile)
    if report.recompiles:
        causes = cause_of(report)
        parts.append(_recompile_rows(report.recompiles, causes) if compact else _recompile_table(report.recompiles, causes))
    if report.bisect is not None:
        parts.extend(render_bisect(report.bisect))
    if report.suggestions:
        parts.append(_suggestion_rows(report) if compact else _suggestion_table(report))
    fix_panel = _fix_panel(report)
    if fix_panel is not None:
        parts.append(fix_panel)
        parts.extend(_fix_diffs(report, console.width))
    for bug in report.torch_bugs:
        body = Text()
        for i, line in enumerate(torch_bug_lines(bug)):
            body.append(("\n" if i else "") + line, style="bold" if i == 0 else "")
        parts.append(Panel(body, title=torch_bug_title(bug), expand=True))
    if report.shape_probe is not None:
        parts.append(probe_text(report))
    if report.benchmark is not None:
        parts.extend(_bench_parts(report.benchmark, compact))
    if report.explain is not None and report.explain.missed_sites:
        parts.append(
            Text(
                f"torch._dynamo.explain listed {report.explain.break_reasons} break reason(s) and missed "
                f"{report.explain.missed_sites} site(s) found here.",
                style="dim",
            )
        )
    warned = [n for n in report.notes if n.startswith(WARNING_NOTE)]
    logged = [n for n in report.notes if n.startswith(TORCH_LOG_NOTE)]
    for note in report.notes:
        if note not in warned and note not in logged:
            parts.append(Text(f"note: {note}", style="dim"))
    for folded, what in ((warned, "Python warning(s) raised"), (logged, "torch log record(s) kept off the terminal")):
        if folded:  # one line: the records themselves are in the report's notes
            total, kinds = folded_counts(folded)
            parts.append(Text(f"note: {total} {what} during the run ({kinds} kind(s)); see the report's notes", style="dim"))
    for err in report.errors:
        hint = f"\n  what it means: {err.hint}" if err.hint else ""
        parts.append(Text(f"error [{err.phase}] {err.type}: {err.message}{hint}", style="red"))
    cost = doctor_cost_text(report.cost)
    if cost is not None:
        parts.append(Text(f"doctor's cost: {cost}", style="dim"))
    steps = next_steps(report)
    if steps:
        body = Text()
        for i, step in enumerate(steps, 1):
            body.append(f"{i}. {step}\n")
        parts.append(Panel(body, title="what to do next", expand=True))
    console.print(Group(*parts))  # type: ignore[arg-type]
