"""The one package that touches torch's private APIs.

Everything else in ctc-doctor goes through the names exported here (`from .. import torch_internals
as ti; ti.capture(...)`). Each hook is a context manager that restores what it changed in `finally`.
Features are detected with getattr/hasattr, never by version number; what is missing becomes a note
in the report, not a crash. Verified on torch 2.13 (and 2.11 on a GPU); torch 2.6 lacks gb_types,
the graph-break registry and some metric fields.

The pieces, each the only owner of the state it keeps:
- trace: the structured trace (`torch.__trace` logger) and perf hints of a block (`capture`), the
  string intern table of the trace, the live compile id, and `count_compiles` read from the trace;
- logs: torch's log records kept off stderr and counted (`quiet_torch_stderr`, one shared filter),
  the notes they fold into, and handlers on torch's artifact loggers;
- dynamo: Dynamo reset/counters, preserved config, backend lookup, Dynamo exception types, explain, and
  which frames a compiled version served (`counting_frames`);
- knobs: config patches, mark_dynamic, disable, inductor caches, backends, regional compile, a tensor's
  version counter (`tensor_state`), whether a backward is running (`in_backward`);
- script: a script's own `torch.compile` replaced for `ctc-doctor run`;
- cudagraphs: step marks, and the recordings and skips torch logs (the blocks in force);
- aot: torch.export + AOTInductor packages, and portable compile-cache artifacts;
- ops: a mode that sees every op of a block (`DispatchMode`), an op's name and arguments;
- here: what this torch is and which capture features it lacks (`unavailable_features`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

from .aot import (
    ExportUnsupported,
    aoti_load,
    aoti_missing,
    aoti_package,
    export_program,
    load_cache_artifacts,
    minified,
    save_cache_artifacts,
)
from .cudagraphs import CudaGraphLog, cudagraph_log, cudagraph_mark_step_begin
from .dynamo import (
    ExplainResult,
    FrameEntries,
    GuardCrash,
    ServedEntry,
    break_details,
    counting_frames,
    fresh_dynamo_state,
    graph_compile_reason,
    graph_module_source,
    guard_crash,
    is_unsupported,
    lookup_backend,
    preserved_dynamo_state,
    reset_dynamo_quietly,
    run_explain,
    served_entries,
    symint_hint,
    traced_frames,
    tuned_backend,
)
from .knobs import (
    ConfigOptionMissing,
    backend_names,
    compiled_in_place,
    config_has,
    counts_cache_hits,
    disable,
    dynamo_config,
    fresh_inductor_cache,
    in_backward,
    mark_dynamic,
    random_like_eager,
    regional_compile,
    skip_frame,
    tensor_state,
    uncompiled,
)
from .loggers import COMPILER_LOGGERS, quiet_torch_stderr, torch_log_notes
from .ops import DISPATCH_MODE, DispatchMode, op_argument, op_name
from .script import is_optimized_module, torch_compile_replaced
from .trace import (
    CaptureResult,
    CompileStats,
    PerfHintRecord,
    TraceEvent,
    capture,
    count_compiles,
    current_compile_id,
)

__all__ = [
    "COMPILER_LOGGERS",
    "CaptureResult",
    "CompileStats",
    "ConfigOptionMissing",
    "CudaGraphLog",
    "ExplainResult",
    "ExportUnsupported",
    "FrameEntries",
    "ServedEntry",
    "PerfHintRecord",
    "TraceEvent",
    "aoti_load",
    "aoti_missing",
    "aoti_package",
    "backend_names",
    "break_details",
    "capture",
    "config_has",
    "count_compiles",
    "counting_frames",
    "cudagraph_log",
    "cudagraph_mark_step_begin",
    "current_compile_id",
    "disable",
    "skip_frame",
    "tensor_state",
    "in_backward",
    "DISPATCH_MODE",
    "DispatchMode",
    "op_argument",
    "op_name",
    "dynamo_config",
    "export_program",
    "fresh_dynamo_state",
    "guard_crash",
    "GuardCrash",
    "counts_cache_hits",
    "fresh_inductor_cache",
    "graph_compile_reason",
    "graph_module_source",
    "is_optimized_module",
    "is_unsupported",
    "load_cache_artifacts",
    "minified",
    "lookup_backend",
    "tuned_backend",
    "mark_dynamic",
    "preserved_dynamo_state",
    "quiet_torch_stderr",
    "random_like_eager",
    "regional_compile",
    "compiled_in_place",
    "reset_dynamo_quietly",
    "run_explain",
    "save_cache_artifacts",
    "served_entries",
    "symint_hint",
    "traced_frames",
    "torch_compile_replaced",
    "torch_log_notes",
    "torch_version",
    "uncompiled",
    "unavailable_features",
]


# --- what this torch is, and what it lacks ----------------------------------------------------------
# Here, not in a piece: the probes cover every piece, and `unavailable_features` reads `_FEATURES`
# from this namespace (a test adds a feature no torch has by patching `ti._FEATURES`).


def torch_version() -> str:
    return str(torch.__version__)


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def _has_perf_hints() -> bool:
    try:
        from torch._logging._internal import log_registry
    except ImportError:
        return False
    return "perf_hints" in getattr(log_registry, "artifact_names", ())


_FEATURES: list[tuple[str, Callable[[], bool], str]] = [
    ("structured trace", lambda: _has("torch._logging._internal", "trace_log"), "no graph breaks or recompiles are captured"),
    ("guard user stacks", lambda: _has("torch._dynamo.guards", "format_user_stack_trace"), "recompile causes name no user line"),
    ("perf hints", _has_perf_hints, "inductor's perf hints are not collected"),
    ("torch._dynamo.explain", lambda: _has("torch._dynamo", "explain"), "no explain cross-check"),
    ("compile cache artifacts", lambda: _has("torch.compiler", "save_cache_artifacts"), "no warm-start measurement"),
    ("cudagraph step marks", lambda: _has("torch.compiler", "cudagraph_mark_step_begin"), "reduce-overhead arms cannot mark passes"),
    (
        "per-frame calls",
        lambda: _has("torch._dynamo.utils", "orig_code_map") and _has("torch._dynamo", "callback_handler"),
        "no count of the calls each compiled frame served compiled or ran eagerly",
    ),
]


def unavailable_features() -> list[str]:
    """The capture and benchmark features this torch lacks, each as `name: what the report loses`
    (checked by presence, not by version: a backport or a removal counts as it is)."""
    missing = []
    for name, present, loss in _FEATURES:
        try:
            ok = present()
        except Exception:  # noqa: BLE001 - a probe must not fail the run
            ok = False
        if not ok:
            missing.append(f"{name}: {loss}")
    return missing
