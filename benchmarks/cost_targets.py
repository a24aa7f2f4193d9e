"""Workloads the doctor's own cost is measured on (`benchmarks/doctor_cost.py`): GPT-2s built from configs
(no download), as the cost issue describes them.

- `gpt2_45m`: 6 layers, width 512, vocabulary 50257 (44.9M parameters), fp32, eval; batch 4 x 256, then 4 x 320
  (the second length recompiles).
- `gpt2_train_6`: 2 layers, width 32, a training step with AdamW; six batch lengths.
"""

from __future__ import annotations

import torch

from ctc_doctor import Workload


def _gpt2(layers: int, width: int, vocab: int, positions: int, heads: int):  # type: ignore[no-untyped-def]
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, vocab_size=vocab, n_positions=positions, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def gpt2_45m() -> Workload:
    torch.manual_seed(0)
    model = _gpt2(6, 512, 50257, 1024, 8).eval()
    calls = [torch.randint(0, 50257, (4, n)) for n in (256, 320)]
    return Workload(model, kwargs={"input_ids": calls[0]}, variants=[{"input_ids": c} for c in calls[1:]], name="gpt2-45m")


def gpt2_train_6() -> Workload:
    torch.manual_seed(0)
    model = _gpt2(2, 32, 128, 64, 2).train()
    lengths = (8, 12, 16, 20, 24, 32)
    calls = [torch.randint(0, 128, (2, n)) for n in lengths]
    return Workload(
        model,
        kwargs={"input_ids": calls[0], "labels": calls[0]},
        variants=[{"input_ids": c, "labels": c} for c in calls[1:]],
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3),
        name="gpt2-train-6-lengths",
    )
