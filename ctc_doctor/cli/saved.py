"""Commands over saved reports: show (the summary), tui (browse), report (Markdown / JSON / text for a
ticket), diff (two reports, a CI regression gate), and schema (the report's JSON Schema)."""

from __future__ import annotations

import sys

import click

from ..errors import ExitCode
from .options import REDACT
from .output import browse, fail, load_report_or_fail, report_console

SECTIONS = ["overview", "breaks", "recompiles", "modules", "suggestions", "benchmark", "compiles"]


@click.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--top", default=10, show_default=True, type=int, help="Break sites to show.")
@click.option("--tui", is_flag=True, help="Browse the report in the terminal UI instead.")
def show(report_path: str, top: int, tui: bool) -> None:
    """Print the summary of a saved report (`ctc-doctor report.json` does the same), or of a sweep
    (its directory or summary.json: the dashboard, the slowest targets, the fleet's breaks)."""
    from ..reports.render import render_summary
    from ..sweep.summary import is_sweep

    if is_sweep(report_path):
        show_sweep(report_path, tui, top)
        return
    report = load_report_or_fail(report_path)
    if tui:
        browse(report, report_path)
        return
    render_summary(report, report_console(), top=top)


@click.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--section", type=click.Choice(SECTIONS), default="overview", show_default=True, help="Section to open.")
def tui(report_path: str, section: str) -> None:
    """Browse a saved report in the terminal UI (`ctc-doctor report.json --tui` does the same), or a
    sweep directory (its dashboard, targets and plot; Enter opens a target's report, q comes back).

    \b
    keys: 1-7 or tab switch sections, / search, f filter, s sort, e export Markdown, ? help, q quit
    live: `ctc-doctor TARGET --tui` watches the analysis, then browses its report
    """
    from ..sweep.summary import is_sweep

    if is_sweep(report_path):
        show_sweep(report_path, True)
        return
    browse(load_report_or_fail(report_path), report_path, section)


def show_sweep(path: str, tui: bool, top: int = 5) -> None:
    """A sweep's text summary, or its browser: SweepApp, then the chosen target's report in DoctorApp,
    then back to the sweep, until the sweep browser is quit."""
    from ..errors import CtcDoctorError
    from ..sweep.summary import load_summary, render_text

    try:
        summary, directory = load_summary(path)
    except CtcDoctorError as exc:
        fail(exc.one_line(), exc.exit_code)
    if not tui:
        shown = report_console()
        shown.print(render_text(summary, width=shown.width, top=top), end="", markup=False, highlight=False)
        return
    from ..tui.sweep_app import SweepApp

    cursor: str | None = None
    while True:
        chosen = SweepApp(summary, directory, cursor).run()
        if not chosen:
            return
        cursor = next((r.target for r in summary.targets if r.report and str(directory / r.report) == chosen), None)
        browse(load_report_or_fail(chosen), chosen)


@click.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "text"]), default="md", show_default=True, help="Output format.")
@REDACT
@click.option("--project-root", default=None, metavar="DIR", help="Paths become relative to DIR with --redact [default: cwd].")
def report(report_path: str, fmt: str, redact: bool, project_root: str | None) -> None:
    """Print a saved report as Markdown for a GitHub issue (or JSON / text) on stdout."""
    from ..reports.io import dump_report

    loaded = load_report_or_fail(report_path)
    if redact:
        from ..reports.redact import redact as do_redact

        loaded = do_redact(loaded, project_root=project_root)
    if fmt == "md":
        from ..reports.markdown import render_markdown

        click.echo(render_markdown(loaded), nl=False)
    elif fmt == "json":
        click.echo(dump_report(loaded), nl=False)
    else:
        from rich.console import Console

        from ..reports.render import render_summary

        render_summary(loaded, Console(highlight=False, soft_wrap=False), top=10_000)


@click.command()
@click.argument("before_path", metavar="BEFORE")
@click.argument("after_path", metavar="AFTER")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when anything got worse (new sites, more graphs, breaks or recompiles).")
def diff(before_path: str, after_path: str, fail_on_regression: bool) -> None:
    """Compare two reports: fixed, new and unchanged break sites, count and recompile changes."""
    from ..reports.diff import diff_reports, render_diff_text

    result = diff_reports(load_report_or_fail(before_path), load_report_or_fail(after_path))
    click.echo(render_diff_text(result), nl=False)
    if fail_on_regression and result.regressions:
        sys.exit(int(ExitCode.CHECK_FAILED))


@click.command()
@click.option("--sweep", "of_sweep", is_flag=True, help="The schema of a sweep's summary.json instead.")
def schema(of_sweep: bool) -> None:
    """Print the report's JSON Schema (or, with --sweep, that of a sweep's summary.json)."""
    if of_sweep:
        from ..sweep.summary_models import sweep_schema_text

        click.echo(sweep_schema_text(), nl=False)
        return
    from ..reports.io import schema_text

    click.echo(schema_text(), nl=False)


COMMANDS = [show, tui, report, diff, schema]
