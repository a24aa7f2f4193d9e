"""Wrong under compile, localized: the accuracy bisection finds the module whose compiled output departs from
float64, its repro fails while the bug is there, and a wrong result leads the report; recompile-limit cliffs
are named with their call, and torch's own fix for an integer attribute is verified on a copy."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys

import pytest
import torch
from rich.console import Console

from ctc_doctor import AnalyzeOptions, BenchOptions, FixOptions, analyze
from ctc_doctor.analyzer.phases.bisect.accuracy import AccuracyOptions
from ctc_doctor.analyzer.services.target import load_workload
from ctc_doctor.reports import load_report, render
from ctc_doctor.reports.advice import next_steps
from ctc_doctor.reports.markdown import render_markdown

from .conftest import TARGETS, analyzed, fixed


def render_summary(report, width: int) -> str:
    buf = io.StringIO()
    render.render_summary(report, Console(width=width, file=buf, force_terminal=False, color_system=None))
    return " ".join(buf.getvalue().split())


def _bench(target: str, repro_dir=None):
    workload = load_workload(target, seed=0)
    options = AnalyzeOptions(
        spec=target,
        explain=False,
        fix=FixOptions(),
        bench=BenchOptions(backend="aot_eager", iters=1, warmup=0, isolate=False),
        accuracy=AccuracyOptions(repro_dir=str(repro_dir) if repro_dir else None, target=target),
    )
    return analyze(workload, options)


def test_the_clis_accuracy_bisection_copies_the_model_it_holds_instead_of_building_a_second(cli, tmp_path):
    """`ctc-doctor bench` (the CLI hands the workload over): the compiled arm departs from float64, and the
    accuracy bisection runs on a copy that shares the analysis's weights; the analysing process builds the
    model once (it built a second beside the first before)."""
    out, builds = tmp_path / "r.json", tmp_path / "builds.txt"
    target = f"{TARGETS / 'accuracy_targets.py'}:six_blocks_counted"
    argv = ("bench", target, "--bench-backend", "eager", "--iters", "2", "--warmup", "0", "--no-fix", "--json", str(out), "-q")
    result = cli(*argv, env={"CTC_TEST_BUILDS": str(builds)})
    assert result.returncode == 0, result.stderr
    a = load_report(out).accuracy
    assert a is not None and a.trigger.startswith("the compiled arm: error ") and a.module_path == "blocks.3", a
    assert len(builds.read_text().split()) == 1, builds.read_text()


def test_the_bisection_names_the_wrong_block_and_its_repro_fails_until_the_block_is_fixed(tmp_path):
    model_file = tmp_path / "accuracy_targets.py"
    shutil.copy(TARGETS / "accuracy_targets.py", model_file)
    report = _bench(f"{model_file}:six_blocks", repro_dir=tmp_path)

    a = report.accuracy
    assert a is not None and a.trigger.startswith("the compiled arm: error ")
    assert (a.module_path, a.module_class, a.own_code) == ("blocks.3", "Block", True)
    assert a.source is not None and a.source.endswith("accuracy_targets.py:17")
    assert [t.module_path for t in a.path] == ["", "blocks.3"] and all(t.ratio and t.ratio > 100 for t in a.path)
    # within the block, the operation: the line only the compiled graph runs
    op = a.operation
    assert op is not None and (op.kind, op.operation) == ("traced_only", "h * 1.05"), op
    assert op.user_line.endswith("accuracy_targets.py:20") and op.user_code.startswith("h = h * FACTOR"), op
    rows = {t.module_path: t for t in a.trials}
    assert rows["blocks.0"].status == "passed" and rows["blocks.3.fc"].status == "passed"
    assert rows["blocks.1"].inferred_from == "blocks.0"  # identical blocks judged once
    assert a.trial_count <= 8 and a.duration_s > 0

    # the wrong result leads: the verdict, the first next step, every performance suggestion held back
    assert "`blocks.3` (Block) diverges compiled alone" in report.summary.wrong_results
    first = next_steps(report)[0]
    assert first.startswith("Compiled gives wrong results (the compiled arm: error ") and "`blocks.3`" in first
    assert "repro: python " in first and "torch.compiler.disable" in first
    assert all(s.not_recommended for s in report.suggestions)
    assert "WRONG RESULTS UNDER COMPILE" in render_summary(report, width=300)
    assert "wrong results under compile" in render_markdown(report)
    assert report.benchmark.best_arm == "eager"

    # the repro: exit 1 while the block is wrong, 0 once it is fixed
    def repro() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, a.repro_path], capture_output=True, text=True, timeout=120, cwd=tmp_path)

    assert "The operation: h * 1.05 at " in open(a.repro_path).read()
    wrong = repro()
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "reproduced: blocks.3" in wrong.stdout
    model_file.write_text(model_file.read_text().replace("FACTOR = 1.05", "FACTOR = 1.0"))
    right = repro()
    assert right.returncode == 0, right.stdout + right.stderr
    assert "not reproduced" in right.stdout


@pytest.mark.inductor
def test_within_the_module_the_operation_a_backend_computes_wrong_is_found_by_cutting_its_graph():
    """A backend that miscompiles `tanh` (registered by the targets file, as a real backend is): the block's
    graph is eager's, so no line is compiled-only; cut after `tanh`, its compiled output departs from the
    same cut run at float64, and no earlier cut does. A right backend finds nothing."""
    from ctc_doctor.analyzer.capture.inputs import ModuleInputs
    from ctc_doctor.analyzer.phases.bisect.operation import locate_operation

    Block = type(load_workload(f"{TARGETS / 'accuracy_targets.py'}:six_blocks", seed=0).model.blocks[0])  # the file, as a target

    torch.manual_seed(0)
    block = Block()
    inputs = ModuleInputs(block)
    with inputs.record():
        block(torch.randn(4, 32))
    located = locate_operation(block, inputs.inputs[""], "sloppy_tanh", 60)
    assert located is not None and located.cut is not None
    op = located.operation
    assert op is not None and (op.kind, op.operation) == ("backend", "tanh(h)"), op
    assert op.user_line.endswith("accuracy_targets.py:21") and op.ratio > 1000, op
    assert locate_operation(block, inputs.inputs[""], "aot_eager", 60) is None

    class Upcast(torch.nn.Module):
        """Dynamo writes `torch.float32` into the graph: the reference must still run at float64."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(64, 64)

        def forward(self, x):
            h = self.fc(x).to(torch.float32) * 40
            return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) + torch.zeros(x.shape, dtype=x.dtype)

    upcast = Upcast()
    inputs = ModuleInputs(upcast)
    with inputs.record():
        upcast(torch.randn(8, 64) * 30)
    assert locate_operation(upcast, inputs.inputs[""], "inductor", 120) is None  # right: no false "backend" operation


def test_a_backend_that_computes_an_operation_wrong_comes_out_as_a_bug_to_file_with_a_verified_way_around(tmp_path):
    """Every block's `tanh` miscompiled by a registered backend (not PyTorch's): the accuracy bisection names a
    block and `tanh(h)`; that is the backend's bug, not the user's code. The stage (aot_eager agrees, so the
    backend), a repro that fails under plain python with the backend imported from its module, the issue
    text, and a way around it judged on the whole model: keeping one block eager leaves five wrong, so
    compiling through aot_eager is the verified one."""
    target = f"{TARGETS / 'accuracy_targets.py'}:right_blocks"
    workload = load_workload(target, seed=0)
    options = AnalyzeOptions(
        spec=target,
        explain=False,
        bench=BenchOptions(backend="sloppy_tanh", arms=["eager", "compiled"], iters=1, warmup=0, isolate=False),
        accuracy=AccuracyOptions(repro_dir=str(tmp_path), target=target),
    )
    report = analyze(workload, options)
    a = report.accuracy
    assert a is not None and a.backend == "sloppy_tanh" and a.module_path.startswith("blocks."), a
    assert a.operation.kind == "backend" and a.operation.operation == "tanh(h)"
    [bug] = report.torch_bugs
    assert bug.kind == "wrong_result" and bug.owner.endswith("accuracy_targets") and bug.error_type == "WrongResult"
    assert bug.stage == "the backend (sloppy_tanh)" and bug.tried[1] == "aot_eager (AOTAutograd): agrees with float64", bug.tried
    assert bug.operation == "tanh(h)" and bug.user_code.startswith("return x + torch.tanh(h)")
    assert bug.repro_verified is True, bug.repro_note
    assert (bug.repro_reducer, bug.repro_nodes) == ("torch's minifier", 1), (bug.repro_reducer, bug.repro_nodes)  # tanh alone
    assert bug.issue_title.startswith("torch.compile: the backend (sloppy_tanh) computes `tanh(h)` wrong")
    assert "gives wrong results in the backend (sloppy_tanh)" in bug.issue_text
    assert bug.workaround.startswith('compile with `backend="aot_eager"`') and bug.workaround_verified
    # the repro file fails with the bug, and agrees once the backend is right
    repro = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert repro.returncode == 1 and "WrongResult" in repro.stderr, repro.stdout + repro.stderr
    right = open(bug.repro_path).read().replace("BACKEND = 'sloppy_tanh'", "BACKEND = 'aot_eager'")
    agrees = subprocess.run([sys.executable, "-c", right], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert agrees.returncode == 0 and "agrees" in agrees.stdout, agrees.stdout + agrees.stderr
    assert open(bug.issue_path).read().startswith("# torch.compile: the backend (sloppy_tanh)")


def test_a_model_that_is_right_under_compile_never_starts_the_bisection():
    report = _bench(f"{TARGETS / 'accuracy_targets.py'}:right_blocks")
    assert all(a.numerics_ok is not False for a in report.benchmark.arms) and len(report.benchmark.arms) >= 2
    assert report.accuracy is None and report.summary.wrong_results is None
    assert not any(s.not_recommended for s in report.suggestions)
    assert not next_steps(report) or not next_steps(report)[0].startswith("Compiled gives wrong results")


def test_the_step_counter_cliff_names_its_call_and_torchs_own_fix_is_verified_on_a_copy():
    report = analyzed("step_counter")
    [cliff] = report.recompile_cliffs
    assert (cliff.function, cliff.limit, cliff.from_call, cliff.eager_calls, cliff.cause) == ("forward", 8, 8, 4, "C1")
    assert cliff.cost is not None and cliff.cost.startswith("not measured")
    assert "forward hit the recompile limit (8) at call 9 of 12 [C1]" in render_summary(report, width=300)

    report = fixed("step_counter")
    s = next(s for s in report.suggestions if s.rule == "unspec-int-attribute")
    assert s.action.config == {"allow_unspec_int_on_nn_module": True}
    v = s.verified
    assert any(step.startswith("forward hit the recompile limit (8) at call 9 of 12") for step in next_steps(report))
    # the counter kept in a buffer: the caller assigns a Python int to it, which a buffer refuses (the
    # snippet says `.fill_(step)`): the check says so rather than pretending
    buffer = next(s for s in report.suggestions if s.rule == "tensor-counter")
    assert buffer.verdict == "failed" and "cannot assign 'int' as buffer 'step'" in buffer.verified.error
    if v.breaks_compile is not None:
        # torch 2.13: the option holds under Dynamo (8 -> 1 recompiles) but `step % 4` as a symbolic int
        # crashes AOTAutograd: not applied, and the bug comes out ready to file
        assert v.compiled_on == ["eager"] and v.breaks_compile.startswith("aot_eager (AOTAutograd): ") and s.verdict == "failed"
        [bug] = report.torch_bugs
        assert bug.stage == "AOTAutograd" and bug.repro_verified is True
        # the first operation whose cut fails: the multiply that takes the symbolic scale (the `%` before it
        # alone compiles), on the forward's return line
        assert bug.operation == "relu * add" and bug.user_code == "return torch.relu(self.fc(x)) * scale"
        assert report.fix.applied == []
    else:
        assert v is not None and v.applied and v.effective and v.numerics_ok and v.compiled_on == ["eager", "aot_eager"]
        assert (v.before.recompile_count, v.after.recompile_count) == (8, 1)


@pytest.mark.fast
def test_a_string_attribute_gets_no_integer_advice():
    from ctc_doctor.analyzer.phases.suggest.state import Failures, int_attributes
    from ctc_doctor.reports import models as rm

    def guard(source, expected):
        return rm.FailedGuard(reason=f"{source} == {expected}", kind="attribute", source=source, expected=expected)

    rc = rm.Recompile(id="R1", function="forward", file="m.py", line=1, compile_id="0/1", failed_guards=[])
    found = int_attributes(Failures(("attribute",), [(rc, guard("self.step", "7")), (rc, guard("self.mode", "'mode0'"))]))
    assert found == {"self.step": ["R1"]}
    nested = int_attributes(Failures(("attribute",), [(rc, guard("self._modules['sched'].step", "3"))]))
    assert list(nested) == ["self._modules['sched'].step"]


@pytest.mark.fast
def test_the_owner_of_a_registered_backend_and_how_a_repro_imports_it(tmp_path, monkeypatch):
    """A backend registered outside PyTorch: a package's module and a package itself are imported by name from
    the folder above the top package; a `functools.partial` is its function's; one defined in the script that
    runs (`__main__`) cannot be imported: its file is named, with no import. PyTorch's own: no owner."""
    import functools
    import importlib
    import os

    from ctc_doctor.analyzer.triage import backend_owner

    assert backend_owner("inductor") == (None, None)
    pkg = tmp_path / "outer" / "inner"
    pkg.mkdir(parents=True)
    (tmp_path / "outer" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(
        "import torch\n"
        "def be(gm, example_inputs):\n    return gm.forward\n"
        "if 'ctc_owner_pkg' not in torch._dynamo.list_backends(exclude_tags=()):\n"
        "    torch._dynamo.register_backend(be, name='ctc_owner_pkg')\n"
    )
    (pkg / "mod.py").write_text(
        "import functools, torch\n"
        "def be(gm, example_inputs, scale=1):\n    return gm.forward\n"
        "if 'ctc_owner_partial' not in torch._dynamo.list_backends(exclude_tags=()):\n"
        "    torch._dynamo.register_backend(functools.partial(be, scale=2), name='ctc_owner_partial')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("outer.inner")
    importlib.import_module("outer.inner.mod")
    owner, lines = backend_owner("ctc_owner_pkg")
    assert owner == "outer.inner" and f"sys.path.insert(0, {str(tmp_path)!r})" in lines and "import outer.inner" in lines
    owner, lines = backend_owner("ctc_owner_partial")
    assert owner == "outer.inner.mod" and f"sys.path.insert(0, {str(tmp_path)!r})" in lines

    def in_script(gm, example_inputs):
        return gm.forward

    in_script.__module__ = "__main__"
    if "ctc_owner_main" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(functools.partial(in_script), name="ctc_owner_main")
    assert backend_owner("ctc_owner_main") == (os.path.basename(__file__), None)
