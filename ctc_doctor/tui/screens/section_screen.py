"""SectionScreen: the frame every report section shares (navigation bar, footer, search and filter)."""

from __future__ import annotations

from typing import ClassVar, Protocol, cast

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input

from ...reports.models import Report
from ..report_index import ReportIndex
from ..widgets.nav_bar import NavBar


class ReportHost(Protocol):
    """What a section screen needs of the app that shows it (`DoctorApp`), so screens never import it."""

    index: ReportIndex | None
    pending_break_filter: str | None
    """A filter the breaks screen applies when it opens (`f` on a module: its breaks)."""

    def nav_sections(self) -> list[tuple[str, tuple[str, ...]]]: ...

    def show_breaks_of(self, module_path: str) -> None: ...


def suggestion_summary(index: ReportIndex, item_id: str) -> list[RenderableType]:
    """One line per suggestion for a break site or recompile: id, status, title, measured effect."""
    suggestions = index.suggestions(item_id)
    if not suggestions:
        return []
    body = Text()
    for s in suggestions:
        status = index.status(s)
        body.append(f"{s.id} ", style="bold")
        body.append(f"[{status}] ", style="green" if status in ("applied", "works") else "dim")
        body.append(s.title)
        if s.verified and s.verified.summary:
            body.append(f" — measured: {s.verified.summary}", style="dim")
        body.append("\n")
    return [Text("suggestions (5 shows them in full)", style="bold"), body]


class SectionScreen(Screen[None]):
    """A section of the report. Subclasses set SECTION and compose_body()."""

    SECTION: ClassVar[str] = ""
    SEARCHABLE: ClassVar[bool] = False
    BINDINGS = [
        Binding("slash", "search", "search", show=True),
        Binding("f", "filter", "filter", show=True),
        Binding("escape", "clear_search", "clear", show=False),
    ]

    @property
    def doctor(self) -> ReportHost:
        return cast("ReportHost", self.app)

    @property
    def index(self) -> ReportIndex:
        index = self.doctor.index
        assert index is not None
        return index

    @property
    def report(self) -> Report:
        return self.index.report

    def compose(self) -> ComposeResult:
        yield NavBar(self.doctor.nav_sections(), self.SECTION)
        if self.SEARCHABLE:
            yield Input(
                placeholder="search (/): text in ids, types, reasons, files, modules — Escape clears", id="search", classes="search"
            )
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    # --- search and filter ------------------------------------------------------------------------

    def action_search(self) -> None:
        if not self.SEARCHABLE:
            self.notify("nothing to search on this screen: try 2 (graph breaks)", severity="information", markup=False)
            return
        self.query_one("#search", Input).focus()

    def action_clear_search(self) -> None:
        if not self.SEARCHABLE:
            return
        box = self.query_one("#search", Input)
        if box.value:
            box.value = ""
        self.focus_main()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.apply_search(event.value.strip().lower())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.focus_main()

    def apply_search(self, query: str) -> None:
        """Narrow the section to items matching `query` (lowercase)."""

    def focus_main(self) -> None:
        """Focus the section's main widget (the table or tree)."""

    def filter_choices(self) -> list[tuple[str, str]]:
        """(label, value) choices for `f`; empty when the section has nothing to filter."""
        return []

    def apply_filter(self, value: str) -> None:
        """Apply a value from filter_choices()."""

    def action_filter(self) -> None:
        choices = self.filter_choices()
        if not choices:
            self.notify("nothing to filter on this screen", markup=False)
            return
        from .filter_screen import FilterScreen

        def chosen(value: str | None) -> None:
            if value is not None:
                self.apply_filter(value)

        self.app.push_screen(FilterScreen(choices), chosen)
