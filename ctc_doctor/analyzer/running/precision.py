"""The higher-precision run every numerics judgement compares against: the workload's calls at float64
(float32 for a bf16/fp16 model that cannot have one), each result kept only as its difference from
eager's (`numerics.Reference`).

Where it runs is chosen by what fits (`make_reference`): inference casts the model itself in place and
puts it back bit for bit (float64 holds every float32, bfloat16 and float16 value), so no copy of the
model is made (`whole`); on an accelerator short of memory, the cast model runs on the host (`host`);
else each module is cast only while its forward runs (`blockwise`: one module's parameters at float64 at
a time, along the module tree). Training runs a cast copy (its optimizer moves the parameters). A run
that fails (an op without float64, out of memory) falls back to the next way, and to a lower precision
only when no float64 way fits; the reference's note says which ran and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Iterator
from typing import Any

import torch

from ...workload import Call, Workload
from .calls import Sample, preserved_state, run_pass
from .copying import cast_copy, copy_model
from .device import free_bytes
from .memory import out_of_memory
from .numerics import _LOW, CHUNK, STEP_NOTE, KeptResults, Reference
from .store import Kept, TensorStore, flat
from .tensors import iter_tensors


def _floating_dtypes(model: torch.nn.Module) -> set[torch.dtype]:
    return {t.dtype for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()}


def _bytes(model: torch.nn.Module, itemsize: int | None = None) -> int:
    """Bytes of the model's floating-point parameters and buffers (each at `itemsize`, or its own)."""
    return sum(t.numel() * (itemsize or t.element_size()) for t in _float_tensors(model))


def _float_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's floating-point parameters and buffers, each once (tied weights counted once)."""
    seen: dict[int, torch.Tensor] = {}
    for t in [*model.parameters(), *model.buffers()]:
        if t.is_floating_point():
            seen.setdefault(id(t), t)
    return list(seen.values())


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Tensors the model creates without a dtype (`torch.zeros(n)`, `torch.tensor(0.5)`) in `dtype` too."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def cast_in_place(model: torch.nn.Module, dtype: torch.dtype, device: str | None = None) -> Iterator[None]:
    """The model's floating-point parameters and buffers in `dtype` (and on `device`) for the block, then
    back in their own dtype and device. Exact both ways: float64 holds every float32, bfloat16 and float16
    value, so the model comes back bit for bit. No copy of the model: the memory is the cast model's alone
    (the original tensors are freed while it runs, unless something else holds them)."""
    tensors = _float_tensors(model)
    before = [(t.dtype, t.device) for t in tensors]
    try:
        with torch.no_grad():
            for t in tensors:
                t.data = t.data.to(device=device or t.device, dtype=dtype)
        yield
    finally:
        with torch.no_grad():
            for t, (old, where) in zip(tensors, before, strict=True):
                t.data = t.data.to(device=where, dtype=old)


@contextlib.contextmanager
def cast_blockwise(model: torch.nn.Module, dtype: torch.dtype) -> Iterator[None]:
    """Each module's own floating-point parameters and buffers in `dtype` only while its forward runs
    (forward pre- and post-hooks), then back: the reference run block by block along the module tree,
    for a model whose whole copy in `dtype` does not fit. Inference only; exact both ways (see
    `cast_in_place`). A parameter that another module's code reads directly stays in its own dtype there,
    and the run fails with a dtype error: the caller then tries another way."""
    depth: dict[int, int] = {}
    owned: dict[torch.nn.Module, list[tuple[torch.Tensor, torch.dtype]]] = {}
    for module in model.modules():
        own = [t for t in [*module._parameters.values(), *module._buffers.values()] if t is not None and t.is_floating_point()]
        if own:
            owned[module] = [(t, t.dtype) for t in own]

    def enter(module: torch.nn.Module, *_: Any) -> None:
        for t, _old in owned[module]:
            depth[id(t)] = depth.get(id(t), 0) + 1
            if depth[id(t)] == 1:
                t.data = t.data.to(dtype)

    def leave(module: torch.nn.Module, *_: Any) -> None:
        for t, old in owned[module]:
            depth[id(t)] -= 1
            if depth[id(t)] == 0:
                t.data = t.data.to(old)

    handles = []
    try:
        for module in owned:
            handles.append(module.register_forward_pre_hook(enter))
            handles.append(module.register_forward_hook(leave, always_call=True))
        yield
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for pairs in owned.values():
                for t, old in pairs:
                    if t.dtype != old:
                        t.data = t.data.to(old)


Placement = str
"""Where the reference ran: `whole` (the model cast on its device), `host` (cast and moved to the host),
`blockwise` (each module cast while it runs, on its device), `copy` (a cast copy: training)."""

PLACEMENT_TEXT = {
    "whole": "the model cast on its device",
    "host": "the model cast and moved to the host",
    "blockwise": "block by block along the module tree (each module cast while it runs)",
    "copy": "a cast copy of the model",
}


def _cast_calls(calls: list[Call], dtype: torch.dtype, device: str | None) -> list[Call]:
    def cast(t: torch.Tensor) -> torch.Tensor:
        out = t.detach().to(device=device or t.device, dtype=dtype if t.is_floating_point() else t.dtype)
        out = out.clone() if out.data_ptr() == t.data_ptr() else out
        return out.requires_grad_(True) if t.requires_grad and out.is_floating_point() else out

    memo: dict[int, object] = {}  # a cache that several calls share stays shared in the copy
    return [Call(cast_copy(c.args, cast, memo), cast_copy(dict(c.kwargs), cast, memo)) for c in calls]


def _run_in(
    dtype: torch.dtype,
    placement: Placement,
    model: torch.nn.Module,
    workload: Workload,
    calls: list[Call],
    sink: _DeltaRecorder,
    *,
    seed: int | None,
    train: bool,
    steps: bool,
) -> None:
    """The calls through the model with its floating-point parameters, buffers and inputs in `dtype`, each
    result turned into its difference from eager's by `sink`. Inference casts the model itself (it comes
    back exact, `cast_in_place`/`cast_blockwise`); training runs a cast copy (its optimizer moves it)."""
    device = "cpu" if placement == "host" else None
    cast_calls = _cast_calls(calls, dtype, device)
    default = _default_dtype(torch.float64 if dtype == torch.float64 else torch.get_default_dtype())
    if train:
        copy = copy_model(model).to(dtype)
        high = dataclasses.replace(workload, model=copy)  # before_call and loss_fn act on the copy
        optimizer = workload.optimizer(copy.parameters()) if steps and workload.optimizer is not None else None
        with default:
            run_pass(copy, high, cast_calls, seed=seed, train=True, sink=sink, optimizer=optimizer)
        return
    cast = cast_blockwise(model, dtype) if placement == "blockwise" else cast_in_place(model, dtype, device)
    high = dataclasses.replace(workload, model=model)
    with preserved_state(model), cast, default, torch.no_grad():
        run_pass(model, high, cast_calls, seed=seed, train=False, sink=sink)


class _DeltaRecorder:
    """The sink of the higher-precision run: each result's difference from eager's, kept (chunk by chunk
    into the store); the run's own results dropped as they come."""

    def __init__(self, eager: KeptResults, store: TensorStore) -> None:
        self.eager = dict(eager.named())
        self.store = store
        self.deltas: dict[str, Kept] = {}
        self.calls = 0

    def _record(self, name: str, high: torch.Tensor) -> None:
        e = self.eager.get(name)
        if e is None or not e.is_floating_point() or e.shape != tuple(high.shape):
            return  # judged elementwise against eager
        hf = flat(high)
        kind = torch.float64 if e.flat_dtype == torch.float64 else torch.float32
        self.deltas[name], writer = self.store.writer(e.shape, kind, e.numel, hf.device)
        for s in range(0, e.numel, CHUNK):
            h = hf[s : s + CHUNK].double()
            writer.write((h - e.chunk(s, CHUNK, h.device).double()).to(kind))

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        i = self.calls
        self.calls += 1
        for j, t in enumerate(iter_tensors(out)):
            self._record(f"call {i} output {j}", t)
        if loss is not None:
            self._record(f"loss call {i}", loss)

    def take_grads(self, model: Any) -> None:
        if isinstance(model, torch.nn.Module):
            for name, p in model.named_parameters():
                if p.grad is not None:
                    self._record(f"grad {name}", p.grad)


def fits(need: int, device: str) -> tuple[bool, int | None]:
    """Whether `need` bytes fit in what is free on `device` (its free memory; the host's available memory
    for the CPU), and what is free (None: unknown, and then it is taken to fit)."""
    free = free_bytes(device)
    return free is None or need <= free, free


def make_reference(
    model: torch.nn.Module,
    workload: Workload,
    calls: list[Call],
    eager: KeptResults | Sample,
    *,
    seed: int | None,
    train: bool,
    device: str,
    loose: bool,
    steps: bool = False,
    activations: int | None = None,
    placements: tuple[Placement, ...] | None = None,
) -> Reference:
    """Run the calls at float64 (float32 for a bf16/fp16 model that cannot have a float64 run) and keep how
    far each result is from eager's (`eager`: its kept results; a `Sample` is emptied into a store);
    `steps`: as whole training steps, the workload's optimizer built over the copy's parameters.

    Inference casts `model` itself for the run and puts it back exact (`cast_in_place`), so the caller
    lends a model nothing else runs meanwhile; training runs a cast copy. Where it runs is the first of
    `placements` that fits (default: on the device, then, on an accelerator, the host, then block by
    block), from the model's float64 size plus `activations` (the eager pass's own peak above the model,
    bytes at the model's precision; default: twice the model) at float64."""
    t0 = time.perf_counter()
    kept = eager if isinstance(eager, KeptResults) else KeptResults.of(eager)
    store = kept.store
    dtypes = _floating_dtypes(model)
    low = bool(dtypes & set(_LOW))
    own = _bytes(model)
    tries: list[tuple[torch.dtype, Placement]] = []
    problems: list[str] = []
    for dtype in (torch.float64, torch.float32) if low else (torch.float64,):
        scale = dtype.itemsize / max(1, min((d.itemsize for d in dtypes), default=4))
        work = int((activations if activations is not None else 2 * own) * scale)
        tries.extend(_placements(dtype, model, own, work, device, train, placements, problems))
    failed: set[torch.dtype] = set()
    for dtype, placement in tries:
        if dtype in failed:
            continue
        recorder = _DeltaRecorder(kept, store)
        try:
            _run_in(dtype, placement, model, workload, calls, recorder, seed=seed, train=train, steps=steps)
        except Exception as exc:  # noqa: BLE001 - an op without this dtype, or out of memory: the next way, said so
            first = str(exc).splitlines()[0][:160] if str(exc) else ""
            problems.append(f"the {_name(dtype)} copy failed ({PLACEMENT_TEXT[placement]}): {type(exc).__name__}: {first}")
            del recorder
            _release(device)
            if not out_of_memory(exc):
                failed.add(dtype)  # an op without this dtype fails wherever it runs
            continue
        method = "float64_reference" if dtype == torch.float64 else "float32_reference"
        notes = [*problems]
        if placement != "whole":
            notes.append(f"the {_name(dtype)} run went {PLACEMENT_TEXT[placement]}")
        if steps:
            notes.append(STEP_NOTE)
        duration = round(time.perf_counter() - t0, 3)
        note = "; ".join(notes) or None
        return Reference(kept, recorder.deltas, method, note, loose, duration, steps, placement=placement, store=store)
    note = "; ".join(problems) or "no higher precision than the model's"
    duration = round(time.perf_counter() - t0, 3)
    return Reference(kept, None, "elementwise", note + ": elementwise check against eager", loose, duration, store=store)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _placements(
    dtype: torch.dtype,
    model: torch.nn.Module,
    own: int,
    work: int,
    device: str,
    train: bool,
    chosen: tuple[Placement, ...] | None,
    problems: list[str],
) -> list[tuple[torch.dtype, Placement]]:
    """The ways a run in `dtype` may go, in order, those that fit: on the device (inference: the model cast
    in place, +its size at `dtype` less its own; training: a cast copy), on the host (an accelerator's
    model), block by block (inference: one module's parameters at a time, the activations at `dtype`)."""
    cast = _bytes(model, dtype.itemsize)
    largest = max((sum(t.numel() for t in m.parameters(recurse=False)) for m in model.modules()), default=0) * dtype.itemsize
    ways: list[tuple[Placement, int, str]] = []
    if train:
        ways.append(("copy", cast + 2 * work, device))
    else:
        ways.append(("whole", cast - own + work, device))
        if device != "cpu":
            ways.append(("host", cast + work, "cpu"))
        ways.append(("blockwise", largest + work, device))
    out = []
    for placement, need, where in ways:
        if chosen is not None and placement not in chosen:
            continue
        ok, free = fits(need, where)
        if ok:
            out.append((dtype, placement))
        elif free is not None:
            sizes = f"{need / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free"
            problems.append(f"a {_name(dtype)} run {PLACEMENT_TEXT[placement]} would not fit ({sizes})")
    return out
