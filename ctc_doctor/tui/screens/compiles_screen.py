"""CompilesScreen: per compile id, its metrics, perf hints, guards and graphs."""

from __future__ import annotations

from collections import defaultdict

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from ...reports.labels import short_path
from ...reports.models import CompileMetric, GuardSet, PerfHint
from ...reports.models import Graph as FxGraph
from ..widgets.detail_pane import DetailPane
from ..widgets.virtual_table import Column, VirtualTable
from .section_screen import TableScreen

NO_ID = "(none)"


class CompilesScreen(TableScreen[str]):
    SECTION = "compiles"
    COLUMNS = [
        Column("id", "compile id", 10),
        Column("function", "function", 24),
        Column("where", "where", 40),
        Column("time", "compile s", 9, right=True),
        Column("ops", "ops", 6, right=True),
        Column("guards", "guards", 6, right=True),
        Column("hints", "perf hints", 10, right=True),
        Column("status", "status"),
    ]
    PLACEHOLDER = "select a compile id"

    def on_mount(self) -> None:
        r = self.report
        self.metrics: dict[str, CompileMetric] = {m.compile_id: m for m in r.compile_metrics}
        self.guard_sets: dict[str, GuardSet] = {g.compile_id: g for g in r.guards}
        self.hints: dict[str, list[PerfHint]] = defaultdict(list)
        for h in r.perf_hints:
            self.hints[h.compile_id or NO_ID].append(h)
        self.graphs: dict[str, list[FxGraph]] = defaultdict(list)
        for g in r.graphs:
            self.graphs[g.compile_id].append(g)
        self.ids = self.index.compile_ids() + ([NO_ID] if NO_ID in self.hints else [])
        self.refresh_view()
        self.focus_main()

    def status_of(self, cid: str) -> str:
        m = self.metrics.get(cid)
        if m is None:
            return ""
        if m.fail_type:
            return m.fail_type
        return "recompile" if m.recompile_reason else "ok"

    def matches(self, cid: str) -> bool:
        if self.filter_value == "hints" and not self.hints.get(cid):
            return False
        if not self.query_text:
            return True
        m = self.metrics.get(cid)
        hay = " ".join(
            [
                cid,
                *(x or "" for x in ((m.function, m.file, m.fail_type, m.fail_reason, m.recompile_reason) if m else ())),
                *(h.message for h in self.hints.get(cid, [])),
            ]
        ).lower()
        return all(w in hay for w in self.query_text.split())

    def refresh_view(self) -> None:
        self.shown = [cid for cid in self.ids if self.matches(cid)]
        rows = []
        for cid in self.shown:
            m = self.metrics.get(cid)
            guards = self.guard_sets.get(cid)
            # torch's own count, as the detail shows it; the guard tree's line count only where torch gave none
            guard_count = m.guard_count if m and m.guard_count is not None else (guards.count if guards else None)
            hints = len(self.hints.get(cid, []))
            rows.append(
                (
                    cid,
                    (m.function or "") if m else "",
                    f"{short_path(m.file, 40)}:{m.line}" if m and m.file else "",
                    f"{m.duration_s:.3f}" if m and m.duration_s is not None else "",
                    str(m.op_count) if m and m.op_count is not None else "",
                    "" if guard_count is None else str(guard_count),
                    str(hints) if hints else "",
                    self.status_of(cid),
                )
            )
        self.query_one(VirtualTable).set_rows(rows)
        status = Text()
        status.append(f"{len(self.shown)} of {len(self.ids)} compile id(s)", style="bold")
        status.append(f" · {len(self.report.perf_hints)} perf hint(s) · {len(self.report.guards)} guard set(s)", style="dim")
        if not self.report.perf_hints:
            status.append(" · perf hints come from inductor: none with this backend", style="dim")
        self.show_status(status)
        if not self.shown:
            self.query_one(DetailPane).show(Text("no compile ids" if not self.ids else "no compile id matches", style="dim"))

    def detail(self, cid: str) -> list[RenderableType]:
        parts: list[RenderableType] = [Text(f"compile id {cid}", style="bold")]
        m = self.metrics.get(cid)
        if m is not None:
            body = Text()
            if m.function:
                body.append(f"{m.function}", style="bold")
                body.append(f" at {m.file}:{m.line}\n", style="cyan")
            fields = [
                ("frame compile time", f"{m.duration_s:.3f} s" if m.duration_s is not None else None),
                ("backend compile time", f"{m.backend_compile_time_s:.3f} s" if m.backend_compile_time_s is not None else None),
                ("ops", m.op_count),
                ("guards", m.guard_count),
                ("shape-env guards", m.shape_env_guard_count),
                ("cache entries before", m.cache_size),
            ]
            for name, value in fields:
                if value is not None:
                    body.append(f"{name}: ", style="dim")
                    body.append(f"{value}\n")
            events = [
                (m.fail_type and f"failed: {m.fail_type}: {m.fail_reason or ''}", "red"),
                (m.recompile_reason and f"recompiled because: {m.recompile_reason}", "magenta"),
                *((f"restart: {reason}", "yellow") for reason in m.restart_reasons),
            ]
            for line, style in events:
                if line:
                    body.append(f"{line}\n", style=style)
            parts.append(body)
        graphs = self.graphs.get(cid, [])
        for g in graphs:
            top = ", ".join(f"{op}×{n}" for op, n in sorted(g.ops.items(), key=lambda kv: -kv[1])[:8])
            parts.append(Text(f"graph: {g.op_count} op(s), {g.input_count} input(s){' · ' + top if top else ''}", style="dim"))
        hints = self.hints.get(cid, [])
        parts.append(Text(f"perf hints ({len(hints)})", style="bold"))
        if hints:
            text = Text()
            for h in hints:
                text.append(f"• {h.message}", style="yellow")
                text.append(f"  [{h.logger}]\n", style="dim")
            parts.append(text)
        else:
            parts.append(Text("none", style="dim"))
        guards = self.guard_sets.get(cid)
        parts.append(Text(f"guard tree ({f'{guards.count} lines' if guards else 'not recorded'})", style="bold"))
        if guards is not None and guards.tree:
            parts.append(Syntax(guards.tree, "text", theme="ansi_dark", word_wrap=True))
        elif guards is not None:
            parts.append(Text("guard text not kept: re-run with --guards to see the guard tree", style="dim"))
        return parts

    def filter_choices(self) -> list[tuple[str, str]]:
        return [("every compile id", ""), ("compile ids with perf hints", "hints")]
