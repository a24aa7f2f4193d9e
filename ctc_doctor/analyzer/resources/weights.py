"""Diagnosing a compile without the weights (`--weights none`): the model built on the `meta` device.

Dynamo's graph breaks and recompiles depend on the model's code, its inputs' shapes and dtypes and the
Python values it reads, not on the numbers in its tensors. Built under `torch.device("meta")` (every
parameter, buffer and input a meta tensor, no storage), a model's compile can be traced at the memory of
its code: a 70B's in a few GB. Where the code needs a real value (`.item()`, `if tensor.sum() > 0`, an
op with no meta kernel, a NumPy round trip, a meta constant Dynamo cannot fake), the run stops there:
`stopped` names the line, and the run's findings are dropped rather than given half: a meta answer is
the exact answer or a stop. What needs numbers (the fix checks' numerics, the benchmark, the accuracy
bisection) is left out and named.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ...reports import models as rm
from ...workload import Call, Workload
from ..readers.text import error_site
from ..running.tensors import map_tensors

WEIGHTS = ("real", "none")
"""`--weights`: `real` (the builder's own tensors), `none` (built on the meta device)."""

NEEDS_VALUES = (
    "cannot be called on meta tensors",
    "expected device meta",
    "register_meta",
    "meta tensor",
    "device='meta'",
    "is not on the expected device",
    "Tensor device mismatch",
    "NotImplementedError: Could not run",
    "aten::_local_scalar_dense",
    "with Meta tensors",
    "Meta kernel",
)
"""Error texts a run on meta tensors raises where the code needs real values or a real device."""

LEFT_OUT = (
    "Without the weights (--weights none) the fix checks' numerics, the benchmark and the accuracy bisection "
    "need real numbers: not run. Graph breaks, graphs, recompiles, their causes, the bisection and the fixes' "
    "counts come from Dynamo tracing the model on meta tensors, as it traces the real one."
)


TWIN_LEFT_OUT = (
    "The twin's numbers are not your model's: its fix checks' numerics, benchmark and accuracy bisection were "
    "not run. Graph breaks, graphs, recompiles, their causes and the bisection are Dynamo's on the twin."
)


@contextlib.contextmanager
def meta_build() -> Iterator[None]:
    """Tensors a builder makes without naming a device land on `meta` (parameters, buffers, inputs)."""
    with torch.device("meta"):
        yield


def on_meta(workload: Workload) -> Workload:
    """The workload with whatever the builder still made on a real device (`device="cpu"`, a tensor from
    NumPy) moved to meta: the model, each call's tensors. A tensor inside a non-tensor object stays."""
    if isinstance(workload.model, torch.nn.Module):
        workload.model.to("meta")
    workload.args = _meta(tuple(workload.args))
    workload.kwargs = _meta(dict(workload.kwargs))
    workload.variants = [Call(_meta(tuple(c.args)), _meta(dict(c.kwargs))) if isinstance(c, Call) else _meta(c) for c in workload.variants]
    return workload


def _meta(value: Any) -> Any:
    """`value` with every tensor in it on meta (containers rebuilt as `map_tensors` does), requires_grad kept."""
    return map_tensors(value, lambda t: t if t.is_meta else t.detach().to("meta").requires_grad_(t.requires_grad))


def needs_values(message: str | None) -> bool:
    """Whether an error's text says a run on meta tensors needed real values or a real device."""
    return bool(message) and any(needle in message for needle in NEEDS_VALUES)  # type: ignore[operator]


def stopped(message: str, values: bool = True) -> str:
    """The one line of a meta run's stop: where (the user's line the error names) and why (`values`: the code
    needs real values; else the compile failed on meta tensors, which the real run may not)."""
    reason, frame = error_site(message)
    reason = reason.split(": ", 1)[-1] if reason.startswith("call ") else reason
    for prefix in ("torch.compile failed: ", "fails in eager mode: "):
        reason = reason.split(prefix, 1)[-1]
    reason = reason.strip().splitlines()[0].split(". ", 1)[0] if reason.strip() else reason  # torch's first sentence says it
    at = f" at {frame}" if frame else ""
    why = "the code needs real values there" if values else "the compile failed on meta tensors, which the real model's may not"
    return f"without the weights the run stopped{at}: {why} ({reason[:240]})"


def meta_stop(report: rm.Report) -> None:
    """A run on meta tensors whose compile failed (the code needed real values, or Dynamo could not fake a
    meta tensor the code made: the real run may compile): its errors become one stop (phase `weights`) that
    names the line, and the findings are dropped (what Dynamo saw before the stop is not the whole answer)."""
    stops = [e for e in report.errors if e.phase == "compile" or (e.phase == "eager" and needs_values(e.message))]
    if not stops:
        return
    first = next((e for e in stops if e.phase == "compile"), stops[0])  # the compile's own stop, where it has one
    report.errors = [e for e in report.errors if e not in stops]
    report.errors.insert(
        0,
        rm.ErrorRecord(
            phase="weights",
            type="NeedsWeights",
            message=stopped(first.message, needs_values(first.message)),
            hint="run it with its weights (drop --weights none), or on a smaller model built from the same code",
        ),
    )
    report.graph_breaks, report.recompiles, report.recompile_causes = [], [], []
    report.graphs, report.guards, report.compile_metrics, report.frame_calls, report.compile_profile = [], [], [], [], None
    none = {"graph_count": 0, "graphs_compiled": 0, "graph_break_count": 0, "unique_break_sites": 0, "recompile_count": 0}
    report.summary = report.summary.model_copy(update={**none, "analysis_run": False, "verdict": "failed"})
    report.notes.append("The findings of the run without the weights were dropped: it stopped before the end, so they would be partial.")
