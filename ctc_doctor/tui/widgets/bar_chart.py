"""bar_chart: horizontal bars of one measure per benchmark arm, as a rich renderable."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, top: float, width: int) -> str:
    """A bar of `value / top * width` cells, in eighths of a cell."""
    if top <= 0 or value <= 0:
        return ""
    cells = value / top * width
    full = int(cells)
    rest = int((cells - full) * 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def bar_chart(title: str, rows: list[tuple[str, float | None, str]], width: int = 40, highlight: str | None = None) -> Table:
    """One row per (label, value, shown value); missing values say so instead of drawing."""
    values = [v for _, v, _ in rows if v is not None]
    top = max(values) if values else 0.0
    table = Table(title=title, title_justify="left", box=None, show_header=False, pad_edge=False, expand=False)
    table.add_column("arm", no_wrap=True)
    table.add_column("bar", no_wrap=True, width=width + 1)
    table.add_column("value", no_wrap=True, justify="right")
    for label, value, shown in rows:
        style = "bold green" if label == highlight else "cyan"
        if value is None:
            table.add_row(Text(label), Text("not measured", style="dim"), Text(""))
        else:
            table.add_row(Text(label, style="bold" if label == highlight else ""), Text(bar(value, top, width), style=style), Text(shown))
    return table
