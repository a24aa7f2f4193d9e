"""Advice that generalizes (issue 62): step 1 is what an expert in the library would do, drawn from mechanisms
(measured gain, the boundary the bisection finds, a parameter a library computes from the data, recurrence),
not from rules per library. The ecosystem fixtures (`fixtures/ecosystem.py`: stand-in libraries under
`fixtures/libs/`) mirror the real cases of `tests/test_libraries.py`; the fast tier judges their saved reports
(`advised-*`, written by `tests/data/reports/make_reports.py`), the full tier the live analyses and checks."""

from __future__ import annotations

import pytest

from ctc_doctor import AnalyzeOptions, BenchOptions, FixOptions, analyze
from ctc_doctor.analyzer.fixes.call_site import find_call_site
from ctc_doctor.analyzer.phases.bisect import BisectOptions
from ctc_doctor.analyzer.phases.suggest import suggest
from ctc_doctor.analyzer.phases.suggest.recompiles import pad_snippet
from ctc_doctor.analyzer.readers.expected import PARTIAL_BATCH, SIZE_ONE
from ctc_doctor.fixtures.registry import all_fixtures
from ctc_doctor.reports import models as rm
from ctc_doctor.reports.advice import next_steps
from ctc_doctor.reports.verdicts import rank_key

from .conftest import advised, saved

STEP_ONE = {
    "pool_size_from_data": "Pass `size=` to `global_mean_pool` at ecosystem.py:",
    "augment_with_net": "Compile `net` alone, not the whole `AugmentedClassifier`",
    "sliding_window_routine": "Compile `net` alone, not the whole `SignalSegmenter`",
    "ode_solver_routine": "Compile `func` alone, not the whole `NeuralODE`",
    "static_cache_decoder": "Nothing to fix: one graph per call; the 1 recompile is expected, paid once (a size of 1, once",
    "last_partial_batch": "Nothing to fix: one graph per call; the 1 recompile is expected, paid once (the last, smaller batch",
}
"""What an expert in each library would do first, as the first of the next steps says it."""


def _first(report: rm.Report) -> str:
    step = next_steps(report)[0]
    return step.split(": ", 1)[1] if step[:1] in "BRm" and ": " in step else step


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(STEP_ONE))
def test_step_one_on_each_library_pattern_is_what_an_expert_would_do(name):
    report = saved(f"advised-{name}")
    first = _first(report)
    assert first.startswith(STEP_ONE[name]), next_steps(report)
    steps = " ".join(next_steps(report))
    assert "newer release" not in steps and "pip install -U" not in steps  # a note only where its change is known
    assert "Stop changing" not in steps  # nothing here is the user's state to keep fixed


@pytest.mark.fast
@pytest.mark.parametrize("name", ["augment_with_net", "sliding_window_routine", "ode_solver_routine"])
def test_a_library_compiled_whole_gets_its_clean_submodule_compiled_alone_checked_on_a_copy(name):
    """The bisection's clean submodule (fullgraph passes, its parents fail) holds the model's parameters and the
    breaks outside it are a library's: compile it alone. The check compiled it (graphs after >= 1: its forward,
    not `module.compile()`, which compiles nothing on a `torch.nn.Sequential`) and every break left."""
    report = saved(f"advised-{name}")
    [s] = [s for s in report.suggestions if s.rule == "compile-submodules"]
    assert s.action is not None and s.action.type == "compile_only" and s.verdict == "recommended", s.verdict_reason
    v = s.verified
    assert v is not None and v.safe and v.after.unique_break_sites == 0 and v.after.graphs_compiled >= 1, v
    path = s.action.module_paths[0]
    assert f"model.{path}.forward = torch.compile(model.{path}.forward)" in (s.snippet or "")
    assert s.id not in report.fix.applied  # advice the user follows in their code: never applied with the fixes


@pytest.mark.fast
def test_a_pooling_call_that_leaves_its_size_out_gets_the_argument_from_the_call_not_capture_scalar_outputs():
    """graphkit's `scatter` computes the graph count from the data (`int(index.max()) + 1`) because the user's
    `global_mean_pool(x, batch)` leaves `size` out: found from the signatures and the source along the stack,
    checked on a copy passing the value the library computed; `capture_scalar_outputs` (a workaround that
    removes the same breaks) is redundant beside it. The node counts change every batch: `dynamic=True` is
    checked too, and the padding snippet pads dim 0, the nodes, not the features."""
    report = saved("advised-pool_size_from_data")
    rules = {s.rule: s for s in report.suggestions}
    arg = rules["call-site-argument"]
    assert arg.action is not None and arg.action.type == "call_argument" and arg.action.edits[0].endswith(":global_mean_pool:size")
    assert arg.action.local == "dim_size" and arg.action.computed_at is not None
    assert arg.verdict == "recommended" and arg.verified.after.unique_break_sites == 0 and arg.id in report.fix.applied
    assert "pooled = global_mean_pool(x, batch, size=size)" in (arg.snippet or "") and arg.diff is None  # no literal patched in
    assert rules["capture-scalar-outputs"].id in report.fix.redundant
    dynamic = rules["dynamic-or-buckets"]
    assert dynamic.action is not None and dynamic.action.config == {"dynamic": True} and dynamic.verdict == "recommended"
    assert "torch.nn.functional.pad(x, (0, 0, 0, -(-x.shape[0] // 64) * 64 - x.shape[0]))" in (dynamic.snippet or ""), dynamic.snippet


@pytest.mark.fast
@pytest.mark.parametrize(("name", "why"), [("static_cache_decoder", SIZE_ONE), ("last_partial_batch", PARTIAL_BATCH)])
def test_a_one_off_in_a_loop_is_expected_and_gets_no_padding_or_dynamic_advice(name, why):
    """Prefill -> decode with a static cache (8 tokens, then one at a time: torch specializes size 1) and a
    DataLoader's last, smaller batch: paid once, expected, out of the verdict; padding a prefill would break the
    cache's positions, and `dynamic=True` does not cover a size of 1."""
    report = saved(f"advised-{name}")
    assert report.summary.verdict == "clean" and report.summary.expected_recompiles == report.summary.recompile_count == 1
    assert [rc.expected for rc in report.recompiles] == [why]
    assert not {s.rule for s in report.suggestions} & {"dynamic-or-buckets", "mark-dynamic", "specialized-size"}


@pytest.mark.fast
def test_state_a_library_keeps_is_never_stop_changing_it():
    """The solver's own stage enum (FIRST, then NEXT: torchdiffeq's `Perturb`) recompiles its step function, a
    frame of the library's: not the user's state. No "stop changing" suggestion; one eager call first is checked
    (it cannot help: the solver sets it in every call), and the boundary leads."""
    report = saved("advised-ode_solver_routine")
    assert [(c.kind, c.source) for c in report.recompile_causes] == [("object_id", "stage")]
    rules = {s.rule: s for s in report.suggestions}
    assert "state-recompile" not in rules and "odekit manages in its own code" in rules["warm-up-before-compile"].rationale


@pytest.mark.fast
def test_the_best_measured_change_leads_whatever_it_is_called():
    """graphs 23 -> 9 (a workaround) before graphs 23 -> 22 (a fix), both recommended: the measured gain first."""

    def measured(sid: str, category: str, after: float) -> rm.Suggestion:
        delta = rm.Delta(metric="graphs", before=23, after=after, better=True, source="fix check")
        return rm.Suggestion(
            id=sid, rule="x", title=sid, rationale="", kind="config", category=category, deltas=[delta], verdict="recommended"
        )  # type: ignore[arg-type]

    small, large = measured("S1", "fix", 22), measured("S2", "workaround", 9)
    assert sorted([small, large], key=lambda s: rank_key(s, "balanced")) == [large, small]


@pytest.mark.fast
def test_a_pytorch_bug_in_a_candidate_fix_stays_on_that_fix_and_never_leads():
    report = saved("analyzed-showcase").model_copy(deep=True)
    report.torch_bugs = [
        rm.TorchBug(
            where="the compile with fix S1",
            error="AttributeError: x",
            error_type="AttributeError",
            stage="AOTAutograd",
            issue_title="t",
            issue_path="/tmp/bug.md",
            suggestion="S1",
        ),  # fmt: skip
    ]
    steps = next_steps(report)
    assert not steps[0].startswith(("PyTorch bug", "A PyTorch bug")) and steps[-1].startswith("A PyTorch bug in candidate fix S1 only")
    report.torch_bugs[0].suggestion = None  # the user's own compile hits it: it leads
    assert next_steps(report)[0].startswith("PyTorch bug: the compile with fix S1 crashes in AOTAutograd")


def _recompile(rid: str, file: str, *guards: rm.FailedGuard, call: int = 1) -> rm.Recompile:
    return rm.Recompile(
        id=rid, function="forward", file=file, line=1, compile_id=f"0/{rid[1:]}", call_index=call, failed_guards=list(guards)
    )


@pytest.mark.fast
def test_a_rule_answers_only_the_guard_that_explains_the_recompile():
    """A recompile a size change made, whose older cache entry also failed on grad mode, gets no "keep grad mode
    fixed": the rule answers its cause's guard only."""
    report = saved("analyzed-clean").model_copy(deep=True)
    size = rm.FailedGuard(kind="size", source="x", dim=0, expected="2", actual="3", reason="tensor 'x' size mismatch at index 0")
    grad = rm.FailedGuard(kind="global_state", reason="GLOBAL_STATE changed: grad_mode")
    report.recompiles = [_recompile("R1", "/home/u/model.py", size, grad)]
    rules = {s.rule for s in suggest(report, None)}
    assert "global-state-recompile" not in rules and "dynamic-or-buckets" in rules, rules


@pytest.mark.fast
def test_an_object_a_library_passes_between_its_own_functions_is_not_the_users_to_stop_changing():
    report = saved("analyzed-clean").model_copy(deep=True)
    guard = rm.FailedGuard(kind="object_id", source="perturb", reason="___check_obj_id(perturb, 1)")
    report.recompiles = [_recompile("R1", "/venv/lib/python3.11/site-packages/torchdiffeq/_impl/misc.py", guard)]
    out = suggest(report, None)
    assert "state-recompile" not in {s.rule for s in out}
    [warm] = [s for s in out if s.rule == "warm-up-before-compile"]
    assert "torchdiffeq manages in its own code" in warm.rationale and warm.action is not None


@pytest.mark.fast
def test_padding_pads_the_dimension_that_changes_at_the_arguments_rank():
    from ctc_doctor.analyzer.fixes.facts import ModelFacts

    facts = ModelFacts(arg_names=["wave", "ids"], arg_shapes={"wave": [(4, 16000), (4, 12800)], "ids": [(2, 8, 3)]})
    assert pad_snippet({"wave": [1]}, facts) == (
        "wave = torch.nn.functional.pad(wave, (0, -(-wave.shape[1] // 64) * 64 - wave.shape[1]))  # dim 1 up to a multiple of 64"
    )
    assert "(0, 0, 0, -(-ids.shape[1] // 64) * 64 - ids.shape[1])" in (pad_snippet({"ids": [1]}, facts) or "")
    assert pad_snippet({"other": [0]}, facts) is None  # no argument of the call changes: nothing of yours to pad


@pytest.mark.fast
def test_the_call_site_is_found_from_signatures_and_source_not_from_a_list_of_libraries():
    report = saved("advised-pool_size_from_data")
    [site] = [s for s in report.graph_breaks if s.own_frame is not None]
    found = find_call_site(site)
    assert found is not None and (found.callee, found.argument, found.local, found.library) == (
        "global_mean_pool",
        "size",
        "dim_size",
        "graphkit",
    )
    assert found.expression == "int(index.max()) + 1 if index.numel() > 0 else 0"
    [inner] = [s for s in report.graph_breaks if s.own_frame is None]  # the library's own frame, no call of the user's
    assert find_call_site(inner) is None


# --- the full tier: the live analyses and their checks ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(STEP_ONE))
def test_live_step_one_matches_the_saved_one(name):
    """The saved reports the fast tier judges are what a live analysis advises now."""
    assert _first(advised(name)).startswith(STEP_ONE[name]), next_steps(advised(name))


def test_the_submodules_arm_measures_compiling_the_clean_submodule_against_the_whole():
    """With the benchmark, the compile-submodules suggestion is measured by its own arm (`submodules`: `net`
    alone, the augmentation eager) against `compiled`: latency and cold compile, beside the check's counts."""
    spec = all_fixtures()["augment_with_net"]
    options = AnalyzeOptions(
        spec=spec.target, explain=False, bisect=BisectOptions(strategy="top-down"), fix=FixOptions(),
        bench=BenchOptions(backend="eager", iters=3, warmup=1),
    )  # fmt: skip
    report = analyze(spec.builder()(), options)
    arms = {a.name: a for a in report.benchmark.arms}
    assert "submodules" in arms and arms["submodules"].error is None and arms["submodules"].latency_ms is not None
    [s] = [s for s in report.suggestions if s.rule == "compile-submodules"]
    sources = {d.source for d in s.deltas if d.metric in ("latency_ms", "cold_compile_s")}
    assert sources == {"benchmark compiled -> submodules"}, s.deltas


def test_a_crash_while_dynamo_builds_a_guard_is_triaged_like_any_torch_crash(tmp_path):
    """An irrep whose `__len__` raises (e3nn's `Irrep`), walked in a compiled module's forward: Dynamo traces it,
    then calls `len()` building the SEQUENCE_LENGTH guard and crashes (InternalTorchDynamoError). The crash
    gets its stage, the object's line that raised, a torch-only repro that fails the same way under plain
    `python`, the issue text, and a workaround checked on the model: the module that holds the object eager."""
    import subprocess
    import sys

    from ctc_doctor.analyzer.services.target import load_workload
    from ctc_doctor.fixtures.registry import marker_line

    from .conftest import TARGETS

    target = f"{TARGETS / 'ecosystem_targets.py'}:guard_len_crash"
    options = AnalyzeOptions(spec=target, explain=False, fix=FixOptions(repro_dir=str(tmp_path)))
    report = analyze(load_workload(target, seed=0), options)
    [bug] = report.torch_bugs
    assert bug.stage == "Dynamo (building a guard)" and "NotImplementedError" in bug.error and bug.suggestion is None
    assert bug.operation.startswith("the SEQUENCE_LENGTH guard on L['self']._modules['dropout'].irreps")
    assert bug.user_line == f"{TARGETS / 'ecosystem_targets.py'}:{marker_line(str(TARGETS / 'ecosystem_targets.py'), 'GUARD_LEN')}"
    assert bug.repro_verified is True and bug.repro_path == str(tmp_path / "ctc_torch_bug_compile.py")
    again = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode != 0 and "NotImplementedError" in again.stderr
    assert [line for line in bug.repro.splitlines() if line.startswith(("import ", "from "))] == ["import torch"]
    assert bug.workaround_verified and bug.workaround.startswith("leave `dropout` eager until torch is fixed")
    steps = next_steps(report)
    assert steps[0].startswith("PyTorch bug: the compile of EquivariantBlock crashes in Dynamo (building a guard)"), steps
