"""What the suggestion rules, `fix`, the probe and the benchmark need to know about the model
beyond the report: forward's arguments and their kinds, groups of identical blocks, and which of
the Dynamo options the rules name exist in this torch. Offline reports have no facts (None).

Importing this module does not import torch (the rules, which run offline too, use its types);
gathering the facts does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from ...workload import Call

CONFIG_OPTIONS_USED = (
    "reorderable_logging_functions",
    "ignore_logger_methods",
    "ignore_logging_functions",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "recompile_limit",
)
"""`torch._dynamo.config` options the suggestion rules name (the facts say which exist)."""


@dataclass
class RepeatedGroup:
    """Sibling modules of one class and structure in a container (`layers.0` ... `layers.N`)."""

    container: str
    class_name: str
    paths: list[str]


@dataclass
class ModelFacts:
    """What the live analyzer knows about the model beyond the report."""

    arg_names: list[str] = field(default_factory=list)
    """forward's parameter names, in order."""
    arg_kinds: dict[str, str] = field(default_factory=dict)
    """Kind of each argument in the first call: tensor, float, int, bool, other."""
    repeated: list[RepeatedGroup] = field(default_factory=list)
    """Groups of identical blocks."""
    config_options: frozenset[str] = frozenset()
    """Those of CONFIG_OPTIONS_USED this torch has (to check torch's own hints against)."""


def _kind(value: Any) -> str:
    import torch

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


def model_facts(model: torch.nn.Module, first: Call) -> ModelFacts:
    from . import torch_internals as ti
    from .modules import forward_arg_names

    names = forward_arg_names(model) or []
    kinds = {names[i] if i < len(names) else f"arg{i}": _kind(v) for i, v in enumerate(first.args)}
    kinds.update({k: _kind(v) for k, v in first.kwargs.items()})
    options = frozenset(n for n in CONFIG_OPTIONS_USED if ti.config_has(n))
    return ModelFacts(arg_names=names, arg_kinds=kinds, repeated=repeated_groups(model), config_options=options)
