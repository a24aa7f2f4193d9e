"""SuggestionsScreen: each suggestion with rationale, snippet or diff, whether it was applied, and its measured effect."""

from __future__ import annotations

import json
from collections import defaultdict

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from ...reports import labels
from ...reports.labels import numerics_text, verdict_label
from ...reports.models import Suggestion
from ...reports.verdicts import delta_text
from ..widgets.detail_pane import DetailPane
from ..widgets.virtual_table import Column, VirtualTable
from .section_screen import SectionScreen, TableScreen

STATUS_STYLE = {**labels.STATUS_STYLE, "applied": "bold green"}
STATUS_MEANING = {
    "applied": "applied in the combined fix, verified on a copy",
    "works": "works alone and is safe, but another suggestion already covers it",
    "measured": "measured (see the benchmark)",
    "unsafe": "changed the outputs: not applied",
    "failed": "could not be applied or run: not applied",
    "no effect": "safe but changed no count: not applied",
    "no gain": "measured no gain",
    "redundant": "works, but an earlier suggestion already fixes the same thing",
    "auto": "auto-applicable (run `ctc-doctor fix` to verify it)",
    "advice": "advice: needs a change by hand",
}


_VERDICT_STYLE = {"recommended": "green", "trade_off": "yellow", "worse": "red", "failed": "red", "no_effect": "dim"}


def suggestion_detail(screen: SectionScreen, s: Suggestion) -> list[RenderableType]:
    status = screen.index.status(s)
    head = Text()
    head.append(f"{s.id} ", style="bold")
    head.append(s.title, style="bold")
    meta = Text()
    meta.append(f"{status}", style=STATUS_STYLE.get(status, ""))
    meta.append(f" — {STATUS_MEANING.get(status, '')}", style="dim")
    meta.append(f"\nrule {s.rule} · {s.category or 'kind'} · {s.kind} · for {', '.join(s.applies_to) or 'the whole model'}", style="dim")
    parts: list[RenderableType] = [head, meta, Text(""), Text("why", style="bold"), Text(s.rationale)]
    if s.verdict is not None:
        parts += [Text("verdict", style="bold"), Text(verdict_label(s), style=_VERDICT_STYLE.get(s.verdict, ""))]
        for d in s.deltas:
            parts.append(Text(f"  {delta_text(d)}  [{d.source}]", style="dim"))
    v = s.verified
    if v is not None:
        body = Text()
        if v.summary:
            body.append(v.summary + "\n", style="green" if v.effective else "yellow")
        if v.before is not None and v.after is not None:
            b, a = v.before, v.after
            body.append(
                f"graphs {b.graph_count} → {a.graph_count} · break sites {b.unique_break_sites} → {a.unique_break_sites} · "
                f"recompiles {b.recompile_count} → {a.recompile_count} · compile {b.compile_time_s:.2f} s → {a.compile_time_s:.2f} s\n"
            )
        if v.numerics is not None:
            body.append(numerics_text(v.numerics) + "\n", style="" if v.numerics.ok else "red")
        elif v.numerics_ok is not None:
            err = f" (max abs error {v.max_abs_error:.1e})" if v.max_abs_error is not None else ""
            body.append(f"outputs {'match' if v.numerics_ok else 'DIFFER from'} eager{err}\n", style="" if v.numerics_ok else "red")
        if v.fixed:
            body.append(f"fixes {', '.join(v.fixed)}\n")
        if v.new_sites:
            body.append(f"new: {'; '.join(v.new_sites)}\n", style="yellow")
        if v.error:
            body.append(f"error: {v.error}\n", style="red")
        parts += [Text("measured on a copy", style="bold"), body]
    if s.diff:
        parts += [Text("diff", style="bold"), Syntax(s.diff, "diff", theme="ansi_dark", word_wrap=True)]
    if s.snippet:
        parts += [Text("code", style="bold"), Syntax(s.snippet, "python", theme="ansi_dark", word_wrap=True)]
    if s.action is not None:
        action = s.action.model_dump(exclude_defaults=True)
        parts += [
            Text("what `ctc-doctor fix` applies (data, never code)", style="bold"),
            Text(json.dumps(action, default=str), style="dim"),
        ]
    if s.references:
        parts += [Text("references", style="bold"), Text("\n".join(s.references), style="underline cyan")]
    return parts


class SuggestionsScreen(TableScreen[Suggestion]):
    SECTION = "suggestions"
    # what to do first, after id, target and status: at 80 columns it is the column that must show
    COLUMNS = [
        Column("id", "id", 5),
        Column("for", "for", 12),
        Column("status", "status", 10),
        Column("title", "what to do", 52),
        Column("measured", "measured", 44),
        Column("kind", "kind"),
    ]
    PLACEHOLDER = "select a suggestion"

    def on_mount(self) -> None:
        self.refresh_view()
        self.focus_main()

    def matches(self, s: Suggestion) -> bool:
        kind, _, arg = self.filter_value.partition(":")
        if kind == "kind" and s.kind != arg:
            return False
        if kind == "status" and self.index.status(s) != arg:
            return False
        hay = " ".join([s.id, s.rule, s.title, s.kind, s.rationale, *s.applies_to]).lower()
        return all(w in hay for w in self.query_text.split())

    def refresh_view(self) -> None:
        self.shown = [s for s in self.report.suggestions if self.matches(s)]
        rows = []
        for s in self.shown:
            measured = verdict_label(s) or (s.verified.summary if s.verified and s.verified.summary else "")
            target = ",".join(s.applies_to[:3]) + ("…" if len(s.applies_to) > 3 else "")
            rows.append((s.id, target or "model", self.index.status(s), s.title, measured, s.kind))
        self.query_one(VirtualTable).set_rows(rows)
        status_line = Text()
        if not self.report.suggestions:
            message = "no suggestions: nothing to fix" if self.report.summary.analysis_run else "suggestions: not run"
            status_line.append(message, style="dim")
            self.query_one(DetailPane).show(Text(message, style="dim"))
        else:
            fix = self.report.fix
            status_line.append(f"{len(self.shown)} of {len(self.report.suggestions)} suggestion(s)", style="bold")
            if fix is None:
                status_line.append(" · fix not run: effects not measured (ctc-doctor fix TARGET)", style="dim")
            elif fix.applied:
                status_line.append(f" · applied together: {', '.join(fix.applied)}", style="green")
                if fix.verification is not None and fix.verification.summary:
                    status_line.append(f" → {fix.verification.summary}", style="green")
            if self.filter_value:
                status_line.append(f" · filter {self.filter_value}", style="yellow")
            if not self.shown:
                self.query_one(DetailPane).show(Text("no suggestion matches", style="dim"))
        self.show_status(status_line)

    def detail(self, item: Suggestion) -> list[RenderableType]:
        return suggestion_detail(self, item)

    def filter_choices(self) -> list[tuple[str, str]]:
        if not self.report.suggestions:
            return []
        kinds: dict[str, int] = defaultdict(int)
        statuses: dict[str, int] = defaultdict(int)
        for s in self.report.suggestions:
            kinds[s.kind] += 1
            statuses[self.index.status(s)] += 1
        return (
            [("all suggestions", "")]
            + [(f"status: {k} ({n})", f"status:{k}") for k, n in sorted(statuses.items(), key=lambda kv: -kv[1])]
            + [(f"kind: {k} ({n})", f"kind:{k}") for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])]
        )
