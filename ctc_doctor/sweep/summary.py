"""A sweep's summary: one row per target from its child's report, fleet totals, `summary.json` and
`summary.md`, reading them back, and merging the summaries of shards. No torch import."""

from __future__ import annotations

import math
import re
import shutil
import statistics
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from ..errors import CtcDoctorError, ExitCode, ReportError
from ..reports.io import load_report, read_json_object
from ..reports.models import Environment, Report, file_key
from ..reports.redact import Redactor
from ..version import __version__
from .manifest import Entry, Manifest, shard
from .runner import Finished, SweepInterrupted, SweepOptions, run_entries
from .summary_models import (
    STATUS_ORDER,
    SWEEP_SCHEMA_VERSION,
    Dashboard,
    SweepCause,
    SweepSite,
    SweepSummary,
    SweepTarget,
    TargetBench,
    Totals,
)

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
_ERROR_PREFIX = "ctc-doctor: error: "
_WRITTEN = re.compile(r"(; | \()(partial )?report written to .*$")


def _reason_from_log(path: Path, exit_code: int | None) -> str | None:
    """The child's one-line error, else its last line for an unexpected exit."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    for line in reversed(lines):
        if line.startswith(_ERROR_PREFIX):  # where its report went is the row's `report`
            return _WRITTEN.sub("", line[len(_ERROR_PREFIX) :])
    if exit_code in (None, 0, 1):
        return None
    tail = f": {lines[-1][:200]}" if lines else ""
    return f"exited with code {exit_code}{tail}"


def _sites(report: Report) -> list[SweepSite]:
    out = []
    for site in report.graph_breaks:
        frame, own = site.user_frame, site.own_frame  # where it breaks; the user's line that reached it
        out.append(
            SweepSite(
                gb_type=site.gb_type,
                gb_id=site.registry_ids[0] if site.registry_ids else None,
                file=file_key(frame.file),
                line=frame.line,
                function=frame.function,
                module_paths=list(site.module_paths),
                occurrences=site.occurrences,
                own_code=site.own_code,
                own_file=file_key(own.file) if own is not None and not site.own_code else None,
                own_line=own.line if own is not None and not site.own_code else None,
                expected=site.expected is not None,
            )
        )
    return out


def _causes(report: Report) -> list[SweepCause]:
    return [
        SweepCause(kind=c.kind, source=c.source, dim=c.dim, summary=c.summary, recompiles=len(c.recompiles))
        for c in report.recompile_causes
    ]


def _rel(stats: object) -> float:
    median, iqr = getattr(stats, "median", 0.0), getattr(stats, "iqr", 0.0)
    return iqr / median if median else 0.0


def _bench(report: Report) -> TargetBench | None:
    """The dashboard's numbers from a report: its benchmark's eager and whole-model compiled arms, else
    (a script under `run --compare`) its eager and default strategies."""
    bench = report.benchmark
    if bench is not None and bench.arms:
        arms = {a.name: a for a in bench.arms}
        eager, compiled = arms.get("eager"), arms.get("compiled")
        out = TargetBench(best_arm=bench.best_arm, backend=str(bench.settings.get("backend") or "") or None, device=bench.device)
        out.duration_s = bench.duration_s
        if eager is not None and eager.latency_ms is not None:
            out.eager_ms = eager.latency_ms.median
            out.peak_memory_eager_mb = eager.peak_memory_mb
        if compiled is not None:
            out.error = compiled.error if compiled.latency_ms is None else None
            out.compile_s, out.warm_compile_s = compiled.compile_time_s, compiled.warm_compile_time_s
            out.peak_memory_compiled_mb = compiled.peak_memory_mb
            out.numerics_ok = compiled.numerics_ok
            if compiled.numerics is not None and not compiled.numerics.ok:
                out.numerics = compiled.numerics.problem or compiled.numerics.worst
            if compiled.latency_ms is not None:
                out.compiled_ms = compiled.latency_ms.median
                out.speedup = compiled.speedup_vs_eager
                if eager is not None and eager.latency_ms is not None:
                    out.spread = round(_rel(eager.latency_ms) + _rel(compiled.latency_ms), 4)
        best = arms.get(bench.best_arm or "")
        out.best_speedup = 1.0 if bench.best_arm == "eager" else (best.speedup_vs_eager if best is not None else None)
        if out.peak_memory_eager_mb and out.peak_memory_compiled_mb:
            out.memory_ratio = round(out.peak_memory_eager_mb / out.peak_memory_compiled_mb, 3)
        return out
    rows = {r.strategy: r for r in report.comparison}
    eager_row, default = rows.get("eager"), rows.get("default")
    if eager_row is None or default is None:
        return None
    out = TargetBench(backend=None, device=report.environment.device, best_arm=None)
    out.eager_ms, out.compiled_ms = eager_row.period_ms, default.period_ms
    out.speedup, out.compile_s, out.numerics_ok = default.speedup, default.compile_time_s or None, default.loss_ok
    out.error = default.error if default.period_ms is None else None
    paced = [r for r in report.comparison if r.speedup is not None and r.loss_ok is not False and r.error is None]
    if paced:
        fastest = max(paced, key=lambda r: r.speedup or 0.0)
        out.best_arm, out.best_speedup = fastest.strategy, fastest.speedup
    if default.loss_ok is False and default.loss_change is not None:
        out.numerics = f"loss drifted {default.loss_change:.1%} from eager's by call {default.loss_call}"
    return out


def target_row(finished: Finished, out_dir: Path, timeout_s: float) -> tuple[SweepTarget, Report | None]:
    """The summary row of one finished child, and its report when it wrote a readable one."""
    entry, code = finished.entry, finished.exit_code
    report: Report | None = None
    reason = None if finished.interrupted else _reason_from_log(finished.log_path, code)
    if finished.report_path.exists():
        try:
            report = load_report(finished.report_path)
        except ReportError as exc:
            reason = f"its report is unreadable: {exc.one_line()}"
    if finished.interrupted:
        status, reason = "error", f"interrupted ({stop_name(finished.stopped_by)}) before it finished"
    elif finished.killed or code == ExitCode.TIMEOUT:
        status = "timeout"
        if finished.killed:
            reason = f"no result within --timeout {entry.timeout_s or timeout_s:g} s; stopped"
    elif report is None:
        status = "error"
        reason = reason or f"exited with code {code} without a report"
    elif code in (ExitCode.OK, ExitCode.CHECK_FAILED):
        status = report.summary.verdict
    elif code in (ExitCode.EAGER_FAILED, ExitCode.COMPILE_FAILED):
        status = "failed"
    else:
        status = "error"  # the script failed or compiled nothing, or an internal error: the report is partial
    row = SweepTarget(
        target=entry.line,
        index=entry.index,
        status=status,  # type: ignore[arg-type]
        reason=reason,
        exit_code=code,
        duration_s=round(finished.duration_s, 3),
        report=finished.report_path.relative_to(out_dir).as_posix() if report is not None else None,
        log=finished.log_path.relative_to(out_dir).as_posix() if finished.log_path.exists() else None,
    )
    if report is not None:
        row.graph_count = report.summary.graph_count
        row.graph_break_count = report.summary.graph_break_count
        row.break_sites = _sites(report)
        row.recompile_count = report.summary.recompile_count
        row.recompile_causes = _causes(report)
        row.bench = _bench(report)
    row.group = entry.group
    return row, report


def stop_name(signal_name: str | None) -> str:
    """`SIGINT` -> `Ctrl-C, SIGINT`: what stopped a sweep, as a person reads it."""
    return {"SIGINT": "Ctrl-C, SIGINT", "SIGTERM": "SIGTERM: a cancelled job or a scheduler's limit"}.get(
        signal_name or "SIGINT", signal_name or "SIGINT"
    )


def skipped_row(entry: Entry) -> SweepTarget:
    return SweepTarget(target=entry.line, index=entry.index, status="skipped", reason=entry.skip, group=entry.group)


_NO_VERDICT = ("failed", "error", "timeout")


def passed(row: SweepTarget) -> bool:
    """PyTorch's pass: it compiled and reached a verdict, and its numerics are correct where judged."""
    if row.status in (*_NO_VERDICT, "skipped"):
        return False
    return row.bench is None or (row.bench.error is None and row.bench.numerics_ok is not False)


def geomean(values: list[float]) -> float | None:
    kept = [v for v in values if v > 0]
    return round(math.exp(sum(math.log(v) for v in kept) / len(kept)), 3) if kept else None


def p90(values: list[float]) -> float | None:
    """The 90th percentile (nearest rank): of 10 values, the 9th smallest."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)], 3)


def dashboard(rows: list[SweepTarget]) -> Dashboard:
    """Pass rate, geometric-mean speedups, compile time and memory ratio over `rows`."""
    ran = [r for r in rows if r.status != "skipped"]
    ok = [r for r in ran if passed(r)]
    measured = [r.bench for r in ok if r.bench is not None and r.bench.speedup is not None]
    compiles = [b.compile_s for b in measured if b.compile_s is not None]
    return Dashboard(
        targets=len(ran),
        passed=len(ok),
        pass_rate=round(len(ok) / len(ran), 4) if ran else 0.0,
        benchmarked=len(measured),
        geomean_speedup=geomean([b.speedup for b in measured if b.speedup is not None]),
        geomean_best_speedup=geomean([b.best_speedup for b in measured if b.best_speedup is not None]),
        mean_compile_s=round(statistics.fmean(compiles), 3) if compiles else None,
        p90_compile_s=p90(compiles),
        geomean_memory_ratio=geomean([b.memory_ratio for b in measured if b.memory_ratio is not None]),
    )


def totals(rows: list[SweepTarget]) -> Totals:
    counts = Counter(r.status for r in rows)
    groups: dict[str, list[SweepTarget]] = defaultdict(list)
    for row in rows:
        if row.group is not None:
            groups[row.group].append(row)
    return Totals(
        targets=len(rows),
        statuses={s: counts[s] for s in STATUS_ORDER if counts[s]},
        break_sites=sum(len(r.break_sites) for r in rows),
        graph_breaks=sum(r.graph_break_count for r in rows),
        recompiles=sum(r.recompile_count for r in rows),
        duration_s=round(sum(r.duration_s for r in rows), 3),
        dashboard=dashboard(rows),
        groups={name: dashboard(members) for name, members in groups.items()},
    )


def _environment(reports: list[Report], notes: list[str]) -> Environment | None:
    envs = [r.environment for r in reports]
    if not envs:
        return None
    versions = sorted({(e.torch, e.device, e.backend) for e in envs})
    if len(versions) > 1:
        shown = "; ".join(f"torch {t} on {d} with {b}" for t, d, b in versions[:4])
        notes.append(f"the targets ran in different environments: {shown}")
    return envs[0]


def build_summary(
    manifest: Manifest,
    entries: list[Entry],
    finished: list[Finished],
    out_dir: Path,
    options: SweepOptions,
    *,
    shard_of: tuple[int, int] | None,
    jobs: int,
    started_at: str,
    wall_s: float,
    notes: list[str],
    stopped_by: str | None = None,
) -> SweepSummary:
    """The summary of a sweep run: rows in manifest order (skipped ones included)."""
    by_index: dict[int, SweepTarget] = {}
    reports = []
    for done in finished:
        row, report = target_row(done, out_dir, options.timeout_s)
        by_index[row.index] = row
        if report is not None:
            reports.append(report)
    for entry in entries:
        if entry.skip is not None:
            by_index[entry.index] = skipped_row(entry)
    rows = [by_index[i] for i in sorted(by_index)]
    notes = [*manifest.notes, *notes]
    if options.redact:  # the reports are redacted by their runs; the reasons come from the logs
        scrub = Redactor()
        for row in rows:
            row.reason = scrub(row.reason) if row.reason else None
    not_run = len([e for e in entries if e.index not in by_index])
    if stopped_by is not None:
        notes.append(f"stopped by {stop_name(stopped_by)}" + (f": {not_run} target(s) never started" if not_run else ""))
    elif not_run:
        notes.append(f"interrupted: {not_run} target(s) never started")
    if options.bench and any(e.kind == "run" for e in entries):
        notes.append("--bench on a script (a run line) compares its own steps: `run --compare eager,default`")
    return SweepSummary(
        manifest=manifest.name,
        manifest_digest=manifest.digest,
        manifest_size=len(manifest.entries),
        shards=[f"{shard_of[0]}/{shard_of[1]}"] if shard_of else [],
        options=options.argv(),
        jobs=jobs,
        started_at=started_at,
        wall_s=round(wall_s, 3),
        tool_version=__version__,
        environment=_environment(reports, notes),
        targets=rows,
        totals=totals(rows),
        notes=notes,
        stopped_by=stopped_by,
    )


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_summary(summary: SweepSummary, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        (out_dir / SUMMARY_JSON).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (out_dir / SUMMARY_MD).write_text(render_summary_markdown(summary), encoding="utf-8")
    except OSError as exc:
        raise CtcDoctorError(f"cannot write the sweep summary to {out_dir}: {exc.strerror}") from exc


def is_sweep(path: str | Path) -> bool:
    """Whether `path` is a sweep: a directory holding summary.json, or a JSON file of kind `sweep`."""
    p = Path(path)
    if p.is_dir():
        return (p / SUMMARY_JSON).is_file()
    if p.suffix != ".json" or not p.is_file():
        return False
    try:
        with p.open(encoding="utf-8") as fh:
            head = fh.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r'"kind"\s*:\s*"sweep"', head) is not None


def load_summary(path: str | Path) -> tuple[SweepSummary, Path]:
    """A sweep directory or its summary.json; returns the summary and its directory."""
    p = Path(path)
    file = p / SUMMARY_JSON if p.is_dir() else p
    data = read_json_object(file, "sweep summary")
    if data.get("kind") != "sweep":
        raise ReportError(f"{file} is not a ctc-doctor sweep summary")
    major = str(data.get("schema_version", "")).split(".")[0]
    if major != SWEEP_SCHEMA_VERSION.split(".")[0]:
        raise ReportError(
            f"{file} has sweep schema_version {data.get('schema_version')}; this ctc-doctor reads {SWEEP_SCHEMA_VERSION.split('.')[0]}.x"
        )
    try:
        return SweepSummary.model_validate(data), file.parent
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise ReportError(f"{file} is not a valid sweep summary: {where}: {first.get('msg')}") from exc


def merge_summaries(paths: list[str], out_dir: Path) -> SweepSummary:
    """One summary from the shards of one manifest; their reports and logs are copied into `out_dir`."""
    loaded = [load_summary(p) for p in paths]
    first = loaded[0][0]
    for summary, where in loaded[1:]:
        if summary.manifest_digest != first.manifest_digest:
            raise ReportError(
                f"{where} is a sweep of another manifest ({summary.manifest}, {summary.manifest_digest[:12]}) than "
                f"{loaded[0][1]} ({first.manifest}, {first.manifest_digest[:12]}): not shards of one sweep"
            )
    notes: list[str] = []
    rows: dict[int, SweepTarget] = {}
    shards: list[str] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for summary, where in loaded:
        shards.extend(summary.shards)
        notes.extend(n for n in summary.notes if n not in notes)
        if summary.options != first.options:
            notes.append(f"{where} ran with other options: {' '.join(summary.options)} (vs {' '.join(first.options)})")
        for row in summary.targets:
            if row.index in rows:
                notes.append(f"{row.target} is in more than one shard: the one from {where} kept")
            rows[row.index] = row.model_copy()
            for name in ("report", "log"):
                rel = getattr(row, name)
                if rel and (where / rel).resolve() != (out_dir / rel).resolve() and (where / rel).exists():
                    (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(where / rel, out_dir / rel)
    counts = {s.split("/")[1] for s in shards}
    if len(counts) == 1:
        n = int(next(iter(counts)))
        missing = [f"{i}/{n}" for i in range(1, n + 1) if f"{i}/{n}" not in shards]
        if missing:
            notes.append(f"shard(s) {', '.join(missing)} missing: their targets are not in this summary")
    elif len(counts) > 1:
        notes.append(f"shards of different splits merged ({', '.join(sorted(shards))})")
    missing_targets = first.manifest_size - len(rows)
    if missing_targets > 0:
        notes.append(f"{missing_targets} of the manifest's {first.manifest_size} target(s) are in no merged summary")
    envs = [s.environment for s, _ in loaded if s.environment is not None]
    if len({(e.torch, e.device, e.backend) for e in envs}) > 1:
        notes.append("the shards ran in different environments: " + "; ".join(sorted({f"torch {e.torch} on {e.device}" for e in envs})))
    ordered = [rows[i] for i in sorted(rows)]
    return SweepSummary(
        manifest=first.manifest,
        manifest_digest=first.manifest_digest,
        manifest_size=first.manifest_size,
        shards=sorted(shards, key=lambda s: tuple(int(x) for x in s.split("/"))[::-1]),
        options=first.options,
        jobs=max(s.jobs for s, _ in loaded),
        started_at=min(s.started_at for s, _ in loaded),
        wall_s=max(s.wall_s for s, _ in loaded),
        tool_version=__version__,
        environment=envs[0] if envs else None,
        targets=ordered,
        totals=totals(ordered),
        notes=notes,
    )


# --- views: fleet-wide groupings, Markdown and plain text ---------------------------------------------


def break_types(summary: SweepSummary) -> list[tuple[str, str | None, int, int, str]]:
    """(gb_type, gb id, sites, targets, an example target) across the fleet, most targets first."""
    sites: Counter[tuple[str, str | None]] = Counter()
    targets: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for row in summary.targets:
        for site in row.break_sites:
            key = (site.gb_type, site.gb_id)
            sites[key] += 1
            if row.target not in targets[key]:
                targets[key].append(row.target)
    ranked = sorted(sites, key=lambda k: (-len(targets[k]), -sites[k], k[0]))
    return [(k[0], k[1], sites[k], len(targets[k]), targets[k][0]) for k in ranked]


def cause_groups(summary: SweepSummary) -> list[tuple[str, int, int, str]]:
    """(cause, recompiles, targets, an example target) across the fleet: causes of one kind on the
    same source and dim group together (`size of input_ids dim 1` in every text model)."""
    recompiles: Counter[str] = Counter()
    targets: dict[str, list[str]] = defaultdict(list)
    for row in summary.targets:
        for cause in row.recompile_causes:
            key = f"{cause.kind} of {cause.source or '?'}" + (f" dim {cause.dim}" if cause.dim is not None else "")
            recompiles[key] += cause.recompiles
            if row.target not in targets[key]:
                targets[key].append(row.target)
    ranked = sorted(recompiles, key=lambda k: (-len(targets[k]), -recompiles[k], k))
    return [(k, recompiles[k], len(targets[k]), targets[k][0]) for k in ranked]


def _headline(summary: SweepSummary) -> tuple[str, str]:
    """What was swept; where and how long."""
    what = f"{summary.totals.targets} target(s)"
    if summary.shards:
        what += f" of the manifest's {summary.manifest_size}, shard(s) {', '.join(summary.shards)}"
    env = summary.environment
    benched = sorted({r.bench.backend for r in summary.targets if r.bench is not None and r.bench.backend})
    timed = f", benchmark {'/'.join(benched)}" if benched else ""
    where = f"torch {env.torch} on {env.device}, backend {env.backend}{timed} · " if env is not None else ""
    return what, f"{where}{summary.wall_s:.0f} s wall with {summary.jobs} job(s)"


def _top_cause(row: SweepTarget) -> str:
    if row.reason and row.status in ("error", "timeout", "failed", "skipped"):
        return row.reason
    if row.break_sites:
        site = row.break_sites[0]
        beside = f" (from {site.own_file}:{site.own_line})" if site.own_file else ""
        return f"{site.gb_id or site.gb_type} at {site.file}:{site.line}{beside}"
    if row.recompile_causes:
        return row.recompile_causes[0].summary
    return ""


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def short_name(target: str) -> str:
    """A target as a table shows it: a build TARGET without its module path (`zoo:build_x --train` ->
    `build_x --train`), a run line from its script on."""
    head, _, rest = target.partition(" ")
    if head == "run":
        script = target.partition(" -- ")[2]
        return f"run {script}" if script else target
    name = re.split(r"[:/]", head)[-1] or head
    return f"{name} {rest}".strip()


def _times(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "—"


def _seconds(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "—"


def dashboard_cells(board: Dashboard) -> list[str]:
    rate = f"{board.pass_rate:.0%} ({board.passed}/{board.targets})"
    compile_s = f"{_seconds(board.mean_compile_s)} / {_seconds(board.p90_compile_s)}"
    return [rate, _times(board.geomean_speedup), _times(board.geomean_best_speedup), compile_s, _times(board.geomean_memory_ratio)]


def ranked_rows(summary: SweepSummary) -> list[SweepTarget]:
    """Rows by what needs a look first: no verdict, then wrong numerics, then the slowest speedup;
    targets without a benchmark after, in manifest order."""

    def key(row: SweepTarget) -> tuple[int, float, int]:
        bench = row.bench
        if row.status in _NO_VERDICT:
            return (0, 0.0, row.index)
        if bench is not None and (bench.numerics_ok is False or bench.error is not None):
            return (1, 0.0, row.index)
        if bench is not None and bench.speedup is not None:
            return (2, bench.speedup, row.index)
        return (3 if row.status != "skipped" else 4, 0.0, row.index)

    return sorted(summary.targets, key=key)


def bench_numerics_cell(bench: TargetBench | None) -> str:
    if bench is None or bench.numerics_ok is None:
        return "—" if bench is None or bench.error is None else "error"
    return "ok" if bench.numerics_ok else "FAIL"


def render_summary_markdown(summary: SweepSummary) -> str:
    """`summary.md`: for an issue, a dashboard or a CI step summary (`$GITHUB_STEP_SUMMARY`)."""
    lines = [f"# ctc-doctor sweep: {summary.manifest}", "", textwrap.fill(" · ".join(_headline(summary)), 80), ""]
    board = summary.totals.dashboard
    benched = any(r.bench is not None for r in summary.targets)
    if board is not None:
        lines += ["## Dashboard", ""]
        lines += ["| | pass rate | speedup | best arm | compile s | memory |", "|---|---:|---:|---:|---:|---:|"]
        lines.append("| fleet | " + " | ".join(dashboard_cells(board)) + " |")
        for name, group in summary.totals.groups.items():
            lines.append(f"| {_md_cell(name)} | " + " | ".join(dashboard_cells(group)) + " |")
        legend = (
            "Pass: compiled and reached a verdict, numerics correct where judged. Speedup: eager / compiled "
            "median latency, geometric mean over the benchmarked targets (best arm: each target's best). "
            "Compile: cold seconds, mean / p90. Memory: eager peak / compiled peak, geometric mean."
            if benched
            else "Pass: compiled and reached a verdict (no benchmark: run the sweep with `--bench` or `--full`)."
        )
        lines += ["", textwrap.fill(legend, 80), ""]
    lines += ["| status | targets |", "|---|---:|"]
    lines += [f"| {status} | {count} |" for status, count in summary.totals.statuses.items()]
    lines += [
        "",
        f"Break sites: {summary.totals.break_sites} ({summary.totals.graph_breaks} graph breaks); recompiles: {summary.totals.recompiles}.",
        "",
    ]
    breaks = break_types(summary)
    if breaks:
        lines += ["## Graph breaks across the fleet", "", "| break | id | sites | targets | e.g. |", "|---|---|---:|---:|---|"]
        lines += [f"| {_md_cell(t)} | {i or ''} | {s} | {n} | `{_md_cell(e)}` |" for t, i, s, n, e in breaks]
        lines.append("")
    causes = cause_groups(summary)
    if causes:
        lines += ["## Recompile causes across the fleet", "", "| cause | recompiles | targets | e.g. |", "|---|---:|---:|---|"]
        lines += [f"| {_md_cell(c)} | {r} | {n} | `{_md_cell(e)}` |" for c, r, n, e in causes]
        lines.append("")
    lines += ["## Targets", ""]
    if benched:
        lines += [
            "Needing a look first: no verdict, wrong numerics, then the slowest.",
            "",
            "| target | status | speedup | best | compile s | memory | numerics | breaks | recompiles | first cause |",
            "|---|---|---:|---|---:|---:|---|---:|---:|---|",
        ]
        for row in ranked_rows(summary):
            b = row.bench
            best = f"{b.best_arm} {_times(b.best_speedup)}" if b is not None and b.best_arm else "—"
            lines.append(
                f"| `{_md_cell(short_name(row.target))}` | {row.status} | {_times(b.speedup if b else None)} | {_md_cell(best)} | "
                f"{_seconds(b.compile_s if b else None)} | {_times(b.memory_ratio if b else None)} | {bench_numerics_cell(b)} | "
                f"{len(row.break_sites)} | {row.recompile_count} | {_md_cell(_top_cause(row))} |"
            )
    else:
        lines += [
            "| target | status | graphs | break sites | recompiles | time (s) | first cause |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for row in summary.targets:
            lines.append(
                f"| `{_md_cell(row.target)}` | {row.status} | {row.graph_count} | {len(row.break_sites)} | "
                f"{row.recompile_count} | {row.duration_s:.1f} | {_md_cell(_top_cause(row))} |"
            )
    if summary.notes:
        lines += ["", "## Notes", ""] + [f"- {_md_cell(n)}" for n in summary.notes]
    return "\n".join(lines) + "\n"


def clip(text: str, width: int) -> str:
    """`text` cut to `width` columns, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _text_dashboard(summary: SweepSummary, width: int, top: int) -> list[str]:
    """The dashboard's four numbers and the slowest targets, when the sweep benchmarked."""
    board = summary.totals.dashboard
    if board is None or not any(r.bench is not None for r in summary.targets):
        return []
    rate, speedup, best, compile_s, memory = dashboard_cells(board)
    lines = [
        clip(f"dashboard: pass {rate} · speedup {speedup} geomean (best arm {best})", width),
        clip(f"           compile {compile_s} s mean / p90 · memory ratio {memory}", width),
    ]
    for name, group in summary.totals.groups.items():
        g_rate, g_speedup, _, g_compile, _ = dashboard_cells(group)
        lines.append(clip(f"  [{name}] pass {g_rate} · speedup {g_speedup} · compile {g_compile} s", width))
    slow = [r for r in ranked_rows(summary) if r.bench is not None and r.bench.speedup is not None and r.status not in _NO_VERDICT]
    if slow:
        lines.append("slowest (speedup, compile s, numerics):")
        for row in slow[:top]:
            b = row.bench
            assert b is not None
            cells = f"{_times(b.speedup):>6} {_seconds(b.compile_s):>6}  {bench_numerics_cell(b):<4}"
            lines.append(clip(f"  {cells} {short_name(row.target)}", width))
    return lines


def render_text(summary: SweepSummary, width: int = 80, top: int = 5) -> str:
    """The end-of-sweep summary for a terminal or CI log: status counts, the fleet's top break types
    and recompile causes, and every target that did not run to a verdict."""
    width = max(60, width)
    lines = [clip(text, width) for text in _headline(summary)]
    counts = ", ".join(f"{count} {status}" for status, count in summary.totals.statuses.items())
    lines += textwrap.wrap(counts, width, initial_indent="  ", subsequent_indent="  ")
    lines += _text_dashboard(summary, width, top)
    breaks = break_types(summary)
    if breaks:
        lines.append("top graph breaks (targets, sites):")
        lines += [clip(f"  {n:>3} {s:>4}  {i + ' ' if i else ''}{t}", width) for t, i, s, n, _ in breaks[:top]]
    causes = cause_groups(summary)
    if causes:
        lines.append("top recompile causes (targets, recompiles):")
        lines += [clip(f"  {n:>3} {r:>4}  {c}", width) for c, r, n, _ in causes[:top]]
    troubled = [r for r in summary.targets if r.status in ("error", "timeout", "failed")]
    if troubled:
        lines.append("did not finish:")
        for row in troubled:
            lines.append(clip(f"  {row.status:<8} {row.target}", width))
            if row.reason:
                lines.append(clip(f"           {row.reason}", width))
    lines += [clip(f"note: {n}", width) for n in summary.notes]
    return "\n".join(lines) + "\n"


def run_sweep(
    manifest: Manifest,
    out_dir: Path,
    options: SweepOptions,
    *,
    jobs: int,
    shard_of: tuple[int, int] | None = None,
    on_start: Callable[[Entry], None] = lambda entry: None,
    on_done: Callable[[Finished], None] = lambda finished: None,
) -> tuple[SweepSummary, bool]:
    """Run the manifest's targets (or one shard of them) and write the summary; (summary, interrupted).
    Ctrl-C stops the running targets and still writes the summary of what finished."""
    entries = shard(manifest.entries, *shard_of) if shard_of else list(manifest.entries)
    started_at, t0 = now_iso(), time.perf_counter()
    notes: list[str] = []
    if shard_of and not entries:
        notes.append(f"shard {shard_of[0]}/{shard_of[1]} of {len(manifest.entries)} target(s) is empty")
    stopped_by: str | None = None
    try:
        finished = run_entries(entries, out_dir, options, jobs, on_start, on_done)
    except SweepInterrupted as stop:
        finished, stopped_by = stop.results, stop.signal_name
    summary = build_summary(
        manifest, entries, finished, out_dir, options,
        shard_of=shard_of, jobs=jobs, started_at=started_at, wall_s=time.perf_counter() - t0, notes=notes,
        stopped_by=stopped_by,
    )  # fmt: skip
    write_summary(summary, out_dir)
    return summary, stopped_by is not None
