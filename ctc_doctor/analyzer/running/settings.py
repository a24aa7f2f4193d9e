"""How the workload's calls run in every phase, and how a phase reports progress (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from ...progress import ProgressFn, no_progress

__all__ = ["ProgressFn", "RunSettings", "no_progress"]


def measured_on(device: str | None) -> str:
    """The device a run measures on: the one asked for (`--device`), or the CPU when the builder's
    placement was kept (None)."""
    return device or "cpu"


@dataclass(frozen=True)
class RunSettings:
    """How the workload's calls run in every phase."""

    backend: str = "eager"
    """torch.compile backend of the analysis (resolved: never None)."""
    train: bool = False
    """Forward and backward."""
    seed: int | None = 0
    """`torch.manual_seed(seed + call index)` before each call; None leaves the generator alone."""
    device: str | None = None
    """Where the model and inputs were moved (None: where the builder put them)."""
    grad: bool | None = None
    """Gradients on or off for the calls the analysis and the fix checks make (a `build()` target: on only
    to train, so an inference model is analyzed as it is benchmarked and served, under `no_grad`, and holds
    no activations for a backward that never comes; a script: the mode its calls were made in); None keeps
    the caller's mode (a script whose calls were made in both)."""

    @property
    def shares(self) -> bool:
        """Whether copies of the model may share its parameters (`copying.light_copy`): inference, whose
        runs write into no parameter (no optimizer, no gradient kept)."""
        return not self.train

    @property
    def where(self) -> str:
        """The device the run measures on (`measured_on`)."""
        return measured_on(self.device)
