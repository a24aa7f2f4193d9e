"""Recompiles a decoding loop pays once, by design, marked `expected` rather than raised as causes.

A compiled forward driven by `generate` (or by a hand-written loop of one-token steps) recompiles
twice and then holds: the first one-token step after the prefill (a length of N, then 1: torch
specializes the size 1, so the decode step gets its own graph) and the cache's first growth (N, then
N + 1: automatic dynamic shapes compile that length as dynamic, and no later step recompiles); a
cache whose layers are set up lazily adds one more (`is_initialized` False, then True). They are the
price of the loop, not something to fix: they are marked with why, counted apart in the
summary and kept out of the verdict and the suggestions. Anything else (a third value, a dtype, a
value guard) stays a cause. Torch-free.
"""

from __future__ import annotations

from ...reports import models as rm
from .causes import input_names, recompile_causes

PREFILL = (
    "prefill → decode: the first one-token step compiles once for the length 1 (torch specializes "
    "sizes 0 and 1); every later step reuses that graph"
)
LAZY = "the cache's lazy set-up: each layer's cache is created at the first step that writes it, once; every later step finds it set up"
GROWTH = "the cache's first growth: automatic dynamic shapes compile this length as dynamic from here on, and no later step recompiles"


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _why(cause: rm.RecompileCause, calls: int) -> str | None:
    """PREFILL, GROWTH or LAZY when the cause is that one-off, else None."""
    lazy_flag = (cause.source or "").endswith("initialized") and set(cause.values) <= {"False", "True"}
    if cause.kind in ("attribute", "value") and lazy_flag:
        return LAZY
    if cause.kind != "size" or len(cause.values) != 2:
        return None
    before, after = (_int(v) for v in cause.values)
    if before is None or after is None:
        return None
    if after == 1 and before > 1:
        return PREFILL
    settled = cause.first_call is not None and calls - cause.first_call >= 2  # later steps ran without recompiling
    if after == before + 1 and settled:
        return GROWTH
    return None


def mark_decoding_recompiles(report: rm.Report, driver: str | None) -> int:
    """Mark the one-off recompiles of a decoding loop (`Recompile.expected`) and recount the verdict;
    returns how many were marked. A loop is one when `generate` drove the compiled object (`driver`),
    or when the recompiles themselves show it: a prefill → decode change, then a growth by one."""
    causes = recompile_causes(report.recompiles, (), input_names(report))
    why = {c.id: _why(c, report.target.calls) for c in causes}
    looks_like_loop = PREFILL in why.values() and GROWTH in why.values()
    if driver != "generate" and not looks_like_loop:
        return 0
    by_id = {rc.id: rc for rc in report.recompiles}
    marked = 0
    for cause in causes:
        if why[cause.id] is not None:
            for rid in cause.recompiles:
                by_id[rid].expected = why[cause.id]
                marked += 1
    rm.refresh_verdict(report)
    return marked
