"""Messages between the live run's reader threads, the screens and the app."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from .live_run import LiveRun


@dataclass
class ProgressReported(Message):
    """The analysis child process reached `phase` (as people read it), of stage `stage` (`done` of `total`;
    total 0 means unknown)."""

    phase: str
    stage: str
    done: int
    total: int
    elapsed_s: float


@dataclass
class OutputReceived(Message):
    """A line the analysis child process wrote (the model's prints, warnings, the one-line error)."""

    line: str


@dataclass
class RunFinished(Message):
    """The analysis child process exited."""

    returncode: int
    cancelled: bool


@dataclass
class ShowSection(Message):
    """Switch to a section, e.g. from a click on the navigation bar."""

    section: str


@dataclass
class LiveRunEnded(Message):
    """The live screen is done with its run: the app opens the report or says why there is none."""

    run: LiveRun
    returncode: int
    cancelled: bool
    tail: list[str] = field(default_factory=list)
    """The last lines of the run's output."""


@dataclass
class ShowMessage(Message):
    """Show a message screen (an error unless `error` is False)."""

    title: str
    message: str
    error: bool = True
