"""Training's higher-precision reference one module at a time (`precision`'s `streamed` way): for a model
whose parameters at float64, with their gradients, do not fit beside it.

Each parameter has a float64 stand-in (a leaf of its own, put in its module's place for the run) whose
memory exists only while it is needed:

- in the forward, while its module's forward runs (a forward pre-hook fills it from the model's own value,
  cast exactly, or from the value the run's optimizer steps left; the post-hook frees it);
- in the backward, when an operation needs it: autograd saves no reference to it (a saved-tensor hook keeps
  which parameter and which view instead) and gets a fresh float64 copy for that operation alone;
- its gradient, once accumulated (a post-accumulate-grad hook): kept as its difference from eager's, or
  summed over the calls, or spent on the optimizer's step for this parameter alone (an elementwise
  optimizer: SGD, Adam... step each parameter on its own as they would together), its new value and state
  kept in a file until the next call's forward needs them.

So what it adds on the device is the largest module's parameters at float64 with their gradients, and the
activations. The model's own parameters are never touched (they are put back in their modules after);
its buffers are cast in place for the run and come back bit for bit.

A forward recomputed inside the backward (the model's own activation checkpointing) keeps its stand-ins
until their gradient comes (the recomputation's saved tensors hold them); a frozen parameter's then stays
for the run. A module's code that reads another module's parameter directly finds an empty stand-in, and
the way fails (the next is tried): every operation of the forward is checked for an empty stand-in (a
torch-function mode), which would otherwise read freed memory. A module whose output is a view of its own
parameter keeps it filled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..store import Kept, TensorStore
from ..tensors import iter_tensors

ELEMENTWISE_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "ASGD", "Rprop"})
"""torch.optim's optimizers whose step changes each parameter from its own gradient and state alone: one
stepped on its own is one stepped with the others."""


READS_CHILDREN = (torch.nn.MultiheadAttention,)
"""torch.nn modules whose forward reads a child's parameter directly (MultiheadAttention's `out_proj`): their
pre-hook fills their whole subtree's."""


class NotStreamable(RuntimeError):
    """The model or its optimizer cannot run one module at a time (said as the way's failure)."""


def elementwise_optimizer(factory: Callable[[Any], Any]) -> str | None:
    """None when the optimizer `factory` builds steps each parameter on its own; else why not."""
    try:
        optimizer = factory([torch.nn.Parameter(torch.zeros(2))])
    except Exception as exc:  # noqa: BLE001 - a factory that wants the model's own parameters
        return f"its optimizer cannot be built for one parameter ({type(exc).__name__})"
    kind = type(optimizer)
    if kind.__module__.startswith("torch.optim") and kind.__name__ in ELEMENTWISE_OPTIMIZERS:
        return None
    return f"its optimizer ({kind.__name__}) is not one known to step each parameter on its own"


_METADATA = frozenset(
    {"__get__", "__set__", "size", "dim", "numel", "nelement", "ndimension", "stride", "storage_offset", "element_size"}
    | {"is_floating_point", "is_complex", "is_contiguous", "untyped_storage", "data_ptr", "get_device", "__len__", "__hash__"}
)
"""Tensor methods and properties that read no element: an empty stand-in may meet them (`weight.dtype`)."""


class _Unfilled(TorchFunctionMode):
    """Any operation that would read an empty stand-in (or a view of one) raises instead: its memory is
    freed, and the kernel would read whatever lies there."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") not in _METADATA:
            for t in iter_tensors((args, kwargs)):
                if t.numel() and _has_storage(t) and t.untyped_storage().nbytes() == 0:
                    raise NotStreamable(
                        f"{getattr(func, '__name__', func)} reads a parameter outside its module's forward "
                        "(its float64 copy is made only while the module runs)"
                    )
        return func(*args, **kwargs)


@dataclass(eq=False)
class _Stand:
    """One parameter's float64 stand-in and what the run keeps of it."""

    name: str
    own: torch.nn.Parameter
    """The model's parameter (never written)."""
    high: torch.nn.Parameter
    """Its stand-in: its memory filled only while needed."""
    users: int = 0
    """Forwards running now that need it filled."""
    pinned: bool = False
    """Filled for the rest of the run (a recomputed forward's saved tensors, or an output, hold it)."""
    value: Kept | None = None
    """Its value after the run's optimizer steps (None: still the model's own)."""
    optimizer: Any = None
    state: dict[str, Kept] = field(default_factory=dict)
    """The optimizer's per-element state, kept between steps."""
    summed: Kept | None = None
    """Its gradient summed over the calls so far (no optimizer)."""
    version: int | None = None
    """Its version counter when filled (or stepped): a forward that writes to it in place moves it."""
    stepped_in: int = -1
    """The call whose backward last stepped it: nothing in that backward may read it after."""
    accumulated_in: int = -1
    """The call whose backward last gave it a gradient (once a backward)."""

    @property
    def filled(self) -> bool:
        return self.high.untyped_storage().nbytes() > 0

    @property
    def nbytes(self) -> int:
        return self.high.numel() * self.high.element_size()

    def current(self) -> torch.Tensor:
        """Its current value: the stepped one from the file, else the model's own (in its own dtype)."""
        return self.value.whole(self.own.device) if self.value is not None else self.own.detach()

    def fresh(self) -> torch.Tensor:
        """Its current value at the stand-in's dtype, in a tensor of its own."""
        return self.current().to(self.high.dtype)

    def fill(self) -> None:
        self.high.untyped_storage().resize_(self.nbytes)
        with torch.no_grad():
            self.high.data.copy_(self.current())  # cast as it copies: no float64 copy beside the stand-in's own

    def free(self) -> None:
        self.high.untyped_storage().resize_(0)


@dataclass(frozen=True)
class _Saved:
    """What autograd keeps instead of a view of a stand-in: which, and the view."""

    stand: _Stand
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


class Streamed:
    """The model's parameters swapped for float64 stand-ins for the block (see the module doc). Without an
    optimizer, `grad(name, gradient)` receives each parameter's gradient summed over the calls, once: in the
    last call's backward as it comes, or from `finish()`; `call()` tells the call running now (0, 1...),
    `calls` how many there are; with `optimizer` (a factory), every call but the last steps each parameter;
    `budget`: the bytes its stand-ins may hold at once."""

    def __init__(
        self,
        model: torch.nn.Module,
        dtype: torch.dtype,
        *,
        calls: int,
        call: Callable[[], int],
        grad: Callable[[str, torch.Tensor], None],
        optimizer: Callable[[Any], Any] | None,
        store: TensorStore,
        budget: int | None = None,
    ) -> None:
        self.model, self.dtype, self.calls, self.call, self.grad = model, dtype, calls, call, grad
        self.factory, self.store, self.budget = optimizer, store, budget
        self.held = 0
        """Bytes of the stand-ins filled now: past `budget` (the way's whole plan) the way fails, before the
        host's out-of-memory killer ends the run (a frozen weight that the model's own checkpointing keeps
        filled until the run ends)."""
        self.stands: dict[int, _Stand] = {}
        self.by_high: dict[int, _Stand] = {}
        self.by_storage: dict[int, _Stand] = {}
        self.recorded: set[str] = set()

    # -- the stand-ins ------------------------------------------------------------------------

    def _stand_for(self, name: str, p: torch.nn.Parameter) -> _Stand:
        stand = self.stands.get(id(p))
        if stand is None:
            dtype = self.dtype if p.is_floating_point() else p.dtype  # a complex one keeps its dtype, as the whole way's
            high = torch.nn.Parameter(torch.empty(p.shape, dtype=dtype, device=p.device), requires_grad=p.requires_grad)
            high.untyped_storage().resize_(0)
            stand = self.stands[id(p)] = self.by_high[id(high)] = _Stand(name, p, high)
        return stand

    def _fill(self, stand: _Stand) -> None:
        if stand.filled:
            return
        if stand.stepped_in == self.call():  # in the backward that stepped it: the value it ran with is gone
            raise NotStreamable(f"{stand.name} is needed again in the backward after its own optimizer step")
        size = stand.nbytes
        if self.budget is not None and self.held + size > self.budget:
            raise NotStreamable(
                f"its float64 parameters filled at once pass the way's plan of {self.budget / 2**20:.0f} MB at {stand.name} "
                "(a weight kept filled by the model's own checkpointing?)"
            )
        stand.fill()
        self.held += size
        stand.version = _version(stand.high)
        self.by_storage[stand.high.untyped_storage().data_ptr()] = stand

    def _free(self, stand: _Stand, *, check: bool = True) -> None:
        if stand.filled and not stand.pinned and stand.users == 0:
            if check and _version(stand.high) != stand.version:
                raise NotStreamable(f"{stand.name} is written in place by the model's forward (its float64 copy's change would be lost)")
            self.by_storage.pop(stand.high.untyped_storage().data_ptr(), None)
            self.held -= stand.nbytes
            stand.free()

    def _enter(self, owned: list[_Stand]) -> Callable[..., None]:
        def hook(_module: torch.nn.Module, *_: Any) -> None:
            for stand in owned:
                stand.users += 1
                self._fill(stand)

        return hook

    def _leave(self, owned: list[_Stand]) -> Callable[..., None]:
        from ... import torch_internals as ti

        def hook(_module: torch.nn.Module, _args: Any, output: Any) -> None:
            recomputed = ti.in_backward() is not False  # unknown: as if recomputed (nothing freed early)
            held = {t.untyped_storage().data_ptr() for t in iter_tensors(output) if _has_storage(t)}
            for stand in owned:
                stand.users -= 1
                if recomputed or (stand.filled and stand.high.untyped_storage().data_ptr() in held):
                    stand.pinned = True  # saved by the recomputation, or handed on as an output
                self._free(stand)

        return hook

    # -- autograd's saved tensors ---------------------------------------------------------------

    def _pack(self, t: torch.Tensor) -> Any:
        if not _has_storage(t):
            return t
        stand = self.by_storage.get(t.untyped_storage().data_ptr())
        if stand is None or stand.pinned:
            return t
        if t.dtype != stand.high.dtype:
            raise NotStreamable(f"{stand.name} is saved for the backward as {t.dtype}, a view of another dtype")
        return _Saved(stand, tuple(t.shape), tuple(t.stride()), t.storage_offset())

    def _unpack(self, saved: Any) -> Any:
        if not isinstance(saved, _Saved):
            return saved
        stand = saved.stand
        if stand.stepped_in == self.call():
            raise NotStreamable(f"{stand.name} is read in the backward after its own optimizer step")
        base = stand.high.detach() if stand.filled else stand.fresh()  # a copy for this operation alone
        return base.as_strided(saved.size, saved.stride, saved.offset)

    # -- gradients ------------------------------------------------------------------------------

    def _accumulated(self, stand: _Stand) -> Callable[[torch.Tensor], None]:
        def hook(high: torch.Tensor) -> None:
            g, high.grad = high.grad, None
            if g is None:
                return
            i = self.call()
            if stand.accumulated_in == i:  # a reentrant checkpoint's backward of its own, once a use
                raise NotStreamable(
                    f"{stand.name}'s gradient comes in parts (a reentrant checkpoint runs a backward of its own for each use)"
                )
            stand.accumulated_in = i
            if self.factory is not None:
                if i < self.calls - 1:
                    self._step(stand, g)
            elif i < self.calls - 1:
                self._sum(stand, g)
            else:
                if stand.summed is not None:
                    g = g + stand.summed.whole(g.device)
                    stand.summed = None
                self.grad(stand.name, g)
                self.recorded.add(stand.name)
            del g
            stand.pinned = False
            self._free(stand)

        return hook

    def _sum(self, stand: _Stand, g: torch.Tensor) -> None:
        if stand.summed is not None:
            g = g + stand.summed.whole(g.device)
        stand.summed = self._keep(stand.summed, g)

    def _keep(self, kept: Kept | None, t: torch.Tensor) -> Kept:
        """`t` in the file, over `kept`'s place when there is one."""
        if t.is_complex():
            raise NotStreamable("a complex parameter's value, state or gradient would be kept between calls: not done")
        if kept is None:
            kept, _ = self.store.writer(tuple(t.shape), t.dtype, t.numel(), "cpu")
        self.store.rewrite(kept, t)
        return kept

    def _step(self, stand: _Stand, g: torch.Tensor) -> None:
        """This parameter's optimizer step, on its own: its value and state from the file, then back there."""
        assert self.factory is not None
        self._fill(stand)
        high = stand.high
        if stand.optimizer is None:
            stand.optimizer = self.factory([high])
        state = stand.optimizer.state[high]
        for key, kept in stand.state.items():
            state[key] = kept.whole(high.device)
        high.grad = g
        stand.optimizer.step()
        high.grad = None
        stand.version, stand.stepped_in = _version(high), self.call()
        for key, v in list(state.items()):
            if isinstance(v, torch.Tensor) and v.numel() == high.numel() and v.numel() > 1:
                stand.state[key] = self._keep(stand.state.get(key), v)
                state[key] = torch.empty(0, dtype=v.dtype, device=v.device)
        stand.value = self._keep(stand.value, high.detach())

    def finish(self) -> None:
        """Gradients summed over the calls whose last call gave none (no optimizer)."""
        for stand in self.stands.values():
            if stand.summed is not None and stand.name not in self.recorded:
                self.grad(stand.name, stand.summed.whole(stand.own.device))
                stand.summed = None

    # -- the block ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        model = self.model
        names = {id(p): n for n, p in model.named_parameters()}
        swapped: list[tuple[torch.nn.Module, str, torch.nn.Parameter]] = []
        handles: list[Any] = []
        buffers = [(b, b.dtype) for b in {id(b): b for b in model.buffers()}.values() if b.is_floating_point()]
        try:
            with torch.no_grad():
                for b, _old in buffers:
                    b.data = b.data.to(self.dtype)
            for module in model.modules():
                for key, p in list(module._parameters.items()):
                    if p is not None:
                        swapped.append((module, key, p))
                        module._parameters[key] = self._stand_for(names.get(id(p), key), p).high
            for module in model.modules():
                # its own parameters; a torch.nn module whose forward reads its children's, theirs too
                mine = module.parameters() if isinstance(module, READS_CHILDREN) else module._parameters.values()
                owned = list({id(t): self.by_high[id(t)] for t in mine if t is not None and id(t) in self.by_high}.values())
                if owned:  # before any pre-hook of the module's own (weight_norm's computes its weight from these)
                    handles.append(module.register_forward_pre_hook(self._enter(owned), prepend=True))
                    handles.append(module.register_forward_hook(self._leave(owned), always_call=True))
            for stand in self.stands.values():
                if stand.high.requires_grad:
                    handles.append(stand.high.register_post_accumulate_grad_hook(self._accumulated(stand)))
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack), _Unfilled():
                yield
        finally:
            for h in handles:
                h.remove()
            for module, key, p in swapped:
                module._parameters[key] = p
            with torch.no_grad():
                for b, old in buffers:
                    b.data = b.data.to(old)
            for stand in self.stands.values():
                stand.pinned, stand.users = False, 0
                self._free(stand, check=False)
                stand.optimizer = None
            self.by_storage.clear()


def _version(t: torch.Tensor) -> int | None:
    """Its version counter (an in-place write moves it); None where this torch cannot tell."""
    from ... import torch_internals as ti

    state = ti.tensor_state(t)
    return state[0] if state is not None else None


def _has_storage(t: torch.Tensor) -> bool:
    return t.layout == torch.strided and t.device.type != "meta" and not t.is_nested
