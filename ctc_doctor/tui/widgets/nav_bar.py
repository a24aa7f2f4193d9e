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
    """Tabs for every section, the active one highlighted; the longest labels that fit the width."""

    def __init__(self, sections: list[tuple[str, tuple[str, ...]]], active: str) -> None:
        super().__init__(id="nav")
        self.sections = sections
        self.active = active

    def labels(self, width: int) -> list[str]:
        """The tab texts: the first set of labels whose tabs fit in `width` columns, else the shortest."""
        tiers = len(self.sections[0][1]) if self.sections else 0
        texts: list[str] = []
        for tier in range(tiers):
            texts = [f" {i} {labels[min(tier, len(labels) - 1)]} " for i, (_, labels) in enumerate(self.sections, 1)]
            if sum(len(t) for t in texts) <= width:
                break
        return texts

    def compose(self) -> ComposeResult:
        for (section, _), text in zip(self.sections, self.labels(self.app.size.width), strict=True):
            yield NavTab(section, text, section == self.active)

    def on_resize(self) -> None:
        for tab, text in zip(self.query(NavTab), self.labels(self.size.width), strict=True):
            tab.update(text)
