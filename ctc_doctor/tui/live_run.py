"""LiveRun: the analysis as a child process (`python -m ctc_doctor ... --progress-fd N`).

A child process, not a thread: compiling holds the GIL for long stretches, can crash the interpreter or
hang, and SIGALRM timeouts only work in a main thread. The child writes one JSON object per progress
step to a pipe and the report to a file; Escape kills its whole process group. No Textual here.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

from ..progress import ProgressEvent


def _without_json(args: list[str]) -> tuple[list[str], str | None]:
    """Drop `--json PATH` / `--json=PATH` from args; return the rest and PATH."""
    out: list[str] = []
    path = None
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--json":
            path = args[i + 1] if i + 1 < len(args) else None
            skip = True
        elif arg.startswith("--json="):
            path = arg.split("=", 1)[1]
        else:
            out.append(arg)
    return out, path


def _split_script(args: list[str]) -> tuple[list[str], list[str]]:
    """ctc-doctor's arguments and, from `--` on, the script's (`run -- train.py --json x`)."""
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i:]
    return args, []


@dataclass
class LiveRun:
    """One analysis in a child process. `args` are ctc-doctor's arguments (`demo`, `pkg.mod:build --train`...)."""

    args: list[str]
    report_path: str | None = None
    """Where the child writes the report; a temporary file when None."""
    env: dict[str, str] | None = None
    cwd: str | None = None
    label: str = ""
    """What runs, for the screen title."""
    started: float = 0.0
    returncode: int | None = None
    cancelled: bool = False
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)
    _progress: TextIO | None = field(default=None, repr=False)
    _own_dir: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        ours, script = _split_script(self.args)  # `run ... -- train.py ARGS`: the script's are not ours
        args, path = _without_json([a for a in ours if a not in ("--tui", "--quiet", "-q")])
        if path == "-":
            path = None  # stdout is the terminal the TUI draws on
        self.args = args + script
        if self.report_path is None and path is None:
            # a directory of our own, made when the child starts and removed if it stays empty
            self._own_dir = os.path.join(tempfile.gettempdir(), f"ctc-doctor-{secrets.token_hex(6)}")
            path = os.path.join(self._own_dir, "report.json")
        if self.report_path is None:
            self.report_path = path
        self.label = self.label or " ".join(["ctc-doctor", *self.args])

    @property
    def command(self) -> list[str]:
        return self._command([])

    def _command(self, extra: list[str]) -> list[str]:
        ours, script = _split_script(self.args)
        return [sys.executable, "-m", "ctc_doctor", *ours, "--json", str(self.report_path), "--quiet", *extra, *script]

    def start(self) -> None:
        if self._own_dir is not None:
            os.makedirs(self._own_dir, mode=0o700, exist_ok=True)
        read_fd, write_fd = os.pipe()
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self.started = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                self._command(["--progress-fd", str(write_fd)]),
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                env=env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: cancel kills bisection children too
            )
        finally:
            os.close(write_fd)
        self._progress = os.fdopen(read_fd, encoding="utf-8", errors="replace")

    def progress(self) -> Iterator[ProgressEvent]:
        """Progress events until the child closes the pipe; malformed lines are skipped."""
        assert self._progress is not None
        with self._progress:
            for line in self._progress:
                event = ProgressEvent.parse(line)
                if event is not None:
                    yield event

    def output(self) -> Iterator[str]:
        """Lines of the child's stdout and stderr until it closes them."""
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            yield line.rstrip("\n")

    def wait(self) -> int:
        assert self._proc is not None
        self.returncode = self._proc.wait()
        if self._own_dir is not None:
            with contextlib.suppress(OSError):  # not empty: the report is there to browse
                os.rmdir(self._own_dir)
        return self.returncode

    def elapsed(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    def cancel(self, grace_s: float = 3.0) -> None:
        """Stop the child and everything it started: SIGTERM to its group, SIGKILL after `grace_s`."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self.cancelled = True
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
