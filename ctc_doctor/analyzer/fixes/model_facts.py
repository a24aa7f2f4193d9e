"""Gathering the facts (`facts.ModelFacts`) of a live model: forward's arguments and their kinds,
groups of identical blocks, the Dynamo options of this torch."""

from __future__ import annotations

from typing import Any

import torch

from ...workload import Call
from .. import torch_internals as ti
from ..running.modules import forward_arg_names
from .facts import CONFIG_OPTIONS_USED, ModelFacts, RepeatedGroup


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float"
    if isinstance(value, int):
        return "int"
    return "other"


def _shape_signature(module: torch.nn.Module) -> tuple[Any, ...]:
    return tuple((name, tuple(p.shape)) for name, p in module.named_parameters()) + tuple(
        (name, type(m).__name__) for name, m in module.named_modules()
    )


def repeated_groups(model: torch.nn.Module, minimum: int = 2) -> list[RepeatedGroup]:
    """Sibling blocks of one user-defined class and identical structure (regional-compilation candidates)."""
    groups = []
    for path, parent in model.named_modules():
        by_signature: dict[tuple[Any, ...], list[str]] = {}
        for name, child in parent.named_children():
            cls = type(child)
            if cls.__module__.startswith("torch.nn") or not list(child.children()):
                continue  # leaf layers (Linear...) are not blocks worth compiling on their own
            key = (cls, _shape_signature(child))
            by_signature.setdefault(key, []).append(f"{path}.{name}" if path else name)
        for (cls, _), paths in by_signature.items():
            if len(paths) >= minimum:
                groups.append(RepeatedGroup(container=path, class_name=cls.__name__, paths=paths))
    # an outer group (e.g. two stacks) already compiles its inner repeats: keep the outermost
    return [g for g in groups if not any(o is not g and any(p.startswith(q + ".") for p in g.paths for q in o.paths) for o in groups)]


def _arguments(call: Call, names: list[str]) -> dict[str, Any]:
    """A call's arguments by forward's parameter names (`arg2` past the named ones)."""
    out = {names[i] if i < len(names) else f"arg{i}": v for i, v in enumerate(call.args)}
    out.update(call.kwargs)
    return out


def model_facts(model: torch.nn.Module, calls: list[Call]) -> ModelFacts:
    names = forward_arg_names(model) or []
    by_call = [_arguments(c, names) for c in calls]
    kinds = {k: _kind(v) for k, v in by_call[0].items()} if by_call else {}
    shapes: dict[str, list[tuple[int, ...] | None]] = {}
    for name, kind in kinds.items():
        if kind == "tensor":
            shapes[name] = [tuple(a[name].shape) if isinstance(a.get(name), torch.Tensor) else None for a in by_call]
    options = frozenset(n for n in CONFIG_OPTIONS_USED if ti.config_has(n))
    return ModelFacts(arg_names=names, arg_kinds=kinds, repeated=repeated_groups(model), config_options=options, arg_shapes=shapes)
