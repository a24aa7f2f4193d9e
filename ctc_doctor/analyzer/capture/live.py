"""The live capture core: run a workload's calls compiled and eagerly, and turn what torch reported
into findings (break sites, recompiles, graphs, compile metrics, guards, perf hints and counts).

The analysis phase runs it on the user's model; `fix` re-checks each variant through it, so a fixed
copy is measured exactly as the original was. The compiled run comes first, on the model as the
builder returned it: a user's first compiled call meets lazy set-up (hooks installed once, caches
created on first use), and so does the capture. The eager pass that follows records module call sites
and, for the break lines of the first call, whether they run again on the now warm model: the ones
that do not are breaks of a fresh model's first call only.

Every graph Dynamo hands the backend is recorded by a wrapper around the real backend (the public
custom-backend API), with the compile reason Dynamo attached to it: explain's view of the run at no
extra trace. Breaks, recompiles, metrics and guards come from the structured trace under
`torch_internals.capture`.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ...workload import Call, Workload
from .. import torch_internals as ti
from ..readers.compile_time import hit_the_limit, stack_path
from ..readers.findings import break_record, compile_metric, group_break_sites, guard_set, is_skipped_frame
from ..readers.parsing import classify_guard, split_recompile_reasons
from ..readers.sources import RawFrame, function_name, is_dynamo_file
from ..readers.text import describe_error
from ..readers.wrappers import ddp_splits
from ..resources.preflight import measuring, record_outputs
from ..running.calls import Sample, Sink, clear_grads, grad_mode, lines_run, run_call
from ..running.copying import replayable
from ..running.modules import path_key
from ..running.settings import ProgressFn, RunSettings, no_progress
from .attribution import ModuleIndex
from .inputs import ModuleInputs

# ---------------------------------------------------------------------------------------------
# the compiled run under capture
# ---------------------------------------------------------------------------------------------


@dataclass
class RecordedGraph:
    """One graph Dynamo handed the backend."""

    compile_id: str | None
    ops: dict[str, int]
    """Calls by op name (functions, methods, modules)."""
    nodes: int
    inputs: int
    call_functions: int
    """call_function nodes: what explain counts as ops."""
    op_count: int
    """Calls in the graph (functions, methods, modules)."""
    explained: bool
    """Dynamo attached its compile reason (explain reads the same attribute)."""
    break_reason: tuple[str, list[tuple[str, int, str]]] | None
    """(reason, user stack outermost first) when the graph ended at a graph break."""
    module_ops: dict[str, int] = field(default_factory=dict)
    """Ops per innermost module of their `nn_module_stack`, relative to the frame's `self`."""


class RecordingBackend:
    """Wraps the real backend to record every graph Dynamo hands it (public custom-backend API)."""

    def __init__(self, backend: str) -> None:
        self.name = backend
        self.inner = ti.lookup_backend(backend)
        self.graphs: list[RecordedGraph] = []
        """In compile order."""

    def __repr__(self) -> str:  # torch names the backend in its errors
        return self.name

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        ops: dict[str, int] = defaultdict(int)
        modules: dict[str, int] = defaultdict(int)
        nodes = inputs = functions = 0
        for node in gm.graph.nodes:
            nodes += 1
            if node.op == "placeholder":
                inputs += 1
            elif node.op in ("call_function", "call_method", "call_module"):
                ops[_op_name(gm, node)] += 1
                functions += node.op == "call_function"
                stack = node.meta.get("nn_module_stack") or {}
                innermost = next(reversed(stack.values()), None) if isinstance(stack, dict) else None
                modules[stack_path(innermost[0] if isinstance(innermost, tuple) and innermost else "")] += 1
        explained, reason = ti.graph_compile_reason(gm)
        self.graphs.append(
            RecordedGraph(ti.current_compile_id(), dict(ops), nodes, inputs, functions, sum(ops.values()), explained, reason, dict(modules))
        )
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


class CompiledRun:
    """The workload's calls through `torch.compile` under capture; filled as it goes, so a run cut
    short (an error, the deadline) still holds what happened before."""

    def __init__(
        self,
        workload: Workload,
        calls: list[Call],
        settings: RunSettings,
        *,
        dynamo_config: dict[str, Any] | None = None,
        keep_guard_text: bool = False,
        collect: bool = False,
        sink: Sink | None = None,
        count_frames: bool = False,
        compile_only: list[str] | None = None,
        compile_options: dict[str, Any] | None = None,
    ) -> None:
        self.workload = workload
        self.compile_only = compile_only or []
        """Submodules compiled in place instead of the whole model (the rest runs eagerly): a fix check's
        `compile_only` copy."""
        self.compile_options = compile_options or {}
        """torch.compile keyword arguments beyond the backend (a fix check's `dynamic=True`)."""
        self.calls = calls
        self.settings = settings
        self.dynamo_config = dynamo_config or {}
        self.keep_guard_text = keep_guard_text
        self.sample = Sample()
        """With `collect`: each call's outputs (and, training, losses and the run's gradients)."""
        self.sink: Sink | None = sink if sink is not None else (self.sample if collect else None)
        """Where each call's results go: `sample` (collect), a judgement, or nowhere."""
        self.capture: ti.CaptureResult | None = None
        self.backend: RecordingBackend | None = None
        self.call_marks: list[int] = []
        """Events captured when each call started."""
        self.error: rm.ErrorRecord | None = None
        self.count_frames = count_frames
        self.served: list[ti.ServedEntry] = []
        """With `count_frames`: each function's frames entered during each call, served by a compiled
        version or run eagerly."""

    def run(self, progress: ProgressFn = no_progress) -> CompiledRun:
        """Fresh Dynamo state, then every call through `torch.compile(model, backend=recording)`.

        Raises ConfigOptionMissing (before compiling) when a `dynamo_config` option does not exist in this torch.
        """
        ti.fresh_dynamo_state()
        self.backend = RecordingBackend(self.settings.backend)
        model, backend, options = self.workload.model, self.backend, self.compile_options
        in_place: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self.compile_only:  # the submodules compiled in place, the model's own code eager around them
            modules = [model.get_submodule(p) for p in self.compile_only]
            in_place = ti.compiled_in_place(modules, lambda fn: torch.compile(fn, backend=backend, **options))
            compiled = model
        else:
            compiled = torch.compile(model, backend=backend, **options)
        with (
            in_place,
            ti.capture(backend=self.settings.backend, keep_guard_text=self.keep_guard_text) as cap,
            ti.dynamo_config(self.dynamo_config),
            grad_mode(self.settings),
            ti.counting_frames() if self.count_frames else contextlib.nullcontext() as frames,
        ):
            self.capture = cap
            if self.sink is not None and self.settings.train:
                clear_grads(self.workload.model)
            for i, call in enumerate(replayable(self.calls)):
                progress(ProgressEvent(Step.COMPILE, i, len(self.calls)))
                self.call_marks.append(len(cap.events))
                try:
                    with frames.call(i) if frames is not None else contextlib.nullcontext():
                        run_call(
                            compiled, self.workload, call, i, seed=self.settings.seed, train=self.settings.train,
                            sample=self.sink,
                        )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - a compile failure is a finding: the calls before it stand
                    kind = "graph break escaped" if ti.is_unsupported(exc) else "torch.compile failed"
                    message = f"call {i}: {kind}: {type(exc).__name__}: {describe_error(exc)}"
                    self.error = rm.ErrorRecord(phase="compile", type=type(exc).__name__, message=message[:500])
                    break
            if self.sink is not None and self.settings.train:
                self.sink.take_grads(self.workload.model)
            progress(ProgressEvent(Step.COMPILE, len(self.calls), len(self.calls)))
            self.served = ti.served_entries(frames)  # before a reset clears which code is a compiled version
        return self

    @property
    def graphs(self) -> list[RecordedGraph]:
        return self.backend.graphs if self.backend is not None else []


@dataclass
class ScriptRun:
    """A script's own compiled calls under capture (`ctc-doctor run`): the backend is the script's, so
    graphs come from the compile metrics (counts, no ops by name) and nothing is explained."""

    capture: ti.CaptureResult
    call_marks: list[int] = field(default_factory=list)
    """Events captured when each call of the analyzed compiled object started."""
    served: list[ti.ServedEntry] = field(default_factory=list)
    """Each function's frames entered during each call of the analyzed object: compiled or eagerly."""

    @property
    def graphs(self) -> list[RecordedGraph]:
        out = []
        for ev in self.capture.events:
            m = ev.data
            # a frame whose compile broke before any op and restarted, handing no graph to the backend (no
            # backend time), compiled no graph: the build() path's recording backend never sees one
            no_graph = (
                m.get("graph_op_count") == 0
                and "backend_compile_time_s" in m
                and m["backend_compile_time_s"] is None
                and bool(m.get("restart_reasons"))
            )
            if ev.kind == "compilation_metrics" and isinstance(m.get("graph_op_count"), int) and not m.get("fail_type") and not no_graph:
                ops = int(m["graph_op_count"])
                nodes, inputs = int(m.get("graph_node_count") or 0), int(m.get("graph_input_count") or 0)
                out.append(RecordedGraph(ev.compile_id, {}, nodes, inputs, ops, ops, False, None))
        return out


def _call_index_of(position: int, marks: list[int]) -> int | None:
    found = None
    for i, start in enumerate(marks):
        if position >= start:
            found = i
    return found


def first_call_break_lines(run: CompiledRun | ScriptRun) -> dict[str, set[int]]:
    """file -> lines of the breaks of the first call: the lines the eager pass watches."""
    if run.capture is None or len(run.call_marks) < 1:
        return {}
    end = run.call_marks[1] if len(run.call_marks) > 1 else len(run.capture.events)
    lines: dict[str, set[int]] = defaultdict(set)
    for ev in run.capture.events[:end]:
        if ev.kind == "dynamo_graph_break_reason" and ev.payload:
            rec = break_record(ev.payload, ev.compile_id, exc_stack=ev.exc_stack)
            if rec is not None and not is_dynamo_file(rec.stack[-1][0]):
                lines[rec.stack[-1][0]].add(rec.stack[-1][1])
    return dict(lines)


def explain_view(run: CompiledRun) -> ti.ExplainResult | None:
    """What `torch._dynamo.explain` would report for the first call, from the graphs of this run's
    first call; None when Dynamo attached no compile reason to them (explain needs the same)."""
    if run.capture is None or not run.call_marks:
        return None
    calls = _calls_of_compiles(run.capture.events, run.call_marks)
    first = [g for g in run.graphs if calls.get(g.compile_id or "") == 0]
    if not all(g.explained for g in first):
        return None
    return ti.ExplainResult(
        graph_count=len(first),
        graph_break_count=len(first) - 1,  # explain's definition
        break_reasons=[g.break_reason for g in first if g.break_reason is not None],
        op_count=sum(g.call_functions for g in first),
    )


# ---------------------------------------------------------------------------------------------
# the eager pass
# ---------------------------------------------------------------------------------------------


@dataclass
class EagerRun:
    """What the eager pass saw: what the calls produced (when collected), the first failure, and
    the lines of the watched files that ran during the first call (`running.calls.lines_run`: a watched
    break line is looked up in them)."""

    sample: Sample = field(default_factory=Sample)
    error: rm.ErrorRecord | None = None
    lines_run: set[tuple[str, int]] = field(default_factory=set)
    footprint: rm.Footprint | None = None
    """With `measure`: the model's size and the pass's activations (`resources.preflight`)."""


def eager_pass(
    workload: Workload,
    calls: list[Call],
    settings: RunSettings,
    *,
    index: ModuleIndex | None = None,
    inputs: ModuleInputs | None = None,
    watch: dict[str, set[int]] | None = None,
    collect: bool = False,
    sink: Sink | None = None,
    measure: bool = False,
    progress: ProgressFn = no_progress,
) -> EagerRun:
    """Every call without compile (the model must work eagerly). Records module call sites into
    `index` for attribution and, during the first call, module inputs into `inputs` and which of the
    `watch` lines (file -> lines) run; with `measure`, the pass's footprint (`resources.preflight`)."""
    run = EagerRun()
    target: Sink | None = sink if sink is not None else (run.sample if collect else None)
    progress(ProgressEvent(Step.EAGER, 0, len(calls)))
    if target is not None and settings.train:
        clear_grads(workload.model)
    with contextlib.ExitStack() as scope:
        if index is not None:
            scope.enter_context(index.record())
        if measure:
            run.footprint = scope.enter_context(measuring(workload.model, settings.where, settings.train))
        scope.enter_context(grad_mode(settings))
        _eager_calls(workload, calls, settings, run, target, inputs, watch, progress)
    if target is not None and settings.train and run.error is None:
        target.take_grads(workload.model)
    return run


def _eager_calls(
    workload: Workload,
    calls: list[Call],
    settings: RunSettings,
    run: EagerRun,
    target: Sink | None,
    inputs: ModuleInputs | None,
    watch: dict[str, set[int]] | None,
    progress: ProgressFn,
) -> None:
    for i, call in enumerate(replayable(calls)):
        try:
            with contextlib.ExitStack() as first:
                if i == 0 and inputs is not None:
                    first.enter_context(inputs.record())
                if i == 0 and watch:
                    run.lines_run = first.enter_context(lines_run(set(watch)))
                out = run_call(workload.model, workload, call, i, seed=settings.seed, train=settings.train, sample=target)
            if run.footprint is not None:
                record_outputs(run.footprint, out)
            del out
        except Exception as exc:  # noqa: BLE001 - the model's own error, reported as the eager failure
            message = f"call {i} fails in eager mode: {type(exc).__name__}: {describe_error(exc)}"
            run.error = rm.ErrorRecord(phase="eager", type=type(exc).__name__, message=message[:500])
            return
        progress(ProgressEvent(Step.EAGER, i + 1, len(calls)))


# ---------------------------------------------------------------------------------------------
# findings from the captured events
# ---------------------------------------------------------------------------------------------


@dataclass
class Findings:
    """What one compiled run found, as report entries."""

    graph_breaks: list[rm.GraphBreakSite]
    recompiles: list[rm.Recompile]
    graphs: list[rm.Graph]
    compile_metrics: list[rm.CompileMetric]
    guards: list[rm.GuardSet]
    perf_hints: list[rm.PerfHint]
    ddp_splits: list[rm.DdpSplit]
    call_of_compile: dict[str, int | None]
    """Compile id -> the call during which it compiled."""
    frames_skipped: int
    frame_calls: list[rm.FrameCalls] = field(default_factory=list)

    def sections(self) -> dict[str, Any]:
        """The report's sections of findings, as `rm.Report` keyword arguments."""
        return {
            "frame_calls": self.frame_calls,
            "graph_breaks": self.graph_breaks,
            "recompiles": self.recompiles,
            "graphs": self.graphs,
            "perf_hints": self.perf_hints,
            "ddp_splits": self.ddp_splits,
            "compile_metrics": self.compile_metrics,
            "guards": self.guards,
        }

    def summary(self, *, failed: bool, analysis_run: bool = True) -> rm.Summary:
        """The headline counts and verdict (`failed`: the eager pass, compile or deadline failed);
        `graph_count` is the first call's graphs."""
        return rm.summarize(
            graph_breaks=self.graph_breaks,
            recompiles=self.recompiles,
            graphs=self.graphs,
            compile_metrics=self.compile_metrics,
            graph_count=sum(1 for g in self.graphs if g.call_index == 0),
            frames_skipped=self.frames_skipped,
            failed=failed,
            analysis_run=analysis_run,
        )


def _calls_of_compiles(events: list[ti.TraceEvent], marks: list[int]) -> dict[str, int | None]:
    """Compile id -> the call during which it compiled (its first event's position among the marks)."""
    out: dict[str, int | None] = {}
    for pos, ev in enumerate(events):
        if ev.compile_id is not None and ev.compile_id not in out:
            out[ev.compile_id] = _call_index_of(pos, marks)
    return out


def findings_of(
    run: CompiledRun | ScriptRun | None, index: ModuleIndex | None = None, lines_run: set[tuple[str, int]] | None = None
) -> Findings:
    """Deduplicated, ranked, module-attributed findings of a compiled run (empty when it never ran).

    With `lines_run` (the watched break lines that ran again when the warm model repeated the first
    call), the first call's sites are marked `first_call_only` when their line did not.
    """
    cap = run.capture if run is not None and run.capture is not None else ti.CaptureResult()
    call_of_compile = _calls_of_compiles(cap.events, run.call_marks if run is not None else [])
    starts: dict[str, list[RawFrame]] = {}
    metrics: dict[str, dict[str, Any]] = {}
    backward: dict[str, dict[str, Any]] = {}
    for ev in cap.events:
        if ev.kind == "dynamo_start" and ev.compile_id:
            stack = ev.data.get("stack") or []
            starts[ev.compile_id] = [
                (cap.resolve_file(f.get("filename")), int(f.get("line") or 0), str(f.get("name")), f.get("loc")) for f in stack
            ]
        elif ev.kind == "compilation_metrics" and ev.compile_id:
            metrics[ev.compile_id] = ev.data
        elif ev.kind == "bwd_compilation_metrics" and ev.compile_id:
            backward[ev.compile_id] = ev.data

    graphs = []
    ops_by_compile: dict[str, int] = defaultdict(int)
    for g in run.graphs if run is not None else []:
        if g.compile_id:
            ops_by_compile[g.compile_id] += g.op_count
        graphs.append(
            rm.Graph(
                compile_id=g.compile_id or "?",
                call_index=call_of_compile.get(g.compile_id or ""),
                op_count=g.op_count,
                node_count=g.nodes,
                input_count=g.inputs,
                ops=g.ops,
                module_ops=g.module_ops,
            )
        )

    records = []
    for ev in cap.events:
        if ev.kind == "dynamo_graph_break_reason" and ev.payload:
            outer = starts.get(ev.compile_id or "")
            rec = break_record(ev.payload, ev.compile_id, outer=outer, exc_gb_type=ev.exc_gb_type, exc_stack=ev.exc_stack)
            if rec is not None:
                records.append(rec)
    attribute = index.attribute if index is not None else None
    class_name = index.class_name if index is not None else None
    sites = group_break_sites(
        records,
        skipped_compiles={cid for cid, m in metrics.items() if is_skipped_frame(m)},
        ops_by_compile=ops_by_compile,
        attribute=attribute,
        class_name=class_name,
        path_order=path_key,
    )
    if lines_run is not None:
        for site in sites:
            calls = {call_of_compile.get(c) for c in site.compile_ids}
            # Dynamo's polyfills stand in for builtins Dynamo traces, and eager never runs them: unchecked
            if 0 not in calls or is_dynamo_file(site.user_frame.file):
                continue
            # a break that a later call's compile hit again is not the first call's alone
            site.first_call_only = calls == {0} and (site.user_frame.file, site.user_frame.line) not in lines_run
    return Findings(
        graph_breaks=sites,
        recompiles=_recompiles(cap, starts, metrics, index, call_of_compile),
        graphs=graphs,
        compile_metrics=[
            _with_paths(compile_metric(cid, m, backward.get(cid)), starts.get(cid, []), index, call_of_compile.get(cid))
            for cid, m in metrics.items()
        ],
        guards=[guard_set(ev.compile_id or "?", ev.payload) for ev in cap.events if ev.kind == "dynamo_cpp_guards_str"],
        perf_hints=[rm.PerfHint(message=h.message, compile_id=h.compile_id, logger=h.logger) for h in cap.perf_hints],
        ddp_splits=ddp_splits(
            [(ev.compile_id, str(ev.data.get("name"))) for ev in cap.events if ev.kind == "optimize_ddp_split_child"], cap.ddp_buckets
        ),
        call_of_compile=call_of_compile,
        frames_skipped=sum(1 for m in metrics.values() if is_skipped_frame(m)),
        frame_calls=frame_calls(run.served if run is not None else [], metrics, starts, index),
    )


def frame_calls(
    served: list[ti.ServedEntry], metrics: dict[str, dict[str, Any]], starts: dict[str, list[RawFrame]], index: ModuleIndex | None
) -> list[rm.FrameCalls]:
    """Each frame Dynamo compiled (its function, from its compiles' metrics), with the entries a compiled
    version served and those that ran its own code, per call; why it ran eagerly: the recompile limit, a
    skipped frame (a compile that gave up: fully eager), or a compile that fell back."""
    frames: dict[str, dict[str, Any]] = {}
    for cid, m in metrics.items():
        frame = cid.rpartition("/")[0]
        known = frames.setdefault(frame, {"compile_ids": []})
        known["compile_ids"].append(cid)
        if m.get("co_name") and "code" not in known:
            known["code"] = (str(m.get("co_filename")), int(m.get("co_firstlineno") or 0), str(m.get("co_name")))
    by_code: dict[tuple[str, int, str], dict[int, list[int]]] = {}
    for entry in served:
        calls = by_code.setdefault((entry.file, entry.line, entry.function), {})
        counts = calls.setdefault(entry.call, [0, 0])
        counts[0 if entry.compiled else 1] += entry.count
    out = []
    for frame, known in frames.items():
        code = known.get("code")
        if code is None or code not in by_code:
            continue
        calls = by_code.pop(code)  # a function shared by two frames (resumed twice) counts once
        rows = [[call, c, e] for call, (c, e) in sorted(calls.items())]
        eager = [row for row in rows if row[2]]
        why = None
        if eager:
            limit = next((cid for cid in known["compile_ids"] if hit_the_limit(compile_metric(cid, metrics[cid]))), None)
            skipped = next((cid for cid in known["compile_ids"] if is_skipped_frame(metrics[cid]) and cid != limit), None)
            if limit is not None:
                why = f"the recompile limit (compile {limit})"
            elif skipped is not None:
                gave_up = metrics[skipped].get("fail_reason") or metrics[skipped].get("fail_type") or "its compile gave up"
                why = f"skipped ({str(gave_up).strip().splitlines()[0][:120]})"
            else:
                why = "a compile that fell back"
        stack = starts.get(known["compile_ids"][0], [])
        paths = index.attribute([(f[0], f[1]) for f in stack[:-1]] + [(code[0], code[1])]) if index is not None else []
        out.append(
            rm.FrameCalls(
                function=function_name(code[2]),
                file=code[0],
                line=code[1],
                frame=frame,
                module_paths=paths,
                compiled=sum(row[1] for row in rows),
                eager=sum(row[2] for row in rows),
                first_eager_call=eager[0][0] if eager else None,
                by_call=rows,
                why_eager=why,
            )
        )
    return out


def _with_paths(metric: rm.CompileMetric, stack: list[RawFrame], index: ModuleIndex | None, call: int | None) -> rm.CompileMetric:
    """The compiled frame's module paths, from the stack Dynamo started it in, and the call it happened in."""
    metric.call_index = call
    if index is not None and metric.file and metric.line:
        metric.module_paths = index.attribute([(f[0], f[1]) for f in stack[:-1]] + [(metric.file, metric.line)])
    return metric


def _recompiles(
    cap: ti.CaptureResult,
    starts: dict[str, list[RawFrame]],
    metrics: dict[str, dict[str, Any]],
    index: ModuleIndex | None,
    call_of_compile: dict[str, int | None],
) -> list[rm.Recompile]:
    out: list[rm.Recompile] = []
    for ev in cap.events:
        if ev.kind != "recompile_reasons" or not ev.compile_id:
            continue
        m = metrics.get(ev.compile_id, {})
        if not m.get("co_name"):  # a compile that failed at once (the recompile limit): its frame's earlier compile says which code
            frame = ev.compile_id.rpartition("/")[0]
            earlier = next((v for k, v in metrics.items() if k.rpartition("/")[0] == frame and v.get("co_name")), {})
            m = {**m, **{k: earlier[k] for k in ("co_name", "co_filename", "co_firstlineno") if k in earlier}}
        stack = starts.get(ev.compile_id, [])
        file = m.get("co_filename") or (stack[-1][0] if stack else "?")
        line = int(m.get("co_firstlineno") or (stack[-1][1] if stack else 0))
        function = function_name(str(m.get("co_name") or (stack[-1][2] if stack else "?")))
        paths = index.attribute([(f[0], f[1]) for f in stack[:-1]] + [(file, line)]) if index is not None else []
        guards = [rm.FailedGuard(**classify_guard(r)) for r in split_recompile_reasons(ev.payload or "")]
        out.append(
            rm.Recompile(
                id=f"R{len(out) + 1}",
                function=function,
                file=file,
                line=line,
                compile_id=ev.compile_id,
                module_paths=paths,
                module_class=index.class_name(paths) if index is not None else None,
                call_index=call_of_compile.get(ev.compile_id),
                failed_guards=guards,
            )
        )
    return out
