"""Denoising loops over a tiny diffusers UNet built from a config (no download), as scripts for
`ctc-doctor run`; the argument picks the loop:

- `scheduler`: a compiled step function that holds `scheduler.step` (the scheduler's own breaks and its
  `_step_index` recompiles);
- `float`: the UNet compiled alone, given the timestep as a Python float (`t.item()`);
- `regional`: `compile_repeated_blocks()`, then other resolutions and one channels_last batch.
"""

import sys

import torch
from diffusers import EulerDiscreteScheduler
from tiny_diffusers import tiny_unet

unet = tiny_unet()
scheduler = EulerDiscreteScheduler()
scheduler.set_timesteps(6)
text = torch.randn(2, 4, 32)
latents = torch.randn(2, 4, 8, 8)


def denoise_step(latents, t):
    noise = unet(scheduler.scale_model_input(latents, t), t, encoder_hidden_states=text).sample
    return scheduler.step(noise, t, latents).prev_sample  # the scheduler's step, compiled


def float_timestep(latents):
    compiled = torch.compile(unet, backend="eager")
    for t in scheduler.timesteps:
        noise = compiled(scheduler.scale_model_input(latents, t), t.item(), encoder_hidden_states=text).sample
        latents = scheduler.step(noise, t, latents).prev_sample
    return latents


def regional():
    unet.compile_repeated_blocks(backend="eager")
    for size in (8, 16, 24, 32, 8):
        unet(torch.randn(2, 4, size, size), torch.tensor(10), encoder_hidden_states=text)
    unet(torch.randn(2, 4, 8, 8).to(memory_format=torch.channels_last), torch.tensor(10), encoder_hidden_states=text)


with torch.no_grad():
    if sys.argv[1] == "scheduler":
        step = torch.compile(denoise_step, backend="eager")
        for t in scheduler.timesteps:
            latents = step(latents, t)
    elif sys.argv[1] == "float":
        float_timestep(latents)
    else:
        regional()
