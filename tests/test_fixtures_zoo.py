"""Every fixture of the zoo, analyzed on real torch: exact break lines, gb_types, GB ids, module paths
and recompile guard kinds, as each fixture's docstring promises."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from ctc_doctor import AnalyzeOptions, analyze
from ctc_doctor.analyzer import torch_internals as ti
from ctc_doctor.fixtures.registry import all_fixtures, break_location, marker_line

from .conftest import analyzed, doctor_frames

FIXTURES = all_fixtures()
ALL = sorted(FIXTURES)


def _needs(name: str) -> None:
    if "transformers" in FIXTURES[name].tags:
        pytest.importorskip("transformers")


@pytest.mark.compat
@pytest.mark.parametrize("name", ALL)
def test_each_fixture_gets_its_documented_verdict_without_errors(name):
    _needs(name)
    report = analyzed(name)
    assert report.errors == []
    assert report.summary.verdict == FIXTURES[name].expected.verdict
    assert doctor_frames(report) == []  # the doctor's own code is never named as the model's problem


@pytest.mark.compat
@pytest.mark.parametrize("name", [n for n in ALL if FIXTURES[n].expected.breaks])
def test_each_expected_break_is_reported_at_its_exact_line_type_id_and_module_path(name):
    _needs(name)
    spec = FIXTURES[name]
    report = analyzed(name)
    for expected in spec.expected.breaks:
        source, line = break_location(spec, expected)
        at = [s for s in report.graph_breaks if (s.own_frame or s.user_frame).file == source and (s.own_frame or s.user_frame).line == line]
        matches = [s for s in at if s.gb_type in expected.gb_types()]
        assert matches, (
            f"no {expected.gb_type!r} break at {source}:{line}; got {[(s.gb_type, s.user_frame.line) for s in report.graph_breaks]}"
        )
        site = matches[0]
        assert site.module_paths == list(expected.module_paths)
        assert not expected.registry_ids() or set(expected.registry_ids()) & set(site.registry_ids), site.registry_ids
        assert site.own_code is expected.own_code
        assert site.occurrences == len(site.compile_ids) >= 1
        assert site.hints, "every break carries Dynamo's hints"
        # the first call's breaks are checked on the warm model: only set-up code is first-call-only
        assert site.first_call_only is expected.first_call_only, site


@pytest.mark.parametrize("name", [n for n in ALL if FIXTURES[n].expected.breaks])
def test_no_break_is_reported_away_from_the_documented_lines(name):
    _needs(name)
    spec = FIXTURES[name]
    report = analyzed(name)
    locations = {break_location(spec, e) for e in spec.expected.breaks}
    for site in report.graph_breaks:
        frame = site.own_frame or site.user_frame
        assert (frame.file, frame.line) in locations, site


@pytest.mark.parametrize("name", [n for n in ALL if not FIXTURES[n].expected.breaks])
def test_fixtures_without_breaks_report_none_and_one_graph_on_the_first_call(name):
    _needs(name)
    report = analyzed(name)
    assert report.graph_breaks == []
    assert report.summary.graph_count == 1


@pytest.mark.compat
@pytest.mark.parametrize("name", [n for n in ALL if FIXTURES[n].expected.recompile_kinds])
def test_recompiles_carry_the_documented_guard_kind_and_module_path(name):
    _needs(name)
    spec = FIXTURES[name]
    report = analyzed(name)
    assert report.summary.recompile_count == len(report.recompiles) >= 1
    kinds = {g.kind for rc in report.recompiles for g in rc.failed_guards}
    assert set(spec.expected.recompile_kinds) <= kinds
    for path in spec.expected.recompile_paths:
        assert any(path in rc.module_paths for rc in report.recompiles)
    for rc in report.recompiles:
        assert rc.failed_guards and rc.call_index is not None


@pytest.mark.compat
@pytest.mark.parametrize("name", [n for n in ALL if FIXTURES[n].expected.recompile_kinds])
def test_recompiles_fold_into_their_documented_causes_each_event_in_exactly_one(name):
    _needs(name)
    report = analyzed(name)
    causes = report.recompile_causes
    assert [(c.kind, c.source, c.dim) for c in causes] == list(FIXTURES[name].expected.recompile_causes)
    owned = [rid for c in causes for rid in c.recompiles]
    assert sorted(owned) == sorted(rc.id for rc in report.recompiles)  # a partition: each event once
    assert [c.id for c in causes] == [f"C{i}" for i in range(1, len(causes) + 1)]
    for c in causes:
        assert c.summary and c.functions and c.code_objects >= 1 and c.first_call is not None
        assert set(c.suggestion_ids) <= {s.id for s in report.suggestions}


def test_one_input_size_change_is_one_cause_across_submodules_and_resume_functions():
    report = analyzed("showcase")
    (cause,) = report.recompile_causes
    assert (cause.kind, cause.source, cause.dim, cause.values) == ("size", "x", 0, ["2", "3"])
    assert len(cause.recompiles) == len(report.recompiles) >= 10
    # the events sit in the root, the blocks, the attention and the head, resume functions included
    resumed = {g.source for rc in report.recompiles for g in rc.failed_guards if (g.source or "").startswith("___stack")}
    assert resumed and cause.code_objects > len(cause.functions) >= 4
    assert {"", "block0", "block0.attn", "head"} <= set(cause.module_paths)
    assert cause.summary == "x dim 0 changes 2 → 3" and cause.first_call == 1
    mark = [s for s in report.suggestions if s.rule == "mark-dynamic"]
    assert mark and {s.id for s in mark} <= set(cause.suggestion_ids)


def test_a_cause_says_which_user_line_installed_its_guard():
    (cause,) = analyzed("attribute_toggle").recompile_causes
    assert cause.user_stack and cause.user_stack[-1].code == "if self.use_gelu:"
    assert cause.summary == "attribute act.use_gelu changes value (compiled for False)"


def test_two_independent_causes_stay_apart_with_their_own_values():
    size, value = analyzed("two_causes").recompile_causes
    assert size.values == ["2", "3"] and size.first_call == 1
    assert value.values == ["1.0"] and value.first_call == 2
    limit = analyzed("recompile_limit").recompile_causes[0]
    assert len(limit.recompiles) == 8 and limit.values[:2] == ["'mode0'", "'mode1'"]  # the limit's last compile too
    # what each costs and how it recurs: the size settles (automatic dynamic shapes); the string attribute
    # compiles anew for every value until the limit, after which the frame runs eagerly
    assert (size.recurrence, value.recurrence, limit.recurrence) == ("bounded", "bounded", "recurring")
    assert size.compile_time_s > 0 and limit.compile_time_s > 0 and not limit.expected


def test_a_switch_to_eval_in_a_frame_another_cause_takes_to_the_limit_stays_a_one_off():
    """One frame, two causes: an integer step attribute recompiles it to the limit, and the model is switched
    to eval once (the only change at that call). The step is what recurs; the switch is a one-off, expected."""
    from ctc_doctor.analyzer.services.target import load_workload

    from .conftest import TARGETS

    workload = load_workload(f"{TARGETS / 'recompile_targets.py'}:step_counter_and_one_eval_switch")
    report = analyze(workload, AnalyzeOptions(explain=False))
    causes = {c.source: c for c in report.recompile_causes}
    step, switch = causes["self.step"], causes["drop.training"]
    assert len(step.recompiles) == 7 and step.recurrence == "recurring" and not step.expected
    assert len(switch.recompiles) == 1 and switch.recurrence == "one_off" and switch.expected, switch
    assert set(step.functions) == set(switch.functions) == {"StepAndDropout.forward"}  # the same frame


@pytest.mark.parametrize("name", [n for n in ALL if not FIXTURES[n].expected.recompile_kinds])
def test_fixtures_without_variants_trouble_do_not_recompile(name):
    report = analyzed(name)
    assert report.recompiles == []


def test_a_shape_recompile_names_the_argument_dimension_and_both_sizes():
    (rc,) = analyzed("shape_change_dim0").recompiles
    (guard,) = rc.failed_guards
    assert (guard.kind, guard.source, guard.dim, guard.expected, guard.actual) == ("size", "x", 0, "4", "8")
    (rc1,) = analyzed("shape_change_dim1").recompiles
    assert (rc1.failed_guards[0].dim, rc1.failed_guards[0].expected, rc1.failed_guards[0].actual) == (1, "8", "12")


def test_dtype_scalar_and_attribute_recompiles_name_what_changed():
    dtype = analyzed("dtype_change").recompiles[0].failed_guards[0]
    assert (dtype.kind, dtype.source, dtype.expected, dtype.actual) == ("dtype", "x", "Float", "Double")
    scalar = analyzed("python_scalar_arg").recompiles[0].failed_guards[0]
    assert (scalar.kind, scalar.source, scalar.expected) == ("value", "temperature", "1.0")
    attr = analyzed("attribute_toggle").recompiles[0].failed_guards[0]
    assert attr.kind == "attribute" and attr.source.endswith("use_gelu") and attr.expected == "False"


def test_a_deepcopy_break_inside_the_stdlib_points_back_to_the_users_line():
    spec = FIXTURES["deepcopy_in_forward"]
    (site,) = analyzed("deepcopy_in_forward").graph_breaks
    assert site.library == "stdlib" and site.user_frame.file.endswith("copy.py")
    assert site.own_frame is not None and site.own_frame.line == marker_line(spec.source_file(), "deepcopy")
    assert site.user_stack[-1].file.endswith("copy.py")


def test_skipped_frames_are_reported_with_the_loop_cause_and_its_registry_ids():
    report = analyzed("deep_break")
    loop = [s for s in report.graph_breaks if s.gb_type == "graph break in loop"]
    assert loop and loop[0].frame_skipped and loop[0].registry_ids[:2] == ["GB7000", "GB0170"]
    assert "Data-dependent branching" in loop[0].reason
    assert report.summary.frames_skipped >= 1


def test_a_shared_forward_is_attributed_to_every_instance_that_runs_it():
    (site,) = [s for s in analyzed("repeated_blocks").graph_breaks if s.gb_type == "Data-dependent branching"]
    assert site.module_paths == [f"blocks.{i}" for i in range(64)]
    assert site.module_class == "GuardedBlock"


def test_user_stacks_hide_torch_and_ctc_doctor_frames_but_keep_the_path_from_the_root():
    site = analyzed("deep_break").graph_breaks[0]
    files = [f.file for f in site.user_stack]
    assert all("/torch/" not in f and "/analyzer/" not in f for f in files)
    assert [f.function for f in site.user_stack][-1] == "forward"
    assert site.user_stack[-1].code and "isnan" in site.user_stack[-1].code


def test_explain_is_run_as_a_cross_check_and_agrees_on_the_graph_count_of_a_clean_model():
    report = analyzed("clean")
    assert report.explain is not None and report.explain.method == "same_trace"
    assert report.explain.graph_count == report.summary.graph_count == 1


@pytest.mark.parametrize("name", ALL)
def test_explains_view_from_the_same_trace_matches_a_call_of_explain_itself(name):
    _needs(name)
    report = analyzed(name)
    spec = FIXTURES[name]
    torch.manual_seed(0)
    workload = spec.builder()()  # fresh, as the analysis compiled it
    first = workload.calls()[0]
    if workload.before_call is not None:
        workload.before_call(workload.model, 0)
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        explained = ti.run_explain(workload.model, first.args, dict(first.kwargs))
    ti.fresh_dynamo_state()
    assert explained is not None and report.explain is not None and report.explain.method == "same_trace"
    assert report.explain.graph_count == explained.graph_count
    assert report.explain.graph_break_count == explained.graph_break_count
    assert report.explain.break_reasons == len(explained.break_reasons)
    assert report.explain.op_count == explained.op_count


@pytest.mark.parametrize("name", [n for n in ALL if any(e.first_call_only for e in FIXTURES[n].expected.breaks)])
def test_a_break_of_the_first_call_only_is_gone_once_the_model_ran(name):
    # what the analysis saw cold, a warm model does not show: an eager call first, then the compile
    _needs(name)
    assert any(s.first_call_only for s in analyzed(name).graph_breaks)
    spec = FIXTURES[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    first = workload.calls()[0]
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        workload.model(*first.args, **dict(first.kwargs))
        warm = analyze(workload, AnalyzeOptions(explain=False))
    assert warm.graph_breaks == [], [(s.gb_type, s.user_frame.line) for s in warm.graph_breaks]


def test_compile_metrics_guards_and_graphs_are_recorded_per_compile_id():
    report = analyzed("showcase")
    ids = {m.compile_id for m in report.compile_metrics}
    assert {g.compile_id for g in report.graphs} <= ids
    assert {g.compile_id for g in report.guards} <= ids
    assert all(g.count > 0 for g in report.guards)
    assert sum(g.op_count for g in report.graphs) > 0
    assert report.summary.compile_time_s > 0
    assert report.summary.graphs_compiled == len(report.graphs) > report.summary.graph_count


@pytest.mark.compat
def test_compile_seconds_are_shared_among_modules_by_their_graphs_nn_module_stack():
    """A graph's ops carry the module they came from (`nn_module_stack`): the compile profile shares
    each compile's seconds among them, folding repeated blocks into one row."""
    from ctc_doctor.analyzer.readers.compile_time import stack_path

    assert stack_path("L['self'].layers[0].fc") == stack_path("L['self'].layers.0.fc") == "layers.0.fc"
    assert stack_path("self._modules['h']._modules['3'].attn") == "h.3.attn" and stack_path("L['self']") == ""
    report = analyzed("print_in_forward")
    by_graph = {g.compile_id: g.module_ops for g in report.graphs}
    assert sum(by_graph["0/0"].values()) == next(g.op_count for g in report.graphs if g.compile_id == "0/0")
    assert set(by_graph["0/0"]) >= {"encoder.fc"}
    p = report.compile_profile
    assert p is not None and {r.key for r in p.modules} >= {"encoder.fc", "head.fc"}
    assert abs(sum(r.seconds for r in p.modules) - p.total_s) <= 0.01 * p.total_s  # every compile had a module
    blocks = analyzed("repeated_blocks").compile_profile
    assert blocks is not None and any(r.key == "blocks.*" and r.label == "blocks.* (64 blocks)" for r in blocks.modules)


@pytest.mark.compat
def test_train_mode_runs_backward_with_aot_eager_and_still_finds_the_break():
    report = analyzed("item_control_flow", train=True)
    assert report.environment.backend == "aot_eager" and report.target.train
    assert report.errors == []
    assert [s.gb_type for s in report.graph_breaks] == ["Unsupported Tensor.item() call with capture_scalar_outputs=False"]


def test_user_stacks_start_at_the_model_not_at_the_harness_that_called_it():
    # this test runs under pytest, so pytest's and pluggy's frames sit above ctc-doctor's call
    for site in analyzed("deep_break").graph_breaks:
        files = [f.file for f in site.user_stack]
        assert all("_pytest" not in f and "pluggy" not in f for f in files), files
        assert site.user_stack[0].function == "forward"


def test_each_compiled_frame_says_which_calls_a_compiled_version_served_and_which_ran_eagerly():
    """Counted by entering the frame, not inferred: the step counter's forward is served compiled for its
    first 8 calls, then, past the recompile limit, runs its own code for the 4 calls left; a frame Dynamo
    skips (a graph break in a loop) runs eagerly every call; the showcase's frames are all served compiled."""
    report = analyzed("step_counter")
    [frame] = [f for f in report.frame_calls if f.frame == "0"]
    assert (frame.function, frame.compiled, frame.eager, frame.first_eager_call) == ("forward", 8, 4, 8), frame
    assert frame.by_call == [[i, 1, 0] for i in range(8)] + [[i, 0, 1] for i in range(8, 12)]
    assert frame.why_eager == "the recompile limit (compile 0/8)" and frame.module_paths == [""]
    [cliff] = report.recompile_cliffs
    assert (cliff.from_call, cliff.eager_calls, cliff.ran_eagerly) == (8, 4, 4)
    skipped = analyzed("repeated_blocks")
    root = next(f for f in skipped.frame_calls if f.module_paths == [""] and f.eager)
    assert root.compiled == 0 and root.why_eager.startswith("skipped (") and root.first_eager_call == 0
    showcase = analyzed("showcase")
    assert showcase.frame_calls and all(f.compiled and not f.eager for f in showcase.frame_calls)
