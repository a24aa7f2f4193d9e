"""Builders for the tests of the doctor's own cost (`cost_targets:NAME`, tests/targets on PYTHONPATH)."""

import torch
from torch import nn

from ctc_doctor import Workload

WIDTH = 4096
"""Each block's Linear holds WIDTH**2 float32 weights: 64 MB; four blocks make a 256 MB model."""


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width, bias=False)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:  # a data-dependent branch: a graph break the torch.where rewrite fixes
            h = h * 0.5
        return x + torch.tanh(h)


class Blocks(nn.Module):
    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def big_blocks() -> Workload:
    """Four 64 MB blocks, each breaking the graph: compiled, compiled_fixed and regional_fixed arms, each on
    its own 256 MB copy."""
    torch.manual_seed(0)
    return Workload(Blocks(WIDTH, 4), args=(torch.randn(2, WIDTH),), name="big-blocks")


def big_blocks_unpicklable() -> Workload:
    """big_blocks holding a lambda (pickle refuses it, deepcopy shares it): a model no file can keep."""
    workload = big_blocks()
    workload.model.scale = lambda x: x  # type: ignore[assignment]
    return workload


class AllocatesUnderCompile(nn.Module):
    """Small in eager; its compiled code builds a 4 GB scratch tensor (a compile path that needs far more
    memory than eager: what an out-of-memory arm looks like)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        if torch.compiler.is_compiling():
            scratch = torch.ones(1 << 30, dtype=torch.float32, device=x.device)
            y = y + scratch[:1].sum() - 1
        return y


def allocates_under_compile() -> Workload:
    torch.manual_seed(0)
    return Workload(AllocatesUnderCompile(), args=(torch.randn(4, 16),), name="allocates-under-compile")


def small() -> Workload:
    """A small MLP: milliseconds a pass, so a busy core shows in its timings."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    return Workload(model, args=(torch.randn(64, 256),), name="small")


def logits_heavy() -> Workload:
    """A 2-layer GPT-2 with GPT-2's vocabulary: small weights (13 MB), large logits (4 x 128 x 50,257 floats,
    103 MB a call), so its float64 reference is mostly activations: the fit-beside-the-model check."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=50257, n_positions=256, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    calls = [torch.randint(0, 50257, (4, n)) for n in (128, 160)]
    return Workload(model, kwargs={"input_ids": calls[0]}, variants=[{"input_ids": c} for c in calls[1:]], name="logits-heavy")
