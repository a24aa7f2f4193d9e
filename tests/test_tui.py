"""The Textual TUI.

Pilot tests (`app.run_test()`) on a real report of the zoo's showcase (analysis, bisection, verified
fixes and an eager-backend benchmark), on a clean fixture (optional sections not run), both saved from
real runs in `tests/data/reports` (`saved`), on a 5,000-site synthetic report, on bad report files and
on report strings that look like markup. Live mode runs real analyses in a child process. SVG snapshots
(pytest-textual-snapshot) of every section at 120x40, on the showcase report with times, versions and
paths normalised.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
from rich.text import Text

from ctc_doctor.errors import ExitCode
from ctc_doctor.fixtures.synthetic import large_report
from ctc_doctor.reports.io import dump_report
from ctc_doctor.reports.markdown import render_markdown
from ctc_doctor.reports.models import Report
from ctc_doctor.reports.redact import redact
from ctc_doctor.reports.verdicts import best_arm, judge_one, site_costs
from ctc_doctor.tui.app import NAMES, DoctorApp
from ctc_doctor.tui.live_run import LiveRun
from ctc_doctor.tui.screens.breaks_screen import BreaksScreen
from ctc_doctor.tui.screens.help_screen import HelpScreen
from ctc_doctor.tui.screens.message_screen import MessageScreen
from ctc_doctor.tui.widgets.detail_pane import DetailPane, plain_text
from ctc_doctor.tui.widgets.virtual_table import VirtualTable

from .conftest import REPO, TARGETS, saved

SIZE = (120, 40)
_TIME = re.compile(r"\d+\.\d+ ?(ms|s)\b")
_LATENCY = {"eager": 2.0, "compiled": 6.0, "compiled_fixed": 1.0, "regional": 1.6, "regional_fixed": 1.4}
_COLD = {"compiled": 8.0, "compiled_fixed": 2.0, "regional": 1.5, "regional_fixed": 1.2}


def _normalise(value: Any, key: str = "") -> Any:
    """Times to 1.0, measured-time text to `1.00 s`: what varies from run to run."""
    if isinstance(value, dict) and key in ("phases", "compile_phases"):  # (the cost section's phases are a list: dropped below)
        # compile seconds per phase; `other` is there only when the timers left a remainder
        return {k: 1.0 for k in value if k != "other"}
    if isinstance(value, dict):
        return {k: _normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, key) for v in value]
    if isinstance(value, float) and (key.endswith("_s") or key in ("seconds", "share", "peak_memory_mb", "max_abs_error", "max_rel_error")):
        return 0.0 if key.startswith("max_") else 1.0
    if isinstance(value, str):
        return _TIME.sub(r"1.00 \1", value)
    return value


def normalised(report: Report) -> Report:
    """The report with paths relative to the repo and nothing that varies between runs or machines."""
    data = _normalise(redact(report, project_root=str(REPO)).model_dump(mode="json"))
    data["environment"].update(python="3.11", platform="Linux-x86_64", transformers=None)
    data["run"].update(command="ctc-doctor demo", started_at="2026-01-01T00:00:00+00:00", tool_version="0.1.0")
    data["cost"] = None  # the doctor's own wall time and memory: this machine's
    if data.get("compile_profile"):  # costliest first: an order the measured seconds decide
        data["compile_profile"]["compiles"].sort(key=lambda row: row["key"])
        data["compile_profile"]["modules"].sort(key=lambda row: row["key"])
    bench = data.get("benchmark")
    if bench:
        bench["settings"]["torch_threads"] = 2
        bench["kept"] = None  # sizes of this machine's run
        if bench.get("machine"):  # how busy this machine was
            bench["machine"] = {"cores": 2, "threads": 2, "load_average": 0.5, "other_cpu": 0.0, "gpu_processes": [], "busy": False}
        bench["notes"] = [n for n in bench["notes"] if not n.startswith("busy machine")]
        for arm in bench["arms"]:
            arm["busy"] = None
            latency, cold = _LATENCY.get(arm["name"], 1.5), _COLD.get(arm["name"], 4.0)  # a fixed[S1] arm: 1.5, 4.0
            if arm["latency_ms"]:
                arm["latency_ms"].update(median=latency, iqr=0.1, n=5, unstable=None)
                arm["speedup_vs_eager"] = round(_LATENCY["eager"] / latency, 2)
                arm["steps_per_s"] = round(2000 / latency, 1)  # 2 calls a pass
                arm["break_even_calls"] = None
            if arm["compile_time_s"] is not None:
                arm["compile_time_s"] = cold
                arm["warm_compile_time_s"] = cold / 2
    for s in data["suggestions"]:
        if s["rule"] == "regional-compile" and s["verified"]:
            s["verified"]["effective"] = True  # decided by measured compile times
    report = Report.model_validate(data)
    # verdicts and the best arm again, from the fixed numbers
    for s in report.suggestions:
        judged = judge_one(report, s)
        if judged is not None:
            s.deltas, s.verdict, s.verdict_reason = judged
    site_costs(report)
    if report.benchmark is not None:
        b = report.benchmark
        b.best_arm, b.best_arm_reason, b.within_noise = best_arm(b, b.objective)
    return report


@pytest.fixture(scope="module")
def showcase() -> Report:
    return normalised(saved("full_showcase"))


@pytest.mark.fast
def test_each_applied_fix_is_measured_alone_so_no_suggestion_shows_the_combinations_numbers(showcase):
    """The showcase applies several fixes: the benchmark adds one arm per fix alone (`fixed[S1]`...), and
    each suggestion's benchmark deltas come from its own arm, never the combined `compiled_fixed`."""
    applied = showcase.fix.applied
    assert len(applied) >= 2
    names = [a.name for a in showcase.benchmark.arms]
    assert [n for n in names if n.startswith("fixed[")] == [f"fixed[{i}]" for i in applied]
    by_id = {s.id: s for s in showcase.suggestions}
    for sid in applied:
        arm = next(a for a in showcase.benchmark.arms if a.name == f"fixed[{sid}]")
        assert arm.error is None and arm.description.endswith(f"{sid} alone applied")
        bench_deltas = [d for d in by_id[sid].deltas if d.source.startswith("benchmark")]
        assert bench_deltas and all(d.source == f"benchmark compiled -> fixed[{sid}] ({sid} alone)" for d in bench_deltas)


@pytest.mark.fast
def test_each_break_site_says_what_it_costs_measured_by_its_own_fixs_arm(showcase):
    """A break site's cost: the graphs it adds, and the latency the arm of the fix that removes it saved
    (compiled 6.0 ms -> fixed[S1] 1.5 ms once normalised), or why it was not measured."""
    measured = 0
    for site in showcase.graph_breaks:
        cost = site.cost
        assert cost is not None and cost.graphs_added >= 1, site.id
        fixer = next((s for s in showcase.suggestions if site.id in s.applies_to and any(d.metric == "latency_ms" for d in s.deltas)), None)
        if fixer is None:
            assert cost.latency_ms is None and cost.note.startswith("not measured"), site.id
            continue
        measured += 1
        assert cost.measured_by == f"{fixer.id}: benchmark compiled -> fixed[{fixer.id}] ({fixer.id} alone)"
        assert (cost.latency_ms, cost.share) == (4.5, 0.75)
    assert measured >= 1


def app_for(report: Report, tmp_path: Any = None, **kwargs: Any) -> DoctorApp:
    return DoctorApp(report, source_roots=(str(REPO),), export_dir=str(tmp_path) if tmp_path else None, **kwargs)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def detail(app: DoctorApp) -> str:
    return app.screen.query_one(DetailPane).plain


# --- browsing a real report ---------------------------------------------------------------------


@pytest.mark.fast
def test_number_keys_tab_and_clicks_switch_sections(showcase):
    async def go():
        app = app_for(showcase)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert app.current_mode == "overview"
            for i, name in enumerate(NAMES, 1):
                await pilot.press(str(i))
                await pilot.pause()
                assert app.current_mode == name
                assert type(app.screen).__name__.lower().startswith(name[:5])
            await pilot.press("tab")
            await pilot.pause()
            assert app.current_mode == "overview"  # wraps around
            await pilot.press("shift+tab")
            await pilot.pause()
            assert app.current_mode == NAMES[-1]
            await pilot.click("NavTab", offset=(2, 0))  # the first tab
            await pilot.pause()
            assert app.current_mode == "overview"

    run(go())


@pytest.mark.fast
def test_selecting_a_break_shows_its_location_hint_source_and_suggestions(showcase):
    site = next(s for s in showcase.graph_breaks if s.gb_type.startswith("Failed to trace builtin"))  # the print
    frame = site.own_frame or site.user_frame

    async def go():
        app = app_for(showcase, start_section="breaks")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, BreaksScreen)
            table = screen.query_one(VirtualTable)
            assert table.row_count == len(showcase.graph_breaks)
            row = [s.id for s in screen.shown].index(site.id)
            for _ in range(row):
                await pilot.press("down")
            await pilot.pause()
            text = detail(app)
            assert f"{frame.file}:{frame.line}" in text
            assert site.hints[0] in text
            assert frame.code and frame.code in text  # the source, read from the file
            assert "source not available" not in text
            for s in showcase.suggestions:
                if site.id in s.applies_to:
                    assert s.title in text
            for gb in site.registry_ids:
                assert f"gb/{gb.lower()}.html" in text  # the site pages are lower case

    run(go())


@pytest.mark.fast
def test_search_filter_and_sort_the_break_table(showcase):
    printing = next(s for s in showcase.graph_breaks if s.gb_type.startswith("Failed to trace builtin"))

    async def go():
        app = app_for(showcase, start_section="breaks")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            await pilot.press("slash", *"print")
            await pilot.pause()
            assert [s.id for s in screen.shown] == [printing.id]
            await pilot.press("escape")  # clears the search, back to the table
            await pilot.pause()
            assert len(screen.shown) == len(showcase.graph_breaks)
            await pilot.press("f")
            await pilot.pause()
            assert type(app.screen).__name__ == "FilterScreen"
            choices = app.screen.choices
            pick = next(i for i, (label, value) in enumerate(choices) if value == f"type:{printing.gb_type}")
            for _ in range(pick):
                await pilot.press("down")
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is screen and [s.id for s in screen.shown] == [printing.id]
            screen.apply_filter("")
            table = screen.query_one(VirtualTable)
            x = 1 + sum(w + 2 for w in table._layout(table.size.width)[:4])  # the occurrences column
            await pilot.click(VirtualTable, offset=(x + 1, 0))  # a click on its header sorts, most first
            await pilot.pause()
            counts = [s.occurrences for s in screen.shown]
            assert screen.sort_key == "n" and counts == sorted(counts, reverse=True)
            await pilot.click(VirtualTable, offset=(x + 1, 0))  # again: reversed
            await pilot.pause()
            assert screen.reverse and [s.occurrences for s in screen.shown] == sorted(counts)
            await pilot.press("s")  # cycles to the next sort key
            await pilot.pause()
            assert screen.sort_key == "location" and not screen.reverse

    run(go())


@pytest.mark.fast
def test_recompiles_modules_suggestions_benchmark_and_compiles_show_the_report(showcase):
    r = showcase
    first = r.recompiles[0]
    applied = next(s for s in r.suggestions if r.fix and s.id in r.fix.applied and s.diff)

    async def go():
        app = app_for(r)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await pilot.pause()
            tree = app.screen.query_one("Tree")
            labels = [n.label.plain for n in tree.root.children]
            # grouped by cause: one node per cause, its events below
            assert [label.split(":")[0] for label in labels] == [c.id for c in r.recompile_causes]
            assert sum(len(n.children) for n in tree.root.children) == len(r.recompiles)
            shown = tree.cursor_node.data  # the first event of the first cause is selected
            assert shown is not None and shown.id == r.recompile_causes[0].recompiles[0] and shown.id in detail(app)
            assert "failed guard" in detail(app) and (shown.failed_guards[0].source or "?") in detail(app)
            assert first.function in detail(app)
            await pilot.press("up")  # the cause itself
            await pilot.pause()
            assert r.recompile_causes[0].summary in detail(app) and "recompiles: R1" in detail(app)

            await pilot.press("4")
            await pilot.pause()
            screen = app.screen
            assert r.bisect is not None and r.bisect.smallest_failing
            node_labels = []
            stack = [screen.query_one("Tree").root]
            while stack:
                node = stack.pop()
                node_labels.append(node.label.plain)
                stack.extend(node.children)
            assert sum("← smallest" in label for label in node_labels) == len(r.bisect.smallest_failing)
            screen.show_module(r.bisect.smallest_failing[0])
            row = next(t for t in r.bisect.trials if t.module_path == r.bisect.smallest_failing[0])
            assert row.status in detail(app) and (row.gb_type or "") in detail(app)
            path = screen.query_one("Tree").cursor_node.data
            assert path in r.bisect.smallest_failing  # the tree opens on the first smallest failing module
            await pilot.press("b")  # its break sites, in the break table
            await pilot.pause()
            assert app.current_mode == "breaks" and app.screen.filter_value == f"module:{path}"
            assert app.screen.shown and all(path in s.module_paths for s in app.screen.shown)

            await pilot.press("5")
            await pilot.pause()
            screen = app.screen
            screen.query_one(VirtualTable).move_cursor([s.id for s in screen.shown].index(applied.id))
            await pilot.pause()
            text = detail(app)
            assert "applied" in text and applied.rationale in text
            assert applied.diff is not None and applied.diff.splitlines()[0] in text

            await pilot.press("6")
            await pilot.pause()
            text = plain_text(app.screen.query_one("#benchmark-body").content)
            assert r.benchmark is not None and all(a.name in text for a in r.benchmark.arms)
            assert "█" in text and f"{r.benchmark.best_arm} ★" in text

            await pilot.press("7")
            await pilot.pause()
            assert len(app.screen.shown) == len({m.compile_id for m in r.compile_metrics} | {g.compile_id for g in r.guards})
            assert "compile id 0/0" in detail(app)

    run(go())


@pytest.mark.fast
def test_at_80_by_24_every_tab_what_to_do_and_one_guard_count_show(showcase):
    r = showcase

    async def go():
        app = app_for(r)
        async with app.run_test(size=(80, 24)) as pilot:
            tabs = [str(t.render()) for t in app.screen.query("NavTab")]
            assert [t.split()[0] for t in tabs] == [str(i) for i in range(1, 8)] and sum(len(t) for t in tabs) <= 80
            await pilot.press("5")
            await pilot.pause()
            table = app.screen.query_one(VirtualTable)
            header, first = table.render_line(0).text, table.render_line(1).text
            assert "what to do" in header  # not pushed off screen by the measured column
            assert r.suggestions[0].title[:30] in first
            await pilot.press("2")
            await pilot.pause()
            site = r.graph_breaks[0]
            row = dict(zip([c.key for c in app.screen.query_one(VirtualTable).columns], app.screen.cells[site.id], strict=True))
            assert row["reason"].count(site.gb_type) == 1  # torch's reason names the type already
            await pilot.press("7")
            await pilot.pause()
            screen = app.screen
            metric = r.compile_metrics[0]
            table = screen.query_one(VirtualTable)
            cells = dict(zip([c.key for c in table.columns], table.rows[screen.shown.index(metric.compile_id)], strict=True))
            assert cells["guards"] == str(metric.guard_count)  # the count the detail shows, not the guard tree's lines

    run(go())


@pytest.mark.fast
def test_a_module_list_entry_is_named_with_its_list_in_the_tree():
    from ctc_doctor.tui.screens.modules_screen import tree_name

    assert tree_name("backbone.layers.0", "backbone.layers") == "layers.0"
    assert tree_name("backbone.layers.0", "backbone") == "layers.0"  # the bisection's tree skips the ModuleList
    assert tree_name("backbone.layers.0.attn", "backbone.layers.0") == "attn"
    assert tree_name("head", "") == "head" and tree_name("", None) == "(root)"


@pytest.mark.fast
def test_a_report_without_optional_sections_says_not_run():
    report = normalised(saved("analyzed-clean"))
    assert report.bisect is None and report.benchmark is None and report.fix is None

    async def go():
        app = app_for(report)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            overview = app.screen.query_one("#overview-body").content
            text = plain_text(overview)
            assert "not run" in text and "CLEAN" in text
            for key in "234567":
                await pilot.press(key)
                await pilot.pause()
            await pilot.press("2")
            assert "no graph breaks" in detail(app)
            await pilot.press("6")
            await pilot.pause()
            assert "not run" in plain_text(app.screen.query_one("#benchmark-body").content)
            await pilot.press("4")
            await pilot.pause()
            assert "bisection not run" in plain_text(app.screen.query_one("#modules-status").content)

    run(go())


@pytest.mark.fast
def test_export_help_and_quit(showcase, tmp_path):
    async def go():
        app = app_for(showcase, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("e")
            await pilot.pause()
            written = tmp_path / "ctc-doctor-report.md"
            assert written.read_text() == render_markdown(showcase)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("q")
            await pilot.pause()
        assert app.return_code == 0

    run(go())


# --- scale, bad input, untrusted text ----------------------------------------------------------


@pytest.mark.fast
def test_five_thousand_sites_open_search_filter_and_scroll():
    report = large_report(5000)

    async def go():
        app = app_for(report, start_section="breaks")
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            screen = app.screen
            table = screen.query_one(VirtualTable)
            assert table.row_count == 5000
            await pilot.press("end")
            await pilot.pause()
            assert table.cursor_row == 4999 and "B5000 " in detail(app)
            assert table.scroll_offset.y > 4900  # the last row is on screen
            await pilot.press("slash", *"b4999")
            await pilot.pause()
            assert [s.id for s in screen.shown] == ["B4999"]
            await pilot.press("escape")
            screen.apply_filter("module:encoder.layer.3")
            await pilot.pause()
            assert screen.shown and all(any(p.startswith("encoder.layer.3.") for p in s.module_paths) for s in screen.shown)
            assert "does not exist on this machine" in detail(app)  # the synthetic files are nowhere

    run(go())


@pytest.mark.fast
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"schema_version": "9.0"}), "schema_version 9.0"),
        (json.dumps({"schema_version": "1.2", "target": {}}), "not a valid report"),
    ],
)
def test_a_bad_report_file_shows_a_message_screen(tmp_path, content, expected):
    path = tmp_path / "bad.json"
    path.write_text(content)

    async def go():
        app = DoctorApp(report_path=str(path))
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, MessageScreen))
            assert isinstance(app.screen, MessageScreen)
            assert expected in app.screen.message
            await pilot.press("q")
        assert app.exit_code == 9

    run(go())


@pytest.mark.fast
def test_report_strings_are_shown_as_text_never_as_markup_or_actions(tmp_path):
    report = large_report(3)
    evil = "[@click=app.quit]boom[/] [bold red]x[/] $(rm -rf ~)"
    site = report.graph_breaks[0].model_copy(update={"reason": evil, "module_paths": ["[b]m[/b]"], "hints": [evil]})
    report = report.model_copy(update={"graph_breaks": [site, *report.graph_breaks[1:]]})
    path = tmp_path / "evil.json"
    path.write_text(dump_report(report))

    async def go():
        app = DoctorApp(report_path=str(path))
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: app.current_mode == "overview")  # loaded in a worker thread
            await pilot.press("2")
            await pilot.pause()
            assert evil in detail(app) and "[b]m[/b]" in detail(app)
            table = app.screen.query_one(VirtualTable)
            assert "[b]m[/b]" in table.rows[0][2]
            await pilot.click(VirtualTable, offset=(100, 1))
            await pilot.pause()
            assert app.is_running and app.current_mode == "breaks"

    run(go())


# --- live mode ---------------------------------------------------------------------------------


async def _until(pilot: Any, condition: Any, limit_s: float = 30, step_s: float = 0.05) -> None:
    """Let the app run until `condition()` holds (work in threads or child processes), at most `limit_s`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s and not condition():
        await pilot.pause(step_s)


async def _wait_live(app: DoctorApp, pilot: Any, until: Any, limit_s: float = 180) -> None:
    await _until(pilot, until, limit_s, 0.25)


def _live(*args: str) -> LiveRun:
    return LiveRun(list(args), cwd=str(REPO), env={"PYTHONPATH": str(TARGETS)})


def test_live_run_streams_phases_then_opens_the_report(tmp_path):
    live = _live("demo", "--fixture", "print_in_forward", "--no-bench", "--json", str(tmp_path / "r.json"))

    async def go():
        app = DoctorApp(live=live)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await _wait_live(app, pilot, lambda: app.current_mode == "overview")
            assert app.current_mode == "overview", getattr(app.screen, "message", "")
            assert "compile" in screen.finished and "eager" in screen.finished  # phases streamed from the child
            assert app.index is not None and app.index.report.summary.unique_break_sites == 1
            assert any("head input" in line or "print" in line for line in screen.output_tail)  # the model's print
        assert live.returncode == 0 and (tmp_path / "r.json").exists()

    run(go())


def test_live_run_of_a_script_streams_its_output_and_phases(tmp_path):
    script = REPO / "ctc_doctor" / "fixtures" / "scripts" / "train.py"
    live = _live(
        "run", "--no-bisect", "--no-fix", "--json", str(tmp_path / "r.json"), "--", str(script), "--backend", "eager", "--steps", "2"
    )

    async def go():
        app = DoctorApp(live=live)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await _wait_live(app, pilot, lambda: app.current_mode == "overview")
            assert app.current_mode == "overview", getattr(app.screen, "message", "")
            assert "script" in screen.finished  # the script's stage, then the report's
            assert any(line.startswith("step 1 batch") for line in screen.output_tail)  # the script's own output
            assert app.index is not None and app.index.report.target.kind == "script"
        assert live.returncode == 0 and (tmp_path / "r.json").exists()

    run(go())


def test_live_run_escape_cancels_the_analysis():
    live = _live("user_targets:hangs_while_tracing", "--no-explain")

    async def go():
        app = DoctorApp(live=live)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await _wait_live(app, pilot, lambda: screen.current == "compile", 120)
            assert screen.current == "compile"
            await pilot.press("escape")
            await _wait_live(app, pilot, lambda: isinstance(app.screen, MessageScreen), 30)
            assert isinstance(app.screen, MessageScreen) and "cancelled" in app.screen.title_text
        # SIGTERM stops the analysis where it is: it writes what it found and exits INTERRUPTED (or the
        # grace's SIGKILL ends it first)
        assert live.cancelled and live.returncode is not None and (live.returncode < 0 or live.returncode == ExitCode.INTERRUPTED)

    run(go())


def test_live_run_that_fails_shows_the_error():
    live = _live("user_targets:raises")

    async def go():
        app = DoctorApp(live=live)
        async with app.run_test(size=SIZE) as pilot:
            await _wait_live(app, pilot, lambda: isinstance(app.screen, MessageScreen), 120)
            assert isinstance(app.screen, MessageScreen)
            assert app.screen.message.startswith("ctc-doctor: error:") and "exit code 5" in app.screen.title_text
        assert app.exit_code == 5

    run(go())


# --- snapshots -----------------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("section", NAMES)
def test_snapshot_of_each_section(snap_compare, showcase, section):
    assert snap_compare(app_for(showcase, start_section=section), terminal_size=SIZE, press=["_"])


@pytest.mark.fast
def test_snapshot_of_a_bad_report(snap_compare, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    app = DoctorApp(report_path=str(path))

    async def before(pilot: Any) -> None:
        await _until(pilot, lambda: isinstance(app.screen, MessageScreen))
        # the message names the temporary path: show a fixed one
        app.screen.query_one("#message-text").update(Text(app.screen.message.replace(str(path), "bad.json")))

    assert snap_compare(app, terminal_size=SIZE, run_before=before)
