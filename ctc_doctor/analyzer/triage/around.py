"""A way around a crash inside torch, checked on the user's code: the user's calls compiled again with a
change that steps around the failing stage (sizes kept static, the module that holds the triggering
operation left eager, a guarded object's own method made plain, the cheaper backend), and `triage_calls`,
which triages a crash of the user's calls and checks such a way around it."""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from ...reports import models as rm
from .. import torch_internals as ti
from ..capture.inputs import CapturedCall, ModuleInputs
from . import REDUCE_BUDGET_S, Triage, attempt, check_repro, error_line, issue_text, issue_title, stage_of, triage, write_bug


def workaround(
    call: Callable[[Any], Any],
    found: Triage,
    backend: str,
    model: torch.nn.Module,
    config: dict[str, Any],
    compile_kwargs: dict[str, Any] | None = None,
) -> tuple[str | None, bool]:
    """The first change that lets the user's call (`call(compiled)`) compile and run on `backend` with the
    user's own `compile_kwargs` (`dynamic`, `mode`, `options`, `fullgraph`): sizes and integers kept static
    when the failing graph had symbolic ones, else the module that holds the triggering operation left eager
    (never the root: that is no compile at all), else the guarded object's own method made plain, else the
    cheaper backend that compiled (a backend-stage crash). (text, verified), or (None, False) when none holds."""
    kw = dict(compile_kwargs or {})
    if found.guard is not None:  # the module that holds the guarded object, left eager first
        found.module_path = found.module_path or _holding_module(model, found.guard.guard)
    failed = next((a for a in found.attempts if a.error is not None), None)
    symbolic = failed is not None and failed.graph is not None and any(ti.symint_hint(v) is not None for v in failed.graph[1])
    if symbolic and attempt(lambda compile_: call(compile_(model, **{**kw, "dynamic": False})), backend, config).error is None:
        yours = " in place of your `dynamic=True`" if kw.get("dynamic") is True else ""
        found.strategy = "static"
        return (
            f"compile with `dynamic=False`{yours}: sizes and integers stay static, so no symbolic one reaches the failing "
            "pass (it recompiles once per new value instead)"
        ), True
    path = found.module_path
    sub = None
    if path:
        with contextlib.suppress(AttributeError):
            sub = model.get_submodule(path)
    if sub is not None:

        def leave_eager(compile_: Callable[..., Any]) -> None:
            sub.forward = ti.disable(sub.forward)  # an instance attribute, removed after
            try:
                call(compile_(model, **kw))
            finally:
                del sub.forward

        if attempt(leave_eager, backend, config).error is None:
            code = f"model.get_submodule({path!r}).forward = torch.compiler.disable(model.get_submodule({path!r}).forward)"
            return f"leave `{path}` eager until torch is fixed: `{code}`", True
    if found.guard is not None:  # the object's own dunder that the guard calls, made plain for the check
        around = _guard_workaround(call, found.guard, backend, model, config, kw)
        if around is not None:
            return around, True
    cheaper = [a.backend for a in found.attempts if a.error is None and a.backend != "eager"]
    if failed is not None and failed.backend == backend and cheaper:  # the backend's own stage crashed
        return (
            f"compile with `backend={cheaper[-1]!r}` until torch is fixed: it compiled and ran your calls "
            f"({stage_of(cheaper[-1])} without {backend}'s code generation, so slower than a working {backend})"
        ), True
    return None, False


def _holding_module(model: torch.nn.Module, source: str) -> str | None:
    """The submodule (not the root) that holds the guarded object: the longest module path the guard's source
    starts with (`L['self']._modules['dropout'].irreps[0][1]` -> `dropout`), through torch.compile's own
    wrappers (`fn.`, `_orig_mod.`)."""
    from ..readers.compile_time import stack_path

    parts = stack_path(source).split(".")
    for n in range(len(parts), 0, -1):
        path = ".".join(parts[:n])
        with contextlib.suppress(AttributeError):
            model.get_submodule(path)
            return path
    return None


def _guard_workaround(
    call: Callable[[Any], Any],
    guard: ti.GuardCrash,
    backend: str,
    model: torch.nn.Module,
    config: dict[str, Any],
    kw: dict[str, Any],
) -> str | None:
    """A guard that crashed because the object's own dunder raises (an e3nn `Irrep`'s `__len__`): the builtin
    base's method in its place for the time of the check; the text when the user's calls then compile."""
    cls, method = guard.value_class, guard.frame[2] if guard.frame is not None else None
    base = next((getattr(builtins, b) for b in guard.bases if b in ("tuple", "list", "dict")), None)
    if cls is None or base is None or not method or not (method.startswith("__") and hasattr(base, method)):
        return None
    own = cls.__dict__.get(method)

    def patched(compile_: Callable[..., Any]) -> None:
        setattr(cls, method, getattr(base, method))
        try:
            call(compile_(model, **kw))
        finally:
            if own is None:
                delattr(cls, method)
            else:
                setattr(cls, method, own)

    if attempt(patched, backend, config).error is not None:
        return None
    short = cls.__qualname__
    return (
        f"until torch is fixed, give `{guard.value_type}` the plain `{base.__name__}.{method}` before compiling "
        f"(`{short}.{method} = {base.__name__}.{method}`, after importing it): Dynamo's {guard.builder} guard calls it, "
        f"and its own raises {guard.error_type}. It changes `{method}` of those objects for the rest of your code too"
    )


def smallest_module(
    calls: Callable[[Any], Any], model: torch.nn.Module, backend: str, kw: dict[str, Any], error_type: str, budget_s: float
) -> tuple[str, CapturedCall] | None:
    """A crash in Dynamo's tracing (no graph reached a backend, none to reduce): the deepest submodule whose
    compile alone (`backend`, the user's `kw`), on the inputs of its first call in an eager run of `calls`,
    crashes with the same `error_type`, found by descending from the root through the children that ran, one
    compile each, until `budget_s`. (path, its inputs), or None when no child crashes alone (the whole model
    is the smallest) or the eager run fails."""
    recorder = ModuleInputs(model)
    try:
        with recorder.record():
            calls(model)
    except Exception:  # noqa: BLE001 - the eager run is the user's: nothing to descend by
        return None
    deadline, path = time.monotonic() + budget_s, ""

    def crashes(child: str) -> bool:
        captured, sub = recorder.inputs[child], model.get_submodule(child)

        def one(compile_: Callable[..., Any]) -> None:
            args, kwargs = captured.fresh()
            with torch.set_grad_enabled(captured.grad_enabled):
                compile_(sub, **kw)(*args, **kwargs)

        tried = attempt(one, backend, {})
        return tried.error is not None and error_line(tried.error).split(":", 1)[0] == error_type

    while time.monotonic() < deadline:
        children = [f"{path}.{name}" if path else name for name, _ in model.get_submodule(path).named_children()]
        path = next((c for c in children if c in recorder.inputs and time.monotonic() < deadline and crashes(c)), path)
        if path not in children:
            break
    return (path, recorder.inputs[path]) if path else None


def triage_calls(
    calls: Callable[[Any], Any],
    model: torch.nn.Module,
    backend: str,
    *,
    where: str,
    untried: str | None,
    repro_dir: str | None,
    slug: str,
    compile_kwargs: dict[str, Any] | None = None,
    module_repro: Callable[[str, CapturedCall], str | None] | None = None,
) -> rm.TorchBug | None:
    """A crash of `calls(compile(model, **compile_kwargs))` on `backend` (the user's own `dynamic`, `mode`,
    `options`, `fullgraph`), triaged (`triage`), with a workaround checked on the same calls and `untried`
    (what the user's compile had that could not be passed here) said in `tried`; the repro and issue text
    into `repro_dir`. A crash in Dynamo's tracing (no graph to reduce) is narrowed to the smallest module whose
    compile crashes alone (`smallest_module`), whose repro `module_repro(path, inputs)` writes where the model
    can be rebuilt (a `build()` target): the script's path. None when the calls compile here."""
    kw = dict(compile_kwargs or {})
    found = triage(lambda compile_: calls(compile_(model, **kw)), backend, {}, where=where)
    if found.bug is None:
        return None
    bug = found.bug
    failed = next((a for a in found.attempts if a.error is not None), None)
    if failed is not None and failed.graph is None and found.guard is None:  # in tracing: the smallest module instead
        smallest = smallest_module(calls, model, failed.backend, kw, bug.error_type, REDUCE_BUDGET_S)
        if smallest is not None:
            found.module_path, captured = smallest
            cls = type(model.get_submodule(found.module_path)).__name__
            bug.operation = cls
            bug.tried.append(
                f"`{found.module_path}` ({cls}) compiled alone on its recorded inputs: the same crash (the smallest module that does)"
            )
            written = module_repro(found.module_path, captured) if module_repro is not None else None
            if written is not None:
                bug.repro_path = written
                with open(written, encoding="utf-8") as fh:
                    bug.repro = fh.read()
                check_repro(bug, bug.error_type, None, None)
                bug.repro_note = bug.repro_note or "it needs your code (it rebuilds the model from your target), not ctc-doctor"
            else:
                bug.repro_note = (
                    f"the failure is in Dynamo's tracing, before any graph: the smallest module whose compile crashes is "
                    f"`{found.module_path}` ({cls}); a repro needs your code, and this run has no target to rebuild it from"
                )
        bug.issue_title, bug.issue_text = issue_title(bug.stage, bug.error, bug.operation), issue_text(bug)
    found.bug.workaround, found.bug.workaround_verified = workaround(calls, found, backend, model, {}, kw)
    found.bug.workaround_strategy = found.strategy
    if kw:
        found.bug.tried.append("(each with the compile's own " + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")")
    if untried:
        found.bug.tried.append(f"({untried} were not passed to the backend here)")
    if repro_dir:
        write_bug(found.bug, repro_dir, slug)
    return found.bug
