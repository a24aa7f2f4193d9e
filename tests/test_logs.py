"""Offline ingestion (`ctc-doctor logs`): committed real captures, corrupted variants, and fresh
captures compared with the live analysis of the same workload."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from ctc_doctor.analyzer.doors.offline import ingest
from ctc_doctor.analyzer.readers.logfiles import MAX_PAYLOAD_CHARS
from ctc_doctor.fixtures.registry import all_fixtures
from ctc_doctor.reports import Report, load_report
from ctc_doctor.reports.diff import diff_reports
from ctc_doctor.reports.markdown import render_markdown
from ctc_doctor.reports.models import SCHEMA_VERSION

from .conftest import REPO, analyzed

LOGS = Path(__file__).resolve().parent / "data" / "logs"
SHOWCASE_TRACE = LOGS / "showcase_trace"
TWO_RANKS = LOGS / "two_rank_trace"
CORRUPT = LOGS / "corrupt"


@cache
def ingested(*paths: Path) -> Report:
    return ingest([str(p) for p in paths])


def sites(report: Report) -> list[tuple[str, int, str, int]]:
    """(file name, line, gb_type, occurrences) per break site: comparable across machines."""
    return sorted((os.path.basename(s.user_frame.file), s.user_frame.line, s.gb_type, s.occurrences) for s in report.graph_breaks)


def recompile_reasons(report: Report) -> list[list[str]]:
    """Failed-guard texts per recompile; object ids (`___check_type_id(x, 9468...)`) differ per process."""
    return [[re.sub(r"\b\d{7,}\b", "<id>", g.reason) for g in rc.failed_guards] for rc in report.recompiles]


# ---------------------------------------------------------------------------------------------
# committed captures
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_showcase_trace_directory_gives_the_ranked_deduplicated_sites_of_the_fixture():
    report = ingested(SHOWCASE_TRACE)
    assert report.source is not None and report.source.kind == "torch_trace"
    assert [os.path.basename(f) for f in report.source.files][0].endswith(".log.gz")  # gzip read transparently
    expected = {b.gb_type: b.marker for b in all_fixtures()["showcase"].expected.breaks}
    assert {s.gb_type for s in report.graph_breaks} == set(expected)
    for site in report.graph_breaks:
        assert f"BREAK:{expected[site.gb_type]}" in (site.user_frame.code or "")  # source line from the payload
        assert site.registry_ids and site.hints and site.explanation
        assert site.module_paths == []  # the trace names no module paths: left empty, not guessed
    assert [s.occurrences for s in report.graph_breaks] == sorted((s.occurrences for s in report.graph_breaks), reverse=True)
    assert report.summary.recompile_count == len(report.recompiles) > 0
    assert {g.kind for rc in report.recompiles for g in rc.failed_guards} >= {"size"}
    assert report.compile_metrics and all(m.duration_s is not None for m in report.compile_metrics)
    assert len(report.guards) == len(report.compile_metrics) and all(g.count > 0 and g.tree is None for g in report.guards)
    assert report.environment.torch.startswith("2.13")
    stats = report.parse_stats
    assert stats is not None and stats.unreadable == 0 and stats.unknown == 0 and stats.used > 0 and stats.ignored > stats.used
    assert report.suggestions  # rules on gb_types and guards need no model


@pytest.mark.fast
def test_text_logs_with_and_without_glog_prefixes_agree_with_the_trace_of_the_same_workload():
    trace = ingested(SHOWCASE_TRACE)
    for name in ("showcase_torch_logs.log", "showcase_torch_logs_bare.log"):
        text = ingested(LOGS / name)
        assert text.source is not None and text.source.kind == "torch_logs"
        assert sites(text) == sites(trace), name  # suppressed duplicate stacks still count
        assert recompile_reasons(text) == recompile_reasons(trace), name
        assert text.parse_stats is not None and text.parse_stats.unreadable == 0
    prefixed = ingested(LOGS / "showcase_torch_logs.log")
    assert [s.compile_ids for s in prefixed.graph_breaks] == [s.compile_ids for s in trace.graph_breaks]
    assert prefixed.summary.graph_count == 0 and any("no compile metrics" in n for n in prefixed.notes)
    # what the text does not record is shown as unknown, not as 0 graphs in 0.00 s
    from ctc_doctor.reports.markdown import render_markdown

    line = render_markdown(prefixed).split("\n")
    summary = next(x for x in line if x.startswith("**"))
    assert "graph count unknown" in summary and "compile time unknown" in summary and "0.00 s" not in summary
    assert "compile time 7" not in summary and "graph count unknown" not in render_markdown(trace)


@pytest.mark.fast
def test_perf_hints_come_from_text_logs_alone_or_beside_a_trace():
    hints = ingested(LOGS / "print_in_forward_inductor_torch_logs.log").perf_hints
    assert [(h.compile_id, h.message) for h in hints] == [
        ("0/0", "Skip comprehensive padding on CPU"),
        ("2/0", "Skip comprehensive padding on CPU"),
    ]
    assert all(h.logger == "torch._inductor.compile_fx.__perf_hints" for h in hints)
    both = ingested(SHOWCASE_TRACE, LOGS / "print_in_forward_inductor_torch_logs.log")
    assert both.perf_hints == hints and sites(both) == sites(ingested(SHOWCASE_TRACE))  # the text adds hints only
    assert not any("no perf hints" in n for n in both.notes)


@pytest.mark.fast
def test_transformers_capture_has_the_sequence_length_recompile():
    report = ingested(LOGS / "transformers_gpt2_trace")
    assert report.summary.verdict == "recompiles" and not report.graph_breaks
    guards = [g for rc in report.recompiles for g in rc.failed_guards]
    assert any(g.kind == "size" and g.dim == 1 and "input_ids" in (g.source or "") for g in guards)


@pytest.mark.fast
def test_an_inductor_training_trace_says_where_compile_time_went_by_phase_compile_and_cause():
    """The train_step capture (inductor, forward and backward): each compile's nested timers split into
    phases that add up to its measured compile time, the backward graphs' compiles counted apart, the
    caches' misses counted, and the recompile cause priced by its own compiles."""
    report = ingested(LOGS / "train_step_inductor_trace")
    p = report.compile_profile
    assert p is not None and p.backend == "inductor"
    frames = sum(m.duration_s or 0.0 for m in report.compile_metrics)
    assert abs(p.total_s - (frames + p.backward_s)) < 1e-3 and p.backward_s > 0
    assert abs(sum(p.phases.values()) - p.total_s) <= 0.01 * p.total_s  # the phases add up to it
    assert {"dynamo", "aot_autograd", "inductor", "codegen"} <= set(p.phases)
    for m in report.compile_metrics:
        assert abs(sum(m.phases.values()) - ((m.duration_s or 0.0) + (m.backward_s or 0.0))) < 1e-3, m
    assert p.caches["fx_graph"][1] > 0 and p.caches["aot_autograd"][1] > 0  # a fresh run: all misses
    (cause,) = report.recompile_causes
    by_id = {m.compile_id: m for m in report.compile_metrics}
    ids = [rc.compile_id for rc in report.recompiles if rc.id in cause.recompiles]
    assert cause.compile_time_s == round(sum((by_id[i].duration_s or 0) + (by_id[i].backward_s or 0) for i in ids), 4)
    assert cause.recurrence == "bounded" and p.causes[0].key == cause.id
    assert p.first_compile_s + cause.compile_time_s == pytest.approx(p.total_s, abs=1e-3)
    assert [r.seconds for r in p.compiles] == sorted((r.seconds for r in p.compiles), reverse=True)
    text = render_markdown(report)
    assert "### Compile time:" in text and "| Inductor code generation |" in text and "lever: fewer recompiles: C1" in text


@pytest.mark.fast
def test_two_rank_capture_gives_per_rank_counts_and_names_the_diverging_rank():
    report = ingested(TWO_RANKS)
    assert report.source is not None and report.source.ranks == [0, 1]
    by_rank = {r.rank: r for r in report.ranks}
    assert by_rank[0].recompile_count == 0 and by_rank[1].recompile_count > 0  # rank 1 got an uneven last batch
    assert by_rank[1].compiles > by_rank[0].compiles
    assert by_rank[0].break_sites == by_rank[1].break_sites == ["B1"]
    kinds = {d.kind: d for d in report.divergence}
    assert set(kinds) == {"root_cause", "recompiles", "compiles"} and kinds["recompiles"].ranks == [1]
    assert report.divergence[0].kind == "root_cause" and report.divergence[0].ranks == [1]  # first, then the counts
    assert "rank 1 recompiled `forward`" in kinds["root_cause"].message and "expected 4, actual 2" in kinds["root_cause"].message
    assert kinds["recompiles"].items == [rc.id for rc in report.recompiles]
    assert all(rc.rank == 1 and rc.compile_id.startswith("rank1:") for rc in report.recompiles)
    assert report.graph_breaks[0].ranks == [0, 1]
    assert len({c for s in report.graph_breaks for c in s.compile_ids}) == report.summary.graph_break_count


@pytest.mark.fast
def test_interleaved_ranks_in_one_file_read_like_the_directory():
    merged = ingested(CORRUPT / "interleaved_ranks.log.gz")
    separate = ingested(TWO_RANKS)
    assert merged.ranks == [r.model_copy(update={"files": merged.ranks[i].files}) for i, r in enumerate(separate.ranks)]
    assert sites(merged) == sites(separate) and merged.divergence == separate.divergence


@pytest.mark.fast
@pytest.mark.parametrize(
    ("name", "problems", "unknown"),
    [
        ("truncated.log", {"file cut off mid-record": 1}, 0),
        ("garbage.log", {"bad JSON": 1, "payload without a record": 1, "payload checksum mismatch": 1}, 0),
        ("unknown_events.log", {}, 3),
    ],
)
def test_corrupted_traces_are_read_leniently_and_counted(name, problems, unknown):
    report = ingested(CORRUPT / name)
    stats = report.parse_stats
    assert stats is not None
    assert stats.problems == problems and stats.unknown == unknown
    assert len(stats.examples) == sum(problems.values()) + unknown and all(name in e for e in stats.examples)
    assert report.graph_breaks and report.graph_breaks[0].gb_type == "Data-dependent branching"
    if name == "truncated.log":
        assert stats.truncated_files == [str(CORRUPT / name)]


@pytest.mark.fast
def test_a_cut_gzip_stream_and_a_huge_payload_do_not_crash(tmp_path):
    data = next(SHOWCASE_TRACE.iterdir()).read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    report = ingest([str(cut)])
    assert report.parse_stats is not None and report.parse_stats.truncated_files == [str(cut)]
    assert any("compressed file cut off" in p for p in report.parse_stats.problems)
    assert report.graph_breaks  # what came before the cut is kept

    # one graph-break payload grown past the cap: counted as cut, the record still counts
    text = gzip.decompress(data).decode()
    head, sep, tail = text.partition("\tUser code traceback:\n")
    assert sep
    huge = head + sep + "".join(f"\t  filler line {i} {'x' * 200}\n" for i in range(MAX_PAYLOAD_CHARS // 150)) + tail
    big = tmp_path / "dedicated_log_torch_trace_big.log"
    big.write_text(huge)
    report = ingest([str(big)])
    assert report.parse_stats is not None and report.parse_stats.payloads_truncated == 1
    assert sites(report) == sites(ingested(SHOWCASE_TRACE))


@pytest.mark.fast
def test_text_logs_of_several_ranks_interleaved_line_by_line(tmp_path):
    lines = (LOGS / "showcase_torch_logs.log").read_text().splitlines(keepends=True)
    torch_lines = [ln for ln in lines if ln.startswith("V")]
    mixed = tmp_path / "ranks.log"
    with mixed.open("w") as fh:
        for ln in torch_lines:  # both ranks log every line, rank 1 right after rank 0
            fh.write(f"[rank0]:{ln}")
            fh.write(f"[rank1]:{ln}")
    report = ingest([str(mixed)])
    single = ingested(LOGS / "showcase_torch_logs.log")
    assert report.source is not None and report.source.ranks == [0, 1]
    assert [(s.gb_type, s.occurrences) for s in report.graph_breaks] == [(s.gb_type, 2 * s.occurrences) for s in single.graph_breaks]
    assert report.divergence == [] and [r.recompile_count for r in report.ranks] == [len(single.recompiles)] * 2


# ---------------------------------------------------------------------------------------------
# offline vs live: the same workload
# ---------------------------------------------------------------------------------------------


def _capture(fixture: str, out: Path, *, text: bool = False) -> Path:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "ctc_doctor.fixtures.capture", fixture]
    if text:
        env["TORCH_LOGS"] = "graph_breaks,recompiles,perf_hints"
        log = out / f"{fixture}.log"
        with log.open("w") as fh:
            subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=fh, check=True, timeout=300)
        return log
    env["TORCH_TRACE"] = str(out / fixture)
    subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
    return out / fixture


@pytest.mark.parametrize("fixture", ["showcase", "attribute_toggle", "deep_break", "python_scalar_arg"])
def test_offline_report_of_a_fresh_capture_agrees_with_the_live_report(fixture, tmp_path):
    live = analyzed(fixture)
    offline = ingest([str(_capture(fixture, tmp_path))])
    assert sites(offline) == sites(live)
    assert [(s.gb_type, s.registry_ids, s.compile_ids) for s in offline.graph_breaks] == [
        (s.gb_type, s.registry_ids, s.compile_ids) for s in live.graph_breaks
    ]
    assert recompile_reasons(offline) == recompile_reasons(live)
    assert [(rc.function, rc.compile_id) for rc in offline.recompiles] == [(rc.function, rc.compile_id) for rc in live.recompiles]
    assert [g.kind for rc in offline.recompiles for g in rc.failed_guards] == [g.kind for rc in live.recompiles for g in rc.failed_guards]
    assert offline.summary.graphs_compiled == live.summary.graphs_compiled
    assert offline.summary.verdict == live.summary.verdict
    # the same causes from the same events (offline: no call index, no module paths)
    assert [(c.kind, c.source, c.dim, c.values, c.recompiles) for c in offline.recompile_causes] == [
        (c.kind, c.source, c.dim, c.values, c.recompiles) for c in live.recompile_causes
    ]


def test_causes_from_text_logs_keep_the_guard_user_stack(tmp_path):
    live = analyzed("attribute_toggle")
    offline = ingest([str(_capture("attribute_toggle", tmp_path, text=True))])
    assert [(c.kind, c.source, c.summary) for c in offline.recompile_causes] == [
        (c.kind, c.source, c.summary) for c in live.recompile_causes
    ]
    assert (
        [(f.line, f.code) for f in offline.recompile_causes[0].user_stack]
        == [(f.line, f.code) for f in live.recompile_causes[0].user_stack]
        != []
    )
    (rc,) = offline.recompiles
    assert len(rc.failed_guards) == 1  # the user stack lines are part of the guard, not guards of their own


def test_torch_logs_text_of_a_fresh_capture_agrees_with_the_live_report(tmp_path):
    live = analyzed("logging_call")
    offline = ingest([str(_capture("logging_call", tmp_path, text=True))])
    assert offline.source is not None and offline.source.kind == "torch_logs"
    assert sites(offline) == sites(live) and recompile_reasons(offline) == recompile_reasons(live)


# ---------------------------------------------------------------------------------------------
# the command, the other views
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_logs_command_writes_a_report_that_loads_renders_and_diffs(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("logs", str(TWO_RANKS), "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert "ranks diverge" in result.stdout and "rank 1" in result.stdout
    report = load_report(out)
    assert report.schema_version == SCHEMA_VERSION and report.source is not None and report.source.ranks == [0, 1]
    md = render_markdown(report)
    assert "### Logs" in md and "| rank | compiles |" in md and "**Ranks diverge**" in md
    # the directory alone routes to `logs`; stdout carries only the JSON
    result = cli(str(SHOWCASE_TRACE), "--json", "-", "-q")
    assert result.returncode == 0, result.stderr
    other = Report.model_validate(json.loads(result.stdout))
    d = diff_reports(report, other)
    assert d.notes and any("module paths" in n for n in d.notes)


def test_live_and_offline_reports_diff_as_the_same_sites(tmp_path):
    d = diff_reports(analyzed("showcase"), ingested(SHOWCASE_TRACE))
    assert not d.new and not d.fixed and len(d.unchanged) == 2


@pytest.mark.fast
def test_strict_fails_on_bad_records_after_writing_the_report(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("logs", str(CORRUPT / "garbage.log"), "--strict", "--json", str(out), "-q")
    assert result.returncode == 10
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctc-doctor: error: --strict: 3 unreadable and 0 unknown")
    assert load_report(out).parse_stats.unreadable == 3  # written before failing
    assert cli("logs", str(CORRUPT / "unknown_events.log"), "--strict", "-q").returncode == 10
    assert cli("logs", str(CORRUPT / "garbage.log"), "-q").returncode == 0
    assert cli("logs", str(SHOWCASE_TRACE), "--strict", "-q").returncode == 0


@pytest.mark.fast
@pytest.mark.parametrize("kind", ["missing", "empty_dir", "not_a_log"])
def test_no_logs_is_one_error_line_and_exit_10(cli, tmp_path, kind):
    if kind == "missing":
        path = tmp_path / "nope"
    elif kind == "empty_dir":
        path = tmp_path / "trace"
        path.mkdir()
    else:
        path = tmp_path / "notes.txt"
        path.write_text("hello\nworld\n")
    result = cli("logs", str(path))
    assert result.returncode == 10
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctc-doctor: error: ") and "Traceback" not in result.stderr


@pytest.mark.fast
def test_ingestion_does_not_import_torch():
    code = (
        "import sys; from ctc_doctor.analyzer.doors.offline import ingest; "
        f"r = ingest([{str(SHOWCASE_TRACE)!r}, {str(LOGS / 'showcase_torch_logs.log')!r}]); "
        "assert r.graph_breaks and r.suggestions; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.fast
def test_an_offline_report_opens_in_the_tui(tmp_path):
    import asyncio

    from ctc_doctor.tui.app import DoctorApp
    from ctc_doctor.tui.widgets.detail_pane import plain_text
    from ctc_doctor.tui.widgets.virtual_table import VirtualTable

    report = ingested(TWO_RANKS)

    async def go() -> None:
        app = DoctorApp(report, export_dir=str(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            text = plain_text(app.screen.query_one("#overview-body").content)
            assert "from logs: torch trace, 2 file(s), ranks 0, 1" in text
            assert "ranks diverge" in text and "graphs in first compiles" in text
            await pilot.press("2")
            await pilot.pause()
            assert app.screen.query_one(VirtualTable).row_count == len(report.graph_breaks)
            await pilot.press("e")
            await pilot.pause()

    asyncio.run(go())
    exported = list(tmp_path.glob("*.md"))
    assert exported and "### Logs" in exported[0].read_text()
