"""`--probe-shapes`: which input dimensions recompile when they change, found before production does.

For each dimension of each tensor argument of the first call, the probe compiles the model on the
first call, then calls it with that dimension grown by half (other inputs unchanged, values drawn
like the original's) and counts recompiles. When eager itself rejects the new size, the dimensions of
the same size in other inputs are grown together (input_ids and attention_mask share a sequence
length); when eager still rejects it, the model needs that size: static by design. The dimensions that
recompile become `mark_dynamic` recommendations, which are then verified: with them, none of the
probed sizes may recompile. Runs under `torch.no_grad()` with the analysis backend.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ...workload import Call
from .. import torch_internals as ti
from ..running.tensors import clone_inputs
from .context import PhaseContext

_Slot = tuple[str, Any]  # ("pos", index) or ("kw", name)


def _inputs(call: Call, names: list[str]) -> list[tuple[str, _Slot, torch.Tensor]]:
    out: list[tuple[str, _Slot, torch.Tensor]] = []
    for i, value in enumerate(call.args):
        if isinstance(value, torch.Tensor):
            out.append((names[i] if i < len(names) else f"arg{i}", ("pos", i), value))
    for key, value in call.kwargs.items():
        if isinstance(value, torch.Tensor):
            out.append((key, ("kw", key), value))
    return out


def _like(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """A new tensor of `shape` with values like `t`'s (same dtype and device; ints in t's range)."""
    if t.is_floating_point() or t.is_complex():
        return torch.randn(shape, dtype=t.dtype, device=t.device)
    if t.dtype == torch.bool:
        return torch.rand(shape, device=t.device) > 0.5
    low, high = (int(t.min()), int(t.max())) if t.numel() else (0, 1)
    return torch.randint(low, high + 1, shape, dtype=t.dtype, device=t.device)


def _with(call: Call, changes: dict[_Slot, torch.Tensor]) -> Call:
    args, kwargs = list(call.args), dict(call.kwargs)
    for (kind, key), value in changes.items():
        if kind == "pos":
            args[key] = value
        else:
            kwargs[key] = value
    return Call(tuple(args), kwargs)


def _grown(size: int) -> int:
    return size + max(1, size // 2)


def run_probe(ctx: PhaseContext) -> rm.ShapeProbe:
    """The phase: grow each dimension of each tensor input, count recompiles, verify the marks."""
    t0 = time.perf_counter()
    assert ctx.facts is not None
    model = ctx.workload.model
    first = ctx.calls[0]
    tensors = _inputs(first, ctx.facts.arg_names)
    backend = ctx.settings.backend
    progress = ctx.progress
    result = rm.ShapeProbe()
    probes: list[tuple[rm.ProbedDim, Call]] = []
    total = sum(t.dim() for _, _, t in tensors)

    def eager_ok(call: Call) -> str | None:
        try:
            with torch.no_grad():
                model(*call.args, **dict(call.kwargs))
        except Exception as exc:  # noqa: BLE001 - the model rejects this shape: that is the finding
            return _why(exc)
        return None

    def recompiles(call: Call, marks: list[tuple[_Slot, int]] | None = None) -> int:
        ti.fresh_dynamo_state()
        base = first
        if marks:
            base = Call(clone_inputs(first.args), clone_inputs(dict(first.kwargs)))
            for (kind, key), dim in marks:
                value = base.args[key] if kind == "pos" else base.kwargs[key]
                ti.mark_dynamic(value, dim)
        compiled = torch.compile(model, backend=backend)
        with torch.no_grad(), ti.quiet_torch_stderr(True):
            compiled(*base.args, **dict(base.kwargs))
            with ti.count_compiles() as stats:
                compiled(*call.args, **dict(call.kwargs))
        result.trials += 1
        return stats.frames

    done = 0
    for name, slot, tensor in tensors:
        for dim, size in enumerate(tensor.shape):
            progress(ProgressEvent(Step.PROBE, done, total))
            done += 1
            new = _grown(int(size))
            row = rm.ProbedDim(argument=name, dim=dim, size=int(size), probed_size=new, outcome="error")
            shape = list(tensor.shape)
            shape[dim] = new
            changes = {slot: _like(tensor, shape)}
            call = _with(first, changes)
            problem = eager_ok(call)
            if problem is not None:
                # grow the same-sized dimensions of the other inputs too (shared lengths)
                for other_name, other_slot, other in tensors:
                    for other_dim, other_size in enumerate(other.shape):
                        if (other_slot, other_dim) != (slot, dim) and int(other_size) == int(size):
                            other_shape = list(changes.get(other_slot, other).shape)
                            other_shape[other_dim] = new
                            changes[other_slot] = _like(other, other_shape)
                            row.grouped_with.append(f"{other_name}[{other_dim}]")
                call = _with(first, changes)
                problem = eager_ok(call) if row.grouped_with else problem
            if problem is not None:
                row.outcome, row.reason, row.grouped_with = "eager_rejects", problem, []
            else:
                try:
                    row.outcome = "recompiles" if recompiles(call) else "no_recompile"
                    probes.append((row, call))
                except Exception as exc:  # noqa: BLE001 - one probe failing is a row
                    row.reason = _why(exc)
            result.dims.append(row)
    progress(ProgressEvent(Step.PROBE, total, total))

    marks: list[tuple[_Slot, int]] = []
    slots = {name: slot for name, slot, _ in tensors}
    for row in result.dims:
        if row.outcome != "recompiles" or row.size < 2:
            continue  # size 0/1 is always specialized: no mark removes that recompile
        for label in [f"{row.argument}[{row.dim}]", *row.grouped_with]:
            arg, _, d = label.partition("[")
            mark = (slots[arg], int(d.rstrip("]")))
            if mark not in marks:
                marks.append(mark)
                result.recommended.append(f"torch._dynamo.mark_dynamic({arg}, {int(d.rstrip(']'))})")
    if marks:
        try:
            result.verified = all(recompiles(call, marks) == 0 for row, call in probes if row.outcome == "recompiles")
        except Exception:  # noqa: BLE001 - e.g. a constraint violation: the marks do not hold
            result.verified = False
    ti.fresh_dynamo_state()
    result.duration_s = round(time.perf_counter() - t0, 3)
    return result


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"
