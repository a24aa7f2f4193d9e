"""A target addressed by file path (`tests/targets/file_target.py:build`)."""

import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


def build():
    return Gate(), (torch.randn(3, 3),)
