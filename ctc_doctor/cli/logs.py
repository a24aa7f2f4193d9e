"""`ctc-doctor logs PATH...`: the report of a run from the TORCH_TRACE / TORCH_LOGS it left on disk.
Torch-free end to end (an import-linter contract covers the offline ingest)."""

from __future__ import annotations

import sys

import click

from .options import DEBUG, option_group, report_output
from .output import (
    browse,
    command_line,
    fail,
    one_line_errors,
    print_summary,
    refuse_tui_with_json_on_stdout,
    report_console,
    write_report,
)


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the summary then goes to stderr).")
@click.option("--strict", is_flag=True, help="Exit 10 when any record is unreadable or of an unknown kind (the report is still written).")
@option_group(report_output(quiet="No summary.", tui="Browse the report in the terminal UI."))
@DEBUG
def logs(
    paths: tuple[str, ...],
    json_out: str | None,
    strict: bool,
    keep_guards: bool,
    top: int,
    redact: bool,
    quiet: bool,
    tui: bool,
    debug: bool,
) -> None:
    """Diagnose the logs of a run you cannot repeat: TORCH_TRACE directories or files, TORCH_LOGS text.

    \b
    TORCH_TRACE=./trace python train.py           (or torchrun ...: one file per rank)
    TORCH_LOGS=graph_breaks,recompiles,perf_hints python train.py 2> run.log
    ctc-doctor logs ./trace --json report.json    the same report as a live analysis, per rank
    ctc-doctor logs ./trace run.log               the trace, plus the perf hints of the text log

    Reads gzip-compressed files too. Unreadable and unknown records are counted in the report's
    parse_stats; --strict turns any of them into exit 10.
    """
    if tui:
        refuse_tui_with_json_on_stdout(json_out)
    from ..analyzer.doors.offline import ingest
    from ..errors import LogsInvalid

    with one_line_errors(debug):
        report = ingest(list(paths), keep_guard_text=keep_guards, command=command_line())
        if json_out:
            write_report(report, json_out, sys.stdout, redact=redact)
    if tui:
        browse(report, json_out)
    elif not quiet:
        print_summary(report, report_console(json_out == "-"), top=top, json_out=json_out, save_hint=False)
    stats = report.parse_stats
    if strict and stats is not None and (stats.unreadable or stats.unknown):
        first = f" (first: {stats.examples[0]})" if stats.examples else ""
        error = LogsInvalid(f"--strict: {stats.unreadable} unreadable and {stats.unknown} unknown record(s){first}")
        fail(error.one_line(), error.exit_code)
