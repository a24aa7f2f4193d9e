"""The higher-precision run every numerics judgement compares against: the workload's calls at float64
(float32 for a bf16/fp16 model that cannot have one), each result kept only as its difference from
eager's (`numerics.Reference`).

It fits beside the model. What it may add on the run's device, beyond what the workload itself holds
(its model and its activations), is its `Room`: the doctor's margin (half the workload's own footprint,
at least 256 MB), or what `--memory-limit` allows, and never more than is free. Of the ways it can run,
the first whose addition fits is taken (`_ways`):

- inference: `whole`, the model cast in place (no copy: float64 holds every float32, bfloat16 and float16
  value, so it comes back bit for bit); `blockwise`, each module cast only while its forward runs (one
  module's parameters at float64 at a time); either over slices of the batch (the calls' rows a few at a
  time, each result written at its rows: the activations of one slice at a time), once a run of the first
  slice at the model's precision showed the rows are independent (`slicing`); on an accelerator, `host`,
  the cast model on the host;
- training: `whole`, the model cast in place for the run, its own values kept on the host and put back
  after (the optimizer's steps and the gradients are the run's own); on an accelerator, `offloaded`, the
  same with every tensor the backward needs saved on the host; `checkpointed`, the same with the model's
  repeated blocks under activation checkpointing (the activations of one block at a time, the backward
  recomputing them: one more forward) (`modules`); `streamed`, one module's parameters at float64 at a
  time, in the backward too, each gradient taken as it comes and the optimizer stepping each parameter on
  its own, the stepped values kept in a file (`streamed`); `streamed_checkpointed`, the same with the
  repeated blocks checkpointed (the activations of one block at a time too); on an accelerator, `host`.

A way past the room is not taken: the room is a bound, the doctor's own margin as `--memory-limit`, for
training too (one module's parameters at float64 at a time fits nearly any margin). A way that fails (an
op without float64, out of memory) falls back to the next, and to a lower precision only when no float64
way fits; the reference's `run` says which ran, in how many slices, why, and what it cost
(`rm.ReferenceRun`). Every way draws eager's own random numbers when a pass recorded them (`draws`); a way
whose run draws otherwise runs again drawing from the seed, and says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ....reports import models as rm
from ....workload import Call, Workload
from ..calls import Sample, preserved_state, run_pass
from ..copying import cast_copy
from ..device import cuda_mark, cuda_peak_above, free_bytes
from ..draws import NOT_REPLAYED, Draws
from ..memory import out_of_memory
from ..modules import block_share, cast_blockwise, checkpointed, repeated_blocks, saved_on_host
from ..numerics import _LOW, CHUNK, STEP_NOTE, KeptResults, Reference
from ..store import Kept, TensorStore, disk_free, flat
from ..tensors import iter_tensors
from .slicing import NotSliceable, batch_of, rows_independent, slice_counts, slice_of
from .streamed import NotStreamable, Streamed, elementwise_optimizer

MARGIN = 0.5
"""What the reference may add beyond the workload's own footprint, as a share of that footprint: the
doctor's device memory stays within about 1.5x the workload's own."""
MARGIN_FLOOR = 256 * 2**20
"""The margin is never less than this: a small model's float64 run is not worth slicing."""
FREE_SHARE = 0.8
"""What share of the free memory a way may plan to take: what autograd and the allocator add beyond the
estimate (a dense embedding gradient accumulated, a tensor and its cast for a moment) must not meet the
kernel's out-of-memory killer, which on the host ends the run rather than the way."""


def _floating_dtypes(model: torch.nn.Module) -> set[torch.dtype]:
    return {t.dtype for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()}


def _bytes(model: torch.nn.Module, itemsize: int | None = None) -> int:
    """Bytes of the model's floating-point parameters and buffers (each at `itemsize`, or its own)."""
    return sum(t.numel() * (itemsize or t.element_size()) for t in _float_tensors(model))


def _float_tensors(model: torch.nn.Module, *, every: bool = False) -> list[torch.Tensor]:
    """The model's floating-point parameters and buffers, each once (tied weights counted once); with
    `every`, the others too (token ids, masks: what a move to the host must not leave behind)."""
    seen: dict[int, torch.Tensor] = {}
    for t in [*model.parameters(), *model.buffers()]:
        if every or t.is_floating_point():
            seen.setdefault(id(t), t)
    return list(seen.values())


def _largest_module(model: torch.nn.Module, itemsize: int | None = None) -> int:
    """Bytes of the floating-point tensors the largest single module owns (not its children's)."""
    sizes = [
        sum(
            t.numel() * (itemsize or t.element_size())
            for t in [*m._parameters.values(), *m._buffers.values()]
            if t is not None and t.is_floating_point()
        )
        for m in model.modules()
    ]
    return max(sizes, default=0)


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
def cast_in_place(model: torch.nn.Module, dtype: torch.dtype, device: str | None = None, back: bool = True) -> Iterator[None]:
    """The model's floating-point parameters and buffers in `dtype` (and on `device`) for the block, then
    back in their own dtype and device. Exact both ways: float64 holds every float32, bfloat16 and float16
    value, so the model comes back bit for bit. No copy of the model: the memory is the cast model's alone
    (the original tensors are freed while it runs, unless something else holds them). `back=False`: left
    cast (a copy dropped after; a training run's steps have moved it anyway)."""
    tensors = _float_tensors(model, every=device is not None)
    before = [(t.dtype, t.device) for t in tensors]
    try:
        with torch.no_grad():
            for t in tensors:
                t.data = t.data.to(device=device or t.device, dtype=dtype if t.is_floating_point() else t.dtype)
        yield
    finally:
        if back:
            with torch.no_grad():
                for t, (old, where) in zip(tensors, before, strict=True):
                    t.data = t.data.to(device=where, dtype=old)


@contextlib.contextmanager
def cast_for_training(model: torch.nn.Module, dtype: torch.dtype, device: str | None = None) -> Iterator[None]:
    """The model's floating-point parameters and buffers in `dtype` (and on `device`) for a training run
    (an optimizer may move them, backward fills their gradients), then back as they were: their own values
    are kept on the host meanwhile (no copy on an accelerator), and their gradients put back. The others
    (a complex parameter the optimizer steps too, integer buffers) keep their dtype and come back as well."""
    tensors = _float_tensors(model, every=True)
    before = [(t.dtype, t.device) for t in tensors]
    kept = [t.detach().to("cpu", copy=True) for t in tensors]
    grads = {p: p.grad for p in model.parameters()}
    try:
        with torch.no_grad():
            for t in tensors:
                t.data = t.data.to(device=device or t.device, dtype=dtype if t.is_floating_point() else t.dtype)
        for p in model.parameters():
            p.grad = None
        yield
    finally:
        with torch.no_grad():
            for t, value, (old, where) in zip(tensors, kept, before, strict=True):
                t.data = value.to(device=where, dtype=old)
        for p, g in grads.items():
            p.grad = g


Placement = str
"""Where the reference ran: `whole` (the model cast on its device), `host` (cast and moved to the host),
`blockwise` (each module cast while it runs, on its device); training: `checkpointed` (the model cast on
its device, the activations of one repeated block at a time), `offloaded` (the model cast on its device,
the activations saved for the backward on the host)."""

PLACEMENT_TEXT = {
    "whole": "the model cast on its device",
    "host": "the model cast and moved to the host",
    "blockwise": "block by block along the module tree (each module cast while it runs)",
    "checkpointed": "block by block (the model cast on its device, the backward recomputing one block's activations at a time)",
    "offloaded": "with its activations on the host (the model cast on its device, what the backward needs brought back as it goes)",
    "streamed": "one module's parameters at a time (each cast while its forward or its backward needs it, each gradient taken as it comes)",
    "streamed_checkpointed": "one module's parameters at a time, the backward recomputing one block's activations at a time",
    "copy": "a cast copy of the model",  # reports written before schema 1.16
}


@dataclass(frozen=True)
class Room:
    """What the reference may add on the run's device beyond what the workload itself holds (its model and
    its activations), and the workload's own figures it is sized from."""

    extra: int | None
    """Bytes it may add; None: no bound but the device's free memory."""
    activations: int | None = None
    """The workload's activations (bytes at the model's precision; `rm.Footprint`); None: twice the model."""
    basis: str = "the device's free memory"
    """Where `extra` comes from, for the report."""

    @classmethod
    def beside(cls, footprint: rm.Footprint | None, limit: int | None = None, gradients: int = 0) -> Room:
        """The room beside a workload of `footprint` (and, training, `gradients` bytes of its parameters'
        gradients): `limit` (`--memory-limit`), else the doctor's margin (MARGIN of the workload's own, at
        least MARGIN_FLOOR); without a footprint, free memory only. Either is a bound: a way past it is not
        taken, and where none fits, a lower precision or the elementwise judgement, said so."""
        if footprint is None:
            return cls(limit, None, "--memory-limit" if limit is not None else "the device's free memory")
        # on CUDA the activations are the allocator's peak above the model in the eager pass: its gradients too
        measured = footprint.method.startswith("CUDA")
        own = int((footprint.model_mb + footprint.activations_mb) * 2**20) + (0 if measured else gradients)
        work = int(footprint.activations_mb * 2**20)
        if limit is not None:
            return cls(limit, work, "--memory-limit")
        margin = max(MARGIN_FLOOR, int(MARGIN * own))
        return cls(margin, work, f"the doctor's margin, half the workload's own {_size(own)}")


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def _cast_calls(calls: list[Call], dtype: torch.dtype, device: str | None) -> list[Call]:
    def cast(t: torch.Tensor) -> torch.Tensor:
        out = t.detach().to(device=device or t.device, dtype=dtype if t.is_floating_point() else t.dtype)
        out = out.clone() if out.data_ptr() == t.data_ptr() else out
        return out.requires_grad_(True) if t.requires_grad and out.is_floating_point() else out

    memo: dict[int, object] = {}  # a cache that several calls share stays shared in the copy
    return [Call(cast_copy(c.args, cast, memo), cast_copy(dict(c.kwargs), cast, memo)) for c in calls]


# ---------------------------------------------------------------------------------------------
# slices of the batch
# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Way:
    """One way the reference can run, and what it adds."""

    dtype: torch.dtype
    placement: Placement
    slices: int = 1
    device: int = 0
    """Bytes it allocates on the run's device (its cast parameters and its activations)."""
    host: int = 0
    """Bytes it needs on the host (`host`)."""
    disk: int = 0
    """Bytes it writes to a temporary file (`streamed`: the values and state its optimizer steps leave)."""

    def text(self) -> str:
        sliced = f", in {self.slices} slices of the batch" if self.slices > 1 else ""
        return f"{PLACEMENT_TEXT[self.placement]}{sliced}"


def _optimizer_moments(workload: Workload) -> int:
    """Tensors of a parameter's size the workload's optimizer keeps per parameter (SGD 0, with momentum 1,
    Adam 2): its factory run on a one-element parameter for one step. 2 (Adam's) when it cannot be told."""
    if workload.optimizer is None:
        return 0
    try:
        probe = torch.nn.Parameter(torch.zeros(4))
        probe.grad = torch.ones(4)
        optimizer = workload.optimizer([probe])
        optimizer.step()
        return sum(1 for v in optimizer.state[probe].values() if isinstance(v, torch.Tensor) and v.numel() == probe.numel())
    except Exception:  # noqa: BLE001 - a factory that wants the model's own parameters: Adam's, to be safe
        return 2


@dataclass(frozen=True)
class Plan:
    """What the ways of a run are sized from: the model, the workload's activations (`work`, bytes at the
    model's precision), the device, and for training: the optimizer's `moments` per parameter at the way's
    dtype; a `disposable` model's own values are not kept to put back; `stepped`: the optimizer steps before
    a later call (its values and state kept); `backward`: a call runs its backward (not so for one training
    step, whose gradients no result shows); `summed`: gradients summed over several calls without an
    optimizer (the streamed ways keep the sums in a file). Inference: the batch's `slices` to try."""

    model: torch.nn.Module
    work: int
    device: str
    train: bool
    moments: int = 0
    slices: tuple[int, ...] = ()
    disposable: bool = False
    stepped: bool = False
    backward: bool = True
    summed: bool = False


def _ways(dtype: torch.dtype, plan: Plan) -> list[Way]:
    """Every way a run in `dtype` may go, in the order they are tried (see the module doc), with what each
    allocates: on the device, the cast tensors less those they replace, plus the activations at `dtype`."""
    model, moments, disposable, stepped, summed = plan.model, plan.moments, plan.disposable, plan.stepped, plan.summed
    own, cast = _bytes(model), _bytes(model, dtype.itemsize)
    scale = dtype.itemsize / max(1, min((d.itemsize for d in _floating_dtypes(model)), default=4))
    work_d = int(plan.work * scale)
    accelerator = plan.device != "cpu"
    if plan.train:
        state = moments * cast  # the optimizer's state at `dtype` (Adam's two moments, SGD's none)
        kept = 0 if accelerator or disposable else own  # the model's own values kept while it runs (on the host)
        params = cast - own + cast + kept + state  # the parameters cast, and their gradients at `dtype` (the run's own)
        ways = [Way(dtype, "whole", 1, params + work_d)]
        blocks = repeated_blocks(model)
        if accelerator:  # what one block's backward brings back at a time stays on the device
            # on the host: every tensor the backward needs, the cast weights each layer saves included
            ways.append(Way(dtype, "offloaded", 1, params + work_d // max(2, len(blocks)), work_d + cast))
        if blocks:  # the activations outside the blocks, each block's input, one block's own
            share = block_share(model, blocks)
            ways.append(Way(dtype, "checkpointed", 1, params + int(work_d * (1 - share + 2 * share / len(blocks)))))
        # one module's parameters; with a backward, a fresh copy of one for an operation of the backward and
        # two gradients of a weight two modules share; with the optimizer's steps, one parameter's state, the
        # rest in a file; summing a gradient over the calls, the sum so far read back and the new one
        largest = _largest_module(model, dtype.itemsize)
        disk = (1 + moments) * cast if stepped else cast if summed else 0
        # (stepping: the value, its gradient, its state and the optimizer's temporaries of one parameter)
        per = 4 + 2 * moments if stepped else 5 if summed else 3
        streamed = (per if plan.backward else 1) * largest
        ways.append(Way(dtype, "streamed", 1, streamed + work_d, disk=disk))
        if blocks and plan.backward:  # and the blocks' activations one at a time; a frozen weight, filled again by a
            # block's recomputation, stays at `dtype` until the run ends (no gradient comes to free it)
            frozen = sum(p.numel() * dtype.itemsize for p in {id(p): p for p in model.parameters() if not p.requires_grad}.values())
            fewer = int(work_d * (1 - share + 2 * share / len(blocks)))
            ways.append(Way(dtype, "streamed_checkpointed", 1, streamed + frozen + fewer, disk=disk))
        if accelerator:
            ways.append(Way(dtype, "host", 1, 0, cast + own + work_d + state))
        return ways
    block = _largest_module(model, dtype.itemsize) - _largest_module(model)
    ways = [Way(dtype, "whole", 1, cast - own + work_d), Way(dtype, "blockwise", 1, block + work_d)]
    for n in plan.slices:
        ways += [Way(dtype, "whole", n, cast - own + work_d // n), Way(dtype, "blockwise", n, block + work_d // n)]
    if accelerator:
        ways.append(Way(dtype, "host", 1, 0, cast + work_d))
    return ways


def _tries(plan: Plan, low: bool) -> Iterator[tuple[torch.dtype, Way]]:
    """(dtype, way) in the order they are tried: float64's ways, then float32's (a bf16/fp16 model)."""
    for dtype in (torch.float64, torch.float32) if low else (torch.float64,):
        yield from ((dtype, way) for way in _ways(dtype, plan))


def _fits(way: Way, device: str, room: Room, work: int) -> tuple[bool, str | None]:
    """Whether `way` fits: what it allocates on the device against what is free and, beyond the workload's
    own activations, against the room; on the host, against what is free there. Why not, when it does not."""
    if way.host:
        free = free_bytes("cpu")
        if free is not None and way.host > free:
            return False, f"{_size(way.host)} needed on the host, {_size(free)} free"
    if way.disk:
        spare = disk_free()
        if spare is not None and 2 * way.disk > spare:
            return False, f"{_size(way.disk)} to write to a temporary file, {_size(spare)} free on its disk"
    free = free_bytes(device)
    if free is not None and way.device > FREE_SHARE * free:
        return False, f"{_size(way.device)} needed, {_size(free)} free (it may take {FREE_SHARE:.0%} of it)"
    beyond = way.device - work
    if room.extra is not None and beyond > room.extra:
        return False, f"{_size(max(0, beyond))} beyond the workload's own, {_size(room.extra)} allowed: {room.basis}"
    return True, None


class _DeltaRecorder:
    """The sink of the higher-precision run: each result's difference from eager's, kept (chunk by chunk
    into the store, at the rows of the batch its slice holds); the run's own results dropped as they come."""

    def __init__(self, eager: KeptResults, store: TensorStore) -> None:
        self.eager = dict(eager.named())
        self.store = store
        self.deltas: dict[str, Kept] = {}
        self.writers: dict[str, Any] = {}
        self.calls = 0
        self.rows: list[tuple[int, int]] | None = None
        """The rows of each call's batch the running slice holds (None: whole calls)."""
        self.problem: str | None = None
        """A result the slices cannot be written into eager's shape (its first dimension is not the batch's)."""

    def _record(self, name: str, high: torch.Tensor, rows: tuple[int, int] | None) -> None:
        e = self.eager.get(name)
        if e is None or not e.is_floating_point():
            return  # judged elementwise against eager
        start = 0
        if rows is None:
            if e.shape != tuple(high.shape):
                return
        else:
            shape = tuple(high.shape)
            if not e.shape or shape[1:] != e.shape[1:] or shape[0] != rows[1] - rows[0]:
                self.problem = self.problem or f"{name}: shape {list(shape)} is not rows {rows[0]}-{rows[1]} of {list(e.shape)}"
                return
            start = rows[0] * (e.numel // e.shape[0])
        hf = flat(high)
        kind = torch.float64 if e.flat_dtype == torch.float64 else torch.float32
        if name not in self.writers:
            self.deltas[name], self.writers[name] = self.store.writer(e.shape, kind, e.numel, hf.device)
        writer = self.writers[name]
        for s in range(0, hf.numel(), CHUNK):
            h = hf[s : s + CHUNK].double()
            writer.write_at(start + s, (h - e.chunk(start + s, h.numel(), h.device).double()).to(kind))

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        i = self.calls
        self.calls += 1
        rows = self.rows[i] if self.rows is not None else None
        for j, t in enumerate(iter_tensors(out)):
            self._record(f"call {i} output {j}", t, rows)
        if loss is not None:
            self._record(f"loss call {i}", loss, rows)

    def take_grads(self, model: Any) -> None:
        if isinstance(model, torch.nn.Module):
            for name, p in model.named_parameters():
                if p.grad is not None:
                    self.grad(name, p.grad)

    def grad(self, name: str, g: torch.Tensor) -> None:
        """A parameter's gradient after the run (the streamed way's, as it comes)."""
        self._record(f"grad {name}", g, None)


def _run_in(
    way: Way,
    model: torch.nn.Module,
    workload: Workload,
    calls: list[Call],
    sink: _DeltaRecorder,
    *,
    seed: int | None,
    train: bool,
    steps: bool,
    where: str = "cpu",
    disposable: bool = False,
    draws: Draws | None = None,
    replays: list[Any] | None = None,
) -> None:
    """The calls through the model with its floating-point parameters, buffers and inputs in `way.dtype`,
    each result turned into its difference from eager's by `sink`; the model comes back as it was (a
    `disposable` training model does not: it stays cast, its parameters stepped). With `draws`, each call
    draws eager's random numbers (`draws.Draws.replaying`, appended to `replays`: what they replayed, or
    why they could not)."""

    def replay(rows: list[tuple[int, int]] | None = None) -> Any:
        if draws is None:
            return None
        batches = [batch_of(c) or 0 for c in calls] if rows is not None else None
        made = draws.replaying(rows, batches, cut_short=len(calls) - 1 if train and steps else None)
        if replays is not None:
            replays.append(made)
        return made

    dtype = way.dtype
    device = "cpu" if way.placement == "host" else None
    default = _default_dtype(torch.float64 if dtype == torch.float64 else torch.get_default_dtype())
    high = dataclasses.replace(workload, model=model)

    def training_pass(optimizer: Any = None) -> None:
        cast = _cast_calls(calls, dtype, device)
        run_pass(model, high, cast, seed=seed, train=True, sink=sink, optimizer=optimizer, last_backward=not steps, draws=replay())

    if train and way.placement in ("streamed", "streamed_checkpointed"):
        factory = workload.optimizer if steps else None
        why = elementwise_optimizer(factory) if factory is not None and len(calls) > 1 else None
        if why is not None:
            raise NotStreamable(why)
        store = TensorStore(limit=0)  # what the optimizer's steps leave, on disk: the device has no room for it
        stream = Streamed(
            model,
            dtype,
            calls=len(calls),
            call=lambda: sink.calls,
            grad=sink.grad,
            optimizer=factory,
            store=store,
            budget=way.device or None,
        )
        blocks = checkpointed(repeated_blocks(model)) if way.placement == "streamed_checkpointed" else contextlib.nullcontext()
        try:
            with preserved_state(model) if not disposable else contextlib.nullcontext(), default, stream.running(), blocks:
                training_pass()
                stream.finish()
        finally:
            store.close()
        return
    if train:
        ways: Any = contextlib.nullcontext()
        if way.placement == "checkpointed":
            ways = checkpointed(repeated_blocks(model))
        elif way.placement == "offloaded":
            ways = saved_on_host(where)
        if disposable:  # its gradients from eager's steps go too: backward fills them anew at `dtype`
            for p in model.parameters():
                p.grad = None
        cast = cast_for_training(model, dtype, device) if not disposable else cast_in_place(model, dtype, device, back=False)
        with preserved_state(model) if not disposable else contextlib.nullcontext(), cast, default, ways:
            training_pass(workload.optimizer(model.parameters()) if steps and workload.optimizer is not None else None)
        return
    cast = cast_blockwise(model, dtype) if way.placement == "blockwise" else cast_in_place(model, dtype, device)
    with preserved_state(model), cast, default, torch.no_grad():
        if way.slices == 1:
            run_pass(model, high, _cast_calls(calls, dtype, device), seed=seed, train=False, sink=sink, draws=replay())
            return
        for index in range(way.slices):
            sliced, rows = slice_of(calls, way.slices, index)
            sink.calls, sink.rows = 0, rows
            run_pass(model, high, _cast_calls(sliced, dtype, device), seed=seed, train=False, sink=sink, draws=replay(rows))
            del sliced
            if sink.problem is not None:
                raise NotSliceable(sink.problem)


_OWN_FAILURES = ("blockwise", "checkpointed", "offloaded", "streamed", "streamed_checkpointed", "host")
"""Ways whose failure says nothing of the others (a module reading another's weight, a block whose
recomputation differs from its forward, a tensor the model keeps outside its parameters and buffers left
on the device)."""


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
    room: Room | None = None,
    placements: tuple[Placement, ...] | None = None,
    slices: tuple[int, ...] | None = None,
    random: bool = False,
    disposable: bool = False,
) -> Reference:
    """Run the calls at float64 (float32 for a bf16/fp16 model that cannot have a float64 run) and keep how
    far each result is from eager's (`eager`: its kept results; a `Sample` is emptied into a store);
    `steps`: as whole training steps, the workload's optimizer built over the model's parameters.

    The model itself is cast for the run and comes back as it was, so the caller lends a model nothing
    else runs meanwhile. Where it runs is the first way that fits `room` (see the module doc; default:
    free memory only); `placements` and `slices` restrict the ways tried (tests, a phase that knows).
    `random`: the caller found that the model draws random numbers (eager from another seed differs: the
    fix phase, the benchmark): unless eager's draws are replayed (`kept.draws`), it never runs on the host
    (the host's generator draws other numbers from the same seed) nor in slices. The accuracy bisection's
    per-module references do not look. `disposable`: the caller drops the model after (the benchmark's eager copy): a training run
    casts it without keeping its values to put back."""
    t0 = time.perf_counter()
    room = room or Room(None)
    kept = eager if isinstance(eager, KeptResults) else KeptResults.of(eager)
    store = kept.store
    low = bool(_floating_dtypes(model) & set(_LOW))
    work = room.activations if room.activations is not None else 2 * _bytes(model)
    counts = [] if train else [n for n in slice_counts(calls) if slices is None or n in slices]
    problems: list[str] = []
    failed: set[tuple[torch.dtype, str]] = set()
    sliceable: str | None = None  # why the batch cannot be sliced, once tried
    checked = False
    tried: set[tuple[torch.dtype, str, int]] = set()
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    moments = _optimizer_moments(workload) if steps else 0
    stepped = steps and workload.optimizer is not None and len(calls) > 1
    backward = not steps or len(calls) > 1  # the last call's backward feeds only a step no result shows
    summed = not steps and len(calls) > 1
    plan = Plan(model, work, device, train, moments, tuple(counts), disposable, stepped, backward, summed)
    replaying = kept.draws.replayable()  # eager's random numbers given to the run (until they cannot stand for its own)
    random = random or replaying
    if kept.draws.opaque is not None:
        problems.append(f"{NOT_REPLAYED} ({kept.draws.opaque}): drawn from the seed")
    queue = list(_tries(plan, low))
    while queue:
        dtype, way = queue.pop(0)
        if (placements is not None and way.placement not in placements) or (slices is not None and way.slices not in (*slices, 1)):
            continue
        if (dtype, "any") in failed or (dtype, way.placement) in failed or (way.slices > 1 and sliceable is not None):
            continue
        if random and way.placement == "host" and not replaying:
            failed.add((dtype, "host"))
            problems.append(f"not on the host: the model draws random numbers, and the host's differ from {device}'s")
            continue
        if random and way.slices > 1 and not replaying:  # each slice would draw the seed's first numbers
            if sliceable is None:
                sliceable = "the model draws random numbers, not replayed: each slice would draw the seed's first"
                problems.append(f"the batch cannot be cut into slices ({sliceable})")
            continue
        if (dtype, way.placement, way.slices) in tried:
            continue
        ok, why = _fits(way, device, room, work)
        if not ok:
            problems.append(f"a {_name(dtype)} run {way.text()} would not fit ({why})")
            continue
        if way.slices > 1 and not checked:
            checked = True
            sliceable = rows_independent(model, workload, calls, kept, way.slices, seed, kept.draws if replaying else None)
            if sliceable is not None:
                problems.append(f"the batch cannot be cut into slices ({sliceable})")
                continue
        tried.add((dtype, way.placement, way.slices))
        recorder = _DeltaRecorder(kept, store)
        replays: list[Any] = []
        base = cuda_mark(device) if cuda else 0
        try:
            _run_in(
                way, model, workload, calls, recorder, seed=seed, train=train, steps=steps, where=device,
                disposable=disposable, draws=kept.draws if replaying else None, replays=replays,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - an op without this dtype, out of memory: the next way, said so
            unreplayed = next((r.problem for r in replays if r.problem is not None), None)
            first = str(exc).splitlines()[0][:160] if str(exc) else ""
            # the disposable copy is cast and moved by the run: no way can start from eager's values (`streamed` can)
            ruined = disposable and train and not way.placement.startswith("streamed")
            problems.append(
                f"{NOT_REPLAYED} ({unreplayed}): "
                + ("the run's copy is spent, no way can start again" if ruined else "drawn from the seed")
                if unreplayed is not None
                else f"a {_name(dtype)} run {way.text()} failed: {type(exc).__name__}: {first}"
            )
            del recorder
            _release(device)
            if ruined:
                break
            if unreplayed is not None:  # the same way again, drawing its own numbers (not in slices if random)
                replaying, checked, sliceable = False, False, None
                tried.discard((dtype, way.placement, way.slices))
                queue.insert(0, (dtype, way))
            elif isinstance(exc, NotSliceable):
                sliceable = str(exc)
            elif not out_of_memory(exc):  # an op without this dtype fails anywhere; a way's own failure (_OWN_FAILURES) only there
                failed.add((dtype, way.placement if way.placement in _OWN_FAILURES else "any"))
            continue
        peak = cuda_peak_above(device, base) if cuda else None  # the allocator's peak above the way's start
        method = "float64_reference" if dtype == torch.float64 else "float32_reference"
        notes = []
        if way.placement != "whole" or way.slices > 1 or problems:
            notes.append(f"the {_name(dtype)} run went {way.text()}" + _before(problems))
        if steps:
            notes.append(STEP_NOTE)
        duration = round(time.perf_counter() - t0, 3)
        run = _run_record(method, way, room, work, duration, peak, problems)
        run.replayed_draws = len(set().union(*(r.used for r in replays))) if replaying else None
        kept.draws.close()  # eager's recorded draws: no longer needed
        note = "; ".join(notes) or None
        return Reference(kept, recorder.deltas, method, note, loose, duration, steps, placement=way.placement, store=store, run=run)
    kept.draws.close()  # eager's recorded draws: no longer needed
    note = "; ".join(problems) or "no higher precision than the model's"
    duration = round(time.perf_counter() - t0, 3)
    run = _run_record("elementwise", None, room, work, duration, None, problems)
    return Reference(kept, None, "elementwise", note + ": elementwise check against eager", loose, duration, store=store, run=run)


def _before(problems: list[str]) -> str:
    """` (the first way not taken, and how many more)`, or nothing."""
    if not problems:
        return ""
    more = f"; {len(problems) - 1} more way(s) not taken" if len(problems) > 1 else ""
    return f" ({problems[0]}{more})"


def _run_record(
    method: str, way: Way | None, room: Room, work: int, duration: float, peak: int | None, problems: list[str]
) -> rm.ReferenceRun:
    return rm.ReferenceRun(
        method=method,  # type: ignore[arg-type]
        placement=way.placement if way is not None else None,
        slices=way.slices if way is not None else 1,
        device_mb=round(way.device / 2**20, 1) if way is not None else None,
        beyond_workload_mb=round(max(0, way.device - work) / 2**20, 1) if way is not None else None,
        room_mb=round(room.extra / 2**20, 1) if room.extra is not None else None,
        room_basis=room.basis,
        device_peak_mb=round(peak / 2**20, 1) if peak is not None else None,
        duration_s=duration,
        not_taken=problems,
    )


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
