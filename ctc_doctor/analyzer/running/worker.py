"""Child processes that rebuild the workload from its TARGET and serve requests, so that a crash
(a segfault in a compiler, an abort, a CUDA error) costs one request, not the run.

`ChildWorker` owns the process handling shared by isolated bisection trials (`workers.trial`) and
isolated benchmark arms (`workers.bench`): start without waiting, a startup limit, one JSON request
per line on stdin, JSON answers on the child's original stdout (intermediate `{"progress": ...}`
lines allowed before the answer), how a dead child died (`Death`: its signal or exit status and the
last lines of its stderr), and a kill of its whole process group. `rebuild_setup` is what a child
needs to rebuild the workload as the parent built it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...processes import signal_name, stderr_tail
from .settings import RunSettings

_IMPORTABLE = re.compile(r"^[\w.\-/\\]+(:[\w.]+)?$")
"""`pkg.mod`, `pkg.mod:build`, `path/file.py:build`: what a child can load (`<workload>`, `pytest ...` cannot)."""


def importable(target: str) -> bool:
    """Whether a child process can rebuild the workload from `target`."""
    return bool(_IMPORTABLE.match(target))


def rebuild_setup(target: str, settings: RunSettings) -> dict[str, Any] | None:
    """What a child needs to rebuild the workload as the parent did; None when `target` is not importable."""
    if not importable(target):
        return None
    return {
        "target": target,
        "seed": settings.seed,
        "backend": settings.backend,
        "train": settings.train,
        "device": settings.device,
        "sys_path": [p for p in sys.path if p],  # the target may sit on a path added at runtime
    }


@dataclass
class Death:
    """How a child ended: killed by a signal, or exited with a status; what it last wrote to stderr."""

    signal: str | None = None
    """SIGSEGV, SIGABRT, SIGKILL..., when a signal ended it."""
    exit_code: int | None = None
    """Its exit status, when it exited."""
    stderr_tail: list[str] = field(default_factory=list)
    """Its last non-empty lines of stderr (`processes.stderr_tail`)."""

    @property
    def how(self) -> str:
        """`SIGSEGV`, or `exit status 3`."""
        return self.signal or f"exit status {self.exit_code}"

    def text(self) -> str:
        """One line: how it died, and its last line of stderr."""
        last = f": {self.stderr_tail[-1][:300]}" if self.stderr_tail else ""
        if self.signal:
            return f"the child process died ({self.signal}){last}"
        return f"the child process failed ({self.how}){last}"


class ChildWorker:
    """One child process at a time running `python -m MODULE SETUP.json`, started again on demand after
    it dies. The child answers its first line (`{"ready": ...}` or `{"error": ...}`) once it has rebuilt
    the workload, then one answer per request; it may send `{"progress": [phase, done, total]}` lines
    before an answer. Its stderr goes to a log file in `workdir`, whose tail tells how it died."""

    def __init__(
        self,
        module: str,
        setup: dict[str, Any],
        *,
        startup_s: float,
        prefix: str,
        workdir: str | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.module = module
        self.pass_fds = pass_fds
        """Descriptors each child inherits (the numerics reference's file, read through the same descriptor)."""
        self.startup_s = startup_s
        self._own_dir = tempfile.TemporaryDirectory(prefix=prefix) if workdir is None else None
        self.workdir = workdir if workdir is not None else self._own_dir.name  # type: ignore[union-attr]
        self.setup_path = os.path.join(self.workdir, "worker_setup.json")
        with open(self.setup_path, "w", encoding="utf-8") as fh:
            json.dump(setup, fh)
        self.log_path = os.path.join(self.workdir, "worker.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready: dict[str, Any] | None = None
        """The running child's first answer, once it said it is ready."""
        self.started_at = 0.0
        self.starts = 0
        """Children started: one, plus one after each crash or hang."""
        self.startup_total_s = 0.0
        """Seconds from each start to its child's ready answer, summed."""
        self.first_start_s = 0.0
        """Seconds from the first start to its child's ready answer."""
        self._buffer = b""
        self._log_offset = 0

    def start(self) -> None:
        """Start a child now, without waiting for it (it imports torch and rebuilds the workload)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.close()
        self.starts += 1
        self.started_at = time.perf_counter()
        self._log_offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, self.setup_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                bufsize=0,
                cwd=os.getcwd(),
                start_new_session=True,  # its own process group: a kill takes whatever it started too
                pass_fds=self.pass_fds,
            )

    def wait_ready(self, limit_s: float | None) -> tuple[dict[str, Any] | None, str | None]:
        """Start a child if none runs and wait for its first answer: (the ready answer, None), or (None,
        why not): its `error` answer, how it died, or a startup over the limit (the child is then closed).
        When `limit_s` (the caller's time) runs out first, the child is left starting."""
        if self.ready is not None:
            return self.ready, None
        if self.proc is None:
            self.start()
        left = max(1.0, self.startup_s - (time.perf_counter() - self.started_at))
        answer = self.read(min(left, limit_s) if limit_s is not None else left)
        if answer is not None and "error" not in answer:
            self.ready = answer
            took = time.perf_counter() - self.started_at
            self.startup_total_s += took
            if self.starts == 1:
                self.first_start_s = took
            return answer, None
        if answer is not None:
            problem = str(answer["error"])
        else:
            death = self.death()
            if death is not None:
                problem = f"the child process did not start: {death.text()}"
            elif limit_s is None or left <= limit_s:
                problem = f"the child process did not start within {self.startup_s:g} s"
            else:
                return None, "no time left for the child process to start (--timeout)"
        self.close()
        return None, problem

    def read(self, limit_s: float | None, on_progress: Callable[[Any], None] | None = None) -> dict[str, Any] | None:
        """The child's next answer, or None when it died, sent garbage, or the limit passed; progress
        lines before it go to `on_progress`."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        stop = time.monotonic() + limit_s if limit_s is not None else None
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                line, sep, rest = self._buffer.partition(b"\n")
                if sep:
                    self._buffer = rest
                    try:
                        answer = json.loads(line) if line.strip() else None
                    except ValueError:  # a garbled line: treated as a dead child
                        return None
                    if isinstance(answer, dict) and "progress" in answer and len(answer) == 1:
                        if on_progress is not None:
                            on_progress(answer["progress"])
                        continue
                    return answer if isinstance(answer, dict) else None
                left = None if stop is None else stop - time.monotonic()
                if left is not None and left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:  # end of file: the child exited
                    return None
                self._buffer += chunk

    def request(
        self, message: dict[str, Any], limit_s: float | None, on_progress: Callable[[Any], None] | None = None
    ) -> dict[str, Any] | Death | None:
        """Send one request to the ready child and read its answer: the answer, how the child died (it
        is closed), or None when it did not answer within `limit_s` (it is killed)."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died between requests: read the death below
        answer = self.read(limit_s, on_progress)
        if answer is not None:
            return answer
        death = self.death()
        self.close()
        return death

    def death(self) -> Death | None:
        """How the child ended (a signal or exit status, its last lines of stderr), None if it still runs."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None
        with open(self.log_path, "rb") as fh:
            fh.seek(self._log_offset)
            text = fh.read().decode("utf-8", errors="replace")
        tail = stderr_tail(text)
        if code < 0:
            return Death(signal=signal_name(-code), stderr_tail=tail)
        return Death(exit_code=code, stderr_tail=tail)

    def close(self) -> None:
        """Stop the child and its whole process group (compile workers included); the next request
        starts a new one."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # even when the child itself has exited
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self.proc = None
        self.ready = None
        self._buffer = b""

    def shutdown(self) -> None:
        """close(), and remove the working directory when the worker made it."""
        self.close()
        if self._own_dir is not None:
            self._own_dir.cleanup()
            self._own_dir = None


def serve_protocol() -> Any:
    """In the child: the protocol stream (the original stdout), with fd 1 pointed at stderr so that
    the model's prints, Python or C level, cannot corrupt it. The child dies with its parent."""
    die_with_parent()
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    return protocol


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (`PR_SET_PDEATHSIG`), so a child never outlives a
    ctc-doctor stopped by SIGKILL or a job's timeout, holding the model's memory; a no-op elsewhere."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or not name:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before the call: nothing would signal this one
        os._exit(1)


def answer(stream: Any, message: dict[str, Any]) -> None:
    """In the child: one JSON line on the protocol stream."""
    stream.write(json.dumps(message) + "\n")
    stream.flush()
