"""`ctc-doctor run -- script.py ARGS`: an unmodified script under the doctor (one process or torchrun
ranks), its report, and its exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ..errors import ExitCode
from .options import DEBUG, GATE_OPTIONS, GUARDS, PROGRESS_FD, REDACT, TOP, GateArgs, RunArgs, option_group, take
from .output import (
    command_line,
    gate,
    one_line_errors,
    print_summary,
    progress_writer,
    run_live,
    stderr_console,
    write_report,
)

if TYPE_CHECKING:
    from ..reports.models import Report

_RUN_PHASES = {
    "report": "building the report (one eager call of the compiled module for module paths)",
    "bisect": "bisecting the compiled module on its recorded inputs",
    "fix": "verifying the suggestions on copies of the compiled module",
}
"""The line `run` prints when one of these phases starts (the script's own output is around it)."""


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
@click.option(
    "--max-steps", type=click.IntRange(min=1), default=None, metavar="N", help="Stop the script after N calls of the compiled model."
)
@click.option(
    "--timeout",
    "timeout_s",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop the script (every rank) after this long; the partial report is still written.",
)
@click.option(
    "--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the script's stdout then goes to stderr)."
)
@click.option("--no-bisect", is_flag=True, help="Skip the bisection of the compiled module.")
@click.option("--no-fix", is_flag=True, help="Skip verifying the suggestions on copies of the compiled module.")
@GUARDS
@TOP
@REDACT
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr (the script's own output still shows).")
@click.option("--tui", is_flag=True, help="Watch the run in the terminal UI (phases, the script's output), then browse the report.")
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

    The script's arguments, working directory and output pass through. Every torch.compile call is
    recorded; the first compiled module gets module paths, bisection and verified fixes (rank 0's,
    with several ranks), checked with the --backend backend, else eager. Several ranks add per-rank
    rows and the first compile where they diverge. Exit codes: 1 the check failed, 8 timeout,
    11 the script failed, 12 it compiled nothing, 130 interrupted; the report is written in every case.
    """
    gate_args = take(GateArgs, kw, all_of_them=False)
    args = take(RunArgs, kw)
    if args.tui:
        run_live(args.json_out)
    policy = gate_args.policy(gate=args.gate)
    from ..analyzer.launch import run_script, script_command

    console = stderr_console()
    emit = progress_writer(args.progress_fd)
    shown: list[str] = []

    def progress(phase: str, done: int, total: int) -> None:
        if emit is not None:
            emit(phase, done, total)
        head = phase.split(" ")[0]
        if not args.quiet and head in _RUN_PHASES and (not shown or shown[-1] != head):
            shown.append(head)
            click.echo(f"ctc-doctor: {_RUN_PHASES[head]}", err=True)

    def say(text: str) -> None:
        if not args.quiet:
            click.echo(f"ctc-doctor: {text}", err=True)

    with one_line_errors(args.debug):
        argv = script_command(list(command))
        options = args.run_options(gated=policy is not None)
        result = run_script(argv, options, say=say, progress=progress, stdout=sys.stderr if args.json_out == "-" else None)
        report = result.report
        report.run.command = command_line()
        if args.json_out:
            write_report(report, args.json_out, sys.stdout, redact=args.redact)
    code = _run_exit_code(report, result.status)
    if code == ExitCode.NOTHING_COMPILED:
        written = f" (report written to {args.json_out})" if args.json_out and args.json_out != "-" else ""
        click.echo(f"ctc-doctor: the script never called torch.compile: nothing to diagnose{written}", err=True)
    elif not args.quiet:
        print_summary(report, console, top=args.top, json_out=args.json_out)
    if policy is not None and code == ExitCode.OK and not gate(report, policy):
        code = ExitCode.CHECK_FAILED
    sys.exit(int(code))


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
