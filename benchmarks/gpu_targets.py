"""Workloads that fill a GPU, for the CUDA checks of `shared/gpu-checklist.md` and
`benchmarks/doctor_cost.py --device cuda`: models built from configs in bf16 (no download); the doctor
moves them to the device (`--device cuda`).

- `gpt2_small_bf16`: GPT-2 small (124M parameters), eval; batch 8 x 512, then 8 x 640 (the second
  length recompiles).
- `llama_1b_bf16`: a Llama of TinyLlama's shape (22 layers, width 2048, GQA 32/4 heads, 1.1B
  parameters), eval; batch 4 x 512, then 4 x 640.
- `llama_7b_bf16`: a Llama of Llama-2-7B's shape (6.7B parameters), built on the meta device and
  materialised in bf16 on the GPU; batch 1 x 512, then 1 x 640.
- `llama_7b_train`: the same model in training, a step of SGD on 1 x 512 with labels: its float64
  parameters and gradients (108 GB) fit no 80 GB card, one module's at a time do (`streamed`).
"""

from __future__ import annotations

import torch

from ctc_doctor import Workload


def _lengths(model: torch.nn.Module, vocab: int, batch: int, lengths: tuple[int, ...], name: str) -> Workload:
    calls = [torch.randint(0, vocab, (batch, n)) for n in lengths]
    return Workload(model, kwargs={"input_ids": calls[0]}, variants=[{"input_ids": c} for c in calls[1:]], name=name)


def gpt2_small_bf16() -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(torch.bfloat16).eval()
    return _lengths(model, 50257, 8, (512, 640), "gpt2-small-bf16")


def llama_1b_bf16() -> Workload:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=32000,
        max_position_embeddings=2048,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    model.apply(model._init_weights)  # real random weights (to_empty leaves garbage)
    return _lengths(model.eval(), 32000, 4, (512, 640), "llama-1.1b-bf16")


def _llama_7b() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        max_position_embeddings=4096,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    where = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to_empty(device=where).to(torch.bfloat16)
    model.apply(model._init_weights)  # real random weights (to_empty leaves garbage)
    return model


def llama_7b_train() -> Workload:
    """Llama-2-7B's shape in bf16, a training step of SGD on 1 x 512 tokens with labels (issue 63's 7B on
    one 80 GB GPU, training: its float64 reference goes one module's parameters at a time)."""
    model = _llama_7b().train()
    ids = torch.randint(0, 32000, (1, 512), generator=torch.Generator().manual_seed(1))
    return Workload(
        model,
        kwargs={"input_ids": ids, "labels": ids, "use_cache": False},
        loss_fn=lambda out: out.loss,
        optimizer=lambda params: torch.optim.SGD(params, lr=1e-4),
        name="llama-7b-bf16-train",
    )


def llama_7b_bf16() -> Workload:
    """A Llama of Llama-2-7B's shape (32 layers, width 4096, 32 heads, MLP 11008, 6.7B parameters), random
    weights, built on the meta device and materialised in bf16 where it will run (the GPU when there is
    one: 13.5 GB, seconds; the host otherwise), eval; batch 1 x 512, then 1 x 640. The 7B check of the
    fit-beside-the-model issue: its float64 copy alone would be 54 GB."""
    return _lengths(_llama_7b().eval(), 32000, 1, (512, 640), "llama-7b-bf16")
