"""A report as GitHub-flavoured Markdown, ready to paste into an issue (no torch import).

Layout: a one-line summary, the environment and command, ranked break sites (a table, then one
collapsible `<details>` per site with hints and the user stack), recompiles with their failed guards,
the bisection result with repro paths, suggestions (diffs and snippets collapsed), the verified fix,
the shape probe and the benchmark table (or "not run"), notes and errors.
Every value that comes from the report is escaped for table cells and HTML.
"""

from __future__ import annotations

import html

from .advice import next_steps
from .labels import (
    UNSTABLE_KEY,
    VERDICTS,
    benchmark_headline,
    bisect_summary_line,
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
    graphs_text,
    module_label,
    module_path_of,
    numerics_cell,
    numerics_text,
    recompiles_text,
    reference_text,
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
)
from .links import gb_page
from .models import SCHEMA_VERSION, Report
from .views.compile_time import PHASE_LABELS, levers, modules_text


class _Markdown:
    """The Markdown being written, a line at a time; a block (paragraph, table, fenced code...) ends
    with a blank line."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    def para(self, *lines: str) -> None:
        """These lines, then the blank line that ends their block."""
        self.lines.extend(lines)
        self.lines.append("")

    def block(self, lines: list[str]) -> None:
        """As `para`, and nothing at all for no lines."""
        if lines:
            self.para(*lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _cell(text: object, limit: int = 160) -> str:
    """Escape for a GFM table cell: one line, no raw pipes or HTML."""
    value = " ".join(str(text).split())
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return html.escape(value, quote=False).replace("|", "\\|").replace("`", "'") or "—"


def _code(text: object) -> str:
    """Inline code that survives backticks in the text."""
    value = " ".join(str(text).split())
    fence = "``" if "`" in value else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _summary_line(report: Report) -> str:
    s = report.summary
    stop = next((e for e in report.errors if e.phase == "weights"), None)
    if stop is not None:
        return f"**No answer without the weights**: {stop.message}."
    if not s.analysis_run:
        found = len(report.bisect.smallest_failing) if report.bisect else 0
        return f"**{VERDICTS[s.verdict].markdown}** (bisection only): {found} smallest failing module(s)."
    verdict = VERDICTS[s.verdict].markdown
    if s.verdict == "clean" and s.expected_recompiles:
        verdict = "✅ clean: one graph per call; its only recompiles are expected one-offs"
    wrong = f"**❌ wrong results under compile: {s.wrong_results}**\n\n" if s.wrong_results else ""
    calls = report.target.calls if report.target.kind in ("build", "script") else None
    cliffs = "".join(f"\n\n⚠️ {cliff_line(c, calls)}" + (f" · {c.cost}" if c.cost else "") for c in report.recompile_cliffs)
    eager = eager_frames_line(report)
    cliffs += f"\n\n⚠️ {eager}" if eager else ""
    return (
        f"{wrong}**{verdict}** — {graphs_text(report)}, {s.graph_break_count} break "
        f"event(s) at {s.unique_break_sites} site(s), {recompiles_text(s)}, "
        f"{compile_time_text(report)}.{cliffs}"
    )


def _fence(text: str, lang: str) -> list[str]:
    fence = "````" if "```" in text else "```"
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def _suggestions(report: Report, md: _Markdown) -> None:
    md.para("### Suggestions")
    if not report.suggestions:
        md.para("Not run." if report.summary.verdict != "clean" or not report.summary.analysis_run else "None: nothing to fix.")
    else:
        md.add("| id | for | class | what to do | status | measured |")
        md.add("|---|---|---|---|---|---|")
        for sg in report.suggestions:
            v = sg.verified
            measured = verdict_label(sg) or ((v.summary or v.error or "") if v else "")
            md.add(
                f"| {sg.id} | {_cell(', '.join(sg.applies_to) or 'model')} | {sg.category or sg.kind} | {_cell(sg.title)} | "
                f"{suggestion_status(sg, report.fix)} | {_cell(measured)} |"
            )
        md.add("")
        for sg in report.suggestions:
            if not (sg.diff or sg.snippet):
                continue
            md.para("<details>", f"<summary>{sg.id}: {html.escape(sg.title, quote=False)}</summary>")
            md.para(html.escape(sg.rationale, quote=False))
            md.para(*(_fence(sg.diff, "diff") if sg.diff else _fence(sg.snippet or "", "python")))
            md.para(*(f"- {ref}" for ref in sg.references[:3]))
            md.para("</details>")
    fix = report.fix
    if fix is not None:
        if fix.applied and fix.verification is not None:
            v = fix.verification
            if v.numerics is not None:
                errors = f", {numerics_text(v.numerics)}"
            else:
                errors = f", max abs error vs eager {v.max_abs_error:.2e}" if v.max_abs_error is not None else ""
            md.add(f"**Fix (verified on a copy, {fix.backend}):** applied {', '.join(fix.applied)}: {v.summary}{errors}.")
        else:
            md.add("**Fix:** nothing applied.")
        md.add("")
        for sid, why in fix.dropped.items():
            md.add(f"- left out of the combined fix: {sid} ({_cell(why, 300)})")
        if fix.dropped:
            md.add("")
        if fix.remaining:
            md.para("Still left: " + "; ".join(_cell(r, 120) for r in fix.remaining[:6]) + ".")
    probe = report.shape_probe
    if probe is not None:
        md.add(
            "**Shape probe:** "
            + (
                "; ".join(f"`{d.argument}[{d.dim}]` {d.size}→{d.probed_size} {d.outcome.replace('_', ' ')}" for d in probe.dims)
                or "no tensor inputs"
            )
            + "."
        )
        if probe.recommended:
            verified = "" if probe.verified is None else (" (verified: no recompiles)" if probe.verified else " (still recompiles)")
            md.add("")
            md.add("Recommended: " + ", ".join(f"`{r}`" for r in probe.recommended) + verified + ".")
        md.add("")


def _benchmark(report: Report, md: _Markdown) -> None:
    md.para("### Benchmark")
    b = report.benchmark
    if b is None:
        md.para("Not run.")
        return
    headline = benchmark_headline(b)
    if headline:
        md.para(html.escape(headline, quote=False) + ".")
    settings = ", ".join(f"{k}={v}" for k, v in b.settings.items())
    md.para(f"Settings: {_cell(settings, 400)}.")
    md.add(
        "| arm | cold compile s | warm compile s | latency ms (median ± IQR, n) | speedup | graphs | breaks | recompiles "
        "| peak MB | error vs eager's |"
    )
    md.add("|---|---|---|---|---|---|---|---|---|---|")

    def num(value: float | int | None, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    for a in b.arms:
        lat = f"{a.latency_ms.median:.3f} ± {a.latency_ms.iqr:.3f} ({a.latency_ms.n})" if a.latency_ms else crash_cell(a) or "—"
        err = numerics_cell(a) or "—"
        warm = num(a.warm_compile_time_s, ".2f") if a.load_time_s is None else f"load {a.load_time_s:.2f}"
        md.add(
            f"| {a.name}{' ★' if a.name == b.best_arm else ''} | {num(a.compile_time_s, '.2f')} | {warm} | {lat} | "
            f"{speedup_cell(b, a) or '—'} | {num(a.graph_count, 'd')} | {num(a.graph_break_count, 'd')} | "
            f"{num(a.recompile_count, 'd')} | {num(a.peak_memory_mb, '.0f')} | {err} |"
        )
    md.add("")
    shaky = unstable_lines(b)
    if shaky:
        md.para(f"{UNSTABLE_KEY}.")
        for line in shaky:
            md.para(f"> {_cell(line, 300)}")
    if b.cold_start:
        md.para(f"Cold start of a new process: {_cell(b.cold_start, 400)}.")
    for a in b.arms:
        if a.error:
            md.para(f"> {a.name}: {_cell(a.error, 300)}")
        if a.stderr_tail:
            md.para(f"> {a.name} stderr: {_cell(stderr_tail_text(a), 300)}")
        for cause in a.recompile_causes:
            md.para(f"> {a.name} recompiles, {_cell(cause_headline(cause), 300)}")
        graphs = cudagraph_text(a)
        if graphs:
            md.para(f"> {_cell(graphs, 600)}")
    for note in b.notes:
        md.para(f"> {html.escape(note, quote=False)}")


def _doctor_cost(report: Report, md: _Markdown) -> None:
    """What the doctor itself cost, per phase, against the workload's own."""
    cost = report.cost
    line = doctor_cost_text(cost, phases=0)
    if cost is None or line is None:
        return
    md.para("<details>", f"<summary>The doctor's own cost: {html.escape(line, quote=False)}</summary>")
    md.add("| phase | wall s | peak memory MB |")
    md.add("|---|---|---|")
    for p in cost.phases:
        peak = p.peak_cuda_mb if p.peak_cuda_mb is not None else p.peak_rss_mb
        md.add(f"| {p.phase} | {p.wall_s:.1f} | {'—' if peak is None else f'{peak:.0f}'} |")
    md.add("")
    reference = reference_text(cost.reference)
    extras = [cost.workload_basis and f"The workload: {cost.workload_basis}.", reference and f"The numerics {reference}."]
    for extra in [*extras, cost.released, cost.kept, *cost.notes]:
        if extra:
            md.para(f"> {html.escape(extra, quote=False)}")
    md.para("</details>")


def _logs_section(report: Report, md: _Markdown) -> None:
    """Offline reports: parse statistics, one row per rank, and the ranks that diverge."""
    st = report.parse_stats
    if st is None:
        return
    md.para("### Logs")
    md.add(
        f"{st.lines:,} lines, {st.records:,} records: {st.used:,} used, {st.ignored:,} ignored, "
        f"{st.unknown} unknown, {st.unreadable} unreadable"
        + (f", {st.foreign_lines:,} other line(s)" if st.foreign_lines else "")
        + (f", {st.payloads_truncated} payload(s) cut at the size cap" if st.payloads_truncated else "")
        + "."
    )
    md.add("")
    for example in st.examples[:5]:
        md.add(f"- {_cell(example, 200)}")
    if st.examples:
        md.add("")
    if report.ranks:
        md.add("| rank | compiles | graphs | break events | sites | recompiles | compile s |")
        md.add("|---:|---:|---:|---:|---|---:|---:|")
        for r in report.ranks:
            md.add(
                f"| {r.rank} | {r.compiles} | {r.graphs} | {r.graph_break_count} | {_cell(', '.join(r.break_sites) or '—')} | "
                f"{r.recompile_count} | {r.compile_time_s:.2f} |"
            )
        md.add("")
    if report.divergence:
        md.para("**Ranks diverge** (ranks that compile differently can hang collectives):")
        for d in report.divergence:
            md.add(f"- {d.kind.replace('_', ' ')}: {_cell(d.message, 300)}")
        md.add("")


def _compile_time(report: Report, md: _Markdown) -> None:
    """Where compile time went: the phases as a table, the costliest compiles, the levers."""
    p = report.compile_profile
    if p is None or p.total_s <= 0:
        return
    backward = f" (frames {p.total_s - p.backward_s:.2f} s, backward graphs {p.backward_s:.2f} s)" if p.backward_s else ""
    md.para(f"### Compile time: {p.total_s:.2f} s{backward}")
    md.add("| phase | seconds | share |")
    md.add("|---|---:|---:|")
    for name, seconds in p.phases.items():
        md.add(f"| {PHASE_LABELS.get(name, name)} | {seconds:.2f} | {100 * seconds / p.total_s:.0f} % |")
    md.add("")
    if p.first_compile_s < p.total_s:
        md.para(f"First compiles {p.first_compile_s:.2f} s, recompiles {p.total_s - p.first_compile_s:.2f} s.")
    if modules_text(p) is not None:
        md.para("By module (an estimate: each compile's seconds shared among its graph's modules by op count):")
        for row in p.modules[:5]:
            md.add(f"- `{_cell(row.key or '(root)')}` {_cell(row.label)}: {row.seconds:.2f} s ({100 * row.share:.0f} %)")
        md.add("")
    for row in p.compiles[:5]:
        cause = f", cause {row.cause}" if row.cause else ""
        md.add(f"- `{row.key}` {_cell(row.label)}: {row.seconds:.2f} s ({100 * row.share:.0f} %){cause}")
    for lever in levers(report):
        md.add(f"- lever: {_cell(lever, 300)}")
    md.add("")


def render_markdown(report: Report) -> str:
    """The whole report as Markdown for a GitHub issue."""
    t, e = report.target, report.environment
    md = _Markdown()
    src = report.source
    md.para(f"## torch.compile report: `{t.name}` ({'from logs' if src else _cell(t.model_class)})")
    md.para(_summary_line(report))
    split = ddp_split_text(report.ddp_splits)
    if split:
        md.para(f"> {split}")
    md.add("| | |")
    md.add("|---|---|")
    if src is not None:
        ranks = f", ranks {', '.join(str(r) for r in src.ranks)}" if src.ranks else ""
        rows = [("logs", f"{src.kind.replace('_', ' ')}: {len(src.files)} file(s){ranks} — {_code(' '.join(src.paths))}")]
    elif t.kind == "script":
        rows = [("script", _cell(script_outcome(report) or t.spec))]
        rows += [("compiled", _cell(compiled_line(obj))) for obj in report.compiled]
        rows.append(("model", f"{_cell(t.model_class)}, {t.parameters:,} parameters, {t.modules} modules"))
    else:
        rows = [
            ("target", _code(t.spec)),
            ("model", f"{_cell(t.model_class)}, {t.parameters:,} parameters, {t.modules} modules"),
            ("calls", f"{t.calls}{' (forward + backward)' if t.train else ''}"),
        ]
        if t.weights != "real":
            rows.append(
                ("weights", "none: on meta tensors" if t.weights == "none" else f"none: a real twin's findings: {_cell(t.twin, 400)}")
            )
    rows += [
        ("python", e.python),
        ("torch", e.torch),
        ("transformers", e.transformers or "not installed"),
        ("platform", e.platform),
        ("device / backend", f"{e.device} / {e.backend}"),
        *([("not in this torch", _cell("; ".join(e.unavailable)))] if e.unavailable else []),
        ("ctc-doctor", f"{report.run.tool_version} (report schema {report.schema_version})"),
    ]
    if report.redacted:
        rows.append(("redacted", "yes: paths, user, home and host name removed"))
    for key, value in rows:
        md.add(f"| {key} | {value} |")
    md.add("")
    md.para("Command:")
    md.para("```sh", report.run.command or "(library call)", "```")
    _logs_section(report, md)

    md.para(f"### Graph breaks ({len(report.graph_breaks)} site(s))")
    if report.graph_breaks:
        md.add("| id | location | module | GB | × | reason |")
        md.add("|---|---|---|---|---:|---|")
        for site in report.graph_breaks:
            frame = site.own_frame or site.user_frame
            loc = f"{short_path(frame.file, 60)}:{frame.line}"
            if not site.own_code:
                loc += f" (in {site.library})"
            reason = site.reason + "".join(f" ({mark})" for mark in site_marks(site))
            cost = cost_text(site)
            reason += f"; {cost}" if cost else ""
            md.add(
                f"| {site.id} | {_cell(loc)} | {_cell(module_label(site.module_paths, None))} | "
                f"{_cell(', '.join(site.registry_ids) or '—')} | {site.occurrences} | {_cell(reason)} |"
            )
        md.add("")
        for site in report.graph_breaks:
            frame = site.own_frame or site.user_frame
            md.para(
                "<details>",
                f"<summary>{site.id}: {html.escape(site.gb_type)} at {html.escape(short_path(frame.file, 60))}:{frame.line}</summary>",
            )
            if frame.code:
                md.para("```python", frame.code, "```")
            if site.explanation:
                md.para(site.explanation)
            md.block([f"- hint: {hint}" for hint in site.hints])
            md.block([f"- [{gb}]({gb_page(gb)})" for gb in site.registry_ids])
            if site.user_stack:
                md.para("User stack (outermost first):")
                md.add("```")
                for f in site.user_stack:
                    md.add(f"{f.file}:{f.line} in {f.function}" + (f"\n    {f.code}" if f.code else ""))
                md.para("```")
            md.para(f"Modules: {module_label(site.module_paths, None, limit=12)} · compile ids: {', '.join(site.compile_ids)}")
            md.para("</details>")
    else:
        md.para("None.")

    if report.recompile_causes:
        md.para(f"### Recompile causes ({len(report.recompile_causes)})")
        md.para("Every recompile belongs to exactly one cause; the events follow.")
        for cause in report.recompile_causes:
            md.add(f"- **{_cell(cause_headline(cause))}**")
            if cause.functions:
                md.add(f"  - functions: {_cell(', '.join(cause.functions))}")
            if cause.module_paths:
                md.add(f"  - modules: {_cell(module_label(cause.module_paths, None, limit=12))}")
            md.add(
                f"  - recompiles: {', '.join(cause.recompiles)}"
                + (f" · first in call {cause.first_call}" if cause.first_call is not None else "")
                + (f" ({_cell(cause.trigger)})" if cause.trigger else "")
            )
            if cause.user_stack:
                f = cause.user_stack[-1]
                md.add(f"  - guard installed at `{_cell(short_path(f.file, 60))}:{f.line}`" + (f": `{_cell(f.code)}`" if f.code else ""))
            if cause.suggestion_ids:
                md.add(f"  - addressed by: {', '.join(cause.suggestion_ids)}")
        md.add("")
    _compile_time(report, md)
    md.para(f"### Recompiles ({len(report.recompiles)})")
    if report.recompiles:
        causes = cause_of(report)
        md.add("| id | cause | function | module | call | failed guard kind | guard |")
        md.add("|---|---|---|---|---:|---|---|")
        for rc in report.recompiles:
            first = rc.failed_guards[0] if rc.failed_guards else None
            kinds = ", ".join(dict.fromkeys(g.kind for g in rc.failed_guards)) or "—"
            md.add(
                f"| {rc.id} | {causes.get(rc.id, '—')} | {_cell(rc.function)} ({_cell(short_path(rc.file, 40))}:{rc.line}) | "
                f"{_cell(module_label(rc.module_paths, None))} | {rc.call_index if rc.call_index is not None else '—'} | "
                f"{_cell(kinds)} | {_cell(module_path_of(first.reason) if first else '—')} |"
            )
        md.add("")
    else:
        md.para("None.")

    md.para("### Bisection")
    b = report.bisect
    if b is None:
        md.para("Not run.")
    else:
        md.para(bisect_summary_line(b) + ".")
        if b.smallest_failing:
            rows_by_path = {row.module_path: row for row in b.trials}
            md.add("| smallest failing module | class | status | failure |")
            md.add("|---|---|---|---|")
            for path in b.smallest_failing:
                row = rows_by_path.get(path)
                if row is None:
                    continue
                found = row.own_frame or row.user_frame
                where = f" at {short_path(found.file, 50)}:{found.line}" if found else ""
                status = row.status if row.inferred_from is None else f"inferred from {row.inferred_from or '(root)'}"
                what = f"{', '.join(row.registry_ids)} {row.gb_type or row.reason or ''}".strip() + where
                md.add(f"| {_cell(path or '(root)')} | {_cell(row.module_class)} | {_cell(status)} | {_cell(what)} |")
            md.add("")
        elif b.untried:
            md.para(f"No answer: the bisection stopped with {len(b.untried)} module(s) untried.")
        else:
            md.para("No module fails `torch.compile(fullgraph=True)` on its captured inputs.")
        md.block([f"Repro: `python {path}`" for path in b.repro_paths])
        md.block([f"> {note}" for note in b.notes])

    _suggestions(report, md)
    for bug in report.torch_bugs:
        title = torch_bug_title(bug)
        md.para(f"### {title[0].upper()}{title[1:]}")
        md.block([f"- {html.escape(' '.join(line.split()), quote=False)}" for line in torch_bug_lines(bug)])
    _benchmark(report, md)
    _doctor_cost(report, md)

    steps = next_steps(report)
    if steps:
        md.para("### What to do next")
        for i, step in enumerate(steps, 1):
            md.add(f"{i}. {html.escape(' '.join(step.split()), quote=False)}")
        md.add("")
    if report.notes or report.errors:
        md.para("<details>", f"<summary>Notes ({len(report.notes)}) and errors ({len(report.errors)})</summary>")
        for note in report.notes:
            md.add(f"- {html.escape(note, quote=False)}")
        for err in report.errors:
            hint = f" What it means: {html.escape(err.hint, quote=False)}" if err.hint else ""
            md.add(f"- **error** [{err.phase}] {html.escape(err.type)}: {html.escape(err.message, quote=False)}{hint}")
        md.add("")
        md.para("</details>")
    md.add(f"<sub>Generated by ctc-doctor {report.run.tool_version}, report schema {SCHEMA_VERSION}.</sub>")
    return md.text()
