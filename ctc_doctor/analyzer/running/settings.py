"""How the workload's calls run in every phase, and how a phase reports progress (torch-free)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ProgressFn = Callable[[str, int, int], None]
"""progress(step, done, total); total 0 means unknown."""


def no_progress(step: str, done: int, total: int) -> None:
    return None


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
