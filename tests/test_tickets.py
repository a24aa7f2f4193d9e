"""Reports for tickets and CI: Markdown, redaction, diffs, the check gate and the pytest plugin."""

from __future__ import annotations

import json
import os
import re

import pytest
from markdown_it import MarkdownIt

from ctc_doctor.reports.diff import diff_reports, render_diff_text
from ctc_doctor.reports.io import load_report
from ctc_doctor.reports.markdown import render_markdown
from ctc_doctor.reports.models import Report
from ctc_doctor.reports.redact import redact

from .conftest import REPO, TARGETS, saved, saved_path

pytest_plugins = ["pytester"]


def _tokens(text: str):
    return MarkdownIt("commonmark").enable("table").parse(text)


def _with_bisect(name: str) -> Report:
    """The saved analysis of a zoo fixture with the saved bisection's section (`tests/data/reports`)."""
    report = saved(f"analyzed-{name}")
    report.bisect = saved(f"bisected-{name}").bisect
    return report


@pytest.mark.fast
def test_markdown_has_the_sections_tables_and_details_a_ticket_needs():
    report = _with_bisect("showcase")
    text = render_markdown(report)
    tokens = _tokens(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0].startswith("torch.compile report: `showcase`")
    for section in ("Graph breaks (2 site(s))", "Recompiles (", "Bisection", "Suggestions", "Benchmark", "What to do next"):
        assert any(h.startswith(section) for h in headings), section
    assert sum(1 for t in tokens if t.type == "table_open") >= 4  # environment, breaks, recompiles, bisection
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert html.count("<details>") >= 2 and "<summary>B1: Data-dependent branching" in html
    assert "GB0170" in html and "gb0170.html" in html and "block0.attn" in html
    assert f"<td>torch</td>\n<td>{report.environment.torch}</td>" in html
    assert "Not run." in text  # suggestions and benchmark do not exist yet


@pytest.mark.fast
def test_markdown_table_cells_escape_pipes_and_html_from_the_report():
    report = saved("analyzed-print_in_forward")
    report.graph_breaks[0].reason = "a | b <script>alert(1)</script>"
    html = MarkdownIt("commonmark").enable("table").render(render_markdown(report))
    assert "<script>" not in html and "a | b &lt;script&gt;" in html


@pytest.mark.fast
def test_redaction_removes_home_user_host_and_absolute_paths():
    report = _with_bisect("deepcopy_in_forward")
    fake = report.model_dump_json().replace(str(REPO), "/home/alice/proj")
    fake = fake.replace(os.path.dirname(os.__file__), "/home/alice/.pyenv/versions/3.11/lib/python3.11")
    data = json.loads(fake)
    data["run"]["command"] = "ctc-doctor proj.model:build --json /home/alice/out/r.json  # on alice-laptop.corp"
    data["notes"].append("written by alice on alice-laptop")
    dirty = Report.model_validate(data)
    clean = redact(dirty, project_root="/home/alice/proj", home="/home/alice", user="alice", host="alice-laptop.corp")
    for fmt in (clean.model_dump_json(), render_markdown(clean)):
        assert "/home/alice" not in fmt and "alice" not in fmt and "laptop" not in fmt
        assert "<site-packages>/" in fmt or "site-packages" not in fmt
    assert clean.redacted and not dirty.redacted
    site = clean.graph_breaks[0]
    assert site.own_frame.file == "ctc_doctor/fixtures/zoo.py"  # relative to the project root
    assert site.user_frame.file.startswith("~/.pyenv/")  # the stdlib under home


@pytest.mark.fast
def test_redaction_of_a_real_report_keeps_no_absolute_path_of_this_checkout(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("report", str(saved_path("analyzed-print_in_forward", tmp_path)), "--format", "json", "--redact")
    assert result.returncode == 0, result.stderr
    out.write_text(result.stdout)
    text = out.read_text()
    assert str(REPO) not in text and load_report(out).redacted


_ABSOLUTE = re.compile(r"(?<![\w.~>/:<;-])/(?=[\w.-])[^\s'\"()<>,;:]*")


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def test_redaction_leaves_no_absolute_path_of_a_model_outside_root_and_home(cli, tmp_path):
    # the model lives in a directory that is neither the project root (the cwd) nor under home
    models = tmp_path / "data" / "models"
    models.mkdir(parents=True)
    (models / "m.py").write_text(
        "import torch\n"
        "class Head(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        print('head', x.shape)\n"
        "        return self.fc(x)\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 4), Head()), (torch.randn(2, 4),)\n"
    )
    assert not str(models).startswith(str(REPO)) and not str(models).startswith(os.path.expanduser("~"))
    out = tmp_path / "out" / "r.json"
    out.parent.mkdir()
    result = cli(f"{models / 'm.py'}:build", "--json", str(out), "--redact", "-q", "--no-bench")
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    markdown = render_markdown(load_report(out))
    leaks = [s for s in [*_strings(data), markdown] if _ABSOLUTE.search(s)]
    assert leaks == [], [_ABSOLUTE.search(s).group(0) for s in leaks][:5]
    assert str(tmp_path) not in out.read_text() and str(tmp_path) not in markdown
    site = data["graph_breaks"][0]
    assert site["user_frame"]["file"] == "<abs>/models/m.py"
    assert data["bisect"]["repro_paths"] and all(p.startswith("<abs>/out/") for p in data["bisect"]["repro_paths"])
    diffs = [s["diff"] for s in data["suggestions"] if s["diff"]]
    # a file outside any repository and the current directory: named from its own folder (`patch -p1` there)
    assert diffs and all(d.startswith("--- a/m.py\n+++ b/m.py") for d in diffs), diffs[0][:80]
    assert "<abs>/models/m.py:build" in data["run"]["command"]


@pytest.mark.fast
def test_report_command_prints_markdown_and_rejects_a_corrupt_file(cli, tmp_path):
    result = cli("report", str(saved_path("analyzed-showcase", tmp_path)), "--format", "md")
    assert result.returncode == 0 and result.stdout.startswith("## torch.compile report: `showcase`")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = cli("report", str(bad))
    assert result.returncode == 9 and "not valid JSON" in result.stderr


def test_diff_of_a_real_fix_shows_the_fixed_site_and_fails_only_on_regression(cli, tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    for path, target in ((before, "ctc_doctor.fixtures.zoo:showcase"), (after, f"{TARGETS / 'fixed_targets.py'}:showcase_fixed")):
        result = cli(target, "--json", str(path), "-q", "--no-bisect", "--no-explain", "--no-fix", "--no-bench")
        assert result.returncode == 0, result.stderr
    d = diff_reports(load_report(before), load_report(after))
    assert [s.gb_type for s in d.fixed] == ["Failed to trace builtin operator"]
    assert d.new == [] and [b.gb_type for b, _ in d.unchanged] == ["Data-dependent branching"]
    assert d.counts["unique_break_sites"] == (2, 1) and d.regressions == []
    assert "1 fixed, 0 new, 1 unchanged" in render_diff_text(d)
    result = cli("diff", str(before), str(after), "--fail-on-regression")
    assert result.returncode == 0 and "fixed  Failed to trace builtin operator" in result.stdout
    result = cli("diff", str(after), str(before), "--fail-on-regression")
    assert result.returncode == 1 and "new break site Failed to trace builtin operator" in result.stdout


@pytest.mark.fast
def test_diff_refuses_reports_of_another_major_schema_with_a_clear_message(cli, tmp_path):
    ok = saved_path("analyzed-clean", tmp_path)
    other = tmp_path / "v2.json"
    data = json.loads(ok.read_text())
    data["schema_version"] = "2.0"
    other.write_text(json.dumps(data))
    result = cli("diff", str(ok), str(other))
    assert result.returncode == 9 and "schema_version 2.0" in result.stderr


def test_check_exits_1_with_the_violations_on_a_breaking_model_and_0_on_a_clean_one(cli):
    result = cli("check", "ctc_doctor.fixtures.zoo:showcase", "-q", "--no-explain")
    assert result.returncode == 1
    assert "graph-break site(s), more than the 0 allowed" in result.stderr and "GB0059" in result.stderr
    assert "recompile(s), more than the 0 allowed" in result.stderr
    result = cli("check", "ctc_doctor.fixtures.zoo:clean", "-q", "--no-explain")
    assert result.returncode == 0 and "passed" in result.stderr
    result = cli(
        "check",
        "ctc_doctor.fixtures.zoo:showcase",
        "-q",
        "--no-explain",
        "--allow",
        "GB0059",
        "--allow-module",
        "block0",
        "--allow-module",
        "block1",
        "--max-recompiles",
        "50",
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.fast
def test_check_policy_own_code_only_ignores_library_breaks():
    from ctc_doctor.reports.policy import Policy, violations

    report = saved("analyzed-deepcopy_in_forward")  # the innermost frame is in the stdlib's copy.py
    assert violations(report, Policy(max_graph_breaks=0))
    assert not violations(report, Policy(max_graph_breaks=0, own_code_only=True))


def test_the_pytest_plugin_fails_a_breaking_model_and_leaves_dynamo_config_alone(pytester):
    pytester.makepyfile(
        """
        import logging
        import torch
        from torch import nn

        class Talks(nn.Module):
            def forward(self, x):
                print("shape", x.shape)
                return x * 2

        def test_clean(ctc_doctor):
            report = ctc_doctor.assert_clean(nn.Linear(4, 4), (torch.randn(2, 4),))
            assert report.summary.verdict == "clean"

        def test_breaks(ctc_doctor):
            ctc_doctor.assert_clean(Talks(), (torch.randn(2, 4),))

        def test_state_is_left_as_found(ctc_doctor):
            torch._dynamo.config.cache_size_limit = 3
            levels = {n: logging.getLogger(n).level for n in ("torch._dynamo", "torch.__trace")}
            ctc_doctor.assert_clean(nn.Linear(4, 4), (torch.randn(2, 4),), variants=[(torch.randn(2, 4),)])
            assert torch._dynamo.config.cache_size_limit == 3
            assert levels == {n: logging.getLogger(n).level for n in levels}
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*torch.compile is not clean (ctc-doctor)*", "*1 graph-break site(s), more than the 0 allowed*", "*GB0059*"]
    )
