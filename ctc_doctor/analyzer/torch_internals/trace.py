"""The structured trace and perf hints of a block: `capture()`, and `count_compiles()` read from it.

Owns the handler on the `torch.__trace` logger: it switches `trace_structured` on in-process, whatever
TORCH_LOGS/TORCH_TRACE say (torch only removes handlers it created itself), and keeps the events worth
keeping; the perf_hints artifact loggers, switched on directly (set_logs is a no-op when TORCH_LOGS is
set); the string intern table of the trace; and the live compile id.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports.compile_id import CompileId
from ..readers.compile_time import phase_split
from ..readers.sources import RawFrame
from ..readers.text import guard_line_count
from .dynamo import break_details
from .loggers import Handler, artifact_handler, message_of, quiet_torch_stderr

# Trace event kinds worth keeping; everything else (chromium_event, describe_*, bytecode dumps) is
# dropped in the handler so memory stays small on big models.
_KEEP_EVENTS = (
    "dynamo_start", "compilation_metrics", "bwd_compilation_metrics", "dynamo_cpp_guards_str", "str", "optimize_ddp_split_child"
)  # fmt: skip
_NO_PAYLOAD = ("optimize_ddp_split_child",)
"""Kept without their payload (a submodule's whole code): that they happened is what counts."""
_DDP_LOGGER = "torch._dynamo.backends.distributed"
_DDP_BUCKETS = re.compile(r"DDPOptimizer used bucket cap (\d+) and created (\d+) buckets")
_KEEP_ARTIFACTS = ("dynamo_graph_break_reason", "recompile_reasons")


@dataclass
class TraceEvent:
    """One kept structured-trace event."""

    kind: str
    """dynamo_start, compilation_metrics, bwd_compilation_metrics, dynamo_cpp_guards_str,
    dynamo_graph_break_reason, recompile_reasons, optimize_ddp_split_child (DDPOptimizer's subgraphs)."""
    compile_id: str | None
    data: dict[str, Any]
    payload: str | None
    exc_gb_type: str | None = None
    """gb_type of the live Unsupported exception when the event was logged inside its handler."""
    exc_stack: list[RawFrame] | None = None
    """real_stack of that exception: the frames Dynamo was tracing, outermost first."""


@dataclass
class PerfHintRecord:
    logger: str
    message: str
    compile_id: str | None


@dataclass
class CaptureResult:
    """What one `capture()` block collected."""

    events: list[TraceEvent] = field(default_factory=list)
    perf_hints: list[PerfHintRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    strings: dict[int, str] = field(default_factory=dict)
    torch_logs: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """Warnings and errors torch logged in the block, kept off stderr: (level, logger, first line) -> count."""
    ddp_buckets: list[tuple[str | None, int, int]] = field(default_factory=list)
    """DDPOptimizer's split of a compile: (compile id, bucket cap in bytes, buckets), from its INFO line."""

    def resolve_file(self, value: Any) -> str:
        """Trace stacks carry interned file ids; map them back to paths."""
        if isinstance(value, int):
            return self.strings.get(value) or _intern_table().get(value) or f"<file #{value}>"
        return str(value)


def _intern_table() -> dict[int, str]:
    try:
        from torch._logging import structured  # private: INTERN_TABLE maps path -> id
    except ImportError:
        return {}
    table = getattr(structured, "INTERN_TABLE", {})
    return {v: k for k, v in table.items()}


def _compile_id_of(md: dict[str, Any]) -> str | None:
    cid = CompileId.from_metadata(md)
    return str(cid) if cid is not None else None


def current_compile_id() -> str | None:
    """The compile id Dynamo is working on right now (`0/1`), or None outside a compile."""
    guards = getattr(torch, "_guards", None)
    ctx = getattr(guards, "CompileContext", None)
    if ctx is None:
        return None
    try:
        trace_id = ctx.current_trace_id()
    except Exception:  # noqa: BLE001 - a missing context is normal outside compiles
        return None
    if trace_id is None:
        return None
    cid = getattr(trace_id, "compile_id", None)
    return str(cid) if cid is not None else None


class _TraceHandler(Handler):
    def __init__(self, sink: CaptureResult, keep_guard_text: bool) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink
        self.keep_guard_text = keep_guard_text

    def emit(self, record: logging.LogRecord) -> None:
        md = getattr(record, "metadata", None)
        if not isinstance(md, dict):
            return
        payload = getattr(record, "payload", None)
        if "artifact" in md:
            name = (md.get("artifact") or {}).get("name")
            if name not in _KEEP_ARTIFACTS:
                return
            kind = name
        else:
            kind = next((k for k in _KEEP_EVENTS if k in md), None)
            if kind is None:
                return
        if kind == "str":
            path, idx = md["str"]
            self.sink.strings[idx] = path
            return
        if kind in _NO_PAYLOAD:
            payload = None
        if kind == "dynamo_cpp_guards_str" and not self.keep_guard_text:
            payload = str(guard_line_count(payload or ""))  # findings.guard_set reads the digits back
        event = TraceEvent(kind, _compile_id_of(md), dict(md.get(kind) or {}), payload)
        if kind == "dynamo_graph_break_reason":
            gb_type, stack, _ = break_details(sys.exc_info()[1])
            if gb_type:
                event.exc_gb_type = gb_type
                event.exc_stack = stack
        self.sink.events.append(event)


class _DdpBucketHandler(Handler):
    """DDPOptimizer's `used bucket cap N and created K buckets` (INFO on its module's logger)."""

    def __init__(self, sink: CaptureResult) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        found = _DDP_BUCKETS.search(message_of(record))
        if found:
            self.sink.ddp_buckets.append((current_compile_id(), int(found[1]), int(found[2])))


@contextlib.contextmanager
def _ddp_bucket_log(sink: CaptureResult) -> Iterator[None]:
    """DDPOptimizer's INFO line caught for the block, kept off torch's stderr unless the user's logging
    shows INFO there already."""
    log = logging.getLogger(_DDP_LOGGER)
    saved = (log.level, log.propagate)
    handler = _DdpBucketHandler(sink)
    shown = log.isEnabledFor(logging.INFO)
    log.addHandler(handler)
    if not shown:
        log.setLevel(logging.INFO)
        log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


class _PerfHintHandler(Handler):
    def __init__(self, sink: CaptureResult) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.perf_hints.append(PerfHintRecord(record.name, message_of(record), current_compile_id()))


@contextlib.contextmanager
def capture(
    *,
    backend: str = "eager",
    keep_guard_text: bool = False,
    quiet: bool = True,
    quiet_only: tuple[str, ...] | None = None,
    keep_caches: bool = False,
) -> Iterator[CaptureResult]:
    """Collect the structured trace and perf hints for the duration of the block; restore on exit.

    With `quiet`, torch's own log records stay off stderr during the block (unless the user set
    TORCH_LOGS): Dynamo's graph-break warnings, since the report carries them in full, and whatever
    torch logs around a failing compile, counted in `torch_logs`; `quiet_only` limits that to these
    loggers. Inductor's FX and AOT caches are off in the block unless `keep_caches` (a script's own
    run keeps its settings).
    """
    with quiet_torch_stderr(quiet, quiet_only) as seen, _no_compile_caches("eager" if keep_caches else backend):
        with _capture(backend=backend, keep_guard_text=keep_guard_text) as result:
            result.torch_logs = seen
            yield result


@contextlib.contextmanager
def _no_compile_caches(backend: str) -> Iterator[None]:
    """A warm inductor/AOT cache skips codegen, and with it perf hints and real compile times."""
    if backend != "inductor":
        yield
        return
    with contextlib.ExitStack() as stack:
        for module, key in (("torch._inductor.config", "fx_graph_cache"), ("torch._functorch.config", "enable_autograd_cache")):
            try:
                config = importlib.import_module(module)
            except ImportError:
                continue
            if hasattr(config, key):
                stack.enter_context(config.patch({key: False}))
        yield


@contextlib.contextmanager
def _capture(*, backend: str, keep_guard_text: bool) -> Iterator[CaptureResult]:
    result = CaptureResult()
    try:
        from torch._logging._internal import trace_log
    except ImportError:
        trace_log = None
        result.notes.append(f"torch {torch.__version__} has no structured trace logger; break and recompile capture is unavailable.")
    handler = _TraceHandler(result, keep_guard_text)
    # inductor's perf_hints loggers are created when its modules are imported
    modules = ("torch._inductor.graph", "torch._inductor.compile_fx") if backend == "inductor" else ()
    try:
        if trace_log is not None:
            trace_log.addHandler(handler)
        with artifact_handler("perf_hints", _PerfHintHandler(result), modules), _ddp_bucket_log(result):
            yield result
    finally:
        if trace_log is not None:
            trace_log.removeHandler(handler)
        result.strings.update({k: v for k, v in _intern_table().items() if k not in result.strings})


@dataclass
class CompileStats:
    """Counts of Dynamo's work in a `count_compiles()` block."""

    frames: int = 0
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    compile_time_s: float = 0.0
    recompile_events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(compile id, guard-failure payload, that compile's metrics) per recompile, in order."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per compile phase (`readers.compile_time.PHASES`), backward compiles included."""
    backward_s: float = 0.0
    """The backward graphs' compiles (lazy, at the first backward; not in compile_time_s)."""
    cache_hits: int = 0
    """Inductor FX graphs found in its cache (local or remote), from the compiles' metrics."""
    cache_misses: int = 0
    """Inductor FX graphs compiled anew."""


@contextlib.contextmanager
def count_compiles() -> Iterator[CompileStats]:
    """Count Dynamo's work in the block from the structured trace (as the analysis does).

    Unlike `capture(backend="inductor")` this leaves inductor's caches on, so a later warm pass can
    hit them. The stats object is filled when the block exits.
    """
    stats = CompileStats()
    with quiet_torch_stderr(True), _capture(backend="eager", keep_guard_text=False) as result:
        yield stats
    metrics = {ev.compile_id: ev.data for ev in result.events if ev.kind == "compilation_metrics" and ev.compile_id}
    for ev in result.events:
        if ev.kind in ("compilation_metrics", "bwd_compilation_metrics"):
            backward = ev.kind == "bwd_compilation_metrics"
            for name, seconds in phase_split(ev.data, backward=backward).items():
                stats.phases[name] = stats.phases.get(name, 0.0) + seconds
            if backward:
                stats.backward_s += float(ev.data.get("duration_us") or 0) / 1e6
                continue
        if ev.kind == "compilation_metrics":
            stats.cache_hits += sum(int(ev.data.get(f"inductor_fx_{w}_cache_hit_count") or 0) for w in ("local", "remote"))
            stats.cache_misses += sum(int(ev.data.get(f"inductor_fx_{w}_cache_miss_count") or 0) for w in ("local", "remote"))
            stats.frames += 1
            stats.compile_time_s += float(ev.data.get("entire_frame_compile_time_s") or 0.0)
            if ev.data.get("graph_op_count") and not ev.data.get("fail_type"):
                stats.graphs += 1
        elif ev.kind == "dynamo_graph_break_reason":
            stats.graph_breaks += 1
        elif ev.kind == "recompile_reasons":
            stats.recompiles += 1
            cid = ev.compile_id or "?"
            stats.recompile_events.append((cid, ev.payload or "", metrics.get(cid, {})))
