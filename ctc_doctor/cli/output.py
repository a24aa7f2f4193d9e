"""What every command shares on the way out: the one-line error and its exit code, the stderr console,
the summary of a report and where it was written, the JSON report on disk or stdout, the CI gate.

stdout carries data only (`--json -`, `schema`, `report`); everything for humans goes to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, NoReturn

import click

from ..errors import CtcDoctorError, ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from ..progress import ProgressFn
    from ..reports.models import Report
    from ..reports.policy import Policy


def fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"ctc-doctor: error: {message}", err=True)
    sys.exit(int(code))


@contextlib.contextmanager
def one_line_errors(debug: bool = False) -> Iterator[None]:
    """Our errors end as their one line and exit code; Ctrl-C as INTERRUPTED; anything else is a bug in
    ctc-doctor: one line and INTERNAL_ERROR. `--debug` adds the traceback."""
    try:
        yield
    except KeyboardInterrupt:
        fail("interrupted", ExitCode.INTERRUPTED)
    except CtcDoctorError as exc:
        if debug:
            traceback.print_exc()
        fail(exc.one_line(), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - a bug in ctc-doctor: one line unless --debug
        if debug:
            traceback.print_exc()
        fail(f"internal error: {type(exc).__name__}: {exc} (re-run with --debug and report it)", ExitCode.INTERNAL_ERROR)


_TERMINAL: IO[str] | None = None


def _terminal_stderr() -> IO[str]:
    """The stream ctc-doctor's own progress and messages go to: the stderr of now; in a supervised stage
    (`supervise.STAGE`), a copy of its descriptor, which stays on the terminal while an arm's stderr (the
    descriptor itself) goes to the file a crash row reads (`phases.bench.staged`)."""
    global _TERMINAL
    from .supervise import STAGE

    if STAGE not in os.environ:
        return sys.stderr
    if _TERMINAL is None:
        _TERMINAL = os.fdopen(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors="replace")
    return _TERMINAL


def stderr_console() -> Console:
    from rich.console import Console

    # bound to the stderr of now: a phase that redirects `sys.stderr` (torch's printouts) keeps ours on the terminal
    return Console(file=_terminal_stderr(), highlight=False, soft_wrap=False)


def report_console(stdout_carries_data: bool = False) -> Console:
    """Where a command prints its report (the summary, a table): stdout, as pytest, ruff and git do, unless
    stdout carries data (`--json -`, a patch from `--diff`); then stderr."""
    from rich.console import Console

    if stdout_carries_data:
        return stderr_console()
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def load_report_or_fail(path: str) -> Report:
    """A saved report, or its one-line error and exit code (REPORT_INVALID)."""
    from ..reports.io import load_report

    try:
        return load_report(path)
    except CtcDoctorError as exc:
        fail(exc.one_line(), exc.exit_code)


@contextlib.contextmanager
def stdout_reserved(active: bool) -> Iterator[IO[str]]:
    """While active, anything the model prints (Python or C level) goes to stderr; yields the real stdout."""
    if not active:
        yield sys.stdout
        return
    sys.stdout.flush()
    saved_fd = os.dup(1)
    real_stdout = os.fdopen(saved_fd, "w", encoding="utf-8", closefd=True)
    os.dup2(2, 1)
    previous = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield real_stdout
    finally:
        sys.stdout.flush()
        sys.stdout = previous
        os.dup2(saved_fd, 1)
        real_stdout.flush()


def write_report(report: Report, path: str, real_stdout: IO[str], *, redact: bool = False) -> None:
    """The JSON report to PATH ('-': the real stdout), redacted first with --redact."""
    from ..reports.io import dump_report

    if redact:
        from ..reports.redact import redact as redacted

        report = redacted(report)
    text = dump_report(report)
    if path == "-":
        real_stdout.write(text)
        real_stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise CtcDoctorError(f"cannot write report to {path}: {exc.strerror}") from exc


def print_summary(report: Report, console: Console, *, top: int, json_out: str | None, save_hint: bool = True) -> None:
    """The report's summary, then where the report went (or how to keep it, with `save_hint`)."""
    from ..reports.render import render_summary

    render_summary(report, console, top=top)
    console.file.flush()
    notes = stderr_console()  # where the report went is a note, not the report
    if json_out and json_out != "-":
        notes.print(f"[dim]report written to {json_out}[/dim]")
    elif not json_out and save_hint:
        notes.print("[dim]save the full report with --json report.json[/dim]")


def gate(report: Report, policy: Policy) -> bool:
    """Print the check's verdict; True when it passed."""
    from ..reports.policy import violations

    found = violations(report, policy)
    if found:
        click.echo("ctc-doctor check: FAILED", err=True)
        for line in found:
            click.echo(line, err=True)
        return False
    click.echo("ctc-doctor check: passed", err=True)
    return True


def progress_writer(fd: int | None) -> ProgressFn | None:
    """The `--progress-fd` writer (the TUI's live mode reads it), or None without one."""
    if fd is None:
        return None
    from ..progress import stream_writer

    try:
        return stream_writer(fd)
    except OSError as exc:
        raise CtcDoctorError(f"--progress-fd {fd}: {exc.strerror}") from exc


def browse(report: Report, path: str | None, section: str = "overview") -> None:
    """A report in the terminal UI."""
    from ..tui.app import DoctorApp

    DoctorApp(report, report_path=path, start_section=section).run()


def refuse_tui_with_json_on_stdout(json_out: str | None) -> None:
    if json_out == "-":
        fail("--tui draws on the terminal: write the report to a file with --json PATH", ExitCode.USAGE)


def run_live(json_out: str | None) -> NoReturn:
    """`TARGET --tui` / `run --tui`: this command runs again in a child process the TUI watches; exit
    with its exit code."""
    refuse_tui_with_json_on_stdout(json_out)
    from ..tui.app import DoctorApp
    from ..tui.live_run import LiveRun

    run = LiveRun(sys.argv[1:])
    app = DoctorApp(live=run)
    app.run()
    code = app.exit_code
    if run.report_path and os.path.exists(run.report_path):
        click.echo(f"ctc-doctor: report written to {run.report_path}", err=True)
    sys.exit(code if 0 <= code < 256 else int(ExitCode.INTERNAL_ERROR))


def command_line() -> str:
    """The command as the user typed it, for the report."""
    return " ".join(["ctc-doctor", *sys.argv[1:]])
