"""The capture boundary: it leaves torch's logging and dynamo state as it found them."""

from __future__ import annotations

import logging
import sys

import pytest
import torch
from torch import nn

from ctc_doctor import AnalyzeOptions, Call, Workload, analyze
from ctc_doctor.analyzer import torch_internals as ti
from ctc_doctor.analyzer.readers.gb_registry import graph_break_registry


def _logging_state():
    from torch._logging._internal import log_registry, trace_log

    loggers = {n: logging.getLogger(n) for n in log_registry.get_artifact_log_qnames() | log_registry.get_log_qnames()}
    return (
        list(trace_log.handlers),
        {n: (lg.level, lg.propagate, list(lg.handlers)) for n, lg in loggers.items()},
    )


class Printing(nn.Module):
    def forward(self, x):
        print("hi")
        return x + 1


@pytest.mark.compat
def test_analysis_restores_torch_logging_exactly():
    # torch's LazyTraceHandler removes itself at the first compile of a process: do that first
    torch.compile(lambda x: x + 1, backend="eager")(torch.randn(2))
    before = _logging_state()
    report = analyze(Workload(Printing(), (torch.randn(2),)), AnalyzeOptions(explain=False))
    assert report.summary.unique_break_sites == 1
    assert _logging_state() == before


def test_a_users_set_logs_settings_survive_the_analysis():
    torch._logging.set_logs(graph_breaks=True)
    try:
        from torch._logging._internal import log_state

        analyze(Workload(Printing(), (torch.randn(2),)), AnalyzeOptions(explain=False))
        assert log_state.is_artifact_enabled("graph_breaks")
    finally:
        torch._logging.set_logs()


def test_capture_collects_events_only_inside_the_block():
    fn = torch.compile(lambda x: x * 2, backend="eager")
    with ti.capture() as cap:
        fn(torch.randn(3))
    n = len(cap.events)
    assert any(e.kind == "compilation_metrics" for e in cap.events)
    torch.compile(lambda x: x * 3, backend="eager")(torch.randn(3))
    assert len(cap.events) == n


@pytest.mark.fast
@pytest.mark.compat
def test_the_graph_break_registry_is_read_from_the_installed_torch():
    registry = graph_break_registry()
    assert registry is not None and "GB0170" in registry
    assert registry["GB0170"][0]["Gb_type"] == "Data-dependent branching"


def test_analyzing_a_plain_function_works_without_module_paths():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x

    report = analyze(Workload(f, (torch.ones(3),)), AnalyzeOptions(explain=False))
    assert report.graph_breaks[0].gb_type == "Data-dependent branching"
    assert report.graph_breaks[0].module_paths == []
    assert any("not an nn.Module" in n for n in report.notes)


class Attention(nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


@pytest.mark.inductor
def test_the_inductor_backend_yields_perf_hints_with_their_compile_id():
    q = torch.randn(1, 2, 8, 16)
    report = analyze(Workload(Attention(), (q, q, q)), AnalyzeOptions(backend="inductor", explain=False))
    assert report.errors == [] and report.environment.backend == "inductor"
    assert report.perf_hints, "inductor on CPU logs perf hints (fallback kernels, padding)"
    assert all(h.compile_id == "0/0" and h.logger.endswith("__perf_hints") for h in report.perf_hints)


@pytest.mark.compat
def test_torch_logs_around_a_failing_compile_stay_off_stderr_and_become_a_note(capfd):
    broken = nn.Linear(4, 4)  # called with 5 features: the matmul fails, eagerly and when traced
    report = analyze(Workload(broken, (torch.randn(2, 5),)), AnalyzeOptions(explain=False))
    assert [e.phase for e in report.errors] == ["eager", "compile"]  # the eager failure first: fix it first
    assert any(n.startswith("torch log during the run") and "fake_tensor" in n for n in report.notes), report.notes
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.fast
def test_watching_break_lines_puts_back_the_trace_function_that_was_in_place():
    from ctc_doctor.analyzer.capture.live import eager_pass
    from ctc_doctor.analyzer.running.settings import RunSettings

    def tracer(frame, event, arg):  # a debugger's or coverage's, say
        return None

    class Model(torch.nn.Module):
        def forward(self, x):
            return x + 1

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        run = eager_pass(Workload(Model(), (torch.ones(2),)), [Call((torch.ones(2),))], RunSettings(), watch={__file__: {0}})
        assert sys.gettrace() is tracer and run.error is None
    finally:
        sys.settrace(previous)


@pytest.mark.compat
def test_the_report_names_the_capture_features_the_running_torch_lacks(monkeypatch):
    report = analyze(Workload(nn.Linear(4, 4), (torch.randn(2, 4),)), AnalyzeOptions(explain=False))
    assert report.environment.unavailable == ti.unavailable_features()  # what this torch lacks, probed
    # a feature no torch has (yet): the report says what it costs, in the summary and the Markdown
    future = ("recompile hooks v9", lambda: ti._has("torch.compiler", "no_such_api_v9"), "no v9 hooks")
    monkeypatch.setattr(ti, "_FEATURES", [*ti._FEATURES, future])
    report = analyze(Workload(nn.Linear(4, 4), (torch.randn(2, 4),)), AnalyzeOptions(explain=False))
    assert report.environment.unavailable[-1] == "recompile hooks v9: no v9 hooks"
    import io

    from rich.console import Console

    from ctc_doctor.reports.markdown import render_markdown
    from ctc_doctor.reports.render import render_summary

    buf = io.StringIO()
    render_summary(report, Console(width=80, file=buf, force_terminal=False, color_system=None))
    assert f"not in torch {torch.__version__}: " in buf.getvalue() and "no v9 hooks" in buf.getvalue()
    assert "| not in this torch | " in render_markdown(report)


@pytest.mark.fast
def test_cuda_graph_skips_rerecords_and_warnings_are_read_from_torchs_own_log_calls(capfd):
    """The GPU-only messages, produced by torch's own functions where they are callable on CPU (the
    skip and the per-size warning) and by its format string where only a GPU replay logs it (the
    re-recording, at DEBUG: the block turns it on)."""
    from torch._inductor import cudagraph_trees, cudagraph_utils

    with ti.cudagraph_log() as log:
        cudagraph_utils.log_cudagraph_skip_and_bump_counter(
            "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n File x"
        )
        cudagraph_utils.maybe_warning_due_to_dynamic_shape({(i,): None for i in range(20)}, (99,))
        cudagraph_trees.log.debug(
            "[%s] Re-recording function=%s, mode=%s, reason=%s", "0/0", "forward", "INFERENCE", "static input data pointer changed"
        )
        cudagraph_trees.log.debug("[%s] Recording function=%s, mode=%s, cuda_graph_id=%d, inputs: %s", "0/0", "forward", "INFERENCE", 1, "")
    assert log.skips == {"skipping cudagraphs due to mutated inputs (1 instances).": 1} and log.skip_count == 1
    assert log.rerecords == {"function=forward, mode=INFERENCE, reason=static input data pointer changed": 1}
    assert log.recordings == 1
    assert [w.split(".")[0] for w in log.warnings] == [
        "CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size"
    ]
    assert "CUDAGraph" not in capfd.readouterr().err  # kept off the terminal


def _shown(name: str, message: str) -> bool:
    """Whether torch's own stderr handler would print this record (its filters are what the blocks change)."""
    from torch._logging._internal import _is_torch_handler

    handler = next(h for h in logging.getLogger("torch").handlers if _is_torch_handler(h))
    logger = logging.getLogger(name)
    record = logger.makeRecord(name, logging.WARNING, __file__, 0, message, (), None)
    return bool(handler.filter(record))


@pytest.mark.fast
def test_quiet_blocks_ending_out_of_order_keep_torch_quiet_until_the_last_one_ends():
    outer, inner = ti.quiet_torch_stderr(True), ti.quiet_torch_stderr(True)
    seen_outer, seen_inner = outer.__enter__(), inner.__enter__()
    outer.__exit__(None, None, None)  # the outer block ends first (a thread, a generator)
    assert not _shown("torch._dynamo", "still quiet")
    inner.__exit__(None, None, None)
    assert seen_inner[("WARNING", "torch._dynamo", "still quiet")] == 1 and not seen_outer
    assert _shown("torch._dynamo", "heard again")  # no filter left behind on torch's handlers


@pytest.mark.fast
def test_a_scripts_run_keeps_only_torch_compiles_records_off_the_terminal():
    with ti.quiet_torch_stderr(True, only=ti.COMPILER_LOGGERS) as seen:
        assert not _shown("torch._dynamo.guards", "a compiler record")
        assert _shown("torch.distributed.elastic", "a rank record")
    assert list(seen) == [("WARNING", "torch._dynamo.guards", "a compiler record")]


def _shared_wrapper(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)  # the frame a break in fn's callees shows for every decorated class

    return wrapper


class _Inner(nn.Module):
    @_shared_wrapper
    def forward(self, x):
        return x + 1


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    @_shared_wrapper
    def forward(self, x):
        return self.inner(x) * 2


@pytest.mark.fast
def test_a_decorator_wrapper_shared_by_several_module_classes_names_none_of_them():
    # transformers 5.24 wraps every forward in one `deprecate_kwarg` wrapper: a break whose stack ends
    # in that wrapper is the root's, not every decorated module's
    from ctc_doctor.analyzer.capture.attribution import ModuleIndex

    model = _Outer()
    index = ModuleIndex(model)
    with index.record():
        model(torch.ones(2))
    wrapper_line = _shared_wrapper.__code__.co_firstlineno + 4
    assert index.owners_of_line(__file__, wrapper_line) == []
    assert index.attribute([(__file__, wrapper_line)]) == [""]
    inner_line = _Inner.forward.__wrapped__.__code__.co_firstlineno + 1
    assert index.attribute([(__file__, wrapper_line), (__file__, inner_line)]) == ["inner"]
