"""Commands that analyze a model from a `build()` TARGET: analyze (the full run), fix, bench, bisect,
demo and the CI gate `check`; the progress display of a run, and its exit code."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from ..errors import ExitCode
from ..processes import freeze_heap
from ..progress import ProgressEvent, Step
from . import supervise
from .options import (
    GATE_OPTIONS,
    REPRO_DIR,
    AnalysisArgs,
    GateArgs,
    analysis_options,
    bench_options,
    bisect_options,
    fix_options,
    option_group,
    parsed_as,
)
from .output import (
    fail,
    gate,
    one_line_errors,
    print_summary,
    progress_writer,
    report_console,
    run_live,
    stderr_console,
    stdout_reserved,
    write_report,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..reports.models import Report
    from ..reports.policy import Policy
    from ..workload import Workload

ERROR_PHASE_EXIT = {
    "eager": ExitCode.EAGER_FAILED,
    "compile": ExitCode.COMPILE_FAILED,
    "timeout": ExitCode.TIMEOUT,
    "interrupted": ExitCode.INTERRUPTED,
    "bisect": ExitCode.INTERNAL_ERROR,  # a bug in the bisection; the analysis part of the report stands
    "accuracy": ExitCode.INTERNAL_ERROR,
    "suggest": ExitCode.INTERNAL_ERROR,
    "fix": ExitCode.INTERNAL_ERROR,
    "probe": ExitCode.INTERNAL_ERROR,
    "bench": ExitCode.INTERNAL_ERROR,
    "preflight": ExitCode.NO_MEMORY,
    "weights": ExitCode.NEEDS_WEIGHTS,
}
"""The exit code of a run whose report holds an error of this phase."""


@click.command("analyze")
@click.argument("target")
@analysis_options
@bisect_options("top-down", full_run=True)
@fix_options(full_run=True)
@bench_options(full_run=True)
def analyze_command(target: str, **kw: Any) -> None:
    """Analyze TARGET (`pkg.module:build` or `path/file.py:build`): breaks and recompiles, bisection
    when it breaks, suggestions, verified fixes on a copy, and a benchmark."""
    args = parsed_as(AnalysisArgs, kw)
    analyze_and_exit(target, _loader(target, args.seed, args.weights), args)


@click.command()
@click.argument("target")
@analysis_options
@bisect_options("top-down", full_run=True)
@fix_options(full_run=False)
def fix(target: str, **kw: Any) -> None:
    """Apply every auto-applicable suggestion to a copy of TARGET's model and verify it.

    Each suggestion is tried alone (counts before/after, outputs against eager), then the safe,
    effective ones together. The user's model is never modified. No benchmark.
    """
    args = replace(parsed_as(AnalysisArgs, kw), no_bench=True)
    analyze_and_exit(target, _loader(target, args.seed, args.weights), args)


@click.command()
@click.argument("target")
@analysis_options
@bench_options(full_run=False)
@click.option("--no-fix", is_flag=True, help="No compiled_fixed arm (skip applying the suggestions).")
@REPRO_DIR
def bench(target: str, **kw: Any) -> None:
    """Benchmark TARGET: eager vs compiled vs compiled-with-fixes (and regional compilation).

    Per arm: cold and warm-cache compile time, steady-state latency (median, IQR), speedup vs eager,
    graph/break/recompile counts, peak memory, numerical agreement with eager. No bisection.
    """
    args = replace(parsed_as(AnalysisArgs, kw), no_bisect=True)
    analyze_and_exit(target, _loader(target, args.seed, args.weights), args)


@click.command()
@click.argument("target")
@analysis_options
@bisect_options("both", full_run=False)
def bisect(target: str, **kw: Any) -> None:
    """Find the smallest submodules of TARGET that fail torch.compile(fullgraph=True).

    One eager call records every submodule's inputs; then fullgraph trials run top-down (root
    first, into failing children) and/or bottom-up (leaves first). Identical modules are tried once.
    """
    args = replace(parsed_as(AnalysisArgs, kw), bisect_only=True)
    analyze_and_exit(target, _loader(target, args.seed, args.weights), args)


@click.command()
@click.option("--fixture", default="showcase", show_default=True, help="Which fixture of the zoo to run.")
@click.option("--list", "list_fixtures", is_flag=True, help="List the fixtures zoo and exit.")
@analysis_options
@bisect_options("top-down", full_run=True)
@fix_options(full_run=True)
@bench_options(full_run=True)
def demo(fixture: str, list_fixtures: bool, **kw: Any) -> None:
    """Analyze a built-in example model from the fixtures zoo (no user code needed)."""
    from ..fixtures.registry import all_fixtures

    fixtures = all_fixtures()
    if list_fixtures:
        for name, spec in fixtures.items():
            click.echo(f"{name:30s} {spec.summary}   [{spec.target}]")
        return
    if fixture not in fixtures:
        fail(f"no fixture named {fixture!r} (see ctc-doctor demo --list)", ExitCode.USAGE)
    spec = fixtures[fixture]
    label = "demo" if fixture == "showcase" else f"demo --fixture {fixture}"
    args = replace(parsed_as(AnalysisArgs, kw), rebuild_spec=spec.target)
    analyze_and_exit(label, _loader(spec.target, args.seed, args.weights), args)


@click.command()
@click.argument("target")
@analysis_options
@option_group(GATE_OPTIONS)
def check(target: str, **kw: Any) -> None:
    """CI gate: analyze TARGET (no bisection) and exit 1 when the thresholds are exceeded.

    For a script, the same gate is `ctc-doctor run --check -- train.py` (same threshold options).
    """
    policy = parsed_as(GateArgs, kw, all_of_them=False).policy(gate=True)
    args = replace(parsed_as(AnalysisArgs, kw), no_bisect=True, no_fix=True, no_bench=True)
    analyze_and_exit(target, _loader(target, args.seed, args.weights), args, policy)


COMMANDS = [analyze_command, fix, bench, bisect, demo, check]


def _loader(target: str, seed: int, weights: str = "real") -> Callable[[], Workload]:
    def load() -> Workload:
        from ..analyzer.services.target import load_workload

        return load_workload(target, seed=seed, weights=weights)

    return load


def analyze_and_exit(spec: str, load: Callable[[], Workload], args: AnalysisArgs, policy: Policy | None = None) -> None:
    """Analyze, write the report, print the summary, exit with the run's code."""
    if args.tui:
        run_live(args.json_out)
    console = stderr_console()
    if args.print_diff and args.json_out == "-":
        fail("--diff prints the patch on stdout: write the JSON report to a file (--json PATH)", ExitCode.USAGE)
    if (args.print_diff or args.write) and args.no_fix:
        fail("--diff and --write need the verified fixes: drop --no-fix", ExitCode.USAGE)
    runs_bench = args.bench_backend is not None and not args.no_bench and not args.bisect_only
    supervised = supervise.wanted(
        args.rebuild_spec or spec, bench=runs_bench, isolate=args.isolate_arms, tui=args.tui, arm_memory=args.arm_memory_mb is not None
    )
    if supervised:
        sys.exit(supervise.run())  # this process starts the run as a stage and restarts it after a crash in an arm
    if supervise.STAGE in os.environ:
        from ..analyzer.running.worker import die_with_parent

        die_with_parent()
    _check_device_and_backends(args, args.rebuild_spec or spec)
    with one_line_errors(args.debug):
        with stdout_reserved(args.json_out == "-" or args.print_diff) as real_stdout:
            report = _analyze_with_progress(spec, load, args, console)
            if args.json_out:
                write_report(report, args.json_out, real_stdout, redact=args.redact)
        eager_failed = any(e.phase == "eager" for e in report.errors)
        if not args.quiet and not eager_failed:  # nothing was analyzed: the one-line error says it all
            summary = report_console(args.json_out == "-" or args.print_diff)
            print_summary(report, summary, top=args.top, json_out=args.json_out)
    if args.bisect_only and report.bisect is None and not report.errors:
        fail("bisect needs an nn.Module model; the target returned a " + report.target.model_class, ExitCode.TARGET_INVALID)
    # a signal that stopped the run says so first, whatever failed before it
    stop = [e for e in report.errors if e.phase == "interrupted"]
    fatal = next((e for e in stop + report.errors if e.phase in ERROR_PHASE_EXIT), None)
    if fatal is not None:
        hint = " — fix eager mode first" if fatal.phase == "eager" else ""
        message = fatal.message.removesuffix("; partial report")  # the timeout's own words
        written = f"; partial report written to {args.json_out}" if args.json_out and args.json_out != "-" else ""
        fail(f"{message}{hint}{written}", ERROR_PHASE_EXIT[fatal.phase])
    if args.print_diff or args.write:
        from .patches import emit

        code = emit(report, diff=args.print_diff, write=args.write, say=lambda text: click.echo(f"ctc-doctor: {text}", err=True))
        if code:
            sys.exit(code)
    if policy is not None and not gate(report, policy):
        sys.exit(int(ExitCode.CHECK_FAILED))


def _check_device_and_backends(args: AnalysisArgs, spec: str) -> None:
    """`--device` and the backends are usage errors before the model is built, not a crash after. A
    backend the target's module registers when imported counts: it is imported (not built) to see."""
    backends = [b for b in (args.backend, args.bench_backend) if b]
    if not args.device and not backends:
        return
    if args.device:
        from ..analyzer.running.device import device_problem

        problem = device_problem(args.device)
        if problem:
            fail(problem, ExitCode.USAGE)
    from ..analyzer.torch_internals import backend_names

    known = backend_names()
    if known is not None and not set(backends) <= set(known):
        from ..analyzer.services.target import resolve_builder

        try:
            resolve_builder(spec)  # imports the module; the builder is not called
        except Exception:  # noqa: BLE001 - a bad target is reported by the run itself, with its own exit code
            return
        known = backend_names()
    for name in backends:
        if known is not None and name not in known:
            common = [b for b in ("eager", "aot_eager", "inductor", "cudagraphs") if b in known]
            fail(f"no torch.compile backend named {name!r} (e.g. {', '.join(common)}; all: torch.compiler.list_backends())", ExitCode.USAGE)


_STEP_LABELS = {
    "eager run": "eager run",
    "explain": "explain cross-check",
    "compile": "compiling call",
    "report": "building report",
    "suggest": "deriving suggestions",
}


def _describe(event: ProgressEvent) -> tuple[str, str]:
    """The progress bar's label and count for a step."""
    step, done, total, what = event.step, event.done, event.total, event.subject
    if step is Step.BISECT:  # a trial of that module is starting
        return f"bisecting: trying {what or '(root)'} with fullgraph=True", f"{done} trial(s) run"
    if step is Step.ACCURACY:  # that module compiled alone and judged against float64
        return f"accuracy bisection: {what or event.activity or '(root)'}", f"{done} trial(s) run" if what is not None else ""
    if step is Step.FIX:
        which = "all safe suggestions together" if what == "combined" else f"suggestion {what} alone"
        return f"verifying fix: {which}", f"{done}/{total}"
    count = f"{done}/{total}" if total else ""
    if step in (Step.ARM, Step.BENCH, Step.BENCH_REFERENCE):
        return f"benchmark{event.label[5:]}", count
    return _STEP_LABELS.get(step.value, event.label), count


def _analyze_with_progress(spec: str, load: Callable[[], Workload], args: AnalysisArgs, console: Console) -> Report:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=args.quiet,
    )
    emit = progress_writer(args.progress_fd)

    started = time.perf_counter()  # --timeout and --budget count the model's build too
    if supervise.STARTED in os.environ:  # a supervised stage: from the command's start
        started -= max(0.0, time.time() - float(os.environ[supervise.STARTED]))
    with progress:
        task = progress.add_task("loading target (importing torch)", total=None, count="")
        if emit is not None:
            emit(ProgressEvent(Step.LOAD))
        workload = load()
        freeze_heap()

        def on_progress(event: ProgressEvent, /) -> None:
            if emit is not None:
                emit(event)
            label, count = _describe(event)
            progress.update(task, description=label, completed=event.done, total=event.total or None, count=count)

        from ..analyzer.doors import pipeline

        return pipeline.analyze(workload, replace(args.analyze_options(spec, on_progress), started_s=started))
