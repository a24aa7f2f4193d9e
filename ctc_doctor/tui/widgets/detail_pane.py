"""DetailPane: a scrollable pane that shows the selected item; `plain` gives its text (for tests)."""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


def plain_text(part: RenderableType) -> str:
    """A renderable as plain text (Text and Syntax directly, anything else rendered 200 columns wide)."""
    if isinstance(part, Text):
        return part.plain
    if isinstance(part, Syntax):
        return part.code
    if isinstance(part, Group):
        return "\n".join(plain_text(p) for p in part.renderables)
    console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
    console.print(part)
    return console.export_text()


class DetailPane(VerticalScroll):
    """Shows renderables (never markup strings: report text is data)."""

    def __init__(self, placeholder: str = "select a row to see its details", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.placeholder = placeholder
        self._parts: tuple[RenderableType, ...] = (Text(placeholder, style="dim"),)

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(self._parts[0], classes="detail-body")

    @property
    def plain(self) -> str:
        """Plain text of what is shown."""
        return "\n".join(plain_text(p) for p in self._parts)

    def show(self, *parts: RenderableType) -> None:
        self._parts = parts
        self.query_one(".detail-body", Static).update(Group(*parts))
        self.scroll_home(animate=False)
