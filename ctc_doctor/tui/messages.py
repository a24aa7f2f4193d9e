"""Messages between the live run's reader threads, the screens and the app."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class ProgressReported(Message):
    """The analysis child process reached `phase` (`done` of `total`; total 0 means unknown)."""

    phase: str
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
