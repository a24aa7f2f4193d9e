"""FilterScreen: pick a module, category or kind to narrow the current section (`f`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class FilterScreen(ModalScreen[str | None]):
    """A list of (label, value) choices; Enter picks, Escape keeps the current filter."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-dialog", classes="dialog"):
            yield Label("filter by (Enter picks, Escape cancels)", classes="dialog-title")
            yield OptionList(*[Option(label, id=str(i)) for i, (label, _) in enumerate(self.choices)], id="filter-options")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choices[int(event.option.id or 0)][1])
