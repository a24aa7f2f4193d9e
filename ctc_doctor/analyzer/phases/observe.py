"""The observe phase (the analysis proper): the compiled run under capture on the fresh model, then the
eager pass; what they found becomes the report's analysis sections.

1. compile: every call through `torch.compile` under the live capture (see `capture.live`), first, so
   it sees the model as a user's first compiled call does (lazy set-up, hooks installed once);
2. eager: every call without compile; forward pre-hooks record module call sites (for attribution)
   and, when bisection was asked for, each module's first-call inputs; the break lines of the first
   call are watched, so a break whose line does not run again on the warm model is marked
   `first_call_only`. A model that fails here fails in eager mode: that error comes first;
3. explain's view of the first call, from the graphs of the same compiled run (`same_trace`), or a
   `torch._dynamo.explain` call of its own where graphs carry no compile reason (`separate_call`).
A step that fails or times out becomes an error row; what was found before it is still returned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from .. import torch_internals as ti
from ..capture.attribution import ModuleIndex
from ..capture.inputs import ModuleInputs
from ..capture.live import (
    CompiledRun,
    Findings,
    eager_pass,
    explain_view,
    findings_of,
    first_call_break_lines,
)
from ..readers.gb_registry import graph_break_registry
from ..readers.text import first_line
from ..resources.weights import needs_values, stopped
from ..running.calls import grad_mode, preserved_state
from ..running.deadline import DeadlineExceeded, Stopped, deadline, stop_record
from .context import PhaseContext


@dataclass(frozen=True)
class ObserveOptions:
    """How the observe phase runs (the pipeline derives them from `AnalyzeOptions`)."""

    compile: bool = True
    """Run the compiled pass (and explain's view of it); False runs the eager pass only (bisection only)."""
    explain: bool = True
    """Cross-check the first call's break sites against explain's view of it."""
    keep_guard_text: bool = False
    """Keep the full guard tree text per compile id."""
    record_inputs: bool = False
    """Record each module's first-call inputs during the eager pass (for bisection)."""
    inputs_if_broken: bool = False
    """With `record_inputs`: only when the compiled pass broke the graph or failed (the bisection runs only
    then): a model that compiles whole keeps no copy of its modules' inputs."""
    on_broken: Callable[[], None] | None = None
    """Called once the compiled pass broke the graph or failed (bisection will run: its child starts)."""
    timeout_s: float | None = None
    """What is left of the run's --timeout: the phase stops there and returns what it found."""
    meta: bool = False
    """The model and its calls are on the meta device (`--weights none`): an eager pass that needs real values
    after the compiled run ran every call is a note, not a failure (Dynamo's findings are whole)."""


@dataclass
class Observation:
    """The analysis section of the report, and what the eager pass recorded for later phases."""

    summary: rm.Summary
    findings: Findings
    explain: rm.ExplainCheck | None
    notes: list[str]
    errors: list[rm.ErrorRecord]
    index: ModuleIndex
    module_inputs: ModuleInputs | None = None
    footprint: rm.Footprint | None = None
    """What the eager pass took: the model and its activations (`resources.preflight`)."""


def run_observe(ctx: PhaseContext, options: ObserveOptions) -> Observation:
    """Analyze the workload. Resets torch._dynamo state (compiled caches) before and after."""
    workload, calls, settings, progress = ctx.workload, ctx.calls, ctx.settings, ctx.progress
    notes: list[str] = []
    errors: list[rm.ErrorRecord] = []
    index = ModuleIndex(workload.model)
    inputs = ModuleInputs(workload.model) if options.record_inputs and index.modules else None
    if not index.modules:
        notes.append("The target is not an nn.Module: breaks are reported by source line without module paths.")
        if options.record_inputs:
            notes.append("Bisection needs an nn.Module: it did not run.")

    explained: ti.ExplainResult | None = None
    method: rm.ExplainMethod = "same_trace"
    compiled: CompiledRun | None = None
    lines_run: set[tuple[str, int]] | None = None
    footprint: rm.Footprint | None = None
    step = "compile" if options.compile else "eager"

    def kept() -> contextlib.AbstractContextManager[None]:
        """Each pass from the model's own grads and buffers (the compiled run may update BN statistics)."""
        return preserved_state(workload.model) if index.modules else contextlib.nullcontext()

    try:
        with deadline(options.timeout_s):
            watch: dict[str, set[int]] = {}
            if options.compile:
                compiled = CompiledRun(workload, calls, settings, keep_guard_text=options.keep_guard_text, count_frames=True)
                with kept():
                    compiled.run(progress)
                assert compiled.capture is not None
                notes.extend(compiled.capture.notes)
                watch = first_call_break_lines(compiled)
                broken = compiled.error is not None or bool(findings_of(compiled).graph_breaks)
                if broken and options.on_broken is not None:
                    options.on_broken()
                if inputs is not None and options.inputs_if_broken and not broken:
                    inputs = None  # nothing to bisect
            step = "eager"
            with kept():
                eager = eager_pass(workload, calls, settings, index=index, inputs=inputs, watch=watch, measure=True, progress=progress)
            footprint = eager.footprint if eager.error is None else None
            if (
                eager.error is not None
                and options.meta
                and compiled is not None
                and compiled.error is None
                and needs_values(eager.error.message)
            ):
                notes.append(
                    f"The eager pass {stopped(eager.error.message).removeprefix('without the weights the run ')}: Dynamo's findings "
                    "come from the compiled run, which ran every call; module paths and first-call marks rest on what the eager pass ran."
                )
            elif eager.error is not None:
                errors.append(eager.error)  # first: a model that fails without compile is the problem to fix
            elif watch:
                lines_run = eager.lines_run
            if compiled is not None:
                if options.explain and eager.error is None:
                    step = "explain"
                    explained = explain_view(compiled)
                    if explained is None:
                        method = "separate_call"
                        explained = _explain(ctx, notes, errors)
    except Stopped as stop:
        errors.append(
            stop_record(
                stop,
                f"the analysis ({step})",
                f"analysis did not finish in the time --timeout left it (during {step}); partial report",
            )
        )
        if index.modules and not index.exercised:
            why = "The time ran out" if isinstance(stop, DeadlineExceeded) else "The run was stopped"
            notes.append(f"{why} before the eager pass recorded module call sites: break sites have no module paths.")
    finally:
        if compiled is not None and compiled.error is not None:
            errors.append(compiled.error)  # after the eager failure, if any: that is the problem to fix first
        ti.reset_dynamo_quietly()  # leave no compiled code of ours behind

    progress(ProgressEvent(Step.REPORT, 0, 1))
    findings = findings_of(compiled, index, lines_run)
    failed = any(e.phase in ("eager", "compile", "timeout", "interrupted") for e in errors)
    explain = _cross_check(explained, method, findings, notes)
    if graph_break_registry() is None:
        notes.append(f"torch {ti.torch_version()} ships no graph-break registry: GB ids are unavailable.")
    progress(ProgressEvent(Step.REPORT, 1, 1))
    return Observation(
        summary=findings.summary(failed=failed, analysis_run=options.compile),
        findings=findings,
        explain=explain,
        notes=notes,
        errors=errors,
        index=index,
        module_inputs=inputs,
        footprint=footprint,
    )


def _explain(ctx: PhaseContext, notes: list[str], errors: list[rm.ErrorRecord]) -> ti.ExplainResult | None:
    """explain on the first call, traced a second time (it resets Dynamo itself); a failure is an
    `explain` error row. By now the model has run: its first-call set-up is behind it."""
    workload, first = ctx.workload, ctx.calls[0]
    ctx.progress(ProgressEvent(Step.EXPLAIN, 0, 1))
    result = None
    try:
        if workload.before_call is not None:
            workload.before_call(workload.model, 0)
        if ctx.settings.seed is not None:
            torch.manual_seed(ctx.settings.seed)
        with ti.quiet_torch_stderr(True), grad_mode(ctx.settings):
            result = ti.run_explain(workload.model, first.args, dict(first.kwargs))
        if result is None:
            notes.append(f"torch {ti.torch_version()} has no torch._dynamo.explain; cross-check skipped.")
        else:
            notes.append("explain's graphs carry no compile reason in this torch: it ran as a separate call, on the warmed-up model.")
    except Exception as exc:  # noqa: BLE001 - the cross-check failing leaves the analysis standing
        errors.append(rm.ErrorRecord(phase="explain", type=type(exc).__name__, message=first_line(exc)[:500]))
    ctx.progress(ProgressEvent(Step.EXPLAIN, 1, 1))
    return result


def _cross_check(
    explained: ti.ExplainResult | None, method: rm.ExplainMethod, findings: Findings, notes: list[str]
) -> rm.ExplainCheck | None:
    """explain's counts, and the break sites of the first call it did not list."""
    if explained is None:
        return None
    seen = {(f, ln) for _, stack in explained.break_reasons for f, ln, _ in stack[-1:]}
    first_call = [s for s in findings.graph_breaks if any(findings.call_of_compile.get(c) == 0 for c in s.compile_ids)]
    missed = [s for s in first_call if (s.user_frame.file, s.user_frame.line) not in seen]
    if missed:
        notes.append(
            f"torch._dynamo.explain did not list {len(missed)} of the {len(first_call)} break site(s) "
            f"of the first call ({', '.join(s.id for s in missed)})."
        )
    return rm.ExplainCheck(
        graph_count=explained.graph_count,
        graph_break_count=explained.graph_break_count,
        break_reasons=len(explained.break_reasons),
        op_count=explained.op_count,
        missed_sites=len(missed),
        method=method,
    )
