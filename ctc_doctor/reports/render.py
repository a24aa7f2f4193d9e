"""Render a Report for a terminal with rich: verdict, ranked break sites, recompiles, next steps."""

from __future__ import annotations

import os
from collections import defaultdict

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .models import GraphBreakSite, Recompile, Report

_VERDICT_STYLE = {
    "clean": ("bold green", "CLEAN: one graph per call, no recompiles"),
    "graph_breaks": ("bold yellow", "GRAPH BREAKS"),
    "recompiles": ("bold yellow", "RECOMPILES"),
    "graph_breaks_and_recompiles": ("bold red", "GRAPH BREAKS AND RECOMPILES"),
    "failed": ("bold red", "FAILED"),
}

# One line of advice per guard kind, for "what to do next" (full suggestions are a later feature).
_GUARD_ADVICE = {
    "size": "mark the changing dimension dynamic: torch._dynamo.mark_dynamic({src}, {dim}), or pad inputs to a few bucket sizes",
    "stride": "make the input contiguous before the call, or mark the dimension dynamic",
    "dtype": "call the model with one dtype (cast inputs before the call)",
    "device": "keep inputs on one device",
    "requires_grad": "keep requires_grad consistent between calls (or expect one extra compile per mode)",
    "value": "pass the changing Python scalar as a tensor, or let it be dynamic (it changes per call)",
    "attribute": "do not change module attributes between calls; pass the switch as an argument or build two modules",
    "type": "keep the same submodule types per call site (one forward shared by blocks with different children recompiles)",
    "object_id": "avoid guarding on object identity: reuse the same objects between calls",
    "global_state": "keep global state (grad mode, autocast, deterministic flags) the same between calls",
    "other": "see the failed guard text",
}


def short_path(path: str, width: int = 48) -> str:
    """Shorten a file path for tables: package-relative in site-packages, cwd-relative inside cwd."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = path
        if not rel.startswith(".."):
            path = rel
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def module_label(paths: list[str], width: int = 40) -> str:
    if not paths:
        return "—"
    names = ["(root)" if p == "" else p for p in paths]
    if len(names) > 3:
        text = f"{names[0]}, {names[1]} … {names[-1]} ({len(names)} instances)"
    else:
        text = ", ".join(names)
    return text if len(text) <= width else text[: width - 1] + "…"


def _header(report: Report) -> Text:
    t, e = report.target, report.environment
    text = Text()
    text.append("ctc-doctor ", style="bold")
    text.append(f"{t.name} ", style="bold cyan")
    text.append(f"({t.model_class}, {t.parameters:,} params, {t.modules} modules, {t.calls} call(s){', train' if t.train else ''})\n")
    text.append(
        f"torch {e.torch} · python {e.python} · {e.platform} · device {e.device} · backend {e.backend}"
        + (f" · transformers {e.transformers}" if e.transformers else ""),
        style="dim",
    )
    return text


def _verdict(report: Report) -> Panel:
    s = report.summary
    style, label = _VERDICT_STYLE[s.verdict]
    lines = Text()
    lines.append(label + "\n", style=style)
    lines.append(
        f"{s.graph_count} graph(s) on the first call · {s.graph_break_count} break event(s) at "
        f"{s.unique_break_sites} site(s) · {s.recompile_count} recompile(s)"
        + (f" · {s.frames_skipped} function(s) skipped (ran eager)" if s.frames_skipped else "")
        + f" · compile time {s.compile_time_s:.2f} s"
    )
    return Panel(lines, title="verdict", expand=False)


def _break_table(sites: list[GraphBreakSite], top: int) -> Table:
    table = Table(title="Graph breaks, most costly first", title_justify="left", show_lines=False, expand=True)
    table.add_column("id", no_wrap=True)
    table.add_column("location", overflow="fold")
    table.add_column("module", overflow="fold")
    table.add_column("GB", no_wrap=True)
    table.add_column("×", justify="right")
    table.add_column("reason / first hint", overflow="fold", ratio=2)
    for site in sites[:top]:
        frame = site.own_frame or site.user_frame
        loc = f"{short_path(frame.file)}:{frame.line}"
        if not site.own_code:
            loc += f"\n[dim]in {site.library}: {short_path(site.user_frame.file, 32)}:{site.user_frame.line}[/dim]"
        reason = site.reason
        if site.frame_skipped:
            reason += " [bold](whole function ran eager)[/bold]"
        hint = site.hints[0] if site.hints else ""
        cell = f"{reason}\n[dim]hint: {hint}[/dim]" if hint else reason
        table.add_row(
            site.id,
            loc + (f"\n[dim]{frame.code}[/dim]" if frame.code else ""),
            module_label(site.module_paths) + (f"\n[dim]{site.module_class}[/dim]" if site.module_class else ""),
            ", ".join(site.registry_ids[:2]) or "—",
            str(site.occurrences),
            cell,
        )
    return table


def _recompile_table(recompiles: list[Recompile]) -> Table:
    # one row per function and module set: Dynamo's resume functions of one forward fold into it
    groups: dict[tuple[str, str, tuple[str, ...]], list[Recompile]] = defaultdict(list)
    for rc in recompiles:
        groups[(rc.function, rc.file, tuple(rc.module_paths))].append(rc)
    table = Table(title="Recompiles, by function", title_justify="left", expand=True)
    table.add_column("function", overflow="fold")
    table.add_column("module", overflow="fold")
    table.add_column("×", justify="right")
    table.add_column("failed guard (kind: guard)", overflow="fold", ratio=2)
    for (function, file, paths), items in groups.items():
        line = min(rc.line for rc in items)
        kinds: dict[str, str] = {}
        for rc in items:
            for g in rc.failed_guards:
                kinds.setdefault(g.kind, g.reason)
        guard_text = "\n".join(f"{k}: {v}" for k, v in list(kinds.items())[:3])
        table.add_row(f"{function}\n[dim]{short_path(file)}:{line}[/dim]", module_label(list(paths)), str(len(items)), guard_text)
    return table


def next_steps(report: Report) -> list[str]:
    """Plain-text next steps derived from the findings."""
    steps: list[str] = []
    failed = [e for e in report.errors if e.phase in ("eager", "compile", "timeout")]
    for err in failed[:2]:
        if err.phase == "eager":
            steps.append(f"Fix eager mode first: {err.message}")
        elif err.phase == "timeout":
            steps.append(f"{err.message}; raise --timeout or analyze a smaller input")
        else:
            steps.append(f"torch.compile crashed ({err.type}): {err.message}")
    for site in report.graph_breaks[:3]:
        frame = site.own_frame or site.user_frame
        where = f"{short_path(frame.file)}:{frame.line}"
        mod = module_label(site.module_paths, 30)
        hint = site.hints[0] if site.hints else site.reason
        steps.append(f"{site.id} {where} ({mod}): {hint}")
    seen = set()
    for rc in report.recompiles:
        for g in rc.failed_guards:
            # one step per kind; Dynamo's internal stack slots (`___stack0`) name no user variable
            if g.kind in seen or g.kind == "other" or (g.source or "").startswith("___"):
                continue
            seen.add(g.kind)
            advice = _GUARD_ADVICE[g.kind].format(src=g.source or "the input", dim=g.dim if g.dim is not None else "dim")
            steps.append(f"{rc.id} {rc.function} recompiles on {g.kind} of {g.source or '?'}: {advice}")
            if len(seen) >= 3:
                break
        if len(seen) >= 3:
            break
    if report.summary.verdict == "clean":
        steps.append("Nothing to fix: this workload compiles to one graph per call without recompiles.")
    return steps


def render_summary(report: Report, console: Console, *, top: int = 10) -> None:
    """Print the human summary of a report."""
    parts: list[object] = [_header(report), _verdict(report)]
    if report.graph_breaks:
        parts.append(_break_table(report.graph_breaks, top))
        if len(report.graph_breaks) > top:
            parts.append(Text(f"… {len(report.graph_breaks) - top} more site(s) in the JSON report", style="dim"))
    if report.recompiles:
        parts.append(_recompile_table(report.recompiles))
    if report.explain is not None and report.explain.missed_sites:
        parts.append(
            Text(
                f"torch._dynamo.explain listed {report.explain.break_reasons} break reason(s) and missed "
                f"{report.explain.missed_sites} site(s) found here.",
                style="dim",
            )
        )
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    for err in report.errors:
        parts.append(Text(f"error [{err.phase}] {err.type}: {err.message}", style="red"))
    steps = next_steps(report)
    if steps:
        body = Text()
        for i, step in enumerate(steps, 1):
            body.append(f"{i}. {step}\n")
        parts.append(Panel(body, title="what to do next", expand=True))
    console.print(Group(*parts))  # type: ignore[arg-type]
