"""Recompiles a run pays once, by design, marked `expected` rather than raised as causes.

Some changes happen once in a loop and never again; they are the price of the loop, not something to fix,
and neither padding nor `dynamic=True` removes them:
  - a size that becomes 1 (a length of N, then 1: a KV-cache decoder's prefill, then its one-token steps;
    a request batch of one): torch specializes the sizes 0 and 1, so the first call of that size gets a
    graph of its own, once, whatever the model is;
  - the last, smaller batch (a DataLoader's last partial batch): dim 0 drops once, after two calls or more
    of the full size, and nothing recompiles after it; `drop_last=True` avoids it;
  - one new size of an input, once, then two calls or more that automatic dynamic shapes served without
    recompiling, the input taking no third size above 1 over the calls (a second prompt of another length
    between one-token steps): `mark_settled`, once the calls' shapes are known;
  - in a decoding loop (`generate` drove the compiled object, or the recompiles themselves show it: a
    prefill → decode change, then a growth by one), the cache's first growth (N, then N + 1: automatic
    dynamic shapes compile that length as dynamic, and no later step recompiles) and a cache whose layers
    are set up lazily (`is_initialized` False, then True).
They are marked with why before the suggestions are made (none is made for them), counted apart in the
summary and kept out of the verdict. Anything else (a third value, a dtype, a value guard) stays a cause.
A module's own first-call set-up (an attribute that was None) is not marked: one eager call before
compiling removes it, which `fix` verifies (`readers/compile_time.recurrence` prices it as a one-off).
Torch-free.
"""

from __future__ import annotations

from ...reports import models as rm
from .causes import input_names, recompile_causes
from .compile_time import recurrence, settled_after_one

PREFILL = (
    "prefill → decode: the first one-token step compiles once for the length 1 (torch specializes "
    "sizes 0 and 1); every later step reuses that graph"
)
SIZE_ONE = (
    "a size of 1, once: torch specializes sizes 0 and 1, so the first call of that size compiles a graph of its "
    "own; later calls of size 1 reuse it (marking the dimension dynamic cannot cover it)"
)
LAZY = "the cache's lazy set-up: each layer's cache is created at the first step that writes it, once; every later step finds it set up"
GROWTH = "the cache's first growth: automatic dynamic shapes compile this length as dynamic from here on, and no later step recompiles"
SETTLED = (
    "one new size, once: automatic dynamic shapes compiled the dimension as dynamic, and every later call (two or "
    "more) reused that graph; marking it dynamic first would save that one compile"
)
PARTIAL_BATCH = (
    "the last, smaller batch (a DataLoader's last partial batch): it compiles once more, and nothing recompiles "
    "after it; `drop_last=True` on the DataLoader avoids it, or accept one extra compile"
)
ONE_OFFS = (PREFILL, SIZE_ONE, LAZY, GROWTH, PARTIAL_BATCH, SETTLED)
"""Every reason a recompile is marked expected here."""
MIN_FULL_BATCHES = 2
"""Calls of the full size before a smaller one that make it a last partial batch (one call before it is a
batch size that changed, as the showcase's 2 → 3 or a 3 → 2)."""


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _one_call(cause: rm.RecompileCause, by_id: dict[str, rm.Recompile]) -> int | None:
    """The one workload call every recompile of the cause happened in, else None."""
    calls = {by_id[r].call_index for r in cause.recompiles if r in by_id}
    return calls.pop() if len(calls) == 1 else None


def _why(cause: rm.RecompileCause, report: rm.Report, by_id: dict[str, rm.Recompile]) -> str | None:
    """The one-off this cause is, else None: SIZE_ONE and PARTIAL_BATCH wherever they happen,
    GROWTH and LAZY (the decoding loop's) for `mark_one_offs` to keep for loops."""
    lazy_flag = (cause.source or "").endswith("initialized") and set(cause.values) <= {"False", "True"}
    if cause.kind in ("attribute", "value") and lazy_flag:
        return LAZY
    if cause.kind != "size" or len(cause.values) != 2:
        return None
    before, after = (_int(v) for v in cause.values)
    if before is None or after is None:
        return None
    if after == 1 and before > 1:
        return SIZE_ONE
    calls = report.target.calls
    settled = cause.first_call is not None and calls - cause.first_call >= 2  # later steps ran without recompiling
    if after == before + 1 and settled:
        return GROWTH
    at = _one_call(cause, by_id)
    if cause.dim == 0 and 1 < after < before and at is not None and at >= MIN_FULL_BATCHES:
        return PARTIAL_BATCH
    return None


def mark_one_offs(report: rm.Report, driver: str | None = None) -> int:
    """Mark the recompiles a run pays once by design (`Recompile.expected`) and recount the verdict; returns
    how many were marked. The decoding loop's own one-offs (a cache's growth, its lazy set-up) only where a
    loop is one: `generate` drove the compiled object (`driver`), or the recompiles show a prefill → decode
    change and then a growth by one."""
    by_id = {rc.id: rc for rc in report.recompiles}
    causes = recompile_causes(report.recompiles, (), input_names(report))
    why = {c.id: _why(c, report, by_id) for c in causes}
    looks_like_loop = SIZE_ONE in why.values() and GROWTH in why.values()
    in_loop = driver == "generate" or looks_like_loop
    marked = 0
    for cause in causes:
        reason = why[cause.id]
        if reason is None:  # a switch made once (grad mode, train/eval): its kind's own leaning, priced alike
            recurs, reason = recurrence(cause, report)
            reason = reason if recurs == "one_off" else None
        if reason is None or (reason in (GROWTH, LAZY) and not in_loop):
            continue
        if reason == SIZE_ONE and in_loop:
            reason = PREFILL
        for rid in cause.recompiles:
            if by_id[rid].expected is None:
                by_id[rid].expected = reason
                marked += 1
    if marked:
        rm.refresh_verdict(report)
    return marked


def mark_settled(report: rm.Report, shapes: dict[str, list[tuple[int, ...] | None]]) -> int:
    """Mark a size cause of an input expected (SETTLED) when it changed once and then settled
    (`compile_time.settled_after_one`) and the input's dim took no third size above 1 over the calls
    (`shapes`: each forward argument's shape per call); returns how many recompiles were marked. One that
    keeps taking new sizes (batches of 4, 5, 6, 7) stays a cause: marking it dynamic saves its compile."""
    by_id = {rc.id: rc for rc in report.recompiles}
    marked = 0
    for cause in recompile_causes([r for r in report.recompiles if not r.expected], (), input_names(report)):
        if cause.dim is None or not settled_after_one(cause, report):
            continue
        seen = shapes.get(cause.source or "", [])
        sizes = {s[cause.dim] for s in seen if s is not None and cause.dim < len(s) and s[cause.dim] > 1}
        if not seen or len(sizes) > 2:
            continue
        for rid in cause.recompiles:
            by_id[rid].expected = SETTLED
            marked += 1
    if marked:
        rm.refresh_verdict(report)
    return marked


def one_off_note(report: rm.Report) -> str | None:
    """The note a report with one-offs marked carries: how many, and that they are not causes to fix."""
    n = report.summary.expected_recompiles
    if not n:
        return None
    return (
        f"{n} recompile(s) are one-offs the run pays once by design (the causes marked expected: a size of 1, the "
        "last partial batch, a switch made once, a decoding loop's steps): not in the verdict, and no suggestion for them."
    )
