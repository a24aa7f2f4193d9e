"""A script's own torch.compile calls (`ctc-doctor run`): `torch.compile` replaced for the run, and
what it returned recognised.

Owns no state: `torch.compile` is put back when the block exits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._dynamo


@contextlib.contextmanager
def torch_compile_replaced(make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[Callable[..., Any]]:
    """`torch.compile` is `make(original)` in the block (what the script calls, `nn.Module.compile`
    included: it calls `torch.compile(self._call_impl, ...)`); yields the original; restored on exit."""
    original = torch.compile
    torch.compile = make(original)  # type: ignore[assignment]
    try:
        yield original
    finally:
        torch.compile = original  # type: ignore[assignment]


def is_optimized_module(obj: Any) -> bool:
    optimized = getattr(getattr(torch._dynamo, "eval_frame", None), "OptimizedModule", None)
    return optimized is not None and isinstance(obj, optimized)
