"""SweepApp: browse a sweep directory: the fleet's dashboard, a sortable target table, a plot of
speedup against compile time per target; Enter on a target ends the app with its report's path (the
CLI then opens that report in DoctorApp and comes back here when it is closed).

    SweepApp(summary, directory)   `ctc-doctor show sweep/ --tui`, `ctc-doctor tui sweep/`
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static
from textual_plotext import PlotextPlot

from ..sweep.summary import bench_numerics_cell, dashboard_cells, ranked_rows, short_name
from ..sweep.summary_models import SweepSummary, SweepTarget

Key = Callable[[SweepTarget], Any]


def _bench(row: SweepTarget, name: str) -> float | None:
    return getattr(row.bench, name) if row.bench is not None else None


SORTS: list[tuple[str, str, Key, bool]] = [
    # (column, what the status line says, key, descending); None sorts last either way
    ("target", "needing a look first", lambda r: 0, False),  # ranked_rows' order
    ("speedup", "speedup, slowest first", lambda r: _bench(r, "speedup"), False),
    ("compile s", "compile time, longest first", lambda r: _bench(r, "compile_s"), True),
    ("memory", "memory ratio, lowest first", lambda r: _bench(r, "memory_ratio"), False),
    ("breaks", "break sites, most first", lambda r: len(r.break_sites), True),
    ("recompiles", "recompiles, most first", lambda r: r.recompile_count, True),
    ("status", "status", lambda r: r.status, False),
]
COLUMNS = ["target", "status", "speedup", "best", "compile s", "memory", "numerics", "breaks", "recompiles"]


def _times(value: float | None) -> Text:
    return Text("—" if value is None else f"{value:.2f}x", justify="right", style="red" if value is not None and value < 1 else "")


def _cells(row: SweepTarget) -> list[Text]:
    b = row.bench
    failing = row.status in ("failed", "error", "timeout")
    numerics = bench_numerics_cell(b)
    return [
        Text(short_name(row.target)),
        Text(row.status, style="bold red" if failing else "green" if row.status == "clean" else "yellow"),
        _times(b.speedup if b else None),
        Text(f"{b.best_arm} {b.best_speedup:.2f}x" if b and b.best_arm and b.best_speedup else "—"),
        Text("—" if b is None or b.compile_s is None else f"{b.compile_s:.1f}", justify="right"),
        _times(b.memory_ratio if b else None),
        Text(numerics, style="bold red" if numerics in ("FAIL", "error") else ""),
        Text(str(len(row.break_sites)), justify="right"),
        Text(str(row.recompile_count), justify="right"),
    ]


def dashboard_text(summary: SweepSummary) -> Text:
    """The four numbers of the fleet and of each group, with what was swept."""
    text = Text()
    env = summary.environment
    where = f" · torch {env.torch} on {env.device}" if env is not None else ""
    text.append(f"sweep {summary.manifest}: {summary.totals.targets} target(s){where}\n", style="bold")
    board = summary.totals.dashboard
    if board is None:
        return text
    rows = [("fleet", board), *summary.totals.groups.items()]
    for name, group in rows:
        rate, speedup, best, compile_s, memory = dashboard_cells(group)
        text.append(f"{name:<10}", style="bold" if name == "fleet" else "")
        text.append(f" pass {rate} · speedup {speedup} (best {best}) · compile {compile_s} s · memory {memory}\n")
    if not any(r.bench is not None for r in summary.targets):
        text.append("no benchmark in this sweep: `ctc-doctor sweep MANIFEST --bench` measures speedups\n", style="dim")
    return text


class SweepApp(App[str | None]):
    """The sweep browser; `run()` returns the report path chosen with Enter, or None on quit."""

    CSS = """
    #dashboard { height: auto; padding: 0 1; background: $panel; }
    #status { height: 1; padding: 0 1; color: $text-muted; }
    #targets { height: 1fr; }
    #plot { height: 1fr; display: none; }
    """
    TITLE = "ctc-doctor sweep"
    BINDINGS = [
        Binding("s", "sort", "sort"),
        Binding("r", "reverse", "reverse"),
        Binding("p", "toggle_plot", "plot"),
        Binding("enter", "open", "open report", show=True, priority=False),
        Binding("q", "quit_sweep", "quit"),
    ]

    def __init__(self, summary: SweepSummary, directory: Path, cursor_target: str | None = None) -> None:
        super().__init__()
        self.summary = summary
        self.directory = directory
        self.sort_index = 0
        self.reversed = False
        self.rows: list[SweepTarget] = ranked_rows(summary)
        self.cursor_target = cursor_target

    def compose(self) -> ComposeResult:
        yield Static(dashboard_text(self.summary), id="dashboard")
        yield Static("", id="status")
        table: DataTable[Text] = DataTable(id="targets", cursor_type="row", zebra_stripes=True)
        yield table
        yield PlotextPlot(id="plot")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#targets", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        self._fill()
        if self.cursor_target is not None:
            at = next((i for i, r in enumerate(self.rows) if r.target == self.cursor_target), 0)
            table.move_cursor(row=at)
        table.focus()

    # --- the table ------------------------------------------------------------------------------

    def _fill(self) -> None:
        column, said, key, descending = SORTS[self.sort_index]
        if self.sort_index == 0:
            rows = ranked_rows(self.summary)
            rows = rows[::-1] if self.reversed else rows
        else:  # targets without the number stay last either way
            known = [r for r in self.summary.targets if key(r) is not None]
            unknown = [r for r in self.summary.targets if key(r) is None]
            rows = sorted(known, key=key, reverse=descending != self.reversed) + unknown
        self.rows = rows
        table = self.query_one("#targets", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*_cells(row), key=str(row.index))
        order = f"sorted by {said}{' (reversed)' if self.reversed else ''}"
        self.query_one("#status", Static).update(
            Text(f"{len(rows)} target(s), {order} · Enter opens a target's report · s sort · p plot", no_wrap=True, overflow="ellipsis")
        )
        self._plot()

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.reversed = False
        self._fill()

    def action_reverse(self) -> None:
        self.reversed = not self.reversed
        self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        names = [name for name, _, _, _ in SORTS]
        column = str(event.column_key.value)
        if column in names:
            index = names.index(column)
            self.reversed = not self.reversed if index == self.sort_index else False
            self.sort_index = index
            self._fill()

    def selected(self) -> SweepTarget | None:
        table = self.query_one("#targets", DataTable)
        if not self.rows or table.cursor_row < 0 or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._plot()

    def action_open(self) -> None:
        row = self.selected()
        if row is None:
            return
        if row.report is None or not (self.directory / row.report).exists():
            why = row.reason or "the target wrote no report"
            self.notify(f"{short_name(row.target)}: no report to open ({why})", severity="warning", markup=False)
            return
        self.exit(str(self.directory / row.report))

    def action_quit_sweep(self) -> None:
        self.exit(None)

    # --- the plot -------------------------------------------------------------------------------

    def action_toggle_plot(self) -> None:
        plot = self.query_one("#plot", PlotextPlot)
        table = self.query_one("#targets", DataTable)
        plot.display = not plot.display
        table.display = not plot.display
        if not plot.display:
            table.focus()
        self._plot()

    def _plot(self) -> None:
        """Speedup against cold compile seconds, one point per benchmarked target; the selected one
        highlighted, 1.0x (no gain) drawn as a line."""
        plot = self.query_one("#plot", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        points = [(r, r.bench) for r in self.summary.targets if r.bench is not None and r.bench.speedup and r.bench.compile_s is not None]
        plt.title("speedup vs cold compile time, per target")
        plt.xlabel("compile s")
        plt.ylabel("speedup x")
        if points:
            xs = [b.compile_s for _, b in points]
            ys = [b.speedup for _, b in points]
            plt.scatter(xs, ys, marker="dot", color="cyan")
            plt.horizontal_line(1.0, color="gray")
            chosen = self.selected()
            mine = [(b.compile_s, b.speedup) for r, b in points if chosen is not None and r.target == chosen.target]
            if mine:
                plt.scatter([mine[0][0]], [mine[0][1]], marker="X", color="red", label=short_name(chosen.target)[:30] if chosen else "")
        plot.refresh()
