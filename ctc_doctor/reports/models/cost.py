"""What the doctor itself cost against the workload: the footprint, each phase, the numerics reference's
run."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Model


class Footprint(_Model):
    """What the workload took on its first calls (the analysis's eager pass): what the preflight checks
    size each phase from (schema 1.13)."""

    model_mb: float
    """Parameters and buffers."""
    activations_mb: float
    """The eager pass's peak above the model: activations, outputs, workspace."""
    output_mb: float = 0.0
    """The largest call's outputs."""
    method: str = ""
    """How `activations_mb` was taken: the CUDA allocator's peak, or an estimate from the module outputs (host)."""


class PhaseCost(_Model):
    """One phase of the doctor's own run: its wall time and the peak memory of the doctor's processes
    during it (schema 1.13)."""

    phase: str
    """capture, eager pass, bisection, fix checks, fix reference, bench set-up, reference, or an arm (`arm compiled`)."""
    wall_s: float
    """Seconds spent in it."""
    peak_rss_mb: float | None = None
    """The peak resident memory of the doctor's process tree (this process and its children) during it."""
    peak_cuda_mb: float | None = None
    """CUDA: the peak the analysing process's caching allocator had allocated during it (the arms' child
    reports each arm's own: `BenchmarkArm.peak_memory_mb`)."""
    peak_cuda_reserved_mb: float | None = None
    """CUDA: the peak it had reserved (allocated plus cached: what the device sees of the process, less its
    CUDA context) during it (schema 1.16)."""


class ReferenceRun(_Model):
    """The higher-precision run every numerics judgement compares against: where it ran so that it fits
    beside the model, and what it cost (schema 1.16)."""

    method: Literal["float64_reference", "float32_reference", "elementwise"]
    """As `NumericsCheck.method`: float32 is the last resort for a bf16/fp16 model, elementwise for a float32 one."""
    placement: str | None = None
    """`whole` (the model cast in place on its device), `blockwise` (each module cast while its forward runs),
    `host` (the cast model on the host); training also `offloaded` (what the backward needs kept on the
    host), `checkpointed` (the repeated blocks' activations recomputed in the backward) and `streamed`
    (schema 1.26: one module's parameters at float64 at a time, in the backward too, with their
    gradients) and `streamed_checkpointed` (the same with the repeated blocks' activations recomputed);
    None without a higher-precision run."""
    slices: int = 1
    """The batch's rows ran this many at a time (each result written at its rows), so that the activations
    of one slice at a time sit beside the model; 1: the whole batch."""
    device_mb: float | None = None
    """What the way taken allocates on the run's device, estimated from the workload's footprint."""
    beyond_workload_mb: float | None = None
    """Of that, what is beyond the workload's own activations: what it adds to the workload's footprint."""
    room_mb: float | None = None
    """What it was allowed to add (`room_basis`); None: free memory only."""
    room_basis: str | None = None
    """`the doctor's margin, half the workload's own 1.2 GiB` (at least 256 MB), or `--memory-limit`."""
    device_peak_mb: float | None = None
    """CUDA: the allocator's peak during the run above what was allocated before it (measured)."""
    duration_s: float = 0.0
    """Wall time of the run (eager's kept results are not part of it)."""
    not_taken: list[str] = Field(default_factory=list)
    """The ways tried before it, and why each was not taken (would not fit, failed)."""
    replayed_draws: int | None = None
    """Schema 1.27: how many of eager's random draws (dropout masks, `randn_like` noise) the run was given in
    place of its own, so that it drew what eager drew (the same seed draws other numbers at float64 or on
    the host). None: none given (the model draws nothing, or its draws could not be replayed: `not_taken`
    says why)."""


class DoctorCost(_Model):
    """What ctc-doctor itself cost, against what the workload costs on its own (schema 1.13)."""

    phases: list[PhaseCost] = Field(default_factory=list)
    """Each phase, in order."""
    wall_s: float = 0.0
    """The whole run, from the CLI's start: its imports and the model's build count, as they count on the
    workload's side (schema 1.20; through the Python API, which builds no model, from the analysis's start)."""
    peak_rss_mb: float | None = None
    """Peak resident memory of the doctor's process tree over the whole analysis."""
    peak_cuda_mb: float | None = None
    """Peak GPU memory in use over the whole analysis (above the start's)."""
    workload_wall_s: float | None = None
    """The workload's own time, as a fresh process spends it: its start, imports and build, the compiler's
    one-time costs, one eager pass and one compile of its calls (`workload_basis`; schema 1.20)."""
    workload_peak_mb: float | None = None
    """The workload's own peak memory (host RSS; on a GPU, the device's) (`workload_basis`)."""
    workload_basis: str | None = None
    """How the workload's own figures were taken."""
    time_ratio: float | None = None
    """wall_s / workload_wall_s."""
    memory_ratio: float | None = None
    """The doctor's peak / the workload's (host RSS; the GPU's on a GPU)."""
    footprint: Footprint | None = None
    """The workload's footprint the preflight checks used."""
    kept: str | None = None
    """What the numerics judgement kept and where (eager's results and the reference's differences)."""
    released: str | None = None
    """What the analysing process let go of before the benchmark's child rebuilt the model."""
    notes: list[str] = Field(default_factory=list)
    """Adaptations made to fit (the reference elsewhere, a model moved to the host) and phases left out (`--budget`)."""
    reference: ReferenceRun | None = None
    """The numerics reference the fix checks and the benchmark's arms were judged by: where it ran and what it
    cost (schema 1.16)."""
    summary: str | None = None
    """`the doctor used 1.4x the workload's memory and 2.6x its time`."""
