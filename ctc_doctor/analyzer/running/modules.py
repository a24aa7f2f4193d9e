"""nn.Module paths and calls: the sort key of a path, a forward's argument names, the one-line
description of a call's inputs, and forward pre-hooks on every module of a model.

The higher-precision reference block by block (`precision`), for a model whose whole cast copy, or
whose activations at float64, would not fit beside it:

- inference: `cast_blockwise`, each module's own tensors cast only while its forward runs;
- training: `checkpointed`, each repeated block's forward under non-reentrant activation checkpointing
  (the forward keeps each block's input only, and the backward recomputes one block's activations at a
  time, from the same random state); on an accelerator, `saved_on_host`, every tensor autograd saves for
  the backward kept on the host and brought back when the backward needs it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from .tensors import iter_tensors


def path_key(path: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in path.split(".")] if path else []


def describe_inputs(args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str] | None = None, device: str | None = None) -> str:
    """`x: float32[4, 8], scale: float=2.0` for the report; `device`: the one the tensors ran on, where
    these are host copies."""
    parts = []
    for i, a in enumerate(args):
        label = names[i] if names and i < len(names) else f"arg{i}"
        parts.append(f"{label}: {_describe(a, device)}")
    parts.extend(f"{k}: {_describe(v, device)}" for k, v in kwargs.items())
    return ", ".join(parts)


def _describe(value: Any, device: str | None = None) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        where = device or str(value.device)
        dev = "" if where == "cpu" else f"@{where}"
        return f"{dtype}{list(value.shape)}{dev}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v, device) for v in value[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"{type(value).__name__}({inner}{more})"
    if isinstance(value, dict):
        return "dict(" + ", ".join(f"{k}={_describe(v, device)}" for k, v in list(value.items())[:4]) + ")"
    if isinstance(value, (int, float, bool, str)) or value is None:
        return f"{type(value).__name__}={value!r}"
    return type(value).__name__


def forward_arg_names(model: Any) -> list[str] | None:
    try:
        fn = model.forward if isinstance(model, torch.nn.Module) else model
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@contextlib.contextmanager
def forward_pre_hooks(
    modules: Mapping[str, torch.nn.Module], hook_for: Callable[[str], Callable[..., Any]], *, with_kwargs: bool = False
) -> Iterator[None]:
    """`hook_for(path)` as a forward pre-hook on each module for the block; removed on exit."""
    handles = [m.register_forward_pre_hook(hook_for(path), with_kwargs=with_kwargs) for path, m in modules.items()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def modular_paths(model: torch.nn.Module) -> list[str]:
    """Modular compilation's parts: each top-level child the forward can call (a ModuleList or ModuleDict
    gives its items), leaving out torch.nn leaves without parameters (an activation, a dropout). Fewer
    than two parts of which at least one is more than one torch.nn layer: none (nothing modular to try)."""
    paths: list[str] = []
    for name, child in model.named_children():
        items = child.named_children() if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) else [("", child)]
        for sub, module in items:
            leaf = not any(True for _ in module.children())
            if leaf and type(module).__module__.startswith("torch.nn") and not any(True for _ in module.parameters()):
                continue
            paths.append(f"{name}.{sub}" if sub else name)
    composite = any(any(True for _ in model.get_submodule(p).children()) for p in paths)
    return paths if len(paths) >= 2 and composite else []


# ---------------------------------------------------------------------------------------------
# the reference block by block
# ---------------------------------------------------------------------------------------------

CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)


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


def repeated_blocks(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The blocks a training reference runs one at a time, by path: the children with parameters of the
    container (a ModuleList, ModuleDict or Sequential of at least two such children, the model itself
    included) that holds the most parameters; [] when there is none."""
    best: list[tuple[str, torch.nn.Module]] = []
    most = 0
    for path, module in model.named_modules():
        if not isinstance(module, CONTAINERS):
            continue
        children = [(f"{path}.{n}" if path else n, c) for n, c in module.named_children() if any(True for _ in c.parameters())]
        held = sum(p.numel() for _, c in children for p in c.parameters())
        if len(children) >= 2 and held > most:
            best, most = children, held
    return best


def block_share(model: torch.nn.Module, blocks: list[tuple[str, torch.nn.Module]]) -> float:
    """The share of the model's parameters the blocks hold (how much of its activations they make, roughly)."""
    total = sum(p.numel() for p in model.parameters())
    held = {id(p): p.numel() for _, b in blocks for p in b.parameters()}  # a parameter the blocks share, once
    return min(1.0, sum(held.values()) / total) if total else 0.0


class RecomputedOtherwise(RuntimeError):
    """A checkpointed block's recomputation in the backward gave other values than its forward."""


@contextlib.contextmanager
def checkpointed(blocks: list[tuple[str, torch.nn.Module]]) -> Iterator[None]:
    """Each block's forward under `torch.utils.checkpoint` (non-reentrant, the random state preserved) for
    the block, then as it was: a forward with grad keeps only each block's inputs, and the backward
    recomputes one block's activations at a time. The recomputation runs whole and its outputs are checked
    against the forward's (their sums): a block that mutates a cache or counts its calls raises (torch's
    CheckpointError on other shapes, `RecomputedOtherwise` on other values), and the caller tries another
    way rather than judging with gradients of another computation."""
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

    own: list[tuple[torch.nn.Module, Any]] = []

    def wrapped(inner: Any, name: str) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if not torch.is_grad_enabled():
                return inner(*args, **kwargs)
            first: list[list[torch.Tensor]] = []

            def run(*a: Any, **k: Any) -> Any:
                out = inner(*a, **k)
                with torch.no_grad():
                    sums = [t.detach().double().sum() for t in iter_tensors(out) if t.is_floating_point()]
                if not first:
                    first.append(sums)
                elif len(sums) != len(first[0]) or not all(
                    torch.allclose(a_, b_, rtol=1e-6, atol=1e-12, equal_nan=True) for a_, b_ in zip(sums, first[0], strict=True)
                ):
                    raise RecomputedOtherwise(f"{name} recomputed in the backward gives other values than its forward")
                return out

            with set_checkpoint_early_stop(False):  # the whole block again, so its outputs can be checked
                # the block's keywords reach the block, none taken by checkpoint's own (`debug`, `context_fn`...)
                return checkpoint(functools.partial(run, **kwargs), *args, use_reentrant=False)

        return forward

    try:
        for path, block in blocks:
            own.append((block, block.__dict__.get("forward")))
            block.forward = wrapped(block.forward, f"{path} ({type(block).__name__})")  # type: ignore[method-assign]
        yield
    finally:
        for block, previous in own:
            if previous is None:
                del block.forward
            else:
                block.forward = previous  # type: ignore[method-assign]


def saved_on_host(device: str) -> contextlib.AbstractContextManager[Any]:
    """Every tensor autograd saves for the backward kept on the host (pinned for a CUDA device) and brought
    back to its device when the backward needs it."""
    return torch.autograd.graph.save_on_cpu(pin_memory=device.startswith("cuda") and torch.cuda.is_available())
