"""`ctc-doctor run -- script.py ARGS`: an unmodified script under the doctor (one process or torchrun
ranks), its report, and its exit code."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from ..analyzer.resources.cpu import CpuWindow, busy, cores
from ..errors import ExitCode
from ..progress import ProgressEvent, Step
from ..vocabulary import STRATEGIES, listed
from .options import (
    BUDGET,
    DEBUG,
    GATE_OPTIONS,
    MEMORY_LIMIT,
    PROGRESS_FD,
    GateArgs,
    RunArgs,
    amount_option,
    count_option,
    option_group,
    parsed_as,
    report_output,
)
from .output import (
    command_line,
    gate,
    one_line_errors,
    print_summary,
    progress_writer,
    report_console,
    run_live,
    write_report,
)

if TYPE_CHECKING:
    from ..reports.models import Report, StrategyRow

_RUN_STEPS = {
    Step.REPORT: "building the report (one eager call of the compiled module for module paths)",
    Step.BISECT: "bisecting the compiled module on its recorded inputs",
    Step.FIX: "verifying the suggestions on copies of the compiled module",
}
"""The line `run` prints when one of these steps starts (the script's own output is around it)."""


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--nproc",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Run N local ranks through torch.distributed.run (torchrun).",
)
@click.option(
    "--backend",
    default=None,
    help="Replace the backend of every torch.compile call (e.g. eager, for a fast diagnosis) [default: the script's].",
)
@count_option("--max-steps", help="Stop the script after N calls of the compiled model.")
@amount_option("--timeout", "timeout_s", "Stop the script (every rank) after this long; the partial report is still written.")
@BUDGET
@MEMORY_LIMIT
@click.option(
    "--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the script's stdout then goes to stderr)."
)
@click.option(
    "--compare",
    default=None,
    metavar="STRATEGIES",
    help=f"Run the script once per way of compiling it and compare its pace: {listed(STRATEGIES)} "
    "(comma-separated, e.g. eager,default,optimizer); losses are compared with eager's.",
)
@click.option("--no-bisect", is_flag=True, help="Skip the bisection of the compiled module.")
@click.option("--no-fix", is_flag=True, help="Skip verifying the suggestions on copies of the compiled module.")
@click.option(
    "--repro-dir",
    default=None,
    metavar="DIR",
    help="Write the repro and issue text of a PyTorch crash here [default: beside the --json report].",
)
@click.option(
    "--diff",
    "print_diff",
    is_flag=True,
    help="Print the verified source edits as one patch on stdout (the script's own stdout then goes to stderr).",
)
@click.option("--write", is_flag=True, help="Make the verified source edits in your files (refused, exit 13, if one changed meanwhile).")
@option_group(
    report_output(
        quiet="No summary or progress (the script's own output still shows).",
        tui="Watch the run in the terminal UI (phases, the script's output), then browse the report.",
    )
)
@click.option(
    "--check", "gate", is_flag=True, help="CI gate: exit 1 unless the run is clean (or within --max-graph-breaks/--max-recompiles)."
)
@option_group(GATE_OPTIONS)
@DEBUG
@PROGRESS_FD
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- SCRIPT [ARGS]...")
def run(command: tuple[str, ...], **kw: Any) -> None:
    """Run an unmodified script under the doctor: what it compiles, where it breaks and recompiles.

    \b
    ctc-doctor run -- train.py --epochs 1          what you would pass to python
    ctc-doctor run -- -m mypkg.serve --port 0      a module, like python -m
    ctc-doctor run --nproc 2 -- train.py           2 local ranks through torchrun
    ctc-doctor run --backend eager --max-steps 20 --json r.json -- train.py
    ctc-doctor run --check -- train.py             CI gate: exit 1 unless clean
    ctc-doctor run --compare eager,default,dynamic --max-steps 50 -- train.py

    The script's arguments, working directory and output pass through. Every torch.compile call is
    recorded; the first compiled module gets module paths, bisection and verified fixes (rank 0's,
    with several ranks), checked with the --backend backend, else eager. Several ranks add per-rank
    rows and the first compile where they diverge. Exit codes: 1 the check failed, 8 timeout,
    11 the script failed, 12 it compiled nothing, 130 interrupted; the report is written in every case.
    """
    gate_args = parsed_as(GateArgs, kw, all_of_them=False)
    args = parsed_as(RunArgs, kw)
    if args.tui:
        run_live(args.json_out)
    policy = gate_args.policy(gate=args.gate)
    from ..analyzer.doors.launch import run_script, script_command

    console = report_console(args.json_out == "-" or args.print_diff)
    emit = progress_writer(args.progress_fd)
    shown: list[Step] = []

    def progress(event: ProgressEvent, /) -> None:
        if emit is not None:
            emit(event)
        step = event.step
        if not args.quiet and step in _RUN_STEPS and (not shown or shown[-1] != step):
            shown.append(step)
            click.echo(f"ctc-doctor: {_RUN_STEPS[step]}", err=True)

    def say(text: str) -> None:
        if not args.quiet:
            click.echo(f"ctc-doctor: {text}", err=True)

    strategies = args.strategies()
    if args.print_diff and args.json_out == "-":
        raise click.UsageError("--diff prints the patch on stdout: write the JSON report to a file (--json PATH)")
    if (args.print_diff or args.write) and args.no_fix:
        raise click.UsageError("--diff and --write need the verified fixes: drop --no-fix")
    with one_line_errors(args.debug):
        argv = script_command(list(command))
        options = args.run_options(gated=policy is not None)
        stdout = sys.stderr if args.json_out == "-" or args.print_diff else None
        window = CpuWindow.start(children=True)  # the script's run: other processes' CPU beside it (--compare)
        with _fresh_inductor_cache(bool(strategies)):
            result = run_script(argv, options, say=say, progress=progress, stdout=stdout)
        report = result.report
        _rerun_workarounds(argv, options, report, say, stdout)
        if strategies:
            from ..reports.verdicts import compared_suggestions, site_costs

            report.comparison = _compare(argv, options, strategies, report, say, stdout, window.others())
            compared_suggestions(report)
            site_costs(report)  # a wrapper's breaks are priced by the `inner` row
        report.run.command = command_line()
        if args.json_out:
            write_report(report, args.json_out, sys.stdout, redact=args.redact)
    code = _run_exit_code(report, result.status)
    if code == ExitCode.NOTHING_COMPILED:
        written = f" (report written to {args.json_out})" if args.json_out and args.json_out != "-" else ""
        click.echo(f"ctc-doctor: the script never called torch.compile: nothing to diagnose{written}", err=True)
    elif not args.quiet:
        print_summary(report, console, top=args.top, json_out=args.json_out)
        if report.comparison:
            console.print(_comparison_table(report))
    if (args.print_diff or args.write) and code == ExitCode.OK:
        from .patches import emit as emit_patches

        code = ExitCode(emit_patches(report, diff=args.print_diff, write=args.write, say=say))
    if policy is not None and code == ExitCode.OK and not gate(report, policy):
        code = ExitCode.CHECK_FAILED
    sys.exit(int(code))


_SHORT_VERDICT = {
    "clean": "clean",
    "graph_breaks": "breaks",
    "recompiles": "recompiles",
    "graph_breaks_and_recompiles": "breaks+recomp.",
    "failed": "FAILED",
}


@contextlib.contextmanager
def _fresh_inductor_cache(on: bool) -> Iterator[None]:
    """An empty inductor cache for the script's run (its child inherits the variable): under --compare every
    strategy's first call pays its whole compile, as on a machine that never compiled the script."""
    if not on:
        yield
        return
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    path = tempfile.mkdtemp(prefix="ctc-compare-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
        shutil.rmtree(path, ignore_errors=True)


def _compare(
    argv: list[str], options: Any, strategies: list[str], default: Report, say: Any, stdout: Any, default_busy: float | None = None
) -> list[StrategyRow]:
    """The script once more per strategy (no bisection, no fixes: the pace is what is compared); the
    run just made is the `default` row (`default_busy`: other processes' CPU while it ran). A row whose run
    had other processes on the cores is marked unstable, and said (pyperf's rule)."""
    import dataclasses

    from ..analyzer.doors.launch import run_script
    from ..reports.models import CompiledObject, StrategyRow
    from ..reports.verdicts import compare_strategies, dynamic_marks, strategy_row

    marks = dynamic_marks(default)
    rows: list[StrategyRow] = []
    runs: dict[str, CompiledObject | None] = {}
    for strategy in strategies:
        report = default
        if strategy == "mark-dynamic" and not marks:
            rows.append(StrategyRow(strategy=strategy, error="the script's own run had no size recompile to mark"))
            continue
        if strategy == "hotswap" and default.lora_rank is None:
            rows.append(StrategyRow(strategy=strategy, error="the script's own run loaded no LoRA adapter"))
            continue
        others = default_busy
        if strategy != "default":
            say(f"--compare: the script again, {strategy}")
            again = dataclasses.replace(
                options, strategy=strategy, bisect=False, fix=False, marks=marks or None, target_rank=default.lora_rank
            )
            window = CpuWindow.start(children=True)
            with _fresh_inductor_cache(True):
                report = run_script(argv, again, say=say, stdout=stdout).report
            others = window.others()
        row = strategy_row(strategy, report)
        row.busy = others
        if busy(others, cores()):  # the script's threads: every core, as torch's default
            why = f"other processes used {others:.1f} cores while it ran"
            row.unstable = f"{row.unstable}; {why}" if row.unstable else why
        rows.append(row)
        runs[strategy] = report.analyzed_compile
    compare_strategies(rows, runs)
    if options.bisect:
        _departed_accuracy(argv, options, rows, default, marks, say, stdout)
    return rows


RERUN_MAX_S = 120.0
"""A script whose own run (`cost.workload_wall_s`) took longer is not run again to check a workaround."""


def _rerun_workarounds(argv: list[str], options: Any, report: Report, say: Any, stdout: Any) -> None:
    """A PyTorch bug in the script's own compile whose workaround has a `run --compare` strategy (`static`:
    `dynamic=False`, verified on the recorded calls; `submodules`: a LightningModule's network compiled
    instead of it, for a crash in tracing, where no call was recorded): the whole script once more with it
    (no bisection, no fixes), when its own run was cheap, into `workaround_rerun`: whether it then runs to
    its end (which verifies a workaround no recorded call could)."""
    import dataclasses

    from ..analyzer.doors.launch import run_script

    own = report.cost.workload_wall_s if report.cost is not None else None
    for bug in report.torch_bugs:
        if not bug.workaround_strategy or bug.suggestion is not None:
            continue
        if own is None or own > RERUN_MAX_S:
            bug.workaround_rerun = f"not run again: the script's own run took {own or 0:.0f} s (over {RERUN_MAX_S:.0f} s)"
            continue
        say(f"the script again, with the workaround ({bug.workaround_strategy})")
        again = dataclasses.replace(options, strategy=bug.workaround_strategy, bisect=False, fix=False)
        t0 = time.perf_counter()
        found = run_script(argv, again, say=say, stdout=stdout)
        took = time.perf_counter() - t0
        how = f"`run --compare {bug.workaround_strategy}`, {took:.1f} s"
        error = next((e for e in found.report.errors if e.phase == "script"), None)
        if found.status == "finished" and error is None:
            calls = found.report.analyzed_compile.calls if found.report.analyzed_compile is not None else None
            bug.workaround_rerun = f"ran to its end ({how}{f', {calls} compiled calls' if calls else ''})"
            bug.workaround_verified = True  # a crash in tracing has no recorded calls: the rerun is its check
        else:
            bug.workaround_rerun = f"still failed ({how}): {error.message if error else found.status}"


_NOT_THE_MODULE = ("eager", "optimizer", "hotswap")
"""Strategies whose departure is not the analyzed module's compile (eager's row is the reference; the
compiled optimizer's step and a hotswap's loaders are not compiled with the module)."""


def _departed_accuracy(
    argv: list[str], options: Any, rows: list[StrategyRow], default: Report, marks: dict[str, list[int]], say: Any, stdout: Any
) -> None:
    """The first row whose loss departed from eager's beyond its tolerance: the script once more under
    that strategy, stopped after its first call, to find where its compiled module goes wrong (the
    accuracy bisection on the recorded inputs), into `default.accuracy`. Not when the script's own run
    already found it (its fix checks departed)."""
    import dataclasses

    from ..analyzer.doors.launch import run_script

    row = next((r for r in rows if r.loss_ok is False and r.error is None and r.strategy not in _NOT_THE_MODULE), None)
    if row is None or default.accuracy is not None or row.loss_change is None or row.loss_call is None:
        return
    text = (
        f"run --compare {row.strategy}: the loss departs {row.loss_change:.1%} from eager's by call {row.loss_call} "
        f"(within {row.loss_tolerance or 0:.0%} is ok)"
    )
    say(f"--compare: the script again, {row.strategy}, to find where its compile goes wrong")
    again = dataclasses.replace(options, strategy=row.strategy, bisect=False, fix=False, max_steps=1, marks=marks or None, accuracy_of=text)
    with _fresh_inductor_cache(True):
        found = run_script(argv, again, say=say, stdout=stdout).report
    default.accuracy = found.accuracy
    default.torch_bugs.extend(b for b in found.torch_bugs if b.kind == "wrong_result")  # the backend's, found by it
    if found.summary.wrong_results:
        default.summary.wrong_results = found.summary.wrong_results
    if found.accuracy is None:
        why = next((e.message for e in found.errors if e.phase in ("accuracy", "timeout", "script")), None)
        default.notes.append(f"{text}; where its compile goes wrong was not found{f' ({why})' if why else ''}.")


def _comparison_table(report: Report) -> Any:
    """The strategies side by side, then the one-line verdict (by steady pace, and by total time over
    the script's own number of calls when it ran to its end)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from ..reports.verdicts import STEP_LOSS_TOLERANCE, strategy_verdict

    table = Table(
        title="--compare: the script's pace under each way of compiling it", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        show_edge=False, collapse_padding=True,
    )  # fmt: skip
    losses = any(r.loss_change is not None for r in report.comparison)
    columns = ("strategy", "1st call", "ms/call", "vs eager", "pays off", "recomp.", *(("loss Δ",) if losses else ()), "verdict")
    for name in columns:
        table.add_column(name, justify="left" if name in ("strategy", "verdict") else "right", no_wrap=True, min_width=len(name))
    eager_row = next((r for r in report.comparison if r.strategy == "eager"), None)
    for r in report.comparison:
        name = r.strategy.replace("-no-cudagraphs", "-no-cg")  # fits 80 columns
        if r.error:
            table.add_row(name, Text(r.error, style="yellow"), *[""] * (len(columns) - 2))
            continue
        drift = Text(f"{r.loss_change:.1%}" if r.loss_change is not None else "", style="red" if r.loss_ok is False else "")
        table.add_row(
            name,
            f"{r.first_call_s:.2f} s" if r.first_call_s is not None else "",
            f"{r.period_ms:.3g}" if r.period_ms is not None else "",
            (f"{r.speedup:.2f}x" + ("?" if r.unstable or (eager_row and eager_row.unstable) else "")) if r.speedup else "",
            f"{r.break_even_calls:,}" if r.break_even_calls else ("never" if r.speedup and r.speedup < 1 else ""),
            f"{r.recompiles}" + (f" ({r.expected_recompiles} exp.)" if r.expected_recompiles else ""),
            *((drift,) if losses else ()),
            _SHORT_VERDICT[r.verdict],
        )
    ran_to_end = report.run.stopped is None and report.run.exit_code == 0
    default = next((r for r in report.comparison if r.strategy == "default"), None)
    steps = default.calls if ran_to_end and default is not None else None
    lines = [strategy_verdict(report.comparison, steps)]
    compared = next((r for r in report.comparison if r.loss_call is not None), None)
    if compared is not None:
        tolerance = max(r.loss_tolerance or 0.0 for r in report.comparison)
        why = " (a dropout: compiled code draws other random numbers)" if tolerance > STEP_LOSS_TOLERANCE else ""
        lines.append(
            f"loss Δ: the largest change of the loss against eager's over calls 0, 1, 2, 4... {compared.loss_call}, same seed; "
            f"within {tolerance:.0%} is ok{why}"
        )
    return Group(table, *(Text(line) for line in lines))


def _run_exit_code(report: Report, status: str) -> ExitCode:
    """timeout 8 > interrupted 130 > script failed 11 > nothing compiled 12 > 0 (the check's 1 comes after)."""
    if status == "timeout" or any(e.phase == "timeout" for e in report.errors):
        return ExitCode.TIMEOUT
    if status == "interrupted":
        return ExitCode.INTERRUPTED
    if report.run.exit_code not in (None, 0):
        return ExitCode.SCRIPT_FAILED
    if not report.compiled and report.summary.graph_count == 0:
        return ExitCode.NOTHING_COMPILED
    return ExitCode.OK
