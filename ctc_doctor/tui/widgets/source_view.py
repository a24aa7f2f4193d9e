"""source_view: the lines around a frame, highlighted, or a clear note why they cannot be shown."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from ...reports.models import Frame
from ..report_index import ReportIndex, SourceContext


def source_view(index: ReportIndex, frame: Frame, context: int = 6) -> RenderableType:
    found = index.source(frame, context)
    if not isinstance(found, SourceContext):
        parts: list[RenderableType] = [Text(found, style="yellow")]
        if frame.code:
            parts.append(Text(f"recorded line {frame.line}: {frame.code}", style="dim"))
        return Group(*parts)
    syntax = Syntax(
        found.text,
        "python",
        line_numbers=True,
        start_line=found.start,
        highlight_lines={frame.line},
        theme="ansi_dark",
        word_wrap=False,
    )
    head = Text(f"{frame.file}:{frame.line}", style="dim")  # as recorded: the resolved path is this machine's
    if found.mismatch:
        head.append(f"  (the file changed since the report: it recorded `{frame.code}`)", style="yellow")
    return Group(head, syntax)
