"""The bisection's module tree in the terminal: pass/fail marks, expanded down to the smallest failing
modules, identical siblings folded."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text
from rich.tree import Tree

from ..labels import bisect_summary_line, failure_text, module_label, trial_symbol
from ..models import Bisect, BisectTrial


def trial_mark(t: BisectTrial) -> str:
    symbol, style = trial_symbol(t)
    return f"[{style}]{symbol}[/{style}]"


def _outcome(t: BisectTrial) -> str:
    """What the row concluded, for grouping identical siblings."""
    if t.status == "inferred":
        return "inferred-pass" if t.passed else "inferred-fail"
    return t.status


def _relative(path: str, parent: str | None) -> str:
    if not path:
        return "(root)"
    if parent:
        return path[len(parent) + 1 :]
    return path


def bisect_tree(b: Bisect, max_lines: int = 60) -> Tree | None:
    """The module tree with pass/fail marks, expanded down to the smallest failing modules only."""
    rows = {t.module_path: t for t in b.trials}
    if "" not in rows:
        return None
    children: dict[str, list[BisectTrial]] = defaultdict(list)
    for t in b.trials:
        if t.module_path and t.calls > 0 and t.parent is not None:
            children[t.parent].append(t)
    smallest = set(b.smallest_failing)
    expand: set[str] = set()
    for path in smallest:
        parent = rows[path].parent if path in rows else None
        while parent is not None:
            expand.add(parent)
            parent = rows[parent].parent if parent in rows else None

    def size(path: str) -> int:
        return sum(1 + size(c.module_path) for c in children.get(path, []))

    def label(t: BisectTrial) -> str:
        text = f"{trial_mark(t)} [bold]{escape(_relative(t.module_path, t.parent))}[/bold] [dim]{escape(t.module_class)}[/dim]"
        hidden = size(t.module_path)
        if hidden and t.module_path not in expand:
            text += f" [dim]+{hidden} submodule(s)[/dim]"
        if t.inferred_from is not None:
            text += f" [dim](as {escape(t.inferred_from or '(root)')})[/dim]"
        if t.module_path in smallest:
            text += f"  [bold red]← smallest failing[/bold red]: {escape(failure_text(t))}"
        elif t.status in ("timeout", "crashed") and t.module_path not in expand:
            text += f"  [dim]{escape(t.reason or '')}[/dim]"
        return text

    lines = 0
    root = Tree(label(rows[""]), guide_style="dim")

    def add(node: Tree, path: str) -> None:
        nonlocal lines
        if path not in expand:
            return
        kids = children.get(path, [])
        i = 0
        while i < len(kids):
            k = kids[i]
            j = i + 1
            while (
                j < len(kids)
                and kids[j].module_class == k.module_class
                and _outcome(kids[j]) in (_outcome(k), "inferred-pass" if k.passed else "inferred-fail")
                and kids[j].module_path not in expand
                and (kids[j].module_path in smallest) == (k.module_path in smallest)
                and k.module_path not in expand
            ):
                j += 1
            lines += 1
            if lines > max_lines:
                node.add(f"[dim]{len(kids) - i} more (see the JSON report)[/dim]")
                return
            if j - i >= 3:
                last = kids[j - 1]
                text = label(k)
                first_name = escape(_relative(k.module_path, k.parent))
                group = f"{first_name} to {escape(_relative(last.module_path, last.parent))} ({j - i}×)"
                node.add(text.replace(f"[bold]{first_name}[/bold]", f"[bold]{group}[/bold]", 1))
            else:
                for kid in kids[i:j]:
                    add(node.add(label(kid)), kid.module_path)
            i = j

    add(root, "")
    return root


def render_bisect(b: Bisect) -> list[object]:
    parts: list[object] = []
    body: list[object] = [Text(bisect_summary_line(b), style="dim")]
    tree = bisect_tree(b)
    if tree is not None:
        body.append(tree)
    if b.smallest_failing:
        body.append(Text("look at: " + module_label(b.smallest_failing, 100), style="bold"))
    elif b.untried:
        body.append(Text("no answer: the bisection stopped before it found the failing modules", style="yellow"))
    else:
        body.append(Text("no submodule fails torch.compile(fullgraph=True) on its captured inputs", style="green"))
    for path in b.repro_paths:
        body.append(Text(f"repro: python {path}", style="cyan"))
    if b.untried:
        body.append(Text(f"untried: {module_label(b.untried, 80)}", style="yellow"))
    for note in b.notes:
        body.append(Text(f"note: {note}", style="dim"))
    parts.append(Panel(Group(*body), title="bisection: smallest modules that fail fullgraph=True", title_align="left", expand=True))  # type: ignore[arg-type]
    return parts
