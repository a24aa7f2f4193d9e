"""The tiny diffusers UNet the denoising and LoRA scripts share (built from a config: no download)."""

import torch
from diffusers import UNet2DConditionModel


def tiny_unet() -> UNet2DConditionModel:
    """A UNet of two levels with cross-attention at the outer one (4 `BasicTransformerBlock`s), seeded, eval."""
    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=16,
    ).eval()  # fmt: skip
