"""The one tensor walker: calls' inputs and outputs are tensors nested in tuples, lists and dicts.

`map_tensors` rebuilds the containers with their own types (namedtuples, transformers' `ModelOutput`
and other dict subclasses stay what they were); `iter_tensors` visits the same tensors in the same
order without rebuilding anything.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any], leaf: Callable[[Any], Any] | None = None) -> Any:
    """`fn` applied to every tensor in `value`, containers rebuilt; other values go through `leaf` (default: shared)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        items = [map_tensors(v, fn, leaf) for v in value]
        return _same_sequence(value, items)
    if isinstance(value, dict):
        entries = {k: map_tensors(v, fn, leaf) for k, v in value.items()}
        return entries if type(value) is dict else _same_mapping(value, entries)
    return value if leaf is None else leaf(value)


def _same_sequence(original: tuple[Any, ...] | list[Any], items: list[Any]) -> Any:
    """A namedtuple, tuple or list (subclass) with new items; a plain one when its type cannot be rebuilt so."""
    kind = type(original)
    if kind is list:
        return items
    if kind is tuple:
        return tuple(items)
    try:
        return kind(*items) if hasattr(original, "_fields") else kind(items)
    except TypeError:  # a constructor with other arguments (torch.return_types...): the plain container
        return items if isinstance(original, list) else tuple(items)


def _same_mapping(original: dict[Any, Any], items: dict[Any, Any]) -> dict[Any, Any]:
    """A dict subclass (ModelOutput, OrderedDict...) with new items: a shallow copy, item by item."""
    try:
        out = copy.copy(original)
        for key, item in items.items():
            out[key] = item  # ModelOutput refuses update() but keeps attributes in step on __setitem__
    except (TypeError, AttributeError, RuntimeError):
        return items  # a mapping that cannot be copied this way: its items as a plain dict
    return out


def is_on(t: torch.Tensor, want: torch.device) -> bool:
    """Whether `t` is on `want` (a device without an index matches any of its type)."""
    return t.device.type == want.type and (want.index is None or t.device.index == want.index)


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in `value`, in the order `map_tensors` visits them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensors(v)
    elif hasattr(value, "to_tuple"):  # a ModelOutput-like object that is not a dict
        yield from iter_tensors(value.to_tuple())


def detached(out: Any) -> list[torch.Tensor]:
    """The output's tensors, detached copies, in a fixed order (for numerics checks)."""
    return [t.detach().clone() for t in iter_tensors(out)]


def clone_tensor(value: torch.Tensor, device: str | None = None) -> torch.Tensor:
    """A detached copy, on `device` (None: the original's), that requires grad when the original did
    (floating point and complex only)."""
    out = value.detach().clone() if device is None else value.detach().to(device, copy=True)
    return out.requires_grad_(True) if value.requires_grad and (out.is_floating_point() or out.is_complex()) else out


def clone_inputs(value: Any) -> Any:
    """Detached copies of the tensors in a call's inputs (requires_grad kept); other values shared."""
    return map_tensors(value, clone_tensor)
