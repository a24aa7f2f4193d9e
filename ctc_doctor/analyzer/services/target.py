"""Turn a TARGET spec (`pkg.mod:build`, `path/file.py:build`) into a validated Workload.

Every way this can go wrong ends in a TargetError subclass with a one-line message that names the
user's file and line where that helps.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

from ...errors import BuilderFailed, TargetInvalid, TargetNotFound
from ...workload import Workload
from ..readers.sources import innermost_own_frame
from ..readers.text import first_line

DEFAULT_ATTR = "build"


def split_spec(spec: str) -> tuple[str, str]:
    """`a.b:build` -> ('a.b', 'build'); a spec without `:` names the module and means `:build`."""
    if not spec or spec.strip() != spec:
        raise TargetInvalid(f"bad target {spec!r}", hint="expected MODULE:ATTR or FILE.py:ATTR")
    where, sep, attr = spec.rpartition(":")
    if not sep:
        return spec, DEFAULT_ATTR
    if not where or not attr:
        raise TargetInvalid(f"bad target {spec!r}", hint="expected MODULE:ATTR or FILE.py:ATTR")
    return where, attr


def _user_frame(exc: BaseException, prefer: str | None = None) -> str:
    frame = innermost_own_frame(exc, prefer)
    return f" at {frame}" if frame else ""


def _import_file(path: str) -> Any:
    if not os.path.isfile(path):
        raise TargetNotFound(f"file not found: {path}")
    path = os.path.abspath(path)
    name = "ctc_doctor_target_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetInvalid(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its siblings
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise BuilderFailed(f"importing {path} raised {type(exc).__name__}: {first_line(exc)}{_user_frame(exc, path)}") from exc
    return module


def _import_module(name: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (name == missing or name.startswith(missing + ".")):
            raise TargetNotFound(f"no module named {missing!r}", hint="is it installed, or run from its directory?") from exc
        raise BuilderFailed(f"importing {name} failed: {first_line(exc)}{_user_frame(exc)}") from exc
    except Exception as exc:
        raise BuilderFailed(f"importing {name} raised {type(exc).__name__}: {first_line(exc)}{_user_frame(exc)}") from exc


def resolve_builder(spec: str) -> Any:
    """Import the module or file and return the attribute the spec names."""
    where, attr = split_spec(spec)
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    module = _import_file(where) if is_file else _import_module(where)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else None
            raise TargetNotFound(f"{where} has no attribute {attr!r}", hint=hint)
        obj = getattr(obj, part)
    return obj


def load_workload(spec: str, *, seed: int | None = 0, weights: str = "real") -> Workload:
    """Resolve the spec, call the builder (after seeding) and validate what it returned. `weights="none"`:
    the builder runs under the meta device and whatever it still put on a real device moves there
    (`resources.weights`): no storage for any parameter, buffer or input."""
    if weights == "none":
        from ..resources.weights import meta_build, on_meta

        with meta_build():
            return on_meta(load_workload(spec, seed=seed))
    builder = resolve_builder(spec)
    if isinstance(builder, Workload):
        return validate_workload(builder, spec)
    if isinstance(builder, torch.nn.Module) or not callable(builder):
        raise TargetInvalid(
            f"{spec} is a {type(builder).__name__}, not a builder",
            hint="it must be a zero-argument function returning (model, args), (model, args, variants) or a Workload",
        )
    if seed is not None:
        torch.manual_seed(seed)
    try:
        built = builder()
    except TypeError as exc:
        if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
            raise TargetInvalid(f"{spec} cannot be called with no arguments: {first_line(exc)}") from exc
        raise BuilderFailed(f"{spec} raised TypeError: {first_line(exc)}{_user_frame(exc)}") from exc
    except Exception as exc:
        raise BuilderFailed(f"{spec} raised {type(exc).__name__}: {first_line(exc)}{_user_frame(exc)}") from exc
    workload = coerce_workload(built, spec)
    if workload.name is None:
        workload.name = getattr(builder, "__name__", None) or type(workload.model).__name__
    return workload


def coerce_workload(built: Any, spec: str) -> Workload:
    """Accept (model, args), (model, args, variants) or a Workload."""
    if isinstance(built, Workload):
        return validate_workload(built, spec)
    if isinstance(built, tuple) and len(built) in (2, 3):
        model, args = built[0], built[1]
        variants = built[2] if len(built) == 3 else ()
        workload = Workload(model=model, variants=variants or ())
        if isinstance(args, Mapping):
            workload.kwargs = dict(args)
        elif isinstance(args, (tuple, list)):
            workload.args = tuple(args)
        else:
            workload.args = (args,)
        return validate_workload(workload, spec)
    shape = f"a tuple of {len(built)}" if isinstance(built, tuple) else f"a {type(built).__name__}"
    raise TargetInvalid(
        f"{spec} returned {shape}",
        hint="expected (model, args), (model, args, variants) or ctc_doctor.Workload",
    )


def validate_workload(workload: Workload, spec: str) -> Workload:
    if not callable(workload.model):
        raise TargetInvalid(f"{spec}: the model is a {type(workload.model).__name__}, which is not callable")
    if not isinstance(workload.args, tuple):
        workload.args = tuple(workload.args) if isinstance(workload.args, list) else (workload.args,)
    if not isinstance(workload.variants, (list, tuple)):
        raise TargetInvalid(f"{spec}: variants must be a list of argument tuples, got {type(workload.variants).__name__}")
    if workload.loss_fn is not None and not callable(workload.loss_fn):
        raise TargetInvalid(f"{spec}: loss_fn is not callable")
    if workload.before_call is not None and not callable(workload.before_call):
        raise TargetInvalid(f"{spec}: before_call is not callable")
    if workload.optimizer is not None:
        _check_optimizer(workload, spec)
    return workload


def _check_optimizer(workload: Workload, spec: str) -> None:
    """The optimizer factory, tried once on the model's parameters: a factory that raises fails here, in
    one line (exit 5), not half-way through a benchmark."""
    if not callable(workload.optimizer):
        raise TargetInvalid(f"{spec}: optimizer is not callable (a factory: params -> torch.optim.Optimizer)")
    parameters = getattr(workload.model, "parameters", None)
    if parameters is None:
        raise TargetInvalid(f"{spec}: an optimizer needs a model with parameters (an nn.Module)")
    try:
        made = workload.optimizer(parameters())
    except Exception as exc:  # noqa: BLE001 - the user's factory: any failure is theirs, in one line
        raise BuilderFailed(f"{spec}: the optimizer factory raised {type(exc).__name__}: {first_line(exc)}{_user_frame(exc)}") from exc
    if not (callable(getattr(made, "step", None)) and callable(getattr(made, "zero_grad", None))):
        raise TargetInvalid(f"{spec}: the optimizer factory returned a {type(made).__name__}, not an optimizer (step, zero_grad)")
