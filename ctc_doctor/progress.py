"""One step of a long run's progress, and the JSON-lines protocol that carries it between processes.

Writers: the CLI (`--progress-fd`, for the TUI's live mode watching `analyze` or `run`) and a script's
first rank (`analyzer.script_report`, a file its parent follows). Readers: the TUI's live mode
(`tui.live_run`) and `ctc-doctor run`'s parent (`analyzer.launch`). A line is one JSON object:
`{"phase": "bisect layers.0", "done": 3, "total": 0, "elapsed_s": 1.234}` (`elapsed_s` optional).
Torch-free, a leaf: every layer may import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

ProgressFn = Callable[[str, int, int], None]
"""`progress(phase, done, total)`: a phase reports a step (total 0: unknown)."""


def no_progress(phase: str, done: int, total: int) -> None:
    """The progress callback that reports nowhere."""


@dataclass(frozen=True)
class ProgressEvent:
    """One progress step as it crosses a process boundary."""

    phase: str
    done: int = 0
    total: int = 0
    elapsed_s: float | None = None
    """Seconds since the writer started, when it says."""

    def line(self) -> str:
        fields: dict[str, object] = {"phase": self.phase, "done": self.done, "total": self.total}
        if self.elapsed_s is not None:
            fields["elapsed_s"] = round(self.elapsed_s, 3)
        return json.dumps(fields) + "\n"

    @classmethod
    def parse(cls, line: str) -> ProgressEvent | None:
        """The event on a line, or None for anything else (a torn or foreign line is skipped)."""
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("phase"), str):
            return None
        try:
            elapsed = data.get("elapsed_s")
            return cls(
                phase=data["phase"],
                done=int(data.get("done") or 0),
                total=int(data.get("total") or 0),
                elapsed_s=None if elapsed is None else float(elapsed),
            )
        except (TypeError, ValueError):
            return None


def stream_writer(fd: int) -> ProgressFn:
    """Events as lines on file descriptor `fd`, stamped with the time since this call. A watcher that
    went away stops nothing. Raises OSError when `fd` cannot be opened."""
    stream: IO[str] = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
    started = time.perf_counter()

    def write(phase: str, done: int, total: int) -> None:
        with contextlib.suppress(OSError, ValueError):  # the watcher went away: keep going
            stream.write(ProgressEvent(phase, done, total, time.perf_counter() - started).line())
            stream.flush()

    return write


def file_writer(path: str) -> ProgressFn:
    """Events appended as lines to the file at `path` (unstamped; its reader keeps time)."""

    def write(phase: str, done: int, total: int) -> None:
        with contextlib.suppress(OSError):  # progress is a courtesy; the report is what matters
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(ProgressEvent(phase, done, total).line())

    return write
