"""The `ctc-doctor` command. Parses arguments, calls the layers, writes files, sets the exit code.

stdout carries data only (`--json -`, `schema`); everything for humans goes to stderr. Heavy modules
(torch, the analyzer) are imported inside commands, so `ctc-doctor --help` stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Any

import click

from .errors import CtcDoctorError, ExitCode
from .version import __version__

_ERROR_PHASE_EXIT = {
    "eager": ExitCode.EAGER_FAILED,
    "compile": ExitCode.COMPILE_FAILED,
    "timeout": ExitCode.TIMEOUT,
    "bisect": ExitCode.INTERNAL_ERROR,  # a bug in the bisection; the analysis part of the report stands
    "suggest": ExitCode.INTERNAL_ERROR,
    "fix": ExitCode.INTERNAL_ERROR,
    "probe": ExitCode.INTERNAL_ERROR,
    "bench": ExitCode.INTERNAL_ERROR,
}


class _DefaultGroup(click.Group):
    """`ctc-doctor TARGET ...` means `ctc-doctor analyze TARGET ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands and not {"--help", "-h", "--version"} & set(args[:1]):
            if first.endswith(".json"):
                command = "show"
            elif os.path.isdir(first) or first.endswith((".log", ".log.gz")):
                command = "logs"  # a TORCH_TRACE directory or a log file: never a TARGET
            else:
                command = "analyze"
            args = [command, *args]
        return super().parse_args(ctx, args)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=False)


_REDACT_HELP = "Make every absolute path project-relative, <site-packages>, <stdlib>, ~ or <abs>/last/two, and drop user and host names."

def _fail(message: str, code: ExitCode) -> None:
    click.echo(f"ctc-doctor: error: {message}", err=True)
    sys.exit(int(code))


@contextlib.contextmanager
def _one_line_errors(debug: bool) -> Iterator[None]:
    """Our errors end as their one line and exit code; Ctrl-C as INTERRUPTED; anything else is a bug in
    ctc-doctor: one line and INTERNAL_ERROR. `--debug` adds the traceback."""
    try:
        yield
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED)
    except CtcDoctorError as exc:
        if debug:
            traceback.print_exc()
        _fail(exc.one_line(), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - a bug in ctc-doctor: one line unless --debug
        if debug:
            traceback.print_exc()
        _fail(f"internal error: {type(exc).__name__}: {exc} (re-run with --debug and report it)", ExitCode.INTERNAL_ERROR)


@contextlib.contextmanager
def _stdout_reserved(active: bool) -> Iterator[Any]:
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


def _decorate(f: Any, options: list[Any]) -> Any:
    """Apply click options so they show in --help in list order."""
    for option in reversed(options):
        f = option(f)
    return f


def _analysis_options(f: Any) -> Any:
    options = [
        click.option("--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the summary then goes to stderr)."),
        click.option("--train", is_flag=True, help="Run forward+backward (loss from Workload.loss_fn, else the sum of the outputs)."),
        click.option("--backend", default=None, help="torch.compile backend [default: eager; aot_eager with --train]. 'inductor' also yields perf hints."),
        click.option("--device", default=None, help="Move the model and inputs to this device first (e.g. cuda)."),
        click.option("--seed", default=0, show_default=True, type=int, help="torch.manual_seed before building and before each phase."),
        click.option("--timeout", "timeout_s", default=None, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Give up after this long; the partial report is still written."),
        click.option("--no-explain", is_flag=True, help="Skip the torch._dynamo.explain cross-check."),
        click.option("--guards", "keep_guards", is_flag=True, help="Keep the full guard tree text per compile id in the report."),
        click.option("--top", default=10, show_default=True, type=int, help="Break sites to show in the summary."),
        click.option("--redact", is_flag=True, help=_REDACT_HELP),
        click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr."),
        click.option("--tui", is_flag=True, help="Watch the run in the terminal UI (phases, output; Escape cancels), then browse the report."),
        click.option("--debug", is_flag=True, help="Show tracebacks for errors."),
        # the TUI's live mode: one JSON object per progress step on this file descriptor
        click.option("--progress-fd", type=int, default=None, hidden=True),
    ]
    return _decorate(f, options)


def _option_group(options: list[Any], full_run_first: Any = None, full_run: bool = False) -> Any:
    """A decorator applying `options`; the full run (`analyze`, `demo`) gets `full_run_first` before them."""
    chosen = [full_run_first, *options] if full_run and full_run_first is not None else options
    return lambda f: _decorate(f, chosen)


def _bisect_options(default_strategy: str, full_run: bool) -> Any:
    return _option_group(
        [
            click.option(
                "--strategy",
                type=click.Choice(["top-down", "bottom-up", "both"]),
                default=default_strategy,
                show_default=True,
                help="Bisection strategy (both: run the two and report whether they agree).",
            ),
            click.option("--max-trials", type=click.IntRange(min=1), default=None, metavar="N", help="Run at most N fullgraph trials; the rest is listed as untried."),
            click.option("--trial-timeout", "trial_timeout_s", type=float, default=60.0, show_default=True, metavar="SECONDS", help="Per-trial limit; a hung trial becomes a timeout row."),
            click.option(
                "--isolate/--no-isolate",
                default=None,
                help="Run the trials in a child process (a segfault costs one row) [default: on for a full run with the benchmark on CPU, where it costs under 10 %; off otherwise].",
            ),
            click.option("--no-memo", is_flag=True, help="Try every module, even identical ones."),
            click.option("--repro-dir", default=None, metavar="DIR", help="Write repro scripts here [default: beside the --json report; none without one]."),
        ],
        click.option("--no-bisect", is_flag=True, help="Do not bisect the module tree when breaks are found."),
        full_run,
    )


def _fix_options(full_run: bool) -> Any:
    return _option_group(
        [click.option("--probe-shapes", is_flag=True, help="Vary each input dimension to find the ones that recompile; recommend mark_dynamic calls.")],
        click.option("--no-fix", is_flag=True, help="Do not apply and verify the auto-applicable suggestions."),
        full_run,
    )


def _bench_options(full_run: bool) -> Any:
    return _option_group(
        [
            click.option("--bench-backend", default="inductor", show_default=True, help="Backend of the benchmark's compiled arms."),
            click.option("--mode", type=click.Choice(["default", "reduce-overhead", "max-autotune"]), default="default", show_default=True, help="torch.compile mode of the benchmark (inductor)."),
            click.option("--iters", type=click.IntRange(min=1), default=20, show_default=True, help="Timed passes per arm (one pass = every call of the workload)."),
            click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Untimed passes before timing."),
            click.option("--no-regional", is_flag=True, help="No regional-compilation arm, even with repeated blocks."),
            click.option("--aot", is_flag=True, help="Add the ahead-of-time arms: torch.export + AOTInductor of the whole model (aot), of each repeated block class (aot_regional), of the fixed copy (aot_fixed)."),
            click.option("--aot-strict", is_flag=True, help="Export the AOT arms in strict mode (Dynamo traces) [default: non-strict]."),
            click.option(
                "--objective",
                type=click.Choice(["balanced", "latency", "compile"]),
                default="balanced",
                show_default=True,
                help="What the best arm and the ranking of suggestions optimise; balanced: never first a change that makes latency worse.",
            ),
        ],
        click.option("--no-bench", is_flag=True, help="Skip the benchmark (inductor compiles take a while on CPU)."),
        full_run,
    )


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctc-doctor")
def cli() -> None:
    """A torch.compile doctor: why your model is not one fast graph, where, and what to change.

    \b
    ctc-doctor run -- train.py ARGS            your script, unmodified (--nproc N: torchrun ranks)
    ctc-doctor mypkg.models:build              analyze (build() returns (model, args[, variants]) or a Workload)
    ctc-doctor path/to/file.py:build --json report.json
    ctc-doctor mypkg.models:build --json -     report on stdout, summary on stderr
    ctc-doctor bisect mypkg.models:build       smallest submodules that fail fullgraph=True
    ctc-doctor fix mypkg.models:build          apply the safe suggestions to a copy and verify them
    ctc-doctor bench mypkg.models:build        eager vs compiled vs fixed vs regional, measured
    ctc-doctor demo                            the built-in example
    ctc-doctor report.json                     summary of a saved report (same as: show report.json)
    ctc-doctor tui report.json                 browse a saved report in the terminal UI
    ctc-doctor logs ./trace                    diagnose TORCH_TRACE / TORCH_LOGS output of a run you cannot repeat
    ctc-doctor mypkg.models:build --tui        watch the analysis live, then browse its report
    ctc-doctor sweep models.txt --out sweep/   many models: a summary row each (merge, diff)
    ctc-doctor schema                          the report's JSON Schema

    Exit codes: 0 ok, 1 check failed, 2 usage, 3 target not found, 4 target invalid,
    5 builder raised, 6 model fails in eager, 7 torch.compile crashed, 8 timeout, 9 bad report
    file, 10 no readable torch logs (or --strict found bad records), 11 the script failed,
    12 the script compiled nothing, 70 internal error, 130 interrupted.
    """


@cli.command()
@click.argument("target")
@_analysis_options
@_bisect_options("top-down", full_run=True)
@_fix_options(full_run=True)
@_bench_options(full_run=True)
def analyze(target: str, **kw: Any) -> None:
    """Analyze TARGET (`pkg.module:build` or `path/file.py:build`): breaks and recompiles, bisection
    when it breaks, suggestions, verified fixes on a copy, and a benchmark."""
    _run_analysis(target, lambda: _load(target, kw["seed"]), kw)


@cli.command()
@click.argument("target")
@_analysis_options
@_bisect_options("top-down", full_run=True)
@_fix_options(full_run=False)
def fix(target: str, **kw: Any) -> None:
    """Apply every auto-applicable suggestion to a copy of TARGET's model and verify it.

    Each suggestion is tried alone (counts before/after, outputs against eager), then the safe,
    effective ones together. The user's model is never modified. No benchmark.
    """
    _run_analysis(target, lambda: _load(target, kw["seed"]), {**kw, "no_bench": True})


@cli.command()
@click.argument("target")
@_analysis_options
@_bench_options(full_run=False)
@click.option("--no-fix", is_flag=True, help="No compiled_fixed arm (skip applying the suggestions).")
def bench(target: str, **kw: Any) -> None:
    """Benchmark TARGET: eager vs compiled vs compiled-with-fixes (and regional compilation).

    Per arm: cold and warm-cache compile time, steady-state latency (median, IQR), speedup vs eager,
    graph/break/recompile counts, peak memory, numerical agreement with eager. No bisection.
    """
    _run_analysis(target, lambda: _load(target, kw["seed"]), {**kw, "no_bisect": True})


@cli.command()
@click.argument("target")
@_analysis_options
@_bisect_options("both", full_run=False)
def bisect(target: str, **kw: Any) -> None:
    """Find the smallest submodules of TARGET that fail torch.compile(fullgraph=True).

    One eager call records every submodule's inputs; then fullgraph trials run top-down (root
    first, into failing children) and/or bottom-up (leaves first). Identical modules are tried once.
    """
    _run_analysis(target, lambda: _load(target, kw["seed"]), {**kw, "bisect_only": True})


@cli.command()
@click.option("--fixture", default="showcase", show_default=True, help="Which fixture of the zoo to run.")
@click.option("--list", "list_fixtures", is_flag=True, help="List the fixtures zoo and exit.")
@_analysis_options
@_bisect_options("top-down", full_run=True)
@_fix_options(full_run=True)
@_bench_options(full_run=True)
def demo(fixture: str, list_fixtures: bool, **kw: Any) -> None:
    """Analyze a built-in example model from the fixtures zoo (no user code needed)."""
    from .fixtures.registry import all_fixtures

    fixtures = all_fixtures()
    if list_fixtures:
        for name, spec in fixtures.items():
            click.echo(f"{name:30s} {spec.summary}   [{spec.target}]")
        return
    if fixture not in fixtures:
        _fail(f"no fixture named {fixture!r} (see ctc-doctor demo --list)", ExitCode.USAGE)
    spec = fixtures[fixture]
    label = "demo" if fixture == "showcase" else f"demo --fixture {fixture}"
    _run_analysis(label, lambda: _load(spec.target, kw["seed"]), {**kw, "rebuild_spec": spec.target})


@cli.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--top", default=10, show_default=True, type=int, help="Break sites to show.")
@click.option("--tui", is_flag=True, help="Browse the report in the terminal UI instead.")
def show(report_path: str, top: int, tui: bool) -> None:
    """Print the summary of a saved report (`ctc-doctor report.json` does the same)."""
    from .reports.io import load_report
    from .reports.render import render_summary

    try:
        report = load_report(report_path)
    except CtcDoctorError as exc:
        _fail(exc.one_line(), exc.exit_code)
    if tui:
        _browse(report, report_path)
        return
    render_summary(report, _stderr_console(), top=top)


@cli.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--section", type=click.Choice(["overview", "breaks", "recompiles", "modules", "suggestions", "benchmark", "compiles"]), default="overview", show_default=True, help="Section to open.")
def tui(report_path: str, section: str) -> None:
    """Browse a saved report in the terminal UI (`ctc-doctor report.json --tui` does the same).

    \b
    keys: 1-7 or tab switch sections, / search, f filter, s sort, e export Markdown, ? help, q quit
    live: `ctc-doctor TARGET --tui` watches the analysis, then browses its report
    """
    from .reports.io import load_report

    try:
        report = load_report(report_path)
    except CtcDoctorError as exc:
        _fail(exc.one_line(), exc.exit_code)
    _browse(report, report_path, section)


def _browse(report: Any, path: str | None, section: str = "overview") -> None:
    from .tui.app import DoctorApp

    DoctorApp(report, report_path=path, start_section=section).run()


def _run_live(kw: dict[str, Any]) -> None:
    """`TARGET --tui`: the analysis runs in a child process the TUI watches; exit with its exit code."""
    if kw.get("json_out") == "-":
        _fail("--tui draws on the terminal: write the report to a file with --json PATH", ExitCode.USAGE)
    from .tui.app import DoctorApp
    from .tui.live_run import LiveRun

    run = LiveRun(sys.argv[1:])
    app = DoctorApp(live=run)
    app.run()
    code = app.exit_code
    if run.report_path and os.path.exists(run.report_path):
        click.echo(f"ctc-doctor: report written to {run.report_path}", err=True)
    sys.exit(code if 0 <= code < 256 else int(ExitCode.INTERNAL_ERROR))


@cli.command()
@click.argument("report_path", metavar="REPORT")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "text"]), default="md", show_default=True, help="Output format.")
@click.option("--redact", is_flag=True, help=_REDACT_HELP)
@click.option("--project-root", default=None, metavar="DIR", help="Paths become relative to DIR with --redact [default: cwd].")
def report(report_path: str, fmt: str, redact: bool, project_root: str | None) -> None:
    """Print a saved report as Markdown for a GitHub issue (or JSON / text) on stdout."""
    from .reports.io import dump_report, load_report

    try:
        loaded = load_report(report_path)
    except CtcDoctorError as exc:
        _fail(exc.one_line(), exc.exit_code)
    if redact:
        from .reports.redact import redact as do_redact

        loaded = do_redact(loaded, project_root=project_root)
    if fmt == "md":
        from .reports.markdown import render_markdown

        click.echo(render_markdown(loaded), nl=False)
    elif fmt == "json":
        click.echo(dump_report(loaded), nl=False)
    else:
        from rich.console import Console

        from .reports.render import render_summary

        render_summary(loaded, Console(highlight=False, soft_wrap=False), top=10_000)


@cli.command()
@click.argument("before_path", metavar="BEFORE")
@click.argument("after_path", metavar="AFTER")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when anything got worse (new sites, more graphs, breaks or recompiles).")
def diff(before_path: str, after_path: str, fail_on_regression: bool) -> None:
    """Compare two reports: fixed, new and unchanged break sites, count and recompile changes."""
    from .reports.diff import diff_reports, render_diff_text
    from .reports.io import load_report

    try:
        result = diff_reports(load_report(before_path), load_report(after_path))
    except CtcDoctorError as exc:
        _fail(exc.one_line(), exc.exit_code)
    click.echo(render_diff_text(result), nl=False)
    if fail_on_regression and result.regressions:
        sys.exit(int(ExitCode.CHECK_FAILED))


class _SweepGroup(click.Group):
    """`ctc-doctor sweep MANIFEST ...` means `ctc-doctor sweep run MANIFEST ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands and not {"--help", "-h"} & set(args[:1]):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=_SweepGroup)
def sweep() -> None:
    """Many models in one command: a row per target, sharded across machines, diffed across sweeps.

    \b
    ctc-doctor sweep models.txt --jobs 4 --out sweep/             one TARGET or `run -- script` per line
    ctc-doctor sweep models.txt --shard 2/8 --out sweep-2/        one CI matrix job's share
    ctc-doctor sweep merge sweep-*/ --out sweep/                  one summary from the shards
    ctc-doctor sweep diff before/ after/ --fail-on-regression     what a torch upgrade or a commit broke
    ctc-doctor sweep transformers --limit 40 --out hf/            built-in: transformers models, tiny configs

    OUT gets summary.json, summary.md, and each target's report (reports/) and log (logs/).
    """


@sweep.command("run")
@click.argument("manifest")
@click.option("--out", "out_dir", default="sweep", show_default=True, metavar="DIR", help="Where summary.json, summary.md, reports/ and logs/ go.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N", help="Targets at once [default: the machine's cores, bounded by memory (3 GiB each)].")
@click.option("--shard", "shard_text", default=None, metavar="I/N", help="Run only shard I of N (every N-th target from the I-th): one CI matrix job's share.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N", help="Only the manifest's first N targets (the built-in one: its first N runnable classes).")
@click.option("--timeout", "timeout_s", default=900.0, show_default=True, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Per target: its run gets this long (a partial report), then it is stopped.")
@click.option("--backend", default=None, help="torch.compile backend of every target [default: each run's own default, eager].")
@click.option("--device", default=None, help="Move every build target's model and inputs to this device first.")
@click.option("--full", is_flag=True, help="The whole analysis per target (bisection, verified fixes, benchmark), not just breaks and recompiles.")
@click.option("--redact", is_flag=True, help=_REDACT_HELP)
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary on stderr.")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def sweep_run(manifest: str, out_dir: str, jobs: int | None, shard_text: str | None, limit: int | None, quiet: bool, debug: bool, **kw: Any) -> None:
    """Run every target of MANIFEST in its own process; write OUT/summary.json and OUT/summary.md.

    MANIFEST is a file with one target per line (`pkg.mod:build [options]` or `run [options] --
    script [args]`, `#` comments), or `transformers`, the built-in manifest. A target that crashes,
    hangs or fails to import costs its row (status error or timeout, with the reason), never the sweep.
    Exit codes: 0 the sweep ran (whatever the targets' verdicts), 2 bad manifest, 130 interrupted.
    """
    from pathlib import Path

    from .sweep.manifest import parse_shard, read_manifest
    from .sweep.runner import SweepOptions, default_jobs
    from .sweep.summary import render_text, run_sweep

    with _one_line_errors(debug):
        shard_of = parse_shard(shard_text) if shard_text else None
        if not quiet:
            click.echo(f"ctc-doctor: reading the manifest {manifest}", err=True)
        loaded = read_manifest(manifest, limit)
        jobs = jobs or default_jobs()
        options = SweepOptions(**kw)
        out = Path(out_dir)
        console = _stderr_console()
        with _sweep_progress(console, quiet, loaded, shard_of) as (on_start, on_done):
            summary, interrupted = run_sweep(loaded, out, options, jobs=jobs, shard_of=shard_of, on_start=on_start, on_done=on_done)
        if not quiet:
            console.print(render_text(summary, width=console.width), end="", markup=False, highlight=False)
            console.print(f"[dim]summary written to {out / 'summary.json'} and {out / 'summary.md'}[/dim]")
    if interrupted:
        _fail("interrupted: the summary of what finished was written", ExitCode.INTERRUPTED)


@contextlib.contextmanager
def _sweep_progress(console: Any, quiet: bool, manifest: Any, shard_of: Any) -> Iterator[tuple[Any, Any]]:
    """A bar counting targets with the running ones named; one line per finished target (a CI log
    without a terminal keeps those)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .sweep.manifest import shard
    from .sweep.summary import clip

    entries = shard(manifest.entries, *shard_of) if shard_of else manifest.entries
    total = sum(e.skip is None for e in entries)
    progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"), console=console, transient=True, disable=quiet)
    running: list[str] = []
    done_count = [0]

    def describe() -> str:
        names = [r.rsplit(":", 1)[-1] if r.count(" ") == 0 else r for r in running]
        return clip(", ".join(names), max(20, console.width - 50))

    with progress:
        task = progress.add_task("", total=total)

        def on_start(entry: Any) -> None:
            running.append(entry.line)
            progress.update(task, description=describe())

        def on_done(finished: Any) -> None:
            running.remove(finished.entry.line)
            done_count[0] += 1
            progress.update(task, advance=1, description=describe())
            if not quiet:
                state = "stopped" if finished.killed else f"exit {finished.exit_code}"
                line = f"[{done_count[0]}/{total}] {finished.entry.line}  ({state}, {finished.duration_s:.1f} s)"
                progress.console.print(clip(line, console.width), markup=False, highlight=False)

        yield on_start, on_done


@sweep.command("merge")
@click.argument("paths", nargs=-1, required=True, metavar="SWEEP_DIR...")
@click.option("--out", "out_dir", required=True, metavar="DIR", help="Where the merged summary (and copies of the reports and logs) go.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def sweep_merge(paths: tuple[str, ...], out_dir: str, quiet: bool) -> None:
    """Merge the summaries of a sweep's shards (`--shard I/N` runs) into one."""
    from pathlib import Path

    from .sweep.summary import merge_summaries, render_text, write_summary

    with _one_line_errors(False):
        merged = merge_summaries(list(paths), Path(out_dir))
        write_summary(merged, Path(out_dir))
    if not quiet:
        console = _stderr_console()
        console.print(render_text(merged, width=console.width), end="", markup=False, highlight=False)
        console.print(f"[dim]merged summary written to {Path(out_dir) / 'summary.json'}[/dim]")


@sweep.command("diff")
@click.argument("before", metavar="BEFORE")
@click.argument("after", metavar="AFTER")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a target gained a break site or a recompile cause, went from clean to anything else, or stopped reaching a verdict.")
def sweep_diff(before: str, after: str, fail_on_regression: bool) -> None:
    """Compare two sweeps (directories or summary.json files): per target, then the fleet."""
    from .sweep.diff import diff_sweeps, render_sweep_diff
    from .sweep.summary import load_summary

    with _one_line_errors(False):
        result = diff_sweeps(load_summary(before)[0], load_summary(after)[0])
    click.echo(render_sweep_diff(result), nl=False)
    if fail_on_regression and result.regressions:
        sys.exit(int(ExitCode.CHECK_FAILED))


_GATE_OPTIONS = [
    click.option("--max-graph-breaks", type=click.IntRange(min=0), default=None, metavar="N", help="Fail when more than N break sites remain after the allowlists [default: 0]."),
    click.option("--max-recompiles", type=click.IntRange(min=0), default=None, metavar="N", help="Fail when more than N recompiles happen [default: 0]."),
    click.option("--allow", multiple=True, metavar="GB|TYPE", help="Do not count breaks with this GB id or gb_type (repeatable)."),
    click.option("--allow-module", multiple=True, metavar="PATH", help="Do not count breaks inside this module path (repeatable)."),
    click.option("--own-code-only", is_flag=True, help="Do not count breaks whose innermost frame is in a library."),
]


def _policy(kw: dict[str, Any], *, gate: bool) -> Any:
    """The check policy from the gate options (popped from kw); None when no gate was asked for."""
    from .reports.policy import Policy

    limits = (kw.pop("max_graph_breaks"), kw.pop("max_recompiles"))
    allow, allow_modules, own_code_only = kw.pop("allow"), kw.pop("allow_module"), kw.pop("own_code_only")
    if not gate and limits == (None, None):
        return None
    # a gate's default is clean: a limit left unset stays 0 when the other is given
    limits = (0 if limits[0] is None else limits[0], 0 if limits[1] is None else limits[1])
    return Policy(max_graph_breaks=limits[0], max_recompiles=limits[1], allow=allow, allow_modules=allow_modules, own_code_only=own_code_only)


def _gate(report: Any, policy: Any) -> bool:
    """Print the check's verdict; True when it passed."""
    from .reports.policy import violations

    found = violations(report, policy)
    if found:
        click.echo("ctc-doctor check: FAILED", err=True)
        for line in found:
            click.echo(line, err=True)
        return False
    click.echo("ctc-doctor check: passed", err=True)
    return True


@cli.command()
@click.argument("target")
@_analysis_options
@_option_group(_GATE_OPTIONS)
def check(target: str, **kw: Any) -> None:
    """CI gate: analyze TARGET (no bisection) and exit 1 when the thresholds are exceeded.

    For a script, the same gate is `ctc-doctor run --check -- train.py` (same threshold options).
    """
    policy = _policy(kw, gate=True)
    _run_analysis(target, lambda: _load(target, kw["seed"]), {**kw, "no_bisect": True, "no_fix": True, "no_bench": True, "policy": policy})


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc", default=1, show_default=True, type=click.IntRange(min=1), metavar="N", help="Run N local ranks through torch.distributed.run (torchrun).")
@click.option("--backend", default=None, help="Replace the backend of every torch.compile call (e.g. eager, for a fast diagnosis) [default: the script's].")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, metavar="N", help="Stop the script after N calls of the compiled model.")
@click.option("--timeout", "timeout_s", default=None, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Stop the script (every rank) after this long; the partial report is still written.")
@click.option("--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the script's stdout then goes to stderr).")
@click.option("--no-bisect", is_flag=True, help="Skip the bisection of the compiled module.")
@click.option("--no-fix", is_flag=True, help="Skip verifying the suggestions on copies of the compiled module.")
@click.option("--guards", "keep_guards", is_flag=True, help="Keep the full guard tree text per compile id in the report.")
@click.option("--top", default=10, show_default=True, type=int, help="Break sites to show in the summary.")
@click.option("--redact", is_flag=True, help=_REDACT_HELP)
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr (the script's own output still shows).")
@click.option("--tui", is_flag=True, help="Watch the run in the terminal UI (phases, the script's output), then browse the report.")
@click.option("--check", "gate", is_flag=True, help="CI gate: exit 1 unless the run is clean (or within --max-graph-breaks/--max-recompiles).")
@_option_group(_GATE_OPTIONS)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("--progress-fd", type=int, default=None, hidden=True)
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
    if kw["tui"]:
        if kw["json_out"] == "-":
            _fail("--tui draws on the terminal: write the report to a file with --json PATH", ExitCode.USAGE)
        _run_live(kw)
        return
    policy = _policy(kw, gate=kw.pop("gate"))
    from .analyzer.launch import RunOptions, run_script, script_command

    json_out, quiet, debug = kw["json_out"], kw["quiet"], kw["debug"]
    console = _stderr_console()
    stream = _progress_stream(kw.get("progress_fd"))
    started = time.perf_counter()
    shown: list[str] = []

    def progress(phase: str, done: int, total: int) -> None:
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # the watcher went away: keep going
                stream.write(json.dumps({"phase": phase, "done": done, "total": total, "elapsed_s": round(time.perf_counter() - started, 3)}) + "\n")
                stream.flush()
        head = phase.split(" ")[0]
        if not quiet and head in _RUN_PHASES and (not shown or shown[-1] != head):
            shown.append(head)
            click.echo(f"ctc-doctor: {_RUN_PHASES[head]}", err=True)

    def say(text: str) -> None:
        if not quiet:
            click.echo(f"ctc-doctor: {text}", err=True)

    with _one_line_errors(debug):
        argv = script_command(list(command))
        options = RunOptions(
            nproc=kw["nproc"],
            backend=kw["backend"],
            max_steps=kw["max_steps"],
            timeout_s=kw["timeout_s"],
            bisect=not kw["no_bisect"] and policy is None,
            fix=not kw["no_fix"] and policy is None,
            keep_guard_text=kw["keep_guards"],
        )
        result = run_script(argv, options, say=say, progress=progress, stdout=sys.stderr if json_out == "-" else None)
        report = result.report
        report.run.command = " ".join(["ctc-doctor", *sys.argv[1:]])
        if json_out:
            _write_report(report, json_out, sys.stdout, redact=kw["redact"])
    code = _run_exit_code(report, result.status)
    if code == ExitCode.NOTHING_COMPILED:
        written = f" (report written to {json_out})" if json_out and json_out != "-" else ""
        click.echo(f"ctc-doctor: the script never called torch.compile: nothing to diagnose{written}", err=True)
    elif not quiet:
        from .reports.render import render_summary

        render_summary(report, console, top=kw["top"])
        if json_out and json_out != "-":
            console.print(f"[dim]report written to {json_out}[/dim]")
        elif not json_out:
            console.print("[dim]save the full report with --json report.json[/dim]")
    if policy is not None and code == ExitCode.OK and not _gate(report, policy):
        code = ExitCode.CHECK_FAILED
    sys.exit(int(code))


_RUN_PHASES = {
    "report": "building the report (one eager call of the compiled module for module paths)",
    "bisect": "bisecting the compiled module on its recorded inputs",
    "fix": "verifying the suggestions on copies of the compiled module",
}


def _run_exit_code(report: Any, status: str) -> ExitCode:
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


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the summary then goes to stderr).")
@click.option("--strict", is_flag=True, help="Exit 10 when any record is unreadable or of an unknown kind (the report is still written).")
@click.option("--guards", "keep_guards", is_flag=True, help="Keep the full guard tree text per compile id in the report.")
@click.option("--top", default=10, show_default=True, type=int, help="Break sites to show in the summary.")
@click.option("--redact", is_flag=True, help=_REDACT_HELP)
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
@click.option("--tui", is_flag=True, help="Browse the report in the terminal UI.")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def logs(paths: tuple[str, ...], json_out: str | None, strict: bool, keep_guards: bool, top: int, redact: bool, quiet: bool, tui: bool, debug: bool) -> None:
    """Diagnose the logs of a run you cannot repeat: TORCH_TRACE directories or files, TORCH_LOGS text.

    \b
    TORCH_TRACE=./trace python train.py           (or torchrun ...: one file per rank)
    TORCH_LOGS=graph_breaks,recompiles,perf_hints python train.py 2> run.log
    ctc-doctor logs ./trace --json report.json    the same report as a live analysis, per rank
    ctc-doctor logs ./trace run.log               the trace, plus the perf hints of the text log

    Reads gzip-compressed files too. Unreadable and unknown records are counted in the report's
    parse_stats; --strict turns any of them into exit 10.
    """
    if tui and json_out == "-":
        _fail("--tui draws on the terminal: write the report to a file with --json PATH", ExitCode.USAGE)
    from .analyzer.offline import ingest
    from .errors import LogsInvalid

    with _one_line_errors(debug):
        report = ingest(list(paths), keep_guard_text=keep_guards, command=" ".join(["ctc-doctor", *sys.argv[1:]]))
        if json_out:
            _write_report(report, json_out, sys.stdout, redact=redact)
    if tui:
        _browse(report, json_out)
    elif not quiet:
        from .reports.render import render_summary

        console = _stderr_console()
        render_summary(report, console, top=top)
        if json_out and json_out != "-":
            console.print(f"[dim]report written to {json_out}[/dim]")
    stats = report.parse_stats
    if strict and stats is not None and (stats.unreadable or stats.unknown):
        first = f" (first: {stats.examples[0]})" if stats.examples else ""
        error = LogsInvalid(f"--strict: {stats.unreadable} unreadable and {stats.unknown} unknown record(s){first}")
        _fail(error.one_line(), error.exit_code)


@cli.command()
@click.option("--sweep", "of_sweep", is_flag=True, help="The schema of a sweep's summary.json instead.")
def schema(of_sweep: bool) -> None:
    """Print the report's JSON Schema (or, with --sweep, that of a sweep's summary.json)."""
    if of_sweep:
        from .sweep.models import sweep_schema_text

        click.echo(sweep_schema_text(), nl=False)
        return
    from .reports.io import schema_text

    click.echo(schema_text(), nl=False)


def _load(target: str, seed: int) -> Any:
    from .analyzer.target import load_workload

    return load_workload(target, seed=seed)


def _run_analysis(spec: str, load: Any, kw: dict[str, Any]) -> None:
    if kw.get("tui"):
        _run_live(kw)
        return
    debug = kw["debug"]
    json_out = kw["json_out"]
    quiet = kw["quiet"]
    console = _stderr_console()
    _check_device_and_backends(kw, kw.get("rebuild_spec") or spec)
    with _one_line_errors(debug):
        with _stdout_reserved(json_out == "-") as real_stdout:
            report = _analyze_with_progress(spec, load, kw, console, quiet)
            if json_out:
                _write_report(report, json_out, real_stdout, redact=kw.get("redact", False))
        eager_failed = any(e.phase == "eager" for e in report.errors)
        if not quiet and not eager_failed:  # nothing was analyzed: the one-line error says it all
            from .reports.render import render_summary

            render_summary(report, console, top=kw["top"])
            if json_out and json_out != "-":
                console.print(f"[dim]report written to {json_out}[/dim]")
            elif not json_out:
                console.print("[dim]save the full report with --json report.json[/dim]")
    if kw.get("bisect_only") and report.bisect is None and not report.errors:
        _fail("bisect needs an nn.Module model; the target returned a " + report.target.model_class, ExitCode.TARGET_INVALID)
    fatal = next((e for e in report.errors if e.phase in _ERROR_PHASE_EXIT), None)
    if fatal is not None:
        hint = " — fix eager mode first" if fatal.phase == "eager" else ""
        message = fatal.message.removesuffix("; partial report")  # the timeout's own words
        written = f"; partial report written to {json_out}" if json_out and json_out != "-" else ""
        _fail(f"{message}{hint}{written}", _ERROR_PHASE_EXIT[fatal.phase])
    policy = kw.get("policy")
    if policy is not None and not _gate(report, policy):
        sys.exit(int(ExitCode.CHECK_FAILED))


def _check_device_and_backends(kw: dict[str, Any], spec: str) -> None:
    """`--device` and the backends are usage errors before the model is built, not a crash after. A
    backend the target's module registers when imported counts: it is imported (not built) to see."""
    device, backends = kw.get("device"), [b for b in (kw.get("backend"), kw.get("bench_backend")) if b]
    if not device and not backends:
        return
    if device:
        from .analyzer.running.device import device_problem

        problem = device_problem(device)
        if problem:
            _fail(problem, ExitCode.USAGE)
    from .analyzer.torch_internals import backend_names

    known = backend_names()
    if known is not None and not set(backends) <= set(known):
        from .analyzer.target import resolve_builder

        try:
            resolve_builder(spec)  # imports the module; the builder is not called
        except Exception:  # noqa: BLE001 - a bad target is reported by the run itself, with its own exit code
            return
        known = backend_names()
    for name in backends:
        if known is not None and name not in known:
            common = [b for b in ("eager", "aot_eager", "inductor", "cudagraphs") if b in known]
            _fail(f"no torch.compile backend named {name!r} (e.g. {', '.join(common)}; all: torch.compiler.list_backends())", ExitCode.USAGE)


def _analyze_with_progress(spec: str, load: Any, kw: dict[str, Any], console: Any, quiet: bool) -> Any:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=quiet,
    )
    stream = _progress_stream(kw.get("progress_fd"))
    started = time.perf_counter()

    def emit(phase: str, done: int, total: int) -> None:
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # the watcher went away: keep analyzing
                stream.write(json.dumps({"phase": phase, "done": done, "total": total, "elapsed_s": round(time.perf_counter() - started, 3)}) + "\n")
                stream.flush()

    with progress:
        task = progress.add_task("loading target (importing torch)", total=None, count="")
        emit("load", 0, 0)
        workload = load()

        def on_progress(phase: str, done: int, total: int) -> None:
            emit(phase, done, total)
            labels = {
                "eager run": "eager run",
                "explain": "explain cross-check",
                "compile": "compiling call",
                "report": "building report",
            }
            if phase.startswith("bisect "):  # "bisect PATH": a trial of that module is starting
                label, count = f"bisecting: trying {phase[7:] or '(root)'} with fullgraph=True", f"{done} trial(s) run"
            elif phase.startswith("fix "):  # "fix S3" / "fix combined"
                what = "all safe suggestions together" if phase == "fix combined" else f"suggestion {phase[4:]} alone"
                label, count = f"verifying fix: {what}", f"{done}/{total}"
            elif phase.startswith("bench"):
                label, count = f"benchmark{phase[5:]}", (f"{done}/{total}" if total else "")
            else:
                label, count = labels.get(phase, phase), (f"{done}/{total}" if total else "")
            progress.update(task, description=label, completed=done, total=total or None, count=count)

        from .analyzer.phases.bench import BenchOptions
        from .analyzer.phases.bisect import BisectOptions
        from .analyzer.phases.fix import FixOptions
        from .analyzer.pipeline import AnalyzeOptions, analyze

        bisect_only = bool(kw.get("bisect_only"))
        bench_options = None
        if not kw.get("no_bench") and not bisect_only and "bench_backend" in kw:
            bench_options = BenchOptions(
                backend=kw["bench_backend"],
                mode=None if kw["mode"] == "default" else kw["mode"],
                iters=kw["iters"],
                warmup=kw["warmup"],
                regional=not kw["no_regional"],
                objective=kw["objective"],
                aot=kw["aot"],
                aot_strict=kw["aot_strict"],
            )
        bisect_options = None
        if bisect_only or not kw.get("no_bisect"):
            json_out = kw.get("json_out")
            repro_dir = kw.get("repro_dir") or (os.path.dirname(os.path.abspath(json_out)) if json_out and json_out != "-" else None)
            bisect_options = BisectOptions(
                strategy=kw["strategy"],
                max_trials=kw["max_trials"],
                trial_timeout_s=kw["trial_timeout_s"] if kw["trial_timeout_s"] and kw["trial_timeout_s"] > 0 else None,
                isolate=_isolate(kw, bench_options is not None),
                memoize=not kw["no_memo"],
                repro_dir=repro_dir,
                target=kw.get("rebuild_spec") or spec,
                always=bisect_only,
            )
        options = AnalyzeOptions(
            fix=None if kw.get("no_fix") or bisect_only else FixOptions(),
            probe_shapes=bool(kw.get("probe_shapes")),
            bench=bench_options,
            backend=kw["backend"],
            device=kw["device"],
            train=kw["train"],
            seed=kw["seed"],
            explain=not kw["no_explain"],
            keep_guard_text=kw["keep_guards"],
            timeout_s=kw["timeout_s"],
            compile=not bisect_only,
            bisect=bisect_options,
            spec=spec,
            command=" ".join(["ctc-doctor", *sys.argv[1:]]),
            progress=on_progress,
        )
        return analyze(workload, options)


def _isolate(kw: dict[str, Any], with_bench: bool) -> bool:
    """--isolate/--no-isolate when given; else on for a run with the benchmark on CPU, where the child,
    started before the analysis, costs under 10 % of the run (`benchmarks/bisect_cost.py --full-run`)."""
    if kw.get("isolate") is not None:
        return bool(kw["isolate"])
    return with_bench and (kw.get("device") or "cpu") == "cpu"


def _progress_stream(fd: int | None) -> Any:
    if fd is None:
        return None
    try:
        return os.fdopen(fd, "w", encoding="utf-8", buffering=1)
    except OSError as exc:
        raise CtcDoctorError(f"--progress-fd {fd}: {exc.strerror}") from exc


def _write_report(report: Any, path: str, real_stdout: Any, *, redact: bool = False) -> None:
    """The JSON report to PATH ('-': the real stdout), redacted first with --redact."""
    from .reports.io import dump_report

    if redact:
        from .reports.redact import redact as redacted

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


def main() -> None:
    cli.main(prog_name="ctc-doctor")


if __name__ == "__main__":
    main()
