"""The reference's slices of the batch (`precision`): each call's rows a few at a time, each result written
at its rows, so that the float64 activations of one slice at a time sit beside the model; before
slicing, a slice run at the model's own precision must give eager's rows (the rows are independent)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from ....workload import Call, Workload
from ..calls import preserved_state, run_pass
from ..copying import cast_copy
from ..draws import Draws
from ..numerics import CHUNK, KeptResults, tolerance
from ..store import Kept, flat
from ..tensors import iter_tensors

MAX_SLICES = 64
"""The most slices a batch is cut into."""


def batch_of(call: Call) -> int | None:
    """A call's batch size: the first dimension of its first tensor of at least one dimension."""
    for t in iter_tensors((tuple(call.args), dict(call.kwargs))):
        if t.dim() >= 1:
            return int(t.shape[0])
    return None


def _largest_slices(calls: list[Call]) -> int:
    """How many slices the calls' batches can be cut into at most (1: none)."""
    batches = [batch_of(c) for c in calls]
    if not batches or any(b is None or b < 2 for b in batches):
        return 1
    return min(MAX_SLICES, *[b for b in batches if b is not None])


def slice_counts(calls: list[Call]) -> list[int]:
    """2, 4, 8... up to what the batches allow (their smallest batch, when it is not a power of 2)."""
    most = _largest_slices(calls)
    counts = [2**i for i in range(1, int(math.log2(most)) + 1)] if most >= 2 else []
    if most >= 2 and most not in counts:
        counts.append(most)
    return counts


def _rows(batch: int, slices: int) -> list[tuple[int, int]]:
    """[start, end) of each slice of `batch` rows."""
    bounds = [round(i * batch / slices) for i in range(slices + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def slice_of(calls: list[Call], slices: int, index: int) -> tuple[list[Call], list[tuple[int, int]]]:
    """Slice `index` of every call: each tensor whose first dimension is the call's batch cut to the
    slice's rows (inside objects too: a cache's tensors), and the rows of each call it holds."""
    out, rows = [], []
    memo: dict[int, Any] = {}  # an object several calls share stays shared within the slice
    for call in calls:
        batch = batch_of(call)
        assert batch is not None
        start, end = _rows(batch, slices)[index]

        def cut(t: torch.Tensor, batch: int = batch, start: int = start, end: int = end) -> torch.Tensor:
            return t[start:end] if t.dim() >= 1 and t.shape[0] == batch else t

        out.append(Call(cast_copy(tuple(call.args), cut, memo), cast_copy(dict(call.kwargs), cut, memo)))
        rows.append((start, end))
    return out, rows


class NotSliceable(Exception):
    """A slice's results cannot be put back in the batch's shape."""


class _RowsCheck:
    """A sink that tells whether a slice's results at the model's own precision are eager's rows (the
    batch's rows are independent: slicing changes nothing but rounding)."""

    def __init__(self, eager: KeptResults, rows: list[tuple[int, int]], loose: bool) -> None:
        self.eager, self.rows, self.loose = eager, rows, loose
        self.calls = 0
        self.problem: str | None = None

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        i = self.calls
        self.calls += 1
        if self.problem is not None or i >= len(self.eager.outputs):
            return
        start, end = self.rows[i]
        for j, (t, e) in enumerate(zip(iter_tensors(out), self.eager.outputs[i], strict=False)):
            if not e.shape or tuple(t.shape) != (end - start, *e.shape[1:]):
                self.problem = f"call {i} output {j} has shape {list(t.shape)}, not rows {start}-{end} of {list(e.shape)}"
                return
            if not self._same(flat(t), e, start * (e.numel // e.shape[0])):
                self.problem = f"call {i} output {j}: rows {start}-{end} run alone differ from the same rows of the whole batch"
                return

    def _same(self, mine: torch.Tensor, e: Kept, offset: int) -> bool:
        """Chunk by chunk (no whole output at float64): integers equal, floats within 10x the elementwise
        check's loose tolerance (a slice may round otherwise than the batch)."""
        rtol, atol = tolerance(e.dtype, True)
        for s in range(0, mine.numel(), CHUNK):
            a = mine[s : s + CHUNK]
            b = e.chunk(offset + s, a.numel(), a.device)
            if not e.is_floating_point():
                if not torch.equal(a, b):
                    return False
            elif not torch.allclose(a.double(), b.double(), rtol=10 * rtol, atol=10 * atol, equal_nan=True):
                return False
        return True

    def take_grads(self, model: Any) -> None:
        return


def rows_independent(
    model: torch.nn.Module,
    workload: Workload,
    calls: list[Call],
    kept: KeptResults,
    slices: int,
    seed: int | None,
    draws: Draws | None = None,
) -> str | None:
    """None when the first of `slices` slices, run at the model's own precision (with eager's `draws`
    replayed at its rows), gives eager's rows; else why not."""
    sliced, rows = slice_of(calls, slices, 0)
    check = _RowsCheck(kept, rows, True)
    replay = draws.replaying(rows, [batch_of(c) or 0 for c in calls]) if draws is not None else None
    try:
        with preserved_state(model), torch.no_grad():
            run_pass(model, dataclasses.replace(workload, model=model), sliced, seed=seed, train=False, sink=check, draws=replay)
    except Exception as exc:  # noqa: BLE001 - the model does not take a slice of its batch
        return f"a slice of the batch does not run: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    return check.problem
