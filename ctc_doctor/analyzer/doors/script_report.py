"""One rank's report of a script run (`ctc-doctor run`), built in the script's process once it ended.

The findings are those of the script's own compiled calls, as captured. Module paths need the module:
the analyzed object (the first module the script compiled, a DDP wrapper unwrapped) runs one eager
call on its first recorded inputs, which records its call sites for attribution, watches the first
call's break lines (first_call_only) and, on the first rank, records each submodule's inputs for
bisection. The first rank then runs the pipeline's later phases on that module and its recorded
calls: suggestions, bisection, and fixes verified on copies of the module as it was when compiled
(counts measured on the recorded calls, with and without each fix). Checks compile with the analysis
backend (`--backend`, else eager), not the script's. The report is assembled from the script's
findings by `reports.models.assemble_report`; the later phases merge into it as in `pipeline`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from ...progress import ProgressEvent, Step, no_progress
from ...reports import models as rm
from ...workload import Call, Workload
from .. import torch_internals as ti
from ..capture.attribution import ModuleIndex
from ..capture.compiles import CompileRecorder, RecordedCall, StopScript, WatchedObject
from ..capture.hotswap import lora_rank
from ..capture.inputs import ModuleInputs
from ..capture.live import ScriptRun, eager_pass, findings_of, first_call_break_lines
from ..phases.bisect import BisectInputs, BisectOptions
from ..phases.bisect.accuracy import AccuracyOptions, Trigger
from ..phases.context import PhaseContext
from ..phases.fix import FixOptions
from ..phases.suggest import suggest
from ..readers.assembly import derive
from ..readers.expected import mark_one_offs
from ..readers.failures import failure_hint
from ..running.calls import preserved_state
from ..running.deadline import DeadlineExceeded, deadline
from ..running.settings import RunSettings
from ..services.own_cost import RunCost
from ..services.session import AnalyzeOptions, Clock, Session
from ..triage import TRIAGE_MIN_S, is_torch_failure, own_frame, write_bug
from ..triage import issue_text as triage_issue_text
from ..triage import issue_title as triage_issue_title
from ..triage.around import triage_calls
from .pipeline import environment, later_phases

SCRIPT_COMPILE = ("dynamic", "mode", "options", "fullgraph")
"""The script's own torch.compile arguments that compiling its module again passes (the backend apart)."""

ATTRIBUTION_TIMEOUT_S = 120.0
"""The eager call that records module call sites: a model that needs its peers (collectives) would hang."""


def _analyzed_module(obj: WatchedObject | None) -> torch.nn.Module | None:
    """The module the analysis is about: a DistributedDataParallel wrapper's inner module (its forward
    may call collectives, which would wait for the other ranks forever)."""
    if obj is None or obj.module is None:
        return None
    module = obj.module
    if isinstance(module, torch.nn.parallel.DistributedDataParallel):
        return module.module  # type: ignore[no-any-return]
    return module


def _replayable(spec: RecordedCall) -> Call | None:
    """The recorded call, or None when its values were too big to keep (none are made up)."""
    if spec.args is None or spec.kwargs is None:
        return None
    return Call(spec.args, spec.kwargs)


def _device_of(module: torch.nn.Module | None) -> str | None:
    if module is None:
        return None
    for tensor in (*module.parameters(), *module.buffers()):
        return str(tensor.device)
    return None


def rank_report(run: ScriptRun, recorder: CompileRecorder, outcome: Any, config: dict[str, Any], **kw: Any) -> rm.Report:
    """This rank's report (see `_rank_report`), with the analyzed module uncompiled: a module the
    script compiled with `model.compile()` keeps its compiled call, and the doctor's own calls must run
    it plainly. What the model prints during the doctor's re-runs is not the script's output: dropped."""
    model = _analyzed_module(recorder.primary)
    with ti.uncompiled(model), open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        return _rank_report(run, recorder, outcome, config, **kw)


def _rank_report(
    run: ScriptRun,
    recorder: CompileRecorder,
    outcome: Any,
    config: dict[str, Any],
    *,
    rank: int,
    command: list[str],
    started_at: str,
    t0: float,
    budget_s: float | None = None,
    plan_s: float | None = None,
    cost: RunCost | None = None,
) -> rm.Report:
    """This rank's report. `budget_s`: the seconds left for the analysis (None: no limit); `plan_s`: what
    `--budget` leaves it; `cost`: the meter that has followed the run since the script started. A stop
    signal during it (StopScript, KeyboardInterrupt) leaves the sections done so far."""
    cost = cost if cost is not None else RunCost(None, no_progress, True)
    model = _analyzed_module(recorder.primary)
    # the script trains when a backward reached what its compiled module returned: the replays then run
    # forward and backward as its steps did, and the cost meter counts a training run's copies; a script
    # that also called it under no_grad is replayed forward only (a call's own grad mode is not replayed)
    trained = recorder.primary is not None and recorder.primary.backward
    train = trained and recorder.primary is not None and all(r.grad_enabled for r in recorder.primary.recorded)
    cost.train = train
    later = AnalyzeOptions(
        backend=config.get("backend") or "eager",
        train=train,
        seed=0,  # the replays are seeded per call, as a build() target's are
        bisect=(
            BisectOptions(strategy="top-down", trial_timeout_s=config.get("trial_timeout_s") or 60.0, isolate=False)
            if config.get("bisect")
            else None
        ),  # in this process: a script is no target a trial's child could build
        fix=_fix_options(recorder.primary) if config.get("fix") else None,
        timeout_s=budget_s,
        budget_s=plan_s,
        memory_limit_mb=config.get("memory_limit_mb"),
        spec="<script>",
        device=_device_of(model),
        accuracy=AccuracyOptions(repro_dir=config.get("repro_dir")),  # a backend's wrong result: its torch-only repro
    )
    session = Session(later, Clock(budget_s, plan_s), cost)  # the later phases', as a build() target's run has
    clock = session.clock
    primary = recorder.primary
    cost.on_device(_device_of(model))  # before the script's phase closes: its CUDA peak is the workload's
    progress = cost.progress
    if primary is not None:
        progress(ProgressEvent(Step.REPORT))
    relations = recorder.relate()  # before the notes: it sets each object's relation
    notes = list(recorder.notes) + relations + list(run.capture.notes) + [n for o in recorder.objects for n in o.notes]
    if trained and not train:
        notes.append(
            "The script trains its compiled model and also calls it under no_grad: the doctor's replays of its calls run "
            "forward only (each call's own grad mode is not replayed)."
        )
    calls = [c for c in (_replayable(r) for r in (primary.recorded if primary else [])) if c is not None]
    if primary is not None and primary.recorded and not calls:
        notes.append(f"{primary.name}'s inputs were too big to keep: no module paths, bisection or fixes.")
    backend = config.get("backend") or "eager"
    device = _device_of(model)
    modes = {r.grad_enabled for r in primary.recorded} if primary is not None else set()
    # the replays, seeded per call (`calls.seeded`), in the grad mode the script made its calls in (a fix
    # check of a script's `no_grad` calls run with gradients on compiles other graphs through AOTAutograd)
    settings = RunSettings(backend=backend, train=train, seed=0, device=device, grad=modes.pop() if len(modes) == 1 else None)
    index = ModuleIndex(model)
    inputs = ModuleInputs(model) if model is not None and rank == 0 and config.get("bisect") else None
    lines_run = None
    if model is not None and calls:
        watch = first_call_break_lines(run)
        first = primary.recorded[0] if primary else None
        limit = min(ATTRIBUTION_TIMEOUT_S, clock.remaining() or ATTRIBUTION_TIMEOUT_S)
        try:
            with (
                deadline(limit),
                preserved_state(model),
                torch.set_grad_enabled(bool(first and first.grad_enabled)),
            ):
                eager = eager_pass(Workload(model), calls[:1], settings, index=index, inputs=inputs, watch=watch, measure=True)
            cost.footprint = eager.footprint
            if eager.error is not None:
                notes.append(
                    f"one eager call of {primary.name if primary else 'the model'} on its first inputs failed "
                    f"({eager.error.message}): module paths may be missing."
                )
                inputs = None
            elif watch:
                lines_run = eager.lines_run
        except (DeadlineExceeded, StopScript, KeyboardInterrupt):
            notes.append(f"one eager call of the model on its first inputs did not finish (in {limit:.0f} s, or stopped): no module paths.")
            inputs = None
    findings = findings_of(run, index if index.exercised else None, lines_run)

    errors = []
    if outcome.exit_code != 0 and outcome.stopped is None:
        errors.append(
            rm.ErrorRecord(
                phase="script",
                type="ScriptFailed",
                message=(outcome.error or f"the script exited with code {outcome.exit_code}")[:500],
                hint=failure_hint(outcome.error),
            )
        )
    if primary is None:
        notes.insert(0, "The script never called torch.compile: there is nothing to analyze.")
    elif outcome.stopped == "max_steps":
        notes.append(
            f"--max-steps {config.get('max_steps')}: the script was stopped after {recorder.stopped_after} call(s) "
            f"of {primary.name}, before the next."
        )
    notes.extend(ti.torch_log_notes(run.capture.torch_logs, "while the script ran"))
    name = command[1] if command[0] == "-m" else os.path.basename(command[0])
    report = rm.assemble_report(
        target=rm.Target(
            kind="script",
            spec=" ".join(command),
            command=list(command),
            name=name,
            model_class=type(model).__name__ if model is not None else (primary.name if primary else "none"),
            parameters=sum(p.numel() for p in model.parameters()) if model is not None else 0,
            modules=len(index.modules),
            calls=primary.calls if primary else 0,
            train=train,
            inputs=[r.description for r in primary.recorded] if primary else [],
        ),
        environment=environment(AnalyzeOptions(backend=backend, device=device)),
        summary=findings.summary(failed=bool(errors)),
        started_at=started_at,
        t0=t0,
        exit_code=outcome.exit_code,
        script_error=outcome.error,
        stopped=outcome.stopped,
        **findings.sections(),
        notes=notes,
        errors=errors,
        compiled=[_compiled_row(o, rank, o is primary) for o in recorder.objects],
    )
    report.environment.backend = primary.options.get("backend", "inductor") if primary else backend
    for rc in report.recompiles:
        rc.trigger = primary.triggers.get(rc.call_index) if primary is not None and rc.call_index is not None else None
    mark_one_offs(report, primary.driver if primary else None)
    if rank == 0 and model is not None and calls and outcome.stopped is None and is_torch_failure(outcome.error):
        _torch_bug(report, model, calls, primary, config, clock)
    if rank == 0 and not report.torch_bugs and is_torch_failure(outcome.error) and getattr(outcome, "traced", None):
        _traced_bug(report, outcome, primary, config)
    if rank == 0 and primary is not None and outcome.stopped not in ("terminated", "interrupted"):
        try:
            _hand_over(report, model, calls, primary, settings, inputs, index, config, session)
        except (StopScript, KeyboardInterrupt):
            report.errors.append(
                rm.ErrorRecord(
                    phase="timeout",
                    type="AnalysisStopped",
                    message="stopped during the analysis after the script (a signal or --timeout); the sections before it stand",
                )
            )
    elif outcome.stopped in ("terminated", "interrupted"):
        report.notes.append("The script was stopped: no bisection or fixes (run again without --timeout, or with a larger one, for them).")
    derive(report)
    report.run.duration_s = rm.elapsed_s(t0)
    report.cost = cost.finish(report)
    return report


def _own_compile(primary: WatchedObject | None, keys: tuple[str, ...] = SCRIPT_COMPILE) -> dict[str, Any]:
    """The script's own torch.compile arguments among `keys` that were given as plain data."""
    literal = primary.literal_options if primary is not None else {}
    return {k: v for k, v in literal.items() if k in keys and v is not None}


def _named_backend(backend: str) -> bool:
    """Whether torch knows `backend` by name (a script may pass its own callable: no name to compile with)."""
    try:
        ti.lookup_backend(backend)
    except Exception:  # noqa: BLE001 - a backend torch does not know by name
        return False
    return True


def _fix_options(primary: WatchedObject | None) -> FixOptions:
    """The fix checks of a script: measured on its kept calls, and the applied set compiled once more on the
    script's own backend with its own options (a backend the script passed as a callable, not by name: not)."""
    backend = (primary.options if primary is not None else {}).get("backend") or "inductor"
    if not _named_backend(backend):
        return FixOptions(measure_baseline=True)
    # not `fullgraph`: a break the fixes leave is no failure of the backend
    own = _own_compile(primary, ("dynamic", "mode", "options"))
    return FixOptions(measure_baseline=True, user_backend=backend, user_compile=own)


def _torch_bug(
    report: rm.Report, model: torch.nn.Module, calls: list[Call], primary: WatchedObject | None, config: dict[str, Any], clock: Clock
) -> None:
    """The script's compile crashed inside torch: which stage, the user's line, a verified repro, the issue
    text, and a way around it checked on the script's recorded calls, into `report.torch_bugs`. The calls
    are replayed, then the last one twice more: a recompile the module's own state drives (a counter it
    bumps) needs calls beyond the recorded ones, whose inputs repeat."""
    options = primary.options if primary is not None else {}
    backend = config.get("backend") or options.get("backend") or "inductor"
    left = clock.remaining()
    if left is not None and left < TRIAGE_MIN_S:
        report.notes.append(f"The compile crashed inside torch; no time left to triage it (--timeout/--budget: {left:.0f} s).")
        return
    if not _named_backend(backend):
        report.notes.append(
            f"The compile crashed inside torch with the script's own backend {backend!r}: not triaged (not a named backend)."
        )
        return
    first = primary.recorded[0] if primary is not None and primary.recorded else None
    grad = bool(first.grad_enabled) if first is not None else False
    cast = first.autocast if first is not None else None

    def call_once(compiled: Any) -> None:
        autocast = torch.autocast(cast[0], cast[1]) if cast is not None else contextlib.nullcontext()
        with torch.set_grad_enabled(grad), autocast, preserved_state(model):
            for call in [*calls, calls[-1], calls[-1]]:
                compiled(*call.args, **call.kwargs)

    own = _own_compile(primary)
    untried = [k for k in SCRIPT_COMPILE if k in options and k not in own]  # a value not kept as plain data
    bug = triage_calls(
        call_once,
        model,
        backend,
        where=f"the script's compile of {primary.name if primary else 'its model'}",
        untried=f"the script's {', '.join(untried)}" if untried else None,
        repro_dir=config.get("repro_dir"),
        slug="script",
        compile_kwargs=own,
    )
    if bug is None:
        report.notes.append("The script's compile crashed inside torch, but its recorded calls compile here: not triaged.")
        return
    report.torch_bugs.append(bug)
    for err in report.errors:
        if err.phase == "script":  # torch's generic advice gives way to what the triage did
            err.hint = f"a bug inside PyTorch ({bug.stage}), not in your code: triaged below, with a repro and the issue text"


def _traced_bug(report: rm.Report, outcome: Any, primary: WatchedObject | None, config: dict[str, Any]) -> None:
    """A compile that crashed in Dynamo's tracing before any call was recorded (no replay to triage): the
    user's line it was tracing, read from the tracers on the traceback, the library call it went into, and
    the way around it, into `report.torch_bugs` and the error row's hint. Lightning's `self.log` in a
    compiled LightningModule (torch 2.13: `'method' object has no attribute '__dict__'`) gets its own."""
    import linecache

    from ..readers.sources import classify_file

    frames = list(outcome.traced)
    mine = own_frame(frames)
    if mine is None:
        return
    file, line, function = frames[mine]
    code = linecache.getline(file, line).strip()
    into = frames[mine + 1] if mine + 1 < len(frames) else None
    library = classify_file(into[0])[1] if into is not None else None
    strategy = None
    if library in ("lightning", "pytorch_lightning") and into is not None and into[2] == "log":
        strategy = "submodules"  # `run` checks it by running the script so (`run --compare submodules`)
        around = (
            "Lightning's `self.log` cannot be traced here: compile the network inside the LightningModule "
            "(`self.net = torch.compile(Net())`) rather than the LightningModule, or log outside the compiled code"
        )
    else:
        around = f"keep that call out of the compiled code (`torch.compiler.disable` on `{function}`'s callee), or compile less"
    error = outcome.error or ""
    bug = rm.TorchBug(
        where=f"the script's compile of {primary.name if primary else 'its model'}",
        error=error.split(" (at ")[0],
        error_type=error.split(":", 1)[0],
        stage="Dynamo",
        tried=[f"the compile crashed while Dynamo traced {function} (before any graph reached a backend)"],
        user_line=f"{file}:{line}",
        user_code=code or None,
        operation=f"{library}'s {into[2]}" if into is not None and library else None,
        repro_note="the failure is in Dynamo's tracing, before any graph, and before any call was recorded: no repro",
        issue_title="",
        workaround=around,
        workaround_strategy=strategy,
    )
    bug.issue_title = triage_issue_title(bug.stage, bug.error, bug.operation)
    bug.issue_text = triage_issue_text(bug)
    if config.get("repro_dir"):
        write_bug(bug, config["repro_dir"], "script")
    report.torch_bugs.append(bug)
    for err in report.errors:
        if err.phase == "script":
            err.hint = f"a bug inside PyTorch (Dynamo), while tracing your line {os.path.basename(file)}:{line} `{code}`: {around}"


def _compiled_row(obj: WatchedObject, rank: int, analyzed: bool) -> rm.CompiledObject:
    first_s, period_ms, iqr_ms, steady = obj.pace()
    return rm.CompiledObject(
        name=obj.name,
        kind=obj.kind,  # type: ignore[arg-type]
        options=obj.options,
        calls=obj.calls,
        inputs=[r.description for r in obj.recorded],
        rank=rank,
        analyzed=analyzed,
        site=obj.site,
        library=obj.library,
        driver=obj.driver,
        relation=obj.relation,
        first_call_s=round(first_s, 4) if first_s is not None else None,
        period_ms=round(period_ms, 4) if period_ms is not None else None,
        period_iqr_ms=round(iqr_ms, 4) if iqr_ms is not None else None,
        period_n=steady,
        losses=obj.loss_values(),
        dropout=obj.dropout,
        lora_rank=max(filter(None, (obj.lora_rank, lora_rank(obj.module))), default=None),
        calls_s=round(span, 4) if (span := obj.span_s()) is not None else None,
    )


def _hand_over(
    report: rm.Report,
    model: torch.nn.Module | None,
    calls: list[Call],
    primary: WatchedObject,
    settings: RunSettings,
    inputs: ModuleInputs | None,
    index: ModuleIndex,
    config: dict[str, Any],
    session: Session,
) -> None:
    """The script's model and its recorded calls through the one door a `build()` target's run takes
    (`pipeline.later_phases`): bisection, suggestions, verified fixes and the accuracy bisection, with the
    session's options (`_script_options`), each phase sized beside the script's model and counted in the
    run's cost. Without a module and calls, the suggestions from the findings alone."""
    if model is None or not calls:
        report.suggestions = suggest(report, None)  # rules on gb_types and guards: no model needed
        return
    workload = Workload(
        model,
        calls[0].args,
        dict(calls[0].kwargs),
        variants=[Call(c.args, dict(c.kwargs)) for c in calls[1:]],
        name=primary.name,
    )
    ctx = PhaseContext(
        workload=workload,
        calls=calls,
        settings=settings,
        spec="<script>",  # not importable: isolated trials and repro scripts need a build() target
        progress=session.progress,
        pristine=primary.pristine,
    )
    trigger = None
    if config.get("accuracy_of"):  # `run --compare`'s row whose loss departed, run again: where its compile goes wrong
        backend = str(primary.options.get("backend") or "inductor")
        if not _named_backend(backend):
            message = f"the script compiles with its own backend {backend!r}, not a named one: the modules cannot be compiled with it"
            report.errors.append(rm.ErrorRecord(phase="accuracy", type="UnnamedBackend", message=message))
            return
        trigger = Trigger(config["accuracy_of"], backend, _own_compile(primary))
    later_phases(report, ctx, session, BisectInputs(inputs, index) if inputs is not None else None, trigger=trigger)
