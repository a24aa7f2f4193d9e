"""DetailPane: a scrollable pane that shows the selected item; keeps a plain-text copy for tests."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


def _plain(part: RenderableType) -> str:
    if isinstance(part, Text):
        return part.plain
    if isinstance(part, Syntax):
        return part.code
    if isinstance(part, str):
        return part
    if isinstance(part, Group):
        return "\n".join(_plain(p) for p in part.renderables)
    return ""


class DetailPane(VerticalScroll):
    """Shows renderables (never markup strings: report text is data)."""

    def __init__(self, placeholder: str = "select a row to see its details", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.placeholder = placeholder
        self.plain = placeholder
        """Plain text of what is shown (Text and Syntax parts)."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(Text(self.placeholder, style="dim"), classes="detail-body")

    def show(self, *parts: RenderableType) -> None:
        self.plain = "\n".join(_plain(p) for p in parts)
        self.query_one(".detail-body", Static).update(Group(*parts))
        self.scroll_home(animate=False)
