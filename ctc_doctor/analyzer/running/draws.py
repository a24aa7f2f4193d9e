"""Eager's random numbers, recorded and replayed, so that the higher-precision reference draws what eager
drew.

The same seed does not give the same numbers everywhere. On the CPU, `randn` and `rand` at float64 use
the generator otherwise than at float32 or bfloat16 (beyond a few elements, other values: a VAE's
`randn_like` noise, a diffusion step's); the host's generator is not CUDA's. A reference drawing its own
numbers is then far from eager for a reason no compile has, and every candidate passes beside it.

So once a model is found to draw (eager from another seed differs), eager's pass runs once more from the
kept pass's seed and state, recording each draw, call by call (`Draws.recording`), kept on the host
(`TensorStore`: a temporary file when large); it must give the kept results to the bit, or its draws stand
for nothing. Not in the kept pass itself: a dispatch mode on the stack costs every op a Python call (a
small model's timed first pass 2.3x) and makes Dynamo skip the frames of a compiled submodule. The
reference replays them (`Draws.replaying`): each op that draws runs as it would (the generator goes on as
it would), then its result is eager's. A dropout's mask is the draw
whatever kernel makes it: CUDA's `native_dropout` and the host's `bernoulli_` into an empty tensor draw the
same mask (its shape and its keep probability), so a model on an accelerator can have its reference on the
host. Over slices of the batch, a draw whose first dimension is the batch's gets the slice's rows.

What cannot be replayed says so. A draw inside a fused kernel (flash attention's dropout, cuDNN's RNN
dropout) makes the recording `opaque`, and no run replays it. A draw the reference makes that eager did not
(another op or shape, one more, one fewer) raises `NotReplayable`: the reference then draws from the seed,
as before, and says why. A draw in the backward is a forward recomputed (activation checkpointing puts
the generator's state back and draws again): it gets the forward draw made from the same generator state
(two forward draws from one state, a `fork_rng` around each, leave that state's recomputation
unanswered: it fails); one that recomputes no forward draw (a hook drawing gradient noise) makes the
recording `opaque`. A draw inside an op torch does not tag as drawing (a custom op's own kernel) is not
seen: the reference draws it from the seed. A draw shaped by a tensor argument (`torch.normal` with a tensor
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

from ...reports import models as rm
from .. import torch_internals as ti
from .store import Kept, TensorStore

_SEEDED = torch.Tag.nondeterministic_seeded
_VALUES = {
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_",
    "normal_functional", "uniform", "uniform_", "exponential", "exponential_", "geometric", "geometric_",
    "log_normal", "log_normal_", "cauchy", "cauchy_", "random", "random_", "multinomial", "poisson", "binomial",
    "_standard_gamma", "_sample_dirichlet",
}  # fmt: skip
"""Ops whose one result is the draw (its values taken as eager's); `bernoulli` is read apart (a mask with a
scalar probability, its 0/1 outcomes with a tensor of them)."""
_DRAW_NOTHING = {"_nested_tensor_softmax_with_shape"}
"""Tagged ops that draw nothing."""
_AMBIGUOUS = object()
"""A generator state two forward draws started from: its recomputation cannot tell which to get."""


NOT_REPLAYED = "eager's random numbers not replayed"


def replayed_text(run: rm.ReferenceRun | None) -> str:
    """How the reference's `run` drew a random model's numbers, for its `random` note: `; the float64
    reference drew eager's own numbers (N draw(s) replayed)`, or why it drew from the seed; nothing
    without a higher-precision run."""
    if run is None:
        return ""
    why = next((p for p in run.not_taken if p.startswith(NOT_REPLAYED)), None)
    reason = why.removeprefix(NOT_REPLAYED + " (").rsplit("): ", 1)[0] if why else None
    if run.method == "elementwise":
        return f"; {NOT_REPLAYED} ({reason})" if reason else ""
    name = "float64" if run.method == "float64_reference" else "float32"
    if run.replayed_draws:
        return f"; the {name} reference drew eager's own numbers ({run.replayed_draws} draw(s) replayed)"
    return f"; the {name} reference drew from the seed ({reason})" if reason else ""


class NotReplayable(Exception):
    """The run drew otherwise than eager: eager's draws cannot stand for its own."""


@dataclass(frozen=True)
class _What:
    kind: str
    """`mask` (a dropout's keep mask), `values` (the op's result), `opaque` (drawn inside a kernel)."""
    name: str
    keep: float | None = None
    """A mask's keep probability."""


def _what(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _What | None:
    """What a tagged op draws, or None when it draws nothing here (no dropout, not training). An op not
    known is taken to draw inside its kernel unless its dropout probability is 0 or it is not training."""
    name = ti.op_name(func)
    if name == "native_dropout":
        p, train = ti.op_argument(func, args, kwargs, ("p",)), ti.op_argument(func, args, kwargs, ("train",))
        return None if train is False or not p else _What("mask", name, 1.0 - float(p))
    if name in ("bernoulli", "bernoulli_"):
        p = ti.op_argument(func, args, kwargs, ("p",))
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            return _What("mask", name, float(p))
        return _What("values", name.rstrip("_"))
    if name in _VALUES:
        return _What("values", name.rstrip("_"))
    if "no_dropout" in name or name in _DRAW_NOTHING:
        return None
    if name == "_fused_dropout":  # its p is the probability to keep
        return _What("opaque", name)
    train = ti.op_argument(func, args, kwargs, ("train", "training"))
    p = ti.op_argument(func, args, kwargs, ("dropout_p", "dropout", "p"))
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


def _key(what: _What, shape: tuple[int, ...], state: bytes, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What a draw is, to know its recomputation by: the op, its shape, the generator state it started from,
    and its arguments (a tensor's by shape and dtype)."""

    def plain(v: Any) -> Any:
        return ("tensor", tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else repr(v)

    rest = tuple(plain(a) for a in args) + tuple((k, plain(v)) for k, v in sorted(kwargs.items()) if k != "generator")
    return (what, shape, state, rest)


def _drawn(what: _What, out: Any) -> torch.Tensor:
    """What the op drew: a dropout's mask, a bernoulli's outcomes as a mask, else its result."""
    if what.name == "native_dropout":
        return out[1]
    if what.kind == "mask":
        return out != 0
    return out


class _States:
    """The forward draws by what each was (`_key`: the op, its shape and arguments, the generator state it
    started from), so that a draw in the backward is known for a recomputation and gets its forward's; a
    key two forward draws had answers nothing."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Any, ...], Any] = {}

    def forward(self, key: tuple[Any, ...], draw: Any) -> None:
        self.seen[key] = _AMBIGUOUS if key in self.seen else draw

    def recomputed(self, key: tuple[Any, ...]) -> tuple[Any, str | None]:
        """The forward draw this backward draw recomputes, or why there is none."""
        found = self.seen.get(key)
        if found is None:
            return None, "drawn in the backward, not a forward's draw recomputed"
        if found is _AMBIGUOUS:
            return None, "drawn in the backward from a state two forward draws started from"
        return found, None


@dataclass
class _Draw:
    what: _What
    shape: tuple[int, ...]
    value: Kept
    """The mask (bool) or the result, at eager's dtype."""
    late: bool = False
    """Drawn after the call's backward began (an optimizer's step): a call cut short never asks for it."""


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

    def replayable(self) -> bool:
        """Some draws, all of which a run can be given."""
        return self.opaque is None and self.count > 0

    def disown(self, why: str) -> None:
        """These draws cannot be replayed (`why`): what was kept goes."""
        self.opaque = self.opaque or why
        self.close()

    def recording(self) -> _Recording:
        """What eager's recording pass runs each call under (`run_pass(draws=...)`)."""
        if not ti.DISPATCH_MODE:
            self.disown("this torch cannot follow a run's ops (no TorchDispatchMode)")
        return _Recording(self)

    def replaying(
        self, rows: list[tuple[int, int]] | None = None, batches: list[int] | None = None, cut_short: int | None = None
    ) -> _Replaying:
        """What a run that is to draw as eager did runs each call under; over a slice of the batch, each
        call's `rows` of its `batches`. `cut_short`: the call that runs its loss only (the reference's last
        training step: no backward, no step), which leaves eager's draws after its backward began (an
        optimizer's) unasked, and only those."""
        return _Replaying(self, rows, batches, cut_short)

    def close(self) -> None:
        """What was kept goes (its file too)."""
        self.calls = {}
        self.store.close()


class _Recording:
    def __init__(self, draws: Draws) -> None:
        self.draws = draws

    @contextlib.contextmanager
    def call(self, index: int) -> Iterator[None]:
        if self.draws.opaque is not None:  # given up already: nothing more to follow
            yield
            return
        with _Record(self.draws, self.draws.calls.setdefault(index, [])):
            yield


class _Record(ti.DispatchMode):  # type: ignore[misc]
    def __init__(self, draws: Draws, into: list[_Draw]) -> None:
        super().__init__()
        self.draws, self.into = draws, into
        self.states = _States()
        self.late = False
        """The call's backward has begun (every op of it comes here too)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.late and ti.in_backward():
            self.late = True
        if _SEEDED not in func.tags or self.draws.opaque is not None:
            return func(*args, **kwargs)
        try:
            what = _what(func, args, kwargs)
            state = _generator_state(args, kwargs) if what is not None and what.kind != "opaque" else None
        except Exception as exc:  # noqa: BLE001 - the recording never fails eager's pass: it gives up
            self.draws.disown(f"{ti.op_name(func)} could not be read: {type(exc).__name__}")
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if what is None:
            return out
        if what.kind == "opaque" or (what.kind == "values" and not isinstance(out, torch.Tensor)):
            self.draws.disown(f"{what.name} draws inside its kernel")
            return out
        try:
            self._keep(what, out, state, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - a nested tensor's draw, a tensor the store cannot flatten
            self.draws.disown(f"{what.name}'s draw could not be kept: {type(exc).__name__}")
        return out

    def _keep(self, what: _What, out: Any, state: bytes | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        value = _drawn(what, out).detach()
        assert state is not None
        key = _key(what, tuple(value.shape), state, args, kwargs)
        if ti.in_backward():  # a forward recomputed (its draw is the forward's), or a draw the backward makes
            _, why = self.states.recomputed(key)
            if why is not None:
                self.draws.disown(f"{what.name} {list(value.shape)} {why}")
            return
        host = value.device.type == "cpu"  # kept on the host: a copy of its own, not the one a later op may write
        self.into.append(_Draw(what, tuple(value.shape), self.draws.store.keep(value.to("cpu"), copy=host), self.late))
        self.states.forward(key, True)


class _Replaying:
    def __init__(self, draws: Draws, rows: list[tuple[int, int]] | None, batches: list[int] | None, cut_short: int | None) -> None:
        self.draws, self.rows, self.batches, self.cut_short = draws, rows, batches, cut_short
        self.problem: str | None = None
        self.used: set[int] = set()
        """The recorded draws given (by id), recomputations and slices counted once."""

    @contextlib.contextmanager
    def call(self, index: int) -> Iterator[None]:
        rows = self.rows[index] if self.rows is not None else None
        batch = self.batches[index] if self.batches is not None else None
        mode = _Replay(self, self.draws.calls.get(index, []), rows, batch)
        with mode:
            yield
        left = mode.recorded[mode.cursor :]
        if self.problem is None and left and not (index == self.cut_short and all(d.late for d in left)):
            self.problem = f"eager drew {len(mode.recorded) - mode.cursor} more time(s) in call {index} than this run"
        if self.problem is not None:
            raise NotReplayable(self.problem)


class _Replay(ti.DispatchMode):  # type: ignore[misc]
    def __init__(self, owner: _Replaying, recorded: list[_Draw], rows: tuple[int, int] | None, batch: int | None) -> None:
        super().__init__()
        self.owner, self.recorded, self.rows, self.batch = owner, recorded, rows, batch
        self.cursor = 0
        self.states = _States()
        """Each forward draw's eager draw and whether it was cut to the slice's rows (read again when a
        recomputation asks: one draw on the host at a time)."""

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
        shape = tuple(_drawn(what, out).shape)
        key = _key(what, shape, state, args, kwargs)
        if ti.in_backward():  # a forward recomputed: the draw it made from the same state
            found, why = self.states.recomputed(key)
            if why is not None:
                raise self._fail(f"{what.name} {list(shape)} {why}")
            draw, cut = found
        else:
            draw, cut = self._next(what, shape)
            self.states.forward(key, (draw, cut))
        self.owner.used.add(id(draw))
        return _given(what, args, kwargs, out, self._value(draw, cut))


def _given(what: _What, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, value: torch.Tensor) -> Any:
    """The op's result with eager's draw in place of its own (a copy of it: the model may write its mask)."""
    if what.name == "native_dropout":
        source, p = args[0], float(args[1] if len(args) > 1 else kwargs["p"])
        mask = value.to(source.device, copy=True)
        scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
        return source.mul(mask).mul_(scale), mask
    out.copy_(value.to(out.device))
    return out
