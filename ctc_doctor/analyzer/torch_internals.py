"""The one module that touches torch's private APIs.

Everything else in ctc-doctor goes through the functions here. Each hook is a context manager that
restores what it changed in `finally`. Features are detected with getattr/hasattr, never by version
number; what is missing becomes a note in the report, not a crash. Verified on torch 2.13 (and 2.11 on
a GPU); torch 2.6 lacks gb_types, the graph-break registry and some metric fields.

What it owns:
- the structured trace (`torch.__trace` logger): a handler on it switches `trace_structured` on
  in-process, whatever TORCH_LOGS/TORCH_TRACE say (torch only removes handlers it created itself);
- perf_hints artifact loggers, switched on directly (set_logs is a no-op when TORCH_LOGS is set);
- the string intern table of the trace, dynamo reset/counters, explain, backend lookup, the live
  compile id, Dynamo exception types, config patches, mark_dynamic, inductor caches, regional compile.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo

from ..reports.compile_id import CompileId
from ..reports.labels import TORCH_LOG_NOTE
from .readers.sources import RawFrame
from .readers.text import guard_line_count

# Trace event kinds worth keeping; everything else (chromium_event, describe_*, bytecode dumps) is
# dropped in the handler so memory stays small on big models.
_KEEP_EVENTS = ("dynamo_start", "compilation_metrics", "dynamo_cpp_guards_str", "str")
_KEEP_ARTIFACTS = ("dynamo_graph_break_reason", "recompile_reasons")


@dataclass
class TraceEvent:
    """One kept structured-trace event."""

    kind: str
    """dynamo_start, compilation_metrics, dynamo_cpp_guards_str, dynamo_graph_break_reason, recompile_reasons."""
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


class _TraceHandler(logging.Handler):
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
        if kind == "dynamo_cpp_guards_str" and not self.keep_guard_text:
            payload = str(guard_line_count(payload or ""))  # findings.guard_set reads the digits back
        event = TraceEvent(kind, _compile_id_of(md), dict(md.get(kind) or {}), payload)
        if kind == "dynamo_graph_break_reason":
            gb_type, stack, _ = break_details(sys.exc_info()[1])
            if gb_type:
                event.exc_gb_type = gb_type
                event.exc_stack = stack
        self.sink.events.append(event)


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # noqa: BLE001 - a badly formatted torch log line must not kill the run
        return str(record.msg)


class _PerfHintHandler(logging.Handler):
    def __init__(self, sink: CaptureResult) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.perf_hints.append(PerfHintRecord(record.name, _message(record), current_compile_id()))


@contextlib.contextmanager
def _artifact_handler(artifact: str, handler: logging.Handler, modules: tuple[str, ...] = ()) -> Iterator[None]:
    """`handler` on every logger of a torch log artifact (`perf_hints`, `cudagraphs`), at DEBUG for the
    block and kept off torch's stderr handlers unless the user asked for the artifact. `modules` are
    imported first: an artifact's loggers exist once the modules that log it are."""
    for mod in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(mod)
    try:
        from torch._logging._internal import log_registry

        names = sorted(n for n in log_registry.get_artifact_log_qnames() if n.endswith(f".__{artifact}"))
    except ImportError:
        names = []
    saved: list[tuple[logging.Logger, int, bool]] = []
    try:
        for name in names:
            log = logging.getLogger(name)
            saved.append((log, log.level, log.propagate))
            log.addHandler(handler)
            log.setLevel(logging.DEBUG)
            if not _artifact_enabled(artifact):
                log.propagate = False
        yield
    finally:
        for log, level, propagate in saved:
            log.removeHandler(handler)
            log.setLevel(level)
            log.propagate = propagate


COMPILER_LOGGERS = (
    "torch._dynamo",
    "torch._guards",
    "torch._inductor",
    "torch._functorch",
    "torch._subclasses",
    "torch._higher_order_ops",
    "torch._export",
    "torch.export",
    "torch.fx",
)
"""torch.compile's own loggers: what a script's run keeps off the terminal (torch.distributed,
DataLoader and the rest of the script's torch output stay where the script sent them)."""


@dataclass
class _QuietBlock:
    seen: Counter[tuple[str, str, str]]
    only: tuple[str, ...] | None

    def covers(self, name: str) -> bool:
        return self.only is None or any(name == p or name.startswith(p + ".") for p in self.only)


class _QuietTorch(logging.Filter):
    """Keeps torch's own log records off its stderr handlers: Dynamo's graph-break warnings (the report
    carries them in full) and the warnings and errors torch logs around a failing compile or a guard it
    cannot build, counted by (level, logger, text) into every block in force that covers the logger."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[_QuietBlock] = []
        self.users: dict[logging.Handler, int] = {}
        """Handler -> blocks using the filter on it: the filter leaves a handler with its last block."""
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("torch"):
            return True
        blocks = [b for b in list(self.blocks) if b.covers(record.name)]
        if not blocks:
            return True
        if record.levelno >= logging.WARNING:
            key = (record.levelname, record.name, _record_text(record))
            for block in blocks:
                block.seen[key] += 1
        return False

    def attach(self, handlers: list[logging.Handler], block: _QuietBlock) -> None:
        with self.lock:
            for handler in handlers:
                if self.users.get(handler, 0) == 0:
                    handler.addFilter(self)
                self.users[handler] = self.users.get(handler, 0) + 1
            self.blocks.append(block)

    def detach(self, handlers: list[logging.Handler], block: _QuietBlock) -> None:
        with self.lock:
            for handler in handlers:  # first the filters: an interrupt after this leaves torch's handlers as they were
                self.users[handler] -= 1
                if self.users[handler] == 0:
                    del self.users[handler]
                    handler.removeFilter(self)
            self.blocks = [b for b in self.blocks if b is not block]


def _record_text(record: logging.LogRecord) -> str:
    """The record's first line, and the first line of the exception it carries: torch logs
    "Error while creating guard:" with the ConstraintViolationError that says why in its traceback."""
    first = (_message(record).strip().splitlines() or [""])[0]
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        try:
            why = (str(exc).strip().splitlines() or [""])[0]
        except Exception:  # noqa: BLE001 - an exception that cannot print itself must not kill the log call
            why = "(unprintable)"
        first = f"{first} {type(exc).__name__}: {why}".strip()
    return first[:240]


_QUIET = _QuietTorch()
"""One filter on torch's handlers however the blocks nest or interleave; each block adds its counter."""


def torch_log_notes(seen: Counter[tuple[str, str, str]], during: str, limit: int = 5) -> list[str]:
    """One note per distinct record torch logged, most frequent first, with its count."""
    notes = [f"{TORCH_LOG_NOTE} {during} ({n}×): {level} {name}: {text}" for (level, name, text), n in seen.most_common(limit)]
    if len(seen) > limit:
        rest = sum(n for _, n in seen.most_common()[limit:])
        notes.append(f"{TORCH_LOG_NOTE} {during}: {len(seen) - limit} more kind(s), {rest} in all")
    return notes


@contextlib.contextmanager
def quiet_torch_stderr(enabled: bool, only: tuple[str, ...] | None = None) -> Iterator[Counter[tuple[str, str, str]]]:
    """Torch's log records (of the loggers under `only`, default all) stay off stderr in the block,
    unless the user set TORCH_LOGS; yields their counts. Blocks nest: a record counts in each block
    in force that covers its logger."""
    seen: Counter[tuple[str, str, str]] = Counter()
    if not enabled or os.environ.get("TORCH_LOGS"):
        yield seen  # the user asked for torch's logs: leave them alone
        return
    try:
        from torch._logging._internal import _is_torch_handler, log_registry
    except ImportError:
        yield seen
        return
    handlers: list[logging.Handler] = []
    for qname in log_registry.get_log_qnames():
        for handler in logging.getLogger(qname).handlers:
            if _is_torch_handler(handler) and handler not in handlers:
                handlers.append(handler)
    block = _QuietBlock(seen, only)
    _QUIET.attach(handlers, block)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Dynamo does not know how to trace")
            yield seen
    finally:
        _QUIET.detach(handlers, block)


@contextlib.contextmanager
def capture(
    *, backend: str = "eager", keep_guard_text: bool = False, quiet: bool = True, quiet_only: tuple[str, ...] | None = None, keep_caches: bool = False
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
        result.notes.append(
            f"torch {torch.__version__} has no structured trace logger; break and recompile capture is unavailable."
        )
    handler = _TraceHandler(result, keep_guard_text)
    # inductor's perf_hints loggers are created when its modules are imported
    modules = ("torch._inductor.graph", "torch._inductor.compile_fx") if backend == "inductor" else ()
    try:
        if trace_log is not None:
            trace_log.addHandler(handler)
        with _artifact_handler("perf_hints", _PerfHintHandler(result), modules):
            yield result
    finally:
        if trace_log is not None:
            trace_log.removeHandler(handler)
        result.strings.update({k: v for k, v in _intern_table().items() if k not in result.strings})


def _artifact_enabled(name: str) -> bool:
    try:
        from torch._logging._internal import log_state
    except ImportError:
        return False
    return bool(log_state.is_artifact_enabled(name))


def fresh_dynamo_state() -> None:
    """Forget compiled code, counters and metrics so the next compile starts from zero ids."""
    torch._dynamo.reset()
    utils = torch._dynamo.utils
    counters = getattr(utils, "counters", None)
    if counters is not None:
        for log in _CUDAGRAPH_LOGS:
            log.fold_skips()  # before the counter goes
        counters.clear()
    clear = getattr(utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


@contextlib.contextmanager
def preserved_dynamo_state() -> Iterator[None]:
    """Put `torch._dynamo.config` and Dynamo's counters back as they were (compiled caches are not kept)."""
    config = torch._dynamo.config
    saved_config = config.get_config_copy() if hasattr(config, "get_config_copy") else None
    counters = getattr(torch._dynamo.utils, "counters", None)
    saved_counters = {k: dict(v) for k, v in counters.items()} if counters is not None else None
    try:
        yield
    finally:
        if saved_config is not None:
            with contextlib.suppress(Exception):  # a key torch rejects on reload must not mask the test result
                config.load_config(saved_config)
        if counters is not None and saved_counters is not None:
            counters.clear()
            for key, values in saved_counters.items():
                counters[key].update(values)


def lookup_backend(name: str) -> Callable[..., Any]:
    """The backend callable registered under `name` (eager, aot_eager, inductor...)."""
    return torch._dynamo.lookup_backend(name)  # type: ignore[no-any-return]


def break_details(exc: BaseException | None) -> tuple[str | None, list[RawFrame], RawFrame | None]:
    """(gb_type, real_stack outermost first, innermost user frame) of a Dynamo `Unsupported` exception.

    gb_type is on Unsupported since about 2.8 (None before); real_stack holds the frames Dynamo was
    tracing, inlined ones included; the innermost frame is set when the exception escaped a compile.
    """
    gb_type = getattr(exc, "gb_type", None)
    stack = [(f.filename, f.lineno or 0, f.name, f.line) for f in (getattr(exc, "real_stack", None) or [])]
    inner = getattr(exc, "innermost_user_frame_summary", None)
    innermost = (inner.filename, inner.lineno or 0, inner.name, inner.line) if inner is not None else None
    return (str(gb_type) if gb_type else None), stack, innermost


def is_unsupported(exc: BaseException) -> bool:
    """A graph break escaping (fullgraph=True or a frame Dynamo could not handle)."""
    exc_mod = getattr(torch._dynamo, "exc", None)
    unsupported = getattr(exc_mod, "Unsupported", None)
    return unsupported is not None and isinstance(exc, unsupported)


@dataclass
class ExplainResult:
    graph_count: int
    graph_break_count: int
    break_reasons: list[tuple[str, list[tuple[str, int, str]]]]
    op_count: int


def graph_compile_reason(gm: Any) -> tuple[bool, tuple[str, list[tuple[str, int, str]]] | None]:
    """(attached, (reason, user stack) when the graph ended at a graph break) of a graph Dynamo hands
    a backend. Dynamo sets `gm.compile_subgraph_reason` (a GraphCompileReason) on every graph; explain
    and `ExplainWithBackend` read the same attribute (`_explain_graph_detail`, 2.6 to 2.15)."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None:
        return False, None
    if not getattr(reason, "graph_break", False):
        return True, None
    stack = [(f.filename, f.lineno or 0, f.name) for f in (getattr(reason, "user_stack", None) or [])]
    return True, (str(getattr(reason, "reason", reason)), stack)


def run_explain(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExplainResult | None:
    """torch._dynamo.explain on one call, traced a second time. It resets Dynamo before and after.
    Used where graphs carry no compile reason (see `graph_compile_reason`)."""
    explain = getattr(torch._dynamo, "explain", None)
    if explain is None:
        return None
    out = explain(fn)(*args, **kwargs)
    reasons = []
    for r in getattr(out, "break_reasons", []) or []:
        stack = [(f.filename, f.lineno or 0, f.name) for f in (getattr(r, "user_stack", None) or [])]
        reasons.append((str(getattr(r, "reason", r)), stack))
    return ExplainResult(
        graph_count=int(out.graph_count),
        graph_break_count=int(out.graph_break_count),
        break_reasons=reasons,
        op_count=int(getattr(out, "op_count", 0) or 0),
    )


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


# --- fix and benchmark knobs -------------------------------------------------------------------


def config_has(name: str) -> bool:
    """Whether `torch._dynamo.config` has this option (its module proxy hides some names from dir())."""
    return hasattr(torch._dynamo.config, name)


# Options renamed in torch 2.7 (PR #143709): the old names remain as aliases in newer torch.
_CONFIG_ALIASES = {"recompile_limit": "cache_size_limit", "fail_on_recompile_limit_hit": "fail_on_cache_limit_hit"}


def _resolve_callable(dotted: str) -> Any:
    """`print` -> builtins.print; `logging.Logger.debug` -> that function (report data names functions)."""
    import builtins

    if "." not in dotted:
        if not hasattr(builtins, dotted):
            raise ValueError(f"no builtin named {dotted!r}")
        return getattr(builtins, dotted)
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                raise ValueError(f"{dotted!r} does not exist here")
            value = getattr(value, attr)
        return value
    raise ValueError(f"cannot import {dotted!r}")


class ConfigOptionMissing(ValueError):
    """A `torch._dynamo.config` option that this torch does not have."""


@contextlib.contextmanager
def dynamo_config(patch: dict[str, Any]) -> Iterator[None]:
    """Patch `torch._dynamo.config` for the block. Set-valued options get the named functions added.

    Raises ConfigOptionMissing (before changing anything) when an option does not exist in this torch.
    """
    if not patch:
        yield
        return
    config = torch._dynamo.config
    resolved: dict[str, Any] = {}
    for name, value in patch.items():
        key = name if config_has(name) else _CONFIG_ALIASES.get(name, name)
        if not config_has(key):
            raise ConfigOptionMissing(f"this torch ({torch.__version__}) has no torch._dynamo.config.{name}")
        current = getattr(config, key)
        if isinstance(current, (set, frozenset)) and isinstance(value, list):
            resolved[key] = set(current) | {_resolve_callable(v) for v in value}
        else:
            resolved[key] = value
    with config.patch(**resolved):
        yield


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    torch._dynamo.mark_dynamic(tensor, dim)


def disable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compiler.disable (public since 2.1; `torch._dynamo.disable` before)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "disable"):
        return compiler.disable(fn)  # type: ignore[no-any-return]
    return torch._dynamo.disable(fn)  # type: ignore[no-any-return]


@contextlib.contextmanager
def fresh_inductor_cache(enabled: bool = True) -> Iterator[bool]:
    """A temporary, empty inductor cache directory (in-memory caches cleared) for the block.

    `torch._inductor.utils.fresh_cache` (2.8+; `fresh_inductor_cache` before). Yields False when
    neither exists, so the caller can say the cold compile may have been warm.
    """
    if not enabled:
        yield False
        return
    try:
        utils = importlib.import_module("torch._inductor.utils")
    except ImportError:
        yield False
        return
    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)
    if fresh is None:
        yield False
        return
    with fresh():
        yield True


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
        if ev.kind == "compilation_metrics":
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


def backend_names() -> list[str] | None:
    """Every registered torch.compile backend (debug ones included); None when torch cannot say."""
    try:
        return list(torch.compiler.list_backends(exclude_tags=()))
    except Exception:  # noqa: BLE001 - an older torch: the compile itself will say
        try:
            return list(torch._dynamo.list_backends(exclude_tags=()))  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            return None


@contextlib.contextmanager
def uncompiled(module: Any) -> Iterator[None]:
    """A module compiled in place with `nn.Module.compile()` (its private `_compiled_call_impl`, 2.2+)
    calls its plain forward in the block; restored after. Anything else is left as it is."""
    saved = getattr(module, "_compiled_call_impl", None) if isinstance(module, torch.nn.Module) else None
    if saved is None:
        yield
        return
    module._compiled_call_impl = None
    try:
        yield
    finally:
        module._compiled_call_impl = saved


@contextlib.contextmanager
def regional_compile(modules: list[torch.nn.Module], **compile_kwargs: Any) -> Iterator[None]:
    """`module.compile(**kw)` on each block for the duration of the block, then undone.

    nn.Module.compile (2.2+) keeps the compiled call in the private `_compiled_call_impl`; setting it
    back to None restores plain eager calls, so the user's modules end as they started.
    """
    saved = [getattr(m, "_compiled_call_impl", None) for m in modules]
    try:
        for m in modules:
            m.compile(**compile_kwargs)
        yield
    finally:
        for m, previous in zip(modules, saved, strict=True):
            m._compiled_call_impl = previous


# --- a script's own torch.compile calls (`ctc-doctor run`) ---------------------------------------


@contextlib.contextmanager
def torch_compile_replaced(make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[Callable[..., Any]]:
    """`torch.compile` is `make(original)` in the block (what the script calls, `nn.Module.compile`
    included: it calls `torch.compile(self._call_impl, ...)`); yields the original; restored on exit."""
    original = torch.compile
    torch.compile = make(original)  # type: ignore[assignment]
    try:
        yield original
    finally:
        torch.compile = original  # type: ignore[assignment]


def compiled_original(obj: Any) -> Any:
    """What `torch.compile` wrapped: the module inside an OptimizedModule, the function behind a
    compiled function (a bound `_call_impl` for `nn.Module.compile`); None when it is neither."""
    inner = getattr(obj, "_orig_mod", None)  # OptimizedModule, 2.0+
    if isinstance(inner, torch.nn.Module):
        return inner
    return getattr(obj, "_torchdynamo_orig_callable", None)


def is_optimized_module(obj: Any) -> bool:
    optimized = getattr(getattr(torch._dynamo, "eval_frame", None), "OptimizedModule", None)
    return optimized is not None and isinstance(obj, optimized)


# --- CUDA graphs (reduce-overhead): step marks, and what torch logs about recordings and skips ---------


def cudagraph_mark_step_begin() -> None:
    """A new iteration for CUDA graph trees: the outputs of the previous one may be overwritten."""
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()


@dataclass
class CudaGraphLog:
    """What torch's `cudagraphs` log and counters said in one block, every compile in it counted."""

    recordings: int = 0
    skip_count: int = 0
    skips: Counter[str] = field(default_factory=Counter)
    rerecords: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    _counted: int = 0
    """torch's `cudagraph_skips` counter when last read (fresh_dynamo_state() clears it: read first)."""

    def fold_skips(self) -> None:
        counters = getattr(torch._dynamo.utils, "counters", None)
        now = int(counters["inductor"]["cudagraph_skips"]) if counters is not None else 0
        self.skip_count += max(0, now - self._counted)
        self._counted = 0  # the counter starts again from zero


_CUDAGRAPH_LOGS: list[CudaGraphLog] = []
"""The cudagraph_log() blocks in force, whose skip counts fresh_dynamo_state() folds in before clearing."""


_COMPILE_ID_PREFIX = re.compile(r"^\[[^\]]*\]\s*")
_SKIP_PREFIX = "skipping cudagraphs due to "


class _CudaGraphHandler(logging.Handler):
    def __init__(self, sink: CudaGraphLog) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        text = _COMPILE_ID_PREFIX.sub("", _message(record).strip())
        first = (text.splitlines() or [""])[0][:300]
        if first.startswith("Recording function="):
            self.sink.recordings += 1
        elif first.startswith("Re-recording function="):
            self.sink.rerecords[first.removeprefix("Re-recording ")] += 1
        elif first.lower().startswith(("skipping cudagraph", "disabling cudagraphs")):
            while first.startswith(_SKIP_PREFIX + _SKIP_PREFIX):  # torch's cudagraphs backend says it twice
                first = first.removeprefix(_SKIP_PREFIX)
            first = first.split(" Found from", 1)[0].strip()  # the op's stack trace follows, often empty
            self.sink.skips[first] += 1
        elif record.levelno >= logging.WARNING:  # e.g. "CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size"
            self.sink.warnings[first] += 1


@contextlib.contextmanager
def cudagraph_log() -> Iterator[CudaGraphLog]:
    """Collect CUDA graph recordings, skips and re-recordings (torch's `cudagraphs` artifact log, at
    DEBUG for the block, kept off stderr unless the user asked for it) and the skip counter."""
    result = CudaGraphLog()
    counters = getattr(torch._dynamo.utils, "counters", None)
    result._counted = int(counters["inductor"]["cudagraph_skips"]) if counters is not None else 0
    _CUDAGRAPH_LOGS.append(result)
    try:
        with _artifact_handler("cudagraphs", _CudaGraphHandler(result), ("torch._inductor.cudagraph_utils", "torch._inductor.cudagraph_trees")):
            yield result
    finally:
        _CUDAGRAPH_LOGS[:] = [g for g in _CUDAGRAPH_LOGS if g is not result]
        result.fold_skips()


# --- ahead-of-time compilation: torch.export + AOTInductor, and portable cache artifacts -------------


def aoti_missing() -> str | None:
    """Why AOTInductor cannot run here (None when it can): `aoti_compile_and_package` and
    `aoti_load_package` are in `torch._inductor` since 2.6."""
    try:
        inductor = importlib.import_module("torch._inductor")
    except ImportError as exc:
        return f"torch._inductor cannot be imported: {exc}"
    missing = [n for n in ("aoti_compile_and_package", "aoti_load_package") if not hasattr(inductor, n)]
    if missing or not hasattr(torch, "export"):
        return f"this torch ({torch.__version__}) has no {', '.join(missing) or 'torch.export'}"
    return None


def export_program(fn: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], varying: dict[str, set[int]], strict: bool) -> Any:
    """torch.export of one call, the dims in `varying` (`args[i]` or a keyword's name -> dims)
    dynamic (`Dim.AUTO`: export decides, and specialises where the code needs it). The spec is keyed
    the way torch.export binds the call to forward's signature (`*args`/`**kwargs` included)."""
    import inspect

    auto = getattr(torch.export.Dim, "AUTO", None)
    dynamic: Any = None
    if varying and auto is not None:

        def one(value: Any, key: str) -> Any:
            dims = varying.get(key)
            return {d: auto for d in dims} if isinstance(value, torch.Tensor) and dims else None

        signature = inspect.signature(fn.forward)
        bound = signature.bind(*args, **kwargs)
        dynamic, position = {}, 0
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                dynamic[name] = tuple(one(v, f"args[{position + j}]") for j, v in enumerate(value))
                position += len(value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                dynamic[name] = {k: one(v, k) for k, v in value.items()}
            elif position < len(args):
                dynamic[name] = one(value, f"args[{position}]")
                position += 1
            else:
                dynamic[name] = one(value, name)
        variadic = [n for n, p in signature.parameters.items() if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        packed = [n for n in variadic if dynamic.get(n)]
        if packed:
            try:
                return torch.export.export(fn, args, kwargs, dynamic_shapes=dynamic, strict=strict)
            except AssertionError as exc:  # torch 2.13: "Must provide a tree_name when there might be a mismatch"
                raise ExportUnsupported(
                    f"this torch ({torch.__version__}) cannot export dynamic shapes passed through forward's "
                    f"{', '.join('*' * (1 + (signature.parameters[n].kind is inspect.Parameter.VAR_KEYWORD)) + n for n in packed)} "
                    f"with dynamic dims elsewhere in the call: {exc}"
                ) from exc
    return torch.export.export(fn, args, kwargs, dynamic_shapes=dynamic, strict=strict)


class ExportUnsupported(Exception):
    """torch.export cannot express this call's dynamic shapes (a limit of torch, not of the model)."""


def aoti_package(program: Any, path: str, constants_in_package: bool = True) -> str:
    """AOTInductor-compile an exported program into a `.pt2` package at `path`."""
    inductor = importlib.import_module("torch._inductor")
    configs = {} if constants_in_package else {"aot_inductor.package_constants_in_so": False}
    return str(inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=configs))


def aoti_load(path: str, constants: dict[str, torch.Tensor] | None = None) -> Callable[..., Any]:
    """Load a `.pt2` package; with `constants`, a package compiled without them runs on these weights."""
    runner = importlib.import_module("torch._inductor").aoti_load_package(path)
    if constants is not None:
        runner.load_constants(constants, check_full_update=True, user_managed=True)
    return runner


def save_cache_artifacts() -> bytes | None:
    """The compile caches of this process as one blob (`torch.compiler.save_cache_artifacts`, 2.7+;
    None when this torch has no such API or nothing was cached)."""
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        return None
    saved = save()
    return None if saved is None else bytes(saved[0])


def load_cache_artifacts(blob: bytes) -> bool:
    load = getattr(torch.compiler, "load_cache_artifacts", None)
    if load is None:
        return False
    return load(blob) is not None  # None: the blob could not be read
