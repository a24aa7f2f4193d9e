"""`analyze(workload, options) -> Report`: one in-process run that finds breaks and recompiles.

Phases: an eager pass (checks the model works and records module call sites), `explain` on the
first call as a cross-check, then a real `torch.compile` over every call of the workload under the
capture of `torch_internals`. Events become deduplicated, ranked, module-attributed report entries.
A phase that fails or times out is recorded in `errors`; what was found before it is still reported.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .. import __version__
from ..reports import models as rm
from ..workload import Call, Workload
from . import torch_internals as ti
from .attribution import ModuleIndex, describe_inputs, forward_arg_names, path_key
from .deadline import DeadlineExceeded, deadline
from .findings import break_record, compile_metric, group_break_sites, guard_set, is_skipped_frame
from .parsing import RawFrame, classify_guard, split_recompile_reasons
from .sources import function_name, innermost_own_frame

if TYPE_CHECKING:  # bisect, fix and bench build on this module; they are imported where they run
    from .bench import BenchOptions
    from .bisect import BisectOptions, InputRecorder
    from .fix import FixOptions

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AnalyzeOptions:
    """How to analyze. Defaults are the CLI defaults."""

    backend: str | None = None
    """torch.compile backend; None means `eager` (or `aot_eager` with train, so AOTAutograd runs)."""
    device: str | None = None
    """Move the model and input tensors here first (e.g. `cuda`); None keeps them where they are."""
    train: bool = False
    """Run forward and backward."""
    seed: int | None = 0
    """Seed torch before each phase so every phase sees the same random numbers."""
    explain: bool = True
    """Also run torch._dynamo.explain on the first call as a cross-check."""
    keep_guard_text: bool = False
    """Keep the full guard tree text per compile id (big)."""
    timeout_s: float | None = None
    """Give up after this many seconds (main thread only); the partial report is kept."""
    spec: str = "<workload>"
    """The TARGET as the user gave it, for the report."""
    command: str = ""
    """The command line, for the report."""
    compile: bool = True
    """Run explain and the real compile; False with `bisect` set is bisection only (`ctc-doctor bisect`)."""
    bisect: BisectOptions | None = None
    """Bisect the module tree after the analysis when it found graph breaks (or always, see BisectOptions)."""
    suggest: bool = True
    """Derive fix suggestions from the findings (cheap: no compile)."""
    fix: FixOptions | None = None
    """Apply the auto-applicable suggestions to a copy of the model and verify each (None: do not)."""
    probe_shapes: bool = False
    """Vary each input dimension to find the ones that recompile (`--probe-shapes`)."""
    bench: BenchOptions | None = None
    """Benchmark eager vs compiled vs fixed vs regional (None: do not)."""
    dynamo_config: dict[str, Any] = field(default_factory=dict, compare=False)
    """`torch._dynamo.config` options for explain and the compile (set by `fix` for a variant)."""
    output_sink: dict[str, list[Any]] | None = field(default=None, compare=False)
    """When set, the outputs of each call are appended under "eager" and "compiled" (used by `fix`)."""
    progress: ProgressFn | None = field(default=None, compare=False)
    """Called as progress(phase, done, total); total 0 means unknown."""

    def resolved_backend(self) -> str:
        return self.backend or ("aot_eager" if self.train else "eager")


# ---------------------------------------------------------------------------------------------
# running the workload
# ---------------------------------------------------------------------------------------------


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """`fn` applied to every tensor in a call's inputs (tuples, lists and dicts rebuilt); other values shared."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_tensors(v, fn) for v in value)
    if isinstance(value, list):
        return [map_tensors(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


def _to_device(value: Any, device: str | None) -> Any:
    if device is None:
        return value
    return map_tensors(value, lambda t: t.to(device))


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)
    elif hasattr(value, "to_tuple"):  # transformers ModelOutput
        yield from _tensors_in(value.to_tuple())


def loss_of(output: Any) -> torch.Tensor | None:
    """`output.loss`, else the sum of the output tensors that require grad; None when there are none."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    parts = [t.float().sum() for t in _tensors_in(output) if t.is_floating_point() and t.requires_grad]
    return torch.stack(parts).sum() if parts else None


def _default_loss(output: Any) -> torch.Tensor:
    loss = loss_of(output)
    if loss is None:
        raise RuntimeError("--train: the output has no tensor that requires grad; pass Workload(loss_fn=...)")
    return loss


@contextlib.contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Analysis and trials run the user's modules (backward included): put grads and buffers back afterwards."""
    # backward accumulates into .grad in place: keep copies, not references
    grads = {p: (p.grad.detach().clone() if p.grad is not None else None) for p in model.parameters()}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for p, g in grads.items():
                p.grad = g
            for name, b in model.named_buffers():
                if name in buffers and buffers[name].shape == b.shape:
                    b.copy_(buffers[name])


def _run_call(fn: Any, workload: Workload, call: Call, index: int, options: AnalyzeOptions, sink: str | None = None) -> Any:
    if workload.before_call is not None:
        workload.before_call(workload.model, index)
    if options.seed is not None:
        torch.manual_seed(options.seed + index)
    out = fn(*call.args, **dict(call.kwargs))
    if sink is not None and options.output_sink is not None:
        options.output_sink.setdefault(sink, []).append(detached(out))
    if options.train:
        loss = workload.loss_fn(out) if workload.loss_fn is not None else _default_loss(out)
        loss.backward()
    return out


def detached(out: Any) -> list[torch.Tensor]:
    """The output's tensors, detached copies, in a fixed order (for numerics checks)."""
    return [t.detach().clone() for t in _tensors_in(out)]


class _RecordingBackend:
    """Wraps the real backend to record every graph Dynamo hands it (public custom-backend API)."""

    def __init__(self, backend: str) -> None:
        self.name = backend
        self.inner = ti.lookup_backend(backend)
        self.graphs: list[tuple[str | None, Any]] = []

    def __repr__(self) -> str:  # torch names the backend in its errors
        return self.name

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        ops: dict[str, int] = defaultdict(int)
        nodes = inputs = 0
        for node in gm.graph.nodes:
            nodes += 1
            if node.op == "placeholder":
                inputs += 1
            elif node.op in ("call_function", "call_method", "call_module"):
                ops[_op_name(gm, node)] += 1
        self.graphs.append((ti.current_compile_id(), (dict(ops), nodes, inputs)))
        return self.inner(gm, example_inputs, **kwargs)


def _op_name(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    if node.op == "call_module":
        try:
            return type(gm.get_submodule(str(node.target))).__name__
        except AttributeError:
            return str(node.target)
    if node.op == "call_method":
        return f".{node.target}"
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch") and not module.startswith("torch._ops"):
        return f"torch.{name}" if "functional" not in module else f"F.{name}"
    return name


# ---------------------------------------------------------------------------------------------
# analyze
# ---------------------------------------------------------------------------------------------


@dataclass
class _State:
    errors: list[rm.ErrorRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    explain: ti.ExplainResult | None = None
    capture: ti.CaptureResult | None = None
    call_marks: list[tuple[int, int]] = field(default_factory=list)  # (events, graphs) at each call start
    backend: _RecordingBackend | None = None
    calls_done: int = 0


def _error(state: _State, phase: rm.Phase, exc: BaseException, message: str | None = None) -> None:
    text = message or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    state.errors.append(rm.ErrorRecord(phase=phase, type=type(exc).__name__, message=text[:500]))


def analyze(workload: Workload, options: AnalyzeOptions | None = None) -> rm.Report:
    """Analyze a workload and return the report. Resets torch._dynamo state (compiled caches)."""
    options = options or AnalyzeOptions()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    progress = options.progress or (lambda phase, done, total: None)
    backend = options.resolved_backend()
    state = _State()

    if options.device is not None and isinstance(workload.model, torch.nn.Module):
        workload.model.to(options.device)
    calls = [Call(_to_device(c.args, options.device), _to_device(dict(c.kwargs), options.device)) for c in workload.calls()]
    index = ModuleIndex(workload.model)
    recorder: InputRecorder | None = None
    if options.bisect is not None and index.modules:
        from .bisect import InputRecorder

        recorder = InputRecorder(workload.model)
    if not index.modules:
        state.notes.append("The target is not an nn.Module: breaks are reported by source line without module paths.")
        if options.bisect is not None:
            state.notes.append("Bisection needs an nn.Module: it did not run.")

    keep = preserved_state(workload.model) if index.modules else contextlib.nullcontext()
    try:
        with keep, deadline(options.timeout_s):
            # 1. eager: the model must work without compile; record call sites for attribution.
            progress("eager run", 0, len(calls))
            with index.record():
                for i, call in enumerate(calls):
                    try:
                        with recorder.record() if recorder is not None and i == 0 else contextlib.nullcontext():
                            _run_call(workload.model, workload, call, i, options, sink="eager")
                    except Exception as exc:
                        _error(state, "eager", exc, f"call {i} fails in eager mode: {type(exc).__name__}: {_first(exc)}")
                        raise _Stop() from exc
                    progress("eager run", i + 1, len(calls))

            if not options.compile:
                raise _Stop()

            # 2. explain on the first call, as a cross-check (it resets Dynamo itself).
            if options.explain:
                progress("explain", 0, 1)
                try:
                    if workload.before_call is not None:
                        workload.before_call(workload.model, 0)
                    if options.seed is not None:
                        torch.manual_seed(options.seed)
                    with ti.quiet_torch_stderr(True), ti.dynamo_config(options.dynamo_config):
                        state.explain = ti.run_explain(workload.model, calls[0].args, dict(calls[0].kwargs))
                    if state.explain is None:
                        state.notes.append(f"torch {ti.torch_version()} has no torch._dynamo.explain; cross-check skipped.")
                except Exception as exc:
                    _error(state, "explain", exc)
                progress("explain", 1, 1)

            # 3. the real compile, under capture.
            ti.fresh_dynamo_state()
            state.backend = _RecordingBackend(backend)
            compiled = torch.compile(workload.model, backend=state.backend)
            with ti.capture(backend=backend, keep_guard_text=options.keep_guard_text) as cap, ti.dynamo_config(options.dynamo_config):
                state.capture = cap
                for i, call in enumerate(calls):
                    progress("compile", i, len(calls))
                    state.call_marks.append((len(cap.events), len(state.backend.graphs)))
                    try:
                        _run_call(compiled, workload, call, i, options, sink="compiled")
                    except Exception as exc:
                        kind = "graph break escaped" if ti.is_unsupported(exc) else "torch.compile failed"
                        _error(state, "compile", exc, f"call {i}: {kind}: {type(exc).__name__}: {_first(exc)}")
                        break
                    state.calls_done = i + 1
                progress("compile", len(calls), len(calls))
            state.notes.extend(cap.notes)
    except _Stop:
        pass
    except DeadlineExceeded:
        phase = "compile" if state.capture is not None else ("explain" if options.explain else "eager")
        state.errors.append(
            rm.ErrorRecord(
                phase="timeout",
                type="AnalysisTimeout",
                message=f"analysis did not finish within {options.timeout_s:g} s (during {phase}); partial report",
            )
        )
    finally:
        with contextlib.suppress(Exception):
            ti.fresh_dynamo_state()  # leave no compiled code of ours behind

    progress("report", 0, 1)
    report = _build_report(workload, calls, index, options, state, started_at, t0)
    progress("report", 1, 1)
    if recorder is not None and options.bisect is not None and _should_bisect(report, options):
        _bisect_into(report, workload, recorder, index, options, t0)
    if options.compile and not any(e.phase in ("eager", "timeout") for e in report.errors):
        _after_analysis(report, workload, calls, options, t0)
    return report


def _remaining(options: AnalyzeOptions, t0: float) -> float | None:
    if not options.timeout_s:
        return None
    return max(0.0, options.timeout_s - (time.perf_counter() - t0))


def _after_analysis(report: rm.Report, workload: Workload, calls: list[Call], options: AnalyzeOptions, t0: float) -> None:
    """suggest -> fix -> probe -> bench, each recorded in the report; a failing phase becomes an error row."""
    if not (options.suggest or options.fix or options.probe_shapes or options.bench):
        return
    from . import fix as fixing
    from .suggest import suggest

    facts = fixing.model_facts(workload.model, calls[0]) if isinstance(workload.model, torch.nn.Module) else None
    phases: list[tuple[rm.Phase, Callable[[], None]]] = []
    if options.suggest:
        phases.append(("suggest", lambda: setattr(report, "suggestions", suggest(report, facts))))
    if options.fix is not None and facts is not None:
        phases.append(("fix", lambda: setattr(report, "fix", fixing.run_fix(report, workload, calls, facts, options))))
    if options.probe_shapes and facts is not None:
        from .probe import probe_shapes

        phases.append(("probe", lambda: setattr(report, "shape_probe", probe_shapes(workload, calls, facts, options))))
    if options.bench is not None and isinstance(workload.model, torch.nn.Module):
        from .bench import run_benchmark

        phases.append(("bench", lambda: setattr(report, "benchmark", run_benchmark(report, workload, calls, facts, options))))
    for phase, run in phases:
        budget = _remaining(options, t0)
        if budget is not None and budget <= 0:
            report.errors.append(rm.ErrorRecord(phase="timeout", type="AnalysisTimeout", message=f"no time left for {phase} (--timeout {options.timeout_s:g} s)"))
            break
        try:
            # the copies and timed passes run the model dozens of times: keep its prints off the terminal
            with deadline(budget), open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                run()
        except DeadlineExceeded:
            report.errors.append(
                rm.ErrorRecord(phase="timeout", type="AnalysisTimeout", message=f"{phase} did not finish within --timeout {options.timeout_s:g} s; partial report")
            )
            break
        except Exception as exc:  # noqa: BLE001 - the phases before it still stand
            report.errors.append(rm.ErrorRecord(phase=phase, type=type(exc).__name__, message=_first(exc)[:500]))
        finally:
            with contextlib.suppress(Exception):
                ti.fresh_dynamo_state()
    report.run.duration_s = round(time.perf_counter() - t0, 3)


def _should_bisect(report: rm.Report, options: AnalyzeOptions) -> bool:
    if any(e.phase in ("eager", "timeout") for e in report.errors):
        return False
    assert options.bisect is not None
    compile_failed = any(e.phase == "compile" for e in report.errors)
    return options.bisect.always or not options.compile or bool(report.graph_breaks) or compile_failed


def _bisect_into(
    report: rm.Report, workload: Workload, recorder: InputRecorder, index: ModuleIndex, options: AnalyzeOptions, t0: float
) -> None:
    """Run the bisection and put it (or its error) into the report; bisection-only runs get their verdict here."""
    from .bisect import BisectContext, run_bisect

    assert options.bisect is not None
    budget = None
    if options.timeout_s:
        budget = max(0.0, options.timeout_s - (time.perf_counter() - t0))
    ctx = BisectContext(
        recorder=recorder,
        index=index,
        backend=options.resolved_backend(),
        train=options.train,
        seed=options.seed,
        device=options.device,
        spec=options.spec,
        command=options.command,
    )
    try:
        report.bisect = run_bisect(ctx, options.bisect, options.progress, budget)
    except Exception as exc:  # noqa: BLE001 - the analysis part of the report still stands
        report.errors.append(rm.ErrorRecord(phase="bisect", type=type(exc).__name__, message=_first(exc)[:500]))
    if not options.compile:
        # inferred rows repeat a representative's result, so the representatives decide
        statuses = {t.status for t in report.bisect.trials} if report.bisect else {"crashed"}
        if "failed" in statuses:
            report.summary.verdict = "graph_breaks"
        else:
            report.summary.verdict = "failed" if statuses & {"timeout", "crashed"} else "clean"
        report.notes.insert(
            0,
            "Bisection only: the break, recompile and graph counts were not measured "
            "(run `ctc-doctor TARGET` for the full analysis).",
        )
    report.run.duration_s = round(time.perf_counter() - t0, 3)


class _Stop(Exception):
    """Internal: stop the run after a recorded fatal error."""


def _first(exc: BaseException) -> str:
    """One line for an exception, with its inner cause (torch wraps backend errors) and user frame."""
    frame = innermost_own_frame(exc)
    text = _one_line(exc)
    return f"{text} (at {frame})" if frame else text


def _one_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0][:300] if lines else type(exc).__name__
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    if inner is not None and inner is not exc:
        text = f"{text.rstrip(':')}: {type(inner).__name__}: {_one_line(inner)}"
    return text



# ---------------------------------------------------------------------------------------------
# building the report from captured events
# ---------------------------------------------------------------------------------------------


def _call_index_of(position: int, marks: list[int]) -> int | None:
    found = None
    for i, start in enumerate(marks):
        if position >= start:
            found = i
    return found


def _build_report(
    workload: Workload,
    calls: list[Call],
    index: ModuleIndex,
    options: AnalyzeOptions,
    state: _State,
    started_at: str,
    t0: float,
) -> rm.Report:
    cap = state.capture or ti.CaptureResult()
    event_marks = [m[0] for m in state.call_marks]
    graph_marks = [m[1] for m in state.call_marks]

    starts: dict[str, list[RawFrame]] = {}
    metrics: dict[str, dict[str, Any]] = {}
    call_of_compile: dict[str, int | None] = {}
    for pos, ev in enumerate(cap.events):
        if ev.compile_id is not None and ev.compile_id not in call_of_compile:
            call_of_compile[ev.compile_id] = _call_index_of(pos, event_marks)
        if ev.kind == "dynamo_start" and ev.compile_id:
            stack = ev.data.get("stack") or []
            starts[ev.compile_id] = [
                (cap.resolve_file(f.get("filename")), int(f.get("line") or 0), str(f.get("name")), f.get("loc"))
                for f in stack
            ]
        elif ev.kind == "compilation_metrics" and ev.compile_id:
            metrics[ev.compile_id] = ev.data

    graphs = []
    ops_by_compile: dict[str, int] = defaultdict(int)
    backend_graphs = state.backend.graphs if state.backend else []
    for pos, (cid, (ops, nodes, inputs)) in enumerate(backend_graphs):
        op_count = sum(ops.values())
        if cid:
            ops_by_compile[cid] += op_count
        graphs.append(
            rm.Graph(
                compile_id=cid or "?",
                call_index=_call_index_of(pos, graph_marks),
                op_count=op_count,
                node_count=nodes,
                input_count=inputs,
                ops=ops,
            )
        )

    records = []
    for ev in cap.events:
        if ev.kind == "dynamo_graph_break_reason" and ev.payload:
            outer = starts.get(ev.compile_id or "")
            rec = break_record(ev.payload, ev.compile_id, outer=outer, exc_gb_type=ev.exc_gb_type, exc_stack=ev.exc_stack)
            if rec is not None:
                records.append(rec)
    sites = group_break_sites(
        records,
        skipped_compiles={cid for cid, m in metrics.items() if is_skipped_frame(m)},
        ops_by_compile=ops_by_compile,
        attribute=index.attribute,
        class_name=index.class_name,
        path_order=path_key,
    )
    recompiles = _recompiles(cap, starts, metrics, index, call_of_compile)

    compile_metrics = [compile_metric(cid, m) for cid, m in metrics.items()]
    guards = [guard_set(ev.compile_id or "?", ev.payload) for ev in cap.events if ev.kind == "dynamo_cpp_guards_str"]
    perf_hints = [rm.PerfHint(message=h.message, compile_id=h.compile_id, logger=h.logger) for h in cap.perf_hints]

    failed = any(e.phase in ("eager", "compile", "timeout") for e in state.errors)
    break_events = sum(s.occurrences for s in sites)
    skipped = sum(1 for m in metrics.values() if is_skipped_frame(m))
    summary = rm.Summary(
        graph_count=sum(1 for g in graphs if g.call_index == 0),
        graphs_compiled=len(graphs),
        graph_break_count=break_events,
        unique_break_sites=len(sites),
        recompile_count=len(recompiles),
        frames_skipped=skipped,
        analysis_run=options.compile,
        compile_time_s=round(sum(m.duration_s or 0.0 for m in compile_metrics), 4),
        verdict=rm.compute_verdict(len(sites), len(recompiles), failed),
    )

    explain = None
    if state.explain is not None:
        seen = {(f, ln) for _, stack in state.explain.break_reasons for f, ln, _ in stack[-1:]}
        first_call_sites = [s for s in sites if any(call_of_compile.get(c) == 0 for c in s.compile_ids)]
        missed = [s for s in first_call_sites if (s.user_frame.file, s.user_frame.line) not in seen]
        explain = rm.ExplainCheck(
            graph_count=state.explain.graph_count,
            graph_break_count=state.explain.graph_break_count,
            break_reasons=len(state.explain.break_reasons),
            op_count=state.explain.op_count,
            missed_sites=len(missed),
        )
        if missed:
            state.notes.append(
                f"torch._dynamo.explain did not list {len(missed)} of the {len(first_call_sites)} break site(s) "
                f"of the first call ({', '.join(s.id for s in missed)})."
            )
    if ti.graph_break_registry() is None:
        state.notes.append(f"torch {ti.torch_version()} ships no graph-break registry: GB ids are unavailable.")

    model = workload.model
    is_module = isinstance(model, torch.nn.Module)
    arg_names = forward_arg_names(model)
    return rm.Report(
        target=rm.Target(
            spec=options.spec,
            name=workload.name or type(model).__name__,
            model_class=type(model).__name__,
            parameters=sum(p.numel() for p in model.parameters()) if is_module else 0,
            modules=len(index.modules),
            calls=len(calls),
            train=options.train,
            inputs=[describe_inputs(c.args, dict(c.kwargs), arg_names) for c in calls],
        ),
        environment=_environment(options),
        run=rm.RunInfo(
            command=options.command,
            started_at=started_at,
            duration_s=round(time.perf_counter() - t0, 3),
            tool_version=__version__,
            seed=options.seed,
        ),
        summary=summary,
        graph_breaks=sites,
        recompiles=recompiles,
        graphs=graphs,
        perf_hints=perf_hints,
        compile_metrics=compile_metrics,
        guards=guards,
        explain=explain,
        notes=state.notes,
        errors=state.errors,
    )


def _environment(options: AnalyzeOptions) -> rm.Environment:
    try:
        tf_version: str | None = importlib.metadata.version("transformers")  # no import: it is slow
    except importlib.metadata.PackageNotFoundError:
        tf_version = None
    return rm.Environment(
        python=platform.python_version(),
        torch=ti.torch_version(),
        transformers=tf_version,
        platform=f"{platform.system()}-{platform.machine()}",
        device=options.device or "cpu",
        backend=options.resolved_backend(),
    )


def _recompiles(
    cap: ti.CaptureResult,
    starts: dict[str, list[RawFrame]],
    metrics: dict[str, dict[str, Any]],
    index: ModuleIndex,
    call_of_compile: dict[str, int | None],
) -> list[rm.Recompile]:
    out = []
    for ev in cap.events:
        if ev.kind != "recompile_reasons" or not ev.compile_id:
            continue
        m = metrics.get(ev.compile_id, {})
        stack = starts.get(ev.compile_id, [])
        file = m.get("co_filename") or (stack[-1][0] if stack else "?")
        line = int(m.get("co_firstlineno") or (stack[-1][1] if stack else 0))
        function = function_name(str(m.get("co_name") or (stack[-1][2] if stack else "?")))
        paths = index.attribute([(f[0], f[1]) for f in stack[:-1]] + [(file, line)])
        guards = [rm.FailedGuard(**classify_guard(r)) for r in split_recompile_reasons(ev.payload or "")]
        out.append(
            rm.Recompile(
                id=f"R{len(out) + 1}",
                function=function,
                file=file,
                line=line,
                compile_id=ev.compile_id,
                module_paths=paths,
                module_class=index.class_name(paths),
                call_index=call_of_compile.get(ev.compile_id),
                failed_guards=guards,
            )
        )
    return out
