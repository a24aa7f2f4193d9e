"""The analysis phase: the eager pass, explain's cross-check and the compiled run under capture.

1. eager: the model must work without compile; forward pre-hooks record module call sites (for
   attribution) and, when bisection was asked for, each module's first-call inputs;
2. explain on the first call, as a cross-check of the break sites of that call;
3. every call through `torch.compile` under the live capture (see `capture.live`).
A step that fails or times out becomes an error row; what was found before it is still returned.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ...reports import models as rm
from ..capture.attribution import ModuleIndex
from ..capture.gb_registry import graph_break_registry
from ..capture.inputs import ModuleInputs
from ..capture.live import CompiledRun, Findings, eager_pass, findings_of
from ..common import torch_internals as ti
from ..common.calls import preserved_state
from ..common.deadline import DeadlineExceeded, deadline
from ..common.text import first_line
from .context import PhaseContext


@dataclass(frozen=True)
class AnalysisOptions:
    """How the analysis phase runs (the pipeline derives them from `AnalyzeOptions`)."""

    compile: bool = True
    """Run explain and the compiled pass; False stops after the eager pass (bisection only)."""
    explain: bool = True
    """Run torch._dynamo.explain on the first call as a cross-check."""
    keep_guard_text: bool = False
    """Keep the full guard tree text per compile id."""
    record_inputs: bool = False
    """Record each module's first-call inputs during the eager pass (for bisection)."""
    timeout_s: float | None = None
    """The run's --timeout: the phase stops there and returns what it found."""


@dataclass
class AnalysisResult:
    """The analysis section of the report, and what the eager pass recorded for later phases."""

    summary: rm.Summary
    findings: Findings
    explain: rm.ExplainCheck | None
    notes: list[str]
    errors: list[rm.ErrorRecord]
    index: ModuleIndex
    module_inputs: ModuleInputs | None = None


def run_analysis(ctx: PhaseContext, options: AnalysisOptions) -> AnalysisResult:
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
    compiled: CompiledRun | None = None
    step = "eager"
    keep = preserved_state(workload.model) if index.modules else contextlib.nullcontext()
    try:
        with keep, deadline(options.timeout_s):
            eager = eager_pass(workload, calls, settings, index=index, inputs=inputs, progress=progress)
            if eager.error is not None:
                errors.append(eager.error)
            elif options.compile:
                if options.explain:
                    step = "explain"
                    explained = _explain(ctx, notes, errors)
                step = "compile"
                compiled = CompiledRun(workload, calls, settings, keep_guard_text=options.keep_guard_text)
                compiled.run(progress)
                if compiled.error is not None:
                    errors.append(compiled.error)
                assert compiled.capture is not None
                notes.extend(compiled.capture.notes)
    except DeadlineExceeded:
        message = f"analysis did not finish within {options.timeout_s:g} s (during {step}); partial report"
        errors.append(rm.ErrorRecord(phase="timeout", type="AnalysisTimeout", message=message))
    finally:
        with contextlib.suppress(Exception):
            ti.fresh_dynamo_state()  # leave no compiled code of ours behind

    progress("report", 0, 1)
    findings = findings_of(compiled, index)
    failed = any(e.phase in ("eager", "compile", "timeout") for e in errors)
    explain = _cross_check(explained, findings, notes)
    if graph_break_registry() is None:
        notes.append(f"torch {ti.torch_version()} ships no graph-break registry: GB ids are unavailable.")
    progress("report", 1, 1)
    return AnalysisResult(
        summary=findings.summary(failed=failed, analysis_run=options.compile),
        findings=findings,
        explain=explain,
        notes=notes,
        errors=errors,
        index=index,
        module_inputs=inputs,
    )


def _explain(ctx: PhaseContext, notes: list[str], errors: list[rm.ErrorRecord]) -> ti.ExplainResult | None:
    """explain on the first call (it resets Dynamo itself); a failure is an `explain` error row."""
    workload, first = ctx.workload, ctx.calls[0]
    ctx.progress("explain", 0, 1)
    result = None
    try:
        if workload.before_call is not None:
            workload.before_call(workload.model, 0)
        if ctx.settings.seed is not None:
            torch.manual_seed(ctx.settings.seed)
        with ti.quiet_torch_stderr(True):
            result = ti.run_explain(workload.model, first.args, dict(first.kwargs))
        if result is None:
            notes.append(f"torch {ti.torch_version()} has no torch._dynamo.explain; cross-check skipped.")
    except Exception as exc:  # noqa: BLE001 - the cross-check failing leaves the analysis standing
        errors.append(rm.ErrorRecord(phase="explain", type=type(exc).__name__, message=first_line(exc)[:500]))
    ctx.progress("explain", 1, 1)
    return result


def _cross_check(explained: ti.ExplainResult | None, findings: Findings, notes: list[str]) -> rm.ExplainCheck | None:
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
    )
