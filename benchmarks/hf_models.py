"""Transformers models for the benchmarks that are not fixtures of the zoo (built from tiny configs,
random weights, no download). Each builder is a TARGET: `benchmarks/hf_models.py:led`."""

from __future__ import annotations

import torch

from ctc_doctor import Workload


def led() -> Workload:
    """LEDForConditionalGeneration (Longformer encoder-decoder), 2+2 layers, hidden 32, window 8."""
    from transformers import LEDConfig, LEDForConditionalGeneration

    config = LEDConfig(
        vocab_size=128,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_encoder_position_embeddings=64,
        max_decoder_position_embeddings=64,
        attention_window=8,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    model = LEDForConditionalGeneration(config).eval()
    ids = torch.randint(3, 128, (2, 16))
    return Workload(model, kwargs={"input_ids": ids, "decoder_input_ids": ids[:, :8]}, name="led")
