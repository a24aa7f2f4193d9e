"""CUDA graphs (reduce-overhead): step marks, and what torch logs about recordings and skips.

Owns the list of `cudagraph_log()` blocks in force. Resetting Dynamo clears torch's
`cudagraph_skips` counter, so the reset calls `fold_cudagraph_skips()` first: each block in force
keeps the skips counted so far.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch._dynamo

from .loggers import Handler, artifact_handler, message_of


def cudagraph_mark_step_begin() -> None:
    """A new iteration for CUDA graph trees: the outputs of the previous one may be overwritten."""
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()


@dataclass
class CudaGraphLog:
    """What torch's `cudagraphs` log and counters said in one block, every compile in it counted."""

    recordings: int = 0
    skip_count: int = 0
    skips: Counter[str] = field(default_factory=Counter)
    rerecords: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    _counted: int = 0
    """torch's `cudagraph_skips` counter when last read (fresh_dynamo_state() clears it: read first)."""

    def fold_skips(self) -> None:
        counters = getattr(torch._dynamo.utils, "counters", None)
        now = int(counters["inductor"]["cudagraph_skips"]) if counters is not None else 0
        self.skip_count += max(0, now - self._counted)
        self._counted = 0  # the counter starts again from zero


_CUDAGRAPH_LOGS: list[CudaGraphLog] = []
"""The cudagraph_log() blocks in force, whose skip counts fresh_dynamo_state() folds in before clearing."""


def fold_cudagraph_skips() -> None:
    """Every `cudagraph_log()` block in force counts torch's skip counter now, before a reset clears it."""
    for log in _CUDAGRAPH_LOGS:
        log.fold_skips()


_COMPILE_ID_PREFIX = re.compile(r"^\[[^\]]*\]\s*")
_SKIP_PREFIX = "skipping cudagraphs due to "


class _CudaGraphHandler(Handler):
    def __init__(self, sink: CudaGraphLog) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        text = _COMPILE_ID_PREFIX.sub("", message_of(record).strip())
        first = (text.splitlines() or [""])[0][:300]
        if first.startswith("Recording function="):
            self.sink.recordings += 1
        elif first.startswith("Re-recording function="):
            self.sink.rerecords[first.removeprefix("Re-recording ")] += 1
        elif first.lower().startswith(("skipping cudagraph", "disabling cudagraphs")):
            while first.startswith(_SKIP_PREFIX + _SKIP_PREFIX):  # torch's cudagraphs backend says it twice
                first = first.removeprefix(_SKIP_PREFIX)
            first = first.split(" Found from", 1)[0].strip()  # the op's stack trace follows, often empty
            self.sink.skips[first] += 1
        elif (
            record.levelno >= logging.WARNING
        ):  # e.g. "CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size"
            self.sink.warnings[first] += 1


@contextlib.contextmanager
def cudagraph_log() -> Iterator[CudaGraphLog]:
    """Collect CUDA graph recordings, skips and re-recordings (torch's `cudagraphs` artifact log, at
    DEBUG for the block, kept off stderr unless the user asked for it) and the skip counter."""
    result = CudaGraphLog()
    counters = getattr(torch._dynamo.utils, "counters", None)
    result._counted = int(counters["inductor"]["cudagraph_skips"]) if counters is not None else 0
    _CUDAGRAPH_LOGS.append(result)
    try:
        with artifact_handler(
            "cudagraphs", _CudaGraphHandler(result), ("torch._inductor.cudagraph_utils", "torch._inductor.cudagraph_trees")
        ):
            yield result
    finally:
        _CUDAGRAPH_LOGS[:] = [g for g in _CUDAGRAPH_LOGS if g is not result]
        result.fold_skips()
