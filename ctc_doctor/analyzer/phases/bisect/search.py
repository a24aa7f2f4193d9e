"""The search over the module tree: which modules to try, in what order, and what the trials mean.

- The tree: a networkx DiGraph of `named_modules()` paths with class, parameters, call count, input
  signature, a memo key and the recorded inputs. Containers that are never called (ModuleList) are
  walked through: a node's bisection children are its nearest exercised descendants.
- Strategies: top-down (descend into failing children) and bottom-up (leaves first, parents whose
  children all pass). Trials are shared between strategies and memoized on (class, input signature,
  submodule structure, flag attributes): 64 identical blocks cost one trial.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import networkx as nx
import torch

from ....progress import ProgressEvent, Step
from ...capture.attribution import ModuleIndex
from ...capture.inputs import ModuleInputs
from ...running.modules import forward_arg_names
from ..context import ProgressFn
from .trials import TrialOutcome

PROBLEM = ("failed", "timeout", "crashed")
"""Trial statuses that count against a module."""


def _flags(module: torch.nn.Module) -> tuple[Any, ...]:
    """Attributes that usually steer control flow: bools, strings and Nones (not ints like layer_idx)."""
    return tuple(sorted((k, v) for k, v in vars(module).items() if not k.startswith("_") and (isinstance(v, (bool, str)) or v is None)))


def _structure(module: torch.nn.Module) -> tuple[Any, ...]:
    return tuple(
        (
            name,
            type(m).__module__,
            type(m).__qualname__,
            tuple(tuple(p.shape) for p in m.parameters(recurse=False)),
            _flags(m),
        )
        for name, m in module.named_modules()
    )


def build_tree(inputs: ModuleInputs) -> nx.DiGraph:
    """Module paths as a tree with class, parameters, calls, input signature and memo key per node."""
    tree = nx.DiGraph()
    structures: dict[int, tuple[Any, ...]] = {}
    for path, module in inputs.modules.items():
        captured = inputs.inputs.get(path)
        exercised = captured is not None
        key = None
        if captured is not None:
            sid = id(module)
            if sid not in structures:
                structures[sid] = _structure(module)
            key = (type(module).__module__, type(module).__qualname__, captured.signature, captured.grad_enabled, structures[sid])
        tree.add_node(
            path,
            cls=type(module).__name__,
            parameters=sum(p.numel() for p in module.parameters()),
            calls=inputs.calls.get(path, 0),
            exercised=exercised,
            key=key,
            inputs=captured,
            arg_names=forward_arg_names(module) if exercised else None,
        )
        if path:
            parent = path.rpartition(".")[0]
            if parent in tree:
                tree.add_edge(parent, path)
    return tree


def bisect_children(tree: nx.DiGraph, path: str) -> list[str]:
    """Nearest exercised descendants of `path`, in module order."""
    out: list[str] = []
    for child in tree.successors(path):
        if tree.nodes[child]["exercised"]:
            out.append(child)
        else:
            out.extend(bisect_children(tree, child))
    return out


def bisect_parent(tree: nx.DiGraph, path: str) -> str | None:
    node = path
    while True:
        preds = list(tree.predecessors(node))
        if not preds:
            return None
        node = preds[0]
        if tree.nodes[node]["exercised"]:
            return node  # type: ignore[no-any-return]


class Search:
    """Trial results by module path, memoized by key, with the trial budget."""

    def __init__(
        self,
        tree: nx.DiGraph,
        run: Callable[[str], TrialOutcome],
        *,
        memoize: bool,
        max_trials: int | None,
        progress: ProgressFn,
        stop_at: float | None,
        step: Step = Step.BISECT,
    ) -> None:
        self.tree = tree
        self.step = step
        """What a trial reports itself as: a fullgraph trial (`bisect`), or the accuracy bisection's."""
        self.run = run
        self.memoize = memoize
        self.max_trials = max_trials
        self.progress = progress
        self.stop_at = stop_at
        """time.monotonic() after which no trial starts (None: no limit)."""
        self.outcomes: dict[str, TrialOutcome] = {}
        self.inferred_from: dict[str, str] = {}
        self.representative: dict[Any, str] = {}
        self.untried: list[str] = []
        self.trials_run = 0
        self.consulted: set[Any] = set()  # memo keys the current strategy needed

    def outcome(self, path: str) -> TrialOutcome | None:
        node = self.tree.nodes[path]
        key = node["key"] if self.memoize else path
        self.consulted.add(key)
        if path in self.outcomes:
            return self.outcomes[path]
        rep = self.representative.get(key)
        if rep is not None:
            self.inferred_from[path] = rep
            self.outcomes[path] = self.outcomes[rep]
            return self.outcomes[path]
        out_of_time = self.stop_at is not None and time.monotonic() >= self.stop_at
        if (self.max_trials is not None and self.trials_run >= self.max_trials) or out_of_time:
            if path not in self.untried:
                self.untried.append(path)
            return None
        self.progress(ProgressEvent(self.step, self.trials_run, subject=path))
        result = self.run(path)
        self.trials_run += 1
        self.outcomes[path] = result
        self.representative[key] = path
        return result

    def own_break(self, path: str, index: ModuleIndex | None) -> bool:
        """The failure stops in `path`'s own code: no frame of it is a call into a submodule."""
        result = self.outcomes.get(path)
        if result is None or result.status != "failed" or not result.stack:
            return False
        rep = self.inferred_from.get(path, path)
        if index is None:
            return False
        for file, line, _, _ in result.stack[:-1]:
            callees = index.call_sites.get((file, line), ())
            if any(c.startswith(rep + ".") or (rep == "" and c) for c in callees):
                return False
        return True


def top_down(search: Search, root: str, index: ModuleIndex | None) -> tuple[list[str], bool]:
    smallest: list[str] = []
    complete = True
    queue = [root]
    while queue:
        path = queue.pop(0)
        result = search.outcome(path)
        if result is None:
            complete = False
            continue
        if result.passed or result.status == "skipped":
            continue
        kids = bisect_children(search.tree, path)
        failing, unknown = [], False
        for kid in kids:
            kid_result = search.outcome(kid)
            if kid_result is None:
                unknown = True
            elif kid_result.status in PROBLEM:
                failing.append(kid)
        if unknown:
            complete = False
        if (not failing and not unknown) or search.own_break(path, index):
            smallest.append(path)
        queue.extend(failing)
    return smallest, complete


def bottom_up(search: Search, root: str) -> tuple[list[str], bool]:
    state: dict[str, str] = {}
    smallest: list[str] = []
    for path in nx.dfs_postorder_nodes(search.tree, root):
        if not search.tree.nodes[path]["exercised"]:
            continue
        kids = [state[k] for k in bisect_children(search.tree, path)]
        if any(k in ("failing", "blocked") for k in kids):
            state[path] = "blocked"
            continue
        if "unknown" in kids:
            state[path] = "unknown"
            continue
        result = search.outcome(path)
        if result is None:
            state[path] = "unknown"
        elif result.status in PROBLEM:
            state[path] = "failing"
            smallest.append(path)
        else:
            state[path] = "passing"  # passed, or skipped (cannot run alone): no evidence against parents
    return smallest, "unknown" not in state.values()
