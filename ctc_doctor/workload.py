"""The target contract: what a user's `build()` returns. No torch import here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One call of the model: positional and keyword arguments."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    """A model plus the calls that exercise it.

    `args`/`kwargs` are the first call. Each entry of `variants` is a further call, run after the
    first to expose recompiles: a tuple replaces the positional args (keeping `kwargs`), a dict
    replaces the keyword args (keeping `args`), a `Call` replaces both.
    `loss_fn(output) -> scalar tensor` is used by `--train` (default: the sum of the output tensors).
    `before_call(model, index)` runs before call `index` (0 = first) to change model state between
    calls, e.g. toggling an attribute or `model.train()`/`model.eval()`.
    `optimizer(params) -> torch.optim.Optimizer`: with `--train`, each call is a whole training step
    (forward, loss, backward, `optimizer.step()`, `optimizer.zero_grad()`), timed in steps/s, and the
    benchmark adds an arm with `optimizer.step` compiled too; the calls are the batches. The doctor
    builds its own optimizer per run from the factory and puts the model's parameters back afterwards.
    `pad` (argument -> (dim, pad value)), e.g. `{"input_ids": (1, pad_id), "labels": (1, -100)}`, says how a
    batch may be padded: `--shape-arms` with `--train` then adds an arm padded to buckets, judged on its
    losses (padding must not change the loss: ignored labels, a mask the model honours).
    `grad`: whether inference calls run with gradients on. By default (None) they run under
    `torch.no_grad()` in every phase (the analysis, the fix checks, the benchmark's arms), as a model is
    served, holding no activations for a backward that never comes; True runs them as code that calls
    the model without `no_grad` does (what flows with `requires_grad` can then recompile). `--train` runs
    forward and backward whatever it says.
    """

    model: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    variants: Sequence[Any] = ()
    name: str | None = None
    loss_fn: Callable[[Any], Any] | None = None
    before_call: Callable[[Any, int], None] | None = None
    optimizer: Callable[[Any], Any] | None = None
    pad: Mapping[str, tuple[int, Any]] | None = None
    grad: bool | None = None

    def calls(self) -> list[Call]:
        """Every call of the workload in order: the first, then each variant."""
        out = [Call(tuple(self.args), dict(self.kwargs))]
        for variant in self.variants:
            if isinstance(variant, Call):
                out.append(Call(tuple(variant.args), dict(variant.kwargs)))
            elif isinstance(variant, Mapping):
                out.append(Call(tuple(self.args), dict(variant)))
            elif isinstance(variant, (tuple, list)):
                out.append(Call(tuple(variant), dict(self.kwargs)))
            else:
                out.append(Call((variant,), dict(self.kwargs)))
        return out
