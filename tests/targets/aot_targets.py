"""Small models for the AOT arms: a stack of identical blocks (exports; the regional arm loads one
package per block class), called with two batch sizes."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(16, 16)
        self.l2 = nn.Linear(16, 16)

    def forward(self, x):
        return x + self.l2(torch.sigmoid(self.l1(x)))


class Stack(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.embed = nn.Linear(16, 16)
        self.layers = nn.ModuleList([Block() for _ in range(n)])

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return x


def stack():
    return Stack().eval(), (torch.randn(4, 16),), [(torch.randn(6, 16),)]
