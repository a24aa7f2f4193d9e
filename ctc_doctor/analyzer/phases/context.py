"""What the pipeline hands every phase (torch-free: the suggest phase also runs on offline reports)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...reports import models as rm
from ...workload import Call, Workload
from ..fixes.facts import ModelFacts
from ..running.settings import ProgressFn, RunSettings, no_progress

Owner = Literal["doctor", "caller"]
"""Who owns the model the phases run: `doctor`, built from the TARGET by this run (the benchmark may let it
go before its child builds it again, `release`, and build it again here, `rebuild`); `caller`, handed in
(the Python API's workload, a script's own model under `run`): it stays as it is, never released or rebuilt."""


@dataclass(frozen=True)
class LentCompile:
    """The fix phase's compile of the applied fixes on the user's backend, lent to the benchmark: its
    `compiled_fixed` arm compiles the same graphs, so it compiles from this inductor cache and reports this
    compile's cold figures (`ArmRunner.from_fix_compile`)."""

    cache_dir: str
    """The inductor cache the compile filled (the session removes it at its close)."""
    backend: str
    mode: str | None
    applied: tuple[str, ...]
    """The suggestions applied in the copy that compiled."""
    compile_time_s: float
    phases: dict[str, float]


@dataclass(frozen=True)
class PhaseContext:
    """The run as a phase sees it. Phases read it; none writes into it or into `report`."""

    workload: Workload
    calls: list[Call]
    """Every call of the workload, inputs already on the run's device."""
    settings: RunSettings
    spec: str = "<workload>"
    """The TARGET as the user gave it (bisection's child processes and repro scripts rebuild from it)."""
    command: str = ""
    progress: ProgressFn = no_progress
    budget_s: float | None = None
    """Seconds the phase may take (None: no limit); the pipeline enforces it, a phase may plan with it."""
    report: rm.Report | None = None
    """A copy of the report so far: the sections of the phases before this one."""
    facts: ModelFacts | None = None
    """What the rules know about the model (None when the target is not an nn.Module)."""
    owner: Owner = "caller"
    """Who owns the model: whether `release` and `rebuild` may exist (`Owner`)."""
    pristine: Any = None  # a torch.nn.Module: not named here, where torch is not imported even for a type
    """A copy of the model taken before anything ran (fresh, as the builder returned it), when fix or bench
    will run: their copies are made from it, so they meet the same first-call set-up as the analysis. On
    the host when the run's device is an accelerator (each copy is moved to the device)."""
    release: Callable[[], int] | None = None
    """Frees this process' model and pristine copy (returns the bytes) when the caller handed the workload
    over: the benchmark calls it before its child process rebuilds them. None: the model must stay."""
    reference: Any = None
    """The fix phase's numerics reference (`running.numerics.Reference`), handed to the benchmark so its
    arms are judged by it with no reference run of their own (None: the benchmark makes its own)."""
    rebuild: Callable[[], Workload] | None = None
    """Builds the workload again from its TARGET (after `release`, when the child could not start)."""
    fixed_compile: LentCompile | None = None
    """The fix phase's compile of the applied fixes on the benchmark's backend (the benchmark's only)."""
    room: Any = None
    """What the numerics reference may add on the device beyond the workload's own footprint
    (`running.reference.precision.Room`; None: free memory only)."""

    def __post_init__(self) -> None:
        if self.owner == "caller" and (self.release is not None or self.rebuild is not None):
            raise ValueError("a model the caller owns is never released or rebuilt by the doctor")
