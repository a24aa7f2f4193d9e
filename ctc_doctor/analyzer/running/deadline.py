"""A wall-clock limit for a block of Python code (the analysis, one bisection trial).

SIGALRM raises `DeadlineExceeded`, a BaseException so Dynamo's `except Exception` handlers cannot
swallow it. It works in the main thread on Unix only; elsewhere the block runs unlimited and the
context manager yields False so the caller can say so. Limits are never nested.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class DeadlineExceeded(BaseException):
    """The limit passed."""


def enforceable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[bool]:
    """Raise DeadlineExceeded in the block after `seconds`; yields whether the limit is enforced."""
    if not (seconds and seconds > 0 and enforceable()):
        yield False
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise DeadlineExceeded()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
