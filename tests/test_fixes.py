"""Suggestions, verified fixes on a copy, shape probing and the benchmark, on real compiles."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
from markdown_it import MarkdownIt

from ctc_doctor import AnalyzeOptions, BenchOptions, FixOptions, Workload, analyze
from ctc_doctor.analyzer import torch_internals as ti
from ctc_doctor.analyzer.fixes.rewrite import RewriteError, plan_rewrite
from ctc_doctor.analyzer.fixes.variants import make_variant
from ctc_doctor.analyzer.services.target import load_workload
from ctc_doctor.fixtures import zoo
from ctc_doctor.fixtures.registry import all_fixtures, marker_line
from ctc_doctor.reports import SCHEMA_VERSION, load_report
from ctc_doctor.reports.advice import next_steps
from ctc_doctor.reports.advice.guard_kinds import guard_kind
from ctc_doctor.reports.markdown import render_markdown

from .conftest import PRINTING_NET, TARGETS, analyzed, fixed, run_cli

# Rules that must fire on each fixture (others may fire too).
RULES = {
    "print_in_forward": {"print-guard", "print-reorder"},
    "logging_call": {"logger-ignore", "logger-guard"},
    "item_control_flow": {"keep-tensor", "capture-scalar-outputs"},
    "dynamic_output_shape": {"capture-dynamic-output-shape-ops"},
    "numpy_call": {"numpy-torch", "disable-module"},
    "deepcopy_in_forward": {"deepcopy-outside", "disable-module"},
    "untraceable_call": {"move-untraceable-call", "disable-module"},
    "unsupported_context_manager": {"context-manager", "disable-module"},
    "data_dependent_if": {"branchless-where", "torch-cond"},
    "parent_break": {"branchless-where"},
    "deep_break": {"branchless-where", "state-recompile"},
    "shape_change_dim0": {"mark-dynamic", "dynamic-or-buckets"},
    "shape_change_dim1": {"mark-dynamic"},
    "dtype_change": {"dtype-recompile"},
    "python_scalar_arg": {"scalar-to-tensor"},
    "attribute_toggle": {"state-recompile"},
    "recompile_limit": {"state-recompile", "recompile-limit"},
    "step_counter": {"unspec-int-attribute", "tensor-counter", "recompile-limit"},
    "repeated_blocks": {"branchless-where", "regional-compile", "requires-grad-recompile"},
    "showcase": {"branchless-where", "print-guard", "mark-dynamic", "regional-compile"},
    "lazy_setup_under_lock": {"warm-up-before-compile", "context-manager", "disable-module"},
    "warning_logged_once": {"warm-up-before-compile", "logger-ignore"},
    "transformers_output_capture": {"warm-up-before-compile"},  # the context manager is transformers': not the user's to move
    "two_causes": {"mark-dynamic", "scalar-to-tensor"},
    "transformers_gpt2_positional": {"mark-dynamic", "dynamic-or-buckets"},  # the lengths inside follow the input's: padding bounds them
    "per_layer_cache": {"state-recompile", "regional-compile"},
    "rare_expensive_branch": {"branchless-where", "torch-cond"},
    "train_step": {"logger-ignore", "logger-guard", "mark-dynamic"},
    # the ecosystem's library patterns (no bisection here: their boundary advice is tests/test_advice.py's)
    "pool_size_from_data": {"call-site-argument", "capture-scalar-outputs", "dynamic-or-buckets"},
    "augment_with_net": {"capture-scalar-outputs", "disable-module"},
    "sliding_window_routine": {"capture-scalar-outputs", "mark-dynamic"},
    "ode_solver_routine": {"capture-scalar-outputs", "warm-up-before-compile"},  # the solver's own enum: never "stop changing"
    "static_cache_decoder": set(),  # its one recompile is expected: nothing to suggest
    "last_partial_batch": set(),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_fires_on_its_fixture_and_names_what_it_addresses(name):
    report = analyzed(name)
    rules = {s.rule for s in report.suggestions}
    assert RULES[name] <= rules, rules
    ids = {b.id for b in report.graph_breaks} | {r.id for r in report.recompiles}
    for s in report.suggestions:
        assert set(s.applies_to) <= ids
        assert s.id.startswith("S") and s.title and s.rationale
        assert not s.auto_applicable or s.action is not None
    addressed = {a for s in report.suggestions for a in s.applies_to}
    assert {b.id for b in report.graph_breaks} <= addressed  # every break site gets advice


def test_a_clean_model_gets_no_suggestion():
    assert analyzed("clean").suggestions == []


def test_suggestions_link_the_graph_break_page_of_the_gb_id():
    s = next(s for s in analyzed("print_in_forward").suggestions if s.rule == "print-guard")
    assert "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html" in s.references


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


def test_a_guard_kind_without_a_rule_of_its_own_gets_the_kinds_advice():
    # the same shape, other strides (a transposed view): a stride guard fails and the frame recompiles
    x, transposed = torch.randn(4, 6), torch.randn(6, 4).t()
    report = analyze(Workload(_Scale(), (x,), variants=[(transposed,)]), AnalyzeOptions(explain=False))
    assert [g.kind for rc in report.recompiles for g in rc.failed_guards] == ["stride"]
    (advice,) = [s for s in report.suggestions if s.rule == "stride-recompile"]
    assert advice.applies_to == [report.recompiles[0].id]
    assert advice.title.lower() == guard_kind("stride").advice.lower()  # one source of per-kind advice
    assert any(advice.title in step for step in next_steps(report))


@pytest.mark.fast
def test_the_where_rewrite_is_a_minimal_diff_of_the_users_file():
    line = marker_line(zoo.__file__, "data_dependent")
    plan = plan_rewrite(zoo.__file__, [("where", line)])
    assert (plan.class_name, plan.function) == ("Gate", "forward")
    assert "+        return torch.where(x.sum() > 0, x * 2, x)" in plan.diff()
    assert plan.diff().count("\n-") == 3  # the if, its return and the fall-through return


@pytest.mark.fast
def test_keep_tensor_drops_item_and_rewrites_the_branch_that_reads_it():
    plan = plan_rewrite(zoo.__file__, [("keep_tensor", marker_line(zoo.__file__, "item"))])
    diff = plan.diff()
    assert "+        peak = x.abs().max()\n" in diff and "+        x = torch.where(peak > 10.0, x / peak, x)" in diff


@pytest.mark.fast
def test_code_of_another_shape_is_not_rewritten():
    with pytest.raises(RewriteError):
        plan_rewrite(zoo.__file__, [("guard", marker_line(zoo.__file__, "deepcopy"))])  # an assignment, not a call


@pytest.mark.parametrize("name", ["print_in_forward", "item_control_flow", "deepcopy_in_forward", "data_dependent_if", "logging_call"])
def test_the_fix_reduces_the_graph_count_with_outputs_unchanged(name):
    report = fixed(name)
    fix = report.fix
    assert fix is not None and fix.applied, fix
    v = fix.verification
    assert v is not None and v.safe and v.numerics_ok and v.max_abs_error == 0.0
    assert v.after.graphs_compiled < v.before.graphs_compiled
    assert "B1" in v.fixed or name == "deepcopy_in_forward"  # disable moves the break to the module boundary
    for sid in fix.applied:
        s = next(s for s in report.suggestions if s.id == sid)
        assert s.verified is not None and s.verified.effective and s.verified.summary


@pytest.mark.parametrize("name", ["lazy_setup_under_lock", "warning_logged_once"])
def test_a_first_call_break_is_fixed_by_one_eager_call_before_compiling_and_comes_first(name):
    report = fixed(name)
    warm_up = report.suggestions[0]
    assert warm_up.rule == "warm-up-before-compile" and warm_up.action.type == "warm_up"
    assert warm_up.id == report.fix.applied[0]  # preferred: it removes the cause, the others only move it
    assert warm_up.verified.effective and warm_up.verified.fixed == ["B1"] and warm_up.verified.numerics_ok
    assert report.fix.remaining == [] and report.fix.verification.after.graph_count == 1


class _CompileOnlyPrint(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + 1  # a graph before the break: a new shape recompiles this frame, and meets the break again
        if torch.compiler.is_compiling():
            print("compiling")  # a line only compiled code runs: eager never does, fresh or warm
        return y * 2


def test_a_break_on_a_line_only_compiled_code_runs_is_not_kept_as_first_call_only():
    report = analyze(Workload(_CompileOnlyPrint(), (torch.ones(2),)), AnalyzeOptions(explain=False, fix=FixOptions()))
    [site] = report.graph_breaks
    warm_up = next(s for s in report.suggestions if s.rule == "warm-up-before-compile")
    assert warm_up.verified is not None and not warm_up.verified.effective  # the warm-up does not remove it
    assert site.first_call_only is False and any("first_call_only cleared" in n for n in report.notes)
    # a break that a later call's compile meets again is not the first call's either
    again = analyze(Workload(_CompileOnlyPrint(), (torch.ones(2),), variants=[(torch.ones(3),)]), AnalyzeOptions(explain=False))
    assert [s.first_call_only for s in again.graph_breaks] == [False]


def test_the_shape_recompile_fixture_stops_recompiling_with_mark_dynamic():
    report = fixed("shape_change_dim0")
    s = next(s for s in report.suggestions if s.rule == "mark-dynamic")
    assert s.action.argument == "x" and s.action.dims == [0]
    assert s.id in report.fix.applied
    assert report.fix.verification.after.recompile_count == 0 and report.fix.verification.before.recompile_count == 1


def test_a_python_float_recompile_is_fixed_by_passing_a_tensor():
    report = fixed("python_scalar_arg")
    assert report.fix.verification.after.recompile_count == 0
    assert [report.suggestions[0].rule] == ["scalar-to-tensor"]


def test_a_fix_that_does_nothing_is_reported_ineffective_not_applied():
    report = fixed("print_in_forward")  # a print inside an inlined module cannot be reordered
    reorder = next(s for s in report.suggestions if s.rule == "print-reorder")
    assert reorder.id in report.fix.ineffective and reorder.id not in report.fix.applied
    assert reorder.verified.new_sites and "reorder" in reorder.verified.new_sites[0]


def test_a_rewrite_that_changes_results_is_reported_unsafe_and_not_applied():
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:unsafe_branch", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    where = next(s for s in report.suggestions if s.rule == "branchless-where")
    assert where.verified is not None and where.verified.numerics_ok is False and not where.verified.safe
    assert "changes eager results" in where.verified.error
    assert where.id in report.fix.unsafe and where.id not in report.fix.applied


def test_a_fix_that_holds_under_dynamo_but_crashes_aot_autograd_is_not_recommended_and_its_alternative_is(tmp_path):
    """The step counter under `%`: the config option removes the recompiles under the check's `eager`
    backend, but the compile through AOTAutograd crashes (a PyTorch bug on 2.13); the fix is marked
    `breaks the compile`, and the counter kept in a buffer (the next fix for the same cause) is applied.
    The crash comes out ready to file: its stage, the user's line, a repro that fails the same way under
    plain `python`, the issue's text, and the verified fix as the workaround."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:modulo_step", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions(repro_dir=str(tmp_path))))
    option = next(s for s in report.suggestions if s.rule == "unspec-int-attribute")
    buffer = next(s for s in report.suggestions if s.rule == "tensor-counter")
    if option.verified.breaks_compile is None:  # a torch where the option compiles: it is verified through both
        assert option.verified.compiled_on == ["eager", "aot_eager"] and option.verdict == "recommended"
        pytest.skip(f"torch {torch.__version__}: allow_unspec_int_on_nn_module compiles under `%` here")
    assert option.verified.breaks_compile.startswith("aot_eager (AOTAutograd): ")
    assert "BackendCompilerFailed" in option.verified.breaks_compile
    assert option.verdict == "failed" and option.id not in report.fix.applied and "breaks the compile" in option.verdict_reason
    assert buffer.verified.compiled_on == ["eager", "aot_eager"] and buffer.verified.safe and buffer.verdict == "recommended"
    assert report.fix.applied == [buffer.id] and buffer.verified.after.recompile_count == 0
    assert not buffer.title.startswith("Or")  # it reads alone: the option before it failed

    [bug] = report.torch_bugs
    assert (bug.stage, bug.error_type) == ("AOTAutograd", "AttributeError") and "python_mod" in bug.error
    assert bug.tried[0] == "eager (Dynamo only): compiles and runs" and bug.tried[1].startswith("aot_eager (AOTAutograd): AttributeError")
    assert bug.user_line.endswith("fix_targets.py:" + str(marker_line(str(TARGETS / "fix_targets.py"), "modulo")))
    assert bug.repro_verified is True and bug.repro_path == str(tmp_path / "ctc_torch_bug_s1.py")
    again = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode != 0 and "python_mod" in again.stderr  # plain python, no ctc-doctor: the same failure
    issue = (tmp_path / "ctc_torch_bug_s1.md").read_text()
    assert issue.startswith(f"# {bug.issue_title}") and "### Versions" in issue and torch.__version__ in issue and "```python" in issue
    assert bug.workaround_verified and bug.workaround.startswith(f"{buffer.id} instead: ")
    assert bug.suggestion == option.id  # the candidate fix's bug: it stays on that fix
    steps = next_steps(report)
    # the verified change leads; the bug the user does not need to hit is ready to file, last
    assert steps[0].startswith(f"R1,R2,R3 +5: Keep `self.step` in a tensor buffer [{buffer.id}, applied]"), steps
    assert steps[-1].startswith(f"A PyTorch bug in candidate fix {option.id} only, not in your code"), steps
    assert str(tmp_path / "ctc_torch_bug_s1.md") in steps[-1] and not any(s.startswith("PyTorch bug:") for s in steps)
    assert not any(f"[{option.id}," in step for step in steps), steps


def test_a_module_that_is_nearly_the_whole_model_is_never_left_eager_as_a_workaround():
    """The break (a `copy.deepcopy` of a layer) sits in `body`, which holds every layer (as YOLO's `model`
    Sequential): leaving it eager is turning compilation off, so no `torch.compiler.disable` suggestion
    names it (the zoo's deepcopy, in a module that is half its model, keeps one); the deepcopy's own
    advice stays."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:whole_body", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False))
    assert report.graph_breaks and all(site.module_paths == ["body"] for site in report.graph_breaks)
    rules = {s.rule for s in report.suggestions}
    assert "disable-module" not in rules and "deepcopy-outside" in rules, rules


def test_state_a_module_sets_on_its_first_call_gets_one_eager_call_not_stop_changing_it():
    """`self.scales` is None until the first call sets it (torchvision's RoIAlign scales): the second call
    recompiles once. The user never changes it, so the advice is one eager call before compiling
    (verified: 1 recompile -> 0), not "stop changing `self.scales`"."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:lazy_scales", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    assert report.summary.recompile_count == 1
    assert [s.rule for s in report.suggestions] == ["warm-up-before-compile"], [s.title for s in report.suggestions]
    [s] = report.suggestions
    assert s.verdict == "recommended" and (s.verified.before.recompile_count, s.verified.after.recompile_count) == (1, 0)
    assert "stop changing" not in " ".join(next_steps(report)).lower()


def test_a_model_pruned_after_compile_is_one_cause_with_advice_to_prune_first():
    """`torch.nn.utils.prune` after the first compile (before call 2) turns `fc.weight` from a parameter into
    an attribute: the recompile is one cause of kind `changed`, said in plain words with the parameter,
    in the verdict (not an expected one-off), and the advice is to make the change before compiling."""
    import torch.nn.utils.prune  # noqa: F401 - the target's before_call prunes

    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:pruned_after_compile", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False))
    [cause] = report.recompile_causes
    assert cause.kind == "changed" and not cause.expected, cause
    assert cause.summary.startswith("the model changed after compile (`fc.weight`): a parameter was removed or reparametrized")
    assert report.summary.verdict == "recompiles"
    [s] = [s for s in report.suggestions if s.rule == "change-before-compile"]
    assert s.title == "Make the change to `fc.weight` before compiling" and "before call 2" in s.rationale
    assert next_steps(report)[0].startswith("R1: Make the change to `fc.weight` before compiling")
    assert s.action.type == "change_first" and s.action.call == 2 and not s.auto_applicable


def test_make_the_change_before_compiling_is_verified_on_a_copy_pruned_first():
    """The advice is checked as the user would follow it: on a copy, the target's own prune (its before_call
    for call 2) runs before the compile and not again at call 2. The recompile is gone and the results
    from call 2 on are the original's; it is advice (the user moves their own code), never applied."""
    import torch.nn.utils.prune  # noqa: F401 - the target's before_call prunes

    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:pruned_after_compile", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    [s] = [s for s in report.suggestions if s.rule == "change-before-compile"]
    v = s.verified
    assert v is not None and v.applied and v.error is None, v
    assert (v.before.recompile_count, v.after.recompile_count) == (1, 0) and v.effective and v.numerics_ok, v
    assert s.id not in report.fix.applied and s.id not in report.fix.unsafe


def test_a_submodule_swapped_once_after_compile_is_told_to_swap_first_and_a_flip_is_not():
    """`fc` becomes a Sequential before call 2 and stays so: one type recompile, and the advice is to make the
    swap before compiling, verified on a copy swapped first (recompiles 1 -> 0); not "stop changing `fc`",
    which stays the advice for a setting flipped between calls (`attribute_toggle`)."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:swapped_after_compile", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    rules = {s.rule: s for s in report.suggestions}
    assert "state-recompile" not in rules, [s.title for s in report.suggestions]
    s = rules["change-before-compile"]
    assert s.title == "Swap `fc` before compiling" and s.action.type == "change_first" and s.action.call == 2
    assert (s.verified.before.recompile_count, s.verified.after.recompile_count) == (1, 0) and s.verified.numerics_ok
    assert "state-recompile" in {s.rule for s in analyzed("attribute_toggle").suggestions}


def test_a_build_target_whose_compiled_arm_crashes_inside_torch_gets_the_bug_triaged(cli, tmp_path):
    """The user's own `allow_unspec_int_on_nn_module` and a counter under `%`: the benchmark's compiled arm
    crashes in AOTAutograd. The report says it is PyTorch's, at which stage, on which line, writes a repro
    verified under plain python and the issue text beside the report, and checks a workaround on the
    workload's calls (`dynamic=False`); `--repro-dir` puts them elsewhere."""
    out = tmp_path / "r.json"
    repros = tmp_path / "repros"
    target = f"{TARGETS / 'fix_targets.py'}:modulo_step_unspec"
    result = cli("bench", target, "--bench-backend", "aot_eager", "--json", str(out), "--repro-dir", str(repros))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    compiled = next(a for a in report.benchmark.arms if a.name == "compiled")
    if compiled.error is None:
        pytest.skip(f"torch {torch.__version__}: this compile does not crash here")
    assert compiled.error_type and compiled.error.startswith(f"{compiled.error_type}: "), compiled.error  # read, not parsed
    [bug] = report.torch_bugs
    assert bug.where == "the benchmark's compiled arm (aot_eager)" and bug.stage == "AOTAutograd"
    assert bug.user_line.endswith("fix_targets.py:" + str(marker_line(str(TARGETS / "fix_targets.py"), "modulo")))
    assert bug.repro_verified is True and bug.repro_path == str(repros / "ctc_torch_bug_compiled.py")
    assert (repros / "ctc_torch_bug_compiled.md").exists() and not (tmp_path / "ctc_torch_bug_compiled.py").exists()
    assert bug.workaround_verified and "dynamic=False" in bug.workaround
    assert "a PyTorch bug, ready to file" in result.stdout


def test_a_crash_in_the_backends_code_generation_is_staged_reduced_to_its_operation_and_worked_around(cli, tmp_path):
    """A registered backend that cannot lower `tanh` (as an inductor lowering bug): the compiled arm crashes;
    eager and aot_eager compile, so the stage is the backend; the operation is `tanh` in `act`, the repro
    imports the file that registers the backend and fails the same way under plain python, and leaving
    `act` eager is the verified way around. The backend is not PyTorch's: its owner is named. The triage
    runs on the model the analysis holds: the analysing process builds it once."""
    out, builds = tmp_path / "r.json", tmp_path / "builds.txt"
    target = f"{TARGETS / 'user_targets.py'}:with_tanh"
    argv = ("bench", target, "--bench-backend", "ctc_test_no_tanh", "--no-fix", "--json", str(out), "--repro-dir", str(tmp_path))
    result = cli(*argv, env={"CTC_TEST_BUILDS": str(builds)})
    assert result.returncode == 0, result.stderr
    assert len(builds.read_text().split()) == 1, builds.read_text()
    report = load_report(out)
    [bug] = report.torch_bugs
    assert bug.stage == "the backend (ctc_test_no_tanh)" and bug.owner == "user_targets" and bug.kind == "crash", bug
    assert bug.tried[:2] == ["eager (Dynamo only): compiles and runs", "aot_eager (AOTAutograd): compiles and runs"], bug.tried
    assert bug.tried[2].endswith("NotImplementedError: no lowering for tanh (on purpose)"), bug.tried
    assert bug.operation.startswith("tanh("), bug.operation
    assert bug.user_code == "return torch.tanh(x) * 2  # the backend's failing operation"
    assert bug.repro_verified is True, bug.repro_note
    # torch's minifier, with the triage's own test, leaves the failing operation alone (the prefix cut kept 2
    # of the 4 operations and all 5 inputs): the repro PyTorch's maintainers read
    assert (bug.repro_reducer, bug.repro_nodes, bug.graph_nodes) == ("torch's minifier", 1, 4), (bug.repro_reducer, bug.repro_nodes)
    assert "cut down by torch's minifier" in bug.issue_text
    assert bug.workaround_verified and bug.workaround.startswith("leave `act` eager")
    assert "a bug in user_targets's backend, ready to file" in result.stdout
    repro = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert repro.returncode != 0 and "no lowering for tanh" in repro.stderr, repro.stdout + repro.stderr


def test_blocks_compiled_once_per_width_after_a_break_splits_their_loop_are_one_storm_with_one_advice():
    """A YOLO-like loop with a print: the loop breaks, each `_ConvBlock` is a frame of its own, compiled
    once per width until the recompile limit. That is one cause (a storm), not one per tensor that changed,
    and its advice is to remove the break that splits the loop (not `dynamic=True`: the weights differ)."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:layer_loop", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False))
    [cause] = report.recompile_causes
    assert cause.storm and cause.summary.startswith("_ConvBlock.forward compiles once per instance: 11 instances"), cause
    [site] = report.graph_breaks
    [storm] = [s for s in report.suggestions if s.rule == "per-instance-storm"]
    assert storm.title == f"Remove the break that splits the loop over the `_ConvBlock` blocks ({site.id})"
    assert set(cause.recompiles) | {site.id} == set(storm.applies_to)
    assert "dynamic-or-buckets" not in {s.rule for s in report.suggestions}


def test_a_packed_lstm_is_never_left_eager_whole_and_torchs_rnn_option_is_measured_not_trusted():
    """nn.LSTM over a packed batch: Dynamo runs the LSTM eagerly (GB0014) and the packing call breaks
    too. The split already is the smallest region left eager: no `torch.compiler.disable` on the model (or
    the module that calls the LSTM, the root); torch's experimental `allow_rnn` is checked on a copy and
    applied only when it helps."""
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:packed_lstm", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    assert any("GB0014" in site.registry_ids for site in report.graph_breaks), [s.gb_type for s in report.graph_breaks]
    assert not [s for s in report.suggestions if s.rule == "disable-module"], [s.title for s in report.suggestions]
    rules = {s.rule: s for s in report.suggestions}
    if ti.config_has("allow_rnn"):
        rnn = rules["rnn-allow"]
        assert rnn.verified is not None and rnn.verified.summary, rnn
        assert rnn.id not in report.fix.applied or (rnn.verified.effective and rnn.verified.safe), rnn.verified
    else:
        assert "rnn-eager" in rules


def test_fixing_never_modifies_the_users_model_and_a_dim_marked_dynamic_past_a_break_is_counted_through_aot_autograd():
    """The showcase's fixes go on copies: the user's model, its classes and its inputs are untouched. Its
    `mark_dynamic` fix, counted on the `eager` backend, removes 1 recompile of 11 (the functions resumed
    after the breaks recompile on their first sizes there); through AOTAutograd, as inductor compiles it,
    the mark carries past the breaks and all 11 go (inductor's own arm measured 0): the fix is counted
    there, against the unchanged copy counted there, and the fixes together are counted there too."""
    workload = zoo.showcase()
    model = workload.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    classes = {name: type(m) for name, m in model.named_modules()}
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    assert report.fix.applied
    assert {name: type(m) for name, m in model.named_modules()} == classes
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert "forward" not in vars(model.head)
    assert not hasattr(workload.args[0], "_dynamo_dynamic_indices")  # marks went on copies

    mark = next(s for s in report.suggestions if s.rule == "mark-dynamic")
    v = mark.verified
    assert v.counted_on == "aot_eager" and v.compiled_on == ["eager", "aot_eager"] and v.safe and v.effective, v
    assert v.before.recompile_count == 11 and v.after.recompile_count == 0 and v.after.unique_break_sites == 2, v.summary
    [note] = [n for n in report.fix.notes if n.startswith(f"{mark.id} is counted through AOTAutograd")]
    assert "where Dynamo alone (the eager backend) compiled 16 graph(s)" in note and "recompiles 11 -> 10" in note, note
    where = next(s for s in report.suggestions if s.rule == "branchless-where")
    assert where.verified.counted_on is None and where.verified.compiled_on == ["eager", "aot_eager"]
    together = report.fix.verification
    assert mark.id in report.fix.applied and together.counted_on == "aot_eager" and together.after.recompile_count == 0


@pytest.mark.parametrize("first", ["from the start", "once a check finds it"])
def test_with_gradients_on_every_fix_of_the_showcase_is_counted_through_aot_autograd_against_one_baseline(monkeypatch, first):
    """With gradients on, the unchanged showcase compiles 17 graphs on the `eager` backend and 15 through
    AOTAutograd (as inductor does): a fix counted on eager against 17 and another through AOTAutograd
    against 15 would not compare. Every fix, and the fixes together, are counted through AOTAutograd
    against the unchanged copy counted there: from the start (gradients on and the `eager` backend), or,
    when the analysis did not foresee it, once a fix's check finds the two backends count it otherwise and
    the unchanged copy too, every fix checked before is checked again there."""
    from ctc_doctor.analyzer.phases import fix

    if first != "from the start":
        monkeypatch.setattr(fix._Fixer, "count_through_aot_autograd", lambda self: None)
    workload = zoo.showcase()
    workload.grad = True
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    checked = {s.rule: s.verified for s in report.suggestions if s.verified is not None}
    assert {"branchless-where", "print-guard", "mark-dynamic"} <= set(checked), checked
    assert all(v.counted_on == "aot_eager" and v.before.graphs_compiled == 15 for v in checked.values()), checked
    assert checked["mark-dynamic"].after.recompile_count == 0 and checked["print-guard"].after.graphs_compiled == 12
    together = report.fix.verification
    assert together.counted_on == "aot_eager" and (together.before.graphs_compiled, together.after.graphs_compiled) == (15, 1)
    why = (
        "With gradients on, each fix is counted through AOTAutograd"
        if first == "from the start"
        else "every fix is checked through AOTAutograd"
    )
    assert sum(why in n for n in report.fix.notes) == 1, report.fix.notes


def test_a_source_patch_binds_the_rewritten_method_to_the_copy_only():
    report = analyzed("print_in_forward")
    s = next(s for s in report.suggestions if s.rule == "print-guard")
    workload = zoo.print_in_forward()
    variant = make_variant(workload.model, workload.calls(), [s.action])
    assert type(variant.model.head).__name__ == "PrintingHead" and type(variant.model.head) is not zoo.PrintingHead
    assert type(workload.model.head) is zoo.PrintingHead
    assert torch.equal(variant.model(*workload.args), workload.model(*workload.args))


@pytest.mark.transformers
def test_a_transformers_loss_chosen_in_python_gets_loss_type_set_and_the_break_goes_away():
    workload = load_workload(f"{TARGETS / 'fix_targets.py'}:gpt2_with_labels", seed=0)
    report = analyze(workload, AnalyzeOptions(explain=False, fix=FixOptions()))
    s = next(s for s in report.suggestions if s.rule == "transformers-loss-type")
    assert s.action.attribute == "loss_type" and s.id in report.fix.applied
    assert report.fix.verification.after.unique_break_sites == 0


def test_shape_probe_finds_the_dims_that_recompile_and_verifies_mark_dynamic():
    report = analyze(zoo.shape_change_dim1(), AnalyzeOptions(explain=False, probe_shapes=True))
    p = report.shape_probe
    outcomes = {(d.argument, d.dim): d.outcome for d in p.dims}
    assert outcomes == {("x", 0): "recompiles", ("x", 1): "recompiles", ("x", 2): "eager_rejects"}
    assert p.recommended == ["torch._dynamo.mark_dynamic(x, 0)", "torch._dynamo.mark_dynamic(x, 1)"]
    assert p.verified is True


def test_the_benchmark_measures_every_arm_with_counts_and_numerics():
    report = analyze(
        zoo.print_in_forward(),
        AnalyzeOptions(explain=False, fix=FixOptions(), bench=BenchOptions(backend="eager", iters=3, warmup=1)),
    )
    b = report.benchmark
    arms = {a.name: a for a in b.arms}
    assert list(arms) == ["eager", "compiled", "compiled_fixed"]
    assert arms["compiled"].graph_count == 2 and arms["compiled"].graph_break_count >= 1
    assert arms["compiled_fixed"].graph_count == 1 and arms["compiled_fixed"].graph_break_count == 0
    for arm in b.arms:
        # 3 passes, more (up to 9) while the spread is wide
        assert arm.error is None and 3 <= arm.latency_ms.n <= 9 and arm.latency_ms.median > 0
        assert arm.speedup_vs_eager is not None
    for arm in b.arms[1:]:
        # no compile cache with backend eager: no warm-cache compile, and the settings say why
        assert arm.numerics_ok and arm.compile_time_s > 0 and arm.warm_compile_time_s is None
    assert b.best_arm in arms and b.settings["grad"] == "no_grad"
    assert b.settings["warm_compile"].startswith("not measured: backend eager has no compile cache")


def test_repeated_blocks_get_a_regional_arm_whose_saving_is_recorded_on_the_suggestion():
    report = analyze(
        zoo.repeated_blocks(),
        AnalyzeOptions(explain=False, fix=FixOptions(), bench=BenchOptions(backend="eager", iters=1, warmup=0)),
    )
    arms = {a.name: a for a in report.benchmark.arms}
    assert "regional_fixed" in arms and arms["regional_fixed"].numerics_ok
    regional = next(s for s in report.suggestions if s.rule == "regional-compile")
    assert regional.verified is not None and "cold compile" in regional.verified.summary
    assert len(regional.action.module_paths) == 64


def test_cuda_graph_arms_mark_each_call_a_step_and_record_why_graphs_ran_without_them(monkeypatch):
    """The harness logic of reduce-overhead, on CPU: torch's `cudagraphs` backend runs the same CUDA
    graph trees (and on CPU skips them, saying why). Each call of every pass of a compiled arm, the
    regional one included, begins with a step mark, and the arm records the skips and their reason."""
    from ctc_doctor.analyzer import torch_internals as ti

    marks = []
    mark = ti.cudagraph_mark_step_begin  # torch's own mark still runs; its counter resets with dynamo

    def counted() -> None:
        marks.append(1)
        mark()

    monkeypatch.setattr(ti, "cudagraph_mark_step_begin", counted)
    workload = dataclasses.replace(zoo.repeated_blocks(), grad=None)  # served as inference is: under no_grad
    calls = len(workload.calls())
    report = analyze(workload, AnalyzeOptions(explain=False, bench=BenchOptions(backend="cudagraphs", iters=2, warmup=1, max_iters=2)))
    arms = {a.name: a for a in report.benchmark.arms}
    assert arms["eager"].cudagraphs is None and set(arms) >= {"compiled", "regional"}
    compiled = [a for a in report.benchmark.arms if a.cudagraphs is not None]
    assert [a.name for a in compiled] == [a.name for a in report.benchmark.arms if a.name != "eager"]
    # per arm: the cold pass, 1 warm-up and 2 timed passes, each call one step (no warm-cache pass: the
    # cudagraphs backend has no compile cache)
    assert len(marks) == len(compiled) * 4 * calls
    for arm in compiled:
        g = arm.cudagraphs
        assert arm.error is None and arm.numerics_ok, arm.error
        assert g.step_marked and g.recordings == 0
        assert list(g.skips) == ["skipping cudagraphs due to cpu device (arg0_1)."], g.skips
        # the counter, read across the cold and warm-cache compiles, agrees with the log
        assert g.skip_count == sum(g.skips.values()) >= 2
    assert "compiled CUDA graphs, each call a step" in render_markdown(report)


@pytest.mark.inductor
def test_inductor_benchmark_uses_a_fresh_cache_per_arm_and_matches_eager():
    """Every compiled arm compiles cold in an empty cache, but `compiled_fixed`: the fix phase compiled the
    same fixes on inductor (the user's backend) in an empty cache it kept for it, so the arm compiles from
    there and takes that compile's cold figures, said; the folder goes with the session."""
    import tempfile

    def kept_folders():
        return {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("ctc-fixed-compile-")}

    before = kept_folders()
    report = analyze(
        zoo.print_in_forward(),
        AnalyzeOptions(explain=False, fix=FixOptions(user_backend="inductor"), bench=BenchOptions(backend="inductor", iters=2, warmup=1)),
    )
    b = report.benchmark
    assert b.settings["fresh_cache"] is True and report.fix.on_backend.ran == report.fix.applied
    for arm in b.arms[1:]:
        assert arm.error is None and arm.numerics_ok, arm
        # the warm-cache compile: on compiled and compiled_fixed, whose figures the verdicts read
        assert arm.compile_time_s > 0 and (arm.warm_compile_time_s is not None) == (arm.name in ("compiled", "compiled_fixed")), arm
    fixed = next(a for a in b.arms if a.name == "compiled_fixed")
    assert fixed.settings["cold_compile"].startswith("the fix phase's compile of the same graphs on inductor ("), fixed.settings
    assert fixed.warm_compile_time_s < fixed.compile_time_s and "cold_compile" not in b.arms[1].settings
    assert kept_folders() == before


def test_fix_and_bench_commands_write_the_sections_and_markdown_shows_them(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("fix", "ctc_doctor.fixtures.zoo:item_control_flow", "--json", str(out), "-q", "--no-explain", "--no-bisect")
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.fix.applied and report.benchmark is None
    result = cli(
        "bench",
        "ctc_doctor.fixtures.zoo:item_control_flow",
        "--bench-backend",
        "eager",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--json",
        str(out),
        "--no-explain",
    )
    assert result.returncode == 0, result.stderr
    assert "benchmark: eager" in result.stdout and "compiled_fixed" in result.stdout
    report = load_report(out)
    assert [a.name for a in report.benchmark.arms] == ["eager", "compiled", "compiled_fixed"]
    text = render_markdown(report)
    tokens = MarkdownIt("gfm-like").parse(text)
    headings = [t.content for t, o in zip(tokens[1:], tokens[:-1], strict=True) if o.type == "heading_open"]
    assert "Suggestions" in headings and "Benchmark" in headings
    assert sum(1 for t in tokens if t.type == "table_open") >= 3  # sites, suggestions, benchmark
    assert "```diff" in text and "keep-tensor" not in text  # the diff is shown; rule ids stay in the JSON
    assert json.loads(out.read_text())["schema_version"] == SCHEMA_VERSION == "1.27"


@pytest.mark.fast
def test_every_fixture_suggestion_set_is_covered_by_the_rules_table():
    names = {n for n, spec in all_fixtures().items() if spec.expected.breaks or spec.expected.recompile_kinds}
    assert names - set(RULES) <= {"transformers_gpt2"}  # gpt2's recompile is covered by mark-dynamic below


def test_torch_log_records_of_a_failed_fix_go_to_the_notes_not_the_terminal(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli(f"{TARGETS / 'fix_targets.py'}:length_specialized", "-q", "--no-bench", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # torch's 30-line "Error while creating guard" traceback stays off stderr
    report = load_report(out)
    s = next(s for s in report.suggestions if s.rule == "mark-dynamic")
    assert s.id in report.fix.unsafe and "ConstraintViolationError" in s.verified.error
    logged = [n for n in report.notes if n.startswith("torch log during the run")]
    assert any("ERROR torch._guards: Error while creating guard: ConstraintViolationError" in n for n in logged), report.notes


def test_cuda_graphs_are_suggested_on_cuda_but_never_when_the_script_already_compiles_in_that_mode():
    from ctc_doctor.analyzer.phases.suggest import suggest
    from ctc_doctor.reports.models import CompiledObject

    report = analyzed("shape_change_dim0").model_copy(deep=True)
    report.environment.device = "cuda:0"
    assert "mode-reduce-overhead" in {s.rule for s in suggest(report, None)}
    report.compiled = [CompiledObject(name="LlamaForCausalLM", kind="method", options={"mode": "'reduce-overhead'"})]
    assert "mode-reduce-overhead" not in {s.rule for s in suggest(report, None)}


def test_a_length_that_drops_to_one_is_an_expected_one_off_with_no_dynamic_or_padding_advice():
    """Prefill then one-token steps (8 -> 1 -> 1), without a `generate` driver or a cache that grows: torch
    specializes size 1, so the recompile is paid once whatever the user does; it is expected (out of the
    verdict), and neither mark_dynamic, `dynamic=True` nor padding (which would break a cache's positions)
    is offered for it."""

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x).softmax(-1)

    calls = [(torch.randn(2, 1, 4),), (torch.randn(2, 1, 4),)]
    report = analyze(Workload(Step(), args=(torch.randn(2, 8, 4),), variants=calls), AnalyzeOptions(explain=False))
    assert report.summary.recompile_count >= 1 and report.summary.expected_recompiles == report.summary.recompile_count
    assert all(rc.expected and rc.expected.startswith("a size of 1, once") for rc in report.recompiles)
    assert report.summary.verdict == "clean" and not report.suggestions, [s.rule for s in report.suggestions]
    [cause] = report.recompile_causes
    assert cause.recurrence == "one_off" and cause.values == ["8", "1"]


def test_the_verified_edits_come_out_as_a_patch_git_applies_and_write_refuses_a_changed_file(cli, tmp_path):
    """`fix --diff`: one patch on stdout, paths relative to the repository root, that `git apply` takes (the
    model's own prints kept off stdout); after it, a re-analysis finds no break. `fix --write` makes the
    same edit in place, and refuses (exit 13, nothing written) a file changed since the analysis."""
    repo = tmp_path / "repo"
    (repo / "proj").mkdir(parents=True)
    source = PRINTING_NET + (
        "        scores = torch.relu(h)\n"
        "        if scores.sum() > 0:\n"
        "            scores = scores * 2\n"
        "        return scores\n\n\n"
        "def build():\n"
        "    return Net(), (torch.randn(4, 8),)\n"
    )
    models = repo / "proj" / "models.py"
    models.write_text(source)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    out = tmp_path / "r.json"
    result = cli("fix", "models.py:build", "--diff", "--no-bisect", "-q", "--json", str(out), cwd=repo / "proj")
    assert result.returncode == 0, result.stderr
    patch = result.stdout
    assert patch.startswith("--- a/proj/models.py\n+++ b/proj/models.py\n"), patch  # from the repository root
    assert "+        if not torch.compiler.is_compiling():" in patch and "torch.where(" in patch
    assert "h torch.Size" not in patch  # the model's prints went to stderr
    (tmp_path / "p.patch").write_text(patch)
    subprocess.run([*git, "apply", str(tmp_path / "p.patch")], check=True)
    again = cli("models.py:build", "--no-bisect", "--no-fix", "--no-bench", "-q", "--json", str(out), cwd=repo / "proj")
    assert again.returncode == 0 and load_report(out).summary.verdict == "clean", again.stderr
    patched = models.read_text()
    models.write_text(source)
    result = cli("fix", "models.py:build", "--write", "--no-bisect", "-q", cwd=repo / "proj")
    assert result.returncode == 0 and "wrote proj/models.py (" in result.stderr, result.stderr
    assert models.read_text() == patched  # the same edit as the patch
    models.write_text(source)
    report = cli("fix", "models.py:build", "--no-bisect", "-q", "--json", str(out), cwd=repo / "proj")
    assert report.returncode == 0
    models.write_text(source + "# edited after the analysis\n")
    from ctc_doctor.cli.patches import emit, is_library

    said: list[str] = []
    assert emit(load_report(out), diff=False, write=True, say=said.append) == 13
    assert said == ["error: proj/models.py changed since the analysis: not written (run the analysis again)"]
    assert models.read_text().endswith("# edited after the analysis\n")
    assert is_library("/usr/lib/python3/site-packages/transformers/modeling_utils.py")
    bad = cli("fix", "models.py:build", "--diff", "--json", "-", cwd=repo / "proj")
    assert bad.returncode == 2 and "--diff prints the patch on stdout" in bad.stderr


@pytest.mark.fast
def test_a_measured_baseline_names_only_what_the_report_found_and_a_check_never_claims_another_of_its_ids():
    """A baseline measured on the replayed calls or on another backend (the saved showcase's own findings,
    plus a break site and a recompile the report never had): what matches carries the report's id, what
    does not carries none, so its own numbering (B1, R1) cannot name one of the report's as fixed."""
    from ctc_doctor.analyzer.capture.live import Findings
    from ctc_doctor.analyzer.phases.fix.check import with_report_ids

    from .conftest import saved

    report = saved("analyzed-showcase")
    site = report.graph_breaks[0]
    other_site = site.model_copy(
        update={"id": "B1", "user_frame": site.user_frame.model_copy(update={"line": site.user_frame.line + 1000})}
    )
    rc = report.recompiles[0]
    other_rc = rc.model_copy(update={"id": "R1", "function": "another_function"})
    measured = Findings([*report.graph_breaks, other_site], [*report.recompiles, other_rc], report.graphs, [], [], [], [], {}, 0)
    base = with_report_ids(measured, report)
    assert [s.id for s in base.graph_breaks] == [s.id for s in report.graph_breaks] + [""]
    assert [r.id for r in base.recompiles] == [r.id for r in report.recompiles] + [""]
    assert base.summary.unique_break_sites == report.summary.unique_break_sites + 1


def test_recommended_means_it_ran_on_your_backend_a_fix_that_breaks_it_there_is_marked_and_the_rest_stay(cli, tmp_path):
    """Four fixes pass their checks on eager and aot_eager; the user's backend (`ctc_test_no_where`, which
    fails on `torch.where` as inductor fails on some operations) breaks on the applied set. The fix at fault
    is found alone there, marked "breaks the compile on <backend>" with its bug triaged, and the other three
    stay applied and recommended, compiled there together."""
    out = tmp_path / "r.json"
    result = cli(
        "fix", f"{TARGETS / 'user_targets.py'}:four_problems", "--no-bisect", "--fix-backend", "ctc_test_no_where",
        "--json", str(out), "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    by_rule = {s.rule: s for s in report.suggestions}
    where = by_rule["branchless-where"]
    check = report.fix.on_backend
    assert check is not None and check.backend == "ctc_test_no_where" and check.breaks == [where.id], check
    assert len(check.ran) == 3 and set(check.ran) == set(report.fix.applied) and where.id not in report.fix.applied
    assert check.compiles >= 2 and where.id in report.fix.unsafe
    assert where.verdict == "failed" and "breaks the compile on ctc_test_no_where" in where.verified.summary
    [bug] = [b for b in report.torch_bugs if b.suggestion == where.id]
    assert bug.stage == "the backend (ctc_test_no_where)" and "torch.where is not supported" in bug.error
    for sid in check.ran:
        kept = next(s for s in report.suggestions if s.id == sid)
        assert kept.verdict == "recommended" and "ctc_test_no_where" in kept.verified.compiled_on, kept
    # without the user's backend named, `fix` compiles on inductor, a full run on the benchmark's backend and mode
    from ctc_doctor.cli.options import AnalysisArgs

    assert AnalysisArgs().fix_options().user_backend == "inductor"
    assert AnalysisArgs(bench_backend="aot_eager").fix_options().user_backend == "aot_eager"
    assert AnalysisArgs(bench_backend="inductor", mode="max-autotune").fix_options().user_compile == {"mode": "max-autotune"}
    assert AnalysisArgs(fix_backend="none").fix_options().user_backend is None


def test_a_fix_masked_by_another_cause_is_measured_on_top_of_the_applied_set_and_joins_it(cli, tmp_path):
    """The step counter's recompiles reach the recompile limit whether or not the batch dim is dynamic, so
    marking it changes nothing alone ("no effect"); the applied counter fix leaves the size recompile, and
    measured on top of it the mark removes it: applied with it, and said to be measured that way."""
    out = tmp_path / "r.json"
    target = f"{TARGETS / 'fix_targets.py'}:step_and_size"
    result = cli("fix", target, "--no-bisect", "--fix-backend", "none", "--json", str(out), "-q")
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    by_rule = {s.rule: s for s in report.suggestions}
    counter, mark = by_rule["unspec-int-attribute"], by_rule["mark-dynamic"]
    assert report.fix.applied == [counter.id, mark.id] and not report.fix.ineffective
    assert mark.verified.on_top_of == [counter.id] and mark.verified.summary.startswith(f"on top of {counter.id}: graphs 3 -> 2")
    assert mark.verdict == "recommended" and report.fix.on_backend is None
    assert not any("size x" in r for r in report.fix.remaining), report.fix.remaining
    assert any(n.startswith(f"{mark.id} changed nothing alone") and "another cause masked it" in n for n in report.fix.notes)


def test_the_benchmarks_leave_one_out_arms_attribute_a_failed_compiled_fixed_to_the_fix_at_fault(cli, tmp_path):
    """The real-backend check left out (`--fix-backend none`), the benchmark compiles the four fixes on the
    backend that cannot lower `torch.where`: `compiled_fixed` fails, and of the leave-one-out arms only the
    one without the `torch.where` fix runs. That fix fails ("without S? it ran"); the other three stay
    recommended (before, a crashed `compiled_fixed` with four fixes left every one recommended)."""
    out = tmp_path / "r.json"
    result = cli(
        "analyze", f"{TARGETS / 'user_targets.py'}:four_problems", "--no-bisect", "--no-explain", "--fix-backend", "none",
        "--bench-backend", "ctc_test_no_where", "--iters", "2", "--warmup", "0", "--no-regional", "--json", str(out), "-q",
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    arms = {a.name: a for a in report.benchmark.arms}
    where = next(s for s in report.suggestions if s.rule == "branchless-where")
    assert arms["compiled_fixed"].error is not None and arms[f"fixed[-{where.id}]"].error is None
    assert where.verdict == "failed" and where.verdict_reason.endswith(f"without {where.id} (fixed[-{where.id}]) it ran")
    others = [s for s in report.suggestions if s.id in report.fix.applied and s.id != where.id]
    assert len(others) == 3 and all(s.verdict == "recommended" for s in others), [(s.id, s.verdict) for s in others]


def test_a_crash_in_dynamos_tracing_gets_its_smallest_module_a_repro_and_a_verified_workaround(tmp_path):
    """A module reads the signature of its own method compiled on its own (Lightning's `self.log` does, of a
    compiled `training_step`): torch 2.13's Dynamo crashes while tracing (InternalTorchDynamoError), before
    any graph reaches a backend, so there is no graph to reduce. The triage descends the modules that ran,
    each compiled alone on its recorded inputs, to the smallest that crashes the same way (`blocks.1.0`),
    names the user's line Dynamo was tracing, writes a repro that rebuilds the model and fails the same way
    under plain `python`, and leaves that module eager as the verified workaround. The benchmark's compiled
    arm, which crashes the same way, is not a second bug."""
    path = TARGETS / "user_targets.py"
    workload = load_workload(f"{path}:asks_signature", seed=0)
    options = AnalyzeOptions(
        spec=f"{path}:asks_signature", explain=False, fix=FixOptions(repro_dir=str(tmp_path)), bench=BenchOptions(arms=["compiled"])
    )
    report = analyze(workload, options)
    if not report.torch_bugs:
        pytest.skip(f"torch {torch.__version__} traces getfullargspec of a compiled method")
    [bug] = report.torch_bugs
    assert bug.stage == "Dynamo" and bug.error_type == "InternalTorchDynamoError" and "__dict__" in bug.error, bug
    assert bug.user_line.endswith(f"user_targets.py:{marker_line(str(path), 'signature')}") and "getfullargspec" in bug.user_code
    assert bug.operation == "AsksSignature" and "`blocks.1.0` (AsksSignature) compiled alone" in bug.tried[-1], bug.tried
    assert bug.repro_verified is True and bug.repro_path.startswith(str(tmp_path)), (bug.repro_path, bug.repro_note)
    again = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 1 and "__dict__" in again.stdout + again.stderr  # plain python: the same crash
    assert bug.workaround_verified and bug.workaround.startswith("leave `blocks.1.0` eager")
    assert any("stands for both" in n for n in report.benchmark.notes), report.benchmark.notes
