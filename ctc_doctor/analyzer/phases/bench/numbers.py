"""The benchmark's numbers that need no model: pass statistics, steps/s and break-even, the arm for a
job length, and padded copies of a workload's calls (`bench`'s helpers, apart to keep it readable)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from ....reports import models as rm
from ....reports.verdicts import break_even_calls
from ....workload import Call
from ...fixes.variants import argument_slot


def latency_stats(times: list[float]) -> rm.LatencyStats:
    ms = [t * 1000 for t in times]
    if len(ms) >= 2:
        q = statistics.quantiles(ms, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = 0.0
    return rm.LatencyStats(median=round(statistics.median(ms), 4), iqr=round(iqr, 4), n=len(ms))


UNSTABLE_SPREAD = 0.25
"""A figure whose IQR is over this share of its median is unstable (pyperf warns past a 10 % deviation)."""
MIN_STEADY = 5
"""Timed passes a steady figure needs at least; a settled median of long passes (adaptive timing) rests
on AUTO_FEW (`mark_unstable`'s `least`)."""


def mark_unstable(
    stats: rm.LatencyStats, *, compiles: str | None = None, others: float | None = None, busy: bool = False, least: int = MIN_STEADY
) -> None:
    """Say why `stats` cannot be trusted as a steady figure, when it cannot (`LatencyStats.unstable`): a wide
    spread, too few passes (fewer than `least`: AUTO_FEW for long passes the adaptive timing settled),
    compiles during the timed passes, other processes on the cores."""
    reasons = []
    if stats.median > 0 and stats.iqr / stats.median > UNSTABLE_SPREAD:
        reasons.append(f"its spread is {stats.iqr / stats.median:.0%} of the median")
    if stats.n < least:
        reasons.append(f"{stats.n} timed pass{'es' if stats.n != 1 else ''}, fewer than {least}")
    if compiles:
        reasons.append(compiles)
    if busy and others is not None:
        reasons.append(f"other processes used {others:.1f} cores while it was timed")
    stats.unstable = "; ".join(reasons) or None


AUTO_MIN = 5
"""Adaptive timing: timed passes at least (of passes shorter than LONG_PASS_S)."""
AUTO_FEW = 3
"""Adaptive timing: timed passes at least of an arm whose passes are long (LONG_PASS_S), once its median is
settled: by then its notch is as narrow as five short passes' would be, and each pass more costs seconds."""
AUTO_MAX = 100
"""Adaptive timing: timed passes at most."""
AUTO_BUDGET_S = 5.0
"""Adaptive timing: past this many seconds of timed passes an arm stops once it has AUTO_MIN of them."""
SETTLED = 0.02
"""Adaptive timing stops when the median is known to within this fraction of itself."""
LONG_PASS_S = AUTO_BUDGET_S / AUTO_MIN
"""A pass this long or longer is long: AUTO_MIN of them would take the whole timing budget."""


def least_passes(times: list[float]) -> int:
    """Timed passes an adaptive arm needs at least: AUTO_FEW when its passes so far are all long
    (LONG_PASS_S), else AUTO_MIN."""
    return AUTO_FEW if times and min(times) >= LONG_PASS_S else AUTO_MIN


def settled(times: list[float]) -> bool:
    """Whether the median of `times` is known to within SETTLED of itself: the half-width of the
    median's notch, 1.57 x IQR / sqrt(n) (McGill, Tukey and Larsen's ~95 % interval for comparing
    medians), at most SETTLED x median; on `least_passes` of them at least."""
    if len(times) < least_passes(times):
        return False
    q = statistics.quantiles(times, n=4, method="inclusive")
    median = statistics.median(times)
    return median <= 0 or 1.57 * (q[2] - q[0]) / len(times) ** 0.5 <= SETTLED * median


WARM_ENOUGH_S = 0.2
"""Adaptive warm-up stops after two passes that agree within 10 %, when a pass takes longer than this."""
BEHIND = 1.5
"""Adaptive timing stops an arm whose pass is this many times the fastest arm's so far, beyond its spread."""


def behind(times: list[float], fastest_s: float) -> bool:
    """Whether an arm is clearly behind the fastest so far: with AUTO_MIN passes, even its first quartile
    is over BEHIND times the fastest median (more passes would not change a decision)."""
    if len(times) < AUTO_MIN or fastest_s == float("inf"):
        return False
    q1 = statistics.quantiles(times, n=4, method="inclusive")[0]
    return q1 > BEHIND * fastest_s


def spread(times: list[float]) -> float:
    """IQR over median; 1.0 (wide) until there are enough passes to say."""
    if len(times) < 4:
        return 1.0
    q = statistics.quantiles(times, n=4, method="inclusive")
    median = statistics.median(times)
    return (q[2] - q[0]) / median if median > 0 else 0.0


def pace(arm: rm.BenchmarkArm, eager: rm.BenchmarkArm | None, calls: int) -> None:
    """The arm's calls (steps) per second, and the call from which its total time (its first pass, compile
    included, then steady calls) beats eager's: `steps_per_s`, `break_even_calls`."""
    if arm.latency_ms is None or arm.latency_ms.median <= 0 or calls <= 0:
        return
    per_call_s = arm.latency_ms.median / 1e3 / calls
    arm.steps_per_s = round(1 / per_call_s, 3)
    if eager is None or eager is arm or eager.latency_ms is None or arm.first_pass_s is None or eager.first_pass_s is None:
        return
    eager_per_call_s = eager.latency_ms.median / 1e3 / calls
    arm.break_even_calls = break_even_calls(arm.first_pass_s, eager.first_pass_s, calls, per_call_s, eager_per_call_s)


def best_for_job(arms: list[rm.BenchmarkArm], calls: int, steps: int) -> str | None:
    """The arm with the least total time for `steps` calls: its first pass (compile included), then the
    rest at its median pace. Arms that failed or whose numerics failed are never chosen."""
    totals = {}
    for a in arms:
        if a.error or a.numerics_ok is False or a.latency_ms is None or a.first_pass_s is None or calls <= 0:
            continue
        per_call_s = a.latency_ms.median / 1e3 / calls
        totals[a.name] = a.first_pass_s + max(steps - calls, 0) * per_call_s
    return min(totals, key=totals.__getitem__) if totals else None


RECOMPILE_LIMIT = 8
"""torch._dynamo.config.recompile_limit's default: a bucket set must stay within it."""


def pad_calls(calls: list[Call], names: list[str], pad: Any, bucket: int) -> tuple[list[Call], set[int], set[int]] | None:
    """The calls with each `pad` argument grown to a multiple of `bucket`; the sizes before and after."""
    padded, before, after = [], set(), set()
    for call in calls:
        args, kwargs = list(call.args), dict(call.kwargs)
        for argument, (dim, value) in pad.items():
            slot = argument_slot(call, names, argument)
            if slot is None:
                return None
            tensor = kwargs[slot[1]] if slot[0] == "kw" else args[slot[1]]
            if not isinstance(tensor, torch.Tensor) or dim >= tensor.dim():
                return None
            size = tensor.shape[dim]
            target = -(-size // bucket) * bucket
            before.add(size)
            after.add(target)
            grown = torch.nn.functional.pad(tensor, [0, 0] * (tensor.dim() - 1 - dim) + [0, target - size], value=value)
            if slot[0] == "kw":
                kwargs[slot[1]] = grown
            else:
                args[slot[1]] = grown
        padded.append(Call(tuple(args), kwargs))
    return padded, before, after


class ArmBudget:
    """`--budget` in the benchmark: eager and compiled always run; each optional arm runs when about what a
    compiled arm took so far (cold compile, warm compile, timing) fits in what is left."""

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s = budget_s
        self.t0 = time.perf_counter()
        self.compiled_s: list[float] = []

    def left_out(self, name: str) -> str | None:
        """Why the arm `name` is left out (one note), None when it runs."""
        if self.budget_s is None or name in ("eager", "compiled"):
            return None
        left = self.budget_s - (time.perf_counter() - self.t0)
        if not self.compiled_s:
            return None if left > 0 else f"--budget: {name} not measured (no time left)"
        estimate = statistics.median(self.compiled_s)
        if estimate <= left:
            return None
        return f"--budget: {name} not measured (a compiled arm took about {estimate:.0f} s here, {max(left, 0.0):.0f} s were left)"

    def needless(self, name: str, measured: list[rm.BenchmarkArm]) -> str | None:
        """Why a per-fix arm (`fixed[S1]`) would change no decision, so it is not measured: the fixes together
        (compiled_fixed) changed neither the latency nor the cold compile of `compiled` beyond noise."""
        if not name.startswith("fixed["):
            return None
        arms = {a.name: a for a in measured}
        whole, fixed = arms.get("compiled"), arms.get("compiled_fixed")
        if whole is None or fixed is None or whole.latency_ms is None or fixed.latency_ms is None:
            return None
        if whole.latency_ms.unstable or fixed.latency_ms.unstable:
            return None  # no decision rests on unstable figures: measure them
        noise = max(whole.latency_ms.iqr, fixed.latency_ms.iqr, 0.03 * whole.latency_ms.median)
        same_latency = abs(whole.latency_ms.median - fixed.latency_ms.median) <= noise
        a, b = whole.compile_time_s, fixed.compile_time_s
        same_compile = a is None or b is None or abs(a - b) <= 0.1 * max(a, b, 1e-9)
        if same_latency and same_compile:
            return f"{name} not measured: the fixes together changed neither latency nor cold compile beyond noise, so no one fix can"
        return None

    def spent(self, seconds: float, compiled: bool) -> None:
        """An arm's wall time (compiled arms set the estimate)."""
        if compiled:
            self.compiled_s.append(seconds)
