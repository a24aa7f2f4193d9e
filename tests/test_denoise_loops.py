"""Denoising loops under `ctc-doctor run` (a tiny diffusers UNet built from a config; `targets/denoise_loops.py`):
the scheduler's own breaks and recompiles are the library's and get one answer, a float timestep gets the
tensor timestep verified on the script's own calls, and blocks that diffusers compiles get advice the user
can act on."""

from __future__ import annotations

import json

import pytest

from ctc_doctor.errors import ExitCode
from ctc_doctor.reports.models import Report

from .conftest import TARGETS

pytest.importorskip("diffusers", reason="the denoising loops need diffusers (the `hf` extra)")
pytestmark = pytest.mark.hf

SCRIPT = TARGETS / "denoise_loops.py"


def _run(cli, loop: str, *options: str) -> Report:
    result = cli("run", "--json", "-", "--no-bisect", *options, "--", str(SCRIPT), loop)
    assert result.returncode == ExitCode.OK, result.stderr[-2000:]
    return Report.model_validate(json.loads(result.stdout))


def test_a_compiled_scheduler_step_is_the_librarys_at_the_users_line_with_one_answer(cli):
    report = _run(cli, "scheduler", "--no-fix")
    step_line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if "scheduler.step(noise, t, latents)" in text)
    assert report.graph_breaks and all(s.owner == "library" and s.library == "diffusers" for s in report.graph_breaks)
    assert any(s.own_frame and s.own_frame.line == step_line and s.own_frame.file.endswith("denoise_loops.py") for s in report.graph_breaks)
    # `_step_index`, read by scale_model_input, step and step's resume function: one counter, one cause
    [cause] = report.recompile_causes
    assert cause.source == "self._step_index" and len(cause.recompiles) == report.summary.recompile_count >= 3
    [answer] = [s for s in report.suggestions if s.rule == "scheduler-eager"]
    assert set(answer.applies_to) == {s.id for s in report.graph_breaks} | {r.id for r in report.recompiles}
    assert "scheduler.step(noise, t, latents).prev_sample  # eager" in (answer.snippet or "")
    # a scheduler is no module: no module option, no "stop changing it", no upgrade for its by-design code
    assert not {s.rule for s in report.suggestions} & {"unspec-int-attribute", "state-recompile", "library-upgrade", "tensor-counter"}


def test_a_float_timestep_gets_the_tensor_timestep_verified_on_the_scripts_calls(cli):
    report = _run(cli, "float")
    assert report.summary.recompile_count == 1
    [cause] = report.recompile_causes
    assert cause.source == "timestep" or "timestep" in cause.summary
    [tensor] = [s for s in report.suggestions if s.rule == "scalar-to-tensor"]
    assert tensor.verified is not None and tensor.verified.effective, tensor.verified
    assert tensor.verified.before.recompile_count == 1 and tensor.verified.after.recompile_count == 0


def test_blocks_diffusers_compiles_get_dynamic_true_on_its_call_and_the_layout_advice(cli):
    report = _run(cli, "regional", "--no-fix")
    analyzed = next(o for o in report.compiled if o.analyzed)
    assert analyzed.library == "diffusers" and len(report.compiled) > 1
    kinds = {c.kind for c in report.recompile_causes}
    assert {"size", "stride"} <= kinds, report.recompile_causes
    rules = [s.rule for s in report.suggestions]
    assert "library-compile-dynamic" in rules and "stride-inside" in rules
    dynamic = next(s for s in report.suggestions if s.rule == "library-compile-dynamic")
    assert "compile_repeated_blocks(dynamic=True)" in (dynamic.snippet or "")
    # the user calls neither the block nor its arguments; the blocks are already compiled one by one
    assert not {"mark-dynamic", "stride-recompile", "regional-compile"} & set(rules)
