"""Ahead-of-time compilation: torch.export + AOTInductor packages, and portable compile-cache artifacts.

Owns no state.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch


def aoti_missing() -> str | None:
    """Why AOTInductor cannot run here (None when it can): `aoti_compile_and_package` and
    `aoti_load_package` are in `torch._inductor` since 2.6."""
    try:
        inductor = importlib.import_module("torch._inductor")
    except ImportError as exc:
        return f"torch._inductor cannot be imported: {exc}"
    missing = [n for n in ("aoti_compile_and_package", "aoti_load_package") if not hasattr(inductor, n)]
    if missing or not hasattr(torch, "export"):
        return f"this torch ({torch.__version__}) has no {', '.join(missing) or 'torch.export'}"
    return None


def export_program(fn: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], varying: dict[str, set[int]], strict: bool) -> Any:
    """torch.export of one call, the dims in `varying` (`args[i]` or a keyword's name -> dims)
    dynamic (`Dim.AUTO`: export decides, and specialises where the code needs it). The spec is keyed
    the way torch.export binds the call to forward's signature (`*args`/`**kwargs` included)."""
    import inspect

    auto = getattr(torch.export.Dim, "AUTO", None)
    dynamic: Any = None
    if varying and auto is not None:

        def one(value: Any, key: str) -> Any:
            dims = varying.get(key)
            return {d: auto for d in dims} if isinstance(value, torch.Tensor) and dims else None

        signature = inspect.signature(fn.forward)
        bound = signature.bind(*args, **kwargs)
        dynamic, position = {}, 0
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                dynamic[name] = tuple(one(v, f"args[{position + j}]") for j, v in enumerate(value))
                position += len(value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                dynamic[name] = {k: one(v, k) for k, v in value.items()}
            elif position < len(args):
                dynamic[name] = one(value, f"args[{position}]")
                position += 1
            else:
                dynamic[name] = one(value, name)
        variadic = [
            n for n, p in signature.parameters.items() if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        packed = [n for n in variadic if dynamic.get(n)]
        if packed:
            try:
                return torch.export.export(fn, args, kwargs, dynamic_shapes=dynamic, strict=strict)
            except AssertionError as exc:  # torch 2.13: "Must provide a tree_name when there might be a mismatch"
                raise ExportUnsupported(
                    f"this torch ({torch.__version__}) cannot export dynamic shapes passed through forward's "
                    f"{', '.join('*' * (1 + (signature.parameters[n].kind is inspect.Parameter.VAR_KEYWORD)) + n for n in packed)} "
                    f"with dynamic dims elsewhere in the call: {exc}"
                ) from exc
    return torch.export.export(fn, args, kwargs, dynamic_shapes=dynamic, strict=strict)


class ExportUnsupported(Exception):
    """torch.export cannot express this call's dynamic shapes (a limit of torch, not of the model)."""


def aoti_package(program: Any, path: str, constants_in_package: bool = True) -> str:
    """AOTInductor-compile an exported program into a `.pt2` package at `path`."""
    inductor = importlib.import_module("torch._inductor")
    configs = {} if constants_in_package else {"aot_inductor.package_constants_in_so": False}
    return str(inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=configs))


def aoti_load(path: str, constants: dict[str, torch.Tensor] | None = None) -> Callable[..., Any]:
    """Load a `.pt2` package; with `constants`, a package compiled without them runs on these weights."""
    runner = importlib.import_module("torch._inductor").aoti_load_package(path)
    if constants is not None:
        runner.load_constants(constants, check_full_update=True, user_managed=True)
    return runner


def save_cache_artifacts() -> bytes | None:
    """The compile caches of this process as one blob (`torch.compiler.save_cache_artifacts`, 2.7+;
    None when this torch has no such API or nothing was cached)."""
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        return None
    saved = save()
    return None if saved is None else bytes(saved[0])


def load_cache_artifacts(blob: bytes) -> bool:
    load = getattr(torch.compiler, "load_cache_artifacts", None)
    if load is None:
        return False
    return load(blob) is not None  # None: the blob could not be read


class MinifierOutOfTime(Exception):
    """Raised from a minifier's test at its deadline: the best state it had reached is kept."""


def minified(
    gm: torch.fx.GraphModule, args: list[Any], fails: Callable[[torch.fx.GraphModule, list[Any]], bool], deadline: float
) -> tuple[torch.fx.GraphModule, list[Any]] | None:
    """torch's own FX minifier (`torch._functorch.fx_minifier.minifier`, what `TORCHDYNAMO_REPRO_AFTER` runs)
    on a copy of `gm` with `fails` as its test, until `time.monotonic()` passes `deadline`: (the smallest
    failing graph, its inputs), the best state reached when time ran out, or None (no minifier in this
    torch, it raised, or it reached no state). Its progress output is kept off the terminal."""
    import contextlib
    import copy
    import io
    import logging
    import time

    try:
        minifier = importlib.import_module("torch._functorch.fx_minifier").minifier
    except (ImportError, AttributeError):
        return None
    best: dict[str, tuple[torch.fx.GraphModule, list[Any]]] = {}

    def test(graph: torch.fx.GraphModule, inps: Any) -> bool:
        if time.monotonic() > deadline:
            raise MinifierOutOfTime
        return fails(graph, list(inps))

    def keep(graph: torch.fx.GraphModule, inps: Any) -> None:  # each state it reaches fails the test
        best["state"] = (torch.fx.GraphModule(graph, copy.deepcopy(graph.graph)), list(inps))

    quiet = io.StringIO()
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            graph, inps = minifier(torch.fx.GraphModule(gm, copy.deepcopy(gm.graph)), list(args), test, dump_state=keep)
        return graph, list(inps)
    except MinifierOutOfTime:
        return best.get("state")
    except Exception:  # noqa: BLE001 - a minifier that fails leaves the prefix cut's repro
        return None
    finally:
        logging.disable(logging.NOTSET)
