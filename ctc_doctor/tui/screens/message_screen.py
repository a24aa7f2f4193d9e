"""MessageScreen: a report that cannot be shown, a failed or cancelled live run. `q` quits."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


class MessageScreen(Screen[None]):
    """A title, a one-line message and optional detail lines (e.g. the tail of the run's output)."""

    BINDINGS = [Binding("q,escape", "app.quit", "quit")]

    def __init__(self, title: str, message: str, details: list[str] | None = None, *, error: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.message = message
        self.details = details or []
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="message"):
            yield Static(Text(self.title_text, style="bold red" if self.error else "bold yellow"), id="message-title")
            yield Static(Text(self.message), id="message-text")
            if self.details:
                with VerticalScroll(id="message-details"):
                    yield Static(Group(*[Text(line, style="dim") for line in self.details]))
        yield Footer()
