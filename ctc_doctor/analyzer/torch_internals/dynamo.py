"""Dynamo itself: resetting and preserving its state, backend lookup, its exceptions, and explain.

Owns no state: a reset asks the CUDA graph log (`cudagraphs.fold_cudagraph_skips`) to count torch's
skip counter before the counter is cleared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo

from ..readers.sources import RawFrame
from .cudagraphs import fold_cudagraph_skips


def fresh_dynamo_state() -> None:
    """Forget compiled code, counters and metrics so the next compile starts from zero ids."""
    torch._dynamo.reset()
    utils = torch._dynamo.utils
    counters = getattr(utils, "counters", None)
    if counters is not None:
        fold_cudagraph_skips()  # before the counter goes
        counters.clear()
    clear = getattr(utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


def reset_dynamo_quietly() -> None:
    """`fresh_dynamo_state()` for a `finally`: a reset that fails must not hide the block's own
    result or the error that ended it."""
    with contextlib.suppress(Exception):
        fresh_dynamo_state()


@contextlib.contextmanager
def preserved_dynamo_state() -> Iterator[None]:
    """Put `torch._dynamo.config` and Dynamo's counters back as they were (compiled caches are not kept)."""
    config = torch._dynamo.config
    saved_config = config.get_config_copy() if hasattr(config, "get_config_copy") else None
    counters = getattr(torch._dynamo.utils, "counters", None)
    saved_counters = {k: dict(v) for k, v in counters.items()} if counters is not None else None
    try:
        yield
    finally:
        if saved_config is not None:
            with contextlib.suppress(Exception):  # a key torch rejects on reload must not mask the test result
                config.load_config(saved_config)
        if counters is not None and saved_counters is not None:
            counters.clear()
            for key, values in saved_counters.items():
                counters[key].update(values)


def lookup_backend(name: str) -> Callable[..., Any]:
    """The backend callable registered under `name` (eager, aot_eager, inductor...)."""
    return torch._dynamo.lookup_backend(name)  # type: ignore[no-any-return]


def break_details(exc: BaseException | None) -> tuple[str | None, list[RawFrame], RawFrame | None]:
    """(gb_type, real_stack outermost first, innermost user frame) of a Dynamo `Unsupported` exception.

    gb_type is on Unsupported since about 2.8 (None before); real_stack holds the frames Dynamo was
    tracing, inlined ones included; the innermost frame is set when the exception escaped a compile.
    """
    gb_type = getattr(exc, "gb_type", None)
    stack = [(f.filename, f.lineno or 0, f.name, f.line) for f in (getattr(exc, "real_stack", None) or [])]
    inner = getattr(exc, "innermost_user_frame_summary", None)
    innermost = (inner.filename, inner.lineno or 0, inner.name, inner.line) if inner is not None else None
    return (str(gb_type) if gb_type else None), stack, innermost


def is_unsupported(exc: BaseException) -> bool:
    """A graph break escaping (fullgraph=True or a frame Dynamo could not handle)."""
    exc_mod = getattr(torch._dynamo, "exc", None)
    unsupported = getattr(exc_mod, "Unsupported", None)
    return unsupported is not None and isinstance(exc, unsupported)


@dataclass
class ExplainResult:
    graph_count: int
    graph_break_count: int
    break_reasons: list[tuple[str, list[tuple[str, int, str]]]]
    op_count: int


def graph_compile_reason(gm: Any) -> tuple[bool, tuple[str, list[tuple[str, int, str]]] | None]:
    """(attached, (reason, user stack) when the graph ended at a graph break) of a graph Dynamo hands
    a backend. Dynamo sets `gm.compile_subgraph_reason` (a GraphCompileReason) on every graph; explain
    and `ExplainWithBackend` read the same attribute (`_explain_graph_detail`, 2.6 to 2.15)."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None:
        return False, None
    if not getattr(reason, "graph_break", False):
        return True, None
    stack = [(f.filename, f.lineno or 0, f.name) for f in (getattr(reason, "user_stack", None) or [])]
    return True, (str(getattr(reason, "reason", reason)), stack)


def run_explain(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExplainResult | None:
    """torch._dynamo.explain on one call, traced a second time. It resets Dynamo before and after.
    Used where graphs carry no compile reason (see `graph_compile_reason`)."""
    explain = getattr(torch._dynamo, "explain", None)
    if explain is None:
        return None
    out = explain(fn)(*args, **kwargs)
    reasons = []
    for r in getattr(out, "break_reasons", []) or []:
        stack = [(f.filename, f.lineno or 0, f.name) for f in (getattr(r, "user_stack", None) or [])]
        reasons.append((str(getattr(r, "reason", r)), stack))
    return ExplainResult(
        graph_count=int(out.graph_count),
        graph_break_count=int(out.graph_break_count),
        break_reasons=reasons,
        op_count=int(getattr(out, "op_count", 0) or 0),
    )
