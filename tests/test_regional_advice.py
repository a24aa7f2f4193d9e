"""Regional compilation that uses what the library declares: the blocks a model lists (`_repeated_blocks`,
`_no_split_modules`) first, else the repeated unit that carries the compute; never a layer or a helper."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ctc_doctor import AnalyzeOptions, Workload, analyze
from ctc_doctor.analyzer.fixes.model_facts import repeated_groups


class LoraLinear(nn.Module):
    """A LoRA-wrapped layer as PEFT builds one: a base layer and its adapters, named like a layer."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.base_layer = nn.Linear(d, d)
        self.lora_A = nn.ModuleDict({"default": nn.Linear(d, 2, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(2, d, bias=False)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B["default"](self.lora_A["default"](x))


class AdaNorm(nn.Module):
    """A small helper repeated inside every block (few parameters)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d, elementwise_affine=False)
        self.scale = nn.Linear(4, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) * self.scale.bias


class TransformerBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = AdaNorm(d), AdaNorm(d)
        self.to_q, self.to_k, self.to_v = LoraLinear(d), LoraLinear(d), LoraLinear(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        attn = torch.softmax(self.to_q(h) @ self.to_k(h).transpose(-1, -2), dim=-1) @ self.to_v(h)
        return x + attn + self.ff(self.norm2(x + attn))


class Stage(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.conv = nn.Linear(d, d)
        self.attentions = nn.ModuleList([TransformerBlock(d)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attentions[0](self.conv(x))


class UNetLike(nn.Module):
    """Blocks spread over the tree (one per stage, as a UNet's), declared the way diffusers declares them."""

    _repeated_blocks = ["TransformerBlock"]

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.down_blocks = nn.ModuleList([Stage(d), Stage(d)])
        self.mid_block = Stage(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.down_blocks:
            x = stage(x)
        return self.mid_block(x)

    def compile_repeated_blocks(self, **kwargs: object) -> None:  # diffusers' ModelMixin has it
        for module in self.modules():
            if type(module).__name__ in self._repeated_blocks:
                module.compile(**kwargs)


class Undeclared(UNetLike):
    _repeated_blocks: list[str] = []


@pytest.mark.fast
def test_the_declared_blocks_are_the_regional_unit_wherever_they_sit():
    [group] = repeated_groups(UNetLike())
    assert (group.class_name, group.declared) == ("TransformerBlock", "_repeated_blocks")
    assert group.paths == ["down_blocks.0.attentions.0", "down_blocks.1.attentions.0", "mid_block.attentions.0"]


@pytest.mark.fast
def test_without_a_declaration_no_layer_or_helper_is_proposed():
    groups = repeated_groups(Undeclared())
    names = {g.class_name for g in groups}
    assert "LoraLinear" not in names and "AdaNorm" not in names and "Linear" not in names
    assert names == {"Stage"}  # the unit that carries the compute


@pytest.mark.fast
@pytest.mark.transformers
def test_a_transformers_model_names_its_decoder_layer_class():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=3, n_head=2, n_embd=32, vocab_size=64, n_positions=32, bos_token_id=0, eos_token_id=0)
    [group] = repeated_groups(GPT2LMHeadModel(config))
    assert (group.class_name, group.declared, group.container) == ("GPT2Block", "_no_split_modules", "transformer.h")


@pytest.mark.fast
@pytest.mark.transformers
def test_a_transformers_model_inside_the_users_wrapper_still_names_its_decoder_layer_class():
    """The user's own module holding the library model (a training wrapper, a LightningModule): the blocks
    the inner model declares are the regional unit, by their paths from the wrapper."""
    from transformers import GPT2Config, GPT2LMHeadModel

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            config = GPT2Config(n_layer=3, n_head=2, n_embd=32, vocab_size=64, n_positions=32, bos_token_id=0, eos_token_id=0)
            self.lm = GPT2LMHeadModel(config)
            self.extra = nn.ModuleList(nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(2))

        def forward(self, ids):
            return self.lm(ids).logits

    [group] = repeated_groups(Wrapper())
    assert (group.class_name, group.declared, group.container) == ("GPT2Block", "_no_split_modules", "lm.transformer.h"), group
    assert group.paths == ["lm.transformer.h.0", "lm.transformer.h.1", "lm.transformer.h.2"]


def test_the_suggestion_uses_the_librarys_own_call_and_names_the_declared_blocks():
    torch.manual_seed(0)
    report = analyze(Workload(UNetLike().eval(), (torch.randn(2, 16),)), AnalyzeOptions(explain=False))
    [s] = [s for s in report.suggestions if s.rule == "regional-compile"]
    assert s.title == "Compile the 3 repeated `TransformerBlock` blocks one by one (regional compilation)"
    assert "`_repeated_blocks`" in s.rationale
    assert s.snippet.startswith("model.compile_repeated_blocks(fullgraph=True)")
    assert s.action.module_paths == ["down_blocks.0.attentions.0", "down_blocks.1.attentions.0", "mid_block.attentions.0"]


@pytest.mark.hf
def test_sd3_and_flux_name_the_blocks_they_declare():
    """Flux lists its two block classes in `_repeated_blocks`; SD3 lists none there but names its block in
    `_no_split_modules` (tiny configs, no download)."""
    pytest.importorskip("diffusers")
    from diffusers import FluxTransformer2DModel, SD3Transformer2DModel

    sd3 = SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_layers=3, attention_head_dim=8, num_attention_heads=2,
        joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=16, out_channels=4, pos_embed_max_size=16,
    )  # fmt: skip
    assert [(g.class_name, g.declared, len(g.paths)) for g in repeated_groups(sd3)] == [("JointTransformerBlock", "_no_split_modules", 3)]
    flux = FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=2, num_single_layers=3, attention_head_dim=8, num_attention_heads=2,
        joint_attention_dim=16, pooled_projection_dim=16, axes_dims_rope=(2, 2, 4),
    )  # fmt: skip
    groups = [(g.class_name, g.declared, len(g.paths)) for g in repeated_groups(flux)]
    assert groups == [("FluxTransformerBlock", "_repeated_blocks", 2), ("FluxSingleTransformerBlock", "_repeated_blocks", 3)]
    # inside the user's own wrapper, the same blocks (not AdaLayerNormZero or FeedForward, found by shape)
    wrapped = nn.ModuleDict({"transformer": flux, "head": nn.Linear(4, 4)})
    groups = [(g.class_name, g.declared, g.container) for g in repeated_groups(wrapped)]
    assert groups == [
        ("FluxTransformerBlock", "_repeated_blocks", "transformer.transformer_blocks"),
        ("FluxSingleTransformerBlock", "_repeated_blocks", "transformer.single_transformer_blocks"),
    ], groups
