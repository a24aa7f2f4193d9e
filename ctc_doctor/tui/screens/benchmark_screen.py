"""BenchmarkScreen: the arms as a table plus bar charts of latency and compile time."""

from __future__ import annotations

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from ...reports.labels import UNSTABLE_KEY, crash_cell, cudagraph_text, numerics_cell, speedup_cell, stderr_tail_text, unstable_lines
from ...reports.models import Benchmark, BenchmarkArm
from ..widgets.bar_chart import bar_chart
from .section_screen import PanelScreen


def _num(value: float | int | None, fmt: str, unit: str = "") -> Text:
    return Text("" if value is None else format(value, fmt) + unit, justify="right")


def _latency(a: BenchmarkArm) -> Text:
    """`2.000 ± 0.100`, yellow when the figure is unstable."""
    if a.latency_ms is None:
        return Text("")
    style = "yellow" if a.latency_ms.unstable else ""
    return Text(f"{a.latency_ms.median:.3f} ± {a.latency_ms.iqr:.3f}", justify="right", style=style)


def arms_table(b: Benchmark) -> Table:
    s = b.settings
    title = f"benchmark: backend {s.get('backend')}, mode {s.get('mode')}, on {b.device}, {s.get('iters')} timed pass(es), {s.get('grad')}"
    table = Table(title=title, title_justify="left", expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("arm", "cold s", "warm s", "ms ± IQR", "n", "speedup", "graphs", "breaks", "recomp.", "peak MB", "vs eager"):
        table.add_column(col, no_wrap=True, justify="left" if col == "arm" else "right")
    for a in b.arms:
        best = a.name == b.best_arm
        err = Text(numerics_cell(a).removesuffix(" ✗"), justify="right")
        if a.numerics_ok is False:
            err.append(" ✗", style="red")
        table.add_row(
            Text(a.name + (" ★" if best else ""), style="bold green" if best else ""),
            _num(a.compile_time_s, ".2f"),
            _num(a.warm_compile_time_s, ".2f"),
            _latency(a) if not a.crash else Text(crash_cell(a), style="red"),
            _num(a.latency_ms.n if a.latency_ms else None, "d"),
            Text(speedup_cell(b, a), justify="right", style="yellow" if speedup_cell(b, a).endswith("?") else ""),
            _num(a.graph_count, "d"),
            _num(a.graph_break_count, "d"),
            _num(a.recompile_count, "d"),
            _num(a.peak_memory_mb, ".0f"),
            err,
        )
    return table


def benchmark_view(b: Benchmark | None) -> list[RenderableType]:
    if b is None:
        return [
            Text("benchmark: not run", style="bold yellow"),
            Text(
                "`ctc-doctor bench TARGET` (or the full run without --no-bench) measures eager vs compiled vs fixed vs regional.",
                style="dim",
            ),
        ]
    parts: list[RenderableType] = [arms_table(b), Text("★ fastest arm with correct numerics", style="dim")]
    shaky = unstable_lines(b)
    if shaky:
        parts.append(Text(UNSTABLE_KEY, style="dim"))
        parts += [Text(line, style="yellow") for line in shaky]
    if b.best_arm is None and b.best_arm_reason:
        parts.append(Text(b.best_arm_reason, style="bold yellow"))
    parts.append(Text(""))
    best = b.best_arm
    parts.append(
        bar_chart(
            "steady-state latency per pass (median, shorter is faster)",
            [
                (a.name, a.latency_ms.median if a.latency_ms else None, f"{a.latency_ms.median:.3f} ms" if a.latency_ms else "")
                for a in b.arms
            ],
            highlight=best,
        )
    )
    parts.append(Text(""))
    compiled = [a for a in b.arms if a.name != "eager"]
    parts.append(
        bar_chart(
            "cold compile time (fresh cache)",
            [(a.name, a.compile_time_s, f"{a.compile_time_s:.2f} s" if a.compile_time_s is not None else "") for a in compiled],
        )
    )
    if any(a.warm_compile_time_s is not None for a in compiled):
        parts.append(Text(""))
        parts.append(
            bar_chart(
                "warm compile time (cache filled by the cold run)",
                [
                    (a.name, a.warm_compile_time_s, f"{a.warm_compile_time_s:.2f} s" if a.warm_compile_time_s is not None else "")
                    for a in compiled
                ],
            )
        )
    body = Text()
    for a in b.arms:
        if a.description:
            body.append(f"{a.name}: ", style="bold")
            body.append(f"{a.description}\n", style="dim")
        if a.error:
            body.append(f"{a.name}: {a.error}\n", style="red" if a.latency_ms is None else "yellow")
        if a.stderr_tail:
            body.append(f"{a.name} stderr: {stderr_tail_text(a)}\n", style="dim")
        graphs = cudagraph_text(a)
        if graphs:
            body.append(graphs + "\n", style="yellow")
    if body.plain:
        parts += [Text(""), body]
    settings = ", ".join(f"{k}={v}" for k, v in b.settings.items())
    parts.append(Text(f"settings: {settings} · took {b.duration_s:.1f} s", style="dim"))
    for note in b.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return parts


class BenchmarkScreen(PanelScreen):
    SECTION = "benchmark"

    def view(self) -> list[RenderableType]:
        return benchmark_view(self.report.benchmark)

    def on_mount(self) -> None:
        self.focus_main()
