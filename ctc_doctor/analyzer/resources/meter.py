"""The doctor's own cost: wall time and peak memory per phase, and the same against the workload's own.

`CostMeter` follows the run's progress events (every phase reports them, the benchmark's child too, so
no phase knows it is measured): each event's step is the phase it belongs to (`phase_of`), and a sampler
thread reads the resident memory of this process and every process below it (the benchmark's child,
compile workers) into the current phase's peak. On a GPU each phase's peak of this process's CUDA
allocator is read too; the child's arms report their own. The sampler reads /proc a few times a second
and slows down while an arm is timed, so it does not disturb what it measures.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ..running.device import watching_resets
from ..running.memory import descendants, rss_bytes

_SAMPLE_S = 0.1
"""Seconds between memory samples."""
_TIMING_SAMPLE_S = 1.0
"""Seconds between samples while an arm is timed (its memory is steady; its timing is not to be disturbed)."""


COST_PHASES: dict[Step, str] = {
    Step.SCRIPT: "script",
    Step.COMPILE: "capture",
    Step.EXPLAIN: "capture",
    Step.EAGER: "eager pass",
    Step.REPORT: "report",
    Step.SUGGEST: "suggest",
    Step.BISECT: "bisection",
    Step.ACCURACY: "accuracy bisection",
    Step.FIX_REFERENCE: "fix reference",
    Step.FIX: "fix checks",
    Step.PROBE: "shape probe",
    Step.BENCH_REFERENCE: "reference",
    Step.BENCH: "bench set-up",
}
"""The cost phase of each step of the run; a benchmark arm's is its own (`arm NAME`); the load is not the
doctor's own work. `script` is `run`'s workload itself: the script's run under capture."""


def phase_of(event: ProgressEvent) -> str | None:
    """The cost phase a progress event belongs to (None: not a phase of the doctor's own)."""
    if event.step is Step.ARM:
        return f"arm {event.subject}"
    return COST_PHASES.get(event.step)


@dataclass
class _Phase:
    wall_s: float = 0.0
    peak_rss: int = 0
    peak_cuda: int = 0
    peak_cuda_reserved: int = 0
    peak_children: int = 0
    """The peak of the processes below this one (the arms' child and its compile workers)."""
    start_self: int = 0
    """This process's resident memory when the phase started."""


class CostMeter:
    """Wall time and peak memory per phase of the doctor's run (see the module doc)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device.startswith("cuda") and torch.cuda.is_available()
        self.phases: dict[str, _Phase] = {}
        self.current: str | None = None
        self.timing = False
        self.since = time.perf_counter()
        self.t0 = self.since
        self.peak_rss = 0
        self.start_self = rss_bytes() or 0
        """This process's resident memory when the run's analysis started: its imports and the model built."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pids: list[int] = []
        self._pids_at = 0.0
        self._thread = threading.Thread(target=self._sample_loop, name="ctc-doctor-cost", daemon=True)
        self._thread.start()
        self._watch = contextlib.ExitStack()
        self._watch.enter_context(watching_resets(self._fold_locked))

    def progress(self, event: ProgressEvent) -> None:
        """A progress event: the phase it belongs to starts (or goes on). A phase's first and last moments
        are sampled here, so a short phase has its figures too."""
        phase = phase_of(event)
        self.timing = event.timing
        if phase is None or phase == self.current:
            return
        self._pids_at = 0.0  # a phase may have started a process (the arms' child) or ended one
        self.sample()
        with self._lock:
            self._close()
            self.current = phase
            if phase not in self.phases:
                self.phases[phase] = _Phase(start_self=rss_bytes() or 0)
        self.sample()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def fold_cuda_peak(self) -> None:
        """The CUDA allocator's peaks so far into the current phase's (before a reset within it:
        `device.watching_resets`, which the run's cost account sets up)."""
        if self.cuda and self.current is not None:
            phase = self.phases[self.current]
            phase.peak_cuda = max(phase.peak_cuda, torch.cuda.max_memory_allocated(self.device))
            phase.peak_cuda_reserved = max(phase.peak_cuda_reserved, torch.cuda.max_memory_reserved(self.device))

    def _fold_locked(self) -> None:
        with self._lock:
            self.fold_cuda_peak()

    def _close(self) -> None:
        now = time.perf_counter()
        if self.current is not None:
            self.phases[self.current].wall_s += now - self.since
            self.fold_cuda_peak()
        self.since = now

    def _children_rss(self) -> int:
        now = time.monotonic()
        if now - self._pids_at > 1.0:  # the process list is walked once a second, the sizes each sample
            self._pids, self._pids_at = descendants(), now
        return sum(rss_bytes(p) or 0 for p in self._pids)

    def sample(self) -> None:
        """One memory sample into the current phase (also called at each phase's end)."""
        children = self._children_rss()
        rss = (rss_bytes() or 0) + children
        with self._lock:
            self.peak_rss = max(self.peak_rss, rss)
            if self.current is not None:
                phase = self.phases[self.current]
                phase.peak_rss = max(phase.peak_rss, rss)
                phase.peak_children = max(phase.peak_children, children)

    def own_tree_peak_mb(self, phase: str) -> float | None:
        """What a fresh process would have held at the top of `phase`, run in this process: the peak of this
        process and its children during it, less what this process held when the phase started beyond
        what it held when the analysis started (its imports and the model built): the analysis's leftovers."""
        p = self.phases.get(phase)
        if p is None or not p.peak_rss or not p.start_self or not self.start_self:
            return None
        return round((p.peak_rss - max(0, p.start_self - self.start_self)) / 2**20, 1)

    def children_peak_mb(self, phase: str) -> float | None:
        """The peak of the processes below this one during `phase` (None: no such phase, or none ran)."""
        p = self.phases.get(phase)
        return round(p.peak_children / 2**20, 1) if p is not None and p.peak_children else None

    def _sample_loop(self) -> None:
        while not self._stop.wait(_TIMING_SAMPLE_S if self.timing else _SAMPLE_S):
            self.sample()

    def finish(self) -> list[rm.PhaseCost]:
        """Stop sampling; each phase's wall time and peaks."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._watch.close()
        with self._lock:
            self._close()
            self.current = None
        return self.snapshot()

    def restore(self, phases: list[rm.PhaseCost]) -> None:
        """The phases an earlier process of the same run measured (a supervised stage that goes on after a
        crash), before this one's."""
        with self._lock:
            for p in phases:
                mine = self.phases.setdefault(p.phase, _Phase())
                mine.wall_s += p.wall_s
                mine.peak_rss = max(mine.peak_rss, int((p.peak_rss_mb or 0) * 2**20))
                self.peak_rss = max(self.peak_rss, mine.peak_rss)

    def snapshot(self) -> list[rm.PhaseCost]:
        """Each phase's wall time and peaks so far (the current phase's time up to its last change)."""
        return [
            rm.PhaseCost(
                phase=name,
                wall_s=round(p.wall_s, 3),
                peak_rss_mb=round(p.peak_rss / 2**20, 1) if p.peak_rss else None,
                peak_cuda_mb=round(p.peak_cuda / 2**20, 1) if self.cuda else None,
                peak_cuda_reserved_mb=round(p.peak_cuda_reserved / 2**20, 1) if self.cuda else None,
            )
            for name, p in self.phases.items()
        ]


def workload_figures(
    report: rm.Report,
    pristine_mb: float,
    tree_peaks: list[float] | None = None,
    start_s: float | None = None,
    *,
    in_child: bool = True,
) -> tuple[float | None, float | None, str | None]:
    """The workload's own wall time and peak memory, and how they were taken: a fresh process's start
    (`start_s`: Python, the imports, the model's build; None when the doctor did not build it), the
    compiler's one-time costs (`Benchmark.compiler_warmup_s`: the workload pays them in its first compile),
    one eager pass and one compile of its calls, from the benchmark's eager and compiled arms, all in the
    process that ran the arms. Its peak: on the host, the peak of the process that ran those arms (the arms'
    child, `in_child`, or this one) and its compile workers during them (`tree_peaks`), as a process of the
    user's would have them; else each arm's own peak; either less the pristine copy the arm's process keeps
    beside it (`pristine_mb`)."""
    bench = report.benchmark
    arms = {a.name: a for a in bench.arms} if bench is not None else {}
    eager, compiled = arms.get("eager"), arms.get("compiled")
    if bench is None or eager is None or compiled is None or eager.first_pass_s is None or compiled.first_pass_s is None:
        return None, None, None
    wall = eager.first_pass_s + compiled.first_pass_s + (start_s or 0.0) + (bench.compiler_warmup_s or 0.0)
    gpu = bench.device.startswith("cuda")
    peaks = [p for p in (tree_peaks or []) if p] if not gpu else []
    if in_child:
        what = "the arms' child process and its compile workers during those arms"
    else:
        what = "this process and its compile workers during those arms, less what the analysis left in it"
    what = what if peaks else "those arms' process"
    peaks = peaks or [a.peak_memory_mb for a in (eager, compiled) if a.peak_memory_mb is not None]
    peak = max(peaks) - pristine_mb if peaks else None
    where = "GPU memory allocated by" if gpu else "resident memory of"
    less = f", less the pristine copy kept beside it ({pristine_mb:.0f} MB)" if pristine_mb else ""
    before = []
    if start_s:
        child = bench.isolation is not None and bench.isolation.child_processes > 0
        whose = "the arms' child's" if child else "this process's"
        before.append(f"a process's start, imports and model build ({start_s:.1f} s, {whose})")
    if bench.compiler_warmup_s and bench.compiler_warmup_s >= 0.05:  # an eager backend's: nothing to say
        before.append(f"the compiler's one-time costs ({bench.compiler_warmup_s:.1f} s)")
    basis = (
        f"{', '.join(before) + ', then ' if before else ''}one eager pass and one compile ({bench.settings.get('backend')}) "
        f"of its calls, the benchmark's eager and compiled arms' first passes; its peak: the {where} {what}{less}"
    )
    return round(wall, 3), (round(peak, 1) if peak is not None and peak > 0 else None), basis


def script_figures(script: rm.PhaseCost, device: str) -> tuple[float | None, float | None, str | None]:
    """`run`'s workload: the script's own run under capture (its calls, compiles and all its other work),
    and its process's peak during it (its CUDA allocator's on a GPU; the capture's own cost is in it, about
    1.0x a plain run's: docs/benchmarks.md)."""
    gpu = device.startswith("cuda") and script.peak_cuda_mb is not None
    peak = script.peak_cuda_mb if gpu else script.peak_rss_mb
    where = "the CUDA allocator's peak" if gpu else "the peak resident memory of its process and its children"
    return round(script.wall_s, 3), peak, f"the script's own run under capture, and {where} during it"


def summary_line(cost: rm.DoctorCost) -> str | None:
    """`the doctor used 1.4x the workload's memory and 2.6x its time`."""
    parts = []
    if cost.memory_ratio is not None:
        parts.append(f"{cost.memory_ratio:.1f}x the workload's memory")
    if cost.time_ratio is not None:
        parts.append(f"{cost.time_ratio:.1f}x its time" if parts else f"{cost.time_ratio:.1f}x the workload's time")
    return f"the doctor used {' and '.join(parts)}" if parts else None
