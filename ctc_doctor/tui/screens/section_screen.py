"""SectionScreen: the frame every report section shares (navigation bar, footer, search and filter);
PanelScreen: a section as one scrolling panel; TableScreen: a section as a status line, a table and the
highlighted row's detail."""

from __future__ import annotations

from typing import ClassVar, Generic, Protocol, TypeVar, cast

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, Static

from ...reports.models import Report
from ..report_index import ReportIndex
from ..widgets.detail_pane import DetailPane
from ..widgets.nav_bar import NavBar
from ..widgets.virtual_table import Column, VirtualTable

Item = TypeVar("Item")


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
    """A section of the report. Subclasses set SECTION and compose_body(); a searchable one sets
    SEARCHABLE and shows, in refresh_view(), the items that `query_text` and `filter_value` leave."""

    SECTION: ClassVar[str] = ""
    SEARCHABLE: ClassVar[bool] = False
    MAIN: ClassVar[str | type[Widget] | None] = None
    """The section's main widget (its table or tree; a selector or a widget class): what focus_main focuses."""
    BINDINGS = [
        Binding("slash", "search", "search", show=True),
        Binding("f", "filter", "filter", show=True),
        Binding("escape", "clear_search", "clear", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_text = ""
        """The search box's text, lowercase: every word of it is in a shown item."""
        self.filter_value = ""
        """The value from filter_choices() in force ("": every item)."""

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

    def refresh_view(self) -> None:
        """Show the section's items as `query_text` and `filter_value` leave them."""

    def apply_search(self, query: str) -> None:
        """Narrow the section to items matching `query` (lowercase)."""
        self.query_text = query
        self.refresh_view()

    def focus_main(self) -> None:
        """Focus the section's main widget (MAIN)."""
        if self.MAIN is not None:
            self.query_one(self.MAIN).focus()

    def filter_choices(self) -> list[tuple[str, str]]:
        """(label, value) choices for `f`; empty when the section has nothing to filter."""
        return []

    def apply_filter(self, value: str) -> None:
        """Apply a value from filter_choices()."""
        self.filter_value = value
        self.refresh_view()

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


class PanelScreen(SectionScreen):
    """A section shown as one scrolling panel: the renderables of view(), one under the other."""

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id=self.SECTION, classes="main"):
            yield Static(Group(*self.view()), id=f"{self.SECTION}-body")

    def view(self) -> list[RenderableType]:
        raise NotImplementedError

    def focus_main(self) -> None:
        self.query_one(f"#{self.SECTION}").focus()


class TableScreen(SectionScreen, Generic[Item]):
    """A section shown as a status line, a table with a row per item (`shown`, the items that search and
    filter leave) and a pane with the highlighted item's detail. Subclasses set COLUMNS and PLACEHOLDER
    and give each item's detail()."""

    COLUMNS: ClassVar[list[Column]] = []
    PLACEHOLDER: ClassVar[str] = "select a row to see its details"
    """What the detail pane says before a row is highlighted."""
    SEARCHABLE = True
    MAIN = VirtualTable

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[Item] = []

    def compose_body(self) -> ComposeResult:
        with Vertical(classes="main"):
            yield Static(id=f"{self.SECTION}-status", classes="status")
            yield VirtualTable(self.COLUMNS, id=f"{self.SECTION}-table", classes="table")
            yield DetailPane(self.PLACEHOLDER, id=f"{self.SECTION}-detail", classes="detail")

    def detail(self, item: Item) -> list[RenderableType]:
        """What the detail pane shows for an item."""
        raise NotImplementedError

    def show_status(self, text: Text) -> None:
        self.query_one(f"#{self.SECTION}-status", Static).update(text)

    def on_virtual_table_row_highlighted(self, event: VirtualTable.RowHighlighted) -> None:
        if 0 <= event.row < len(self.shown):
            self.query_one(DetailPane).show(*self.detail(self.shown[event.row]))
