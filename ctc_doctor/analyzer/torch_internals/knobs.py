"""Fix and benchmark knobs: `torch._dynamo.config` patches, mark_dynamic, disable, inductor caches,
the registered backends, and compiling or uncompiling modules in place (regional compile).

Owns no state: every knob is a context manager that puts back what it changed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._dynamo


def config_has(name: str) -> bool:
    """Whether `torch._dynamo.config` has this option (its module proxy hides some names from dir())."""
    return hasattr(torch._dynamo.config, name)


# Options renamed in torch 2.7 (PR #143709): the old names remain as aliases in newer torch.
_CONFIG_ALIASES = {"recompile_limit": "cache_size_limit", "fail_on_recompile_limit_hit": "fail_on_cache_limit_hit"}


def _resolve_callable(dotted: str) -> Any:
    """`print` -> builtins.print; `logging.Logger.debug` -> that function (report data names functions)."""
    import builtins

    if "." not in dotted:
        if not hasattr(builtins, dotted):
            raise ValueError(f"no builtin named {dotted!r}")
        return getattr(builtins, dotted)
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                raise ValueError(f"{dotted!r} does not exist here")
            value = getattr(value, attr)
        return value
    raise ValueError(f"cannot import {dotted!r}")


class ConfigOptionMissing(ValueError):
    """A `torch._dynamo.config` option that this torch does not have."""


@contextlib.contextmanager
def dynamo_config(patch: dict[str, Any]) -> Iterator[None]:
    """Patch `torch._dynamo.config` for the block. Set-valued options get the named functions added.

    Raises ConfigOptionMissing (before changing anything) when an option does not exist in this torch.
    """
    if not patch:
        yield
        return
    config = torch._dynamo.config
    resolved: dict[str, Any] = {}
    for name, value in patch.items():
        key = name if config_has(name) else _CONFIG_ALIASES.get(name, name)
        if not config_has(key):
            raise ConfigOptionMissing(f"this torch ({torch.__version__}) has no torch._dynamo.config.{name}")
        current = getattr(config, key)
        if isinstance(current, (set, frozenset)) and isinstance(value, list):
            resolved[key] = set(current) | {_resolve_callable(v) for v in value}
        else:
            resolved[key] = value
    with config.patch(**resolved):
        yield


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    torch._dynamo.mark_dynamic(tensor, dim)


def tensor_state(t: torch.Tensor) -> tuple[Any, ...] | None:
    """What a copy of `t` must still match to stand for it: its version counter (an in-place write through
    autograd moves it), shape, strides, dtype and requires_grad. None for a view (its copy would not alias
    its base's), an inference tensor (no version counter), a sparse one, or where this torch has no
    `_version` or `_base`."""
    try:
        if t.is_inference() or t.is_sparse or getattr(t, "_base", None) is not None:
            return None
        version = getattr(t, "_version", None)
        if not isinstance(version, int):
            return None
        return (version, tuple(t.shape), t.stride(), t.dtype, t.requires_grad)
    except (RuntimeError, NotImplementedError):
        return None


def in_backward() -> bool | None:
    """Whether this thread is running a backward now (a checkpointed block's forward recomputed inside it):
    `torch._C._current_graph_task_id`, private; None where this torch lacks it."""
    current = getattr(torch._C, "_current_graph_task_id", None)
    if current is None:
        return None
    try:
        return bool(current() != -1)
    except RuntimeError:
        return None


def skip_frame(code: Any) -> bool:
    """Dynamo never traces frames of `code` (as torch's own compile wrapper): `eval_frame.skip_code`,
    private; False where this torch lacks it."""
    skip = getattr(getattr(torch._dynamo, "eval_frame", None), "skip_code", None)
    if skip is None or code is None:
        return False
    skip(code)
    return True


def disable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compiler.disable (public since 2.1; `torch._dynamo.disable` before)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "disable"):
        return compiler.disable(fn)  # type: ignore[no-any-return]
    return torch._dynamo.disable(fn)  # type: ignore[no-any-return]


@contextlib.contextmanager
def fresh_inductor_cache(enabled: bool = True, keep_in: str | None = None) -> Iterator[bool]:
    """A temporary, empty inductor cache directory (in-memory caches cleared) for the block; with `keep_in`,
    that directory, kept after the block (another block may compile from what this one left there).

    `torch._inductor.utils.fresh_cache` (2.8+; `fresh_inductor_cache` before). Yields False when
    neither exists (or, with `keep_in`, neither takes a directory), so the caller can say the cold compile
    may have been warm.
    """
    if not enabled:
        yield False
        return
    try:
        utils = importlib.import_module("torch._inductor.utils")
    except ImportError:
        yield False
        return
    if keep_in is not None:
        with _inductor_cache_in(utils, keep_in) as kept:
            yield kept
        return
    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)
    if fresh is None:
        yield False
        return
    with fresh():
        yield True


_CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextlib.contextmanager
def _inductor_cache_in(utils: Any, folder: str) -> Iterator[bool]:
    """Inductor's caches in `folder` itself for the block (torch's `fresh_cache(dir=)` makes a new folder
    inside it each time), its in-memory caches cleared before and after, as `fresh_cache` does."""
    clear = getattr(utils, "clear_caches", None) or getattr(utils, "clear_inductor_caches", None)
    if clear is None:
        yield False
        return
    saved = {name: os.environ.get(name) for name in _CACHE_ENV}
    clear()
    os.environ.update(TORCHINDUCTOR_CACHE_DIR=folder, TRITON_CACHE_DIR=os.path.join(folder, "triton"))
    try:
        yield True
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        clear()


def counts_cache_hits() -> bool:
    """Whether Dynamo's compile metrics count inductor's FX graph cache hits and misses (`CompileStats`)."""
    try:
        utils = importlib.import_module("torch._dynamo.utils")
    except ImportError:
        return False
    fields = getattr(getattr(utils, "CompilationMetrics", None), "__dataclass_fields__", {})
    return "inductor_fx_local_cache_hit_count" in fields and "inductor_fx_local_cache_miss_count" in fields


@contextlib.contextmanager
def random_like_eager() -> Iterator[bool]:
    """`torch._inductor.config.fallback_random = True` for the block: inductor draws random numbers with
    eager's kernels (dropout, rand) instead of its own, so a seeded compiled run matches a seeded eager
    one. Yields False (and changes nothing) where the option is missing."""
    try:
        config = importlib.import_module("torch._inductor.config")
    except ImportError:
        yield False
        return
    if not hasattr(config, "fallback_random"):
        yield False
        return
    with config.patch({"fallback_random": True}):
        yield True


def backend_names() -> list[str] | None:
    """Every registered torch.compile backend (debug ones included); None when torch cannot say."""
    try:
        return list(torch.compiler.list_backends(exclude_tags=()))
    except Exception:  # noqa: BLE001 - an older torch: the compile itself will say
        try:
            return list(torch._dynamo.list_backends(exclude_tags=()))  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            return None


@contextlib.contextmanager
def uncompiled(module: Any) -> Iterator[None]:
    """A module compiled in place calls its plain forward in the block; restored after. In place means
    `nn.Module.compile()` (its private `_compiled_call_impl`, 2.2+) or a compiled forward assigned to the
    instance, `model.forward = torch.compile(model.forward)` (or any wrapper of it that keeps torch's
    `_torchdynamo_orig_callable`, the class's forward). Anything else is left as it is."""
    if not isinstance(module, torch.nn.Module):
        yield
        return
    saved = getattr(module, "_compiled_call_impl", None)
    forward = module.__dict__.get("forward")
    original = getattr(forward, "_torchdynamo_orig_callable", None)
    compiled_forward = getattr(original, "__func__", original) is type(module).forward
    if saved is not None:
        module._compiled_call_impl = None
    if compiled_forward:
        del module.__dict__["forward"]  # the class's forward, bound to this module (and to any copy of it)
    try:
        yield
    finally:
        if saved is not None:
            module._compiled_call_impl = saved
        if compiled_forward:
            module.__dict__["forward"] = forward


@contextlib.contextmanager
def compiled_in_place(modules: list[torch.nn.Module], compile_fn: Callable[[Any], Any]) -> Iterator[None]:
    """Each module's `forward` through `compile_fn(its forward)` for the duration of the block (an instance
    attribute, then removed), so the model's own code runs eagerly around them. Not `module.compile()`: on
    a `torch.nn` container (a `Sequential`) that compiles nothing on torch 2.13, its `_call_impl` being
    torch's own code, which Dynamo skips; a compiled `forward` is the user's frame either way."""
    saved = [m.__dict__.get("forward") for m in modules]
    try:
        for m in modules:
            m.forward = compile_fn(m.forward)
        yield
    finally:
        for m, previous in zip(modules, saved, strict=True):
            if previous is None:
                m.__dict__.pop("forward", None)
            else:
                m.forward = previous


@contextlib.contextmanager
def regional_compile(modules: list[torch.nn.Module], **compile_kwargs: Any) -> Iterator[None]:
    """`module.compile(**kw)` on each block for the duration of the block, then undone.

    nn.Module.compile (2.2+) keeps the compiled call in the private `_compiled_call_impl`; setting it
    back to None restores plain eager calls, so the user's modules end as they started.
    """
    saved = [getattr(m, "_compiled_call_impl", None) for m in modules]
    try:
        for m in modules:
            m.compile(**compile_kwargs)
        yield
    finally:
        for m, previous in zip(modules, saved, strict=True):
            m._compiled_call_impl = previous
