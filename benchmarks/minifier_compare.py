"""The crash reduction against torch's minifier: ctc-doctor's prefix search and `functorch.compile.minifier`
on the same captured graphs.

When a compile fails inside torch, the triage (`ctc_doctor.analyzer.triage`) keeps the FX graph the failing
backend was handed and cuts it down with `reduce_graph`: a binary search over the graph's prefixes, ending at
the first operation whose prefix fails. For a backend that computes a graph wrong, the accuracy bisection
(`phases/bisect/operation.py`) runs the same search with "departs from the graph's own float64 run" as the
test. torch has its own: `torch._functorch.fx_minifier.minifier` (what `TORCHDYNAMO_REPRO_AFTER="dynamo"`
runs on Dynamo's graph through `dynamo_minifier_backend` / `dynamo_accuracy_minifier_backend`): suffix
truncation, then delta debugging (intermediate values turned into inputs), output and input removal.

Each case is a real `torch.compile` call on a model the tests use, with a backend the tests register to fail
on one operation (or compute it wrong). The graph is captured as the triage captures it (a catching backend,
the cheaper backends first: the graph of the first stage that fails), then reduced three ways:

  ours           `reduce_graph` with the triage's own test (the graph compiled with `torch.compile` on the
                 failing backend fails with the same error type; for a wrong result: `departs`)
  torch          `minifier` with that same test: the search strategies compared on an equal footing
  ours+torch     `minifier`, with that same test, on the prefix `reduce_graph` cut (the two in a row)
  torch-native   `minifier` with the test torch's own minifier backends use (`backend_fails`: the backend
                 called directly on the graph, an error text > 50 % similar; `backend_accuracy_fails`:
                 `same_two_models` against float64, forward only)

For each it prints the graph's operations (and inputs) before and after, the queries made, the wall time,
and whether the result's standalone repro, written the same way for all (`triage.repro_text`, and for a
wrong result the accuracy repro of `numerics_bug`), fails the same way under plain `python` (a fresh
process, random inputs of the recorded shapes). Each reduction stops after `--budget` seconds (the triage's
own 60 s; torch's minifier has no budget of its own: at the budget the best state it had reached is kept).
Figures, no asserts. About 3-5 minutes on 2 CPU cores.

    .venv/bin/python benchmarks/minifier_compare.py [--budget 60] [--case NAME ...] [--no-repro]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "targets"))  # the targets the tests use, importable by name

import accuracy_targets  # noqa: E402 - registers `sloppy_tanh`
import user_targets  # noqa: E402 - registers `ctc_test_no_tanh`, `ctc_test_no_where`

from ctc_doctor.analyzer import torch_internals as ti  # noqa: E402
from ctc_doctor.analyzer import triage as tr  # noqa: E402
from ctc_doctor.analyzer.phases.bisect.numerics_bug import ERROR_TYPE, _repro  # noqa: E402
from ctc_doctor.analyzer.phases.bisect.operation import Located, departs  # noqa: E402

REPRO_TIMEOUT_S = 120.0


# --- the cases: models and backends the tests use --------------------------------------------------


class FourProblemsWhere(user_targets.FourProblems):
    """`user_targets.four_problems` with its branchless-where fix applied (the data-dependent `if` made a
    `torch.where`): what breaks the compile on `ctc_test_no_where` in tests/test_fixes.py."""

    def forward(self, x, scale):
        print("input", tuple(x.shape))
        h = self.fc(x)
        h = torch.where(h.sum() > 0, h * 2, h - 1)
        peak = h.abs().max().item()
        return h * scale / (1.0 + peak)


class ModNet(torch.nn.Module):
    """The script of tests/test_run.py's `dynamic=True` crash: a Python int under `%` made symbolic."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, step):
        return self.fc(x) * (1.0 / (1 + step % 1000))


class DeepWhere(torch.nn.Module):
    """Not a test's model: `accuracy_targets.Block` repeated `DEEP` times, then a `torch.where` for
    `ctc_test_no_where` to fail on: the failing operation last in a graph of a few hundred, for how each
    search scales."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(accuracy_targets.Block() for _ in range(DEEP))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return torch.where(x > 0, x, 0.1 * x)


DEEP = 40


def _crash_with_tanh() -> tuple[Callable[[Callable[..., Any]], Any], str]:
    model, (x,) = user_targets.with_tanh()
    return (lambda compile_: compile_(model)(x)), "ctc_test_no_tanh"


def _crash_six_blocks_tanh() -> tuple[Callable[[Callable[..., Any]], Any], str]:
    model, (x,) = accuracy_targets.right_blocks()
    return (lambda compile_: compile_(model)(x)), "ctc_test_no_tanh"


def _crash_four_problems_where() -> tuple[Callable[[Callable[..., Any]], Any], str]:
    torch.manual_seed(0)
    model = FourProblemsWhere()
    calls = [(torch.randn(4, 8), 1)]
    return (lambda compile_: [compile_(model)(*c) for c in calls]), "ctc_test_no_where"


def _crash_dynamic_mod() -> tuple[Callable[[Callable[..., Any]], Any], str]:
    torch.manual_seed(0)
    model = ModNet()

    def run(compile_: Callable[..., Any]) -> None:
        compiled = compile_(model, dynamic=True)
        for step in range(4):
            compiled(torch.randn(4, 8), step)

    return run, "inductor"  # the script's default backend; the stages stop at aot_eager, which crashes


def _crash_deep_where() -> tuple[Callable[[Callable[..., Any]], Any], str]:
    torch.manual_seed(0)
    model, x = DeepWhere(), torch.randn(4, 32)
    return (lambda compile_: compile_(model)(x)), "ctc_test_no_where"


def _wrong_block() -> tuple[torch.nn.Module, tuple[Any, ...], str]:
    torch.manual_seed(0)
    return accuracy_targets.Block(), (torch.randn(4, 32),), "sloppy_tanh"


def _wrong_six_blocks() -> tuple[torch.nn.Module, tuple[Any, ...], str]:
    model, args = accuracy_targets.right_blocks()
    return model, args, "sloppy_tanh"


def _wrong_traced_only() -> tuple[torch.nn.Module, tuple[Any, ...], str]:
    model, args = accuracy_targets.six_blocks()  # block 3 computes more only while compiled: Dynamo's graph says so
    return model, args, "aot_eager"


CRASHES: dict[str, Callable[[], tuple[Callable[[Callable[..., Any]], Any], str]]] = {
    "with_tanh/no_tanh": _crash_with_tanh,
    "right_blocks/no_tanh": _crash_six_blocks_tanh,
    "four_problems+where/no_where": _crash_four_problems_where,
    "python_mod dynamic=True": _crash_dynamic_mod,
    f"deep {DEEP} blocks+where/no_where (scaling)": _crash_deep_where,
}
WRONG: dict[str, Callable[[], tuple[torch.nn.Module, tuple[Any, ...], str]]] = {
    "Block/sloppy_tanh": _wrong_block,
    "right_blocks/sloppy_tanh": _wrong_six_blocks,
    "six_blocks/aot_eager (traced-only)": _wrong_traced_only,
}


# --- a captured graph, and what each reduction needs ----------------------------------------------


@dataclass
class Captured:
    name: str
    kind: str
    """`crash` or `wrong`."""
    backend: str
    gm: torch.fx.GraphModule | None = None
    args: list[Any] = field(default_factory=list)
    dynamic: bool | None = None
    error: str = ""
    error_type: str = ""
    stage: str = ""
    exc: BaseException | None = None
    note: str = ""


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))


def capture_crash(name: str, build: Callable[[], tuple[Callable[[Callable[..., Any]], Any], str]]) -> Captured:
    """As `triage.triage`: the cheaper backends first, the graph the first failing one was handed."""
    run, backend = build()
    attempts = tr.stages(run, backend, {})
    failed = next((a for a in attempts if a.error is not None), None)
    out = Captured(name, "crash", backend)
    if failed is None or failed.graph is None:
        out.note = "no failing graph captured: " + " / ".join(a.line() for a in attempts)
        return out
    gm, inputs, exc = failed.graph
    out.backend, out.gm, out.exc = failed.backend, _copy(gm), exc
    out.args = [tr.concrete(v) for v in inputs]
    out.dynamic = True if any(ti.symint_hint(v) is not None for v in inputs) else None
    out.error = tr.error_line(failed.error)
    out.error_type, out.stage = out.error.split(":", 1)[0], tr.stage_of(failed.backend)
    return out


class _Keeping:
    """A backend that keeps each graph and its inputs (a copy: the inner backend may rewrite it)."""

    def __init__(self, backend: str) -> None:
        self.inner = ti.lookup_backend(backend)
        self.graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        self.graphs.append((_copy(gm), list(example_inputs)))
        return self.inner(gm, example_inputs, **kwargs)


def capture_wrong(name: str, build: Callable[[], tuple[torch.nn.Module, tuple[Any, ...], str]]) -> Captured:
    """As `operation.locate_operation`: the first graph whose compiled form departs from its own float64 run."""
    model, args, backend = build()
    keeping = _Keeping(backend)
    with torch.no_grad(), ti.preserved_dynamo_state(), ti.quiet_torch_stderr(True):
        ti.fresh_dynamo_state()
        try:
            torch.compile(model, backend=keeping)(*args)
        finally:
            ti.reset_dynamo_quietly()
    out = Captured(name, "wrong", backend, error_type=ERROR_TYPE, stage=tr.stage_of(backend))
    for gm, inputs in keeping.graphs:
        concrete = [tr.concrete(v) for v in inputs]
        ratio = departs(gm, concrete, backend)
        if ratio is not None:
            out.gm, out.args = gm, concrete
            out.error = f"{ERROR_TYPE}: compiled, it departs from float64 {ratio:.3g}x the graph's own error"
            return out
    total = sum(len(tr.compute_nodes(g)) for g, _ in keeping.graphs)
    out.note = (
        f"{len(keeping.graphs)} graph(s), {total} operations: none departs from its own float64 run "
        "(the wrongness is in what Dynamo traced, not in how the backend computes the graph)"
    )
    return out


def crash_test(case: Captured) -> Callable[[torch.fx.GraphModule, list[Any]], bool]:
    """The triage's test: the graph compiled with `torch.compile` on the failing backend fails with the
    same error type."""

    def fails(graph: torch.fx.GraphModule, args: list[Any]) -> bool:
        try:
            tr.compile_graph(graph, list(args), case.backend, {}, case.dynamic)
        except Exception as exc:  # noqa: BLE001 - the failure looked for
            return tr.error_line(exc).split(":", 1)[0] == case.error_type
        return False

    return fails


def wrong_test(case: Captured) -> Callable[[torch.fx.GraphModule, list[Any]], bool]:
    def fails(graph: torch.fx.GraphModule, args: list[Any]) -> bool:
        return departs(graph, list(args), case.backend) is not None

    return fails


def native_test(case: Captured) -> tuple[Callable[[torch.fx.GraphModule, list[Any]], bool] | None, str]:
    """The test torch's own minifier backends use on Dynamo's graph (`repro_after="dynamo"`), or None and why."""
    from torch._dynamo.debug_utils import backend_accuracy_fails, run_fwd_maybe_bwd
    from torch._dynamo.repro.after_dynamo import backend_fails

    compiler_fn = ti.lookup_backend(case.backend)
    assert case.gm is not None
    if case.kind == "wrong":

        def accuracy(graph: torch.fx.GraphModule, args: list[Any]) -> bool:
            return backend_accuracy_fails(graph, list(args), compiler_fn, only_fwd=True)

        return accuracy, ""
    # as `dynamo_minifier_backend`: the backend called on the graph directly, its error's text kept
    try:
        with ti.quiet_torch_stderr(True):
            run_fwd_maybe_bwd(compiler_fn(_copy(case.gm), list(case.args)), list(case.args))
    except Exception as exc:  # noqa: BLE001 - the failure looked for
        orig = str(exc)
        return (lambda graph, args: backend_fails(graph, list(args), compiler_fn, orig)), ""
    return None, "the backend called on the graph directly does not fail (`No issue was detected`)"


# --- the reductions ---------------------------------------------------------------------------------


class _OutOfTime(Exception):
    pass


@dataclass
class Result:
    reducer: str
    graph: torch.fx.GraphModule | None = None
    args: list[Any] = field(default_factory=list)
    queries: int = 0
    wall_s: float = 0.0
    note: str = ""
    repro: bool | None = None
    repro_note: str | None = None


def _counting(test: Callable[[torch.fx.GraphModule, list[Any]], bool], end: float | None, counter: list[int]) -> Callable[..., bool]:
    def counted(graph: torch.fx.GraphModule, args: Any) -> bool:
        if end is not None and time.perf_counter() > end:
            raise _OutOfTime
        counter[0] += 1
        return test(graph, list(args))

    return counted


def reduce_ours(case: Captured, test: Callable[[torch.fx.GraphModule, list[Any]], bool], budget_s: float) -> Result:
    assert case.gm is not None
    counter = [0]
    counted = _counting(test, None, counter)
    start = time.perf_counter()
    reduced = tr.reduce_graph(_copy(case.gm), case.args, lambda g: counted(g, case.args), budget_s)
    out = Result("ours", reduced.graph, list(case.args), counter[0], time.perf_counter() - start)
    if reduced.node is None:
        out.note = "not narrowed (the whole graph)"
    return out


def reduce_torch(
    case: Captured,
    test: Callable[[torch.fx.GraphModule, list[Any]], bool] | None,
    budget_s: float,
    reducer: str,
    why: str = "",
    start_from: Result | None = None,
) -> Result:
    """torch's minifier on the captured graph, or on `start_from`'s graph (its time and queries added)."""
    from torch._functorch.fx_minifier import minifier

    assert case.gm is not None
    if test is None:
        return Result(reducer, note=why)
    if start_from is not None:
        if start_from.graph is None:
            return Result(reducer, note="nothing to start from")
        base = Captured(case.name, case.kind, case.backend, start_from.graph, start_from.args)
        out = reduce_torch(base, test, budget_s, reducer)
        out.queries += start_from.queries
        out.wall_s += start_from.wall_s
        return out
    counter, last = [0], {}

    def keep(graph: torch.fx.GraphModule, inps: Any) -> None:  # each state the minifier reaches (all fail)
        last["state"] = (_copy(graph), list(inps))

    start = time.perf_counter()
    out = Result(reducer)
    quiet = io.StringIO()
    logging.disable(logging.CRITICAL)  # backend_accuracy_fails logs each candidate that raises
    try:
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            graph, inps = minifier(_copy(case.gm), list(case.args), _counting(test, start + budget_s, counter), dump_state=keep)
        out.graph, out.args = graph, list(inps)
    except _OutOfTime:
        if "state" in last:
            out.graph, out.args = last["state"]
            out.note = f"stopped at the {budget_s:.0f} s budget: its best state kept"
        else:
            out.note = f"stopped at the {budget_s:.0f} s budget before any state"
    except Exception as exc:  # noqa: BLE001 - what the minifier says is the result
        out.note = f"minifier raised {type(exc).__name__}: {str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ''}"
    finally:
        logging.disable(logging.NOTSET)
    out.queries, out.wall_s = counter[0], time.perf_counter() - start
    return out


def repro_of(case: Captured, result: Result) -> str | None:
    """The standalone repro of the result's graph, written as the doctor writes its own."""
    assert result.graph is not None
    owner, importing = tr.backend_owner(case.backend)
    where = f"benchmarks/minifier_compare.py ({case.name}, {result.reducer})"
    if case.kind == "crash":
        return tr.repro_text(
            result.graph, result.args, case.backend, {}, case.dynamic, where=where, stage=case.stage, error=case.error, importing=importing
        )
    located = Located(None, result.graph, result.args)  # type: ignore[arg-type] - `_repro` reads the cut and its inputs only
    return _repro(located, case.backend, importing, where=where, stage=case.stage, error=case.error)


# --- the table --------------------------------------------------------------------------------------


def _size(graph: torch.fx.GraphModule | None) -> str:
    if graph is None:
        return "-"
    inputs = sum(1 for n in graph.graph.nodes if n.op == "placeholder")
    return f"{len(tr.compute_nodes(graph))} ({inputs} in)"


def _ops(graph: torch.fx.GraphModule | None) -> str:
    if graph is None:
        return ""
    names = [getattr(n.target, "__name__", None) or str(n.target) for n in tr.compute_nodes(graph)]
    return ", ".join(names) if len(names) <= 4 else ", ".join(names[:2]) + f", ... {names[-1]}"


def _repro_cell(result: Result) -> str:
    if result.repro is True:
        return "yes"
    if result.repro is None:
        return "-" if result.graph is None else f"not run ({result.repro_note or ''})"
    return f"no ({result.repro_note})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=tr.REDUCE_BUDGET_S, help="seconds per reduction (the triage's 60)")
    parser.add_argument("--case", action="append", help="only these cases (by name; repeatable)")
    parser.add_argument("--no-repro", action="store_true", help="do not run the repros under plain python")
    opts = parser.parse_args()

    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    print(f"torch {torch.__version__}, budget {opts.budget:.0f} s per reduction, {os.cpu_count()} CPUs\n")
    rows: list[tuple[Captured, Result]] = []
    total = time.perf_counter()
    plan = [("crash", n, b) for n, b in CRASHES.items()] + [("wrong", n, b) for n, b in WRONG.items()]
    for kind, name, build in plan:
        if opts.case and name not in opts.case:
            continue
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # four_problems prints its input's shape
            case = capture_crash(name, build) if kind == "crash" else capture_wrong(name, build)  # type: ignore[arg-type]
        print(f"== {name} [{kind}] on {case.backend}: captured in {time.perf_counter() - start:.1f} s")
        if case.gm is None:
            print(f"   {case.note}\n")
            rows.append((case, Result("both", note=case.note)))
            continue
        print(f"   {case.stage}: {case.error}\n   graph: {_size(case.gm)}: {_ops(case.gm)}")
        test = crash_test(case) if kind == "crash" else wrong_test(case)
        native, why = native_test(case)
        results = [
            reduce_ours(case, test, opts.budget),
            reduce_torch(case, test, opts.budget, "torch"),
            reduce_torch(case, native, opts.budget, "torch-native", why),
        ]
        results.insert(2, reduce_torch(case, test, opts.budget, "ours+torch", start_from=results[0]))
        for result in results:
            if result.graph is not None and not opts.no_repro:
                text = repro_of(case, result)
                if text is None:
                    result.repro_note = "this torch cannot print the graph"
                else:
                    result.repro, result.repro_note = tr.run_repro(text, case.error_type, REPRO_TIMEOUT_S)
            print(
                f"   {result.reducer:<13} {_size(result.graph):>10}  {result.queries:>3} queries  {result.wall_s:6.1f} s  "
                f"repro: {_repro_cell(result)}  [{_ops(result.graph)}]{'  ' + result.note if result.note else ''}"
            )
            rows.append((case, result))
        ours, theirs = results[0], results[1]
        if ours.graph is not None and theirs.graph is not None and theirs.wall_s > 0:
            print(
                f"   ratios torch/ours: operations {len(tr.compute_nodes(theirs.graph))}/{len(tr.compute_nodes(ours.graph))}, "
                f"queries {theirs.queries}/{ours.queries}, wall {theirs.wall_s / max(ours.wall_s, 1e-9):.1f}x"
            )
        print()

    print(f"total {time.perf_counter() - total:.0f} s\n")
    print(
        "| case | kind | graph: ops (inputs) | reducer | after: ops (inputs) | what is left | queries | wall s | repro fails the same way |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for case, result in rows:
        if case.gm is None:
            print(f"| {case.name} | {case.kind} | - | - | - | {case.note} | - | - | - |")
            continue
        left = _ops(result.graph) + (f" ({result.note})" if result.note else "")
        print(
            f"| {case.name} | {case.kind} | {_size(case.gm)} | {result.reducer} | {_size(result.graph)} | {left} | "
            f"{result.queries} | {result.wall_s:.1f} | {_repro_cell(result)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
