"""Generation loops and compiles of compiles under `ctc-doctor run`: the doctor never changes what the
script does, names double and nested compiles, treats a decoding loop's one-off recompiles as expected,
verifies fixes on the loop's replayed calls, and gives a failing compiled run its cause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ctc_doctor.analyzer.capture.compiles import CompileRecorder
from ctc_doctor.errors import ExitCode
from ctc_doctor.reports import load_report

from .conftest import doctor_frames

LLAMA = (
    "import torch\n"
    "from transformers import LlamaConfig, LlamaForCausalLM\n"
    "torch.manual_seed(0)\n"
    "cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,\n"
    "                  num_key_value_heads=2, vocab_size=256)\n"
)


def _plain(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)


def _ok_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("OK"))


def test_transformers_generate_compile_over_a_compiled_forward_ends_as_plain_and_is_named(cli, tmp_path):
    """Static cache, `model.forward = torch.compile(model.forward)`, and transformers' own generate
    compile forced on (CPU): the same tokens as the plain script, the double compile named with both
    lines and what to drop, the forward's 8 calls (prefill and 7 decode steps) counted once each."""
    pytest.importorskip("transformers")
    script = tmp_path / "static_gen.py"
    script.write_text(
        LLAMA + "from transformers.generation.configuration_utils import CompileConfig\n"
        "model = LlamaForCausalLM(cfg).eval()\n"
        "model.forward = torch.compile(model.forward, backend='eager')\n"
        "config = CompileConfig(backend='eager')\n"
        "config._compile_all_devices = True  # transformers compiles generate on CUDA only, unless told\n"
        "ids = torch.randint(0, 256, (1, 6))\n"
        "with torch.no_grad():\n"
        "    out = model.generate(ids, max_new_tokens=8, do_sample=False, cache_implementation='static', compile_config=config)\n"
        "print('OK', out[0, -8:].tolist())\n"
    )
    plain = _plain(script)
    assert plain.returncode == 0, plain.stderr
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == 0, result.stderr
    assert _ok_line(result.stdout) == _ok_line(plain.stdout)
    report = load_report(out)
    assert report.errors == [] and doctor_frames(report) == []
    forward, outer = report.compiled
    assert (forward.name, forward.calls, forward.analyzed, forward.driver) == ("LlamaForCausalLM", 8, True, "generate")
    assert forward.site.endswith("static_gen.py:8") and "wrapped by `LlamaForCausalLM.__call__`" in (forward.relation or "")
    assert outer.library == "transformers" and outer.site.startswith("transformers/") and outer.calls == 7
    (note,) = [n for n in report.notes if "compiled twice" in n]
    assert "static_gen.py:8" in note and "disable_compile=True" in note


def test_a_nested_compile_is_analyzed_on_the_outer_compile_that_runs():
    """A compiled module called from a compiled function: Dynamo traces the inner one inside the outer
    one, so only the outer one runs; it is the analysis target, and the inner one says why it never ran."""
    recorder = CompileRecorder()
    with recorder.installed():
        block = torch.nn.Linear(8, 8)
        inner = torch.compile(block, backend="eager")

        def step(x):
            return inner(x * 2) + 1

        outer = torch.compile(step, backend="eager")
        for _ in range(3):
            outer(torch.randn(4, 8))
    assert [(o.what, o.calls) for o in recorder.objects] == [("Linear", 0), ("step", 3)]
    assert recorder.primary is recorder.objects[1]
    (note,) = recorder.relate()
    assert "`Linear`" in note and "inside `step`'s compile" in note and "test_generate.py:" in note
    assert "nested compile" in (recorder.objects[0].relation or "")


def test_a_decoding_loops_one_off_recompiles_are_expected_and_its_fix_is_verified_on_the_replayed_steps(cli, tmp_path):
    """Dynamic cache, a compiled forward with a print in it, driven by generate: prefill → decode, the
    cache's lazy set-up and its first growth are expected (verdict GRAPH BREAKS, not RECOMPILES; no
    suggestion for them), and the print's fix is verified on the recorded steps, each replayed from its
    own copy of the cache (eager's results unchanged by the replays, numerics judged)."""
    pytest.importorskip("transformers")
    script = tmp_path / "gen_print.py"
    script.write_text(
        LLAMA + "class Chatty(LlamaForCausalLM):\n"
        "    def forward(self, input_ids=None, **kwargs):\n"
        "        print('step', tuple(input_ids.shape))\n"
        "        return super().forward(input_ids=input_ids, **kwargs)\n"
        "model = Chatty(cfg).eval()\n"
        "model.forward = torch.compile(model.forward, backend='eager')\n"
        "ids = torch.randint(0, 256, (1, 6))\n"
        "with torch.no_grad():\n"
        "    out = model.generate(ids, max_new_tokens=8, do_sample=False)\n"
        "print('OK', out[0, -8:].tolist())\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("step (1, 1)") == 7  # the script's own steps: the doctor's replays print nothing
    report = load_report(out)
    (chatty,) = report.compiled
    assert chatty.driver == "generate" and chatty.first_call_s > 0 and chatty.period_ms > 0  # the loop's own pace
    assert report.summary.verdict == "graph_breaks"
    assert report.summary.expected_recompiles == report.summary.recompile_count >= 2
    expected = {c.summary: c.expected for c in report.recompile_causes}
    assert any(s.startswith("input_ids dim 1 changes 6 → 1") and e and e.startswith("prefill → decode") for s, e in expected.items())
    assert all(e is not None for e in expected.values())
    recompiles = {r.id for r in report.recompiles}
    assert not any(set(s.applies_to) & recompiles for s in report.suggestions)  # nothing to fix in them
    fix = report.fix
    assert fix is not None and fix.applied == ["S1"], fix
    v = fix.verification
    assert v is not None and v.numerics is not None and v.numerics.ok and v.numerics.method == "float64_reference"
    assert report.suggestions[0].deltas and report.suggestions[0].verdict == "recommended"
    assert doctor_frames(report) == []


def test_a_compiled_run_that_fails_gets_the_verdict_failed_and_what_the_failure_means(cli, tmp_path):
    """`mark_dynamic` on a length the model branches on: torch raises ConstraintViolationError. The
    script fails plainly and under the doctor alike; the verdict is FAILED (never CLEAN), and the error
    row says what the failure means and what to do."""
    script = tmp_path / "marked.py"
    script.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 2 if x.shape[0] == 4 else x\n"
        "net = torch.compile(Net(), backend='eager')\n"
        "x = torch.randn(4, 3)\n"
        "torch._dynamo.mark_dynamic(x, 0)\n"
        "net(x)\n"
    )
    assert _plain(script).returncode == 1
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    report = load_report(out)
    assert report.summary.verdict == "failed"
    (error,) = [e for e in report.errors if e.phase == "script"]
    assert "ConstraintViolationError" in error.message and "mark_dynamic" in (error.hint or "")
    assert "what it means" in result.stdout + result.stderr
