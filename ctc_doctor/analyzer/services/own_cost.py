"""The doctor's own cost around one `analyze()`: the meter that follows its phases (`resources.meter`), the
preflight check before each phase that needs memory (`resources.preflight`), and the report's `cost`
section: each phase's wall time and peak memory, against the workload's own (one eager pass and one
compile), in one line (`the doctor used 1.4x the workload's memory and 2.6x its time`).

The preflight sizes each later phase beside the workload: what it allocates on the device against what
is free, and what it holds beyond the workload's own footprint (its model and activations) against
`--memory-limit`. It adapts where it can and leaves out what it cannot, saying so:
- inference: every copy shares the model's weights (`copying.light_copy`): a fix check or an arm adds
  only its activations;
- the benchmark's child rebuilds the model: when this process was handed the workload (the CLI), it lets
  go of its model and pristine copy first, and what that frees counts as free; when the child (its own
  imports, on the CPU) would not fit, the arms run in this process;
- the float64 reference picks where it fits by itself (`running.reference.precision`: `Room`);
- a phase that still would not fit is left out, with one line why (`Fit.note`);
- only when the analysis itself holds more than `--memory-limit` allows does the run stop:
  `NotEnoughMemory`, exit code 14.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from ...progress import ProgressEvent
from ...reports import models as rm
from ..resources.meter import CostMeter, script_figures, summary_line, workload_figures
from ..resources.preflight import CHILD_IMPORTS, Need, NotEnoughMemory, phase_need
from ..running.copying import SPILLED
from ..running.settings import ProgressFn, measured_on
from ..running.worker import importable


@dataclass(frozen=True)
class Fit:
    """What the preflight decided for a phase."""

    run: bool = True
    """Run it (False: it would not fit, `note` says why)."""
    in_process: bool = False
    """The benchmark: its arms in this process (a child's imports would not fit)."""
    note: str | None = None
    """The adaptation or why it was left out, one line."""


class RunCost:
    """One run's meter, preflight and cost section."""

    def __init__(
        self,
        device: str | None,
        progress: ProgressFn,
        owns_workload: bool,
        memory_limit_mb: int | None = None,
        *,
        train: bool = False,
        started_s: float | None = None,
    ) -> None:
        self.train = train
        """Training: the arms' child keeps a whole pristine copy beside each arm's (inference shares the weights)."""
        self.started_s = started_s
        """When the CLI started (`time.perf_counter()`), before its imports and the model's build: the
        doctor's wall time counts from it, and those count on the workload's side too. None (the Python
        API: the caller built the model): both sides count from the analysis's start."""
        self.device = measured_on(device)
        self.limit = memory_limit_mb * 2**20 if memory_limit_mb else None
        """`--memory-limit`: what a phase may add on the device at most."""
        self.meter = CostMeter(self.device)
        self.user_progress = progress
        self.owns_workload = owns_workload
        self.footprint: rm.Footprint | None = None
        self.notes: list[str] = []
        self.released: str | None = None
        self.spilled = False
        """The training pristine model is kept in a file (`copying.spilled_copy`), not beside the arms."""
        self.reference: rm.ReferenceRun | None = None
        """Where the fix phase's numerics reference ran and what it cost (the benchmark's own is its section's)."""

    def on_device(self, device: str | None) -> None:
        """The run's device, once known (a script's model): the preflight sizes phases there, and on a GPU
        each phase's CUDA allocator peaks are read from now on (the script's own phase, its run, included)."""
        self.device = measured_on(device)
        self.meter.device = self.device
        self.meter.cuda = self.device.startswith("cuda") and torch.cuda.is_available()

    def let_go(self, freed: int, what: str) -> None:
        """This process freed `freed` bytes of `what` (the caller handed the workload over)."""
        if freed:
            said = f"{what} ({freed / 2**20:.0f} MB)"
            self.released = f"{self.released}, then {said}" if self.released else f"the analysing process let go of {said}"

    def progress(self, event: ProgressEvent, /) -> None:
        """The run's progress callback: the meter sees every event, then the caller's callback."""
        self.meter.progress(event)
        self.user_progress(event)

    def plan(self, phase: rm.Phase, pristine: Any, *, isolated: bool, shares: bool) -> Fit:
        """Whether `phase` fits beside the workload, and how: as asked, its benchmark arms in this process
        (a child would need its own imports beside them), or not at all (said). See the module doc."""
        footprint = self.footprint
        if footprint is None or phase not in ("bisect", "fix", "probe", "bench", "accuracy"):
            return Fit()
        held = self._held(pristine, shares)
        if phase == "bisect":  # isolated trials: a child rebuilds the model beside this process's
            if not isolated:
                return Fit()
            cpu = not self.device.startswith("cuda") and self.device != "mps"
            extra = CHILD_IMPORTS if cpu else 0
            child = phase_need(
                "bisect", footprint, self.device, models=2 + held, extra=extra, extra_parts="the child's imports" if extra else ""
            )
            problem = child.problem(0, self.limit)
            if problem is None:
                return Fit()
            return Fit(in_process=True, note=f"{problem}: the trials ran in this process instead (a crash in one ends the run)")
        if phase == "probe":  # the model itself on inputs grown by half along one dimension
            work = int(footprint.activations_mb * 2**20)
            need = phase_need("probe", footprint, self.device, extra=work // 2, extra_parts="inputs grown by half")
            problem = need.problem(0, self.limit)
            return Fit(run=problem is None, note=f"{problem}: left out" if problem else None)
        here = phase_need(phase, footprint, self.device, models=1 + held)
        if phase == "bench" and isolated:
            child = self._child_need(footprint, held, shares)
            releasable = int(footprint.model_mb * 2**20) if self.owns_workload else 0
            problem = child.problem(releasable, self.limit)
            if problem is None:
                return Fit()
            if here.problem(0, self.limit) is None:
                return Fit(in_process=True, note=f"{problem}: the arms ran in this process instead (a crash in one ends the run)")
            return Fit(run=False, note=f"{problem}: the benchmark was left out")
        problem = here.problem(0, self.limit)
        return Fit(run=problem is None, note=f"{problem}: left out" if problem else None)

    def _held(self, pristine: Any, shares: bool) -> int:
        """Sets of weights this process holds on the device beside the one a phase runs: a training pristine
        copy on the CPU (on an accelerator it waits on the host), the user's model when it is kept (the
        Python API); for inference every copy shares the weights (none)."""
        if shares:
            return 0
        host_is_device = not self.device.startswith("cuda") and self.device != "mps"
        in_memory = pristine is not None and getattr(pristine, SPILLED, None) is None  # not kept in a file
        return int(in_memory and host_is_device) + int(not self.owns_workload)

    def _child_need(self, footprint: rm.Footprint, held: int, shares: bool) -> Need:
        """The arms' child beside what this process keeps: its weights (inference: the arms share them;
        training: its pristine copy on the CPU and one arm's copy), and on the CPU its own imports."""
        cpu = not self.device.startswith("cuda") and self.device != "mps"
        models = 1 + (0 if shares or not cpu else 1) + (0 if self.owns_workload else held)
        extra = CHILD_IMPORTS if cpu else 0
        return phase_need("bench", footprint, self.device, models=models, extra=extra, extra_parts="the child's imports" if extra else "")

    def check_analysis(self, pristine: Any, shares: bool) -> None:
        """Raise NotEnoughMemory when what the analysis itself holds beyond the workload's own (a training
        pristine copy on the CPU, the user's model kept beside it) is past `--memory-limit`: then no phase
        after it can keep the promise."""
        if self.limit is None or self.footprint is None:
            return
        held = self._held(pristine, shares) - int(not self.owns_workload)
        beyond = held * int(self.footprint.model_mb * 2**20)
        if beyond > self.limit:
            raise NotEnoughMemory(
                f"the analysis itself holds about {beyond / 2**20:.0f} MB on {self.device} beyond the workload's own (a copy of "
                f"the model taken before it ran); --memory-limit allows {self.limit / 2**20:.0f} MB: stopped after it"
            )

    def finish(self, report: rm.Report) -> rm.DoctorCost:
        """The report's cost section (the meter stops)."""
        phases = self.meter.finish()
        # from the CLI's start: its imports and the model's build count on both sides (the workload's in the
        # process that ran the arms: `start_s` below)
        wall = round(time.perf_counter() - (self.started_s if self.started_s is not None else self.meter.t0), 3)
        cost = rm.DoctorCost(phases=phases, wall_s=wall, footprint=self.footprint, notes=self.notes)
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
        cost.reference = self.reference or (bench.reference if bench is not None else None)
        # the arms in a child process (a supervised run's are in the analysing process: no child)
        isolated = bench is not None and bench.isolation is not None and bench.isolation.isolated and bench.isolation.child_processes > 0
        # the process that runs the arms keeps its pristine model beside each arm's copy: a whole one when
        # training, on the host (on an accelerator it is not on the device); for inference the arms share its
        # weights (nothing beside)
        kept_beside = self.footprint is not None and self.train and not self.device.startswith("cuda")
        kept_beside = kept_beside and (isolated or not self.spilled)  # a pristine model kept in a file is not beside
        pristine_mb = self.footprint.model_mb if kept_beside and self.footprint is not None else 0.0
        # on the host, that process and its compile workers during the eager and compiled arms, as a process
        # of the user's would have them: the arms' child's tree, or this process's own (the meter's samples)
        arms = ("arm eager", "arm compiled")
        if isolated:
            trees = [self.meter.children_peak_mb(p) for p in arms]
        else:  # as a fresh process would hold it: this process's own leftovers from the analysis left out
            trees = [self.meter.own_tree_peak_mb(p) for p in arms]
        script = next((p for p in phases if p.phase == "script"), None)
        if script is not None:  # `run`: the script's own run under capture is the workload
            figures = script_figures(script, self.device)
        else:
            tree = [t for t in trees if t is not None]
            figures = workload_figures(report, pristine_mb, tree, self._start_s(report), in_child=isolated)
        cost.workload_wall_s, cost.workload_peak_mb, cost.workload_basis = figures
        if cost.workload_wall_s:
            cost.time_ratio = round(cost.wall_s / cost.workload_wall_s, 2)
        doctor_peak = cost.peak_cuda_mb if self.device.startswith("cuda") else cost.peak_rss_mb
        if cost.workload_peak_mb and doctor_peak:
            cost.memory_ratio = round(doctor_peak / cost.workload_peak_mb, 2)
        cost.summary = summary_line(cost)
        return cost

    def _start_s(self, report: rm.Report) -> float | None:
        """What a fresh process of the user's pays before its first call (Python, the imports, the model's
        build), as the process that ran the arms paid it: the arms' child's first start, or this process's
        own (the CLI's start to the analysis's); None when the doctor did not build the model (the API)."""
        bench = report.benchmark
        isolation = bench.isolation if bench is not None else None
        if isolation is not None and isolation.child_processes > 0:
            return isolation.first_start_s or None
        return self.meter.t0 - self.started_s if self.started_s is not None else None


def isolated_bench(isolate: bool, target: str | None, spec: str) -> bool:
    """Whether the benchmark's arms will run in a child process (`phases.bench.child`): isolation asked for,
    and a TARGET (the benchmark's own, else the run's) that a child can import."""
    return isolate and importable(target or spec)
