"""ctc-doctor: why torch.compile is not giving you one fast graph, where, and what to change.

The public surface. `Workload` and `Report` import without torch; `analyze`, its options and
`load_workload` import torch on first use.
"""

from __future__ import annotations

from typing import Any

from .version import __version__
from .workload import Call, Workload  # torch-free

__all__ = [
    "AnalyzeOptions",
    "BenchOptions",
    "BisectOptions",
    "Call",
    "FixOptions",
    "Report",
    "Workload",
    "__version__",
    "analyze",
    "load_report",
    "load_workload",
]


def __getattr__(name: str) -> Any:
    if name in ("analyze", "AnalyzeOptions"):
        from .analyzer.doors import pipeline

        return getattr(pipeline, name)
    if name == "BisectOptions":
        from .analyzer.phases.bisect import BisectOptions

        return BisectOptions
    if name == "FixOptions":
        from .analyzer.phases.fix import FixOptions

        return FixOptions
    if name == "BenchOptions":
        from .analyzer.phases.bench import BenchOptions

        return BenchOptions
    if name == "load_workload":
        from .analyzer.services.target import load_workload

        return load_workload
    if name in ("Report", "load_report"):
        from . import reports

        return getattr(reports, name)
    raise AttributeError(f"module 'ctc_doctor' has no attribute {name!r}")
