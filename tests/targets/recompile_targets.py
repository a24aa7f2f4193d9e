"""Builders of models whose recompile causes interact (`recompile_targets:NAME`, tests/targets on PYTHONPATH)."""

import torch
from torch import nn

from ctc_doctor import Workload


class StepAndDropout(nn.Module):
    """A step counter read from an integer attribute (a recompile per step, up to the recompile limit) and
    a dropout whose module is switched to eval once, between two calls of the same step."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)
        self.step = 0

    def forward(self, x):
        return self.drop(self.fc(x)) * (1.0 + self.step * 0.1)


STEPS = [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10]
"""Call 4 repeats step 3: the model's switch to eval is the only thing that changed then."""


def _step_then_eval(model, index):
    model.step = STEPS[index]
    if index == 4:
        model.eval()


def step_counter_and_one_eval_switch():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return Workload(StepAndDropout().train(), (x,), variants=[(x,)] * (len(STEPS) - 1), before_call=_step_then_eval)
