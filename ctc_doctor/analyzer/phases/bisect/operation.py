"""Within the smallest module whose compiled output departs from float64 (`accuracy`), the operation.

The module is compiled once more on its recorded inputs through a backend that keeps the graphs Dynamo
hands it, and run eagerly once under a line tracer. Two ways compiled can go wrong, told apart:

- **the traced program is not eager's** (a branch on `torch.compiler.is_compiling()`, a Python value
  read at trace time that eager reads otherwise): an operation of the graph whose user line the eager
  forward never ran, in a function it did run. That operation is the divergence: `traced_only`.
- **the backend computes a right program wrong**: the graph itself, run as plain PyTorch at float64,
  is the reference for its own compiled form. The shortest prefix of the graph whose compiled output
  departs from that reference beyond the graph's own error at the model's precision (a binary search
  over cuts of the graph, as the crash triage cuts a failing graph) ends at the operation: `backend`.

Forward only, inference: what the accuracy bisection judged its module on.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from ....reports import models as rm
from ... import torch_internals as ti
from ...capture.inputs import CapturedCall
from ...running.calls import lines_run, seeded
from ...running.deadline import DeadlineExceeded, deadline
from ...running.numerics import multiplier, tolerance
from ...running.reference.precision import cast_in_place
from ...running.tensors import iter_tensors
from ...triage import compute_nodes, concrete, cut_after, operation_text, reduce_graph, user_line

BUDGET_S = 60.0
"""The most the search over cuts of one graph may take."""


@dataclass
class Located:
    """The operation, and for a backend that computes it wrong, the graph cut after it with its inputs
    (what the bug's repro runs)."""

    operation: rm.AccuracyOperation
    cut: torch.fx.GraphModule | None = None
    args: list[Any] = field(default_factory=list)
    graph_nodes: int | None = None
    """Operations in the whole graph the cut came from."""


class _Keeping:
    """A backend that keeps each graph (and its example inputs) before its inner backend compiles it."""

    def __init__(self, backend: str) -> None:
        self.inner = ti.lookup_backend(backend)
        self.graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        kept = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))  # the inner backend may rewrite gm's graph in place
        self.graphs.append((kept, list(example_inputs)))
        return self.inner(gm, example_inputs, **kwargs)


def _frame_of(node: torch.fx.Node) -> tuple[str, int, int] | None:
    """(file, line, the function's first line) of the operation's innermost user frame."""
    if not node.meta.get("stack_trace"):
        return None
    line, _ = user_line(node, node.graph.owning_module)  # type: ignore[arg-type]
    if line is None:
        return None
    file, _, number = line.rpartition(":")
    for code in _codes_in(file):
        if int(number) in {n for _, _, n in code.co_lines() if n is not None}:
            return file, int(number), code.co_firstlineno
    return None


_CODE_CACHE: dict[str, list[Any]] = {}


def _codes_in(file: str) -> list[Any]:
    """Every code object compiled from `file` (functions nested included), innermost last."""
    if file not in _CODE_CACHE:
        try:
            with open(file, encoding="utf-8") as fh:
                top = compile(fh.read(), file, "exec")
        except (OSError, SyntaxError, ValueError):
            _CODE_CACHE[file] = []
            return []
        found, todo = [], [top]
        while todo:
            code = todo.pop()
            found.append(code)
            todo.extend(c for c in code.co_consts if hasattr(c, "co_lines"))
        _CODE_CACHE[file] = sorted(found, key=lambda c: c.co_firstlineno, reverse=True)
    return _CODE_CACHE[file]


def _traced_only(graphs: list[tuple[torch.fx.GraphModule, list[Any]]], ran: set[tuple[str, int]]) -> rm.AccuracyOperation | None:
    """The first operation of the graphs whose user line eager never ran, in a function eager did run."""
    for gm, _ in graphs:
        for node in gm.graph.nodes:
            if node.op not in ("call_function", "call_method", "call_module"):
                continue
            where = _frame_of(node)
            if where is None:
                continue
            file, line, first = where
            if (file, -first) in ran and (file, line) not in ran:
                at, code = user_line(node, gm)
                return rm.AccuracyOperation(
                    kind="traced_only",
                    operation=operation_text(node),
                    user_line=at,
                    user_code=code,
                    note="only the compiled graph runs this line: eager's forward never does (a branch on "
                    "torch.compiler.is_compiling(), or a value read while tracing that eager reads otherwise)",
                )
    return None


def _outputs(value: Any) -> list[torch.Tensor]:
    return [t.detach() for t in iter_tensors(value) if t.is_floating_point()]


def _error(mine: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    return max((float((a.double() - b.double()).abs().max()) for a, b in zip(mine, ref, strict=False) if a.numel()), default=0.0)


_LOW_PRECISION = (torch.float32, torch.float16, torch.bfloat16)


def _at_float64(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph with every floating dtype it names (`x.to(torch.float32)`, `zeros(..., dtype=...)`: Dynamo
    writes them as constants) made float64, so its run from float64 inputs stays float64."""
    graph = copy.deepcopy(gm.graph)

    def high(value: Any) -> Any:
        if isinstance(value, torch.dtype) and value in _LOW_PRECISION:
            return torch.float64
        if isinstance(value, (tuple, list)):
            return type(value)(high(v) for v in value)
        if isinstance(value, dict):
            return {k: high(v) for k, v in value.items()}
        return value

    for node in graph.nodes:
        node.args, node.kwargs = high(node.args), high(node.kwargs)
    out = torch.fx.GraphModule(gm, graph)
    out.recompile()
    return out


def _run(fn: Any, args: list[Any]) -> list[torch.Tensor]:
    """`fn` on a fresh copy of `args` (a graph may update an input in place), from one seed."""
    fresh = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with seeded(0):  # every generator in use, CUDA's too, put back after
        return _outputs(fn(*fresh))


def departs(gm: torch.fx.GraphModule, args: list[Any], backend: str) -> float | None:
    """How far the compiled graph departs from its own float64 run, in multiples of the graph's own error at
    the model's precision; None when it does not depart beyond the numerics rule (or cannot run, or the
    graph's own run has no error to measure against: inconclusive)."""
    with torch.no_grad():
        own = _run(gm, args)
        if not own:
            return None
        high_args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        reference = _at_float64(gm)
        with cast_in_place(reference, torch.float64):
            ref = _run(reference, high_args)
        # the backend called as Dynamo calls it, on a copy (a backend may rewrite the graph in place; and
        # Dynamo would not trace a graph module whose code it produced itself)
        fresh = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
        with ti.preserved_dynamo_state(), ti.quiet_torch_stderr(True):
            compiled = _run(ti.lookup_backend(backend)(fresh, list(args)), args)
    if any(t.dtype != torch.float64 for t in ref):
        return None  # the reference did not stay float64: nothing to judge by
    eager_error, compiled_error = _error(own, ref), _error(compiled, ref)
    if eager_error == 0.0:
        return None
    dtype, numel = own[0].dtype, max(t.numel() for t in own)
    _, atol = tolerance(dtype, False)
    if compiled_error <= max(multiplier(dtype, numel) * eager_error, atol):
        return None
    return compiled_error / eager_error


def _wrong_in_backend(graphs: list[tuple[torch.fx.GraphModule, list[Any]]], backend: str, budget_s: float) -> Located | None:
    """The first operation whose compiled output departs from the graph's own float64 run."""
    for gm, inputs in graphs:
        args = [concrete(a) for a in inputs]

        def fails(cut: torch.fx.GraphModule, args: list[Any] = args) -> bool:
            return departs(cut, args, backend) is not None

        with contextlib.suppress(Exception):  # a graph that cannot run alone: the next one
            if not fails(gm):
                continue
            reduced = reduce_graph(gm, args, fails, budget_s)
            if reduced.node is None:
                continue
            cut = cut_after(gm, reduced.node)
            ratio = departs(cut, args, backend)
            at, code = user_line(reduced.node, gm)
            operation = rm.AccuracyOperation(
                kind="backend",
                operation=operation_text(reduced.node),
                user_line=at,
                user_code=code,
                ratio=round(ratio, 3) if ratio is not None else None,
                note=f"{backend} computes it wrong: the graph cut after it, compiled, departs from the same graph run at float64",
            )
            return Located(operation, cut, args, graph_nodes=len(compute_nodes(gm)))
    return None


def locate_operation(module: torch.nn.Module, captured: CapturedCall, backend: str, timeout_s: float | None) -> Located | None:
    """The operation where `module` compiled with `backend` goes wrong on its recorded inputs, or None."""
    keeping = _Keeping(backend)
    try:
        with deadline(timeout_s), torch.no_grad(), ti.preserved_dynamo_state(), ti.quiet_torch_stderr(True):
            ti.fresh_dynamo_state()
            args, kwargs = captured.fresh()
            try:
                torch.compile(module, backend=keeping)(*args, **kwargs)
            finally:
                ti.reset_dynamo_quietly()
            args, kwargs = captured.fresh()
            files = {w[0] for gm, _ in keeping.graphs for n in gm.graph.nodes if (w := _frame_of(n)) is not None}
            with lines_run(files) as ran:
                module(*args, **kwargs)
            found = _traced_only(keeping.graphs, ran)
            return Located(found) if found is not None else _wrong_in_backend(keeping.graphs, backend, min(BUDGET_S, timeout_s or BUDGET_S))
    except DeadlineExceeded:
        return None
    except Exception:  # noqa: BLE001 - the module is named already: the operation is a refinement
        return None
