"""LoRA adapters as recompile causes, on real PEFT (and a tiny diffusers UNet built from a config): one cause
that says what happened to the adapter, the recipes that hold as its suggestions, module paths in what
people read, and the recipe itself checked to compile once."""

from __future__ import annotations

import pytest

from ctc_doctor import AnalyzeOptions, analyze
from ctc_doctor.analyzer.services.target import load_workload

from .conftest import TARGETS

pytest.importorskip("peft", reason="the adapter tests need peft (the `hf` extra)")
pytestmark = pytest.mark.hf

ADAPTERS = TARGETS / "adapter_targets.py"


def _same_checksums(stderr: str) -> bool:
    """The script's own run and its replay printed the same checksum (`checksum 123.456789`, one line each)."""
    checksums = [float(line.split()[1]) for line in stderr.splitlines() if line.startswith("checksum")]
    return len(checksums) == 2 and checksums[1] == pytest.approx(checksums[0], rel=1e-5)


def _analyzed(name: str):
    return analyze(load_workload(f"{ADAPTERS}:{name}", seed=0), AnalyzeOptions(spec=name, explain=False))


def test_an_adapter_added_switched_and_rescaled_after_compile_is_one_cause_with_the_recipes():
    report = _analyzed("changed_after_compile")
    assert report.summary.recompile_count == 3
    [cause] = report.recompile_causes
    assert cause.kind == "adapter" and len(cause.recompiles) == 3
    assert cause.summary.startswith("a LoRA adapter was added or removed / switched / rescaled after compile")
    assert cause.source == "len(mid_block.attn.to_k.lora_A)"  # a module path, not `self._modules[...]`
    assert any("_modules" in g.source for rc in report.recompiles for g in rc.failed_guards if g.source)  # the evidence stays raw
    rules = [s.rule for s in report.suggestions]
    assert rules[:2] == ["adapters-before-compile", "lora-hotswap"]
    hotswap = report.suggestions[1]
    assert "enable_lora_hotswap(target_rank=" in hotswap.snippet and "prepare_model_for_compiled_hotswap" in hotswap.snippet
    assert not any(s.rule in ("state-recompile", "requires-grad-recompile") for s in report.suggestions)


def test_the_hotswap_recipe_compiles_once_for_the_same_changes():
    report = _analyzed("hotswapped")
    assert report.summary.recompile_count == 0 and report.summary.verdict == "clean"


def test_an_adapter_made_trainable_gets_the_adapter_advice_not_the_no_grad_one():
    report = _analyzed("trainable_after_compile")
    [cause] = report.recompile_causes
    assert cause.kind == "adapter" and "made trainable" in cause.summary
    assert cause.source == "mid_block.attn.to_k.lora_A.default.weight"
    rules = {s.rule for s in report.suggestions}
    assert "adapter-requires-grad" in rules and "lora-hotswap" not in rules
    assert not any("no_grad" in s.title for s in report.suggestions)


def test_a_diffusers_unet_is_compiled_by_the_blocks_it_declares():
    pytest.importorskip("diffusers")
    import torch
    from diffusers import UNet2DConditionModel

    from ctc_doctor.analyzer.fixes.model_facts import repeated_groups

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32), norm_num_groups=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16, attention_head_dim=4,
    )  # fmt: skip
    groups = repeated_groups(unet)
    assert [(g.class_name, g.declared) for g in groups] == [("BasicTransformerBlock", "_repeated_blocks")]
    assert len(groups[0].paths) >= 3 and all("transformer_blocks" in p for p in groups[0].paths)
    assert not any(g.class_name in ("Linear", "LoRACompatibleLinear", "FeedForward", "AdaLayerNormZero") for g in groups)


@pytest.mark.parametrize("spelling", ["model", "pipeline"])
def test_run_compare_hotswap_replays_a_switching_script_with_the_recipe_and_measures_it(cli, spelling):
    """The script loads, switches and rescales adapters after compiling (3 recompiles), through the model's calls
    or a pipeline's; replayed with diffusers' hotswap recipe it compiles once and computes the same outputs at
    every step; the hotswap suggestion carries that measurement."""
    pytest.importorskip("diffusers")
    import json

    from ctc_doctor.errors import ExitCode
    from ctc_doctor.reports.models import Report

    script = str(TARGETS / "lora_switching.py")
    result = cli("run", "--compare", "default,hotswap", "--no-bisect", "--no-fix", "--json", "-", "--", script, spelling)
    assert result.returncode == ExitCode.OK, result.stderr[-2000:]
    report = Report.model_validate(json.loads(result.stdout))
    assert report.compiled[0].lora_rank == 8  # a (4) and b (8) loaded: the rank the replay prepares for
    [cause] = report.recompile_causes
    assert cause.kind == "adapter" and len(cause.recompiles) == 3
    rows = {r.strategy: r for r in report.comparison}
    assert rows["default"].recompiles == 3 and rows["hotswap"].recompiles == 0, rows
    assert _same_checksums(result.stderr)  # every step's output, each adapter and scale in turn
    hotswap = next(s for s in report.suggestions if s.rule == "lora-hotswap")
    assert "target_rank=8" in (hotswap.snippet or "")
    recompiles = next(d for d in hotswap.deltas if d.metric == "recompiles")
    assert (recompiles.before, recompiles.after, recompiles.better) == (3, 0, True)
    assert recompiles.source == "run --compare: default -> hotswap"
    assert any(d.metric == "first_call_s" for d in hotswap.deltas) and hotswap.verdict == "recommended"  # one run: told, not judged
    assert not any(s.rule == "adapter-requires-grad" for s in report.suggestions)  # the new adapter's weights: part of adding it


def test_run_compare_hotswap_replays_a_peft_model_that_switches_adapters(cli):
    """PEFT's spelling: the model prepared at its compile, `load_adapter` kept aside, `set_adapter` swapped in."""
    import json

    from ctc_doctor.errors import ExitCode
    from ctc_doctor.reports.models import Report

    result = cli("run", "--compare", "default,hotswap", "--no-bisect", "--no-fix", "--json", "-", "--", str(TARGETS / "peft_switching.py"))
    assert result.returncode == ExitCode.OK, result.stderr[-2000:]
    report = Report.model_validate(json.loads(result.stdout))
    [cause] = report.recompile_causes
    assert cause.kind == "adapter" and "switched" in cause.summary  # `self.active_adapter` is the adapter's too
    rows = {r.strategy: r for r in report.comparison}
    assert rows["default"].recompiles == 2 and rows["hotswap"].recompiles == 0 and rows["hotswap"].exit_code == 0, rows
    assert _same_checksums(result.stderr)
    hotswap = next(s for s in report.suggestions if s.rule == "lora-hotswap")
    assert hotswap.verdict == "recommended" and "target_rank=8" in (hotswap.snippet or "")
