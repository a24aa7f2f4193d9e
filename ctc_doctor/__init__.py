"""ctc-doctor: why torch.compile is not giving you one fast graph, where, and what to change.

The public surface. `Workload` and `Report` import without torch; `analyze` and `load_workload`
import torch on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from .workload import Call, Workload  # noqa: E402  (torch-free)

__all__ = ["AnalyzeOptions", "BisectOptions", "Call", "Report", "Workload", "__version__", "analyze", "load_report", "load_workload"]


def __getattr__(name: str) -> Any:
    if name in ("analyze", "AnalyzeOptions"):
        from .analyzer import run

        return getattr(run, name)
    if name == "BisectOptions":
        from .analyzer.bisect import BisectOptions

        return BisectOptions
    if name == "load_workload":
        from .analyzer.target import load_workload

        return load_workload
    if name in ("Report", "load_report"):
        from . import reports

        return getattr(reports, name)
    raise AttributeError(f"module 'ctc_doctor' has no attribute {name!r}")
