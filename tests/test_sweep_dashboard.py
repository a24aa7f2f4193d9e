"""`ctc-doctor sweep --bench`: the fleet's dashboard (pass rate, speedup, compile time, memory), its
Markdown, `sweep diff` on performance with noise thresholds, and the sweep browser in the TUI.

One small fleet of zoo fixtures in two manifest groups (and a builder that raises) is swept once with
`--bench` in real child processes; the benchmark's compiled arms use aot_eager to stay fast on CPU. The
tests of what the sweep writes read that live sweep; the tests that only read, render, merge, diff or
browse a summary read the same fleet's sweep saved from a real run (`tests/data/sweep/dashboard`, written
by `tests/data/reports/make_reports.py`), and one test checks the saved sweep still matches the live one.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
from pathlib import Path

import pytest

from ctc_doctor.errors import ExitCode
from ctc_doctor.sweep.manifest import read_manifest
from ctc_doctor.sweep.regressions import diff_sweeps
from ctc_doctor.sweep.summary import load_summary, render_summary_markdown, render_text, totals
from ctc_doctor.sweep.summary_models import SweepSummary

from .conftest import SAVED_SWEEP, run_cli

FLEET = """\
[tiny]
ctc_doctor.fixtures.zoo:clean --bench-backend aot_eager
ctc_doctor.fixtures.zoo:print_in_forward --bench-backend aot_eager   # a break
[shapes]
ctc_doctor.fixtures.zoo:shape_change_dim0 --bench-backend aot_eager  # a recompile
tests/targets/user_targets.py:raises
"""
CLEAN = "ctc_doctor.fixtures.zoo:clean --bench-backend aot_eager"
BREAKS = "ctc_doctor.fixtures.zoo:print_in_forward --bench-backend aot_eager"
SHAPES = "ctc_doctor.fixtures.zoo:shape_change_dim0 --bench-backend aot_eager"
RAISES = "tests/targets/user_targets.py:raises"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dashboard")
    manifest = root / "models.txt"
    manifest.write_text(FLEET)
    out = root / "sweep"
    done = run_cli("sweep", str(manifest), "--bench", "--out", str(out), "--jobs", "2", "--timeout", "120", timeout=400)
    assert done.returncode == 0, done.stderr
    (root / "stdout.txt").write_text(done.stdout)
    return out


@pytest.fixture
def saved_sweep(tmp_path: Path) -> Path:
    """The same fleet swept with `--bench` by a real run, saved (`tests/data/sweep/dashboard`), copied into
    `tmp_path`: a test may write beside it."""
    out = tmp_path / "sweep"
    shutil.copytree(SAVED_SWEEP, out)
    return out


def test_every_benchmarked_row_has_the_dashboard_fields(swept: Path) -> None:
    summary, _ = load_summary(swept)
    # what the sweep printed and wrote: the dashboard, and the Markdown the fast tests render again
    assert "dashboard: pass 75% (3/4)" in (swept.parent / "stdout.txt").read_text()
    assert (swept / "summary.md").read_text() == render_summary_markdown(summary)
    rows = {r.target: r for r in summary.targets}
    assert summary.options[-1] == "--bench"
    for name in (CLEAN, BREAKS, SHAPES):
        bench = rows[name].bench
        assert bench is not None, name
        assert bench.eager_ms and bench.compiled_ms and bench.speedup
        assert bench.speedup == pytest.approx(bench.eager_ms / bench.compiled_ms, rel=0.01)
        assert bench.spread is not None and bench.spread >= 0
        assert bench.compile_s is not None and bench.compile_s > 0 and bench.warm_compile_s is None  # aot_eager: no cache
        assert bench.peak_memory_eager_mb and bench.peak_memory_compiled_mb and bench.memory_ratio
        assert bench.numerics_ok is True and bench.error is None
        assert bench.best_arm in ("eager", "compiled") and bench.best_speedup
        assert bench.backend == "aot_eager" and bench.device == "cpu"
        report = json.loads((swept / rows[name].report).read_text())  # type: ignore[operator]
        # the light benchmark: eager and compiled arms, no bisection, no fix checks, adaptive timing
        assert [a["name"] for a in report["benchmark"]["arms"]] == ["eager", "compiled"]
        assert report["bisect"] is None and str(report["benchmark"]["settings"]["iters"]).startswith("auto")
        assert all(5 <= a["latency_ms"]["n"] <= 100 for a in report["benchmark"]["arms"])
    assert rows[RAISES].status == "error" and rows[RAISES].bench is None
    assert [rows[n].group for n in (CLEAN, BREAKS, SHAPES, RAISES)] == ["tiny", "tiny", "shapes", "shapes"]


@pytest.mark.fast
def test_the_fleet_totals_are_computed_from_the_rows(saved_sweep: Path) -> None:
    swept = saved_sweep
    summary, _ = load_summary(swept)
    board = summary.totals.dashboard
    assert board is not None
    benched = [r.bench for r in summary.targets if r.bench is not None]
    speedups = [b.speedup for b in benched if b.speedup]
    by_hand = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    assert board.geomean_speedup == pytest.approx(by_hand, abs=1e-3)
    assert (board.targets, board.passed, board.benchmarked) == (4, 3, 3) and board.pass_rate == 0.75
    compiles = sorted(b.compile_s for b in benched if b.compile_s is not None)
    assert board.mean_compile_s == pytest.approx(sum(compiles) / 3, abs=1e-3)
    assert board.p90_compile_s == pytest.approx(compiles[-1], abs=1e-3)  # nearest rank of 3: the largest
    ratios = [b.memory_ratio for b in benched if b.memory_ratio]
    assert board.geomean_memory_ratio == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3), abs=1e-3)
    tiny, shapes = summary.totals.groups["tiny"], summary.totals.groups["shapes"]
    assert (tiny.targets, tiny.passed, shapes.targets, shapes.passed) == (2, 2, 2, 1)
    assert totals(summary.targets) == summary.totals  # read back, recomputed: the same
    # a merge (of shards; here of the one) keeps the rows' numbers and recomputes the same dashboard
    merged = run_cli("sweep", "merge", str(swept), "--out", str(swept.parent / "merged"), "-q")
    assert merged.returncode == 0, merged.stderr
    again, _ = load_summary(swept.parent / "merged")
    assert [r.bench for r in again.targets] == [r.bench for r in summary.targets]
    assert [r.group for r in again.targets] == [r.group for r in summary.targets]
    assert again.totals.dashboard == board and again.totals.groups == summary.totals.groups


@pytest.mark.fast
def test_summary_md_opens_with_the_dashboard_and_ranks_what_needs_a_look(saved_sweep: Path) -> None:
    swept = saved_sweep
    md = render_summary_markdown(load_summary(swept)[0])  # what the sweep writes as summary.md
    assert md.index("## Dashboard") < md.index("| status | targets |") < md.index("## Targets")
    assert "| fleet | 75% (3/4) |" in md and "| tiny | 100% (2/2) |" in md and "| shapes | 50% (1/2) |" in md
    assert "benchmark aot_eager" in md[: md.index("## Dashboard")]
    # the targets table: no verdict first, then by speedup, slowest first
    table = md[md.index("## Targets") :].splitlines()
    rows = [line for line in table if line.startswith("| `")]
    assert rows[0].startswith("| `raises` | error |")
    speedups = [float(line.split("|")[3].strip().rstrip("x")) for line in rows[1:]]
    assert speedups == sorted(speedups)
    prose = [line for line in md.splitlines() if not line.startswith(("|", "# "))]  # the title holds the path
    assert max(len(line) for line in prose) <= 80, [line for line in prose if len(line) > 80]
    text = render_text(load_summary(swept)[0], width=80)
    assert "dashboard: pass 75% (3/4)" in text and "slowest (speedup, compile s, numerics):" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    # `ctc-doctor show DIR` and `ctc-doctor DIR` print the same summary
    for args in (("show", str(swept)), (str(swept),)):
        shown = run_cli(*args)
        assert shown.returncode == 0 and "dashboard: pass 75% (3/4)" in shown.stdout, shown.stderr


def _changed(summary: SweepSummary, target: str, **fields: float) -> SweepSummary:
    data = summary.model_copy(deep=True)
    row = next(r for r in data.targets if r.target == target)
    assert row.bench is not None
    for name, value in fields.items():
        setattr(row.bench, name, value)
    data.totals = totals(data.targets)
    return data


@pytest.mark.fast
def test_sweep_diff_reports_a_halved_speedup_and_a_doubled_compile_but_not_noise(saved_sweep: Path, tmp_path: Path) -> None:
    before, _ = load_summary(saved_sweep)
    # the measured spreads of tiny models on a loaded machine can pass 50 %: pin them, so the test is
    # about the thresholds, not about this run's noise
    for target in (CLEAN, BREAKS, SHAPES):
        before = _changed(before, target, spread=0.05)
    rows = {r.target: r.bench for r in before.targets if r.bench is not None}
    after = _changed(before, CLEAN, speedup=rows[CLEAN].speedup / 2, spread=0.05)  # type: ignore[union-attr,operator]
    after = _changed(after, BREAKS, compile_s=rows[BREAKS].compile_s * 2 + 1.0)  # type: ignore[union-attr,operator]
    # inside the measured spread: a 3 % slower speedup when the spread is 10 %
    after = _changed(after, SHAPES, speedup=rows[SHAPES].speedup * 0.97, spread=0.10)  # type: ignore[union-attr,operator]
    result = diff_sweeps(before, after)
    said = "\n".join(result.regressions)
    assert f"{CLEAN}: speedup" in said and "(-50%" in said
    assert f"{BREAKS}: compile" in said
    assert SHAPES not in said
    assert any(r.startswith("fleet: geomean speedup") for r in result.regressions)
    # through the CLI: the thresholds are stated, --fail-on-regression fails
    for name, summary in (("before", before), ("after", after)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(summary.model_dump_json())
    done = run_cli("sweep", "diff", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-on-regression")
    assert done.returncode == ExitCode.CHECK_FAILED, done.stdout
    assert "thresholds: speedup -5% or the measured spread if wider" in done.stdout
    assert "slower speedup" in done.stdout and "REGRESSIONS (3):" in done.stdout
    # the same change inside looser thresholds is no regression
    loose = run_cli(
        "sweep", "diff", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-on-regression",
        "--speedup-threshold", "0.6", "--compile-threshold", "50",
    )  # fmt: skip
    assert loose.returncode == 0 and "no regressions" in loose.stdout, loose.stdout
    # pass -> fail: the numerics went wrong
    wrong = _changed(before, SHAPES)
    next(r for r in wrong.targets if r.target == SHAPES).bench.numerics_ok = False  # type: ignore[union-attr]
    assert any("pass -> fail" in r for r in diff_sweeps(before, wrong).regressions)


@pytest.mark.fast
def test_manifest_groups() -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("a:build\n[vision]  # image models\nb:build\n\n[text models]\nc:build\n")
    entries = read_manifest(fh.name).entries
    assert [(e.line, e.group) for e in entries] == [("a:build", None), ("b:build", "vision"), ("c:build", "text models")]
    Path(fh.name).unlink()


@pytest.mark.fast
def test_the_tui_sweep_view_sorts_plots_and_opens_a_report(saved_sweep: Path) -> None:
    from textual.widgets import DataTable, Static
    from textual_plotext import PlotextPlot

    from ctc_doctor.tui.sweep_app import SweepApp

    summary, directory = load_summary(saved_sweep)

    async def drive() -> tuple[SweepApp, list[str], str]:
        app = SweepApp(summary, directory)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "pass 75% (3/4)" in str(app.query_one("#dashboard", Static).render())
            assert app.query_one(DataTable).row_count == 4
            assert app.rows[0].target == RAISES  # no verdict first
            await pilot.press("s")  # by speedup, slowest first
            speedups = [r.bench.speedup for r in app.rows if r.bench is not None]
            assert speedups == sorted(speedups) and "speedup" in str(app.query_one("#status", Static).render())
            await pilot.press("r")
            reversed_order = [r.target for r in app.rows]
            await pilot.press("p")
            plot = app.query_one(PlotextPlot)
            assert plot.display and not app.query_one(DataTable).display
            drawn = plot.plt.build()
            assert "speedup vs cold compile time" in drawn
            await pilot.press("p")
            await pilot.press("enter")
            await pilot.pause()
        return app, reversed_order, str(app.return_value)

    app, reversed_order, chosen = asyncio.run(drive())
    assert reversed_order[-1] == RAISES  # fastest first; a target without a speedup stays last
    assert chosen == str(directory / app.rows[0].report)  # type: ignore[operator]
    assert Path(chosen).exists()


def test_the_saved_sweep_still_matches_a_live_one(swept: Path) -> None:
    """The fast tests read `tests/data/sweep/dashboard`: what a sweep of the same fleet finds today must be
    what it found when it was saved (statuses, groups, break sites, recompile causes), or the saved sweep
    is stale."""
    live, _ = load_summary(swept)
    kept, _ = load_summary(SAVED_SWEEP)

    def findings(summary: SweepSummary) -> list[tuple[object, ...]]:
        return [
            (
                r.target, r.group, r.status, r.graph_count, r.recompile_count, r.bench is not None,
                [(s.gb_type, s.file, s.line, s.module_paths) for s in r.break_sites],
                [(c.kind, c.source, c.dim) for c in r.recompile_causes],
            )
            for r in summary.targets
        ]  # fmt: skip

    assert findings(kept) == findings(live), "the saved sweep is stale: `.venv/bin/python tests/data/reports/make_reports.py sweep`"
    assert kept.schema_version == live.schema_version and kept.options == live.options
