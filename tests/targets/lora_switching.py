"""A LoRA app that switches adapters between images, as a script for `ctc-doctor run` (a tiny diffusers UNet
built from a config, the adapters made in memory: no download). It loads adapter `a` (rank 4), compiles,
then loads `b` (rank 8) at step 4, switches back to `a` at step 8 and to `b` at half strength at step 11:
each change recompiles, which diffusers' hotswap recipe avoids (`run --compare default,hotswap`). With the
argument `pipeline` it does the same through a pipeline (`load_lora_weights`, the pipeline's
`set_adapters`) instead of the model's own calls. It prints a checksum of every step's output, to compare
the runs' results."""

import copy
import sys

import torch
from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline
from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model
from tiny_diffusers import tiny_unet

unet = tiny_unet()


def adapter(rank, seed):
    """A trained-looking LoRA for the UNet's attention projections, as a state dict (what a file holds)."""
    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=rank, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False)
    return get_peft_model_state_dict(inject_adapter_in_model(config, copy.deepcopy(unet), adapter_name="x"), adapter_name="x")


style_a, style_b = adapter(4, 1), adapter(8, 2)
x, t, text = torch.randn(2, 4, 8, 8), torch.tensor(10), torch.randn(2, 4, 32)
if sys.argv[1:] == ["pipeline"]:  # the pipeline's calls, which load into its UNet (no text encoder: none to load)
    vae = AutoencoderKL(block_out_channels=(8,), norm_num_groups=8, latent_channels=4)
    pipe = StableDiffusionPipeline(
        vae=vae, text_encoder=None, tokenizer=None, unet=unet, scheduler=EulerDiscreteScheduler(),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    load = lambda weights, name: pipe.load_lora_weights({f"unet.{k}": v for k, v in weights.items()}, adapter_name=name)  # noqa: E731
    activate = pipe.set_adapters
else:
    load = lambda weights, name: unet.load_lora_adapter(weights, adapter_name=name, prefix=None)  # noqa: E731
    activate = unet.set_adapters
load(style_a, "a")
compiled = torch.compile(unet, backend="eager")
total = 0.0
with torch.no_grad():
    for step in range(14):
        if step == 4:
            load(style_b, "b")  # loading makes it the active one
        elif step == 8:
            activate("a")
        elif step == 11:
            activate("b", 0.5)
        total += compiled(x, t, encoder_hidden_states=text).sample.double().abs().sum().item()
print(f"checksum {total:.6f}")  # every step's output: each adapter and scale in turn
