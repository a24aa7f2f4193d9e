"""The doctor on real library models beyond transformers, timm and diffusers, where they install: their
break sites and causes found in the library's own code, and the advice that holds there (issue 54)."""

from __future__ import annotations

import pytest

from ctc_doctor import AnalyzeOptions, FixOptions, analyze
from ctc_doctor.analyzer.target import load_workload

from .conftest import TARGETS


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
