"""ModulesScreen: the module tree with bisection results and the breaks and recompiles attributed to each node."""

from __future__ import annotations

from collections import defaultdict

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from ...reports.labels import bisect_summary_line, short_path, trial_symbol
from ...reports.models import BisectTrial
from ..report_index import location
from ..widgets.detail_pane import DetailPane
from ..widgets.source_view import source_view
from .section_screen import SectionScreen


def mark(t: BisectTrial | None) -> tuple[str, str]:
    """The row's mark, or ○ for a module the bisection has no row for."""
    return ("○", "dim") if t is None else trial_symbol(t)


def tree_name(path: str, parent: str | None) -> str:
    """A node's name under its parent in the tree: the path below the parent (`layers.0` where the
    bisection's tree skips the ModuleList), and a list index never alone (`layers.0`, not `0`)."""
    if not path:
        return "(root)"
    parts = path.split(".")
    below = len(parent.split(".")) if parent else 0
    if not path.startswith(f"{parent}.") and parent:
        below = 0  # not a dotted child: the whole path
    start = below
    while start > 0 and parts[start].isdigit():
        start -= 1  # name the list the index is in
    return ".".join(parts[start:])


class ModulesScreen(SectionScreen):
    SECTION = "modules"
    SEARCHABLE = True
    MAIN = Tree
    BINDINGS = [Binding("b", "breaks_of_module", "its breaks", show=True)]

    def compose_body(self) -> ComposeResult:
        with Vertical(classes="main"):
            yield Static(id="modules-status", classes="status")
            with Horizontal(classes="split"):
                tree: Tree[str] = Tree("(root)", id="modules-tree", classes="side")
                yield tree
                yield DetailPane("select a module to see its trial and the breaks inside it", id="modules-detail", classes="detail")

    def on_mount(self) -> None:
        self.refresh_view()
        self.focus_main()

    @property
    def only_problems(self) -> bool:
        """The filter in force keeps failing modules and those with breaks or recompiles (and their parents)."""
        return self.filter_value == "problems"

    # --- the tree ------------------------------------------------------------------------------

    def parents(self) -> dict[str, str | None]:
        """Module path -> parent path: the bisection's tree when it ran, else the dotted names in the findings."""
        b = self.report.bisect
        if b is not None and b.trials:
            return {t.module_path: t.parent for t in b.trials if t.module_path == "" or (t.calls > 0 and t.parent is not None)}
        paths = {""} | set(self.index.sites_by_module) | set(self.index.recompiles_by_module)
        result: dict[str, str | None] = {"": None}
        for path in sorted(paths):
            parts = path.split(".") if path else []
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                result.setdefault(sub, ".".join(parts[: i - 1]))
        return result

    def _interesting(self, path: str) -> bool:
        t = self.trials.get(path)
        problem = t is not None and (t.status in ("failed", "timeout", "crashed") or (t.status == "inferred" and not t.passed))
        return problem or path in self.index.sites_by_module or path in self.index.recompiles_by_module

    def refresh_view(self) -> None:
        b = self.report.bisect
        self.trials = {t.module_path: t for t in b.trials} if b is not None else {}
        parents = self.parents()
        self.tree_parents = parents
        children: dict[str, list[str]] = defaultdict(list)
        for path, parent in parents.items():
            if path and parent is not None:
                children[parent].append(path)
        keep = set(parents)
        words = self.query_text.split()
        if words or self.only_problems:
            hits = {
                p
                for p in parents
                if all(w in f"{p} {self.trials[p].module_class if p in self.trials else ''}".lower() for w in words)
                and (not self.only_problems or self._interesting(p))
            }
            keep = set()
            for hit in hits:
                p: str | None = hit
                while p is not None and p not in keep:
                    keep.add(p)
                    p = parents.get(p)
        smallest = set(b.smallest_failing) if b is not None else set()
        expand: set[str] = set()
        for p in smallest | set(self.index.sites_by_module) | set(self.index.recompiles_by_module):
            q = parents.get(p)
            while q is not None:
                expand.add(q)
                q = parents.get(q)
        if words:
            expand |= keep

        tree = self.query_one(Tree)
        tree.clear()
        tree.root.data = ""
        tree.root.set_label(self.label_for("", smallest))
        first: TreeNode[str] | None = None

        def add(node: TreeNode[str], path: str) -> None:
            nonlocal first
            for child in children.get(path, []):
                if child not in keep:
                    continue
                sub = node.add(self.label_for(child, smallest), data=child, expand=child in expand, allow_expand=bool(children.get(child)))
                if first is None and child in smallest:
                    first = sub
                add(sub, child)

        add(tree.root, "")
        tree.root.expand()
        self.query_one("#modules-status", Static).update(self.status_text())
        target = first or tree.root
        self.show_module(target.data or "")
        self.call_after_refresh(tree.move_cursor, target)

    def label_for(self, path: str, smallest: set[str]) -> Text:
        t = self.trials.get(path)
        symbol, style = mark(t)
        text = Text()
        text.append(f"{symbol} ", style=style)
        text.append(tree_name(path, self.tree_parents.get(path)), style="bold")
        if t is not None:
            text.append(f" {t.module_class}", style="dim")
        sites = self.index.sites_by_module.get(path, [])
        if sites:
            text.append(f"  {len(sites)} break{'s' if len(sites) > 1 else ''}", style="yellow")
        recompiles = self.index.recompiles_by_module.get(path, [])
        if recompiles:
            text.append(f"  {len(recompiles)} recompile{'s' if len(recompiles) > 1 else ''}", style="magenta")
        if path in smallest:
            text.append("  ← smallest", style="bold red")
        return text

    def status_text(self) -> Text:
        b = self.report.bisect
        text = Text()
        if b is None:
            text.append("bisection not run", style="yellow")
            text.append(
                " (no graph breaks, --no-bisect, or the target is not an nn.Module): the tree shows the modules the findings name",
                style="dim",
            )
        else:
            text.append(bisect_summary_line(b), style="bold")
            text.append("   ✓ passed  ✗ failed  ≈ inferred  ⏱ timeout  ✖ crashed  · skipped", style="dim")
        if self.only_problems:
            text.append(" · showing failing modules and modules with findings (f)", style="yellow")
        return text

    def repro_for(self, path: str) -> str | None:
        t = self.trials.get(path)
        return t.repro_path if t is not None else None

    def show_module(self, path: str) -> None:
        self.query_one(DetailPane).show(*self.module_detail(path))

    def module_detail(self, path: str) -> list[RenderableType]:
        t = self.trials.get(path)
        head = Text()
        head.append(path or "(root)", style="bold")
        if t is not None:
            head.append(f"  {t.module_class}", style="dim")
        parts: list[RenderableType] = [head]
        if t is None:
            parts.append(Text("no bisection trial for this module" if self.report.bisect is not None else "bisection not run", style="dim"))
        else:
            symbol, style = mark(t)
            body = Text()
            body.append(f"{symbol} {t.status}", style=style)
            if t.duration_s is not None:
                body.append(f" in {t.duration_s:.2f} s", style="dim")
            if t.inferred_from is not None:
                body.append(f" (as {t.inferred_from or '(root)'}: same class, inputs and structure)", style="dim")
            body.append(f"\n{t.parameters:,} parameters · called {t.calls} time(s)")
            if t.inputs:
                body.append(f"\ninputs: {t.inputs}", style="dim")
            if t.gb_type:
                body.append(f"\n{t.gb_type}", style="bold yellow")
                if t.registry_ids:
                    body.append(f" ({', '.join(t.registry_ids)})", style="yellow")
                body.append(" — in this module's own code" if t.own_break else " — inside a submodule it calls", style="dim")
            if t.reason:
                body.append(f"\n{t.reason}")
            parts.append(body)
            frame = t.own_frame or t.user_frame
            if frame is not None:
                parts += [Text("where fullgraph tracing stopped", style="bold"), source_view(self.index, frame, context=4)]
            repro = self.repro_for(path)
            if repro:
                parts += [Text("repro", style="bold"), Text(f"python {repro}", style="cyan")]
            elif t.status in ("failed", "crashed", "timeout") and self.report.bisect is not None and not self.report.bisect.repro_paths:
                parts.append(Text("no repro script: write one with --json report.json or --repro-dir DIR", style="dim"))
        sites = self.index.sites_by_module.get(path, [])
        if sites:
            text = Text()
            for s in sites:
                text.append(f"{s.id} ", style="bold")
                text.append(f"{s.gb_type} at {location(s.place())} ({s.occurrences}×)\n")
            parts += [Text("break sites attributed to this module (b lists them in the break table)", style="bold"), text]
        recompiles = self.index.recompiles_by_module.get(path, [])
        if recompiles:
            text = Text()
            for rc in recompiles:
                kinds = ", ".join(sorted({g.kind for g in rc.failed_guards}))
                text.append(f"{rc.id} ", style="bold")
                text.append(f"{rc.function} at {short_path(rc.file)}:{rc.line} ({kinds})\n")
            parts += [Text("recompiles of this module's code", style="bold"), text]
        return parts

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:  # type: ignore[type-arg]
        self.show_module(event.node.data or "")

    def action_breaks_of_module(self) -> None:
        node = self.query_one(Tree).cursor_node
        path = (node.data or "") if node is not None else ""
        inside = [s for p, sites in self.index.sites_by_module.items() if p == path or p.startswith(path + ".") or not path for s in sites]
        if not inside:
            self.notify(f"no break site in {path or '(root)'}", markup=False)
            return
        self.doctor.show_breaks_of(path)

    def filter_choices(self) -> list[tuple[str, str]]:
        return [("every module", ""), ("failing modules and modules with breaks or recompiles", "problems")]
