"""`ctc-doctor sweep`: many targets in child processes (run), shards merged (merge), two sweeps
compared (diff); the sweep's progress display. Imports neither torch nor the analyzer."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import ExitCode
from .options import DEBUG, REDACT, count_option
from .output import fail, one_line_errors, report_console, stderr_console

if TYPE_CHECKING:
    from rich.console import Console

    from ..sweep.manifest import Manifest


class _SweepGroup(click.Group):
    """`ctc-doctor sweep MANIFEST ...` means `ctc-doctor sweep run MANIFEST ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands and not {"--help", "-h"} & set(args[:1]):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_SweepGroup)
def sweep() -> None:
    """Many models in one command: a row per target, sharded across machines, diffed across sweeps.

    \b
    ctc-doctor sweep models.txt --jobs 4 --out sweep/             one TARGET or `run -- script` per line
    ctc-doctor sweep models.txt --bench --out sweep/              + speedup, compile time, memory, numerics
    ctc-doctor sweep models.txt --shard 2/8 --out sweep-2/        one CI matrix job's share
    ctc-doctor sweep merge sweep-*/ --out sweep/                  one summary from the shards
    ctc-doctor sweep diff before/ after/ --fail-on-regression     what a torch upgrade or a commit broke
    ctc-doctor sweep transformers --limit 40 --out hf/            built-in: transformers models, tiny configs

    OUT gets summary.json, summary.md, and each target's report (reports/) and log (logs/).
    """


@sweep.command("run")
@click.argument("manifest")
@click.option(
    "--out", "out_dir", default="sweep", show_default=True, metavar="DIR", help="Where summary.json, summary.md, reports/ and logs/ go."
)
@count_option("--jobs", "-j", help="Targets at once [default: the machine's cores, bounded by memory (3 GiB each)].")
@click.option(
    "--shard",
    "shard_text",
    default=None,
    metavar="I/N",
    help="Run only shard I of N (every N-th target from the I-th): one CI matrix job's share.",
)
@count_option("--limit", help="Only the manifest's first N targets (the built-in one: its first N runnable classes).")
@click.option(
    "--timeout",
    "timeout_s",
    default=900.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Per target: its run gets this long (a partial report), then it is stopped.",
)
@click.option("--backend", default=None, help="torch.compile backend of every target [default: each run's own default, eager].")
@click.option("--device", default=None, help="Move every build target's model and inputs to this device first.")
@click.option(
    "--full", is_flag=True, help="The whole analysis per target (bisection, verified fixes, benchmark), not just breaks and recompiles."
)
@click.option(
    "--bench",
    is_flag=True,
    help="Breaks and recompiles plus a light benchmark per target (eager and compiled arms: speedup, compile time, "
    "memory, numerics), without bisection or fix checks; scripts run under `run --compare eager,default`.",
)
@REDACT
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary.")
@DEBUG
def sweep_run(
    manifest: str,
    out_dir: str,
    jobs: int | None,
    shard_text: str | None,
    limit: int | None,
    timeout_s: float,
    backend: str | None,
    device: str | None,
    full: bool,
    bench: bool,
    redact: bool,
    quiet: bool,
    debug: bool,
) -> None:
    """Run every target of MANIFEST in its own process; write OUT/summary.json and OUT/summary.md.

    MANIFEST is a file with one target per line (`pkg.mod:build [options]` or `run [options] --
    script [args]`, `#` comments), or `transformers`, the built-in manifest. A target that crashes,
    hangs or fails to import costs its row (status error or timeout, with the reason), never the sweep.
    With --bench or --full, summary.md opens with the fleet's dashboard: pass rate, geometric-mean
    speedup, compile time and memory ratio. Exit codes: 0 the sweep ran (whatever the targets'
    verdicts), 2 bad manifest, 130 stopped (Ctrl-C or SIGTERM; the summary of what finished is written).
    """
    from ..sweep.manifest import parse_shard, read_manifest
    from ..sweep.runner import SweepOptions, default_jobs
    from ..sweep.summary import render_text, run_sweep, stop_name

    with one_line_errors(debug):
        shard_of = parse_shard(shard_text) if shard_text else None
        if not quiet:
            click.echo(f"ctc-doctor: reading the manifest {manifest}", err=True)
        loaded = read_manifest(manifest, limit)
        options = SweepOptions(timeout_s=timeout_s, backend=backend, device=device, full=full, bench=bench, redact=redact)
        out = Path(out_dir)
        console = stderr_console()
        with _sweep_progress(console, quiet, loaded, shard_of) as (on_start, on_done):
            summary, interrupted = run_sweep(
                loaded, out, options, jobs=jobs or default_jobs(), shard_of=shard_of, on_start=on_start, on_done=on_done
            )
        if not quiet:
            shown = report_console()
            shown.print(render_text(summary, width=shown.width), end="", markup=False, highlight=False)
            shown.file.flush()
            console.print(f"[dim]summary written to {out / 'summary.json'} and {out / 'summary.md'}[/dim]")
    if interrupted:
        fail(f"stopped by {stop_name(summary.stopped_by)}: the summary of what finished was written", ExitCode.INTERRUPTED)


@contextlib.contextmanager
def _sweep_progress(
    console: Console, quiet: bool, manifest: Manifest, shard_of: tuple[int, int] | None
) -> Iterator[tuple[Callable[[Any], None], Callable[[Any], None]]]:
    """A bar counting targets with the running ones named; one line per finished target (a CI log
    without a terminal keeps those)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..sweep.manifest import shard
    from ..sweep.summary import clip

    entries = shard(manifest.entries, *shard_of) if shard_of else manifest.entries
    total = sum(e.skip is None for e in entries)
    progress = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
        disable=quiet,
    )
    running: list[str] = []
    done_count = 0

    def describe() -> str:
        names = [r.rsplit(":", 1)[-1] if r.count(" ") == 0 else r for r in running]
        return clip(", ".join(names), max(20, console.width - 50))

    with progress:
        task = progress.add_task("", total=total)

        def on_start(entry: Any) -> None:
            running.append(entry.line)
            progress.update(task, description=describe())

        def on_done(finished: Any) -> None:
            nonlocal done_count
            running.remove(finished.entry.line)
            done_count += 1
            progress.update(task, advance=1, description=describe())
            if not quiet:
                state = "stopped" if finished.killed else f"exit {finished.exit_code}"
                line = f"[{done_count}/{total}] {finished.entry.line}  ({state}, {finished.duration_s:.1f} s)"
                progress.console.print(clip(line, console.width), markup=False, highlight=False)

        yield on_start, on_done


@sweep.command("merge")
@click.argument("paths", nargs=-1, required=True, metavar="SWEEP_DIR...")
@click.option("--out", "out_dir", required=True, metavar="DIR", help="Where the merged summary (and copies of the reports and logs) go.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
def sweep_merge(paths: tuple[str, ...], out_dir: str, quiet: bool) -> None:
    """Merge the summaries of a sweep's shards (`--shard I/N` runs) into one."""
    from ..sweep.summary import merge_summaries, render_text, write_summary

    with one_line_errors():
        merged = merge_summaries(list(paths), Path(out_dir))
        write_summary(merged, Path(out_dir))
    if not quiet:
        shown = report_console()
        shown.print(render_text(merged, width=shown.width), end="", markup=False, highlight=False)
        shown.file.flush()
        stderr_console().print(f"[dim]merged summary written to {Path(out_dir) / 'summary.json'}[/dim]")


def _threshold(name: str, default: float, text: str) -> Callable[[Any], Any]:
    """`--NAME-threshold FRACTION`: how far one of a sweep's numbers may move before `sweep diff` counts it."""
    return click.option(
        f"--{name}-threshold", type=click.FloatRange(min=0), default=default, show_default=True, metavar="FRACTION", help=text
    )


@sweep.command("diff")
@click.argument("before", metavar="BEFORE")
@click.argument("after", metavar="AFTER")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a target gained a break site or a recompile cause, went from clean to anything else, stopped "
    "reaching a verdict, went from pass to fail, or got slower, compiles longer or uses more memory beyond the thresholds.",
)
@_threshold("speedup", 0.05, "A speedup drop counts beyond this, or beyond the measured spread when that is wider.")
@_threshold("compile", 0.25, "A cold compile time rise counts beyond this fraction (and 1 s).")
@_threshold("memory", 0.10, "A drop of the memory ratio (eager peak / compiled peak) counts beyond this.")
def sweep_diff(
    before: str, after: str, fail_on_regression: bool, speedup_threshold: float, compile_threshold: float, memory_threshold: float
) -> None:
    """Compare two sweeps (directories or summary.json files): per target, then the fleet."""
    from ..sweep.regressions import Thresholds, diff_sweeps, render_sweep_diff
    from ..sweep.summary import load_summary

    limits = Thresholds(speedup=speedup_threshold, compile=compile_threshold, memory=memory_threshold)
    with one_line_errors():
        result = diff_sweeps(load_summary(before)[0], load_summary(after)[0], limits)
    click.echo(render_sweep_diff(result), nl=False)
    if fail_on_regression and result.regressions:
        sys.exit(int(ExitCode.CHECK_FAILED))
