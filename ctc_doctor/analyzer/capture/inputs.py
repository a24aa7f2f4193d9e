"""Module inputs: forward pre-hooks record each submodule's inputs on its first call and its call count.

Recorded during the eager pass of the workload's first call (the analysis phase does it when
bisection is asked for). Tensors are detached clones, with their requires_grad and the grad mode of
the call kept; objects deepcopy refuses are copied attribute-wise or, failing that, shared (and
named in `shared`). Bisection trials and repro scripts replay these inputs.

On an accelerator the copies are kept in host memory and go back to the device for each trial
(`CapturedCall.fresh`): every module's first inputs together are about one forward pass's activations
(on a 7B Llama at 8 x 512 tokens, some 15 GB), which the device must not hold beside the model.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import torch_internals as ti
from ..running.copying import Reuse, fresh_copy, holds_state
from ..running.modules import forward_pre_hooks
from ..running.tensors import iter_tensors


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
    device: str | None = None
    """The accelerator the call's tensors were on, when their copies are kept in host memory (None: kept
    where they were)."""

    def fresh(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Copies a trial can consume, on the device the call ran on."""
        return fresh_copy(self.args, device=self.device), fresh_copy(self.kwargs, device=self.device)


def accelerator_of(value: Any) -> str | None:
    """The one accelerator every tensor of a call's arguments is on, when they hold no stateful object
    (None: the host, several devices, or a KV cache: it is copied where it is, its tensors perhaps on
    several devices, and a host copy of it would come back whole from `copy.deepcopy`)."""
    if holds_state(value):
        return None
    devices = {t.device for t in iter_tensors(value)}
    if len(devices) != 1:
        return None
    (device,) = devices
    return str(device) if device.type not in ("cpu", "meta") else None


class ModuleInputs:
    """Every module's first-call inputs and its call count, recorded by forward pre-hooks."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.modules: dict[str, torch.nn.Module] = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
        self.inputs: dict[str, CapturedCall] = {}
        self.calls: Counter[str] = Counter()
        self.reuse = Reuse(ti.tensor_state)
        """Copies lent between calls (a KV cache every layer receives is copied once per layer's entry)."""

    def record(self) -> contextlib.AbstractContextManager[None]:
        """Record for the duration of the block."""
        return forward_pre_hooks(self.modules, self._hook, with_kwargs=True)

    def _hook(self, path: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            self.calls[path] += 1
            if path not in self.inputs:
                shared: list[str] = []
                device = accelerator_of((args, kwargs))
                host = "cpu" if device is not None else None
                memo = self.reuse.memo(host)
                a, k = fresh_copy(tuple(args), shared, memo, device=host), fresh_copy(dict(kwargs), shared, memo, device=host)
                self.reuse.learn(memo, host)
                sig = signature((tuple(args), dict(kwargs)))  # the call's own devices: the memo keys of trials
                self.inputs[path] = CapturedCall(a, k, torch.is_grad_enabled(), sig, sorted(set(shared)), device)

        return hook
