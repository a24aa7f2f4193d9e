"""Torch's loggers: its records kept off stderr and counted, and handlers on its artifact loggers.

Owns the one `_QuietTorch` filter that `quiet_torch_stderr` blocks share (however they nest or
interleave), `COMPILER_LOGGERS`, the notes that fold the counted records, and `artifact_handler`,
which the trace (`perf_hints`) and the CUDA graph log (`cudagraphs`) put their handlers on with.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ...reports.labels import TORCH_LOG_NOTE
from ..readers.notes import counted_notes

COMPILER_LOGGERS = (
    "torch._dynamo",
    "torch._guards",
    "torch._inductor",
    "torch._functorch",
    "torch._subclasses",
    "torch._higher_order_ops",
    "torch._export",
    "torch.export",
    "torch.fx",
)
"""torch.compile's own loggers: what a script's run keeps off the terminal (torch.distributed,
DataLoader and the rest of the script's torch output stay where the script sent them)."""


class Handler(logging.Handler):
    """A handler `logging.shutdown` can always close: `Handler.__init__` registers the handler for shutdown
    before it makes its lock, so a Ctrl-C between the two left one without a lock, and the exit raised
    `AttributeError: ... no attribute 'lock'` over the run's own last line. `acquire` skips a None lock."""

    lock = None


def message_of(record: logging.LogRecord) -> str:
    """The record's formatted message, or its raw `msg` when torch formatted it badly."""
    try:
        return record.getMessage()
    except Exception:  # noqa: BLE001 - a badly formatted torch log line must not kill the run
        return str(record.msg)


@dataclass
class _QuietBlock:
    seen: Counter[tuple[str, str, str]]
    only: tuple[str, ...] | None

    def covers(self, name: str) -> bool:
        return self.only is None or any(name == p or name.startswith(p + ".") for p in self.only)


class _QuietTorch(logging.Filter):
    """Keeps torch's own log records off its stderr handlers: Dynamo's graph-break warnings (the report
    carries them in full) and the warnings and errors torch logs around a failing compile or a guard it
    cannot build, counted by (level, logger, text) into every block in force that covers the logger."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[_QuietBlock] = []
        self.users: dict[logging.Handler, int] = {}
        """Handler -> blocks using the filter on it: the filter leaves a handler with its last block."""
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("torch"):
            return True
        blocks = [b for b in list(self.blocks) if b.covers(record.name)]
        if not blocks:
            return True
        if record.levelno >= logging.WARNING:
            key = (record.levelname, record.name, _record_text(record))
            for block in blocks:
                block.seen[key] += 1
        return False

    def attach(self, handlers: list[logging.Handler], block: _QuietBlock) -> None:
        with self.lock:
            for handler in handlers:
                if self.users.get(handler, 0) == 0:
                    handler.addFilter(self)
                self.users[handler] = self.users.get(handler, 0) + 1
            self.blocks.append(block)

    def detach(self, handlers: list[logging.Handler], block: _QuietBlock) -> None:
        with self.lock:
            for handler in handlers:  # first the filters: an interrupt after this leaves torch's handlers as they were
                self.users[handler] -= 1
                if self.users[handler] == 0:
                    del self.users[handler]
                    handler.removeFilter(self)
            self.blocks = [b for b in self.blocks if b is not block]


def _record_text(record: logging.LogRecord) -> str:
    """The record's first line, and the first line of the exception it carries: torch logs
    "Error while creating guard:" with the ConstraintViolationError that says why in its traceback."""
    first = (message_of(record).strip().splitlines() or [""])[0]
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        try:
            why = (str(exc).strip().splitlines() or [""])[0]
        except Exception:  # noqa: BLE001 - an exception that cannot print itself must not kill the log call
            why = "(unprintable)"
        first = f"{first} {type(exc).__name__}: {why}".strip()
    return first[:240]


_QUIET = _QuietTorch()
"""One filter on torch's handlers however the blocks nest or interleave; each block adds its counter."""


def torch_log_notes(seen: Counter[tuple[str, str, str]], during: str, limit: int = 5) -> list[str]:
    """One note per distinct record torch logged, most frequent first, with its count."""
    return counted_notes(seen, f"{TORCH_LOG_NOTE} {during}", lambda key: f"{key[0]} {key[1]}: {key[2]}", limit)


@contextlib.contextmanager
def quiet_torch_stderr(enabled: bool, only: tuple[str, ...] | None = None) -> Iterator[Counter[tuple[str, str, str]]]:
    """Torch's log records (of the loggers under `only`, default all) stay off stderr in the block,
    unless the user set TORCH_LOGS; yields their counts. Blocks nest: a record counts in each block
    in force that covers its logger."""
    seen: Counter[tuple[str, str, str]] = Counter()
    if not enabled or os.environ.get("TORCH_LOGS"):
        yield seen  # the user asked for torch's logs: leave them alone
        return
    try:
        from torch._logging._internal import _is_torch_handler, log_registry
    except ImportError:
        yield seen
        return
    handlers: list[logging.Handler] = []
    for qname in log_registry.get_log_qnames():
        for handler in logging.getLogger(qname).handlers:
            if _is_torch_handler(handler) and handler not in handlers:
                handlers.append(handler)
    block = _QuietBlock(seen, only)
    _QUIET.attach(handlers, block)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Dynamo does not know how to trace")
            yield seen
    finally:
        _QUIET.detach(handlers, block)


def _artifact_enabled(name: str) -> bool:
    try:
        from torch._logging._internal import log_state
    except ImportError:
        return False
    return bool(log_state.is_artifact_enabled(name))


@contextlib.contextmanager
def artifact_handler(artifact: str, handler: logging.Handler, modules: tuple[str, ...] = ()) -> Iterator[None]:
    """`handler` on every logger of a torch log artifact (`perf_hints`, `cudagraphs`), at DEBUG for the
    block and kept off torch's stderr handlers unless the user asked for the artifact. `modules` are
    imported first: an artifact's loggers exist once the modules that log it are."""
    for mod in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(mod)
    try:
        from torch._logging._internal import log_registry

        names = sorted(n for n in log_registry.get_artifact_log_qnames() if n.endswith(f".__{artifact}"))
    except ImportError:
        names = []
    saved: list[tuple[logging.Logger, int, bool]] = []
    try:
        for name in names:
            log = logging.getLogger(name)
            saved.append((log, log.level, log.propagate))
            log.addHandler(handler)
            log.setLevel(logging.DEBUG)
            if not _artifact_enabled(artifact):
                log.propagate = False
        yield
    finally:
        for log, level, propagate in saved:
            log.removeHandler(handler)
            log.setLevel(level)
            log.propagate = propagate
