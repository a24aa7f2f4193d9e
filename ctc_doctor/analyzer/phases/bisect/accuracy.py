"""Accuracy bisection: where compiled goes wrong.

When a compiled run fails the numerics check (its error against a float64 reference beyond eager's own),
the smallest module whose compiled output, alone, departs from its own float64 run: one eager call of a
fresh copy records each module's inputs (`capture.inputs`), then the search walks the module tree
top-down (`search.top_down`, memoized like the graph-break bisection): each module is compiled alone on
its recorded inputs and judged by the same rule (`running.numerics`), and the search descends into the
children that fail. A module that fails while every child it calls passes alone holds the divergence in
its own code (or between its children). Within it, the operation (`operation.locate_operation`): one
the traced graph runs and eager never does, or the first one the backend computes wrong. A standalone
script reproduces it (`repro.write_accuracy_repro`).

The trials run in this process, one at a time, each under the per-trial and run deadlines; a module that
cannot run alone on its recorded inputs is skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import networkx as nx
import torch

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ....workload import Workload
from ... import torch_internals as ti
from ...capture.inputs import CapturedCall, ModuleInputs
from ...running.calls import preserved_state, run_call, run_pass
from ...running.deadline import DeadlineExceeded, deadline
from ...running.modules import path_key
from ...running.numerics import loose_backend
from ...running.reference.precision import Room, make_reference
from ...running.worker import importable
from ..context import PhaseContext
from .numerics_bug import numerics_bug
from .operation import locate_operation
from .repro import write_accuracy_repro
from .search import Search, bisect_children, bisect_parent, build_tree, top_down
from .trials import TrialOutcome, crashed_or_unrunnable


@dataclass(frozen=True)
class AccuracyOptions:
    """How far the accuracy bisection may go. Train, device and seed are the run's."""

    max_trials: int | None = 32
    """Modules compiled and judged at most; the rest is listed as untried."""
    trial_timeout_s: float | None = 60.0
    memoize: bool = True
    """Judge modules with the same class, input signature and structure once."""
    repro_dir: str | None = None
    """Write the repro script and its inputs here (None: none written)."""
    target: str | None = None
    """Importable TARGET the repro rebuilds the model from; default: the run's spec."""


@dataclass(frozen=True)
class Trigger:
    """The failed numerics check that starts the bisection."""

    text: str
    """`the compiled arm: error 30657x eager's own against float64`."""
    backend: str
    """The failing run's backend: the modules are compiled with it."""
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The failing compile's other `torch.compile` options (`mode`, `dynamic`...): `run --compare`'s
    strategy whose loss departed. The modules are compiled with them too."""


def wrong_under_compile(report: rm.Report) -> Trigger | None:
    """The compiled model as the user compiles it fails the numerics check: the benchmark's `compiled`
    arm (or its first compiled arm without a change of the user's code), or, without a benchmark, every
    fix check (each compiles a copy; all failing alike is the compile, not the fixes). None otherwise."""
    b = report.benchmark
    if b is not None:
        for arm in b.arms:
            if arm.name.startswith("compiled") and arm.name != "compiled_fixed" and arm.numerics_ok is False and arm.numerics is not None:
                backend = arm.settings.get("backend") or b.settings.get("backend") or "inductor"
                return Trigger(f"the {arm.name} arm: {_figures(arm.numerics)}", str(backend))
    if report.fix is not None and report.fix.baseline is not None:  # `run`: the script's module, unchanged, compiled
        base = report.fix.baseline
        if base.numerics_ok is False and base.numerics is not None:
            backend = report.environment.backend if report.environment else None
            return Trigger(f"the compiled module, unchanged: {_figures(base.numerics)}", backend or "eager")
    if report.fix is not None:
        checks = [s.verified for s in report.suggestions if s.verified is not None and s.verified.applied]
        failing = [v for v in checks if v.numerics_ok is False and v.numerics is not None]
        if failing and len(failing) == len(checks):
            backend = report.environment.backend if report.environment else None
            return Trigger(f"every fix check ({len(failing)}): {_figures(failing[0].numerics)}", backend or "eager")  # type: ignore[arg-type]
    return None


def _figures(check: rm.NumericsCheck) -> str:
    ratio = f"error {check.ratio:.3g}x eager's own" if check.ratio is not None else "error beyond eager's own"
    against = "float64" if check.method == "float64_reference" else check.method.replace("_reference", "")
    return f"{ratio} against {against}" + (f" ({check.worst.split(' (')[0]})" if check.worst else "")


@dataclass
class _Judged(TrialOutcome):
    """A trial with its numerics check."""

    check: rm.NumericsCheck | None = None


def accuracy_trial(
    module: torch.nn.Module,
    captured: CapturedCall,
    *,
    backend: str,
    train: bool,
    seed: int | None,
    device: str,
    loss_fn: Any,
    timeout_s: float | None,
    room: Room | None = None,
    options: dict[str, Any] | None = None,
) -> _Judged:
    """`module` alone on its recorded inputs: eager, a float64 copy, then compiled with `backend` (and the
    other compile `options`), judged by the numerics rule; its parameters, buffers and grads are put back."""
    ti.fresh_dynamo_state()
    args, kwargs = captured.fresh()
    workload = Workload(module, args, kwargs, loss_fn=loss_fn)
    calls = workload.calls()
    train = train and captured.grad_enabled
    t0 = time.perf_counter()
    try:
        # no optimizer runs: the parameters come back from every run as they were (the reference puts its cast back)
        with deadline(timeout_s), ti.quiet_torch_stderr(True), preserved_state(module):
            with torch.set_grad_enabled(captured.grad_enabled):
                eager = run_pass(module, workload, calls, seed=seed, train=train, collect=True)
            reference = make_reference(
                module, workload, calls, eager, seed=seed, train=train, device=device, loose=loose_backend(backend), room=room
            )
            try:
                judgement = reference.judgement()
                with torch.set_grad_enabled(captured.grad_enabled):
                    compiled = torch.compile(module, backend=backend, **(options or {}))
                    run_pass(compiled, workload, calls, seed=seed, train=train, model=module, sink=judgement)
                check = judgement.result()
            finally:
                reference.close()
        status = "passed" if check.ok else "failed"
        return _Judged(status, time.perf_counter() - t0, reason=check.problem, check=check)
    except DeadlineExceeded:
        return _Judged("timeout", time.perf_counter() - t0, reason=f"no result within {timeout_s:g} s")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        out = crashed_or_unrunnable(module, captured, exc, time.perf_counter() - t0)
        return _Judged(out.status, out.duration_s, reason=out.reason)
    finally:
        ti.reset_dynamo_quietly()


def record_inputs(model: torch.nn.Module, ctx: PhaseContext) -> ModuleInputs:
    """Each module's inputs on the workload's first call, run eagerly on `model` (a fresh copy)."""
    inputs = ModuleInputs(model)
    settings = ctx.settings
    with inputs.record(), preserved_state(model):  # no optimizer: the parameters stay as they are, no copy of them
        run_call(model, ctx.workload, ctx.calls[0], 0, seed=settings.seed, train=settings.train, model=model)
    return inputs


def _source(module: torch.nn.Module) -> str | None:
    """`file:line` of the module's forward."""
    try:
        forward = type(module).forward
        file = inspect.getsourcefile(forward)
        line = inspect.getsourcelines(forward)[1]
    except (TypeError, OSError):
        return None
    return f"{file}:{line}" if file else None


def run_accuracy_bisect(
    ctx: PhaseContext, options: AccuracyOptions, model: torch.nn.Module, trigger: Trigger, bugs: list[rm.TorchBug] | None = None
) -> rm.AccuracyBisect:
    """Find where `model` (a fresh copy the caller owns) goes wrong compiled with the trigger's backend; a
    backend that computes a right graph wrong comes out as a bug to file, into `bugs`."""
    t0 = time.perf_counter()
    settings = ctx.settings
    result = rm.AccuracyBisect(trigger=trigger.text, backend=trigger.backend, options=trigger.options)
    ctx.progress(ProgressEvent(Step.ACCURACY, activity="recording module inputs"))
    inputs = record_inputs(model, ctx)
    tree = build_tree(inputs)
    if "" not in tree or not tree.nodes[""]["exercised"]:
        result.notes.append("The model's forward never ran on its own: nothing to bisect.")
        return result
    stop_at = time.monotonic() + ctx.budget_s if ctx.budget_s is not None else None
    # each module's reference sized from its own parameters (the workload's activations would overstate a block's)
    room = dataclasses.replace(ctx.room, activations=None) if isinstance(ctx.room, Room) else None

    def trial_timeout() -> float | None:
        """The per-trial limit, within what the run has left."""
        timeout = options.trial_timeout_s
        if stop_at is not None:
            left = max(0.5, stop_at - time.monotonic())
            timeout = min(timeout, left) if timeout else left
        return timeout

    def run(path: str, backend: str = trigger.backend) -> TrialOutcome:
        """`path` compiled alone with `backend` (the trigger's own options with its own backend)."""
        return accuracy_trial(
            model.get_submodule(path),
            tree.nodes[path]["inputs"],
            backend=backend,
            train=settings.train,
            seed=settings.seed,
            device=settings.where,
            loss_fn=ctx.workload.loss_fn if path == "" else None,
            timeout_s=trial_timeout(),
            room=room,
            options=trigger.options if backend == trigger.backend else {},
        )

    search = Search(
        tree, run, memoize=options.memoize, max_trials=options.max_trials, progress=ctx.progress, stop_at=stop_at, step=Step.ACCURACY
    )
    found, complete = top_down(search, "", None)
    result.trials = _rows(tree, search)
    result.trial_count = search.trials_run
    result.untried = sorted(search.untried, key=path_key)
    rows = {t.module_path: t for t in result.trials}
    if rows[""].status != "failed":
        result.notes.append(
            f"The model compiled alone on its first call's inputs agrees with float64 ({rows[''].status}): the divergence "
            "needs more than the first call (a later call, state the calls build up) or the failing run's other settings."
        )
    if found:
        smallest = sorted(found, key=lambda p: (-p.count("."), path_key(p)))[0]  # the deepest
        module = model.get_submodule(smallest)
        result.module_path = smallest
        result.module_class = type(module).__name__
        result.source = _source(module)
        kids = bisect_children(tree, smallest)
        result.own_code = all(rows[k].status == "passed" for k in kids)
        result.path = [rows[p] for p in _ancestors(tree, smallest) if p in rows]
        ctx.progress(ProgressEvent(Step.ACCURACY, subject=smallest or "(root)", activity="the operation"))
        located = locate_operation(module, tree.nodes[smallest]["inputs"], trigger.backend, trial_timeout())
        result.operation = located.operation if located is not None else None
        if located is not None and located.cut is not None and bugs is not None:
            ctx.progress(ProgressEvent(Step.ACCURACY, subject=smallest or "(root)", activity="the backend's wrong result, to file"))

            def judge(backend: str, eager_path: str | None) -> bool:
                """The model compiled with `backend`, `eager_path` kept eager, against float64."""
                with _kept_eager(model.get_submodule(eager_path) if eager_path else None):
                    return run("", backend).status == "passed"

            try:  # the module and operation are found already: the bug report is one more step
                left = max(0.5, stop_at - time.monotonic()) if stop_at is not None else None  # each step keeps its own limit too
                with deadline(left):
                    bug = numerics_bug(located, result, judge=judge, repro_dir=options.repro_dir, repro_timeout_s=min(left or 180.0, 180.0))
                if bug is not None:
                    bugs.append(bug)
            except DeadlineExceeded:
                result.notes.append("No time left to write the backend's wrong result up as a bug (its repro and issue text).")
            except Exception as exc:  # noqa: BLE001 - said, and the bisection's answer stands
                result.notes.append(f"The backend's wrong result could not be written up as a bug: {type(exc).__name__}: {exc}"[:300])
        if len(found) > 1:
            others = ", ".join(f"`{p or '(root)'}`" for p in sorted(found, key=path_key) if p != smallest)
            result.notes.append(f"Also diverging alone: {others}.")
        if options.repro_dir and importable(options.target or ctx.spec):  # the module's repro rebuilds the model from it
            result.repro_path, result.inputs_path = write_accuracy_repro(
                result, tree.nodes[smallest]["inputs"], ctx, options.repro_dir, options.target or ctx.spec
            )
    if not complete:
        result.notes.append(f"The trial or time budget left {len(result.untried)} module(s) untried: the answer may stop above the module.")
    result.duration_s = round(time.perf_counter() - t0, 3)
    return result


@contextlib.contextmanager
def _kept_eager(module: torch.nn.Module | None) -> Iterator[None]:
    """`module`'s forward under `torch.compiler.disable` for the duration (an instance attribute, removed after)."""
    if module is None:
        yield
        return
    own = module.__dict__.get("forward")  # a forward already set on the instance (a hook, a patch) is put back
    module.forward = torch.compiler.disable(module.forward)  # type: ignore[method-assign]
    try:
        yield
    finally:
        if own is None:
            del module.forward
        else:
            module.forward = own  # type: ignore[method-assign]


def _ancestors(tree: nx.DiGraph, path: str) -> list[str]:
    """The exercised modules from the root down to `path`."""
    chain = [path]
    while (parent := bisect_parent(tree, chain[-1])) is not None:
        chain.append(parent)
    return list(reversed(chain))


def _rows(tree: nx.DiGraph, search: Search) -> list[rm.AccuracyTrial]:
    rows = []
    for path, node in sorted(tree.nodes(data=True), key=lambda item: path_key(item[0])):
        if not node["exercised"]:
            continue
        outcome = search.outcomes.get(path)
        check = getattr(outcome, "check", None)
        status = outcome.status if outcome is not None else "untried"
        if outcome is None and path not in search.untried:
            continue  # never needed: an ancestor passed
        rows.append(
            rm.AccuracyTrial(
                module_path=path,
                module_class=node["cls"],
                status=status,  # type: ignore[arg-type]
                ratio=check.ratio if check is not None else None,
                worst_ratio=check.worst_ratio if check is not None else None,
                problem=outcome.reason if outcome is not None else None,
                inferred_from=search.inferred_from.get(path),
                duration_s=round(outcome.duration_s, 3) if outcome is not None and path not in search.inferred_from else 0.0,
            )
        )
    return rows


def mark_not_recommended(report: rm.Report, regional_paths: list[str]) -> None:
    """Every suggestion that would run the diverging module compiled is not recommended until it is fixed
    (one that keeps it eager is not touched); a regional arm that passes the numerics check only because
    it leaves the module eager (none of its compiled blocks, `regional_paths`, holds it) says so, and is
    not the best arm."""
    a = report.accuracy
    if a is None or a.module_path is None:
        return
    path = a.module_path
    shown = f"`{path or '(root)'}`"
    why = f"compiled, {shown} gives wrong results: fix that first"
    for s in report.suggestions:
        keeps_eager = s.action is not None and s.action.type == "disable" and any(_covers(p, path) for p in s.action.module_paths)
        if not keeps_eager:
            s.not_recommended = why
    b = report.benchmark
    if b is None or any(_covers(p, path) for p in regional_paths):
        return
    for arm in b.arms:
        if arm.name.startswith("regional") and arm.numerics_ok:
            note = f"{arm.name} passes the numerics check only because it leaves {shown} eager (it diverges compiled): no speed-up"
            b.notes.append(note)
            if b.best_arm == arm.name:
                b.best_arm, b.best_arm_reason = "eager", note


def _covers(outer: str, inner: str) -> bool:
    return outer == "" or inner == outer or inner.startswith(outer + ".")
