"""Eager's random numbers, recorded and replayed, so that the higher-precision reference draws what eager
drew.

The same seed does not give the same numbers everywhere. On the CPU, `randn` and `rand` at float64 use
the generator otherwise than at float32 or bfloat16 (beyond a few elements, other values: a VAE's
`randn_like` noise, a diffusion step's); the host's generator is not CUDA's. A reference drawing its own
numbers is then far from eager for a reason no compile has, and every candidate passes beside it.

So eager's kept pass records each draw, call by call (`Draws.recording`), kept on the host (`TensorStore`:
a temporary file when large), and the reference replays them (`Draws.replaying`): each op that draws runs
as it would (the generator goes on as it would), then its result is eager's. A dropout's mask is the draw
whatever kernel makes it: CUDA's `native_dropout` and the host's `bernoulli_` into an empty tensor draw the
same mask (its shape and its keep probability), so a model on an accelerator can have its reference on the
host. Over slices of the batch, a draw whose first dimension is the batch's gets the slice's rows.

What cannot be replayed says so. A draw inside a fused kernel (flash attention's dropout, cuDNN's RNN
dropout) makes the recording `opaque`, and no run replays it. A draw the reference makes that eager did not
(another op or shape, one more, one fewer) raises `NotReplayable`: the reference then draws from the seed,
as before, and says why. A draw in the backward is a forward recomputed (activation checkpointing puts
the generator's state back and draws again): it gets the forward draw made from the same generator state;
the recording keeps forward draws only. A draw shaped by a tensor argument (`torch.normal` with a tensor
of means, a gamma's concentrations) is given eager's result itself: the rounding of that argument at
eager's precision stays in it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...reports import models as rm
from .. import torch_internals as ti
from .store import Kept, TensorStore

_SEEDED = torch.Tag.nondeterministic_seeded
_MASKS = {"native_dropout", "bernoulli", "bernoulli_"}
_VALUES = {
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_",
    "uniform", "uniform_", "exponential", "exponential_", "geometric", "geometric_", "log_normal", "log_normal_",
    "cauchy", "cauchy_", "multinomial", "poisson", "_standard_gamma", "bernoulli", "bernoulli_",
}  # fmt: skip
"""Ops whose one result is the draw (its values taken as eager's); `bernoulli` with a tensor of
probabilities too (its 0/1 outcomes)."""


NOT_REPLAYED = "eager's random numbers not replayed"


def replayed_text(run: rm.ReferenceRun | None) -> str:
    """How the reference's `run` drew a random model's numbers, for its `random` note: `; the float64
    reference drew eager's own numbers (N draw(s) replayed)`, or why it drew from the seed; nothing
    without a higher-precision run."""
    if run is None or run.method == "elementwise":
        return ""
    name = "float64" if run.method == "float64_reference" else "float32"
    if run.replayed_draws:
        return f"; the {name} reference drew eager's own numbers ({run.replayed_draws} draw(s) replayed)"
    why = next((p for p in run.not_taken if p.startswith(NOT_REPLAYED)), None)
    return f"; the {name} reference drew from the seed ({why.removeprefix(NOT_REPLAYED + ' (').rsplit('): drawn', 1)[0]})" if why else ""


class NotReplayable(Exception):
    """The run drew otherwise than eager: eager's draws cannot stand for its own."""


@dataclass(frozen=True)
class _What:
    kind: str
    """`mask` (a dropout's keep mask), `values` (the op's result), `opaque` (drawn inside a kernel)."""
    name: str
    keep: float | None = None
    """A mask's keep probability."""


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...]) -> Any:
    """The value of the op's argument called one of `names` (its default when not given); None: no such argument."""
    for i, a in enumerate(func._schema.arguments):
        if a.name in names:
            if i < len(args):
                return args[i]
            return kwargs.get(a.name, a.default_value if a.has_default_value() else None)
    return None


def _what(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _What | None:
    """What a tagged op draws, or None when it draws nothing here (no dropout, not training)."""
    name = func._overloadpacket.__name__
    if name == "native_dropout":
        p, train = _argument(func, args, kwargs, ("p",)), _argument(func, args, kwargs, ("train",))
        return None if train is False or not p else _What("mask", name, 1.0 - float(p))
    if name in ("bernoulli", "bernoulli_"):
        p = _argument(func, args, kwargs, ("p",))
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            return _What("mask", name, float(p))
        return _What("values", name.rstrip("_"))
    if name in _VALUES:
        return _What("values", name.rstrip("_"))
    if "no_dropout" in name:
        return None
    train = _argument(func, args, kwargs, ("train", "training"))
    p = _argument(func, args, kwargs, ("dropout_p", "dropout", "p"))
    if train is False or (p is not None and not p):
        return None
    return _What("opaque", name)


def _generator_state(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """A digest of the generator's state a draw starts from (the explicit `generator=`, else the default one
    of the draw's device): a recomputation in the backward starts from its forward's."""
    gen = kwargs.get("generator")
    if gen is None:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None) or torch.device(kwargs.get("device") or "cpu")
        if device.type == "cuda":
            state = torch.cuda.get_rng_state(device)
        else:
            state = torch.get_rng_state()
    else:
        state = gen.get_state()
    return hashlib.blake2b(state.numpy().tobytes(), digest_size=16).digest()


@dataclass
class _Draw:
    what: _What
    shape: tuple[int, ...]
    value: Kept
    """The mask (bool) or the result, at eager's dtype."""


@dataclass
class Draws:
    """Eager's draws, call by call, in the order made; `opaque`: why they cannot be replayed (a draw
    inside a kernel), when so."""

    store: TensorStore = field(default_factory=TensorStore)
    calls: dict[int, list[_Draw]] = field(default_factory=dict)
    opaque: str | None = None

    @property
    def count(self) -> int:
        return sum(len(d) for d in self.calls.values())

    @property
    def nbytes(self) -> int:
        return sum(d.value.nbytes for call in self.calls.values() for d in call)

    def replayable(self) -> bool:
        """Some draws, all of which a run can be given."""
        return self.opaque is None and self.count > 0

    def recording(self) -> _Recording:
        """What eager's kept pass runs each call under (`run_pass(draws=...)`)."""
        return _Recording(self)

    def replaying(self, rows: list[tuple[int, int]] | None = None, batches: list[int] | None = None) -> _Replaying:
        """What a run that is to draw as eager did runs each call under; over a slice of the batch, each
        call's `rows` of its `batches`."""
        return _Replaying(self, rows, batches)

    def close(self) -> None:
        self.store.close()


class _Recording:
    def __init__(self, draws: Draws) -> None:
        self.draws = draws

    @contextlib.contextmanager
    def call(self, index: int) -> Iterator[None]:
        with _Record(self.draws, self.draws.calls.setdefault(index, [])):
            yield


class _Record(TorchDispatchMode):
    def __init__(self, draws: Draws, into: list[_Draw]) -> None:
        super().__init__()
        self.draws, self.into = draws, into

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _SEEDED not in func.tags or self.draws.opaque is not None or ti.in_backward():
            return out
        what = _what(func, args, kwargs)
        if what is None:
            return out
        if what.kind == "opaque" or (what.kind == "values" and not isinstance(out, torch.Tensor)):
            self.draws.opaque = f"{what.name} draws inside its kernel"
            return out
        value = _drawn(what, func, args, out).detach()
        host = value.device.type == "cpu"  # kept on the host: a copy of its own, not the one a later op may write
        self.into.append(_Draw(what, tuple(value.shape), self.draws.store.keep(value.to("cpu"), copy=host)))
        return out


def _drawn(what: _What, func: Any, args: tuple[Any, ...], out: Any) -> torch.Tensor:
    """What the op drew: a dropout's mask, a bernoulli's outcomes as a mask, else its result."""
    if what.name == "native_dropout":
        return out[1]
    if what.kind == "mask":
        return out != 0
    return out


class _Replaying:
    def __init__(self, draws: Draws, rows: list[tuple[int, int]] | None, batches: list[int] | None) -> None:
        self.draws, self.rows, self.batches = draws, rows, batches
        self.problem: str | None = None
        self.replayed = 0

    @contextlib.contextmanager
    def call(self, index: int) -> Iterator[None]:
        rows = self.rows[index] if self.rows is not None else None
        batch = self.batches[index] if self.batches is not None else None
        mode = _Replay(self, self.draws.calls.get(index, []), rows, batch)
        with mode:
            yield
        if self.problem is None and mode.cursor < len(mode.recorded):
            self.problem = f"eager drew {len(mode.recorded) - mode.cursor} more time(s) in call {index} than this run"
        if self.problem is not None:
            raise NotReplayable(self.problem)


class _Replay(TorchDispatchMode):
    def __init__(self, owner: _Replaying, recorded: list[_Draw], rows: tuple[int, int] | None, batch: int | None) -> None:
        super().__init__()
        self.owner, self.recorded, self.rows, self.batch = owner, recorded, rows, batch
        self.cursor = 0
        self.memo: dict[tuple[Any, ...], tuple[_Draw, bool]] = {}
        """A forward draw's eager draw and whether it was cut to the slice's rows, by what the draw was and
        the generator's state it started from (read again when a recomputation asks: one draw on the host
        at a time)."""

    def _fail(self, why: str) -> NotReplayable:
        if self.owner.problem is None:
            self.owner.problem = why
        return NotReplayable(why)

    def _next(self, what: _What, shape: tuple[int, ...]) -> tuple[_Draw, bool]:
        """Eager's draw for this one (the next in order), and whether it is cut to the slice's rows."""
        if self.cursor >= len(self.recorded):
            raise self._fail(f"{what.name} {list(shape)} drawn, where eager drew nothing more")
        draw = self.recorded[self.cursor]
        same = draw.what.kind == what.kind and (
            abs((draw.what.keep or 0.0) - (what.keep or 0.0)) < 1e-9 if what.kind == "mask" else draw.what.name == what.name
        )
        cut = self.rows is not None and draw.shape[:1] == (self.batch,) and shape[:1] == (self.rows[1] - self.rows[0],)
        if not same or (draw.shape != shape and not (cut and draw.shape[1:] == shape[1:])):
            raise self._fail(f"{what.name} {list(shape)} drawn, where eager drew {draw.what.name} {list(draw.shape)}")
        self.cursor += 1
        return draw, draw.shape != shape

    def _value(self, draw: _Draw, cut: bool) -> torch.Tensor:
        value = draw.value.whole("cpu")
        return value[self.rows[0] : self.rows[1]] if cut and self.rows is not None else value

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if _SEEDED not in func.tags:
            return func(*args, **kwargs)
        what = _what(func, args, kwargs)
        if what is None:
            return func(*args, **kwargs)
        if what.kind == "opaque":
            raise self._fail(f"{what.name} draws inside its kernel")
        state = _generator_state(args, kwargs)
        out = func(*args, **kwargs)
        drawn = _drawn(what, func, args, out)
        shape = tuple(drawn.shape)
        key = (what, shape, state)
        if ti.in_backward():  # a forward recomputed: the draw it made from the same state
            if key not in self.memo:
                raise self._fail(f"{what.name} {list(shape)} drawn in the backward, not a forward's draw recomputed")
            draw, cut = self.memo[key]
        else:
            draw, cut = self._next(what, shape)
            self.memo[key] = (draw, cut)
        self.owner.replayed += 1
        return _given(what, args, out, self._value(draw, cut))


def _given(what: _What, args: tuple[Any, ...], out: Any, value: torch.Tensor) -> Any:
    """The op's result with eager's draw in place of its own."""
    if what.name == "native_dropout":
        source, p = args[0], float(args[1])
        mask = value.to(source.device)
        scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
        return source.mul(mask).mul_(scale), mask
    out.copy_(value.to(out.device))
    return out
