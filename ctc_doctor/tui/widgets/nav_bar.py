"""NavBar: the sections as tabs with their counts; number keys or a click switch."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.events import Click
from textual.widgets import Static

from ..messages import ShowSection


class NavTab(Static):
    """One section tab."""

    def __init__(self, section: str, label: str, active: bool) -> None:
        super().__init__(label, markup=False, classes="nav-tab -active" if active else "nav-tab")
        self.section = section

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(ShowSection(self.section))


class NavBar(Horizontal):
    """Tabs for every section, the active one highlighted."""

    def __init__(self, sections: list[tuple[str, str]], active: str) -> None:
        super().__init__(id="nav")
        self.sections = sections
        self.active = active

    def compose(self) -> ComposeResult:
        for i, (section, label) in enumerate(self.sections, 1):
            yield NavTab(section, f" {i} {label} ", section == self.active)
