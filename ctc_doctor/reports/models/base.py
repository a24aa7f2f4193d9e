"""The schema's version, the literal types its fields take, and the base every report model derives from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = "1.27"
"""major.minor: a minor bump adds optional fields; a major bump renames or removes fields."""
Verdict = Literal["clean", "graph_breaks", "recompiles", "graph_breaks_and_recompiles", "failed"]
GuardKind = Literal[
    "size",
    "stride",
    "dtype",
    "device",
    "requires_grad",
    "value",
    "type",
    "object_id",
    "attribute",
    "global_state",
    "adapter",
    "changed",
    "other",
]
Phase = Literal[
    "load",
    "eager",
    "explain",
    "compile",
    "capture",
    "bisect",
    "accuracy",
    "suggest",
    "fix",
    "probe",
    "bench",
    "report",
    "timeout",
    "interrupted",
    "script",
    "preflight",
    "weights",
]
TargetKind = Literal["build", "script", "logs"]
TrialStatus = Literal["passed", "failed", "timeout", "crashed", "skipped", "inferred"]
Strategy = Literal["top-down", "bottom-up", "both"]
SuggestionCategory = Literal["fix", "workaround", "advice"]
Objective = Literal["latency", "compile", "balanced"]
Recurrence = Literal["one_off", "bounded", "recurring"]
MeasuredVerdict = Literal["recommended", "trade_off", "worse", "no_effect", "failed", "unmeasured"]
DeltaMetric = Literal[
    "graphs",
    "break_sites",
    "recompiles",
    "trace_compile_s",
    "cold_compile_s",
    "warm_compile_s",
    "latency_ms",
    "peak_memory_mb",
    "first_call_s",
]
SuggestionKind = Literal["config", "wrap", "dynamic_shapes", "regional", "source_edit", "upgrade", "mode"]
ActionType = Literal[
    "dynamo_config",
    "disable",
    "source_patch",
    "mark_dynamic",
    "scalar_to_tensor",
    "set_attribute",
    "regional",
    "warm_up",
    "counter_to_tensor",
    "change_first",
    "compile_only",
    "call_argument",
    "compile_options",
]
ExplainMethod = Literal["same_trace", "separate_call"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")  # field docstrings: read by reports.io.described_schema


LogKind = Literal["torch_trace", "torch_logs"]
DivergenceKind = Literal["root_cause", "break_sites", "recompiles", "compiles"]
