"""Dynamo itself: resetting and preserving its state, backend lookup, its exceptions, and explain.

Owns no state: a reset asks the CUDA graph log (`cudagraphs.fold_cudagraph_skips`) to count torch's
skip counter before the counter is cleared.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo

from ..readers.sources import RawFrame
from .cudagraphs import fold_cudagraph_skips


def fresh_dynamo_state() -> None:
    """Forget compiled code, counters and metrics so the next compile starts from zero ids."""
    torch._dynamo.reset()
    utils = torch._dynamo.utils
    counters = getattr(utils, "counters", None)
    if counters is not None:
        fold_cudagraph_skips()  # before the counter goes
        counters.clear()
    clear = getattr(utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


def reset_dynamo_quietly() -> None:
    """`fresh_dynamo_state()` for a `finally`: a reset that fails must not hide the block's own
    result or the error that ended it."""
    with contextlib.suppress(Exception):
        fresh_dynamo_state()


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
            # a key torch rejects on reload must not mask the test result; a deprecated one set back to what
            # it was is not news (torch warns on every set of one)
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                config.load_config(saved_config)
        if counters is not None and saved_counters is not None:
            counters.clear()
            for key, values in saved_counters.items():
                counters[key].update(values)


def lookup_backend(name: str) -> Callable[..., Any]:
    """The backend callable registered under `name` (eager, aot_eager, inductor...)."""
    return torch._dynamo.lookup_backend(name)  # type: ignore[no-any-return]


def tuned_backend(name: str, mode: str | None, options: dict[str, Any] | None, dynamic: bool | None) -> Callable[..., Any]:
    """The backend `torch.compile(..., backend=name, mode=..., options=...)` would run: inductor with the mode's
    and the options' settings (torch's `_TorchCompileInductorWrapper`), any other backend as registered (mode
    and options are inductor's). Without that private wrapper, inductor's default settings."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if name != "inductor" or not (mode or options) or wrapper is None:
        return lookup_backend(name)
    return wrapper(mode, options, dynamic)  # type: ignore[no-any-return]


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


@dataclass
class FrameEntries:
    """Every Python frame entered during each workload call, by code object, Dynamo's own compiles left out:
    what `served_entries` sorts into frames served by a compiled version and frames that ran their own code.
    The caller brackets each call with `call(i)`."""

    profiler: Any
    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    """(call, id of the code object) -> entries."""
    codes: dict[int, Any] = field(default_factory=dict)
    within: bool = False
    """A workload call is being counted (Dynamo's compile callbacks pause and resume only then)."""
    index: int = 0
    """The call being counted."""
    failed: bool = False
    """A tally failed: the counts are incomplete, and none are reported."""
    _seen: dict[int, int] = field(default_factory=dict)

    @contextlib.contextmanager
    def call(self, index: int) -> Iterator[None]:
        """Count the frames entered in the block as call `index`'s."""
        self.begin(index)
        try:
            yield
        finally:
            self.end()

    def begin(self, index: int) -> None:
        """Count from here as call `index`'s (a call left open, one that raised, ends here first)."""
        if self.within:
            self.end()
        self.index = index
        self.within = True
        self.profiler.enable()

    def end(self) -> None:
        """The call counted since `begin` ends."""
        if not self.within:
            return
        self.profiler.disable()
        self.within = False
        try:
            self._tally(self.index)
        except Exception:  # noqa: BLE001 - counting never breaks the workload's call; no counts, not wrong ones
            self.failed = True

    def _tally(self, index: int) -> None:
        """What each code object's count grew by during call `index`."""
        for entry in self.profiler.getstats():  # cumulative: this call's are what grew since the last
            code = entry.code
            if isinstance(code, str):
                continue
            key = id(code)  # not the code itself: Dynamo's generated code may hold a dict constant (unhashable)
            grew = entry.callcount - self._seen.get(key, 0)
            if grew:
                self._seen[key] = entry.callcount
                self.codes[key] = code  # kept alive, so its id stays its own
                self.counts[(index, key)] = self.counts.get((index, key), 0) + grew


@contextlib.contextmanager
def counting_frames() -> Iterator[FrameEntries | None]:
    """Count the Python frames entered in each workload call (`FrameEntries.call`) with CPython's C profiler
    (`cProfile`, built-ins left out: far cheaper than a Python profile function), paused while Dynamo
    compiles (its start and end callbacks), so the compile is neither counted nor slowed. None (nothing
    counted) when this torch lacks `torch._dynamo.utils.orig_code_map` (which code is a compiled version of
    which) or the compile callbacks (`torch._dynamo.callback_handler`, 2.4+), or another profiler runs."""
    import cProfile
    import sys

    code_map = getattr(getattr(torch._dynamo, "utils", None), "orig_code_map", None)
    handler: Any = getattr(torch._dynamo, "callback_handler", None)
    missing = not hasattr(handler, "register_start_callback") or not hasattr(handler, "remove_start_callback")
    if code_map is None or missing or sys.getprofile() is not None:
        yield None
        return
    entries = FrameEntries(cProfile.Profile(builtins=False, subcalls=False))

    def paused(args: Any) -> None:
        if entries.within:
            entries.profiler.disable()

    def resumed(args: Any) -> None:
        if entries.within:
            entries.profiler.enable()

    handler.register_start_callback(paused)
    handler.register_end_callback(resumed)
    try:
        yield entries
    finally:
        entries.profiler.disable()
        with contextlib.suppress(ValueError):
            handler.remove_start_callback(paused)
        with contextlib.suppress(ValueError):
            handler.remove_end_callback(resumed)


@dataclass(frozen=True)
class ServedEntry:
    """Entries of one function's frame during one workload call: by a compiled version, or by its own code."""

    call: int
    file: str
    line: int
    """The function's first line."""
    function: str
    compiled: bool
    """Served by a version Dynamo compiled; False: the function's own code ran (eagerly)."""
    count: int


def served_entries(entries: FrameEntries | None) -> list[ServedEntry]:
    """The counted frames, each as the function it belongs to (a compiled version's own function, read from
    `orig_code_map` before a Dynamo reset clears it) and whether a compiled version served it."""
    if entries is None or entries.failed:
        return []
    code_map = torch._dynamo.utils.orig_code_map
    merged: dict[tuple[int, str, int, str, bool], int] = {}
    for (call, code_id), count in entries.counts.items():
        code = entries.codes[code_id]
        original = code_map.get(code)  # keyed by identity (`ExactWeakKeyDictionary`)
        own = original if original is not None else code
        where = (call, own.co_filename, own.co_firstlineno, own.co_name, original is not None)
        merged[where] = merged.get(where, 0) + count
    return [ServedEntry(call, file, line, name, compiled, n) for (call, file, line, name, compiled), n in merged.items()]


def graph_module_source(gm: torch.fx.GraphModule) -> str | None:
    """Standalone source of an FX graph as a `Repro(torch.nn.Module)` class (what torch's own minifier writes,
    `torch._dynamo.debug_utils.NNModuleToString`), or None where this torch lacks it or cannot print it."""
    try:
        from torch._dynamo.debug_utils import NNModuleToString
    except ImportError:
        return None
    try:
        return str(NNModuleToString.convert(gm))
    except Exception:  # noqa: BLE001 - a graph it cannot print: no repro of that kind
        return None


def symint_hint(value: Any) -> int | None:
    """The concrete value a `torch.SymInt` graph input stood for, None for anything else."""
    if not isinstance(value, torch.SymInt):
        return None
    node = getattr(value, "node", None)
    hint = getattr(node, "hint", None)
    return int(hint) if hint is not None else None


def traced_frames(exc: BaseException) -> list[tuple[str, int, str]]:
    """The user frames Dynamo was tracing when `exc` escaped a compile, outermost first, as (file, line,
    function): read from the tracers on the traceback (`InstructionTranslator` and its inlining children,
    each at the line it was tracing). Empty when the error did not come from tracing, or this torch's
    tracers lack those attributes."""
    out: list[tuple[str, int, str]] = []
    tb = exc.__traceback__
    while tb is not None:
        tracer = tb.tb_frame.f_locals.get("self")
        code, line = getattr(tracer, "f_code", None), getattr(tracer, "lineno", None)
        if hasattr(tracer, "instruction_pointer") and code is not None and isinstance(line, int):
            frame = (str(code.co_filename), line, str(code.co_name))
            if frame not in out:
                out.append(frame)
        tb = tb.tb_next
    return out


@dataclass(frozen=True)
class GuardCrash:
    """A compile that crashed while Dynamo built a guard (tracing had finished): the guard, the object it read
    and the user's (or a library's) code that raised when the guard called it."""

    guard: str
    """The guarded source (`L['self'].irreps[0][1]`)."""
    builder: str
    """The guard's kind, as `GuardBuilder` names it (`SEQUENCE_LENGTH`)."""
    value_type: str
    """The guarded object's class, qualified (`e3nn.o3._irreps.Irrep`)."""
    bases: tuple[str, ...]
    """The builtin classes it derives from (`tuple`), for a repro that stands for it."""
    frame: RawFrame | None
    """The innermost frame outside torch that raised (`_irreps.py`, 264, `__len__`, its code)."""
    error_type: str
    """What it raised (`NotImplementedError`)."""
    value_class: type | None = None
    """The guarded object's class itself (a workaround patches it for the time of a check)."""


def guard_crash(exc: BaseException) -> GuardCrash | None:
    """Whether `exc` (what `torch.compile` raised) is a crash while building a guard, and which: read off the
    traceback's frames (`torch/_guards.py`'s `Guard.create` holds the guard, the `GuardBuilder` method the
    object). torch 2.6-2.15 build guards there; None on a torch that does not, or for another failure."""
    import linecache
    import os

    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # the wrapper and what it wraps
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for error in reversed(chain):  # innermost first
        frames = []
        tb = error.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        creating = next(
            (f for f in frames if f.f_code.co_name == "create" and f.f_code.co_filename.endswith(os.path.join("torch", "_guards.py"))), None
        )
        guard = creating.f_locals.get("self") if creating is not None else None
        builder = getattr(getattr(guard, "create_fn", None), "__name__", None)
        if guard is None or builder is None:
            continue
        building = next((f for f in frames if f.f_code.co_name == builder and "value" in f.f_locals), None)
        value = building.f_locals["value"] if building is not None else None
        torch_dir = os.path.dirname(torch.__file__) + os.sep
        outside = [f for f in frames if not f.f_code.co_filename.startswith(torch_dir)]
        raised = outside[-1] if outside and outside[-1] is not frames[0] else None
        frame: RawFrame | None = None
        if raised is not None:
            code = linecache.getline(raised.f_code.co_filename, raised.f_lineno).strip() or None
            frame = (raised.f_code.co_filename, raised.f_lineno, raised.f_code.co_name, code)
        cls = type(value)
        return GuardCrash(
            guard=str(getattr(guard, "name", "?")),
            builder=builder,
            value_type=f"{cls.__module__}.{cls.__qualname__}" if building is not None else "?",
            bases=tuple(b.__name__ for b in cls.__mro__[1:] if b.__module__ == "builtins" and b is not object)
            if building is not None
            else (),
            frame=frame,
            error_type=type(error).__name__,
            value_class=cls if building is not None else None,
        )
    return None
