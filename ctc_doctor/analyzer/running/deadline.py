"""Stopping a run part-way and keeping what it found: a wall-clock limit for a block of Python code (the
analysis, one bisection trial), and a signal (SIGTERM from a job's time limit, Ctrl-C) turned into an
exception the phases catch like the limit.

    Stopped                 (BaseException: Dynamo's `except Exception` handlers cannot swallow it)
    ├── DeadlineExceeded    SIGALRM: --timeout, or one trial's limit
    └── Interrupted         SIGTERM or SIGINT while `stoppable()` is in force (a KeyboardInterrupt too)

A phase that has measured part of its work attaches it to the exception as `partial` (its section so
far) before it goes on up: the benchmark's arms measured before the stop stay in the report.

SIGALRM works in the main thread on Unix only; elsewhere the block runs unlimited and the context
manager yields False so the caller can say so. Limits are never nested.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ...reports import models as rm


class Stopped(BaseException):
    """The run is to stop here: what was found before is reported."""

    partial: Any = None
    """The section a phase measured before the stop, when it keeps one (set on the way up)."""


class DeadlineExceeded(Stopped):
    """The limit passed."""


class Interrupted(Stopped, KeyboardInterrupt):
    """A signal asked the run to stop (SIGTERM: a job's time limit, `timeout`, a cancelled CI job;
    SIGINT: Ctrl-C). A KeyboardInterrupt too, so code that stops on Ctrl-C stops on it alike."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


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


_STOP_SIGNALS = ("SIGTERM", "SIGINT")


@contextlib.contextmanager
def stoppable() -> Iterator[bool]:
    """SIGTERM and SIGINT raise `Interrupted` in the block (the main thread only), so the run stops where it
    is and its report keeps what was found. The first signal is the only one caught: its handlers go back
    to the defaults, so a second signal while the report is written ends the process as it normally would.
    Yields whether the signals are caught."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    numbers = [getattr(signal, name) for name in _STOP_SIGNALS if hasattr(signal, name)]
    previous = {n: signal.getsignal(n) for n in numbers}

    def on_signal(signum: int, frame: Any) -> None:
        for n in numbers:
            signal.signal(n, signal.SIG_DFL if n != signal.SIGINT else signal.default_int_handler)
        raise Interrupted(signal.Signals(signum).name)

    for n in numbers:
        signal.signal(n, on_signal)
    try:
        yield True
    finally:
        for n, handler in previous.items():
            signal.signal(n, handler if handler is not None else signal.SIG_DFL)


def stop_record(stop: Stopped, during: str, timed_out: str) -> rm.ErrorRecord:
    """The report's error row for a run stopped `during` a step: `timed_out` (the message) for --timeout,
    phase `interrupted` for a signal (its name as the type)."""
    if isinstance(stop, Interrupted):
        message = f"stopped by {stop.signal_name} during {during}; partial report"
        return rm.ErrorRecord(phase="interrupted", type=stop.signal_name, message=message)
    return rm.ErrorRecord(phase="timeout", type="AnalysisTimeout", message=timed_out)


def limit_text(seconds: float | None) -> str:
    """`--timeout 150 s` (the limit a timeout message names)."""
    return f"--timeout {seconds:g} s" if seconds else "--timeout"
