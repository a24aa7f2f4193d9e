"""Big models for this CPU machine: the CPU twin of the 7B-on-an-80-GB-GPU goal (issue 63).

- `llama_3b`: Llama-3.2-3B's shape (28 layers, hidden 3072, 24/8 heads, MLP 8192, vocabulary 128256, tied
  embeddings: 3.2B parameters) with random weights in bfloat16 (6.4 GB; its float64 copy would be 26 GB, more
  than this 23 GB machine has). Built on meta, then materialised in bf16 (no float32 copy on the way); one
  prefill of 1 x 32 tokens, no KV cache.
- `llama_1b_train`: Llama-3.2-1B's shape in bf16 (16 layers, hidden 2048), a training step (SGD) on 1 x 32.

    /usr/bin/time -v .venv/bin/ctc-doctor bench benchmarks/big_models.py:llama_3b --no-fix --json /tmp/3b.json
"""

from __future__ import annotations

import torch

from ctc_doctor import Workload


def llama_config(layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, tied: bool = False, **more: object) -> object:
    """A `LlamaConfig` of that shape (4096 positions); `more`: other fields (`torch_dtype`)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=4096,
        **more,
    )


def _llama(layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, tied: bool) -> torch.nn.Module:
    from transformers import LlamaForCausalLM

    config = llama_config(layers, hidden, heads, kv, ffn, vocab, tied, torch_dtype="bfloat16")
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # its inv_freq, from the config (to_empty left it raw)
    if tied:
        model.tie_weights()
    return model.eval()


def llama_3b() -> Workload:
    model = _llama(28, 3072, 24, 8, 8192, 128256, tied=True)
    ids = torch.randint(0, 128256, (1, 32), generator=torch.Generator().manual_seed(1))
    return Workload(model, kwargs={"input_ids": ids, "use_cache": False}, name="llama-3b-bf16")


def llama_1b_train() -> Workload:
    model = _llama(16, 2048, 32, 8, 8192, 128256, tied=True).train()
    ids = torch.randint(0, 128256, (1, 32), generator=torch.Generator().manual_seed(1))
    return Workload(
        model,
        kwargs={"input_ids": ids, "labels": ids, "use_cache": False},
        loss_fn=lambda out: out.loss,
        optimizer=lambda params: torch.optim.SGD(params, lr=1e-4),
        name="llama-1b-bf16-train",
    )
