"""Benchmark arms in a child process: a crash in one arm (a segfault, an abort) costs that arm, not the run.

The planted backends in tests/targets/user_targets.py crash natively: `ctc_test_regional_segfault`
segfaults on a `CrashBlock` compiled on its own (the regional arm) and runs every other graph eagerly;
`ctc_test_arm_crashes` also aborts on the whole model's graph (the compiled arm).
"""

from __future__ import annotations

import signal

import torch
from torch import nn

from ctc_doctor import AnalyzeOptions, Workload, analyze
from ctc_doctor.analyzer.phases.bench import BenchOptions
from ctc_doctor.reports.io import load_report
from ctc_doctor.reports.markdown import render_markdown

QUICK = ("--iters", "2", "--warmup", "0", "--no-fix", "-q")


def _statuses(report):
    return {a.name: (a.crash, a.latency_ms is not None) for a in report.benchmark.arms}


def test_a_segfault_under_regional_compilation_costs_the_regional_arm_and_the_report_is_written(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bench", "user_targets:crashes_by_arm", "--bench-backend", "ctc_test_regional_segfault", "--json", str(out), *QUICK)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    b = report.benchmark
    assert _statuses(report) == {"eager": (None, True), "compiled": (None, True), "regional": ("SIGSEGV", False)}
    regional = b.arms[-1]
    assert regional.error.startswith("crashed (SIGSEGV)") and regional.stderr_tail[-1] == "ctc_test: one block compiled alone, segfaulting"
    assert b.best_arm in ("eager", "compiled") and "regional" not in b.within_noise
    # supervised: the arms ran in the analysing process, the run started again after the crash (no arm after it)
    assert b.isolation.isolated and b.isolation.crashed == ["regional"] and b.isolation.restarts == 1
    assert b.isolation.child_processes == 0 and b.settings["isolation"].startswith("supervised")
    [s] = [s for s in report.suggestions if s.rule == "regional-compile"]
    assert s.verified.applied is False and s.verdict != "improved"
    assert "crashed (SIGSEGV)" in render_markdown(report)


def test_an_abort_in_the_compiled_arm_and_a_segfault_in_regional_each_cost_their_own_arm(cli, tmp_path):
    out = tmp_path / "r.json"
    args = ("--bench-backend", "ctc_test_arm_crashes", "--steps", "50", "--json", str(out), *QUICK)
    result = cli("bench", "user_targets:crashes_by_arm", *args)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    b = report.benchmark
    assert _statuses(report) == {"eager": (None, True), "compiled": ("SIGABRT", False), "regional": ("SIGSEGV", False)}
    assert b.arms[1].stderr_tail[-1] == "ctc_test: the whole model compiled, aborting"
    # the run started again after the abort re-ran eager and the reference before the regional arm, then died too
    assert b.isolation.restarts == 2 and b.isolation.crashed == ["compiled", "regional"]
    # no compiled arm measured: not a loss for compile, and not "best: eager"
    assert b.best_arm is None and b.job_best_arm is None
    assert b.best_arm_reason.startswith("the compiled arms could not be measured (compiled: crashed (SIGABRT)")
    assert "could not be measured" in render_markdown(report)


def test_in_process_arms_let_a_segfault_end_the_run_without_a_report(cli, tmp_path):
    """What isolation prevents: --no-isolate-arms, and the segfault kills ctc-doctor (exit -SIGSEGV, 139 in a shell)."""
    out = tmp_path / "r.json"
    args = ("--bench-backend", "ctc_test_regional_segfault", "--no-isolate-arms", "--json", str(out), *QUICK)
    result = cli("bench", "user_targets:crashes_by_arm", *args)
    assert result.returncode == -signal.SIGSEGV and not out.exists()


def test_without_isolation_the_arms_run_in_this_process_and_the_report_says_so(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bench", "user_targets:one_linear", "--bench-backend", "eager", "--no-isolate-arms", "--json", str(out), *QUICK)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    assert not b.isolation.isolated and "--no-isolate-arms" in b.isolation.reason and "isolation" not in b.settings
    assert [a.name for a in b.arms] == ["eager", "compiled"] and all(a.crash is None and a.latency_ms for a in b.arms)


def test_a_target_that_cannot_be_built_twice_is_measured_supervised_and_a_child_that_cannot_rebuild_it_says_why(cli, tmp_path):
    """The CLI's arms run in the analysing process (supervised): the model is built once. Through the Python
    API with isolated arms, a child process rebuilds it, cannot, and the arms run in this process, said."""
    out = tmp_path / "r.json"
    result = cli("bench", "user_targets:fails_when_rebuilt", "--bench-backend", "eager", "--json", str(out), *QUICK)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    assert b.isolation.isolated and b.settings["isolation"].startswith("supervised") and b.isolation.restarts == 0
    assert [(a.name, a.error) for a in b.arms] == [("eager", None), ("compiled", None)]

    import sys

    from .conftest import TARGETS

    sys.path.insert(0, str(TARGETS))
    try:
        import user_targets

        torch.manual_seed(0)
        model, args = user_targets.fails_when_rebuilt()
        workload = Workload(model, args)
        bench = BenchOptions(backend="eager", iters=1, warmup=0, isolate=True)
        api = analyze(workload, AnalyzeOptions(explain=False, bench=bench, spec="user_targets:fails_when_rebuilt")).benchmark
    finally:
        sys.path.remove(str(TARGETS))
    assert not api.isolation.isolated and "the dataset is only mounted in the parent" in api.isolation.reason
    assert any(n.startswith("every arm ran in this process: the child process could not start") for n in api.notes)
    assert [(a.name, a.error) for a in api.arms] == [("eager", None), ("compiled", None)]


def test_a_workload_object_no_child_can_rebuild_runs_its_arms_in_process_with_a_note():
    torch.manual_seed(0)
    workload = Workload(nn.Linear(4, 4), (torch.randn(2, 4),))
    bench = BenchOptions(backend="eager", iters=1, warmup=0, isolate=True)
    b = analyze(workload, AnalyzeOptions(explain=False, bench=bench)).benchmark
    assert not b.isolation.isolated and "not importable" in b.isolation.reason and b.settings["isolation"] == "in-process"
    assert any("ran in this process" in n for n in b.notes) and [a.error for a in b.arms] == [None, None]
