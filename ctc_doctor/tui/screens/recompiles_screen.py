"""RecompilesScreen: recompiles grouped by cause (by function for reports without causes), each failed
guard with kind, source, expected/actual."""

from __future__ import annotations

from collections import defaultdict

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Tree

from ...reports.labels import cause_headline, module_path_of, short_path
from ...reports.models import FailedGuard, Recompile, RecompileCause
from ..widgets.detail_pane import DetailPane
from .section_screen import SectionScreen, suggestion_summary

Group_ = tuple[str, str, int]


def guard_line(g: FailedGuard) -> Text:
    text = Text()
    text.append(f"{g.kind:<13}", style="bold magenta")
    text.append(module_path_of(g.source) if g.source else "?", style="cyan")
    if g.expected is not None or g.actual is not None:
        text.append(f"  expected {g.expected if g.expected is not None else '?'}, got {g.actual if g.actual is not None else '?'}")
    elif g.reason:
        text.append(f"  {module_path_of(g.reason)}", style="dim")
    return text


def cause_detail(screen: SectionScreen, cause: RecompileCause) -> list[RenderableType]:
    head = Text(cause_headline(cause), style="bold yellow")
    body = Text()
    body.append(f"guard kind {cause.kind}", style="magenta")
    if cause.source:
        body.append(" on ")
        body.append(cause.source, style="cyan")
    if cause.dim is not None:
        body.append(f" dim {cause.dim}")
    if cause.values:
        body.append(f" · values {' → '.join(cause.values)}")
    if cause.first_call is not None:
        body.append(f" · first in call {cause.first_call}", style="dim")
    if cause.per_instance:
        body.append("\none guard per instance (a per-layer object): compiling each block apart recompiles once per block", style="yellow")
    body.append(f"\nrecompiles: {', '.join(cause.recompiles)}")
    body.append(f"\nfunctions: {', '.join(cause.functions)} ({cause.code_objects} compiled frame(s))")
    if cause.module_paths:
        body.append(f"\nmodules: {screen.index.module_text(cause.module_paths, None)}")
    for f in cause.user_stack:
        body.append(f"\n  {f.file}:{f.line} in {f.function}", style="cyan")
        if f.code:
            body.append(f"\n    {f.code}", style="dim")
    parts: list[RenderableType] = [head, body]
    return parts + suggestion_summary(screen.index, cause.id)


def recompile_detail(screen: SectionScreen, rc: Recompile) -> list[RenderableType]:
    head = Text()
    head.append(f"{rc.id} ", style="bold")
    head.append(f"recompile of {rc.function}", style="bold yellow")
    head.append(f" · compile id {rc.compile_id}")
    if rc.call_index is not None:
        head.append(f" · triggered by call {rc.call_index}", style="dim")
    where = Text()
    where.append(f"{rc.file}:{rc.line}", style="bold cyan")
    where.append(f"\nmodule: {screen.index.module_text(rc.module_paths, None)}" + (f" ({rc.module_class})" if rc.module_class else ""))
    guards = Text()
    for g in rc.failed_guards:
        guards.append(f"cache entry {g.cache_entry or '?'}: ", style="dim")
        guards.append(g.kind, style="bold magenta")
        guards.append(" of ")
        guards.append(module_path_of(g.source) if g.source else "?", style="cyan")
        if g.dim is not None:
            guards.append(f" (dim {g.dim})")
        if g.expected is not None or g.actual is not None:
            guards.append(f": expected {g.expected if g.expected is not None else '?'}, got {g.actual if g.actual is not None else '?'}")
        guards.append(f"\n  {module_path_of(g.reason)}\n", style="dim")
    parts: list[RenderableType] = [
        head,
        where,
        Text(""),
        Text(f"{len(rc.failed_guards)} failed guard(s), one per cached entry tried", style="bold"),
        guards,
    ]
    parts += suggestion_summary(screen.index, rc.id)
    return parts


class RecompilesScreen(SectionScreen):
    SECTION = "recompiles"
    SEARCHABLE = True
    MAIN = Tree

    def compose_body(self) -> ComposeResult:
        with Horizontal(classes="main split"):
            tree: Tree[Recompile | Group_ | None] = Tree("recompiles", id="recompiles-tree", classes="side")
            tree.show_root = False
            yield tree
            yield DetailPane("select a recompile to see its failed guards", id="recompiles-detail", classes="detail")

    def on_mount(self) -> None:
        self.refresh_view()
        self.focus_main()

    def matches(self, rc: Recompile) -> bool:
        if self.filter_value and all(g.kind != self.filter_value for g in rc.failed_guards):  # a guard kind
            return False
        if not self.query_text:
            return True
        hay = " ".join(
            [
                rc.id,
                rc.function,
                rc.file,
                rc.compile_id,
                *rc.module_paths,
                *(f"{g.kind} {g.source} {g.reason} {module_path_of(g.reason)}" for g in rc.failed_guards),
            ]
        ).lower()
        return all(w in hay for w in self.query_text.split())

    def refresh_view(self) -> None:
        tree = self.query_one(Tree)
        tree.clear()
        shown = [rc for rc in self.report.recompiles if self.matches(rc)]
        pane = self.query_one(DetailPane)
        if not shown:
            if not self.report.summary.analysis_run:
                message = "recompiles not measured (bisection-only report)"
            else:
                message = "no recompile matches" if self.report.recompiles else "no recompiles: every call reused its compiled graph"
            tree.root.add_leaf(Text(message, style="dim"), data=None)
            pane.show(Text(message, style="dim"))
            return
        first = None
        for data, label, items in self.groups(shown):
            node = tree.root.add(label, data=data, expand=True)
            for rc in items:
                text = Text()
                text.append(f"{rc.id} ", style="bold")
                text.append(f"{rc.function} {rc.compile_id} ", style="dim")
                if rc.failed_guards:
                    text.append_text(guard_line(rc.failed_guards[0]))
                if len(rc.failed_guards) > 1:
                    text.append(f"  (+{len(rc.failed_guards) - 1} entr{'y' if len(rc.failed_guards) == 2 else 'ies'})", style="dim")
                child = node.add_leaf(text, data=rc)
                first = first or child
        if first is not None:
            assert isinstance(first.data, Recompile)
            pane.show(*recompile_detail(self, first.data))
            self.call_after_refresh(tree.move_cursor, first)

    def groups(self, shown: list[Recompile]) -> list[tuple[RecompileCause | Group_, Text, list[Recompile]]]:
        """By cause when the report has them (1.6+), else by function."""
        if self.report.recompile_causes:
            by_id = {rc.id: rc for rc in shown}
            out: list[tuple[RecompileCause | Group_, Text, list[Recompile]]] = []
            for cause in self.report.recompile_causes:
                items = [by_id[r] for r in cause.recompiles if r in by_id]
                if items:
                    out.append((cause, Text(cause_headline(cause), style="bold"), items))
            return out
        groups: dict[Group_, list[Recompile]] = defaultdict(list)
        for rc in shown:
            groups[(rc.function, rc.file, rc.line)].append(rc)
        result: list[tuple[RecompileCause | Group_, Text, list[Recompile]]] = []
        for (function, file, line), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            kinds = sorted({g.kind for rc in items for g in rc.failed_guards})
            label = Text()
            label.append(function, style="bold")
            label.append(f"  {short_path(file, 40)}:{line}", style="cyan")
            label.append(f"  {len(items)} recompile(s) · {', '.join(kinds)}", style="dim")
            result.append(((function, file, line), label, items))
        return result

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:  # type: ignore[type-arg]
        data = event.node.data
        pane = self.query_one(DetailPane)
        if isinstance(data, Recompile):
            pane.show(*recompile_detail(self, data))
        elif isinstance(data, RecompileCause):
            pane.show(*cause_detail(self, data))
        elif isinstance(data, tuple):
            function, file, line = data
            items = [rc for rc in self.report.recompiles if (rc.function, rc.file, rc.line) == data]
            text = Text()
            text.append(f"{function} ", style="bold")
            text.append(f"{file}:{line}\n", style="cyan")
            text.append(f"{len(items)} recompile(s): {', '.join(rc.id for rc in items)}\n")
            for rc in items:
                for g in rc.failed_guards[:1]:
                    text.append(f"{rc.id}: ")
                    text.append_text(guard_line(g))
                    text.append("\n")
            pane.show(text)

    def filter_choices(self) -> list[tuple[str, str]]:
        counts: dict[str, int] = defaultdict(int)
        for rc in self.report.recompiles:
            for kind in {g.kind for g in rc.failed_guards}:
                counts[kind] += 1
        if not counts:
            return []
        return [("all recompiles", "")] + [(f"guard kind: {k} ({n})", k) for k, n in sorted(counts.items(), key=lambda kv: -kv[1])]
