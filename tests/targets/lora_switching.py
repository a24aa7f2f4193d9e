"""A LoRA app that switches adapters between images, as a script for `ctc-doctor run` (a tiny diffusers UNet
built from a config, the adapters made in memory: no download). It loads adapter `a` (rank 4), compiles,
then loads `b` (rank 8) at step 4, switches back to `a` at step 8 and to `b` at half strength at step 11:
each change recompiles, which diffusers' hotswap recipe avoids (`run --compare default,hotswap`). It
prints a checksum of the last output, to compare the runs' results."""

import copy

import torch
from diffusers import UNet2DConditionModel
from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model

torch.manual_seed(0)
unet = UNet2DConditionModel(
    sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    cross_attention_dim=32, attention_head_dim=8, norm_num_groups=16,
).eval()  # fmt: skip


def adapter(rank, seed):
    """A trained-looking LoRA for the UNet's attention projections, as a state dict (what a file holds)."""
    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=rank, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False)
    return get_peft_model_state_dict(inject_adapter_in_model(config, copy.deepcopy(unet), adapter_name="x"), adapter_name="x")


style_a, style_b = adapter(4, 1), adapter(8, 2)
x, t, text = torch.randn(2, 4, 8, 8), torch.tensor(10), torch.randn(2, 4, 32)
unet.load_lora_adapter(style_a, adapter_name="a", prefix=None)
compiled = torch.compile(unet, backend="eager")
with torch.no_grad():
    for step in range(14):
        if step == 4:
            unet.load_lora_adapter(style_b, adapter_name="b", prefix=None)  # loading makes it the active one
        elif step == 8:
            unet.set_adapters("a")
        elif step == 11:
            unet.set_adapters("b", 0.5)
        out = compiled(x, t, encoder_hidden_states=text).sample
print(f"checksum {out.double().abs().sum().item():.6f}")
