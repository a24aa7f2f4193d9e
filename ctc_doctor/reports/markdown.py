"""A report as GitHub-flavoured Markdown, ready to paste into an issue (no torch import).

Layout: a one-line summary, the environment and command, ranked break sites (a table, then one
collapsible `<details>` per site with hints and the user stack), recompiles with their failed guards,
the bisection result with repro paths, suggestions and the benchmark (or "not run"), notes and errors.
Every value that comes from the report is escaped for table cells and HTML.
"""

from __future__ import annotations

import html

from .models import SCHEMA_VERSION, Report
from .render import bisect_summary_line, module_label, next_steps, short_path

_VERDICT = {
    "clean": "✅ clean: one graph per call, no recompiles",
    "graph_breaks": "⚠️ graph breaks",
    "recompiles": "⚠️ recompiles",
    "graph_breaks_and_recompiles": "❌ graph breaks and recompiles",
    "failed": "❌ failed",
}


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
    if not s.analysis_run:
        found = len(report.bisect.smallest_failing) if report.bisect else 0
        return f"**{_VERDICT[s.verdict]}** (bisection only): {found} smallest failing module(s)."
    return (
        f"**{_VERDICT[s.verdict]}** — {s.graph_count} graph(s) on the first call, {s.graph_break_count} break "
        f"event(s) at {s.unique_break_sites} site(s), {s.recompile_count} recompile(s), "
        f"compile time {s.compile_time_s:.2f} s."
    )


def render_markdown(report: Report) -> str:
    """The whole report as Markdown for a GitHub issue."""
    t, e = report.target, report.environment
    out: list[str] = []
    add = out.append

    def paragraph(lines: list[str]) -> None:
        """Lines then a blank line; nothing for no lines."""
        if lines:
            out.extend(lines)
            add("")
    add(f"## torch.compile report: `{t.name}` ({_cell(t.model_class)})")
    add("")
    add(_summary_line(report))
    add("")
    add("| | |")
    add("|---|---|")
    rows = [
        ("target", _code(t.spec)),
        ("model", f"{_cell(t.model_class)}, {t.parameters:,} parameters, {t.modules} modules"),
        ("calls", f"{t.calls}{' (forward + backward)' if t.train else ''}"),
        ("python", e.python),
        ("torch", e.torch),
        ("transformers", e.transformers or "not installed"),
        ("platform", e.platform),
        ("device / backend", f"{e.device} / {e.backend}"),
        ("ctc-doctor", f"{report.run.tool_version} (report schema {report.schema_version})"),
    ]
    if report.redacted:
        rows.append(("redacted", "yes: paths, user, home and host name removed"))
    for key, value in rows:
        add(f"| {key} | {value} |")
    add("")
    add("Command:")
    add("")
    add("```sh")
    add(report.run.command or "(library call)")
    add("```")
    add("")

    add(f"### Graph breaks ({len(report.graph_breaks)} site(s))")
    add("")
    if report.graph_breaks:
        add("| id | location | module | GB | × | reason |")
        add("|---|---|---|---|---:|---|")
        for site in report.graph_breaks:
            frame = site.own_frame or site.user_frame
            loc = f"{short_path(frame.file, 60)}:{frame.line}"
            if not site.own_code:
                loc += f" (in {site.library})"
            reason = site.reason + (" (whole function ran eager)" if site.frame_skipped else "")
            add(
                f"| {site.id} | {_cell(loc)} | {_cell(module_label(site.module_paths, None))} | "
                f"{_cell(', '.join(site.registry_ids) or '—')} | {site.occurrences} | {_cell(reason)} |"
            )
        add("")
        for site in report.graph_breaks:
            frame = site.own_frame or site.user_frame
            add("<details>")
            add(f"<summary>{site.id}: {html.escape(site.gb_type)} at {html.escape(short_path(frame.file, 60))}:{frame.line}</summary>")
            add("")
            if frame.code:
                add("```python")
                add(frame.code)
                add("```")
                add("")
            if site.explanation:
                add(site.explanation)
                add("")
            paragraph([f"- hint: {hint}" for hint in site.hints])
            paragraph(
                [f"- [{gb}](https://meta-pytorch.github.io/compile-graph-break-site/gb/{gb.lower()}.html)" for gb in site.registry_ids]
            )
            if site.user_stack:
                add("User stack (outermost first):")
                add("")
                add("```")
                for f in site.user_stack:
                    add(f"{f.file}:{f.line} in {f.function}" + (f"\n    {f.code}" if f.code else ""))
                add("```")
                add("")
            add(f"Modules: {module_label(site.module_paths, None, limit=12)} · compile ids: {', '.join(site.compile_ids)}")
            add("")
            add("</details>")
            add("")
    else:
        add("None.")
        add("")

    add(f"### Recompiles ({len(report.recompiles)})")
    add("")
    if report.recompiles:
        add("| id | function | module | call | failed guard kind | guard |")
        add("|---|---|---|---:|---|---|")
        for rc in report.recompiles:
            first = rc.failed_guards[0] if rc.failed_guards else None
            kinds = ", ".join(dict.fromkeys(g.kind for g in rc.failed_guards)) or "—"
            add(
                f"| {rc.id} | {_cell(rc.function)} ({_cell(short_path(rc.file, 40))}:{rc.line}) | "
                f"{_cell(module_label(rc.module_paths, None))} | {rc.call_index if rc.call_index is not None else '—'} | "
                f"{_cell(kinds)} | {_cell(first.reason if first else '—')} |"
            )
        add("")
    else:
        add("None.")
        add("")

    add("### Bisection")
    add("")
    b = report.bisect
    if b is None:
        add("Not run.")
        add("")
    else:
        add(bisect_summary_line(b) + ".")
        add("")
        if b.smallest_failing:
            rows_by_path = {row.module_path: row for row in b.trials}
            add("| smallest failing module | class | status | failure |")
            add("|---|---|---|---|")
            for path in b.smallest_failing:
                row = rows_by_path.get(path)
                if row is None:
                    continue
                frame = row.own_frame or row.user_frame
                where = f" at {short_path(frame.file, 50)}:{frame.line}" if frame else ""
                status = row.status if row.inferred_from is None else f"inferred from {row.inferred_from or '(root)'}"
                what = f"{', '.join(row.registry_ids)} {row.gb_type or row.reason or ''}".strip() + where
                add(f"| {_cell(path or '(root)')} | {_cell(row.module_class)} | {_cell(status)} | {_cell(what)} |")
            add("")
        else:
            add("No module fails `torch.compile(fullgraph=True)` on its captured inputs.")
            add("")
        paragraph([f"Repro: `python {path}`" for path in b.repro_paths])
        paragraph([f"> {note}" for note in b.notes])

    add("### Suggestions")
    add("")
    add("Not run." if not report.suggestions else f"{len(report.suggestions)} suggestion(s) in the JSON report.")
    add("")
    add("### Benchmark")
    add("")
    add("Not run." if report.benchmark is None else "See the JSON report.")
    add("")

    steps = next_steps(report)
    if steps:
        add("### What to do next")
        add("")
        for i, step in enumerate(steps, 1):
            add(f"{i}. {html.escape(' '.join(step.split()), quote=False)}")
        add("")
    if report.notes or report.errors:
        add("<details>")
        add(f"<summary>Notes ({len(report.notes)}) and errors ({len(report.errors)})</summary>")
        add("")
        for note in report.notes:
            add(f"- {html.escape(note, quote=False)}")
        for err in report.errors:
            add(f"- **error** [{err.phase}] {html.escape(err.type)}: {html.escape(err.message, quote=False)}")
        add("")
        add("</details>")
        add("")
    add(f"<sub>Generated by ctc-doctor {report.run.tool_version}, report schema {SCHEMA_VERSION}.</sub>")
    return "\n".join(out) + "\n"
