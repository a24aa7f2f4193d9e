"""A target for `sweep diff` tests: clean, unless CTC_TEST_PLANTED_BREAK is set in the environment,
then its forward prints (a graph break) — the regression a torch upgrade or a commit would plant."""

import os

import torch
from torch import nn


class Planted(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        if os.environ.get("CTC_TEST_PLANTED_BREAK"):
            print("planted")
        return torch.relu(self.proj(x))


def planted():
    return Planted(), (torch.randn(2, 4),)
