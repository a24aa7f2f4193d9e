"""Module bisection: the smallest submodules that fail `torch.compile(fullgraph=True)`.

The analysis's eager pass recorded each module's first-call inputs (`capture.inputs`); `search` walks
the module tree top-down and/or bottom-up, `trials` compiles one module with fullgraph=True on a fresh
copy of its inputs (in-process or in a child process), and `repro` writes a standalone script per
distinct failing module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from ....reports import models as rm
from ...capture.attribution import ModuleIndex
from ...capture.inputs import CapturedCall, ModuleInputs
from ...readers.findings import frame as _frame
from ...readers.sources import classify_file
from ...readers.text import describe_error
from ...running.calls import preserved_state
from ...running.deadline import Interrupted, Stopped, enforceable, stop_record
from ...running.modules import describe_inputs, path_key
from ...running.worker import rebuild_setup
from ..context import PhaseContext
from .repro import write_repros
from .search import Search, bisect_parent, bottom_up, build_tree, top_down
from .trials import TrialOutcome, TrialWorker, run_trial, saveable


@dataclass(frozen=True)
class BisectOptions:
    """How to bisect. Backend, train, device and seed are the run's (`PhaseContext.settings`)."""

    strategy: rm.Strategy = "both"
    """top-down, bottom-up, or both (trials are shared; the report says whether they agree)."""
    max_trials: int | None = None
    """Stop starting trials after this many; what was left is listed in `untried`."""
    trial_timeout_s: float | None = 60.0
    """Per-trial limit; a trial over it becomes a `timeout` row and the bisection goes on."""
    isolate: bool = False
    """Run the trials in a child process that rebuilds the workload from `target` (one serves them all)."""
    memoize: bool = True
    """Try modules with the same class, input signature and structure once."""
    repro_dir: str | None = None
    """Write a standalone repro script per distinct failing module here (None: none written)."""
    target: str | None = None
    """Importable TARGET to rebuild the workload (child processes, repro scripts); default: the run's spec."""
    always: bool = False
    """Bisect even when the analysis found no graph break (the bisect command)."""


@dataclass
class BisectInputs:
    """What the bisection reads beyond the phase context: what the analysis's eager pass recorded, and the
    child process of isolated trials when the pipeline started it early."""

    module_inputs: ModuleInputs
    """Each module's first-call inputs."""
    index: ModuleIndex | None = None
    """Module call sites and code ownership."""
    trial_worker: TrialWorker | None = None
    """The child process for isolated trials, started before the analysis so that it is ready (torch
    imported, workload rebuilt) when the bisection needs it."""


def worker_setup(ctx: PhaseContext, options: BisectOptions) -> dict[str, Any] | None:
    """What an isolated trial's child needs to rebuild the workload; None when the target is not importable."""
    return rebuild_setup(options.target or ctx.spec, ctx.settings)


def run_bisect(ctx: PhaseContext, options: BisectOptions, inputs: BisectInputs) -> rm.Bisect:
    """Bisect the model whose first-call inputs the analysis recorded. Leaves its grads and buffers as found."""
    t0 = time.perf_counter()
    settings = ctx.settings
    model = inputs.module_inputs.model
    tree = build_tree(inputs.module_inputs)
    notes: list[str] = []
    result = rm.Bisect(
        strategy=options.strategy,
        backend=settings.backend,
        train=settings.train,
        isolated=options.isolate,
        memoized=options.memoize,
        trial_timeout_s=options.trial_timeout_s,
    )
    if "" not in tree or not tree.nodes[""]["exercised"]:
        result.notes.append("The target is not an nn.Module (or its forward never ran): nothing to bisect.")
        return result
    target = options.target or ctx.spec
    if options.isolate and worker_setup(ctx, options) is None:
        notes.append(f"--isolate needs an importable target; {target!r} is not one, so trials ran in-process.")
        options = BisectOptions(**{**asdict(options), "isolate": False})
        result.isolated = False
    enforced = options.trial_timeout_s is None or options.isolate or enforceable()
    if not enforced:
        notes.append("The per-trial timeout is not enforced off the main thread; use isolate to enforce it.")

    with contextlib.ExitStack() as stack:
        worker: TrialWorker | None = None
        if options.isolate:
            worker = inputs.trial_worker  # started by the pipeline before the analysis, when it could
            if worker is None:
                worker = TrialWorker(worker_setup(ctx, options) or {})
                stack.callback(worker.shutdown)
            else:
                stack.callback(worker.close)
        stack.enter_context(preserved_state(model))

        def run(path: str) -> TrialOutcome:
            captured = tree.nodes[path]["inputs"]
            timeout = options.trial_timeout_s
            if stop_at is not None:  # no trial outlives the run's --timeout
                left = max(0.5, stop_at - time.monotonic())
                timeout = min(timeout, left) if timeout else left
            if worker is not None:
                inputs_file = os.path.join(worker.workdir, f"inputs_{path.replace('.', '_') or 'root'}.pt")
                request = {"module_path": path, "inputs_file": inputs_file if saveable(captured, inputs_file) else None}
                return worker.run(request, timeout)
            return run_trial(
                model.get_submodule(path), captured, backend=settings.backend, train=settings.train, seed=settings.seed, timeout_s=timeout
            )

        stop_at = time.monotonic() + ctx.budget_s if ctx.budget_s is not None else None
        search = Search(tree, run, memoize=options.memoize, max_trials=options.max_trials, progress=ctx.progress, stop_at=stop_at)
        answers: dict[str, tuple[list[str], bool, int]] = {}
        stopped: Stopped | None = None
        for name in ("top-down", "bottom-up") if options.strategy == "both" else (options.strategy,):
            search.consulted = set()
            try:
                if name == "top-down":
                    found, complete = top_down(search, "", inputs.index)
                else:
                    found, complete = bottom_up(search, "")
            except Stopped as stop:  # --timeout or a signal: the trials run before it are kept, the rest untried
                stopped = stop
                answers[name] = ([], False, len(search.consulted))
                done = set(search.outcomes)
                search.untried.extend(p for p, d in tree.nodes(data=True) if d["exercised"] and p not in done and p not in search.untried)
                break
            answers[name] = (sorted(found, key=path_key), complete, len(search.consulted))

    result.by_strategy = {
        name: rm.BisectStrategyResult(smallest_failing=found, trial_count=count, complete=complete)
        for name, (found, complete, count) in answers.items()
    }
    union = sorted({p for found, _, _ in answers.values() for p in found}, key=path_key)
    result.smallest_failing = union
    if options.strategy == "both":
        td, bu = answers["top-down"][0], answers["bottom-up"][0]
        result.agreement = td == bu
        if not result.agreement:
            only_td = [p or "(root)" for p in td if p not in bu]
            only_bu = [p or "(root)" for p in bu if p not in td]
            if only_td:
                notes.append(
                    f"Only top-down reports {', '.join(only_td)}: its own code breaks before any failing submodule "
                    "is reached, and bottom-up never tries a parent of a failing module."
                )
            if only_bu:
                notes.append(f"Only bottom-up reports {', '.join(only_bu)} (top-down stopped above it).")
    result.trial_count = search.trials_run
    result.child_processes = worker.starts if worker is not None else 0
    result.exhaustive_count = sum(1 for _, d in tree.nodes(data=True) if d["exercised"])
    result.untried = sorted(search.untried, key=path_key)
    if result.untried:
        why = "--max-trials" if options.max_trials is not None and search.trials_run >= options.max_trials else "the time limit"
        if isinstance(stopped, Interrupted):
            why = stopped.signal_name
        notes.append(f"{why} stopped the bisection: {len(result.untried)} module(s) left untried; the answer may be incomplete.")
    first_call = [s.id for s in (ctx.report.graph_breaks if ctx.report else []) if s.first_call_only]
    if first_call:
        notes.append(
            f"{', '.join(first_call)} break only on a fresh model's first call: the trials compile the modules "
            "once the model has run (its set-up done), so they do not reproduce them."
        )
    shared = sorted({t for _, d in tree.nodes(data=True) if d["inputs"] for t in d["inputs"].shared})
    if shared:
        notes.append(f"Inputs of type {', '.join(shared)} could not be copied; trials reused the model's objects.")
    result.trials = _rows(tree, search, inputs.index)
    result.notes = notes
    if options.repro_dir:
        scripts = write_repros(result, tree, ctx, options.repro_dir, target)
        result.repro_paths = list(scripts.values())
        for row in result.trials:  # an inferred row shares its representative's script
            row.repro_path = scripts.get(row.inferred_from if row.inferred_from is not None else row.module_path)
    result.duration_s = round(time.perf_counter() - t0, 3)
    if stopped is not None:  # what ran before the stop is the bisection's section (`bisect_into`)
        stopped.partial = result
        raise stopped
    return result


def _rows(tree: nx.DiGraph, search: Search, index: ModuleIndex | None) -> list[rm.BisectTrial]:
    rows = []
    for path, node in tree.nodes(data=True):
        captured: CapturedCall | None = node["inputs"]
        row = rm.BisectTrial(
            module_path=path,
            module_class=node["cls"],
            status="skipped",
            parent=bisect_parent(tree, path) if path else None,
            parameters=node["parameters"],
            calls=node["calls"],
            inputs=describe_inputs(captured.args, captured.kwargs, node["arg_names"], captured.device) if captured else None,
        )
        outcome = search.outcomes.get(path)
        if not node["exercised"]:
            row.reason = "not exercised: never called during the first call"
        elif outcome is None:
            row.reason = "untried: over the trial budget or the time limit" if path in search.untried else "not needed by the strategy"
        else:
            rep = search.inferred_from.get(path)
            row.status = "inferred" if rep is not None else outcome.status  # type: ignore[assignment]
            row.inferred_from = rep
            row.passed = None if outcome.status == "skipped" else outcome.passed
            row.duration_s = None if rep is not None else round(outcome.duration_s, 4)
            row.gb_type = outcome.gb_type
            row.registry_ids = list(outcome.registry_ids)
            row.reason = outcome.reason
            row.crash, row.stderr_tail = outcome.crash, list(outcome.stderr_tail)
            if outcome.stack:
                inner = outcome.stack[-1]
                row.user_frame = _frame(*inner)
                own = [f for f in outcome.stack if classify_file(f[0])[0]]
                if own and own[-1] is not inner:
                    row.own_frame = _frame(*own[-1])
            row.own_break = search.own_break(path, index)
        rows.append(row)
    return rows


def bisect_into(
    report: rm.Report, ctx: PhaseContext, options: BisectOptions, inputs: BisectInputs, clock: Any, *, bisect_only: bool
) -> None:
    """Run the bisection and merge it (or its error) into the report; bisection-only runs get their verdict here."""
    try:
        phase_ctx = dataclasses.replace(ctx, budget_s=clock.planned(), report=report.model_copy(deep=True))
        report.bisect = run_bisect(phase_ctx, options, inputs)
    except Stopped as stop:  # the trials run before it are kept (`run_bisect`), and the analysis stands
        if isinstance(stop.partial, rm.Bisect):
            report.bisect = stop.partial
        report.errors.append(stop_record(stop, "bisect", "the bisection did not finish within --timeout; partial report"))
    except Exception as exc:  # noqa: BLE001 - the analysis part of the report still stands
        report.errors.append(rm.ErrorRecord(phase="bisect", type=type(exc).__name__, message=describe_error(exc)[:500]))
    if bisect_only:
        # inferred rows repeat a representative's result, so the representatives decide
        statuses = {t.status for t in report.bisect.trials} if report.bisect else {"crashed"}
        if "failed" in statuses:
            report.summary.verdict = "graph_breaks"
        else:  # a bisection stopped with modules untried is no pass
            untried = report.bisect is not None and bool(report.bisect.untried)
            report.summary.verdict = "failed" if statuses & {"timeout", "crashed"} or untried else "clean"
        report.notes.insert(
            0,
            "Bisection only: the break, recompile and graph counts were not measured (run `ctc-doctor TARGET` for the full analysis).",
        )
