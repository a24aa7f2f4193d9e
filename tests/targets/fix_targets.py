"""Builders for the fix tests, loaded in-process as file targets (no backend registration here)."""

import torch

from ctc_doctor import Workload


class ShapeChangingBranch(torch.nn.Module):
    """A branch whose two sides have different shapes: the `torch.where` rewrite is wrong here."""

    def forward(self, x):
        if x.sum() > 0:
            return x.sum(dim=0)
        return x


def unsafe_branch():
    return ShapeChangingBranch(), (torch.rand(4, 8),)


def gpt2_with_labels():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 128, (2, 8))
    return Workload(model, kwargs={"input_ids": ids, "labels": ids}, name="gpt2_with_labels")


class LengthSpecialized(torch.nn.Module):
    """`x.shape[1] == 8` specializes the length: marking it dynamic fails, and torch logs the guard it
    could not build (ConstraintViolationError) as ERROR records on stderr."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        if x.shape[1] == 8:
            x = x * 2
        return self.lin(x)


def length_specialized():
    return LengthSpecialized(), (torch.randn(2, 8, 16),), [(torch.randn(2, 12, 16),)]
