"""The doctor on real library models beyond transformers, timm and diffusers, where they install: their
break sites and causes found in the library's own code, and the advice that holds there (issue 54)."""

from __future__ import annotations

import pytest

from ctc_doctor import AnalyzeOptions, FixOptions, analyze
from ctc_doctor.analyzer.services.target import load_workload

from .conftest import TARGETS, run_cli


@pytest.mark.compat
def test_a_torchvision_detector_gets_first_call_and_library_size_advice_not_stop_changing():
    """Faster R-CNN, random weights: every break site is torchvision's (none of the user's code). Its RoI
    pooler sets `scales` on the first call (`.item()` breaks on a fresh model only), so the advice is one eager
    call before compiling, verified on a copy; never "stop changing `self.scales`", an attribute the user
    never writes. The boxes it keeps change in number inside torchvision: `dynamic=True`, not "pad inputs"."""
    pytest.importorskip("torchvision", reason="torchvision imports in the compat venv only (torch 2.14.1 + torchvision 0.29.1)")
    target = f"{TARGETS / 'library_targets.py'}:detector"
    report = analyze(load_workload(target, seed=0), AnalyzeOptions(spec=target, explain=False, fix=FixOptions()))
    assert report.graph_breaks and all(not s.own_code and "torchvision" in s.user_frame.file for s in report.graph_breaks)
    first_call = [s.id for s in report.graph_breaks if s.first_call_only]
    assert first_call and all("poolers.py" in s.user_frame.file for s in report.graph_breaks if s.first_call_only)
    rules = {s.rule: s for s in report.suggestions}
    warm = rules["warm-up-before-compile"]
    assert set(warm.applies_to) == set(first_call) and warm.verified is not None and warm.verified.effective, warm.verified
    assert warm.verified.after.unique_break_sites < warm.verified.before.unique_break_sites and warm.verified.numerics_ok
    assert not any("scales" in s.title for s in report.suggestions), [s.title for s in report.suggestions]
    sizes = rules["dynamic-library-sizes"]
    assert "dynamic-or-buckets" not in rules and "made inside torchvision" in sizes.title and "pad" not in sizes.title
    size_recompiles = {r.id for r in report.recompiles if r.failed_guards and r.failed_guards[0].kind == "size"}
    assert size_recompiles and size_recompiles <= set(sizes.applies_to), (size_recompiles, sizes.applies_to)


@pytest.mark.compat
def test_a_model_quantized_in_place_by_torchao_after_compile_is_told_to_quantize_first_and_that_is_verified():
    """torchao's `quantize_` between calls 1 and 2, after the first compile: the weights become `Int8Tensor`, the
    guard on their type fails, and the one cause is `changed` ("replaced by a tensor subclass"). The advice,
    quantize before compiling, is checked on a copy quantized first: recompiles 1 -> 0, the same results."""
    pytest.importorskip("torchao", reason="the dev set-up and the compat venv install torchao")
    target = f"{TARGETS / 'library_targets.py'}:quantized_after_compile"
    report = analyze(load_workload(target, seed=0), AnalyzeOptions(spec=target, explain=False, fix=FixOptions()))
    [cause] = report.recompile_causes
    assert cause.kind == "changed" and "replaced by a tensor subclass (quantization)" in cause.summary, cause.summary
    [s] = [s for s in report.suggestions if s.rule == "change-before-compile"]
    v = s.verified
    assert v is not None and (v.before.recompile_count, v.after.recompile_count) == (1, 0) and v.numerics_ok, v
    assert s.verdict == "recommended" and not report.fix.applied


@pytest.mark.compat
def test_ultralytics_yolo_built_from_its_yaml_gets_one_eager_call_first_and_never_a_disabled_root(monkeypatch, tmp_path):
    """YOLOv8n from ultralytics' packaged yaml, random weights: every break is ultralytics' own code, and its
    Detect head makes its anchors on the first call, so one eager call before compiling is verified to leave
    one graph and no recompile. The `Conv` and `C2f` blocks, each instance of its own widths after the layer
    loop breaks, are two storms (one changing tensor is enough: `x` dim 1) with one advice, removing that
    break; `torch.compiler.disable` is never offered on the root or on the `model` Sequential that holds the
    whole network."""
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path))  # ultralytics writes its settings file on import
    pytest.importorskip("ultralytics", reason="ultralytics installs in the compat venv only (it needs torchvision)")
    target = f"{TARGETS / 'library_targets.py'}:yolo"
    report = analyze(load_workload(target, seed=0), AnalyzeOptions(spec=target, explain=False, fix=FixOptions()))
    assert report.graph_breaks and all(not s.own_code and "ultralytics" in s.user_frame.file for s in report.graph_breaks)
    rules = {s.rule: s for s in report.suggestions}
    warm = rules["warm-up-before-compile"].verified
    assert warm is not None and warm.after.graphs_compiled == 1 and warm.after.recompile_count == 0 and warm.numerics_ok, warm
    storms = sorted(c.functions[0] for c in report.recompile_causes if c.storm)
    assert storms == ["C2f.forward", "Conv.forward"], [(c.functions, c.summary) for c in report.recompile_causes]
    storm = rules["per-instance-storm"]
    assert storm.title.startswith("Remove the break that splits the loop over the `Conv`, `C2f` blocks"), storm.title
    for s in report.suggestions:
        if s.action is not None and s.action.type == "disable":
            assert "" not in s.action.module_paths and "model" not in s.action.module_paths, s.action


# --- issue 62: advice on libraries the doctor was not tuned on (tests/targets/ecosystem_targets.py) ----------


def _advised(target: str):
    """`target` of ecosystem_targets.py as `ctc-doctor fix` analyzes it: bisection, suggestions, verified fixes."""
    from ctc_doctor.analyzer.phases.bisect import BisectOptions
    from ctc_doctor.reports.advice import next_steps

    spec = f"{TARGETS / 'ecosystem_targets.py'}:{target}"
    options = AnalyzeOptions(spec=spec, explain=False, bisect=BisectOptions(strategy="top-down"), fix=FixOptions())
    report = analyze(load_workload(spec, seed=0), options)
    return report, next_steps(report)


@pytest.mark.compat
@pytest.mark.parametrize(
    ("library", "target", "rule", "module"),
    [
        ("kornia", "augmentation", "compile-submodules", "net"),
        ("monai", "sliding_window", "compile-submodules", "net"),
        ("torchdiffeq", "neural_ode", "compile-submodules", "func"),
        ("gpytorch", "deep_kernel_gp", "compile-submodules", "features"),
    ],
)
def test_a_library_compiled_whole_gets_the_network_inside_it_compiled_alone_as_step_one(library, target, rule, module):
    """An augmentation stage with the CNN after it (kornia), a sliding-window routine and its predictor (MONAI),
    an ODE solver and its dynamics (torchdiffeq), a GP on a neural feature extractor (gpytorch): the breaks are
    the library's, the bisection's clean submodule holds the network. Step 1 compiles it alone, checked on a
    copy (every break left); no `torch.compiler.disable` of most of the model, no "check a newer release", no
    "stop changing" the library's own state."""
    pytest.importorskip(library, reason=f"{library} installs in the compat venv (make compat)")
    report, steps = _advised(target)
    [s] = [s for s in report.suggestions if s.rule == rule]
    assert s.action is not None and s.action.module_paths == [module] and s.verdict == "recommended", (s.verdict, s.verdict_reason)
    assert s.verified.after.unique_break_sites == 0 and s.verified.after.graphs_compiled >= 1 and s.verified.numerics_ok
    assert steps[0].split(": ", 1)[1].startswith(f"Compile `{module}` alone"), steps
    text = " ".join(steps)
    assert "newer release" not in text and "Stop changing" not in text, steps


@pytest.mark.compat
def test_torch_geometric_pooling_gets_size_from_the_call_and_dynamic_shapes_for_its_node_counts():
    """GraphSAGE pooled with `global_mean_pool(x, batch)`: torch_geometric computes the graph count from the data
    (`int(index.max()) + 1` in `scatter`) because `size` is left out; step 1 passes it from the call, checked on a
    copy. Mini-batches of other node counts: `dynamic=True` checked too, its padding on the node dimension."""
    pytest.importorskip("torch_geometric", reason="torch_geometric installs in the compat venv (make compat)")
    report, steps = _advised("graph_pooling")
    rules = {s.rule: s for s in report.suggestions}
    arg = rules["call-site-argument"]
    assert arg.verdict == "recommended" and arg.verified.after.unique_break_sites < arg.verified.before.unique_break_sites
    assert steps[0].split(": ", 1)[1].startswith("Pass `size=` to `global_mean_pool`"), steps
    dynamic = rules["dynamic-or-buckets"]
    assert dynamic.verdict == "recommended" and "pad(x, (0, 0, 0, -(-x.shape[0] // 64)" in (dynamic.snippet or ""), dynamic.snippet


@pytest.mark.compat
def test_nnaudio_over_a_dataloader_with_a_partial_last_batch_is_clean_its_recompile_expected():
    """A DataLoader of batch size 8 over 29 clips ends on a batch of 5: one compile more, once (`drop_last=True`
    avoids it), not a cause to fix: the verdict is clean and no padding or `dynamic=True` is offered."""
    pytest.importorskip("nnAudio", reason="nnAudio installs in the compat venv (make compat)")
    report, steps = _advised("keyword_spotting")
    assert report.summary.verdict == "clean" and report.summary.expected_recompiles == report.summary.recompile_count >= 1
    assert all("last, smaller batch" in rc.expected for rc in report.recompiles)
    assert not report.suggestions and steps[0].startswith("Nothing to fix: one graph per call"), steps


@pytest.mark.compat
def test_litgpt_generate_with_a_static_cache_gets_no_padding_or_dynamic_advice_for_its_decode_step(tmp_path):
    """litgpt's `generate` on a compiled GPT with its static KV cache, two prompts of 8 and 11 tokens: the first
    one-token step compiles once for the length 1, the second prompt's length once more and automatic dynamic
    shapes serve the rest: both expected, paid once, the verdict clean. Neither is answered with padding (which
    would break the cache's positions) or `dynamic=True`."""
    pytest.importorskip("litgpt", reason="litgpt installs in the compat venv (make compat)")
    from ctc_doctor.reports import load_report
    from ctc_doctor.reports.advice import next_steps

    out = tmp_path / "report.json"
    result = run_cli("run", "--json", str(out), "--", str(TARGETS / "litgpt_generate.py"), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = load_report(out)
    why = sorted(rc.expected.split(":")[0] for rc in report.recompiles)
    assert why == ["a size of 1, once", "one new size, once"], why  # every recompile expected: the verdict is clean
    assert report.summary.verdict == "clean" and next_steps(report)[0].startswith("Nothing to fix: one graph per call"), next_steps(report)
    assert not {s.rule for s in report.suggestions} & {"dynamic-or-buckets", "mark-dynamic"}, [s.rule for s in report.suggestions]


@pytest.mark.compat
def test_e3nn_dropout_crashing_dynamos_guard_building_gets_a_repro_and_a_verified_workaround(tmp_path):
    """e3nn's `nn.Dropout` in training: its `Irrep.__len__` raises, Dynamo calls it building a guard (torch
    2.13/2.14). Triaged: the stage, e3nn's line, a torch-only repro that fails the same way, and the Dropout left
    eager, checked on the model."""
    pytest.importorskip("e3nn", reason="e3nn installs in the compat venv (make compat)")
    target = f"{TARGETS / 'ecosystem_targets.py'}:e3nn_dropout"
    report = analyze(load_workload(target, seed=0), AnalyzeOptions(spec=target, explain=False, fix=FixOptions(repro_dir=str(tmp_path))))
    if not report.torch_bugs:
        pytest.skip("this torch builds e3nn's guards without calling Irrep.__len__")
    [bug] = report.torch_bugs
    assert bug.stage == "Dynamo (building a guard)" and "e3nn" in (bug.user_line or "") and bug.repro_verified, bug
    assert bug.workaround_verified and bug.workaround.startswith("leave `1` eager until torch is fixed"), bug.workaround
