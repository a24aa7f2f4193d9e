"""Running the workload: one call (the same code for the analysis, `fix` and the benchmark), the
loss of a training call, and the model state a run must leave as it found it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ...workload import Call, Workload
from .copying import replayable
from .settings import RunSettings
from .tensors import detached, is_on, iter_tensors, map_tensors


def loss_of(output: Any) -> torch.Tensor | None:
    """`output.loss`, else the sum of the output tensors that require grad; None when there are none."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    parts = [t.float().sum() for t in iter_tensors(output) if t.is_floating_point() and t.requires_grad]
    return torch.stack(parts).sum() if parts else None


def default_loss(output: Any) -> torch.Tensor:
    loss = loss_of(output)
    if loss is None:
        raise RuntimeError("--train: the output has no tensor that requires grad; pass Workload(loss_fn=...)")
    return loss


class Sink(Protocol):
    """What a run's results go to, call by call: a `Sample` keeps copies of them; a numerics judgement
    (`numerics.Judgement`) compares each with the reference as it comes and keeps only the statistics."""

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        """One call's output and, training, its loss (in call order)."""

    def take_grads(self, model: Any) -> None:
        """After the run (training without an optimizer): the parameters' gradients."""


@dataclass
class Sample:
    """What one run produced, kept: each call's output tensors (detached copies) and, when training,
    each call's loss and every parameter's gradient after the run (the run's own: gradients are cleared
    before it). Eager's own run is kept so (the reference every candidate is judged against); a
    candidate is judged as it runs instead (`numerics.Judgement`)."""

    outputs: list[list[torch.Tensor]] = field(default_factory=list)
    losses: list[torch.Tensor] = field(default_factory=list)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        self.outputs.append(detached(out))
        if loss is not None:
            self.losses.append(loss.detach().clone())

    def take_grads(self, model: Any) -> None:
        self.grads = grads_of(model)


class PerCall(Protocol):
    """What each call of a pass runs under (`draws.Draws`' recording or replaying)."""

    def call(self, index: int) -> contextlib.AbstractContextManager[None]: ...


def clear_grads(model: Any) -> None:
    """No gradient on the model's parameters (a sampled training run keeps its own; `preserved_state` puts them back)."""
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            p.grad = None


def grads_of(model: Any) -> dict[str, torch.Tensor]:
    """Parameter name -> a copy of its gradient (parameters without one are left out)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def run_call(
    fn: Any,
    workload: Workload,
    call: Call,
    index: int,
    *,
    seed: int | None,
    train: bool,
    model: Any = None,
    sample: Sink | None = None,
    optimizer: Any = None,
    backward: bool = True,
    draws: PerCall | None = None,
) -> Any:
    """Call `index` of the workload through `fn`: `before_call`, the seed, the call, and backward when
    training (then `optimizer.step()` and `zero_grad()` when given: a whole training step); without
    `backward`, training's loss only. `draws`: what the call runs under, its random draws recorded or
    replayed (`draws.Draws`).

    `model` is what `before_call` receives (default: the workload's model; a copy when `fn` runs one).
    `sample` receives the call's outputs and loss.
    """
    if workload.before_call is not None:
        workload.before_call(workload.model if model is None else model, index)
    with seeded(seed + index if seed is not None else None), draws.call(index) if draws is not None else contextlib.nullcontext():
        return _call(fn, workload, call, train=train, sample=sample, optimizer=optimizer, backward=backward)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Every generator (CPU, and each CUDA device already in use) seeded with `seed` for the block, then
    put back as it was: two runs of a call from the same seed draw the same random numbers (dropout,
    rand), and the user's own random stream goes on as if the doctor had not called anything. None: as is."""
    if seed is None:
        yield
        return
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()  # an idle CUDA is not woken (nor its seed queued)
    devices = list(range(torch.cuda.device_count())) if cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.random.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.manual_seed_all(seed)
        yield


def _call(fn: Any, workload: Workload, call: Call, *, train: bool, sample: Sink | None, optimizer: Any, backward: bool = True) -> Any:
    out = fn(*call.args, **dict(call.kwargs))
    loss = None
    if train and torch.is_grad_enabled():  # a call made under no_grad (a script's evaluation) runs no backward
        loss = workload.loss_fn(out) if workload.loss_fn is not None else default_loss(out)
        if backward:
            loss.backward()
        if backward and optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    if sample is not None:
        sample.add(out, loss)
    return out


def run_pass(
    fn: Any,
    workload: Workload,
    calls: list[Call],
    *,
    seed: int | None,
    train: bool,
    model: Any = None,
    collect: bool = False,
    step: Callable[[], None] | None = None,
    optimizer: Any = None,
    sink: Sink | None = None,
    last_backward: bool = True,
    draws: PerCall | None = None,
) -> Sample:
    """Every call in order (one benchmark pass); with `collect`, what the pass produced: each call's
    detached outputs (copies: under CUDA graphs the next replay overwrites an output) and, training, its
    losses and gradients (no gradients with an `optimizer`: each step consumes them). With `sink`, the
    results go there call by call instead (a judgement compares each before the next call runs). `step`
    runs before each call (a CUDA graph step mark: each call is one iteration). Without `last_backward`, the
    last call's loss is taken but not its backward, nor its step (the higher-precision reference's steps:
    what they would change no result shows). `draws`: each call's random draws recorded (eager's pass once
    more, `numerics.record_draws`) or replayed (the reference's run; `draws.Draws`)."""
    sample = Sample()
    target: Sink | None = sink if sink is not None else (sample if collect else None)
    owner = model if model is not None else fn
    if target is not None and train:
        clear_grads(owner)
    replayed = replayable(calls)
    for i, call in enumerate(replayed):
        if step is not None:
            step()
        backward = last_backward or i < len(replayed) - 1
        run_call(
            fn, workload, call, i, seed=seed, train=train, model=model, sample=target, optimizer=optimizer, backward=backward, draws=draws
        )
    if target is not None and train and optimizer is None:
        target.take_grads(owner)
    return sample


def grad_mode(settings: RunSettings) -> contextlib.AbstractContextManager[Any]:
    """The grad mode the analysis's and the fix checks' calls run in (`RunSettings.grad`)."""
    return torch.set_grad_enabled(settings.grad) if settings.grad is not None else contextlib.nullcontext()


def to_device(value: Any, device: str | None) -> Any:
    """A call's inputs with every tensor moved to `device` (None, or every tensor there already: the inputs
    themselves, their containers not rebuilt)."""
    if device is None:
        return value
    want = torch.device(device)
    if all(is_on(t, want) for t in iter_tensors(value)):
        return value
    return map_tensors(value, lambda t: t.to(device))


def calls_on(workload: Workload, device: str | None) -> list[Call]:
    """The workload's calls in order, their tensors on `device` (None: where the builder put them): how
    every process that runs the workload (the analysis, a trial's child, the arms' child) places them."""
    return [Call(to_device(c.args, device), to_device(dict(c.kwargs), device)) for c in workload.calls()]


@contextlib.contextmanager
def preserved_state(model: torch.nn.Module, parameters: bool = False) -> Iterator[None]:
    """Analysis and trials run the user's modules (backward included): put grads and buffers back
    afterwards; with `parameters` (training steps with an optimizer), the parameters' values too."""
    # backward accumulates into .grad in place: keep copies, not references
    grads = {p: (p.grad.detach().clone() if p.grad is not None else None) for p in model.parameters()}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    values = {p: p.detach().clone() for p in model.parameters()} if parameters else {}
    try:
        yield
    finally:
        with torch.no_grad():
            for p, value in values.items():
                p.copy_(value)
            for p, g in grads.items():
                p.grad = g
            for name, b in model.named_buffers():
                if name in buffers and buffers[name].shape == b.shape:
                    b.copy_(buffers[name])


@contextlib.contextmanager
def lines_run(files: Collection[str]) -> Iterator[set[tuple[str, int]]]:
    """(file, line) of every line of `files` run in the block, on this thread, and (file, -first line) of
    each of their functions that ran (the eager pass's watched break lines; the accuracy bisection's
    compiled-only lines). Only frames of those files get line events, so the cost elsewhere is one check
    per Python call; the trace function in place before (a debugger, coverage) is put back afterwards."""
    seen: set[tuple[str, int]] = set()

    def local(frame: Any, event: str, _: Any) -> Any:
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def on_call(frame: Any, event: str, _: Any) -> Any:
        if frame.f_code.co_filename not in files:
            return None
        seen.add((frame.f_code.co_filename, -frame.f_code.co_firstlineno))  # the function ran
        return local

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield seen
    finally:
        sys.settrace(previous)
