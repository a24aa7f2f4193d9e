"""`analyze(workload, options) -> Report`: the order of the phases, their deadlines and progress.

analysis (the compiled run under capture, then the eager pass) -> bisect (when it broke) -> suggest ->
fix -> probe -> bench. Each phase returns its section. The analysis phase's sections are assembled
into the report by `reports.models.assemble_report` (as every producer's are); this module merges
the later phases' sections into it (`ctc-doctor run`'s first rank through `after_analysis` too), each
reading the run's `session.Session` (settings, clock, cost account, what a phase lends the next). A
phase that fails becomes an error row and the phases after it run; a phase that runs out of --timeout
ends the run there. What was found before is always reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import os
import platform
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...processes import STAGE
from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ...reports.verdicts import judge_one, site_costs
from ...workload import Call, Workload
from .. import torch_internals as ti
from ..fixes.facts import ModelFacts
from ..fixes.model_facts import model_facts
from ..phases.bench import BenchSection, run_bench, staged
from ..phases.bench.staged import Checkpoint
from ..phases.bisect import BisectInputs, bisect_into, worker_setup
from ..phases.bisect.accuracy import Trigger, mark_not_recommended, run_accuracy_bisect, wrong_under_compile
from ..phases.bisect.repro import write_module_repro
from ..phases.bisect.trials import TrialWorker
from ..phases.context import PhaseContext
from ..phases.fix import FixSection, run_fix
from ..phases.observe import Observation, ObserveOptions, run_observe
from ..phases.probe import run_probe
from ..phases.suggest import compile_cache_suggestion, renumber, run_suggest
from ..readers.assembly import derive
from ..readers.expected import mark_one_offs, mark_settled
from ..readers.gb_registry import graph_break_registry
from ..readers.text import describe_error, error_site
from ..resources.preflight import NotEnoughMemory, model_bytes
from ..resources.weights import meta_stop
from ..running.calls import calls_on, grad_mode, preserved_state, run_call
from ..running.copying import SPILLED, CopyError, copy_model, light_copy, spilled_copy, working_copy
from ..running.deadline import Interrupted, Stopped, deadline, limit_text, stop_record, stoppable
from ..running.memory import free_tensors, let_go, release_memory
from ..running.modules import describe_inputs, forward_arg_names
from ..running.reference.precision import Room
from ..running.settings import RunSettings, measured_on
from ..running.tensors import iter_tensors
from ..running.warning_notes import collected_warnings, warning_notes
from ..services.own_cost import Fit, RunCost
from ..services.session import AnalyzeOptions, Clock, Session
from ..services.twin import twin_instead
from ..triage import TRIAGE_MIN_S, is_torch_failure
from ..triage.around import triage_calls


def analyze(workload: Workload, options: AnalyzeOptions | None = None) -> rm.Report:
    """Analyze a workload and return the report. Resets torch._dynamo state (compiled caches)."""
    options = options or AnalyzeOptions()
    with stoppable() if options.catch_signals else contextlib.nullcontext():
        return twin_instead(_analyze(workload, options), options, _analyze)


def _analyze(workload: Workload, options: AnalyzeOptions) -> rm.Report:
    options, placed = _placed(workload, options)
    options, unweighted = options.without_weights()
    if options.resume:
        return _resume(workload, options)
    started_at = rm.started_now()
    session = Session.start(options)
    cost = session.cost
    ctx, copy_note = _context(workload, options, cost)
    calls = ctx.calls
    with contextlib.ExitStack() as resources:
        seen = resources.enter_context(collected_warnings())
        logged = resources.enter_context(ti.quiet_torch_stderr(True))  # every phase: fix, bench, AOT too
        worker = _EarlyWorker(ctx, options, resources)
        if options.bisect is not None and options.bisect.always:
            worker.start()  # it bisects whatever the compiled pass finds
        report = _run(workload, calls, ctx, session, started_at, copy_note, worker)
    report.notes.extend(warning_notes(seen))
    report.notes.extend(ti.torch_log_notes(logged, "during the run"))
    if placed:
        report.notes.append(placed)
    if options.weights != "real":
        report.target.weights = options.weights  # type: ignore[assignment]
        report.notes.extend(unweighted)
    report.cost = cost.finish(report)
    return report


def _placed(workload: Workload, options: AnalyzeOptions) -> tuple[AnalyzeOptions, str | None]:
    """Without --device, a model and calls the builder put on one CUDA device are measured there (its
    synchronisation, allocator peaks, preflight and float64 reference ways), as if `--device` named it;
    the note that says so. Anything else (the CPU, tensors on several devices) keeps the builder's placement."""
    if options.device is not None or not isinstance(workload.model, torch.nn.Module):
        return options, None
    model = workload.model
    devices = {t.device for t in [*model.parameters(), *model.buffers()]}
    devices |= {t.device for call in workload.calls() for t in iter_tensors((tuple(call.args), dict(call.kwargs)))}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        return options, None
    device = str(next(iter(devices)))
    note = f"Measured on {device}, where the target put the model and its inputs (no --device)."
    return dataclasses.replace(options, device=device), note


def _context(workload: Workload, options: AnalyzeOptions, cost: RunCost) -> tuple[PhaseContext, str | None]:
    """The run's context: its settings, the pristine copy (taken before the move: on an accelerator it stays
    on the host), the model and its calls on the run's device; the note when the model cannot be copied."""
    settings = RunSettings(
        backend=options.resolved_backend(),
        train=options.train,
        seed=options.seed,
        device=options.device,
        grad=options.train or bool(workload.grad),
    )
    pristine, copy_note = _pristine_copy(workload, options)
    cost.spilled = getattr(pristine, SPILLED, None) is not None
    if options.device is not None and isinstance(workload.model, torch.nn.Module):
        workload.model.to(options.device)
    ctx = PhaseContext(
        workload=workload,
        calls=calls_on(workload, options.device),
        settings=settings,
        spec=options.spec,
        command=options.command,
        progress=cost.progress,
        owner="doctor" if options.owns_workload else "caller",
        pristine=pristine,
        release=_releaser(workload, pristine, settings, cost) if options.owns_workload else None,
        rebuild=_rebuilder(options) if options.owns_workload else None,
    )
    return ctx, copy_note


def _resume(workload: Workload, options: AnalyzeOptions) -> rm.Report:
    """A supervised run's stage after a crash in an arm (`cli.supervise`): the report before the benchmark
    and the arms measured before the crash from the checkpoint (`staged.load`), the model built again (the
    CLI did), the arms after the crashed one, then the accuracy bisection and the verdicts. Its cost account
    is this stage's (the phases before the benchmark from the first stage's), counted from its own start."""
    assert options.bench is not None and options.bench.stage is not None
    state = staged.load(options.bench.stage)
    session = Session.start(dataclasses.replace(options, started_s=None))
    cost, clock = session.cost, Clock(options.timeout_s, options.budget_s, options.started_s)
    cost.meter.restore(state.phases)
    cost.footprint = state.footprint
    report = state.report
    crashed = ", ".join(a.name for a in state.benchmark.arms if a.crash)
    cost.notes.append(f"the run was started again after a crash in {crashed}: the account from there is the last stage's")
    ctx, _ = _context(workload, options, cost)
    facts = model_facts(workload.model, ctx.calls) if isinstance(workload.model, torch.nn.Module) else None
    room = Room.beside(cost.footprint, cost.limit, _gradients(workload.model, options.train))
    ctx = dataclasses.replace(ctx, release=None, rebuild=_rebuilder(options), facts=facts, room=room)
    with contextlib.ExitStack() as resources:
        seen = resources.enter_context(collected_warnings())
        logged = resources.enter_context(ti.quiet_torch_stderr(True))
        phase_ctx = dataclasses.replace(ctx, budget_s=clock.planned(), report=report.model_copy(deep=True))
        stop = _phase_into(
            report,
            "bench",
            functools.partial(run_bench, phase_ctx, options.bench, resumed=state.benchmark),
            lambda section: _merge_bench(report, section),
            clock.remaining(),
            options.timeout_s,
        )
        if not isinstance(stop, Interrupted):
            accuracy_into(report, ctx, session)
        _merge_verdicts(report)
        derive(report)
    report.run.duration_s = clock.elapsed()
    report.notes.extend(warning_notes(seen))
    report.notes.extend(ti.torch_log_notes(logged, "during the run"))
    report.cost = cost.finish(report)
    return report


class _EarlyWorker:
    """The child process of isolated trials, started early (full runs only: a bisection alone would wait
    for it anyway): once the compiled pass broke the graph or failed (`ObserveOptions.on_broken`), so it
    imports torch and the target while the eager pass and the report run; the model is built only when
    the bisection asks (`workers.trial`). A model that compiles whole starts none: no second torch."""

    def __init__(self, ctx: PhaseContext, options: AnalyzeOptions, resources: contextlib.ExitStack) -> None:
        self.ctx, self.options, self.resources = ctx, options, resources
        self.worker: TrialWorker | None = None
        bisect = options.bisect
        self.wanted = bisect is not None and bisect.isolate and options.compile and isinstance(ctx.workload.model, torch.nn.Module)

    def start(self) -> None:
        if not self.wanted or self.worker is not None:
            return
        assert self.options.bisect is not None
        setup = worker_setup(self.ctx, self.options.bisect)
        if setup is None:
            return
        self.worker = TrialWorker(setup)
        self.resources.callback(self.worker.shutdown)
        self.worker.start()


def _run(
    workload: Workload,
    calls: list[Call],
    ctx: PhaseContext,
    session: Session,
    started_at: str,
    copy_note: str | None,
    early: _EarlyWorker,
) -> rm.Report:
    options, clock, cost = session.options, session.clock, session.cost
    analysis = run_observe(
        ctx,
        ObserveOptions(
            compile=options.compile,
            explain=options.explain,
            keep_guard_text=options.keep_guard_text,
            record_inputs=options.bisect is not None,
            inputs_if_broken=options.bisect is not None and not options.bisect.always,
            on_broken=early.start,
            timeout_s=max(1e-3, clock.remaining() or 0.0) if options.timeout_s else None,
            meta=options.weights == "none",
        ),
    )
    report = _report(workload, calls, options, analysis, started_at, clock)
    mark_one_offs(report)  # before the suggestions: none is made for them
    cost.footprint = analysis.footprint
    if copy_note:
        report.notes.append(copy_note)
    if options.weights == "none":
        meta_stop(report)
    if not any(e.phase in STOPPED for e in report.errors):
        _compile_bug(report, ctx, options, clock)
    try:
        inputs = BisectInputs(analysis.module_inputs, analysis.index) if analysis.module_inputs is not None else None
        later_phases(report, ctx, session, inputs, worker=early.worker)
    except Stopped as stop:  # between phases, or in one that keeps nothing of its own: what came before stands
        report.errors.append(
            stop_record(stop, "the later phases", f"the run did not finish within {limit_text(options.timeout_s)}; partial report")
        )
    derive(report)
    report.run.duration_s = clock.elapsed()
    return report


STOPPED = ("eager", "timeout", "interrupted", "weights")
"""Error phases after which no later phase runs: the model fails in eager, the time ran out, a signal, or a
run without the weights needed real values."""


def later_phases(
    report: rm.Report,
    ctx: PhaseContext,
    session: Session,
    inputs: BisectInputs | None,
    *,
    worker: TrialWorker | None = None,
    trigger: Trigger | None = None,
) -> None:
    """The one door to what runs after the analysis, for a `build()` target's run and a script's under `run`
    (`script_report`) alike: each producer gives the session its settings (`session.options`: the bisection,
    the fixes, the benchmark, train, seed, device) and what it recorded (`inputs`: the modules' first-call
    inputs), and the same phases run: the bisection when it found breaks, then suggest -> fix -> probe ->
    bench and the accuracy bisection (`after_analysis`). `trigger`: `run --compare`'s row whose loss departed,
    run again to find where its compile goes wrong (the accuracy bisection only). `worker`: the isolated
    trials' child, started early (shut down here once the bisection no longer needs it)."""
    options = session.options
    if trigger is not None:
        accuracy_into(report, ctx, session, trigger)
        return
    stopped = any(e.phase in STOPPED for e in report.errors)
    if options.bisect is not None and inputs is not None and not stopped and _should_bisect(report, options):
        bisect = options.bisect
        if session.fit("bisect", ctx, report, isolated=bisect.isolate).in_process:
            bisect = dataclasses.replace(bisect, isolate=False)  # a second model would not fit beside this one: no child builds it
            if worker is not None:
                worker.shutdown()  # its torch, imported early, goes now rather than idle through the trials
        inputs = dataclasses.replace(inputs, trial_worker=worker if bisect.isolate else None)
        bisect_into(report, ctx, bisect, inputs, session.clock, bisect_only=not options.compile)
    if worker is not None:
        worker.shutdown()  # not needed past the bisection: its CPU, memory and files go now
    if options.compile and not (stopped or any(e.phase == "interrupted" for e in report.errors)):
        after_analysis(report, ctx, session)


def _compile_bug(report: rm.Report, ctx: PhaseContext, options: AnalyzeOptions, clock: Clock) -> None:
    """The analysis's own compile crashed inside torch (while tracing, in a backend, or while building a guard):
    triaged on a copy as a script's crash is (`triage.triage_calls`): the stage, the user's line, a verified
    repro, the issue text and a workaround checked on the workload's calls, into `report.torch_bugs`."""
    error = next((e for e in report.errors if e.phase == "compile" and is_torch_failure(e.message)), None)
    source = ctx.pristine if ctx.pristine is not None else ctx.workload.model
    if error is None or not isinstance(source, torch.nn.Module):
        return
    left = clock.remaining()
    if left is not None and left < TRIAGE_MIN_S:
        report.notes.append(f"The compile crashed inside torch; no time left to triage it (--timeout/--budget: {left:.0f} s).")
        return
    settings = ctx.settings
    model = working_copy(source, settings.device, share=settings.shares)

    def calls(compiled: Any) -> None:
        with preserved_state(model), grad_mode(settings):
            for i, call in enumerate(ctx.calls):
                run_call(compiled, ctx.workload, call, i, seed=settings.seed, train=settings.train, model=model)

    folder = options.fix.repro_dir if options.fix is not None else None

    def module_repro(path: str, captured: Any) -> str | None:  # a crash in tracing: its smallest module, rebuilt
        text, frame = error_site(error.message)
        return write_module_repro(ctx, folder, path, captured, text.split(": ", 1)[-1], f"at {frame}" if frame else "") if folder else None

    bug = triage_calls(
        calls,
        model,
        settings.backend,
        where=f"the compile of {report.target.model_class}",
        untried=None,
        repro_dir=folder,
        slug="compile",
        module_repro=module_repro,
    )
    if bug is None:
        return
    report.torch_bugs.append(bug)
    error.hint = f"a bug inside PyTorch ({bug.stage}), not in your code: triaged below, with a repro and the issue text"


def _pristine_copy(workload: Workload, options: AnalyzeOptions) -> tuple[Any, str | None]:
    """A copy of the model before anything runs it, for the copies fix and bench compile (None when
    neither runs); a note when the model cannot be copied and they copy the warmed-up model instead.
    Inference: it shares the model's parameters (`copying.light_copy`: no run writes into one), so it
    costs their buffers and attributes only and follows the model to the device, where every copy made
    from it shares them too. Training (an optimizer moves the parameters): a whole copy, which on an
    accelerator lives on the host: each copy made from it moves to the device, so the device holds the
    model and one copy at most."""
    if not (options.compile and (options.fix or options.bench)) or not isinstance(workload.model, torch.nn.Module):
        return None, None
    accelerator = options.device is not None and options.device != "cpu"
    limit = options.memory_limit_mb * 2**20 if options.memory_limit_mb else None
    if options.train and not accelerator and limit is not None and model_bytes(workload.model) > limit:
        # a whole copy on the host would pass --memory-limit by itself: it is kept in a file instead
        spilled = spilled_copy(workload.model, os.path.basename(os.environ.get(STAGE, "")) or str(os.getpid()))
        if spilled is not None:
            size = model_bytes(workload.model) / 2**20
            return spilled, (
                f"Memory: the copy of the model taken before the analysis ({size:.0f} MB) was kept in a temporary file "
                f"({getattr(spilled, SPILLED)}), not in memory (--memory-limit {options.memory_limit_mb} MB); each copy a "
                "later phase runs is read back from it."
            )
    try:  # training on an accelerator: copied straight to the host (a model built there is not doubled on it)
        pristine = light_copy(workload.model) if not options.train else copy_model(workload.model, to="cpu" if accelerator else None)
    except CopyError as exc:
        return None, f"{exc}: fix and bench copied the model after the analysis ran it (first-call set-up done)."
    if options.train and accelerator:
        pristine.to("cpu")
    return pristine, None


def _gradients(model: Any, train: bool) -> int:
    """Bytes of a training workload's gradients (its trainable parameters, once each): the workload's own."""
    if not train or not isinstance(model, torch.nn.Module):
        return 0
    return sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())


def _rebuilder(options: AnalyzeOptions) -> Callable[[], Workload]:
    """Builds the workload again from its TARGET, as the CLI built it."""

    def rebuild() -> Workload:
        from ..services.target import load_workload

        return load_workload(options.rebuild_target(), seed=options.seed)

    return rebuild


def _releaser(workload: Workload, pristine: Any, settings: RunSettings, cost: RunCost) -> Callable[[], int]:
    """What frees this process' model and its pristine copy (their tensors) when the caller handed the
    workload over: the benchmark calls it before its child process rebuilds them. Returns the bytes freed."""

    def release() -> int:
        freed = free_tensors(workload.model, pristine)
        ti.reset_dynamo_quietly()
        release_memory(settings.where)
        cost.let_go(freed, "its pristine copy before the arms' child rebuilt the model")
        return freed

    return release


# ---------------------------------------------------------------------------------------------
# the report of the analysis phase
# ---------------------------------------------------------------------------------------------


def _report(
    workload: Workload, calls: list[Call], options: AnalyzeOptions, analysis: Observation, started_at: str, clock: Clock
) -> rm.Report:
    model = workload.model
    is_module = isinstance(model, torch.nn.Module)
    arg_names = forward_arg_names(model)
    found = analysis.findings
    return rm.assemble_report(
        target=rm.Target(
            spec=options.spec,
            name=workload.name or type(model).__name__,
            model_class=type(model).__name__,
            parameters=sum(p.numel() for p in model.parameters()) if is_module else 0,
            modules=len(analysis.index.modules),
            calls=len(calls),
            train=options.train,
            inputs=[describe_inputs(c.args, dict(c.kwargs), arg_names) for c in calls],
        ),
        environment=environment(options),
        summary=analysis.summary,
        command=options.command,
        started_at=started_at,
        t0=clock.t0,
        seed=options.seed,
        **found.sections(),
        explain=analysis.explain,
        notes=analysis.notes,
        errors=analysis.errors,
    )


def environment(options: AnalyzeOptions) -> rm.Environment:
    try:
        tf_version: str | None = importlib.metadata.version("transformers")  # no import: it is slow
    except importlib.metadata.PackageNotFoundError:
        tf_version = None
    return rm.Environment(
        python=platform.python_version(),
        torch=ti.torch_version(),
        transformers=tf_version,
        platform=f"{platform.system()}-{platform.machine()}",
        device=measured_on(options.device),
        backend=options.resolved_backend(),
        unavailable=ti.unavailable_features()
        + ([] if graph_break_registry() is not None else ["graph-break registry: no GB ids or registry hints"]),
    )


# ---------------------------------------------------------------------------------------------
# bisection
# ---------------------------------------------------------------------------------------------


def _should_bisect(report: rm.Report, options: AnalyzeOptions) -> bool:
    assert options.bisect is not None
    compile_failed = any(e.phase == "compile" for e in report.errors)
    return options.bisect.always or not options.compile or bool(report.graph_breaks) or compile_failed


# ---------------------------------------------------------------------------------------------
# suggest -> fix -> probe -> bench
# ---------------------------------------------------------------------------------------------


def _merge_fix(report: rm.Report, section: FixSection) -> None:
    report.fix = section.result
    for sid, bug in section.torch_bugs.items():
        bug.suggestion = sid  # the candidate fix's bug: it stays on that fix
        report.torch_bugs.append(bug)
    for suggestion in report.suggestions:
        if suggestion.id in section.verified:
            suggestion.verified = section.verified[suggestion.id]
            if suggestion.verified.moved_break and suggestion.category == "fix":
                suggestion.category = "workaround"  # measured: the break moved, it was not removed
    # a break that one eager call before compiling does not remove was not the first call's alone
    # (a line only compiled code runs, under `if torch.compiler.is_compiling():`)
    sites = {s.id: s for s in report.graph_breaks}
    for suggestion in report.suggestions:
        v = suggestion.verified
        if suggestion.action is None or suggestion.action.type != "warm_up" or v is None or not v.applied or v.error:
            continue
        kept = [sites[i] for i in suggestion.applies_to if i in sites and i not in v.fixed and sites[i].first_call_only]
        for site in kept:
            site.first_call_only = False
        if kept:
            report.notes.append(
                f"{', '.join(s.id for s in kept)}: an eager call before compiling does not remove the break, so it is "
                "not the first call's alone (its line runs only under compile): first_call_only cleared."
            )


def _merge_bench(report: rm.Report, section: BenchSection) -> None:
    report.benchmark = section.benchmark
    report.torch_bugs.extend(section.torch_bugs)
    for suggestion in report.suggestions:
        if suggestion.id in section.verified:
            suggestion.verified = section.verified[suggestion.id]
    advice = compile_cache_suggestion(section.benchmark)
    if advice is not None:
        report.suggestions.append(advice)
        renumber(report.suggestions)


def after_analysis(report: rm.Report, ctx: PhaseContext, session: Session) -> None:
    """suggest -> fix -> probe -> bench, each merged into the report; a failing phase becomes an error row,
    a phase that would not fit in memory is adapted or left out, said (`cost.plan`); when the analysis
    itself went past --memory-limit, the run stops here (a `preflight` error row, exit 14)."""
    options, clock, cost = session.options, session.clock, session.cost
    if not (options.suggest or options.fix or options.probe_shapes or options.bench):
        return
    model = ctx.workload.model
    is_module = isinstance(model, torch.nn.Module)
    facts: ModelFacts | None = model_facts(model, ctx.calls) if is_module else None
    if facts is not None:
        mark_settled(report, facts.arg_shapes)  # before the suggestions: none is made for them
    room = Room.beside(cost.footprint, cost.limit, _gradients(model, ctx.settings.train))
    ctx = dataclasses.replace(ctx, facts=facts, room=room)
    if options.owns_workload and ctx.pristine is not None and not options.probe_shapes:
        # the later phases run copies of the pristine model: the caller's own model is not run again (its
        # parameters stay when the pristine model shares them: inference)
        cost.let_go(free_tensors(model, keep=ctx.pristine), "its model after the analysis")
        release_memory(ctx.settings.where)
    try:
        cost.check_analysis(ctx.pristine, ctx.settings.shares)
    except NotEnoughMemory as exc:
        report.errors.append(rm.ErrorRecord(phase="preflight", type="NotEnoughMemory", message=exc.one_line()))
        return
    # (phase, run, merge, reads the report): a phase that reads the report gets a copy of it; `run` gets the
    # preflight's plan for it (`Fit`)
    steps: list[tuple[rm.Phase, Callable[[PhaseContext, Fit], Any], Callable[[Any], None], bool]] = []
    if options.suggest:
        steps.append(("suggest", lambda c, _: run_suggest(c), lambda section: setattr(report, "suggestions", section), True))

    def merge_fix(section: FixSection) -> None:
        _merge_fix(report, section)
        session.lend(section.reference, section.lent_compile)  # the benchmark judges its arms by it, compiles from it
        cost.reference = section.reference_run

    if options.fix is not None and facts is not None:
        # the benchmark's arms judged by the fix checks' reference: same calls, seed and pristine model
        fix_options = dataclasses.replace(options.fix, keep_reference=options.bench is not None and is_module)
        steps.append(("fix", lambda c, _: run_fix(c, fix_options), merge_fix, True))
    if options.probe_shapes and facts is not None:
        steps.append(("probe", lambda c, _: run_probe(c), lambda section: setattr(report, "shape_probe", section), False))
    if options.bench is not None and is_module:
        bench_options = options.bench

        def bench(c: PhaseContext, fit: Fit) -> BenchSection:
            if bench_options.stage is not None:  # supervised: what a stage started after a crash goes on from
                Checkpoint(bench_options.stage).start(report, cost.meter.snapshot(), cost.footprint)
                return run_bench(c, bench_options)
            if not fit.in_process:
                return run_bench(c, bench_options)
            section = run_bench(c, dataclasses.replace(bench_options, isolate=False))
            why = f"in this process: a child would not fit beside the workload ({fit.note})"
            section.benchmark.isolation = rm.BenchIsolation(isolated=False, reason=why)
            section.benchmark.settings["isolation"] = "in-process"
            return section

        steps.append(("bench", bench, lambda section: _merge_bench(report, section), True))
    interrupted = False
    for phase, run, merge, reads_report in steps:
        budget = clock.remaining()
        if budget is not None and budget <= 0:
            message = f"no time left for {phase} ({limit_text(options.timeout_s)})"
            report.errors.append(rm.ErrorRecord(phase="timeout", type="AnalysisTimeout", message=message))
            break
        phase_ctx = dataclasses.replace(
            ctx,
            budget_s=clock.planned(),
            report=report.model_copy(deep=True) if reads_report else None,
            reference=session.reference if phase == "bench" else None,
            fixed_compile=session.fixed_compile if phase == "bench" else None,
        )
        if phase == "suggest":
            ctx.progress(ProgressEvent(Step.SUGGEST))  # its own line in the cost section (the others report their steps)
        fit = session.fit(phase, ctx, report)
        if not fit.run:
            continue
        stop = _phase_into(report, phase, functools.partial(run, phase_ctx, fit), merge, budget, options.timeout_s)
        if stop is not None:
            interrupted = isinstance(stop, Interrupted)
            break
    session.close()
    if not interrupted:  # a signal asked the run to stop: what it found is reported now
        accuracy_into(report, ctx, session)
    _merge_verdicts(report)


def _phase_into(
    report: rm.Report, phase: rm.Phase, run: Callable[[], Any], merge: Callable[[Any], None], budget: float | None, timeout_s: float | None
) -> Stopped | None:
    """One later phase run within `budget` and merged into the report; a stop (the deadline, a signal) merges
    what the phase measured before it (the arms so far), is recorded and returned; an error is a row."""
    try:
        # the copies and timed passes run the model dozens of times: keep its prints off the terminal
        with deadline(budget), _quiet_output(phase, report.notes):
            section = run()
        merge(section)
    except Stopped as stop:
        if stop.partial is not None:  # what the phase measured before the stop (the arms so far)
            merge(stop.partial)
        report.errors.append(stop_record(stop, phase, f"{phase} did not finish within {limit_text(timeout_s)}; partial report"))
        return stop
    except Exception as exc:  # noqa: BLE001 - the phases before it still stand
        report.errors.append(rm.ErrorRecord(phase=phase, type=type(exc).__name__, message=describe_error(exc)[:500]))
    finally:
        ti.reset_dynamo_quietly()
    return None


def accuracy_into(report: rm.Report, ctx: PhaseContext, session: Session, trigger: Trigger | None = None) -> None:
    """When the compiled model gives wrong results (`wrong_under_compile`, or the caller's `trigger`: `run
    --compare`'s row whose loss departed): say so in the summary, find the module that diverges on a fresh
    copy (`run_accuracy_bisect`), and mark what would run it compiled."""
    options, clock = session.options, session.clock
    trigger = trigger or wrong_under_compile(report)
    if trigger is None:
        return
    report.summary.wrong_results = trigger.text
    budget = clock.remaining()
    if options.accuracy is None or not isinstance(ctx.workload.model, torch.nn.Module):
        return
    if budget is not None and budget <= 0:
        report.notes.append(f"No time left to find where compiled goes wrong ({limit_text(options.timeout_s)}).")
        return
    fit = session.fit("accuracy", ctx, report, isolated=False, noted=False)
    if not fit.run:  # its fresh model and the activations of its trials would not fit
        session.cost.notes.append(fit.note or "")
        report.notes.append(f"Memory: {fit.note}; where compiled goes wrong was not looked for.")
        return
    device = ctx.settings.device
    source = ctx.pristine if ctx.pristine is not None else ctx.workload.model
    try:  # a copy (sharing the weights for inference); rebuilt only when the benchmark's child had it let go
        workload = ctx.rebuild() if ctx.rebuild is not None and let_go(source) else None
        model = workload.model if workload is not None else working_copy(source, device, share=ctx.settings.shares)
    except Exception as exc:  # noqa: BLE001 - a builder that fails now, a model that cannot be copied: said, and no bisection
        report.notes.append(f"The accuracy bisection needs a fresh model, and could not get one: {describe_error(exc)[:200]}.")
        return
    if device is not None:
        model.to(device)
    calls = calls_on(workload, ctx.settings.device) if workload is not None else ctx.calls
    phase_ctx = dataclasses.replace(ctx, workload=workload or ctx.workload, calls=calls, budget_s=clock.planned(), report=None)
    try:
        with deadline(budget), _quiet_output("accuracy", report.notes):
            report.accuracy = run_accuracy_bisect(phase_ctx, options.accuracy, model, trigger, report.torch_bugs)
    except Stopped as stop:
        report.errors.append(
            stop_record(stop, "the accuracy bisection", f"the accuracy bisection did not finish within {limit_text(options.timeout_s)}")
        )
    except Exception as exc:  # noqa: BLE001 - the findings before it stand
        report.errors.append(rm.ErrorRecord(phase="accuracy", type=type(exc).__name__, message=describe_error(exc)[:500]))
    finally:
        ti.reset_dynamo_quietly()
        free_tensors(model, keep=source if workload is None else None)  # a light copy's parameters stay its source's
        del model, workload, phase_ctx
        release_memory(ctx.settings.where)
    a = report.accuracy
    if a is not None and a.module_path is not None:
        report.summary.wrong_results += f"; `{a.module_path or '(root)'}` ({a.module_class}) diverges compiled alone"
        mark_not_recommended(report, [p for g in ctx.facts.repeated for p in g.paths] if ctx.facts is not None else [])


def _merge_verdicts(report: rm.Report) -> None:
    """Each measured suggestion's deltas and verdict (the next steps rank by them)."""
    for suggestion in report.suggestions:
        judged = judge_one(report, suggestion)
        if judged is not None:
            suggestion.deltas, suggestion.verdict, suggestion.verdict_reason = judged
    site_costs(report)


@contextlib.contextmanager
def _quiet_output(phase: str, notes: list[str]) -> Iterator[None]:
    """The model's prints discarded; what torch or the model writes to `sys.stderr` (an export failure's
    graph dump) kept off the terminal and told in one note. ctc-doctor's own progress and messages go
    to the terminal's stderr they were bound to when the command started."""
    import io

    err = io.StringIO()
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(err):
            yield
    finally:
        text = err.getvalue()
        if text.strip():
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]
            lines = len(text.splitlines())
            size = f"{len(text) / 1024:.1f} KB ({lines} lines)"
            notes.append(f"{phase}: {size} written to stderr by torch or the model, not shown; first: {first}")
