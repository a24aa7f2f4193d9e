"""Without the weights (`--weights none`): the model built on the meta device gives exactly the real run's
Dynamo findings, or stops at the line that needs real values and drops its findings; a model far larger than
the machine is diagnosed at the memory of its code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ctc_doctor import AnalyzeOptions, analyze
from ctc_doctor.analyzer.services.target import load_workload
from ctc_doctor.fixtures.registry import all_fixtures, marker_line
from ctc_doctor.reports import load_report

from .conftest import TARGETS

OPTIONS = {"backend": "eager", "explain": False, "bisect": None, "fix": None, "bench": None, "accuracy": None}


def _findings(report):
    sites = sorted((b.user_frame.file, b.user_frame.line, b.gb_type, b.occurrences) for b in report.graph_breaks)
    causes = sorted(c.id for c in report.recompile_causes)
    return sites, report.summary.graph_count, report.summary.recompile_count, causes, report.summary.verdict


@pytest.mark.parametrize("name", ["print_in_forward", "shape_change_dim1", "recompile_limit", "train_step"])
def test_a_run_without_the_weights_finds_exactly_what_the_real_run_finds(name):
    spec = all_fixtures()[name]
    real = analyze(load_workload(spec.target), AnalyzeOptions(**OPTIONS, train=name == "train_step"))
    meta = load_workload(spec.target, weights="none")
    assert all(p.is_meta for p in meta.model.parameters())
    report = analyze(meta, AnalyzeOptions(**OPTIONS, train=name == "train_step", weights="none"))
    assert report.target.weights == "none" and not report.errors, report.errors
    assert _findings(report) == _findings(real)
    assert any("--weights none" in n for n in report.notes)  # what needs numbers was left out, and said


def test_a_run_without_the_weights_stops_at_the_line_that_needs_a_value(cli, tmp_path):
    """`if x.sum() > 0` under compile breaks the graph, then the comparison runs eagerly on a meta tensor:
    the run stops there (exit 15), names the line, and keeps no half findings."""
    spec = all_fixtures()["data_dependent_if"]
    out = tmp_path / "r.json"
    result = cli("demo", "--fixture", "data_dependent_if", "--weights", "none", "--json", str(out))
    assert result.returncode == 15, result.stderr
    line = f"zoo.py:{marker_line(spec.source_file(), spec.expected.breaks[0].marker)}"
    [error] = [x for x in result.stderr.splitlines() if x.startswith("ctc-doctor: error:")]
    assert line in error and "needs real values" in error, result.stderr
    report = load_report(out)
    [stop] = report.errors
    assert stop.phase == "weights" and line in stop.message and "Tensor.item()" in stop.message
    assert report.target.weights == "none" and not report.graph_breaks and report.summary.verdict == "failed"
    assert "NO ANSWER WITHOUT THE WEIGHTS" in result.stdout
    # no config with a layer count to shrink: no twin, and the report says why
    assert "No real twin to run instead: its model names no layer count in a `config`" in report.notes[-1]


def test_an_eager_pass_that_needs_values_does_not_stop_what_dynamo_found():
    """The model reads a value only outside torch.compile (transformers' mask code does): the compiled run
    ran every call, so its findings stand, and a note names the eager pass's line."""
    target = f"{TARGETS / 'user_targets.py'}:eager_only_check"
    real = analyze(load_workload(target), AnalyzeOptions(**OPTIONS))
    report = analyze(load_workload(target, weights="none"), AnalyzeOptions(**OPTIONS, weights="none"))
    assert not report.errors and _findings(report) == _findings(real) and report.graph_breaks
    line = f"user_targets.py:{marker_line(str(TARGETS / 'user_targets.py'), 'eager_only')}"
    assert any(n.startswith("The eager pass stopped at ") and line in n for n in report.notes), report.notes


def test_a_model_too_big_for_the_machine_is_diagnosed_without_its_weights(tmp_path):
    """20 GB of float32 weights on a machine that may have less: built on meta, its recompile is found, and
    the process never holds the weights."""
    out = tmp_path / "r.json"
    # the CLI under a process of its own, which reports the largest of its descendants' peaks (this test
    # process's own RUSAGE_CHILDREN would count every child the other tests of this worker ran before)
    probe = (
        "import resource, subprocess, sys; done = subprocess.run([sys.executable, '-m', 'ctc_doctor', *sys.argv[1:]]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)"
    )
    args = ("user_targets:too_big_for_this_machine", "--weights", "none", "--no-bisect", "--json", str(out))
    env = {**os.environ, "PYTHONPATH": str(TARGETS), "COLUMNS": "120"}
    result = subprocess.run([sys.executable, "-c", probe, *args], cwd=TARGETS, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.target.parameters == 5_000_000_000 and report.target.weights == "none"
    [cause] = report.recompile_causes
    assert report.summary.recompile_count == 1 and (cause.kind, cause.dim) == ("size", 0), cause
    assert int(result.stdout.split()[-1]) < 4 * 2**20  # KB: the CLI's peak under 4 GB


def test_a_run_without_the_weights_that_stops_runs_a_real_twin_and_says_so(cli, tmp_path):
    """A transformers Llama with its KV cache: on meta tensors Dynamo cannot fake the cache's empty tensor, so
    the run stops; a 2-layer twin of the same class, built from the model's config and run on the builder's
    own inputs, gives the findings, labelled, exactly those of the same 2-layer model built directly."""
    out = tmp_path / "r.json"
    result = cli("analyze", "user_targets:llama_kv_cache", "--weights", "none", "--no-bisect", "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.target.weights == "twin" and not report.errors, report.errors
    six_layers = load_workload(f"{TARGETS / 'user_targets.py'}:llama_kv_cache", weights="none").model
    assert report.target.parameters == sum(p.numel() for p in six_layers.parameters())  # the model's, not the twin's
    assert report.target.twin.startswith("LlamaForCausalLM built from your model's config with 2 of its 6 layers")
    stop, scale = report.notes[:2]
    assert stop.startswith("Without the weights the run stopped") and "These findings are a real twin's" in stop
    assert "scale by 3" in scale
    assert report.cost.notes[0].startswith("before the twin's run: the run without the weights (")
    real = analyze(load_workload(f"{TARGETS / 'user_targets.py'}:llama_kv_cache_twin"), AnalyzeOptions(**OPTIONS))
    assert _findings(report) == _findings(real) and report.summary.recompile_count == 1
    assert "without the weights: a real twin's" in result.stdout
    from ctc_doctor.reports.markdown import render_markdown

    assert "| weights | none: a real twin's findings: LlamaForCausalLM built from your model's config" in render_markdown(report)
    # a CI gate on recompiles counts one made inside a numbered layer once a layer of the model, not of the twin
    from ctc_doctor.reports.policy import Policy, violations

    assert report.target.twin_scale == 3 and not violations(report, Policy(max_recompiles=1))  # the prompt's, once
    rc = report.recompiles[0]
    layered = report.model_copy(update={"recompiles": [rc.model_copy(update={"module_paths": ["model.layers.1.self_attn"]})]})
    assert violations(layered, Policy(max_recompiles=1))[0] == (
        "3 recompile(s) in your model by the twin's count (1 on the twin, 1 inside a layer x 3), more than the 1 allowed:"
    )
    refused = cli("analyze", "user_targets:llama_kv_cache", "--weights", "none", "--no-twin", "--no-bisect", "--json", str(out))
    assert refused.returncode == 15 and load_report(out).target.weights == "none", refused.stderr


def test_a_twin_that_would_not_fit_is_narrower_and_a_run_can_refuse_the_twin():
    target = f"{TARGETS / 'user_targets.py'}:llama_kv_cache"
    options = {**OPTIONS, "weights": "none", "spec": target}
    # 2 layers at full width hold 5.5 MB: past a 3 MB limit, the twin is narrower (its grouping of heads kept)
    narrow = analyze(load_workload(target, weights="none"), AnalyzeOptions(**options, memory_limit_mb=3))
    assert narrow.target.weights == "twin" and "narrower (hidden 256 -> 128, heads 8 -> 4, key/value heads 2 -> 1" in narrow.target.twin
    assert narrow.summary.recompile_count == 1
    # past 1 MB even the narrower twin (its embeddings) does not fit: the stop stays, and says why
    tight = analyze(load_workload(target, weights="none"), AnalyzeOptions(**options, memory_limit_mb=1))
    assert tight.target.weights == "none" and [e.phase for e in tight.errors] == ["weights"]
    assert "No real twin to run instead: 2 of its 6 layers would hold 2 MB, past the twin's 1 MB." in tight.notes
    refused = analyze(load_workload(target, weights="none"), AnalyzeOptions(**options, twin=False))
    assert refused.target.weights == "none" and [e.phase for e in refused.errors] == ["weights"]
    unnamed = analyze(load_workload(target, weights="none"), AnalyzeOptions(**OPTIONS, weights="none"))
    assert any(n.startswith("No real twin to run instead: it is built from the TARGET") for n in unnamed.notes)
