"""One fullgraph trial: `torch.compile(module, fullgraph=True)` on a fresh copy of its recorded inputs.

In-process with a SIGALRM deadline, or in a child process (`python -m ctc_doctor.analyzer.trial_worker`)
that rebuilds the workload from the target, so a segfault costs one `crashed` row. The outcome is plain
data so it can cross the process boundary.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ...capture.gb_registry import registry_ids_for
from ...capture.inputs import CapturedCall
from ...capture.parsing import first_sentence, parse_traceback_frames, split_unsupported
from ...common import torch_internals as ti
from ...common.calls import loss_of
from ...common.deadline import DeadlineExceeded, deadline
from ...common.sources import RawFrame
from ...common.text import describe_error, one_line

_WORKER_STARTUP_S = 120.0  # a child imports torch and rebuilds the model before its own deadline starts


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
        with contextlib.suppress(Exception):
            ti.fresh_dynamo_state()


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


def run_trial_isolated(
    request: dict[str, Any], timeout_s: float | None, workdir: str
) -> TrialOutcome:
    """Run one trial in `python -m ctc_doctor.analyzer.trial_worker`; a dead child is a `crashed` row."""
    name = request["module_path"].replace(".", "_") or "root"
    req_path = os.path.join(workdir, f"trial_{name}.json")
    result_path = os.path.join(workdir, f"trial_{name}.result.json")
    request = {**request, "result_path": result_path, "timeout_s": timeout_s}
    with open(req_path, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    limit = (timeout_s + _WORKER_STARTUP_S) if timeout_s else None
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ctc_doctor.analyzer.trial_worker", req_path],
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=os.getcwd(),
        )
    except subprocess.TimeoutExpired:
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"child process killed after {limit:g} s")
    duration = time.perf_counter() - t0
    if os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as fh:
            data = json.load(fh)
        data["stack"] = [tuple(f) for f in data.get("stack", [])]
        return TrialOutcome(**data)
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        return TrialOutcome("crashed", duration, reason=f"the child process died ({sig})")
    tail = [ln for ln in (proc.stderr or "").strip().splitlines() if ln.strip()]
    last = tail[-1][:300] if tail else f"exit status {proc.returncode}"
    return TrialOutcome("crashed", duration, reason=f"the child process failed: {last}")
