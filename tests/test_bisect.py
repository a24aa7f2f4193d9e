"""Module bisection on real models: fullgraph trials, strategies, memoization, limits, repro scripts."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types

import pytest
import torch
from rich.console import Console
from torch import nn

from ctc_doctor import AnalyzeOptions, BisectOptions, Workload, analyze
from ctc_doctor.analyzer.services.target import load_workload
from ctc_doctor.fixtures.registry import all_fixtures
from ctc_doctor.reports.io import load_report
from ctc_doctor.reports.render import render_summary

from .conftest import TARGETS, bisected

FIXTURES = all_fixtures()
# transformers_output_capture: its strategies disagree on purpose (see the fixture's docstring)
BREAKING = sorted(n for n, f in FIXTURES.items() if f.expected.breaks and "transformers" not in f.tags)


def _expected_smallest(name: str) -> list[str]:
    expected = FIXTURES[name].expected
    if expected.fullgraph_passes:
        return []
    if expected.smallest_failing:
        return list(expected.smallest_failing)
    # trials run on the model once it has run: a break of a fresh model's first call does not reproduce
    paths = {p for b in expected.breaks if not b.first_call_only for p in b.module_paths}
    return sorted(paths, key=lambda p: [int(x) if x.isdigit() else x for x in p.split(".")])


def _rows(report):
    return {t.module_path: t for t in report.bisect.trials}


def _bisect(model: nn.Module, args: tuple, **bisect_kw) -> object:
    options = AnalyzeOptions(explain=False, compile=False, bisect=BisectOptions(**bisect_kw))
    return analyze(Workload(model, args), options)


@pytest.mark.parametrize("name", BREAKING)
def test_both_strategies_return_the_documented_smallest_failing_modules(name):
    b = bisected(name).bisect
    expected = _expected_smallest(name)
    assert b.by_strategy["top-down"].smallest_failing == expected
    assert b.by_strategy["bottom-up"].smallest_failing == expected
    assert b.smallest_failing == expected
    assert b.agreement is True
    assert b.trial_count <= b.exhaustive_count


def test_bisection_says_it_does_not_chase_a_break_of_a_fresh_models_first_call():
    torch.manual_seed(0)
    report = analyze(
        FIXTURES["lazy_setup_under_lock"].builder()(), AnalyzeOptions(explain=False, bisect=BisectOptions(strategy="top-down"))
    )
    assert [s.first_call_only for s in report.graph_breaks] == [True]
    assert report.bisect.smallest_failing == []
    assert any("B1 break only on a fresh model's first call" in n for n in report.bisect.notes)


def test_the_deep_leaf_is_found_with_its_gb_type_line_and_failing_ancestors():
    report = bisected("deep_break")
    rows = _rows(report)
    leaf = rows["encoder.blocks.1.mixer.probe"]
    assert leaf.status == "failed" and leaf.passed is False
    assert leaf.gb_type == "Data-dependent branching" and "GB0170" in leaf.registry_ids
    assert leaf.own_break and leaf.module_class == "NanProbe"
    for ancestor in ("", "encoder", "encoder.blocks.1", "encoder.blocks.1.mixer"):
        assert rows[ancestor].passed is False
    for sibling in ("stem", "head", "encoder.blocks.1.norm", "encoder.blocks.1.mixer.fc"):
        assert rows[sibling].passed is True
    # the ModuleList is never called: skipped, and the tree walks through it
    assert rows["encoder.blocks"].status == "skipped" and "not exercised" in rows["encoder.blocks"].reason
    assert rows["encoder.blocks.1"].parent == "encoder"
    assert report.summary.analysis_run is False and report.summary.verdict == "graph_breaks"


def test_the_failing_leaf_line_is_the_marker_line():
    from ctc_doctor.fixtures.registry import marker_line

    spec = FIXTURES["deep_break"]
    leaf = _rows(bisected("deep_break"))["encoder.blocks.1.mixer.probe"]
    assert (leaf.user_frame.file, leaf.user_frame.line) == (spec.source_file(), marker_line(spec.source_file(), "deep"))


def test_a_break_between_two_children_returns_the_parent_whose_children_pass():
    rows = _rows(bisected("parent_break"))
    assert rows["body"].status == "failed" and rows["body"].own_break
    assert rows["body.first"].passed and rows["body.second"].passed
    assert rows[""].passed is False and not rows[""].own_break


def test_identical_blocks_are_tried_once_and_the_rest_are_inferred():
    b = bisected("repeated_blocks").bisect
    rows = {t.module_path: t for t in b.trials}
    assert b.exhaustive_count == 1 + 64 * 3
    assert b.trial_count <= 0.25 * b.exhaustive_count
    inferred = [t for t in b.trials if t.status == "inferred"]
    assert len(inferred) >= 60
    for t in inferred:
        rep = rows[t.inferred_from]
        assert rep.status not in ("inferred", "skipped") and rep.module_class == t.module_class
        assert t.passed == rep.passed
    assert len(b.smallest_failing) == 64
    # one repro per distinct failing module is the rule; no repro dir here, so none written
    assert b.repro_paths == []


def test_memoization_never_merges_blocks_whose_submodules_differ():
    rows = _rows(bisected("deep_break"))
    # blocks 0 and 1 share class and inputs, but blocks.1 holds a NanProbe where blocks.0 holds an Identity
    assert rows["encoder.blocks.0"].status == "passed"
    assert rows["encoder.blocks.1"].status == "failed"
    assert rows["encoder.blocks.2"].inferred_from == "encoder.blocks.0"


def test_without_memoization_every_needed_module_is_tried():
    from ctc_doctor.fixtures.zoo import RepeatedBlocks

    torch.manual_seed(0)
    report = _bisect(RepeatedBlocks(8), (torch.randn(4, 16),), strategy="top-down", memoize=False)
    b = report.bisect
    assert not any(t.status == "inferred" for t in b.trials)
    assert b.trial_count == 1 + 8 * 3  # root, every block, and the children of every failing block
    assert len(b.smallest_failing) == 8


def test_a_hung_trace_becomes_a_timeout_row_and_the_bisection_finishes():
    workload = load_workload(f"{TARGETS / 'user_targets.py'}:hangs_while_tracing")
    report = analyze(
        workload,
        AnalyzeOptions(
            explain=False, compile=False, bisect=BisectOptions(strategy="both", trial_timeout_s=4.0)
        ),  # room for a loaded CI box
    )
    rows = _rows(report)
    assert rows[""].status == "timeout" and rows["slow"].status == "timeout"
    # `before` and `after` are alike (no gradient flows under no_grad): one passes, the other is inferred from it
    assert {rows["before"].status, rows["after"].status} == {"passed", "inferred"} and rows["after"].passed
    assert report.bisect.smallest_failing == ["slow"]
    assert report.summary.verdict == "failed"  # a hang is not a graph break
    assert report.errors == []


def test_max_trials_caps_the_work_and_lists_what_was_left_untried():
    torch.manual_seed(0)
    report = analyze(
        FIXTURES["deep_break"].builder()(),
        AnalyzeOptions(explain=False, compile=False, bisect=BisectOptions(strategy="top-down", max_trials=3)),
    )
    b = report.bisect
    assert b.trial_count == 3
    assert b.untried and b.by_strategy["top-down"].complete is False
    assert any("--max-trials" in n for n in b.notes)
    rows = _rows(report)
    assert all(rows[p].status == "skipped" and "budget" in rows[p].reason for p in b.untried)


def test_a_module_that_compiles_cleanly_takes_one_trial_and_has_no_smallest_failing():
    report = _bisect(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), (torch.randn(3, 4),), strategy="top-down")
    b = report.bisect
    assert b.trial_count == 1 and b.smallest_failing == []
    assert _rows(report)[""].status == "passed"
    assert report.summary.verdict == "clean"


class _Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.spare = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.used(x)
        print("talks")
        return y


def test_modules_never_called_are_marked_not_exercised_and_not_tried():
    report = _bisect(_Unused(), (torch.randn(2, 4),), strategy="bottom-up")
    rows = _rows(report)
    assert rows["spare"].status == "skipped" and rows["spare"].calls == 0
    assert rows["used"].status == "passed" and rows[""].status == "failed"
    assert report.bisect.exhaustive_count == 2
    assert report.bisect.smallest_failing == [""]


class _WithBatchNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(self.bn(x))
        if h.sum() > 0:
            h = h * 2
        return h


def test_train_mode_trials_run_backward_and_leave_grads_and_buffers_as_found():
    model = _WithBatchNorm().train()
    x = torch.randn(8, 4)
    torch.manual_seed(0)
    model(x).sum().backward()  # grads the user already had
    before_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    before_buffers = {n: b.clone() for n, b in model.named_buffers()}
    options = AnalyzeOptions(train=True, explain=False, compile=False, bisect=BisectOptions(strategy="both"))
    report = analyze(Workload(model, (x,)), options)
    b = report.bisect
    assert b.train and b.backend == "aot_eager"
    assert b.smallest_failing == [""]
    assert _rows(report)["bn"].passed and _rows(report)["fc"].passed
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, before_grads[n]), n
    for n, buf in model.named_buffers():
        assert torch.equal(buf, before_buffers[n]), n


def test_the_generated_repro_script_reproduces_the_failure_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    spec = FIXTURES["deep_break"]
    options = AnalyzeOptions(
        spec=spec.target, explain=False, compile=False, bisect=BisectOptions(strategy="top-down", repro_dir=str(tmp_path / "out"))
    )
    report = analyze(spec.builder()(), options)
    [script] = report.bisect.repro_paths
    assert os.path.basename(script) == "ctc_repro_zoo_deep_break_encoder_blocks_1_mixer_probe.py"
    # the failing module's row names its script; no other row has one
    assert {t.module_path: t.repro_path for t in report.bisect.trials if t.repro_path} == {"encoder.blocks.1.mixer.probe": script}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "reproduced: encoder.blocks.1.mixer.probe" in run.stdout
    assert "Data-dependent branching" in run.stdout + run.stderr
    # without the saved inputs it recreates same-shape random ones and still reproduces
    os.remove(tmp_path / "out" / "ctc_repro_zoo_deep_break_encoder_blocks_1_mixer_probe.pt")
    run = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 1, run.stdout + run.stderr


def test_inferred_rows_share_the_repro_script_of_the_module_they_were_inferred_from(tmp_path):
    torch.manual_seed(0)
    spec = FIXTURES["repeated_blocks"]
    options = AnalyzeOptions(
        spec=spec.target, explain=False, compile=False, bisect=BisectOptions(strategy="top-down", repro_dir=str(tmp_path))
    )
    b = analyze(spec.builder()(), options).bisect
    rows = {t.module_path: t for t in b.trials}
    failing = [rows[p] for p in b.smallest_failing]
    representatives = {t.inferred_from if t.inferred_from is not None else t.module_path for t in failing}
    assert len(failing) == 64 and len(b.repro_paths) == len(representatives) < 64  # a script per distinct block
    assert {t.repro_path for t in failing} == set(b.repro_paths)
    assert all(rows[t.inferred_from].repro_path == t.repro_path for t in failing if t.inferred_from is not None)


def test_the_terminal_tree_expands_to_the_failing_modules_and_groups_identical_siblings():
    console = Console(file=io.StringIO(), width=120, record=True)
    render_summary(bisected("repeated_blocks"), console)
    text = console.export_text()
    assert "blocks.0 to blocks.63 (64×) GuardedBlock" in text
    assert "← smallest failing" in text and "GB0170" in text
    console = Console(file=io.StringIO(), width=120, record=True)
    render_summary(bisected("deep_break"), console)
    text = console.export_text()
    assert "probe NanProbe" in text and "blocks.0 DeepBlock +4 submodule(s)" in text
    assert "FAILS fullgraph=True (bisection only)" in text


# --- through the CLI ---------------------------------------------------------------------------


def test_bisect_command_writes_the_report_and_a_repro_beside_it(cli, tmp_path):
    out = tmp_path / "report.json"
    result = cli("bisect", "ctc_doctor.fixtures.zoo:parent_break", "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.bisect.smallest_failing == ["body"] and report.bisect.agreement
    assert report.bisect.repro_paths == [str(tmp_path / "ctc_repro_zoo_parent_break_body.py")]
    assert (tmp_path / "ctc_repro_zoo_parent_break_body.py").exists()
    # another model's repros in the same directory do not overwrite these: the names carry the target
    other = cli("bisect", "tests/targets/user_targets.py:printing_model", "--json", str(tmp_path / "other.json"))
    assert other.returncode == 0, other.stderr
    assert sorted(p.name for p in tmp_path.glob("ctc_repro_*.py")) == [
        "ctc_repro_user_targets_printing_model_root.py",
        "ctc_repro_zoo_parent_break_body.py",
    ]
    assert "← smallest failing" in result.stdout


def test_the_full_run_bisects_when_it_finds_breaks_and_not_when_told_not_to(cli):
    result = cli("demo", "--fixture", "print_in_forward", "--json", "-", "-q", "--no-bench")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["bisect"]["strategy"] == "top-down"
    assert data["bisect"]["smallest_failing"] == ["head"]
    assert data["summary"]["analysis_run"] is True and data["summary"]["graph_break_count"] >= 1
    result = cli("demo", "--fixture", "print_in_forward", "--json", "-", "-q", "--no-bench", "--no-bisect")
    assert json.loads(result.stdout)["bisect"] is None
    torch.manual_seed(0)
    clean = analyze(FIXTURES["clean"].builder()(), AnalyzeOptions(explain=False, bisect=BisectOptions()))
    assert clean.bisect is None  # no break: nothing to bisect


def test_isolated_trials_turn_a_segfaulting_compile_into_a_crashed_row(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bisect", "user_targets:one_linear", "--isolate", "--backend", "ctc_test_segfault", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    [row] = report.bisect.trials
    assert row.status == "crashed" and "SIGSEGV" in row.reason
    # how the child died and its last words, as a crashed benchmark arm carries them
    assert row.crash == "SIGSEGV" and row.stderr_tail[-1] == "ctc_test: compiling, segfaulting"
    assert report.bisect.isolated and report.summary.verdict == "failed"


def test_each_segfault_costs_one_row_and_the_next_trial_gets_a_new_child(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli(
        "bisect", "user_targets:small", "--isolate", "--strategy", "top-down", "--backend", "ctc_test_segfault", "--json", str(out), "-q"
    )
    assert result.returncode == 0, result.stderr
    b = load_report(out).bisect
    assert [t.status for t in b.trials] == ["crashed"] * 3 and all("SIGSEGV" in t.reason for t in b.trials)
    assert b.child_processes == b.trial_count == 3


def test_one_child_serves_every_isolated_trial_and_agrees_with_in_process_trials(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bisect", "ctc_doctor.fixtures.zoo:deep_break", "--isolate", "--strategy", "top-down", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    isolated = load_report(out).bisect
    in_process = bisected("deep_break", "top-down").bisect
    assert isolated.isolated and isolated.child_processes == 1 and isolated.trial_count > 5
    assert isolated.smallest_failing == in_process.smallest_failing == ["encoder.blocks.1.mixer.probe"]
    assert [(t.module_path, t.status) for t in isolated.trials] == [(t.module_path, t.status) for t in in_process.trials]


def test_isolated_trials_find_the_model_after_its_first_call_as_in_process_trials_do(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bisect", "ctc_doctor.fixtures.zoo:lazy_setup_under_lock", "--isolate", "--strategy", "top-down", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    isolated = load_report(out).bisect
    assert isolated.smallest_failing == bisected("lazy_setup_under_lock", "top-down").bisect.smallest_failing == []


def test_a_workload_the_child_cannot_rebuild_fails_every_trial_with_its_reason_and_no_retry(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bisect", "user_targets:fails_when_rebuilt", "--isolate", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    b = load_report(out).bisect
    assert b.trials and all(t.status == "crashed" and "only mounted in the parent" in t.reason for t in b.trials)
    assert b.child_processes == 1


def test_a_full_run_with_the_benchmark_isolates_by_default_with_a_child_started_before_the_analysis(cli, tmp_path):
    out = tmp_path / "r.json"
    common = ("demo", "--fixture", "parent_break", "--no-fix", "--bench-backend", "eager", "--iters", "1", "--warmup", "0", "-q")
    result = cli(*common, "--json", str(out))
    assert result.returncode == 0, result.stderr
    b = load_report(out).bisect
    assert b.isolated and b.child_processes == 1 and b.smallest_failing == ["body"]
    result = cli(*common, "--no-isolate", "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert not load_report(out).bisect.isolated


def test_a_hang_in_an_isolated_trial_is_cut_by_the_childs_own_limit_and_the_child_goes_on(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli(
        "bisect",
        "user_targets:hangs_while_tracing",
        "--isolate",
        "--strategy",
        "top-down",
        "--trial-timeout",
        "3",
        "--json",
        str(out),
        "-q",
    )
    assert result.returncode == 0, result.stderr
    b = load_report(out).bisect
    rows = {t.module_path: t.status for t in b.trials}
    # `before` and `after` are alike (no gradient flows under no_grad): one passes, the other is inferred from it
    assert rows[""] == "timeout" and rows["slow"] == "timeout" and {rows["before"], rows["after"]} == {"passed", "inferred"}
    assert b.child_processes == 1


def test_isolated_trials_agree_with_in_process_trials(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("bisect", "user_targets:printing_model", "--isolate", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    isolated = load_report(out).bisect
    assert isolated.smallest_failing == [""] and isolated.trial_count == 1 and isolated.child_processes == 1
    [row] = isolated.trials
    assert row.status == "failed" and row.gb_type == "Failed to trace builtin operator" and "GB0059" in row.registry_ids
    assert row.user_frame is not None and row.user_frame.file.endswith("user_targets.py")


def test_bisect_of_a_target_that_is_not_a_module_is_a_one_line_usage_error(cli):
    result = cli("bisect", "user_targets:plain_function", "-q")
    assert result.returncode == 4
    assert result.stderr.strip().splitlines()[-1].startswith("ctc-doctor: error: bisect needs an nn.Module")
    assert "Traceback" not in result.stderr


@pytest.mark.fast
def test_module_inputs_are_recorded_and_the_trials_child_started_only_when_the_compile_breaks():
    """A full run records each module's first-call inputs for the bisection, and starts the trials' child,
    only once the compiled pass broke the graph: a model that compiles whole keeps no copy of its
    modules' inputs and starts no second torch; one that breaks gets both (`bisect.always` records anyway)."""
    from ctc_doctor.analyzer.phases.context import PhaseContext
    from ctc_doctor.analyzer.phases.observe import ObserveOptions, run_observe
    from ctc_doctor.analyzer.running.calls import calls_on
    from ctc_doctor.analyzer.running.settings import RunSettings
    from ctc_doctor.fixtures import zoo

    def observe(workload: Workload, **kw) -> tuple[object, int]:
        started = []
        ctx = PhaseContext(workload=workload, calls=calls_on(workload, None), settings=RunSettings(seed=0))
        options = ObserveOptions(explain=False, record_inputs=True, on_broken=lambda: started.append(1), **kw)
        return run_observe(ctx, options).module_inputs, len(started)

    inputs, started = observe(zoo.clean(), inputs_if_broken=True)
    assert inputs is None and started == 0
    inputs, started = observe(zoo.print_in_forward(), inputs_if_broken=True)
    assert inputs is not None and inputs.inputs and started == 1
    inputs, started = observe(zoo.clean(), inputs_if_broken=False)  # --bisect-always: recorded whatever it finds
    assert inputs is not None and inputs.inputs and started == 0


@pytest.mark.fast
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))])
def test_recorded_module_inputs_are_kept_on_the_host_and_each_trial_gets_them_back_on_the_device(device, tmp_path):
    """Every module's first inputs together are about one forward pass's activations: on an accelerator
    they are kept in host memory (with the device they ran on) and each trial's copy goes back there, its
    requires_grad and its memo signature as the call had them; on the CPU nothing moves, nor does a call
    that holds an object. The inputs file a trial's child or a repro reads carries the device too."""
    from ctc_doctor.analyzer.capture.inputs import CapturedCall, ModuleInputs, accelerator_of
    from ctc_doctor.analyzer.phases.bisect.trials import saveable
    from ctc_doctor.analyzer.running.modules import describe_inputs

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).to(device)
    inputs = ModuleInputs(model)
    x = torch.randn(3, 8, device=device, requires_grad=True)
    with inputs.record():
        model(x)
    captured = inputs.inputs["0"]
    kept = captured.args[0]
    assert kept.device.type == "cpu" and captured.device == (None if device == "cpu" else str(x.device))
    assert kept.data_ptr() != x.data_ptr() and torch.equal(kept.cpu(), x.detach().cpu())
    assert captured.signature == f"tuple(tuple(float32[3, 8]@{device}+g),{{}})" and inputs.calls["0"] == 1
    (again,), _ = captured.fresh()
    assert again.device == x.device and again.requires_grad and again.is_leaf and torch.equal(again, x.detach())
    assert (
        describe_inputs(captured.args, captured.kwargs, ["x"], captured.device)
        == f"x: float32[3, 8]{'' if device == 'cpu' else f'@{x.device}'}"
    )
    assert accelerator_of((x, {"y": x.detach().cpu()})) is None  # two devices: the copies stay where they were
    assert accelerator_of((torch.empty(2, device="meta"),)) is None
    # an object (a KV cache) is copied where it is: a host copy of it would come back whole from deepcopy
    assert accelerator_of((x, {"cache": types.SimpleNamespace(k=x)}, 3, None)) is None

    path = tmp_path / "inputs.pt"
    assert saveable(captured, str(path))
    data = torch.load(path, weights_only=True)
    loaded = CapturedCall(tuple(data["args"]), dict(data["kwargs"]), bool(data["grad_enabled"]), "", device=data.get("device"))
    assert loaded.fresh()[0][0].device == x.device and data["args"][0].device.type == "cpu"


class _Add(nn.Module):
    def forward(self, x, s):
        return x + s


class _Written(nn.Module):
    """Passes one state tensor to two children, written in place between their calls."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _Add(), _Add()
        self.register_buffer("state", torch.zeros(2))

    def forward(self, x):
        self.state.add_(1)
        y = self.a(x, self.state)
        self.state.data.add_(1)  # moves no version counter (as a custom kernel's write)
        return self.b(y, self.state)


def test_a_kv_cache_every_layer_receives_is_copied_once_per_layers_entry_and_replays_exactly():
    """A transformers decoder hands its KV cache to every layer: each layer's recorded copy held the cache as
    filled so far, a copy per call (the square of the layer count in all); now a tensor unchanged since an
    earlier call's copy (same object, same version) lends that copy, so each layer's keys and values are
    copied once, and each layer replayed from its copy gives what it gave in the forward. A tensor written
    in place between two calls (through `.data` too, which moves no version counter) is copied again for
    the second; inference tensors are copied each time."""
    import transformers

    from ctc_doctor.analyzer.capture.inputs import ModuleInputs

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4
    )
    model = transformers.LlamaForCausalLM(config).eval()
    outs = {}
    hooks = [layer.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o)) for i, layer in enumerate(model.model.layers)]
    inputs = ModuleInputs(model)
    with inputs.record(), torch.no_grad():
        model(torch.randint(0, 100, (2, 16)))
    for h in hooks:
        h.remove()
    caches = [inputs.inputs[f"model.layers.{i}"].kwargs["cache"] for i in range(6)]
    first = caches[1].layers[0].keys
    assert all(c.layers[0].keys is first for c in caches[2:]), "layer 0's keys copied once, lent to every later layer's call"
    for i in (0, 3, 5):
        args, kwargs = inputs.inputs[f"model.layers.{i}"].fresh()
        assert kwargs["cache"].layers[0].keys is not first  # each replay gets its own copy
        with torch.no_grad():
            out = model.model.layers[i](*args, **kwargs)
        assert torch.equal(out[0] if isinstance(out, tuple) else out, outs[i][0] if isinstance(outs[i], tuple) else outs[i])

    written = _Written()
    inputs = ModuleInputs(written)
    with inputs.record():
        written(torch.ones(2))
    assert inputs.inputs["a"].args[1].tolist() == [1.0, 1.0] and inputs.inputs["b"].args[1].tolist() == [2.0, 2.0]
    with torch.inference_mode():  # inference tensors keep no version counter: copied each time, no error
        x = torch.ones(2)
        inputs = ModuleInputs(written)
        with inputs.record():
            written(x)
    assert inputs.inputs["b"].args[1].tolist() == [4.0, 4.0]


def test_a_bisection_stopped_by_a_signal_keeps_the_trials_it_ran(tmp_path):
    """SIGTERM (a job's time limit) in the middle of a bisection: the report is written with the trials run
    before the stop, each with its status (they were dropped), the modules not reached untried, and no
    pass claimed ("no answer"); the run ends with exit 130."""
    import signal

    from ctc_doctor.errors import ExitCode
    from ctc_doctor.progress import ProgressEvent, Step

    from .conftest import REPO

    out = tmp_path / "r.json"
    read, write = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    args = [sys.executable, "-m", "ctc_doctor", "bisect", "user_targets:slow_trials", "--no-memo", "--strategy", "bottom-up"]
    args += ["--json", str(out), "--progress-fd", str(write)]
    parent = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write,))
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as events:
        for line in events:
            event = ProgressEvent.parse(line)
            if event is not None and event.step is Step.BISECT and event.subject == "2":  # blocks 0 and 1 tried
                parent.send_signal(signal.SIGTERM)
                break
    stdout, stderr = parent.communicate(timeout=120)
    assert parent.returncode == ExitCode.INTERRUPTED, stderr
    report = load_report(out)
    assert report.errors[-1].phase == "interrupted" and report.errors[-1].type == "SIGTERM"
    b = report.bisect
    assert b is not None and not b.smallest_failing and b.trial_count >= 2, b
    rows = {t.module_path: t for t in b.trials}
    assert rows["0"].status == rows["1"].status == "passed" and rows["5"].status == "skipped", rows
    assert "5" in b.untried and "" in b.untried and rows["5"].reason.startswith("untried"), b.untried
    assert any(n.startswith("SIGTERM stopped the bisection: ") for n in b.notes), b.notes
    assert report.summary.verdict == "failed" and "NO ANSWER: the bisection stopped" in stdout, stdout
