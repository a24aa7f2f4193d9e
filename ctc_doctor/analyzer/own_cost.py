"""The doctor's own cost around one `analyze()`: the meter that follows its phases (`resources.cost`), the
preflight check before each phase that needs memory (`resources.preflight`), and the report's `cost`
section: each phase's wall time and peak memory, against the workload's own (one eager pass and one
compile), in one line (`the doctor used 1.4x the workload's memory and 2.6x its time`).

The preflight adapts where it can and stops where it cannot:
- the benchmark's child rebuilds the model: when this process was handed the workload (the CLI), it lets
  go of its model and pristine copy first, and what that frees counts as free;
- in-process arms on an accelerator: the user's model waits on the host while the arms run their copies;
- the float64 reference picks where it fits by itself (`running.precision`);
- otherwise the phase does not start: `NotEnoughMemory`, one line (phase, need, free), exit code 14.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ..reports import models as rm
from .resources.cost import CostMeter, summary_line, workload_figures
from .resources.preflight import CHILD_IMPORTS, NotEnoughMemory, model_bytes, phase_need
from .running.settings import ProgressFn, measured_on
from .running.worker import importable


class RunCost:
    """One run's meter, preflight and cost section."""

    def __init__(self, device: str | None, progress: ProgressFn, owns_workload: bool, memory_limit_mb: int | None = None) -> None:
        self.device = measured_on(device)
        self.limit = memory_limit_mb * 2**20 if memory_limit_mb else None
        """`--memory-limit`: what a phase may add on the device at most."""
        self.meter = CostMeter(self.device)
        self.user_progress = progress
        self.owns_workload = owns_workload
        self.footprint: rm.Footprint | None = None
        self.notes: list[str] = []
        self.released: str | None = None

    def let_go(self, freed: int, what: str) -> None:
        """This process freed `freed` bytes of `what` (the caller handed the workload over)."""
        if freed:
            said = f"{what} ({freed / 2**20:.0f} MB)"
            self.released = f"{self.released}, then {said}" if self.released else f"the analysing process let go of {said}"

    def progress(self, phase: str, done: int, total: int) -> None:
        """The run's progress callback: the meter sees every event, then the caller's callback."""
        self.meter.progress(phase)
        self.user_progress(phase, done, total)

    @contextlib.contextmanager
    def preflight(self, phase: rm.Phase, model: Any, pristine: Any, *, isolated: bool) -> Iterator[None]:
        """Check that `phase` fits before it starts (adapting when it can), then run it; raises
        NotEnoughMemory (before the phase) when it cannot fit."""
        footprint = self.footprint
        if footprint is None or not isinstance(model, torch.nn.Module) or phase not in ("fix", "bench"):
            yield
            return
        cuda = self.device.startswith("cuda")
        own = model_bytes(model)
        if phase == "bench" and isolated and self.owns_workload:
            # the child: its imports and its pristine copy on the host beside the arm's copy, this process' copies let go first
            extra = (CHILD_IMPORTS + own) if not cuda else 0
            need = phase_need(
                "bench", footprint, self.device, extra=extra, extra_parts="the child's imports and pristine copy" if extra else ""
            )
            releasable = own + (model_bytes(pristine) if not cuda else 0)
            fits, free = need.check(releasable, self.limit)
            if not fits and free is not None:
                raise NotEnoughMemory(need.refusal(free, self._limited(free)))
            yield
            return
        need = phase_need(phase, footprint, self.device)
        fits, free = need.check(0, self.limit)
        if fits or free is None:
            yield
            return
        if phase == "bench" and cuda:
            moved, _ = need.check(own, self.limit)
            if moved:  # the arms run copies: the user's model may wait on the host meanwhile
                self.notes.append(
                    f"bench: the model waited on the host while the arms ran (they needed {need.bytes / 2**30:.1f} GiB on "
                    f"{self.device}, {free / 2**30:.1f} GiB was free)"
                )
                model.to("cpu")
                try:
                    yield
                finally:
                    model.to(self.device)
                return
        raise NotEnoughMemory(need.refusal(free, self._limited(free)))

    def _limited(self, free: int) -> bool:
        return self.limit is not None and free >= self.limit

    def finish(self, report: rm.Report) -> rm.DoctorCost:
        """The report's cost section (the meter stops)."""
        phases = self.meter.finish()
        cost = rm.DoctorCost(phases=phases, wall_s=report.run.duration_s, footprint=self.footprint, notes=self.notes)
        cost.peak_rss_mb = round(self.meter.peak_rss / 2**20, 1) if self.meter.peak_rss else None
        cuda = [p.peak_cuda_mb for p in phases if p.peak_cuda_mb is not None]
        bench = report.benchmark
        arms_cuda = (
            [a.peak_memory_mb for a in bench.arms if a.peak_memory_mb is not None] if bench and bench.device.startswith("cuda") else []
        )
        if cuda or arms_cuda:
            cost.peak_cuda_mb = max(cuda + arms_cuda)
        cost.released = self.released
        cost.kept = bench.kept if bench is not None else None
        isolated = bench is not None and bench.isolation is not None and bench.isolation.isolated
        pristine_mb = self.footprint.model_mb if self.footprint is not None and isolated and not self.device.startswith("cuda") else 0.0
        children = [self.meter.children_peak_mb(p) for p in ("arm eager", "arm compiled")] if isolated else []
        figures = workload_figures(report, pristine_mb, [c for c in children if c is not None])
        cost.workload_wall_s, cost.workload_peak_mb, cost.workload_basis = figures
        if cost.workload_wall_s:
            cost.time_ratio = round(cost.wall_s / cost.workload_wall_s, 2)
        doctor_peak = cost.peak_cuda_mb if self.device.startswith("cuda") else cost.peak_rss_mb
        if cost.workload_peak_mb and doctor_peak:
            cost.memory_ratio = round(doctor_peak / cost.workload_peak_mb, 2)
        cost.summary = summary_line(cost)
        return cost


def isolated_bench(options: Any) -> bool:
    """Whether the benchmark's arms will run in a child process (`bench_isolated`)."""
    bench = options.bench
    return bool(bench is not None and bench.isolate and importable(bench.target or options.spec))
