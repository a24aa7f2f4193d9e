"""VirtualTable: a table that renders only the rows on screen, for reports with thousands of sites.

Textual's DataTable measures every cell when rows change (seconds for 5,000 rows). Here rows are plain
tuples of strings; filtering and sorting replace the list, and only visible lines are rendered
(Line API), so opening, searching and scrolling cost the same for 50 or 50,000 rows. Cells are
plain text: report strings are never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    max_width: int = 40
    """Widest the column gets (the last column takes what is left)."""
    right: bool = False
    """Right-justify (numbers)."""


class VirtualTable(ScrollView, can_focus=True):
    """Rows of strings with a fixed header line and a row cursor."""

    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor", "virtual-table--odd"}
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    VirtualTable > .virtual-table--header { background: $panel; text-style: bold; }
    VirtualTable > .virtual-table--cursor { background: $accent 40%; }
    VirtualTable:focus > .virtual-table--cursor { background: $accent; }
    VirtualTable > .virtual-table--odd { background: $boost; }
    """
    BINDINGS = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "jump(0)", "first", show=False),
        Binding("end", "jump(-1)", "last", show=False),
        Binding("enter", "select", "select", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)

    @dataclass
    class RowHighlighted(Message):
        table: VirtualTable
        row: int

    @dataclass
    class RowSelected(Message):
        table: VirtualTable
        row: int

    @dataclass
    class HeaderClicked(Message):
        table: VirtualTable
        key: str

    def __init__(self, columns: list[Column], *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns = columns
        self.rows: Sequence[tuple[str, ...]] = []
        self.styles_per_row: list[Style | None] = []
        self.widths: list[int] = [cell_len(c.label) for c in columns]

    # --- data ----------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def set_rows(self, rows: Sequence[tuple[str, ...]], row_styles: list[Style | None] | None = None, cursor: int = 0) -> None:
        """Replace every row; column widths follow the content (capped), the cursor goes to `cursor`."""
        self.rows = rows
        self.styles_per_row = row_styles or []
        widths = [cell_len(c.label) for c in self.columns]
        for row in rows[:2000]:  # a sample is enough to size the columns
            for i, cell in enumerate(row):
                if len(cell) > widths[i]:
                    widths[i] = min(self.columns[i].max_width, cell_len(cell))
        self.widths = widths
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self.cursor_row = max(0, min(cursor, len(rows) - 1))
        self.scroll_to(y=0, animate=False)
        self.refresh()

    # --- rendering -----------------------------------------------------------------------------

    def _layout(self, width: int) -> list[int]:
        widths = list(self.widths)
        used = sum(widths[:-1]) + 2 * len(widths)
        widths[-1] = max(cell_len(self.columns[-1].label), width - used)
        return widths

    def _line(self, cells: tuple[str, ...], base: Style, width: int) -> Strip:
        segments = [Segment(" ", base)]
        for column, cell, w in zip(self.columns, cells, self._layout(width), strict=False):
            text = cell if cell_len(cell) <= w else set_cell_size(cell, w - 1) + "…"
            text = text.rjust(w) if column.right else set_cell_size(text, w)
            segments.append(Segment(text + "  ", base))
        return Strip(segments).crop(0, width).extend_cell_length(width, base)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._line(tuple(c.label for c in self.columns), self.get_component_rich_style("virtual-table--header"), width)
        index = self.scroll_offset.y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        if index == self.cursor_row:
            base = self.get_component_rich_style("virtual-table--cursor")
        elif index % 2:
            base = self.get_component_rich_style("virtual-table--odd")
        else:
            base = self.rich_style
        extra = self.styles_per_row[index] if index < len(self.styles_per_row) else None
        return self._line(self.rows[index], base + extra if extra else base, width)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)

    # --- cursor --------------------------------------------------------------------------------

    @property
    def page(self) -> int:
        return max(1, self.size.height - 2)

    def watch_cursor_row(self, row: int) -> None:
        top = self.scroll_offset.y
        visible = max(1, self.size.height - 1)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)
        self.refresh()
        if self.rows:
            self.post_message(self.RowHighlighted(self, row))

    def move_cursor(self, row: int) -> None:
        if self.rows:
            self.cursor_row = max(0, min(row, len(self.rows) - 1))

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * self.page)

    def action_jump(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.rows) - 1)

    def action_select(self) -> None:
        if self.rows:
            self.post_message(self.RowSelected(self, self.cursor_row))

    def on_click(self, event: Click) -> None:
        if event.y == 0:
            x = 1
            for column, w in zip(self.columns, self._layout(self.size.width), strict=False):
                if x <= event.x < x + w + 2:
                    self.post_message(self.HeaderClicked(self, column.key))
                    return
                x += w + 2
            return
        row = self.scroll_offset.y + event.y - 1
        if 0 <= row < len(self.rows):
            self.move_cursor(row)
