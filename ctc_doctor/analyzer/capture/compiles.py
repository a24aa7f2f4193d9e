"""What an unmodified script compiles, found rather than declared (`ctc-doctor run`).

`CompileRecorder` replaces `torch.compile` in the script's process (`nn.Module.compile` goes through
it too) with a wrapper that calls the real one and records what was compiled: the module or function,
its options, a snapshot of the module as it was before its first call (for the fix phase's copies),
and the inputs of its first call and of each later call with other shapes or dtypes, or other Python
numbers (a few values each; detached clones; a call whose tensors are too big keeps only their shapes). The compiled object works exactly as
before: calls are watched from a forward pre-hook on the OptimizedModule, which runs outside Dynamo,
or from a plain wrapper around a compiled function. `--backend` replaces the script's backend;
`--max-steps N` stops the script at the start of the primary object's call N+1. `run --compare` runs
the script once per strategy: the recorder then leaves the objects uncompiled (`eager`, still watched,
so the pace is measured the same way), replaces their `mode` or `dynamic`, compiles the `step` of
every optimizer the script creates (`optimizer`), compiles the module inside a compiled
DistributedDataParallel instead of the wrapper (`inner`), or swaps LoRA adapters into the first one's
place (`hotswap`, `capture/hotswap`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import linecache
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports.labels import short_path
from .. import torch_internals as ti
from ..readers.sources import classify_file
from ..running.copying import CopyError, copy_model, fresh_copy
from ..running.modules import describe_inputs, forward_arg_names
from ..running.tensors import iter_tensors
from .hotswap import lora_hotswap, lora_rank, prepare_peft_model
from .inputs import signature

MAX_RECORDED_CALLS = 8
"""Calls kept per compiled object: the first, then each one with a new input signature or new Python
numbers (`SCALAR_VALUES` per signature)."""
MAX_STARTS = 100_000
"""Call start times kept per compiled object (for its pace: the first call, then the steady period)."""
SCALAR_VALUES = 3
"""Calls kept per input signature when only their Python numbers differ (a float timestep, a step int):
the first value compiles, the second recompiles, the third shows whether automatic dynamic settled it."""
MAX_CALL_BYTES = 256 * 2**20
"""A call whose tensors are bigger is kept as shapes and dtypes only."""


class StopScript(BaseException):
    """Raised into the script to end it (`--max-steps`, a signal); a BaseException so that the script's
    own `except Exception` does not swallow it."""


@dataclass
class RecordedCall:
    """One call of a compiled object, as it was made."""

    args: tuple[Any, ...] | None
    """Detached copies (None when the call was too big: see `description`)."""
    kwargs: dict[str, Any] | None
    grad_enabled: bool
    signature: str
    description: str
    index: int
    """Which call of the object it was (0 = first)."""
    scalars: tuple[int | float, ...] = ()
    """The Python numbers among its arguments (Dynamo bakes each value into the graph)."""
    autocast: tuple[str, torch.dtype] | None = None
    """(device type, dtype) of the autocast the call ran under, None without."""


def _scalars(value: Any) -> tuple[int | float, ...]:
    """The Python ints and floats in the arguments, in order (bools are flags, kept by `signature`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(x for v in value for x in _scalars(v))
    if isinstance(value, dict):
        return tuple(x for v in value.values() for x in _scalars(v))
    return ()


@dataclass
class WatchedObject:
    """One `torch.compile` of the script, watched while it runs (its report row: `models.CompiledObject`)."""

    name: str
    kind: str
    """module (torch.compile(model)), method (model.compile()), function."""
    module: torch.nn.Module | None
    """The module, for module and method kinds."""
    options: dict[str, str]
    calls: int = 0
    literal_options: dict[str, Any] = field(default_factory=dict)
    """The compile's keyword arguments whose values are plain data (`mode`, `dynamic`, `fullgraph`, an
    `options` dict of plain values), as given: what compiling its module again passes (`options` is text)."""
    recorded: list[RecordedCall] = field(default_factory=list)
    pristine: torch.nn.Module | None = None
    """A copy taken when it was compiled, before its first call (when asked for)."""
    notes: list[str] = field(default_factory=list)
    arg_names: list[str] | None = None
    """function kind: its parameter names, to name the recorded inputs (`x, w`, not `arg0, arg1`)."""
    attr: str | None = None
    """method kind: the compiled method (`forward`; `__call__` for transformers' generate compile;
    `_call_impl` for `model.compile()`)."""
    site: str | None = None
    """Where torch.compile was called: the first frame outside torch and ctc-doctor (`train.py:12`)."""
    library: str | None = None
    """The installed package whose code called torch.compile (`transformers`); None: the user's code."""
    driver: str | None = None
    """What called it first, when a library loop drives it: `generate` (transformers' generation)."""
    relation: str | None = None
    """How it relates to another compile of the run (a double or nested compile), one sentence."""
    starts: list[float] = field(default_factory=list)
    """`time.perf_counter()` at the start of each call (the first MAX_STARTS)."""
    losses: dict[int, Any] = field(default_factory=dict)
    """`run --compare`: the loss its call returned (a detached one-element tensor) at calls 0, 1, 2, 4, 8..."""
    lora_rank: int | None = None
    """The largest LoRA rank its module held at any call (an adapter unloaded before the end still counts)."""
    adapters: int = 0
    """How many adapters its module held at the last look (`peft_config`), to look again when it changes."""
    backward: bool = False
    """A backward ran through what one of its calls returned: the script trains it (`_watch_backward`)."""
    dropout: bool = False
    """Its module holds a training-mode dropout with p > 0 (compiled code draws other random numbers)."""
    triggers: dict[int, str] = field(default_factory=dict)
    """Call index -> the script line that made it and the context in force, for the first call, each call
    whose context (grad mode, autocast, train/eval) changed and each new input signature: where a
    recompile was triggered (`Recompile.trigger`)."""
    context: tuple[Any, ...] | None = None

    def loss_values(self) -> dict[int, float]:
        return {i: float(t) for i, t in self.losses.items()}

    def pace(self) -> tuple[float | None, float | None, float | None, int]:
        """(seconds from the first call to the second: its compile included; the median milliseconds
        from one call to the next over the later half of the run, once recompiles settled; their IQR in
        milliseconds; how many periods that half holds). The period is the script's whole step (a decoding
        step, a training step), not the compiled call alone."""
        if len(self.starts) < 2:
            return None, None, None, 0
        periods = [b - a for a, b in zip(self.starts[1:], self.starts[2:], strict=False)]
        steady = periods[len(periods) // 2 :]
        if not steady:
            return self.starts[1] - self.starts[0], None, None, 0
        q = statistics.quantiles(steady, n=4, method="inclusive") if len(steady) >= 2 else [steady[0]] * 3
        return self.starts[1] - self.starts[0], statistics.median(steady) * 1e3, (q[2] - q[0]) * 1e3, len(steady)

    def span_s(self) -> float | None:
        """Seconds from its first call's start to its last call's start, plus one steady period: the time
        its calls took, every compile and recompile included (None: fewer than 2 calls, or starts not all kept)."""
        starts = self.starts[: self.calls]  # --max-steps: the call it stopped at is not one
        if len(starts) < 2 or len(starts) != self.calls:
            return None
        _, period_ms, _, _ = self.pace()
        last = period_ms / 1e3 if period_ms is not None else starts[-1] - starts[-2]
        return starts[-1] - starts[0] + last

    @property
    def what(self) -> str:
        """`LlamaForCausalLM.forward`, `Block`, `fn`: what was compiled, as the user wrote it."""
        return f"{self.name}.{self.attr}" if self.kind == "method" and self.attr else self.name


def _parameter_names(fn: Any) -> list[str] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class CompileRecorder:
    """Watches a script's `torch.compile` calls and the calls of what they return."""

    def __init__(
        self,
        *,
        backend: str | None = None,
        max_steps: int | None = None,
        snapshot: bool = False,
        on_primary_call: Callable[[int], None] | None = None,
        strategy: str | None = None,
        marks: dict[str, list[int]] | None = None,
        losses: bool = False,
        target_rank: int | None = None,
    ) -> None:
        self.backend = backend
        self.strategy = strategy
        """`run --compare`'s way of compiling (`vocabulary.STRATEGIES`); None or `default`: the script's own."""
        self.marks = marks or {}
        """`run --compare mark-dynamic`: the primary object's arguments and dims marked dynamic before each call."""
        self.target_rank = target_rank
        """`run --compare hotswap`: the LoRA rank to prepare each model for (the script's own run's largest)."""
        self.hotswap_slots: dict[int, Any] = {}
        """`run --compare hotswap`: each prepared PEFT model's slot (`capture/hotswap`)."""
        self.losses = losses
        """Keep the losses the objects return at calls 0, 1, 2, 4, 8... (`run --compare`)."""
        self.max_steps = max_steps
        self.snapshot = snapshot
        self.on_primary_call = on_primary_call or (lambda index: None)
        self.objects: list[WatchedObject] = []
        self.notes: list[str] = []
        self.closed = False
        """True once the script ended: later calls (the doctor's) are not counted."""
        self.stopped_after: int | None = None
        """The primary object's call count when --max-steps stopped the script."""
        self.frames: ti.FrameEntries | None = None
        """Where the primary object's calls count the frames they enter (`ti.counting_frames`), if anywhere."""

    @property
    def primary(self) -> WatchedObject | None:
        """The analysis target: the first compiled module that ran (or, failing one, the first compiled
        object that ran); before any ran, the first compiled module. A compile that Dynamo traced inside
        another (a nested compile) never runs on its own, so the outer one is analyzed."""
        ran = [o for o in self.objects if o.calls]
        for pool in (ran, self.objects):
            found = next((o for o in pool if o.module is not None), pool[0] if pool else None)
            if found is not None:
                return found
        return None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """torch.compile replaced for the block; the calls are watched until it ends (the doctor's own
        calls of the model afterwards are not the script's)."""
        self.closed = False
        try:
            with (
                ti.torch_compile_replaced(self._wrap),
                self._optimizers_compiled(self.strategy == "optimizer"),
                lora_hotswap(self.strategy == "hotswap", self.target_rank, self._note, self.hotswap_slots),
            ):
                yield
        finally:
            self.closed = True

    @contextlib.contextmanager
    def _optimizers_compiled(self, on: bool) -> Iterator[None]:
        """`--compare optimizer`: every optimizer the script creates gets `opt.step = torch.compile(opt.step)`
        (the recipe of PyTorch's compiled-optimizer tutorial), set when its base `__init__` returns."""
        if not on:
            yield
            return
        base = torch.optim.Optimizer
        original = base.__init__

        @functools.wraps(original)
        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            original(opt, *args, **kwargs)
            if "step" not in vars(opt):  # a subclass calling super().__init__ twice keeps one compile
                opt.step = torch.compile(opt.step)

        base.__init__ = init  # type: ignore[method-assign]
        try:
            yield
        finally:
            base.__init__ = original  # type: ignore[method-assign]

    # --- torch.compile -------------------------------------------------------------------------

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def compile_(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            if self.backend is not None:
                kwargs = self._override(kwargs)
            kwargs = self._strategy(kwargs)
            if model is None:  # the decorator form: torch.compile(...) returns a decorator, which calls this again
                if self.strategy == "eager":
                    return lambda fn: compile_(fn, *args, **kwargs)
                return original(None, *args, **kwargs)
            if self.strategy == "eager":
                return self._watch(model, model, kwargs)  # not compiled: watched as it is
            if self.strategy == "inner" and isinstance(model, torch.nn.parallel.DistributedDataParallel):
                watched = self._watch(model, model, kwargs)  # the wrapper runs eagerly, watched as it is
                model.module = original(model.module, *args, **kwargs)  # DDP(torch.compile(model))
                self._note(
                    "--compare inner: the module inside DistributedDataParallel was compiled instead of the wrapper "
                    "(DDP(torch.compile(model))); its parameter names gain `_orig_mod.`"
                )
                return watched
            if (
                self.strategy == "submodules"
                and isinstance(model, torch.nn.Module)
                and (inside := _compiled_inside(model, original, args, kwargs))
            ):
                self._note(
                    f"--compare submodules: {', '.join(inside)} of {type(model).__name__} compiled instead of it "
                    f"(`self.{inside[0]} = torch.compile(self.{inside[0]})`); its own code runs eagerly"
                )
                return self._watch(model, model, kwargs)
            if self.strategy == "hotswap":
                prepare_peft_model(model, self.target_rank, self._note, self.hotswap_slots)
            compiled = original(model, *args, **kwargs)
            return self._watch(model, compiled, kwargs)

        return compile_

    def _override(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = {**kwargs, "backend": self.backend}
        if self.backend != "inductor":
            dropped = [k for k in ("mode", "options") if kwargs.pop(k, None) is not None]
            if dropped:
                self._note(f"--backend {self.backend}: the script's {' and '.join(dropped)} for inductor were dropped.")
        return kwargs

    def _strategy(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The script's torch.compile options under `run --compare`'s strategy."""
        if self.strategy in (None, "default", "eager", "optimizer", "mark-dynamic", "inner", "submodules", "hotswap"):
            return kwargs
        if self.strategy in ("dynamic", "static"):
            return {**kwargs, "dynamic": self.strategy == "dynamic"}
        kwargs = {k: v for k, v in kwargs.items() if k != "options"}  # torch.compile takes a mode or options
        return {**kwargs, "mode": self.strategy}

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _watch(self, model: Any, compiled: Any, kwargs: dict[str, Any]) -> Any:
        options = {k: _option_text(v) for k, v in kwargs.items()}
        options.setdefault("backend", "inductor")
        literal = {k: v for k, v in kwargs.items() if k != "backend" and _plain(v)}
        if isinstance(model, torch.nn.Module):
            obj = WatchedObject(type(model).__name__, "module", model, options)
        elif isinstance(getattr(model, "__self__", None), torch.nn.Module):
            module = model.__self__  # nn.Module.compile() compiles its bound _call_impl
            attr = getattr(model, "__name__", None)
            attr = "__call__" if attr in ("_call_impl", "_wrapped_call_impl") else attr  # Module.__call__ is _wrapped_call_impl
            obj = WatchedObject(type(module).__name__, "method", module, options, attr=attr)
        else:
            name = getattr(model, "__qualname__", None) or getattr(model, "__name__", None) or type(model).__name__
            obj = WatchedObject(name.rsplit("<locals>.", 1)[-1], "function", None, options, arg_names=_parameter_names(model))
        obj.site, obj.library = _caller(sys._getframe(2))
        obj.literal_options = literal
        if self.snapshot and obj.module is not None:
            inner = obj.module.module if isinstance(obj.module, torch.nn.parallel.DistributedDataParallel) else obj.module
            try:
                obj.pristine = copy_model(inner)  # DDP: its module (the wrapper needs the process group)
            except CopyError as exc:
                obj.notes.append(f"{exc}: the fix phase copies the model as the script left it.")
        self.objects.append(obj)
        # the bookkeeping is never traced: an outer compile reaching this one (transformers' generate
        # compile over `model.forward = torch.compile(model.forward)`) must not trace ctc-doctor's code
        record, keep = ti.disable(self._called), ti.disable(self._returned)
        if obj.module is not None:
            obj.dropout = any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in obj.module.modules())
        if ti.is_optimized_module(compiled) or (compiled is model and isinstance(model, torch.nn.Module)):
            compiled.register_forward_pre_hook(lambda mod, a, k: record(obj, a, k), with_kwargs=True)
            compiled.register_forward_hook(lambda mod, a, out: keep(obj, out))  # the frame count, the loss, a backward
            return compiled

        @functools.wraps(compiled)
        def watched(*args: Any, **kw: Any) -> Any:
            if torch.compiler.is_compiling():
                return compiled(*args, **kw)
            record(obj, args, kw)
            out = compiled(*args, **kw)
            keep(obj, out)
            return out

        ti.skip_frame(getattr(watched, "__code__", None))  # skipped like torch's own compile wrapper, whoever compiles around it
        return watched

    # --- its calls -----------------------------------------------------------------------------

    def _called(self, obj: WatchedObject, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.closed:
            return
        index = obj.calls
        if len(obj.starts) < MAX_STARTS:
            obj.starts.append(time.perf_counter())
        obj.calls += 1  # counted first: the primary is the first compiled object that runs
        if obj is self.primary:
            if self.max_steps is not None and index >= self.max_steps:
                obj.calls -= 1
                self.stopped_after = index
                raise StopScript(f"--max-steps {self.max_steps}")
            self.on_primary_call(index)
            if self.marks:
                self._mark(obj, args, kwargs)
            if self.frames is not None:
                self.frames.begin(index)  # until it returns (`_returned`), or the next call
        if index == 0:
            obj.driver = _driver(sys._getframe(1))
        self._adapters(obj)
        cast = next(((d, torch.get_autocast_dtype(d)) for d in ("cuda", "cpu") if torch.is_autocast_enabled(d)), None)
        autocast = cast is not None
        context = (torch.is_grad_enabled(), autocast, getattr(obj.module, "training", None))
        if context != obj.context:
            obj.context = context
            obj.triggers[index] = _trigger(sys._getframe(1), context)
        if len(obj.recorded) >= MAX_RECORDED_CALLS:
            return
        sig, scalars = signature((args, kwargs)), _scalars((args, kwargs))
        same = [r for r in obj.recorded if r.signature == sig]
        if same and (len(same) >= SCALAR_VALUES or any(r.scalars == scalars for r in same)):
            return  # a new Python number is kept a few times: enough for its recompiles to replay
        obj.triggers.setdefault(index, _trigger(sys._getframe(1), context))
        names = forward_arg_names(obj.module) if obj.module is not None else obj.arg_names
        description = describe_inputs(args, kwargs, names)
        size = sum(t.numel() * t.element_size() for t in iter_tensors((args, kwargs)))
        if size > MAX_CALL_BYTES:
            obj.recorded.append(RecordedCall(None, None, torch.is_grad_enabled(), sig, description, index, scalars, cast))
            return
        copied_args, copied_kwargs = fresh_copy(tuple(args)), fresh_copy(dict(kwargs))
        obj.recorded.append(RecordedCall(copied_args, copied_kwargs, torch.is_grad_enabled(), sig, description, index, scalars, cast))

    @staticmethod
    def _adapters(obj: WatchedObject) -> None:
        """The largest LoRA rank so far, looked at again whenever the module's adapters change in number."""
        held = len(getattr(obj.module, "peft_config", None) or {})
        if held != obj.adapters:
            obj.adapters = held
            rank = lora_rank(obj.module)
            obj.lora_rank = max(rank, obj.lora_rank or 0) if rank else obj.lora_rank

    def _mark(self, obj: WatchedObject, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """`mark-dynamic`: the arguments' varying dims marked before the call (a dim of size 0 or 1 is left:
        torch specializes those)."""
        names = (forward_arg_names(obj.module) if obj.module is not None else obj.arg_names) or []
        for name, dims in self.marks.items():
            value = kwargs.get(name)
            if value is None and name in names and names.index(name) < len(args):
                value = args[names.index(name)]
            if isinstance(value, torch.Tensor):
                for d in dims:
                    if d < value.dim() and value.shape[d] > 1:
                        ti.mark_dynamic(value, d)

    def _returned(self, obj: WatchedObject, out: Any) -> None:
        """The primary's call ends its frame count; keep the loss of calls 0, 1, 2, 4, 8... (a power of two,
        so that runs of any length share some)."""
        if self.frames is not None and obj is self.primary:
            self.frames.end()
        if not obj.backward and not self.closed:
            _watch_backward(obj, out)
        if not self.losses:
            return
        index = obj.calls - 1
        if self.closed or index < 0 or index & (index - 1) or index in obj.losses:
            return
        loss = _loss_of(out)
        if loss is not None:
            obj.losses[index] = loss.detach().float().clone()

    # --- how the compiles relate ---------------------------------------------------------------

    def relate(self) -> list[str]:
        """Name the run's double and nested compiles (sets each object's `relation`); one note each."""
        notes: list[str] = []
        by_module: dict[int, list[WatchedObject]] = {}
        for obj in self.objects:
            if obj.module is not None:
                by_module.setdefault(id(obj.module), []).append(obj)
        for group in by_module.values():
            if len(group) > 1:
                notes.append(_double_compile(group))
        ran = [o for o in self.objects if o.calls]
        for obj in self.objects:
            if obj.calls or not ran or obj.relation:
                continue
            outer = next((o for o in ran if o is not obj), None)
            inside = f"`{outer.what}`'s compile" if outer is not None and len(ran) == 1 else "another compile"
            obj.relation = f"never ran on its own: Dynamo traced it inside {inside} (a nested compile), whose options apply"
            notes.append(
                f"`{obj.what}` (compiled at {obj.site or 'an unknown line'}) {obj.relation}; the analysis is about "
                f"`{self.primary.what if self.primary else '?'}`, the compile that runs. Compile the outer one only."
            )
        return notes


_DRIVERS = (("transformers" + os.sep + "generation" + os.sep, "generate"),)
_NOT_THE_CALLER = ("torch", "ctc_doctor", "python", "stdlib")
"""Libraries (`readers.sources.classify_file`) whose frames are not where a compile was asked for:
torch's own wrappers, ctc-doctor's recorder, frozen and standard-library frames (functools, contextlib)."""


def _caller_frame(frame: Any) -> tuple[Any, str | None]:
    """The first frame outside torch, ctc-doctor and the standard library, and the package it belongs to
    (None: the user's own code, the zoo's included); (None, None) when there is none."""
    while frame is not None:
        own, library = classify_file(frame.f_code.co_filename)
        if own or library not in _NOT_THE_CALLER:
            return frame, None if own else library
        frame = frame.f_back
    return None, None


WRAPPER_DEPTH = 3
"""How many frames of a library may stand between the user's `torch.compile(...)` line and torch's compile
for the compile to stay the user's (Lightning wraps `torch.compile` to capture its arguments)."""


def _through_wrapper(found: Any, library: str | None) -> Any:
    """The user's frame whose line calls compile, when `found` (a library's frame) is only a wrapper that a
    framework put around `torch.compile` (`lightning/fabric/wrappers.py`): the compile is the user's. None
    when the library compiles on its own account (its own code calls it, as `generate` does)."""
    frame = found.f_back
    for _ in range(WRAPPER_DEPTH):
        if frame is None:
            return None
        own, lib = classify_file(frame.f_code.co_filename)
        if own:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
            return frame if "compile(" in line else None
        if lib != library:
            return None
        frame = frame.f_back
    return None


def _caller(frame: Any) -> tuple[str | None, str | None]:
    """`_caller_frame` as `train.py:12`, and its package (None when the user's own line made the compile,
    through a framework's wrapper of `torch.compile` or not)."""
    found, library = _caller_frame(frame)
    if found is None:
        return None, None
    if library is not None:
        user = _through_wrapper(found, library)
        if user is not None:
            found, library = user, None
    return f"{short_path(found.f_code.co_filename, width=10_000)}:{found.f_lineno}", library


def _trigger(frame: Any, context: tuple[Any, ...]) -> str:
    """`train.py:24 in estimate_loss, no_grad`: the script's line that made the call, and what was in force."""
    found, _ = _caller_frame(frame)
    where = f"{short_path(found.f_code.co_filename, width=10_000)}:{found.f_lineno} in {found.f_code.co_name}" if found is not None else "?"
    grad, autocast, training = context
    states = [s for s, on in (("no_grad", not grad), ("autocast", autocast), ("eval", training is False)) if on]
    return ", ".join([where, *states])


def _driver(frame: Any) -> str | None:
    """A library loop that drives the first call (`generate`), found between here and the user's code."""
    while frame is not None and not classify_file(frame.f_code.co_filename)[0]:
        path = frame.f_code.co_filename
        found = next((name for marker, name in _DRIVERS if marker in path), None)
        if found:
            return found
        frame = frame.f_back
    return None


def _double_compile(group: list[WatchedObject]) -> str:
    """One module compiled more than once: the compile of its call (or the module) wraps that of its forward."""
    outer_first = sorted(group, key=lambda o: o.attr == "forward")
    outer, inner = outer_first[0], outer_first[-1]
    by = f"{outer.library}'s" if outer.library else "a second"
    fix = f"drop the torch.compile at {inner.site or 'the first line'}"
    if outer.library == "transformers":
        fix += " or turn transformers' compile off (`generate(..., disable_compile=True)`, or set it in `model.generation_config`)"
    text = (
        f"{group[0].name} is compiled twice: `{inner.what}` at {inner.site or '?'}, and `{outer.what}` by {by} "
        f"torch.compile at {outer.site or '?'}, which traces through the first. Keep one: {fix}."
    )
    outer.relation = f"wraps `{inner.what}` (compiled at {inner.site or '?'}): a double compile"
    inner.relation = f"wrapped by `{outer.what}` (compiled at {outer.site or '?'}): a double compile"
    return text


def _loss_of(out: Any) -> torch.Tensor | None:
    """The loss a call returned: a one-element float tensor, as it is, as `.loss` / `["loss"]`, or first in
    a tuple; None when it returned none."""
    if isinstance(out, dict) or hasattr(out, "loss"):
        out = out.get("loss") if isinstance(out, dict) else out.loss
    elif isinstance(out, (tuple, list)) and out:
        out = out[0]
    if isinstance(out, torch.Tensor) and out.numel() == 1 and out.is_floating_point():
        return out
    return None


def _compiled_inside(model: torch.nn.Module, compile_: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> list[str]:
    """`run --compare submodules`: each direct child module holding parameters compiled in place, with the
    script's own options, instead of `model` (a LightningModule's `self.net = torch.compile(self.net)`):
    the names compiled, none when the model has no such child (it is then compiled whole)."""
    names = [name for name, child in model.named_children() if any(True for _ in child.parameters())]
    for name in names:
        setattr(model, name, compile_(getattr(model, name), *args, **kwargs))
    return names


def _plain(value: Any) -> bool:
    """Plain data, safe to pass to torch.compile again: str, numbers, bools, None, dicts and lists of them."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return False


def _option_text(value: Any) -> str:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return str(value)
    return getattr(value, "__name__", None) or type(value).__name__


def _watch_backward(obj: WatchedObject, out: Any) -> None:
    """Mark `obj.backward` when a backward reaches what this call returned: a pre-hook on the autograd node
    of its first output that has one (on the node, outside any compiled code: no tensor of the script's
    gains a hook, so Dynamo sees the same inputs; the node and its hook go with the graph)."""
    node = next((t.grad_fn for t in iter_tensors(out) if t.grad_fn is not None), None)
    if node is None:
        return

    def reached(grad_outputs: Any) -> None:
        obj.backward = True

    node.register_prehook(reached)
