"""LoRA adapters (PEFT, as diffusers and transformers use it) changed after compile, and the hotswap recipe
that keeps them out of the guards: `build()` targets for the adapter tests."""

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.lora import LoraLayer

from ctc_doctor import Workload


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.to_q = torch.nn.Linear(16, 16)
        self.to_k = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.to_q(x) @ self.to_k(x).T, dim=-1)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mid_block = torch.nn.ModuleDict({"attn": Attention()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mid_block["attn"](x)


def _lora(rank: int) -> LoraConfig:
    return LoraConfig(r=rank, lora_alpha=rank, target_modules=["to_q", "to_k"], init_lora_weights=False)


def _layers(model: torch.nn.Module) -> list[LoraLayer]:
    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def _after_compile(model: torch.nn.Module, index: int) -> None:
    """Call 1 adds an adapter, call 2 switches to it, call 3 rescales it: what a LoRA app does between images."""
    if index == 1:
        inject_adapter_in_model(_lora(8), model, adapter_name="style_b")
    elif index == 2:
        for layer in _layers(model):
            layer.set_adapter("style_b")
    elif index == 3:
        for layer in _layers(model):
            layer.scaling["style_b"] = 0.5


def changed_after_compile() -> Workload:
    torch.manual_seed(0)
    model = inject_adapter_in_model(_lora(4), Model().eval(), adapter_name="style_a")
    x = torch.randn(4, 16)
    return Workload(model, (x,), variants=[(x,)] * 3, before_call=_after_compile, name="lora_after_compile")


def _made_trainable(model: torch.nn.Module, index: int) -> None:
    for name, p in model.named_parameters():
        if "lora_" in name:
            p.requires_grad_(index >= 1)


def trainable_after_compile() -> Workload:
    """The adapter's weights frozen for the first call, trainable from the second (a fine-tuning loop that
    unfreezes its adapter after a warm-up)."""
    torch.manual_seed(0)
    model = inject_adapter_in_model(_lora(4), Model(), adapter_name="default")
    x = torch.randn(4, 16)
    return Workload(model, (x,), variants=[(x,)] * 2, before_call=_made_trainable, name="lora_trainable")


def _hotswap(model: torch.nn.Module, index: int) -> None:
    """The recipe: the later adapters swapped into the prepared layers, rescaled in place."""
    from peft.utils.hotswap import hotswap_adapter_from_state_dict

    if index in (1, 2):
        torch.manual_seed(index)
        other = inject_adapter_in_model(_lora(4 + 4 * index), Model().eval(), adapter_name="default")
        weights = {k: v for k, v in other.state_dict().items() if "lora_" in k}
        hotswap_adapter_from_state_dict(model, weights, adapter_name="default", config=_lora(4 + 4 * index))
    elif index == 3:
        for layer in _layers(model):
            layer.scaling["default"].fill_(0.5)


def hotswapped() -> Workload:
    """`prepare_model_for_compiled_hotswap(target_rank=12)` before the first compile, then adapters swapped and
    rescaled in place: the recipe the advice gives."""
    from peft.utils.hotswap import prepare_model_for_compiled_hotswap

    torch.manual_seed(0)
    model = inject_adapter_in_model(_lora(4), Model().eval(), adapter_name="default")
    prepare_model_for_compiled_hotswap(model, target_rank=12, check_compiled="ignore")
    x = torch.randn(4, 16)
    return Workload(model, (x,), variants=[(x,)] * 3, before_call=_hotswap, name="lora_hotswapped")
