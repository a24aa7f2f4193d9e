"""One fullgraph trial: `torch.compile(module, fullgraph=True)` on a fresh copy of its recorded inputs.

In-process with a SIGALRM deadline, or in a child process (`TrialWorker`: one child that rebuilds the
workload from the target once and serves every trial, restarted after a crash or a hang), so a
segfault costs one `crashed` row. The outcome is plain data so it can cross the process boundary.
"""

from __future__ import annotations

import contextlib
import os
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
from ...running.worker import ChildWorker

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
    crash: str | None = None
    """Its child process died: the signal (SIGSEGV...) or `exit status N`."""
    stderr_tail: list[str] = field(default_factory=list)
    """The dead child's last lines of stderr."""

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
        return crashed_or_unrunnable(module, captured, exc, duration)
    finally:
        ti.reset_dynamo_quietly()


def crashed_or_unrunnable(module: torch.nn.Module, captured: CapturedCall, exc: BaseException, duration: float) -> TrialOutcome:
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
        data = {"args": captured.args, "kwargs": captured.kwargs, "grad_enabled": captured.grad_enabled, "device": captured.device}
        torch.save(data, path)
        torch.load(path, weights_only=True)
        return True
    except Exception:  # noqa: BLE001 - custom objects (caches...): the child recaptures instead
        with contextlib.suppress(OSError):
            os.remove(path)
        return False


class TrialWorker:
    """A child process that runs isolated trials: it imports torch and the target's module when started,
    rebuilds the workload when first asked for a trial (after the parent's preflight), runs its first call
    eagerly (as the in-process trials find the model: after the analysis ran it), then serves one
    trial per request (`python -m ctc_doctor.analyzer.workers.trial`). A child that dies costs one
    `crashed` row (its signal or exit status, and the tail of its stderr), one that hangs past the
    trial's limit one `timeout` row; either way the next trial starts a new child. A child that cannot
    rebuild the workload, or does not start in time, fails every trial with its reason and is not
    started again. The process handling is `running.worker.ChildWorker`'s.
    """

    def __init__(self, setup: dict[str, Any], workdir: str | None = None) -> None:
        self.child = ChildWorker(
            "ctc_doctor.analyzer.workers.trial", setup, startup_s=_WORKER_STARTUP_S, prefix="ctc-bisect-", workdir=workdir
        )
        self.workdir = self.child.workdir
        self.broken: str | None = None
        """Why no child can serve: the workload cannot be rebuilt, or a child did not start in time."""

    @property
    def starts(self) -> int:
        """Children started: one, plus one after each crash or hang."""
        return self.child.starts

    def start(self) -> None:
        """Start a child now, without waiting for it: it imports torch and the target's module while the
        caller works on (the pipeline starts it before the analysis); it builds no model until a trial."""
        self.child.start()

    def _built(self) -> str | None:
        """The child's model rebuilt (once per child: a child started after a crash rebuilds it); None, or why not."""
        if self.child.ready is not None and self.child.ready.get("built"):
            return None
        answer = self.child.request({"build": True}, _WORKER_STARTUP_S)
        if isinstance(answer, dict) and answer.get("built"):
            self.child.ready = {**(self.child.ready or {}), "built": True}
            return None
        if isinstance(answer, dict):
            self.child.close()
            return str(answer.get("error") or answer)
        return answer.text() if answer is not None else f"the child process did not rebuild the workload within {_WORKER_STARTUP_S:g} s"

    def run(self, request: dict[str, Any], timeout_s: float | None) -> TrialOutcome:
        t0 = time.perf_counter()
        if self.broken is not None:
            return TrialOutcome("crashed", 0.0, reason=self.broken)
        ready, problem = self.child.wait_ready(timeout_s)
        if ready is None:
            if self.child.proc is None:  # it cannot start: every later trial fails alike
                self.broken = problem
            return TrialOutcome("crashed" if self.broken else "timeout", time.perf_counter() - t0, reason=problem)
        problem = self._built()
        if problem is not None:  # a workload that cannot be rebuilt fails every later trial alike
            self.broken = problem
            return TrialOutcome("crashed", time.perf_counter() - t0, reason=problem)
        # the child enforces the trial's limit itself; this grace is for a hang it cannot interrupt
        limit = timeout_s + _HANG_GRACE_S if timeout_s else None
        answer = self.child.request({**request, "timeout_s": timeout_s}, limit)
        if isinstance(answer, dict):
            answer["stack"] = [tuple(f) for f in answer.get("stack", [])]
            return TrialOutcome(**answer)
        if answer is not None:
            return TrialOutcome("crashed", time.perf_counter() - t0, reason=answer.text(), crash=answer.how, stderr_tail=answer.stderr_tail)
        waited = f"after {limit:g} s" if limit is not None else "after it stopped answering"
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"child process killed {waited}")

    def close(self) -> None:
        """Stop the child and its whole process group; the next trial starts a new one."""
        self.child.close()

    def shutdown(self) -> None:
        """close(), and remove the working directory when the worker made it."""
        self.child.shutdown()
