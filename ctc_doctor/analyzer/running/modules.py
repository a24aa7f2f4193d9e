"""nn.Module paths and calls: the sort key of a path, a forward's argument names, the one-line
description of a call's inputs, and forward pre-hooks on every module of a model."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch


def path_key(path: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in path.split(".")] if path else []


def describe_inputs(args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str] | None = None) -> str:
    """`x: float32[4, 8], scale: float=2.0` for the report."""
    parts = []
    for i, a in enumerate(args):
        label = names[i] if names and i < len(names) else f"arg{i}"
        parts.append(f"{label}: {_describe(a)}")
    parts.extend(f"{k}: {_describe(v)}" for k, v in kwargs.items())
    return ", ".join(parts)


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        dev = "" if value.device.type == "cpu" else f"@{value.device}"
        return f"{dtype}{list(value.shape)}{dev}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"{type(value).__name__}({inner}{more})"
    if isinstance(value, dict):
        return "dict(" + ", ".join(f"{k}={_describe(v)}" for k, v in list(value.items())[:4]) + ")"
    if isinstance(value, (int, float, bool, str)) or value is None:
        return f"{type(value).__name__}={value!r}"
    return type(value).__name__


def forward_arg_names(model: Any) -> list[str] | None:
    try:
        fn = model.forward if isinstance(model, torch.nn.Module) else model
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@contextlib.contextmanager
def forward_pre_hooks(
    modules: Mapping[str, torch.nn.Module], hook_for: Callable[[str], Callable[..., Any]], *, with_kwargs: bool = False
) -> Iterator[None]:
    """`hook_for(path)` as a forward pre-hook on each module for the block; removed on exit."""
    handles = [m.register_forward_pre_hook(hook_for(path), with_kwargs=with_kwargs) for path, m in modules.items()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def modular_paths(model: torch.nn.Module) -> list[str]:
    """Modular compilation's parts: each top-level child the forward can call (a ModuleList or ModuleDict
    gives its items), leaving out torch.nn leaves without parameters (an activation, a dropout). Fewer
    than two parts of which at least one is more than one torch.nn layer: none (nothing modular to try)."""
    paths: list[str] = []
    for name, child in model.named_children():
        items = child.named_children() if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) else [("", child)]
        for sub, module in items:
            leaf = not any(True for _ in module.children())
            if leaf and type(module).__module__.startswith("torch.nn") and not any(True for _ in module.parameters()):
                continue
            paths.append(f"{name}.{sub}" if sub else name)
    composite = any(any(True for _ in model.get_submodule(p).children()) for p in paths)
    return paths if len(paths) >= 2 and composite else []
