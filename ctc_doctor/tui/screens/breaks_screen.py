"""BreaksScreen: the break sites as a sortable, searchable, filterable table, with a detail pane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Input

from ...reports.labels import cost_text, short_path
from ...reports.links import gb_pages
from ...reports.models import GraphBreakSite
from ..report_index import location, site_matches
from ..widgets.detail_pane import DetailPane
from ..widgets.source_view import source_view
from ..widgets.virtual_table import Column, VirtualTable
from .section_screen import SectionScreen, TableScreen, suggestion_summary

COLUMNS = [
    Column("id", "id", 7),
    Column("location", "location", 44),
    Column("module", "module", 36),
    Column("gb", "GB id", 15),
    Column("n", "occurrences", 11, right=True),
    Column("reason", "reason"),
]


def _rank(site: GraphBreakSite) -> int:
    return int(site.id[1:]) if site.id[1:].isdigit() else 1 << 30


SORTS: dict[str, tuple[str, Callable[[GraphBreakSite], Any], bool]] = {
    "id": ("rank", _rank, False),
    "n": ("occurrences", lambda s: (s.occurrences, -_rank(s)), True),
    "location": ("location", lambda s: (s.place().file, s.place().line), False),
    "module": ("module", lambda s: (s.module_paths[0] if s.module_paths else "", _rank(s)), False),
    "gb": ("GB id", lambda s: (s.registry_ids[0] if s.registry_ids else "~", _rank(s)), False),
    "reason": ("reason", lambda s: (s.gb_type, s.reason), False),
}
SORT_CYCLE = ["id", "n", "location", "module", "gb"]


def site_detail(screen: SectionScreen, site: GraphBreakSite) -> list[RenderableType]:
    index = screen.index
    frame = site.place()
    head = Text()
    head.append(f"{site.id} ", style="bold")
    head.append(site.gb_type, style="bold yellow")
    if site.registry_ids:
        head.append(f" ({', '.join(site.registry_ids)})", style="yellow")
    head.append(f" · {site.occurrences} occurrence(s)")
    if site.compile_ids:
        head.append(f" · compile id(s) {', '.join(site.compile_ids[:8])}{' …' if len(site.compile_ids) > 8 else ''}", style="dim")
    where = Text()
    where.append(f"{frame.file}:{frame.line}", style="bold cyan")
    where.append(f" in {frame.function}")
    if site.own_frame is not None and site.own_frame != site.user_frame:
        where.append(
            f"\nthe break itself is in {site.library or 'a library'}: "
            f"{site.user_frame.file}:{site.user_frame.line} in {site.user_frame.function}",
            style="dim",
        )
    if site.frame_skipped:
        where.append("\nDynamo skipped the whole function: it ran fully eager", style="yellow")
    if site.first_call_only:
        where.append("\nonly on a fresh model's first call: its line did not run again once the model was warm", style="yellow")
    where.append(f"\nmodule: {index.module_text(site.module_paths, None)}" + (f" ({site.module_class})" if site.module_class else ""))
    if site.ops_in_split_graphs:
        where.append(f" · {site.ops_in_split_graphs} op(s) in the graphs it splits", style="dim")
    cost = cost_text(site)
    if cost:
        where.append(f"\n{cost}", style="dim")
    parts: list[RenderableType] = [head, where, Text(""), Text("reason", style="bold"), Text(site.reason)]
    if site.explanation:
        parts += [Text("explanation", style="bold"), Text(site.explanation)]
    if site.hints:
        hints = Text()
        for hint in site.hints:
            hints.append(f"• {hint}\n")
        parts += [Text("hints", style="bold"), hints]
    parts += [Text("source", style="bold"), source_view(index, frame)]
    if site.user_stack:
        stack = Text()
        for f in site.user_stack:
            stack.append(f"{short_path(f.file, 60)}:{f.line}", style="cyan")
            stack.append(f" in {f.function}")
            if f.code:
                stack.append(f"   {f.code}", style="dim")
            stack.append("\n")
        parts += [Text("user stack (outermost first)", style="bold"), stack]
    parts += suggestion_summary(index, site.id)
    pages = gb_pages(site.registry_ids)
    if pages:
        parts += [Text("graph-break page", style="bold"), Text("\n".join(pages), style="underline cyan")]
    return parts


class BreaksScreen(TableScreen[GraphBreakSite]):
    SECTION = "breaks"
    COLUMNS = COLUMNS
    PLACEHOLDER = "select a break site to see its reason, hints, source and suggestions"
    BINDINGS = [Binding("s", "cycle_sort", "sort", show=True)]

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "id"
        self.reverse = False
        self.cells: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        self.cells = {
            s.id: (
                s.id,
                location(s.place()),
                self.index.module_text(s.module_paths, 36),
                ", ".join(s.registry_ids[:2]) or "—",
                str(s.occurrences),
                (s.reason if s.reason.startswith(s.gb_type) else f"{s.gb_type}: {s.reason}")[:200],  # torch's reason often names the type
            )
            for s in self.report.graph_breaks
        }
        self.refresh_view()
        self.focus_main()

    def on_screen_resume(self) -> None:
        pending = self.doctor.pending_break_filter
        if pending is not None:  # another section asked for a filtered view (b on the module tree)
            self.doctor.pending_break_filter = None
            self.query_text = ""
            self.query_one("#search", Input).value = ""
            self.apply_filter(pending)

    # --- rows ----------------------------------------------------------------------------------

    def visible_sites(self) -> list[GraphBreakSite]:
        haystack = self.index.haystack
        words = self.query_text.split()
        sites = [
            s for s in self.report.graph_breaks if site_matches(s, self.filter_value) and all(w in haystack.get(s.id, "") for w in words)
        ]
        _, key, descending = SORTS[self.sort_key]
        return sorted(sites, key=key, reverse=descending != self.reverse)

    def refresh_view(self) -> None:
        self.shown = self.visible_sites()
        self.query_one("#breaks-table", VirtualTable).set_rows([self.cells[s.id] for s in self.shown])
        self._update_status()
        if not self.shown:
            self.query_one(DetailPane).show(
                Text("no break site matches" if self.report.graph_breaks else "no graph breaks: nothing to show here", style="dim")
            )

    def _update_status(self) -> None:
        total = len(self.report.graph_breaks)
        text = Text()
        if not self.report.summary.analysis_run:
            text.append("break sites not measured (bisection-only report)", style="yellow")
        else:
            text.append(f"{len(self.shown)} of {total} break site(s)", style="bold")
            text.append(f" · sorted by {SORTS[self.sort_key][0]}{' (reversed)' if self.reverse else ''}", style="dim")
            if self.filter_value:
                text.append(f" · filter {self.filter_value}", style="yellow")
            if self.query_text:
                text.append(f" · search “{self.query_text}”", style="yellow")
        self.show_status(text)

    def detail(self, item: GraphBreakSite) -> list[RenderableType]:
        return site_detail(self, item)

    def on_virtual_table_header_clicked(self, event: VirtualTable.HeaderClicked) -> None:
        key = event.key
        if key == self.sort_key:
            self.reverse = not self.reverse
        else:
            self.sort_key, self.reverse = key, False
        self.refresh_view()

    def action_cycle_sort(self) -> None:
        i = SORT_CYCLE.index(self.sort_key) if self.sort_key in SORT_CYCLE else -1
        self.sort_key, self.reverse = SORT_CYCLE[(i + 1) % len(SORT_CYCLE)], False
        self.refresh_view()

    # --- search and filter ---------------------------------------------------------------------

    def filter_choices(self) -> list[tuple[str, str]]:
        return self.index.site_filters()
