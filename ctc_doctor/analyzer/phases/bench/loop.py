"""The one arm loop: every planned arm in order, eager first, each measured by an executor (`Executor`):
this process's `ArmRunner` (`phase`), or the arms' child process (`child`). What both share is here:
`--budget` leaves an optional arm out when a compiled arm's time no longer fits, a per-fix arm that can
change no decision is not measured, a failed eager arm ends the benchmark (nothing to compare against),
and an executor that can measure nothing more (a child that cannot start again) leaves each arm after
it a row that says why."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ....reports import models as rm
from .numbers import ArmBudget


@dataclass
class Measured:
    """One arm's row, and the benchmark settings it adds (the eager arm's: the numerics reference)."""

    arm: rm.BenchmarkArm
    settings: dict[str, Any] = field(default_factory=dict)


Executor = Callable[[int], "Measured | str"]
"""Measures planned arm `i`: its row, or why neither it nor any arm after it can be measured."""


def measure_arms(budget_s: float | None, plan: list[rm.BenchmarkArm], measure: Executor, result: rm.Benchmark) -> None:
    """Each arm of `plan` (its name, description and code) measured by `measure` into `result`, in order."""
    budget = ArmBudget(budget_s)
    for i, row in enumerate(plan):
        why = budget.left_out(row.name) or budget.needless(row.name, result.arms)
        if why is not None:
            result.notes.append(why)
            continue
        t0 = time.perf_counter()
        got = measure(i)
        if isinstance(got, str):
            result.arms.extend(left.model_copy(update={"error": got}) for left in plan[i:])
            return
        budget.spent(time.perf_counter() - t0, row.name != "eager")
        result.arms.append(got.arm)
        result.settings.update(got.settings)
        if row.name == "eager" and got.arm.error:
            result.notes.append("eager failed: nothing to compare against.")
            return
