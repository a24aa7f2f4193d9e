"""One step of a long run's progress, typed, and the JSON-lines protocol that carries it between processes.

Every phase reports a `ProgressEvent`: which step of the run it is (`Step`), how far it is (`done` of
`total`), what within the step it is on (`subject`: an arm, a suggestion id, a module path) and, for
people, what it is doing (`activity`). Whoever listens reads the fields, never a label: the doctor's
own cost meter (`analyzer.resources.meter`: a step is a cost phase, an arm's own when it is one), the
CLI's progress bar, `run`'s one line per phase, the TUI's live mode. `label` is the one place a step
becomes text.

Writers across processes: the CLI (`--progress-fd`, for the TUI's live mode watching `analyze` or
`run`), a script's first rank (`analyzer.doors.script_report`, a file its parent follows) and the benchmark's
child. A line is one JSON object: `{"step": "arm", "subject": "compiled", "activity": "timing",
"timing": true, "done": 3, "total": 8, "elapsed_s": 1.234}` (`elapsed_s` optional). Torch-free, a leaf:
every layer may import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import IO, Any, Protocol


class Step(StrEnum):
    """A step of the doctor's run, in the order a full run takes them."""

    LOAD = "load"
    """Importing torch and the target, building the model."""
    SCRIPT = "script"
    """`run`: the user's script runs."""
    COMPILE = "compile"
    """The analysis: the workload's calls through torch.compile under capture."""
    EAGER = "eager run"
    """The analysis: the same calls without compile."""
    EXPLAIN = "explain"
    """explain's view of the first call, when it needs a call of its own."""
    REPORT = "report"
    """The analysis's findings assembled into the report."""
    SUGGEST = "suggest"
    BISECT = "bisect"
    """A fullgraph trial of one module (`subject`: its path)."""
    ACCURACY = "accuracy"
    """The accuracy bisection (`subject`: the module judged)."""
    FIX_REFERENCE = "fix reference"
    """The fix checks' numerics reference: eager, then float64."""
    FIX = "fix"
    """A fix check (`subject`: the suggestion id, `S1+S3` together, or `combined`)."""
    PROBE = "probe"
    """The shape probe."""
    BENCH = "bench"
    """The benchmark's own set-up: its child process, the compiler's warm-up."""
    BENCH_REFERENCE = "bench reference"
    """The benchmark's own numerics reference (float64)."""
    ARM = "arm"
    """A benchmark arm (`subject`: its name; `activity`: compiling, timing...)."""


@dataclass(frozen=True)
class ProgressEvent:
    """One progress step, typed (see the module doc)."""

    step: Step
    done: int = 0
    total: int = 0
    """0: unknown."""
    subject: str | None = None
    """What within the step: an arm's name, a suggestion id, a module path."""
    activity: str | None = None
    """What it does now, for people (`compiling (cold)`, `timing`); nothing reads it but a screen."""
    timing: bool = False
    """An arm is being timed: whoever samples the machine keeps quiet."""
    elapsed_s: float | None = None
    """Seconds since the writer started, when it says."""

    @property
    def label(self) -> str:
        """The step as people read it: `bench compiled: timing`, `fix S3`, `bisect layers.0`."""
        what = self.subject
        if self.step is Step.ARM:
            return f"bench {what}: {self.activity}" if self.activity else f"bench {what}"
        if self.step is Step.BENCH:
            return f"bench: {self.activity}" if self.activity else "bench"
        if self.step is Step.BENCH_REFERENCE:
            return "bench: numerics reference (float64)"
        if self.step is Step.FIX_REFERENCE:
            return "fix: numerics reference (eager, then float64)"
        if self.step is Step.ACCURACY:
            return f"accuracy: {what or self.activity or ''}".rstrip()
        if self.step is Step.PROBE:
            return "probe shapes"
        return f"{self.step.value} {what}" if what is not None else self.step.value

    def line(self) -> str:
        fields: dict[str, Any] = {k: v for k, v in asdict(self).items() if v not in (None, False)}
        fields["step"] = self.step.value
        fields["done"], fields["total"] = self.done, self.total
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
        return cls.of(data) if isinstance(data, dict) else None

    @classmethod
    def of(cls, data: dict[str, Any]) -> ProgressEvent | None:
        """The event a JSON object holds (`line`'s fields), or None when it holds none."""
        try:
            elapsed = data.get("elapsed_s")
            return cls(
                step=Step(data["step"]),
                done=int(data.get("done") or 0),
                total=int(data.get("total") or 0),
                subject=None if data.get("subject") is None else str(data["subject"]),
                activity=None if data.get("activity") is None else str(data["activity"]),
                timing=bool(data.get("timing")),
                elapsed_s=None if elapsed is None else float(elapsed),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def fields(self) -> dict[str, Any]:
        """The event as a JSON object (`of` reads it back)."""
        out: dict[str, Any] = json.loads(self.line())
        return out


class ProgressFn(Protocol):
    """`progress(event)`: a phase reports a step."""

    def __call__(self, event: ProgressEvent, /) -> None: ...


def no_progress(event: ProgressEvent, /) -> None:
    """The progress callback that reports nowhere."""


def stream_writer(fd: int) -> ProgressFn:
    """Events as lines on file descriptor `fd`, stamped with the time since this call. A watcher that
    went away stops nothing. Raises OSError when `fd` cannot be opened."""
    stream: IO[str] = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
    started = time.perf_counter()

    def write(event: ProgressEvent, /) -> None:
        with contextlib.suppress(OSError, ValueError):  # the watcher went away: keep going
            stamped = ProgressEvent(**{**asdict(event), "elapsed_s": time.perf_counter() - started})
            stream.write(stamped.line())
            stream.flush()

    return write


def file_writer(path: str) -> ProgressFn:
    """Events appended as lines to the file at `path` (unstamped; its reader keeps time)."""

    def write(event: ProgressEvent, /) -> None:
        with contextlib.suppress(OSError):  # progress is a courtesy; the report is what matters
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(event.line())

    return write
