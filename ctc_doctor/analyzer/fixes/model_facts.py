"""Gathering the facts (`facts.ModelFacts`) of a live model: forward's arguments and their kinds,
groups of identical blocks, the Dynamo options of this torch."""

from __future__ import annotations

import re
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


_LEAF_TYPES = (
    torch.nn.Linear, torch.nn.Bilinear, torch.nn.modules.conv._ConvNd, torch.nn.LayerNorm, torch.nn.GroupNorm,
    torch.nn.modules.batchnorm._NormBase, torch.nn.Embedding, torch.nn.EmbeddingBag, torch.nn.Dropout,
)  # fmt: skip
_LEAF_NAMES = re.compile(r"(Linear|Conv[123]d|ConvTranspose[123]d|LayerNorm|RMSNorm|GroupNorm|BatchNorm[123]d|Embedding|Dropout)$")
DECLARED = ("_repeated_blocks", "_no_split_modules")
"""The attributes a model declares its repeated block classes by: diffusers' `_repeated_blocks` (what
`compile_repeated_blocks()` compiles), transformers' `_no_split_modules` (its decoder-layer classes)."""
MIN_SHARE = 0.1
"""A group found by structure whose blocks hold less than this share of the model's parameters is a
helper, not the unit that carries the compute (unless no group holds more)."""


def _leaf_like(module: torch.nn.Module) -> bool:
    """A layer, not a block: a torch.nn class, a wrapper of a layer (a LoRA `Linear` holding its base layer),
    or a module without children."""
    cls = type(module)
    return (
        cls.__module__.startswith("torch.nn")
        or isinstance(module, _LEAF_TYPES)
        or bool(_LEAF_NAMES.search(cls.__name__))
        or not list(module.children())
    )


def _parameters(model: torch.nn.Module, paths: list[str]) -> int:
    return sum(p.numel() for path in paths for p in model.get_submodule(path).parameters())


def _common_parent(paths: list[str]) -> str:
    parents = {p.rpartition(".")[0] for p in paths}
    return parents.pop() if len(parents) == 1 else ""


def _declares(module: torch.nn.Module, attr: str) -> set[str]:
    """The block classes `module` itself declares by `attr`."""
    names = getattr(module, attr, None)
    return {str(n) for n in names} if names and isinstance(names, (list, tuple, set)) else set()


def _under(path: str, root: str) -> bool:
    return root == "" or path == root or path.startswith(root + ".")


def declared_groups(model: torch.nn.Module) -> list[RepeatedGroup]:
    """The blocks the model, or each library model inside it (in the user's wrapper, a LightningModule, a
    PEFT model), declares (`DECLARED`, the first attribute that finds any), by class, outermost instances
    only, two or more each; a declaration names classes under its own module only."""
    modules = list(model.named_modules())
    groups: list[RepeatedGroup] = []
    declaring: list[str] = []  # modules whose declaration was taken: a model inside them is theirs
    for root, owner in modules:
        if any(_under(root, d) for d in declaring):
            continue
        for attr in DECLARED:
            wanted = _declares(owner, attr)
            if not wanted:
                continue
            by_class: dict[str, list[str]] = {}
            taken: list[str] = []
            for path, module in modules:
                if path != root and _under(path, root) and type(module).__name__ in wanted and not any(_under(path, t) for t in taken):
                    by_class.setdefault(type(module).__name__, []).append(path)
                    taken.append(path)
            found = [
                RepeatedGroup(_common_parent(paths), cls, paths, declared=attr, parameters=_parameters(model, paths))
                for cls, paths in by_class.items()
                if len(paths) >= 2
            ]
            if found:
                groups += found
                declaring.append(root)
                break
    return groups


def repeated_groups(model: torch.nn.Module, minimum: int = 2) -> list[RepeatedGroup]:
    """Regional-compilation candidates: the blocks the model declares, else sibling blocks of one class
    and identical structure that carry the compute (never a layer such as `Linear`, never a helper that
    holds a small share of the parameters while a larger repeated unit exists)."""
    declared = declared_groups(model)
    if declared:
        return declared
    groups = []
    for path, parent in model.named_modules():
        by_signature: dict[tuple[Any, ...], list[str]] = {}
        for name, child in parent.named_children():
            if _leaf_like(child):
                continue  # leaf layers (Linear...) are not blocks worth compiling on their own
            key = (type(child), _shape_signature(child))
            by_signature.setdefault(key, []).append(f"{path}.{name}" if path else name)
        for (cls, _), paths in by_signature.items():
            if len(paths) >= minimum:
                groups.append(RepeatedGroup(container=path, class_name=cls.__name__, paths=paths, parameters=_parameters(model, paths)))
    # an outer group (e.g. two stacks) already compiles its inner repeats: keep the outermost
    groups = [g for g in groups if not any(o is not g and any(p.startswith(q + ".") for p in g.paths for q in o.paths) for o in groups)]
    total = sum(p.numel() for p in model.parameters()) or 1
    carrying = [g for g in groups if g.parameters / total >= MIN_SHARE]
    return carrying or sorted(groups, key=lambda g: -g.parameters)[:1]


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
    return ModelFacts(
        arg_names=names,
        arg_kinds=kinds,
        repeated=repeated_groups(model),
        config_options=options,
        arg_shapes=shapes,
        compile_repeated_blocks=callable(getattr(model, "compile_repeated_blocks", None)),
        shares=_shares(model),
    )


def _shares(model: torch.nn.Module) -> dict[str, float]:
    """Each submodule's share of the model's parameters (of its modules, for a model with none)."""
    total = sum(p.numel() for p in model.parameters())
    modules = sum(1 for _ in model.modules())
    out = {}
    for path, module in model.named_modules():
        if not path:
            continue
        if total:
            out[path] = sum(p.numel() for p in module.parameters()) / total
        else:
            out[path] = sum(1 for _ in module.modules()) / modules
    return out
