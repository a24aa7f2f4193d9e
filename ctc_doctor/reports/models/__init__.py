"""The report: pydantic v2 models of everything one ctc-doctor run found.

This is the contract other tools read (bug trackers, CI, the TUI, offline log ingestion). Field
names are stable; renaming or removing one is a `SCHEMA_VERSION` major bump. The JSON Schema is
generated from these models into `report.schema.json` (`ctc-doctor schema`), and a test fails when
the committed file drifts.

A report is assembled here too, by `assemble_report`, for each of its four producers: a live analysis
(`analyzer/doors/pipeline.py`), one rank of a script run (`analyzer/doors/script_report.py`), logs read offline
(`analyzer/doors/offline.py`), and a script run that left neither a rank's report nor a trace
(`analyzer/doors/launch.py`). Each describes its own target and environment and finds its own findings;
`assemble_report` adds the run header every report gets the same way (tool version, start time, wall
time) and the schema version, and `summarize` counts the summary and verdict from the findings.
What follows the assembly stays with the producers: the later phases merge their sections in
(`pipeline`), the recompile causes are attached once the suggestions are final
(`analyzer/readers/causes.attach_causes`), the ranks of one job are merged (`ranks.merge_ranks`).
No torch import here.
"""

from __future__ import annotations

from .base import (
    SCHEMA_VERSION,
    ActionType,
    DeltaMetric,
    DivergenceKind,
    ExplainMethod,
    GuardKind,
    LogKind,
    MeasuredVerdict,
    Objective,
    Phase,
    Recurrence,
    Strategy,
    SuggestionCategory,
    SuggestionKind,
    TargetKind,
    TrialStatus,
    Verdict,
)
from .bench import BenchIsolation, Benchmark, BenchmarkArm, CudaGraphStats, LatencyStats, MachineLoad, StrategyRow
from .bisect import AccuracyBisect, AccuracyOperation, AccuracyTrial, Bisect, BisectStrategyResult, BisectTrial
from .compile_time import CompileMetric, CompileProfile, CostRow
from .cost import DoctorCost, Footprint, PhaseCost, ReferenceRun
from .findings import (
    BreakCost,
    CompiledObject,
    DdpSplit,
    FailedGuard,
    Frame,
    FrameCalls,
    Graph,
    GraphBreakSite,
    GuardSet,
    PerfHint,
    Recompile,
    RecompileCause,
    RecompileCliff,
    file_key,
)
from .fixes import (
    BackendCheck,
    Delta,
    Effect,
    FixAction,
    FixResult,
    NumericsCheck,
    ProbedDim,
    ShapeProbe,
    Suggestion,
    TorchBug,
    Verification,
)
from .logs import LogSource, ParseStats, RankDivergence, RankSummary
from .report import (
    FAILED_PHASES,
    Report,
    assemble_report,
    compute_verdict,
    elapsed_s,
    refresh_verdict,
    started_now,
    summarize,
    unknown_environment,
)
from .run_info import Environment, ErrorRecord, ExplainCheck, RunInfo, Summary, Target

__all__ = [
    "AccuracyBisect",
    "AccuracyOperation",
    "AccuracyTrial",
    "ActionType",
    "BenchIsolation",
    "Benchmark",
    "BenchmarkArm",
    "Bisect",
    "BisectStrategyResult",
    "BisectTrial",
    "BreakCost",
    "CompileMetric",
    "CompileProfile",
    "CompiledObject",
    "CostRow",
    "CudaGraphStats",
    "DdpSplit",
    "Delta",
    "DeltaMetric",
    "DivergenceKind",
    "DoctorCost",
    "Effect",
    "Environment",
    "ErrorRecord",
    "ExplainCheck",
    "ExplainMethod",
    "FAILED_PHASES",
    "FailedGuard",
    "FixAction",
    "BackendCheck",
    "FixResult",
    "Footprint",
    "Frame",
    "FrameCalls",
    "Graph",
    "GraphBreakSite",
    "GuardKind",
    "GuardSet",
    "LatencyStats",
    "LogKind",
    "LogSource",
    "MachineLoad",
    "MeasuredVerdict",
    "NumericsCheck",
    "Objective",
    "ParseStats",
    "PerfHint",
    "Phase",
    "PhaseCost",
    "ProbedDim",
    "RankDivergence",
    "RankSummary",
    "Recompile",
    "RecompileCause",
    "RecompileCliff",
    "Recurrence",
    "ReferenceRun",
    "Report",
    "RunInfo",
    "SCHEMA_VERSION",
    "ShapeProbe",
    "Strategy",
    "StrategyRow",
    "Suggestion",
    "SuggestionCategory",
    "SuggestionKind",
    "Summary",
    "Target",
    "TargetKind",
    "TorchBug",
    "TrialStatus",
    "Verdict",
    "Verification",
    "assemble_report",
    "compute_verdict",
    "elapsed_s",
    "file_key",
    "refresh_verdict",
    "started_now",
    "summarize",
    "unknown_environment",
]
