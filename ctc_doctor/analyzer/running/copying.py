"""Copies of the user's objects: the model for `fix` and the benchmark, a call's inputs for trials.

Nothing here modifies the original. For inference, a copy shares the original's parameters (`light_copy`):
runs without gradients never write into a parameter, so the pristine model and every copy made from it
hold one set of weights, on the run's device. `copy.deepcopy` is tried first; what it refuses (locks, handles,
non-leaf tensors inside caches) falls back in one of two ways, each chosen for its use: a model copy
shares the attributes deepcopy refuses, an input copy is copied attribute by attribute a few levels
deep with its tensors detached (so a trial never writes into the model's own cache).
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ...processes import SPILL_PREFIX, spill_dirs
from .tensors import clone_tensor, is_on, map_tensors

_PLAIN = (int, float, bool, complex, str, bytes, type(None), torch.dtype, torch.device, torch.Size)
_MAX_DEPTH = 4


class CopyError(Exception):
    """The object cannot be copied, even sharing what deepcopy refuses (one line)."""


def try_deepcopy(value: Any, memo: dict[int, Any] | None = None) -> tuple[bool, Any]:
    """(True, copy) or (False, None) when `copy.deepcopy` raises: the one place that tries it."""
    try:
        return True, copy.deepcopy(value, memo)
    except Exception:  # noqa: BLE001 - deepcopy raises whatever the copied objects raise
        return False, None


SPILLED = "_ctc_doctor_spilled"
"""The attribute of a model kept in a temporary file (`spilled_copy`): the file's path."""


def spilled_copy(model: torch.nn.Module, run: str) -> torch.nn.Module | None:
    """A copy of `model` kept in a file on disk instead of memory (`processes.spill_dirs`: not a folder in
    memory, with room for it; named for `run`, whose supervisor removes it whatever ends the stage): the
    module tree with every parameter and buffer empty, whose copies (`copy_model`, `working_copy`) are each
    read back from the file whole; the file is removed with it. None when no folder has room or the model
    cannot be saved so (an attribute pickle refuses)."""
    need = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    for folder in spill_dirs():
        with contextlib.suppress(OSError):
            stat = os.statvfs(folder)
            if stat.f_bavail * stat.f_frsize < 1.2 * need + 2**26:
                continue
        fd, path = tempfile.mkstemp(prefix=f"{SPILL_PREFIX}{run}-", suffix=".pt", dir=folder)
        os.close(fd)
        try:
            torch.save(model, path)
            skeleton = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except Exception:  # noqa: BLE001 - whatever pickling the user's model raises: it stays in memory
            _unlink(path)
            return None
        with torch.no_grad():
            for t in [*skeleton.parameters(), *skeleton.buffers()]:
                t.data = torch.empty(0, dtype=t.dtype)  # the file's pages let go (a plain tensor attribute keeps its own)
        setattr(skeleton, SPILLED, path)
        weakref.finalize(skeleton, _unlink, path)
        return skeleton  # type: ignore[no-any-return]
    return None


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def copy_model(model: torch.nn.Module, *, share_parameters: bool = False, to: str | None = None) -> torch.nn.Module:
    """A deep copy; attributes deepcopy refuses (locks, handles) are shared with the original, and with
    `share_parameters` the parameters too (`light_copy`). With `to` (the host), the parameters and buffers
    are copied straight there: a model on an accelerator is never doubled on it. A model kept in a file
    (`spilled_copy`) is read back from it (on the host)."""
    spilled = getattr(model, SPILLED, None)
    if isinstance(spilled, str):
        try:
            return torch.load(spilled, map_location="cpu", weights_only=False)  # type: ignore[no-any-return]
        except Exception as exc:
            raise CopyError(f"cannot read the model back from {spilled}: {type(exc).__name__}: {exc}") from exc
    shared: dict[int, Any] = {id(p): p for p in model.parameters()} if share_parameters else {}
    if to is not None and not share_parameters:
        shared = _copies_on(model, to) or {}  # {}: a deep copy where the model is, moved after by the caller
    ok, out = try_deepcopy(model, dict(shared))
    if ok:
        return out  # type: ignore[no-any-return]
    memo = dict(shared)
    for module in model.modules():
        for key, value in vars(module).items():
            if key not in ("_parameters", "_buffers", "_modules") and not try_deepcopy(value)[0]:
                memo[id(value)] = value
    try:
        return copy.deepcopy(model, memo)
    except Exception as exc:
        raise CopyError(f"cannot copy the model: {type(exc).__name__}: {exc}") from exc


def _copies_on(model: torch.nn.Module, device: str) -> dict[int, Any] | None:
    """A deepcopy memo: each parameter and buffer of `model` copied to `device` (tied ones once); None for
    a model whose parameters a plain `nn.Parameter` would not carry (a subclass, a lazy module's
    uninitialised ones, a tensor subclass inside) or that cannot be copied so."""
    memo: dict[int, Any] = {}
    try:
        with torch.no_grad():
            for p in model.parameters():
                if type(p) is not torch.nn.Parameter or type(p.data) is not torch.Tensor:
                    return None
                if id(p) not in memo:
                    memo[id(p)] = torch.nn.Parameter(p.detach().to(device, copy=True), requires_grad=p.requires_grad)
            for b in model.buffers():
                if id(b) not in memo:
                    memo[id(b)] = b.detach().to(device, copy=True)
    except Exception:  # noqa: BLE001 - whatever a parameter's own type raises: the deep copy does it
        return None
    return memo


def light_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy that shares the model's parameters (the same Parameter objects) and copies the rest: the
    module tree, buffers and attributes, so what a run changes there (a first call's set-up, a step counter,
    running statistics) stays in the copy. For inference, whose runs never write into a parameter: any
    number of such copies cost one model's parameters. Raises CopyError as `copy_model` does."""
    return copy_model(model, share_parameters=True)


def on_device(model: torch.nn.Module, device: str | None) -> bool:
    """Whether every parameter of the model is on `device` (None: wherever they are)."""
    if device is None:
        return True
    want = torch.device(device)
    return all(is_on(p, want) for p in model.parameters())


def working_copy(model: torch.nn.Module, device: str | None, *, share: bool) -> torch.nn.Module:
    """The copy a phase runs (a fix check's, a benchmark arm's, the numerics reference's), on `device`. With
    `share` (inference: no run writes into a parameter) and the model's parameters already on `device`, a
    `light_copy`: the device holds one set of parameters however many copies run; else a deep copy, moved."""
    if share and on_device(model, device):
        copied = light_copy(model)
    else:
        copied = copy_model(model)
    if device is not None:
        copied.to(device)  # a light copy's parameters are there already: its buffers follow them
    return copied


def fresh_copy(
    value: Any, shared: list[str] | None = None, memo: dict[int, Any] | None = None, depth: int = 0, device: str | None = None
) -> Any:
    """A copy of a call's inputs that a trial can consume: detached leaf tensors, copied objects; with
    `device`, the tensors copied there (those of objects `copy.deepcopy` copies stay where they are).

    A tensor that appears twice is copied once (`memo`). Objects that `copy.deepcopy` refuses (a KV
    cache holding non-leaf tensors) are copied attribute by attribute, a few levels deep; what still
    cannot be copied is shared and its type appended to `shared`.
    """
    memo = {} if memo is None else memo
    return map_tensors(value, lambda t: _fresh_tensor(t, memo, device), lambda v: _fresh_object(v, shared, memo, depth, device))


def _fresh_tensor(value: torch.Tensor, memo: dict[int, Any], device: str | None) -> torch.Tensor:
    if id(value) not in memo:
        memo[id(value)] = clone_tensor(value, device)
        memo.setdefault(id(memo), []).append(value)  # the original, as deepcopy keeps it (`Reuse.learn`)
    return memo[id(value)]  # type: ignore[no-any-return]


class Reuse:
    """The tensor copies one recording made, lent to its later calls while each original is unchanged. A
    transformers decoder passes one KV cache to every layer, each layer's call holding the cache as filled
    so far: copied whole per call, the copies grew with the square of the layer count; lent, each layer's
    keys and values are copied once. Unchanged means the same object, its version counter unmoved, the same
    shape, strides, dtype and requires_grad, and its values equal to the copy's (a write through `.data`
    or a custom kernel moves no version counter). Views and inference tensors are copied each time (a view
    of a lent tensor would not alias its copy). Copies are never written into (each trial copies its own),
    so sharing them between calls is safe."""

    def __init__(self, state: Callable[[torch.Tensor], tuple[Any, ...] | None]) -> None:
        self._made: dict[tuple[int, str | None], tuple[weakref.ref[torch.Tensor], tuple[Any, ...], torch.Tensor]] = {}
        self._state = state
        """What a lent copy's original must still match (`torch_internals.tensor_state`; None: never lent)."""

    def memo(self, device: str | None) -> dict[int, Any]:
        """A `fresh_copy` memo for a call copied to `device` that lends the copies still good, each checked
        when the call's copy first meets its original (`_Lending`)."""
        return _Lending((), self, device)

    def lend(self, key: int, device: str | None) -> torch.Tensor | None:
        """The copy of the live tensor whose id is `key`, when it is still good for `device`."""
        entry = self._made.get((key, device))
        if entry is None:
            return None
        ref, state, made = entry
        original = ref()
        if original is None or self._state(original) != state or not _equal(original, made):
            del self._made[(key, device)]
            return None
        return made

    def learn(self, memo: dict[int, Any], device: str | None) -> None:
        """The tensors a `fresh_copy` into `memo` copied (the originals its keep-alive list holds)."""
        for original in memo.get(id(memo), []):
            made = memo.get(id(original))
            if not isinstance(original, torch.Tensor) or not isinstance(made, torch.Tensor) or made is original:
                continue
            state = self._state(original)
            if state is not None:
                self._made[(id(original), device)] = (weakref.ref(original), state, made)


class _Lending(dict):  # type: ignore[type-arg]
    """A deepcopy memo that asks `Reuse` for an original it does not hold yet (deepcopy, `_fresh_tensor` and
    torch's own `__deepcopy__` look up by `id`, with `in`, `[]` and `get`)."""

    def __init__(self, data: Any, reuse: Reuse, device: str | None) -> None:
        super().__init__(data)
        self.reuse, self.device = reuse, device

    def _has(self, key: Any) -> bool:
        if dict.__contains__(self, key):
            return True
        made = self.reuse.lend(key, self.device) if isinstance(key, int) else None
        if made is None:
            return False
        dict.__setitem__(self, key, made)
        return True

    def __contains__(self, key: Any) -> bool:
        return self._has(key)

    def __getitem__(self, key: Any) -> Any:
        self._has(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.__getitem__(self, key) if self._has(key) else default

    def fork(self) -> _Lending:
        """A copy that lends alike (a deepcopy tried on it leaves this one as it was if it fails)."""
        return _Lending(self, self.reuse, self.device)


def _equal(original: torch.Tensor, made: torch.Tensor) -> bool:
    with torch.no_grad():
        here = original.detach() if original.device == made.device else original.detach().to(made.device)
        return bool(torch.equal(here, made))


def _fresh_object(value: Any, shared: list[str] | None, memo: dict[int, Any], depth: int, device: str | None) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if id(value) in memo:
        return memo[id(value)]
    trial = memo.fork() if isinstance(memo, _Lending) else dict(memo)  # a failed deepcopy's leftovers go with it
    ok, out = try_deepcopy(value, trial)
    if ok:
        memo.setdefault(id(memo), []).extend(trial.pop(id(trial), []))
        memo.update(trial)
        return out
    if depth < _MAX_DEPTH and hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
        ok, clone = _shallow(value)
        if ok:
            memo[id(value)] = clone
            try:
                for key, item in vars(value).items():
                    clone.__dict__[key] = fresh_copy(item, shared, memo, depth + 1, device)
                return clone
            except Exception:  # noqa: BLE001 - whatever the copy raises (a read-only __dict__...): share it
                memo.pop(id(value), None)
    if shared is not None:
        shared.append(type(value).__name__)
    return value


def _is_state(item: Any) -> bool:
    """An input object a call may change in place (a KV cache): not a plain value, a module, a type or a function."""
    return not isinstance(item, (*_PLAIN, torch.nn.Module, type)) and not callable(item)


def holds_state(value: Any) -> bool:
    """Whether the inputs hold a stateful object (`_is_state`) beside their tensors and plain values."""
    found = False

    def leaf(item: Any) -> Any:
        nonlocal found
        found = found or _is_state(item)
        return item

    map_tensors(value, lambda t: t, leaf)
    return found


def replayable(calls: list[Any]) -> list[Any]:
    """The calls of one pass, from a fresh copy of their starting state when they hold stateful objects.

    A call that takes a KV cache grows it: replayed twice (eager, then compiled), the second run would
    start from the first's cache. So each pass gets copies of those objects, taken together (one memo:
    a cache that several calls share stays shared, and the pass re-runs them in order as the script
    did); a pass of tensors and plain values alone gets the calls as they are, at no cost.
    """
    if not any(holds_state((c.args, c.kwargs)) for c in calls):
        return calls
    memo: dict[int, Any] = {}
    return [type(c)(fresh_copy(tuple(c.args), memo=memo), fresh_copy(dict(c.kwargs), memo=memo)) for c in calls]


def cast_copy(value: Any, fn: Any, memo: dict[int, Any] | None = None, depth: int = 0) -> Any:
    """`value` with each tensor replaced by `fn(tensor)`, those inside objects too (a KV cache's, for a
    float64 copy of a call), on copies: the original is left as it was. `memo`: objects shared between
    calls stay shared."""
    memo = {} if memo is None else memo

    def leaf(item: Any) -> Any:
        if not _is_state(item) or not hasattr(item, "__dict__"):
            return item
        if id(item) in memo:
            return memo[id(item)]
        ok, clone = _shallow(item)
        if not ok or depth >= _MAX_DEPTH:
            return item
        memo[id(item)] = clone
        for key, inner in vars(item).items():
            clone.__dict__[key] = cast_copy(inner, fn, memo, depth + 1)
        return clone

    return map_tensors(value, fn, leaf)


def _shallow(value: Any) -> tuple[bool, Any]:
    try:
        return True, copy.copy(value)
    except Exception:  # noqa: BLE001 - copy.copy raises whatever __reduce__ raises: share the object
        return False, None
