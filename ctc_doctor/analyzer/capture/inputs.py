"""Module inputs: forward pre-hooks record each submodule's inputs on its first call and its call count.

Recorded during the eager pass of the workload's first call (the analysis phase does it when
bisection is asked for). Tensors are detached clones, with their requires_grad and the grad mode of
the call kept; objects deepcopy refuses are copied attribute-wise or, failing that, shared (and
named in `shared`). Bisection trials and repro scripts replay these inputs.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from ..running.copying import fresh_copy
from ..running.modules import forward_pre_hooks


def signature(value: Any) -> str:
    """Memo-key signature of an input: dtype/shape/requires_grad for tensors, values for flags."""
    if isinstance(value, torch.Tensor):
        grad = "+g" if value.requires_grad else ""
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}@{value.device.type}{grad}"
    if isinstance(value, (bool, str, type(None))):
        return repr(value)
    if isinstance(value, (int, float)):
        return type(value).__name__
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ",".join(signature(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={signature(v)}" for k, v in value.items()) + "}"
    return type(value).__qualname__


@dataclass
class CapturedCall:
    """The inputs of a module's first call."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool
    signature: str
    shared: list[str] = field(default_factory=list)
    """Types of input objects that could not be copied (the trial shares them with the model)."""

    def fresh(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return fresh_copy(self.args), fresh_copy(self.kwargs)


class ModuleInputs:
    """Every module's first-call inputs and its call count, recorded by forward pre-hooks."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.modules: dict[str, torch.nn.Module] = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
        self.inputs: dict[str, CapturedCall] = {}
        self.calls: Counter[str] = Counter()

    def record(self) -> contextlib.AbstractContextManager[None]:
        """Record for the duration of the block."""
        return forward_pre_hooks(self.modules, self._hook, with_kwargs=True)

    def _hook(self, path: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            self.calls[path] += 1
            if path not in self.inputs:
                shared: list[str] = []
                a, k = fresh_copy(tuple(args), shared), fresh_copy(dict(kwargs), shared)
                self.inputs[path] = CapturedCall(a, k, torch.is_grad_enabled(), signature((a, k)), sorted(set(shared)))

        return hook
