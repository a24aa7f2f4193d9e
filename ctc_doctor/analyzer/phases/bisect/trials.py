"""One fullgraph trial: `torch.compile(module, fullgraph=True)` on a fresh copy of its recorded inputs.

In-process with a SIGALRM deadline, or in a child process (`TrialWorker`: one child that rebuilds the
workload from the target once and serves every trial, restarted after a crash or a hang), so a
segfault costs one `crashed` row. The outcome is plain data so it can cross the process boundary.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ... import torch_internals as ti
from ...capture.inputs import CapturedCall
from ...readers.gb_registry import registry_ids_for
from ...readers.parsing import first_sentence, parse_traceback_frames, split_unsupported
from ...readers.sources import RawFrame
from ...readers.text import describe_error, one_line
from ...running.calls import loss_of
from ...running.deadline import DeadlineExceeded, deadline

_WORKER_STARTUP_S = 120.0  # a child imports torch and rebuilds the model before it serves trials
_HANG_GRACE_S = 30.0  # past the trial's own limit, a child that has not answered is hung: killed


@dataclass
class TrialOutcome:
    """A trial's result, as it crosses the process boundary (plain data)."""

    status: str
    duration_s: float
    gb_type: str | None = None
    registry_ids: list[str] = field(default_factory=list)
    reason: str | None = None
    stack: list[RawFrame] = field(default_factory=list)
    """Frames Dynamo was tracing at the failure, outermost first."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _unsupported_outcome(exc: BaseException, duration: float) -> TrialOutcome:
    text = split_unsupported(str(exc))
    exc_gb_type, stack, innermost = ti.break_details(exc)
    gb_type = exc_gb_type or text.gb_type or "graph break"
    ids = text.registry_ids or registry_ids_for(gb_type)
    if not stack:
        stack = [innermost] if innermost is not None else parse_traceback_frames(str(exc).partition("from user code:")[2])
    reason = f"{gb_type}: {first_sentence(text.explanation)}" if text.explanation else gb_type
    return TrialOutcome("failed", duration, gb_type, ids, reason, stack)


def run_trial(
    module: torch.nn.Module,
    captured: CapturedCall,
    *,
    backend: str,
    train: bool,
    seed: int | None,
    timeout_s: float | None,
) -> TrialOutcome:
    """`torch.compile(module, fullgraph=True)` on a fresh copy of its captured inputs, in this process."""
    ti.fresh_dynamo_state()
    args, kwargs = captured.fresh()
    if seed is not None:
        torch.manual_seed(seed)
    t0 = time.perf_counter()
    try:
        with deadline(timeout_s), ti.quiet_torch_stderr(True), torch.set_grad_enabled(captured.grad_enabled):
            compiled = torch.compile(module, fullgraph=True, backend=backend)
            out = compiled(*args, **kwargs)
            if train and captured.grad_enabled:
                loss = loss_of(out)
                if loss is not None and loss.requires_grad:
                    loss.backward()
        return TrialOutcome("passed", time.perf_counter() - t0)
    except DeadlineExceeded:
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"no result within {timeout_s:g} s")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        duration = time.perf_counter() - t0
        if ti.is_unsupported(exc):
            return _unsupported_outcome(exc, duration)
        return _crashed_or_unrunnable(module, captured, exc, duration)
    finally:
        ti.reset_dynamo_quietly()


def _crashed_or_unrunnable(module: torch.nn.Module, captured: CapturedCall, exc: BaseException, duration: float) -> TrialOutcome:
    """A non-graph-break error: does the module even run eagerly on its own with these inputs?"""
    args, kwargs = captured.fresh()
    try:
        with torch.no_grad():
            module(*args, **kwargs)
    except Exception as eager_exc:  # noqa: BLE001 - the module cannot be called on its own
        return TrialOutcome(
            "skipped", duration, reason=f"cannot run on its own with its captured inputs: {type(eager_exc).__name__}: {one_line(eager_exc)}"
        )
    return TrialOutcome("crashed", duration, reason=f"torch.compile raised {type(exc).__name__}: {describe_error(exc)}"[:500])


def saveable(captured: CapturedCall, path: str) -> bool:
    """Save the inputs where `torch.load(weights_only=True)` can read them back; False if it cannot."""
    try:
        torch.save({"args": captured.args, "kwargs": captured.kwargs, "grad_enabled": captured.grad_enabled}, path)
        torch.load(path, weights_only=True)
        return True
    except Exception:  # noqa: BLE001 - custom objects (caches...): the child recaptures instead
        with contextlib.suppress(OSError):
            os.remove(path)
        return False


class TrialWorker:
    """A child process that runs isolated trials: it rebuilds the workload once, runs its first call
    eagerly (as the in-process trials find the model: after the analysis ran it), then serves one
    trial per request (`python -m ctc_doctor.analyzer.trial_worker`). A child that dies costs one
    `crashed` row, one that hangs past the trial's limit one `timeout` row; either way the next trial
    starts a new child. A child that cannot rebuild the workload, or does not start in time, fails
    every trial with its reason and is not started again.

    Protocol: strictly one request, then one answer line, so a `select` on the pipe followed by one
    `readline` never leaves a second line in the text layer's buffer.
    """

    def __init__(self, setup: dict[str, Any], workdir: str | None = None) -> None:
        self._own_dir = tempfile.TemporaryDirectory(prefix="ctc-bisect-") if workdir is None else None
        self.workdir = workdir if workdir is not None else self._own_dir.name  # type: ignore[union-attr]
        self.setup_path = os.path.join(self.workdir, "worker_setup.json")
        with open(self.setup_path, "w", encoding="utf-8") as fh:
            json.dump(setup, fh)
        self.log_path = os.path.join(self.workdir, "worker.log")
        self.proc: subprocess.Popen[str] | None = None
        self.ready = False
        self.started_at = 0.0
        self.broken: str | None = None
        """Why no child can serve: the workload cannot be rebuilt, or a child did not start in time."""
        self.starts = 0
        """Children started: one, plus one after each crash or hang."""

    def start(self) -> None:
        """Start a child now, without waiting for it: it imports torch and rebuilds the workload while
        the caller works on (the pipeline starts it before the analysis, so the bisection finds it ready)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.close()
        self.starts += 1
        self.started_at = time.perf_counter()
        with open(self.log_path, "a", encoding="utf-8") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ctc_doctor.analyzer.trial_worker", self.setup_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=os.getcwd(),
                start_new_session=True,  # its own process group: a kill takes whatever it started too
            )

    def _wait_ready(self, limit_s: float | None) -> str | None:
        """Wait for the started child's first answer; None when it is ready, else why it is not."""
        left = max(1.0, _WORKER_STARTUP_S - (time.perf_counter() - self.started_at))
        answer = self._read(min(left, limit_s) if limit_s is not None else left)
        if answer is not None and "error" not in answer:
            self.ready = True
            return None
        if answer is not None:
            self.broken = str(answer["error"])
        else:
            death = self._death()
            if death is None and (limit_s is None or left <= limit_s):
                self.broken = f"the child process did not start within {_WORKER_STARTUP_S:g} s"
            elif death is not None:
                self.broken = f"the child process did not start: {death}"
            else:  # the caller's time ran out first: a later trial may still find the child ready
                return "no time left for the child process to start (--timeout)"
        self.close()
        return self.broken

    def _read(self, limit_s: float | None) -> dict[str, Any] | None:
        """The child's next answer, or None when it died, sent garbage, or the limit passed."""
        assert self.proc is not None and self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(limit_s):
                return None
        line = self.proc.stdout.readline()
        try:
            answer = json.loads(line) if line.strip() else None
        except ValueError:  # a cut or garbled line: treated as a dead child
            return None
        return answer if isinstance(answer, dict) else None

    def _death(self) -> str | None:
        """How the child ended (a signal, or its last line of stderr), None if it is still running."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None
        if code < 0:
            try:
                return f"the child process died ({signal.Signals(-code).name})"
            except ValueError:
                return f"the child process died (signal {-code})"
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            tail = [ln for ln in fh.read().strip().splitlines() if ln.strip()]
        return f"the child process failed: {tail[-1][:300] if tail else f'exit status {code}'}"

    def run(self, request: dict[str, Any], timeout_s: float | None) -> TrialOutcome:
        t0 = time.perf_counter()
        if self.broken is not None:
            return TrialOutcome("crashed", 0.0, reason=self.broken)
        if self.proc is None:
            self.start()
        if not self.ready:  # its first answer: ready, or why not (even when it has already exited)
            problem = self._wait_ready(timeout_s)
            if problem is not None:
                return TrialOutcome("crashed" if self.broken else "timeout", time.perf_counter() - t0, reason=problem)
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({**request, "timeout_s": timeout_s}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died between trials: read the death below
        # the child enforces the trial's limit itself; this grace is for a hang it cannot interrupt
        limit = timeout_s + _HANG_GRACE_S if timeout_s else None
        answer = self._read(limit)
        if answer is not None:
            answer["stack"] = [tuple(f) for f in answer.get("stack", [])]
            return TrialOutcome(**answer)
        death = self._death()
        self.close()
        if death is not None:
            return TrialOutcome("crashed", time.perf_counter() - t0, reason=death)
        waited = f"after {limit:g} s" if limit is not None else "after it stopped answering"
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"child process killed {waited}")

    def close(self) -> None:
        """Stop the child and its whole process group (compile workers included); the next trial
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
        self.ready = False

    def shutdown(self) -> None:
        """close(), and remove the working directory when the worker made it."""
        self.close()
        if self._own_dir is not None:
            self._own_dir.cleanup()
            self._own_dir = None
