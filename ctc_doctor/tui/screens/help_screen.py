"""HelpScreen: the keys (`?`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = [
    ("1 … 7", "switch section (overview, breaks, recompiles, modules, suggestions, benchmark, hints & guards)"),
    ("tab / shift+tab", "next / previous section"),
    ("↑ ↓ PgUp PgDn", "move in the table or tree; the detail pane follows the selection"),
    ("click a column header", "sort by it (again: reverse); `s` cycles the sort order"),
    ("/", "search the current section (Enter: back to the table, Escape: clear)"),
    ("f", "filter by module, category, GB id, guard kind or status"),
    ("b", "on the module tree: the break sites of the selected module and its submodules"),
    ("e", "export the report as Markdown (for a GitHub issue)"),
    ("escape", "clear the search; during a live run: cancel the analysis"),
    ("?", "this help"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("what")
        for key, what in KEYS:
            table.add_row(key, what)
        with Vertical(id="help-dialog", classes="dialog"):
            yield Static(Text("ctc-doctor keys (Escape closes)", style="bold"), classes="dialog-title")
            yield Static(table)
