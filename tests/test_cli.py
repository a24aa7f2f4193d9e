"""The command line, through real subprocesses: output channels, exit codes; the bad-input matrix in this
process through click's runner (the same code up to the exit; the subprocess path of an error is the
builder-error and --debug tests')."""

from __future__ import annotations

import json

import pytest

from ctc_doctor.errors import ExitCode
from ctc_doctor.reports import Report, load_report
from ctc_doctor.reports.io import schema_text

from .conftest import REPO


@pytest.mark.fast
def test_help_lists_the_commands_and_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ctc_doctor import cli\n"
        "try:\n    cli.cli.main(['--help'], prog_name='ctc-doctor')\n"
        "except SystemExit:\n    pass\n"
        "print('TORCH_LOADED' if 'torch' in sys.modules else 'TORCH_NOT_LOADED')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert "TORCH_NOT_LOADED" in out.stdout
    for command in ("analyze", "demo", "schema", "show", "tui"):
        assert command in out.stdout


@pytest.mark.fast
def test_schema_command_prints_the_committed_schema(cli):
    result = cli("schema")
    assert result.returncode == 0
    assert result.stdout == schema_text()


def test_json_dash_keeps_stdout_pure_json_even_when_the_model_prints(cli):
    result = cli("user_targets:printing_model", "--no-bench", "--json", "-")
    assert result.returncode == ExitCode.OK, result.stderr
    report = Report.model_validate(json.loads(result.stdout))
    assert report.summary.verdict == "graph_breaks"
    assert report.graph_breaks[0].gb_type == "Failed to trace builtin operator"
    assert "the model talks on stdout" in result.stderr  # the model's print went to stderr


def test_a_file_target_writes_a_report_and_a_readable_summary(cli, tmp_path):
    out = tmp_path / "report.json"
    result = cli("tests/targets/file_target.py:build", "--no-bench", "--json", str(out))
    assert result.returncode == ExitCode.OK, result.stderr
    report = load_report(out)
    assert report.target.spec == "tests/targets/file_target.py:build"
    assert report.graph_breaks[0].gb_type == "Data-dependent branching"
    assert "GRAPH BREAKS" in result.stdout and "GB0170" in result.stdout  # the report on stdout, as pytest and ruff
    assert "GRAPH BREAKS" not in result.stderr and "report written to" in result.stderr  # notes on stderr
    assert "what to do next" in result.stdout
    shown = cli(str(out))
    assert shown.returncode == 0 and "GB0170" in shown.stdout  # `show r.json | less` pages it


def test_demo_runs_the_showcase_and_reports_breaks_and_recompiles(cli):
    result = cli("demo", "--no-bench", "--no-bisect", "--no-fix", "--json", "-", "--no-explain")  # the diagnosis alone
    assert result.returncode == ExitCode.OK, result.stderr
    report = Report.model_validate(json.loads(result.stdout))
    assert report.target.spec == "demo"
    assert report.summary.verdict == "graph_breaks_and_recompiles"
    assert {s.gb_type for s in report.graph_breaks} == {"Data-dependent branching", "Failed to trace builtin operator"}


def test_torch_logs_in_the_environment_does_not_blind_the_capture(cli):
    result = cli("user_targets:printing_model", "--no-bench", "--json", "-", env={"TORCH_LOGS": "graph_breaks,recompiles"})
    assert result.returncode == ExitCode.OK, result.stderr
    report = Report.model_validate(json.loads(result.stdout))
    assert [s.gb_type for s in report.graph_breaks] == ["Failed to trace builtin operator"]


def test_variants_in_a_plain_tuple_expose_a_recompile(cli):
    result = cli("user_targets:with_variants", "--no-bench", "--json", "-", "--no-explain")
    report = Report.model_validate(json.loads(result.stdout))
    assert report.summary.verdict == "recompiles"
    assert report.recompiles[0].failed_guards[0].kind == "size"


BAD_INPUTS = [
    ("no_such_module_xyz:build", ExitCode.TARGET_NOT_FOUND, "no module named 'no_such_module_xyz'"),
    ("tests/targets/missing.py:build", ExitCode.TARGET_NOT_FOUND, "file not found"),
    ("user_targets:nope", ExitCode.TARGET_NOT_FOUND, "has no attribute 'nope'"),
    ("user_targets:NOT_CALLABLE", ExitCode.TARGET_INVALID, "not a builder"),
    ("user_targets:wrong_return", ExitCode.TARGET_INVALID, "returned a Linear"),
    ("user_targets:needs_argument", ExitCode.TARGET_INVALID, "cannot be called with no arguments"),
    ("user_targets", ExitCode.TARGET_NOT_FOUND, "has no attribute 'build'"),
    ("user_targets:", ExitCode.TARGET_INVALID, "bad target"),
    ("user_targets:raises", ExitCode.BUILDER_FAILED, "KeyError"),
    ("tests/targets/import_error_target.py:build", ExitCode.BUILDER_FAILED, "broken on purpose"),
    ("user_targets:fails_in_eager", ExitCode.EAGER_FAILED, "fix eager mode first"),
]


@pytest.mark.fast
@pytest.mark.parametrize(("target", "code", "text"), BAD_INPUTS)
def test_bad_input_gets_one_clear_line_and_its_exit_code(in_process, target, code, text):
    result = in_process(target)
    assert result.returncode == code, result.stderr
    assert text in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("ctc-doctor: error:")


def test_a_builder_error_names_the_users_file_and_line(cli):
    result = cli("user_targets:raises")
    assert "user_targets.py:" in result.stderr


def test_debug_shows_the_traceback(cli):
    result = cli("user_targets:raises", "--debug")
    assert result.returncode == ExitCode.BUILDER_FAILED
    assert "Traceback" in result.stderr


def test_a_compile_crash_is_recorded_and_the_partial_report_is_written(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("user_targets:small", "--no-bench", "--backend", "ctc_test_crashing", "--json", str(out), "--no-explain")
    assert result.returncode == ExitCode.COMPILE_FAILED, result.stderr
    assert "backend exploded on purpose" in result.stderr and "Traceback" not in result.stderr
    report = load_report(out)
    assert report.summary.verdict == "failed"
    assert report.errors[0].phase == "compile"


def test_a_hanging_compile_times_out_with_a_partial_report(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("user_targets:small", "--no-bench", "--backend", "ctc_test_hanging", "--timeout", "3", "--json", str(out), "--no-explain")
    assert result.returncode == ExitCode.TIMEOUT, result.stderr
    report = load_report(out)
    assert report.errors[0].phase == "timeout" and report.summary.verdict == "failed"
    assert report.summary.graph_count == 1  # the graph Dynamo handed to the hanging backend is kept


@pytest.mark.fast
@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "not a ctc-doctor report"),
        ('{"schema_version": "99.0"}', "schema_version 99.0"),
        ('{"schema_version": "1.0", "target": {}}', "is not a valid report"),
    ],
)
def test_a_corrupt_report_file_gets_a_clear_error(cli, tmp_path, content, text):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = cli("show", str(path))
    assert result.returncode == ExitCode.REPORT_INVALID
    assert text in result.stderr and "Traceback" not in result.stderr


@pytest.mark.fast
def test_an_unknown_option_is_a_usage_error(cli):
    result = cli("user_targets:small", "--no-such-flag")
    assert result.returncode == ExitCode.USAGE


@pytest.mark.fast
def test_the_tui_layer_loads_textual_but_never_torch():
    import subprocess
    import sys

    code = "import sys, ctc_doctor.tui.app, ctc_doctor.tui.live_run; print(sorted(m for m in ('torch', 'textual') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "['textual']", out.stderr


@pytest.mark.fast
@pytest.mark.parametrize("args", [("tui", "{path}"), ("{path}", "--tui"), ("show", "{path}", "--tui")])
def test_tui_on_a_bad_report_exits_9_before_drawing(cli, tmp_path, args):
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": "1.2"')
    result = cli(*[a.format(path=path) for a in args])
    assert result.returncode == ExitCode.REPORT_INVALID
    assert result.stderr.strip().splitlines() == [
        f"ctc-doctor: error: {path} is not valid JSON (line 1, column 25): Expecting ',' delimiter"
    ]


@pytest.mark.fast
def test_tui_with_json_on_stdout_is_a_usage_error(cli):
    result = cli("user_targets:small", "--tui", "--json", "-")
    assert result.returncode == ExitCode.USAGE
    assert "--tui draws on the terminal" in result.stderr


@pytest.mark.fast
@pytest.mark.parametrize(
    "args, text",
    [
        (("--device", "banana"), "--device 'banana' is not a torch device"),
        (("--device", "cuda:0"), "--device cuda:0: CUDA is not available"),
        (("--backend", "nosuchbackend"), "no torch.compile backend named 'nosuchbackend'"),
        (("bench", "--bench-backend", "nosuchbackend"), "no torch.compile backend named 'nosuchbackend'"),
    ],
)
def test_device_and_backend_are_usage_errors_before_the_model_is_built(in_process, tmp_path, args, text):
    if args[0] == "--device" and args[1].startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("CUDA is available here")
    marker = tmp_path / "built"
    target = tmp_path / "model.py"
    target.write_text(
        "import pathlib, torch\n"
        "def build():\n"
        f"    pathlib.Path({str(marker)!r}).write_text('built')\n"
        "    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)\n"
    )
    command = [*args[:1], f"{target}:build", *args[1:]] if args[0] == "bench" else [f"{target}:build", *args]
    result = in_process(*command)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert result.stderr.strip().splitlines() == [f"ctc-doctor: error: {result.stderr.split('error: ', 1)[1].strip()}"]
    assert text in result.stderr and not marker.exists()


def test_check_keeps_the_default_of_a_limit_it_was_not_given(cli):
    # --max-graph-breaks alone: recompiles are still held to 0
    result = cli("check", "ctc_doctor.fixtures.zoo:shape_change_dim0", "--max-graph-breaks", "0", "-q", "--no-explain")
    assert result.returncode == ExitCode.CHECK_FAILED and "1 recompile(s), more than the 0 allowed" in result.stderr
    allowed = cli("check", "ctc_doctor.fixtures.zoo:shape_change_dim0", "--max-recompiles", "1", "-q", "--no-explain")
    assert allowed.returncode == 0, allowed.stderr


def test_warnings_raised_during_the_run_go_to_the_notes_not_between_the_lines(cli, tmp_path):
    target = tmp_path / "warns.py"
    target.write_text(
        "import warnings, torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        warnings.warn('this layer is old-fashioned')\n"
        "        return self.fc(x)\n"
        "def build():\n"
        "    return M(), (torch.randn(2, 4),)\n"
    )
    out = tmp_path / "r.json"
    result = cli(f"{target}:build", "--json", str(out), "--no-bench", "--no-bisect")
    assert result.returncode == 0, result.stderr
    assert "UserWarning: this layer is old-fashioned" not in result.stderr + result.stdout  # not interleaved
    assert "Python warning(s) raised during the run (1 kind(s)); see the report's notes" in result.stdout
    notes = load_report(out).notes
    assert any(n.startswith("warning during the run (") and n.endswith("UserWarning: this layer is old-fashioned") for n in notes)
