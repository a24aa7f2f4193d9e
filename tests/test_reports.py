"""The report contract: schema drift, torch-free import, round trip, clear errors on bad files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctc_doctor.errors import ReportError
from ctc_doctor.reports import SCHEMA_VERSION, Report, dump_report, load_report
from ctc_doctor.reports.compile_id import CompileId, compile_id_key
from ctc_doctor.reports.io import schema_text

from .conftest import REPO, analyzed, saved

SCHEMA_FILE = REPO / "ctc_doctor" / "reports" / "report.schema.json"


@pytest.mark.fast
@pytest.mark.compat
def test_the_committed_json_schema_matches_the_models():
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "report.schema.json is stale: regenerate it with `make schema` "
        "(.venv/bin/ctc-doctor schema > ctc_doctor/reports/report.schema.json)"
    )


@pytest.mark.fast
def test_the_fixed_field_names_other_tools_read_are_in_the_schema():
    defs = json.loads(SCHEMA_FILE.read_text())["$defs"]
    assert set(defs["GraphBreakSite"]["properties"]) >= {
        "id",
        "gb_type",
        "registry_ids",
        "reason",
        "explanation",
        "hints",
        "user_frame",
        "user_stack",
        "module_paths",
        "module_class",
        "occurrences",
        "compile_ids",
        "own_code",
        "library",
    }
    assert set(defs["Recompile"]["properties"]) >= {"id", "function", "file", "line", "compile_id", "module_paths", "failed_guards"}
    assert set(defs["FailedGuard"]["properties"]) >= {"reason", "kind", "source", "expected", "actual"}
    assert set(defs["Summary"]["properties"]) >= {
        "graph_count",
        "graph_break_count",
        "unique_break_sites",
        "recompile_count",
        "compile_time_s",
        "verdict",
    }
    top = json.loads(SCHEMA_FILE.read_text())["properties"]
    assert set(top) >= {
        "schema_version",
        "graph_breaks",
        "recompiles",
        "graphs",
        "perf_hints",
        "compile_metrics",
        "guards",
        "summary",
        "target",
        "environment",
        "run",
        "errors",
        "bisect",
        "suggestions",
        "benchmark",
    }


@pytest.mark.fast
def test_every_field_has_a_description():
    schema = json.loads(SCHEMA_FILE.read_text())
    for name, definition in schema["$defs"].items():
        for field, prop in definition.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field} has no docstring"


@pytest.mark.fast
def test_importing_the_reports_layer_loads_neither_torch_nor_textual():
    modules = ["reports", "reports.render", "reports.markdown", "reports.diff", "reports.redact", "reports.policy", "pytest_plugin"]
    imports = ", ".join(f"ctc_doctor.{m}" for m in modules)
    code = f"import sys, {imports}; print(sorted(m for m in ('torch', 'textual') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.compat
def test_a_report_survives_a_json_round_trip(tmp_path):
    report = analyzed("showcase")
    path = tmp_path / "r.json"
    path.write_text(dump_report(report))
    again = load_report(path)
    assert again == report
    assert again.schema_version == SCHEMA_VERSION


@pytest.mark.compat
def test_reports_carry_versions_command_and_environment():
    report = analyzed("clean")
    assert report.environment.torch.startswith("2.")
    assert report.environment.backend == "eager"
    assert report.run.tool_version and report.run.started_at and report.run.duration_s > 0
    assert report.target.model_class == "Mlp" and report.target.parameters > 0
    assert report.target.inputs[0] == "x: float32[4, 16]"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is not valid JSON"),
        ('"text"', "not a ctc-doctor report"),
        ("{}", "no schema_version"),
        ('{"schema_version": "2.0"}', "this ctc-doctor reads 1.x"),
    ],
)
def test_bad_report_files_raise_report_error_with_one_line(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert message in info.value.one_line() and "\n" not in info.value.one_line()


@pytest.mark.fast
def test_extra_fields_are_rejected_on_what_we_write():
    data = json.loads(dump_report(saved("analyzed-clean")))
    data["summary"]["surprise"] = 1
    with pytest.raises(ValueError):
        Report.model_validate(data)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0/1", CompileId(0, 1)),
        ("[3/2_1]", CompileId(3, 2)),  # TORCH_LOGS prints the restart attempt; the compile is 3/2
        ("!0/0/1", CompileId(0, 1, autograd=0)),
        ("!2", CompileId(None, None, autograd=2)),
        ("rank1:4/0", CompileId(4, 0, rank=1)),
        ("?", None),
        ("", None),
    ],
)
def test_a_compile_id_reads_and_prints_like_torch(text, expected):
    parsed = CompileId.parse(text)
    assert parsed == expected
    if expected is not None:
        assert CompileId.parse(str(parsed)) == parsed and "[" not in str(parsed)


@pytest.mark.fast
def test_compile_ids_from_trace_metadata_keep_compiled_autograd_and_sort_naturally():
    assert str(CompileId.from_metadata({"frame_id": 0, "frame_compile_id": 1})) == "0/1"
    assert str(CompileId.from_metadata({"frame_id": 5, "frame_compile_id": 0, "compiled_autograd_id": 1})) == "!1/5/0"
    assert CompileId.from_metadata({"frame_id": 0}) is None
    ids = ["10/0", "1/0", "rank1:0/0", "0/1", "!0/0/1", "0/0", "garbage"]
    assert sorted(ids, key=compile_id_key) == ["0/0", "0/1", "1/0", "10/0", "!0/0/1", "rank1:0/0", "garbage"]


@pytest.mark.fast
def test_diff_compares_recompile_causes_and_a_new_cause_is_a_regression():
    from ctc_doctor.reports.diff import diff_reports, render_diff_text

    two, one = saved("analyzed-two_causes"), saved("analyzed-python_scalar_arg")
    d = diff_reports(two, one)
    assert [(c.kind, c.source) for c in d.causes_fixed] == [("size", "x")]
    assert d.causes_new == [] and d.causes_changed == []
    assert "recompile causes: 1 gone, 0 new, 0 changed" in render_diff_text(d)
    back = diff_reports(one, two)
    assert [(c.kind, c.source) for c in back.causes_new] == [("size", "x")]
    assert "new recompile cause: x dim 0 changes 2 → 3 (1 recompile(s))" in back.regressions


@pytest.mark.fast
def test_diff_does_not_read_a_stopped_bisection_as_one_that_found_nothing():
    from ctc_doctor.reports.diff import diff_reports, render_diff_text

    done = saved("bisected-showcase")
    stopped = done.model_copy(deep=True)
    assert done.bisect is not None and done.bisect.smallest_failing and stopped.bisect is not None
    stopped.bisect.smallest_failing, stopped.bisect.untried = [], ["blocks.0"]
    assert diff_reports(done, done).bisect is not None
    d = diff_reports(done, stopped)
    assert d.bisect is None and "smallest failing" not in render_diff_text(d)
    assert "bisections not compared: one stopped with modules untried" in d.notes


def _collapse(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.mark.fast
@pytest.mark.parametrize("width", [80, 120])
def test_the_summary_is_whole_at_80_and_120_columns_in_a_ci_log(width):
    import io

    from rich.console import Console

    from ctc_doctor.reports.render import render_summary

    report = saved("full_showcase")
    assert report.graph_breaks and report.recompile_causes and report.bisect and report.fix and report.benchmark
    buf = io.StringIO()
    render_summary(report, Console(width=width, file=buf, force_terminal=False, color_system=None))
    text = buf.getvalue()
    assert "\x1b[" not in text  # not a TTY: no escape codes
    assert "…" not in text  # no cell cut short
    assert [line for line in text.splitlines() if len(line) > width] == []
    flat = _collapse(text)
    diffs = [s.diff for s in report.suggestions if s.diff and s.id in report.fix.applied]
    assert diffs
    lines = text.splitlines()
    for diff in diffs:
        if max(len(line) for line in diff.splitlines()) > width:  # pointed to, never re-wrapped
            assert "its diff is wider than this terminal: `--diff` prints the patch whole" in flat
            continue
        for line in diff.splitlines():
            assert any(line.rstrip() in shown for shown in lines), line  # every diff line whole on one line
    for arm in report.benchmark.arms:  # every arm's numbers are there
        assert f"{arm.latency_ms.median:.3f}" in text
    for site in report.graph_breaks:
        assert site.id in text and str((site.own_frame or site.user_frame).line) in text
    assert report.recompile_causes[0].summary in flat


@pytest.mark.fast
def test_the_folded_note_line_counts_the_records_and_kinds_past_the_listed_ones():
    from collections import Counter

    from ctc_doctor.analyzer.running.warning_notes import warning_notes
    from ctc_doctor.analyzer.torch_internals import torch_log_notes
    from ctc_doctor.reports.labels import folded_counts

    logged = torch_log_notes(Counter({("WARNING", "torch._dynamo", f"text {i}"): 10 for i in range(7)}), "during the run")
    assert len(logged) == 6 and folded_counts(logged) == (70, 7)  # 5 listed, then "2 more kind(s), 20 in all"
    warned = warning_notes(Counter({("UserWarning", f"w{i}"): 3 for i in range(12)}))
    assert folded_counts(warned) == (36, 12)
