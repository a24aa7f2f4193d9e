"""The live capture core: run a workload's calls eagerly and compiled, and turn what torch reported
into findings (break sites, recompiles, graphs, compile metrics, guards, perf hints and counts).

The analysis phase runs it on the user's model; `fix` re-checks each variant through it, so a fixed
copy is measured exactly as the original was. Every graph Dynamo hands the backend is recorded by a
wrapper around the real backend (the public custom-backend API); breaks, recompiles, metrics and
guards come from the structured trace under `torch_internals.capture`.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports import models as rm
from ...workload import Call, Workload
from ..common import torch_internals as ti
from ..common.calls import run_call
from ..common.modules import path_key
from ..common.settings import ProgressFn, RunSettings, no_progress
from ..common.sources import RawFrame, function_name
from ..common.tensors import detached
from ..common.text import describe_error
from .attribution import ModuleIndex
from .findings import break_record, compile_metric, group_break_sites, guard_set, is_skipped_frame
from .inputs import ModuleInputs
from .parsing import classify_guard, split_recompile_reasons

# ---------------------------------------------------------------------------------------------
# the eager pass
# ---------------------------------------------------------------------------------------------


@dataclass
class EagerRun:
    """What the eager pass saw: each call's detached outputs (when collected) and the first failure."""

    outputs: list[list[torch.Tensor]] = field(default_factory=list)
    error: rm.ErrorRecord | None = None


def eager_pass(
    workload: Workload,
    calls: list[Call],
    settings: RunSettings,
    *,
    index: ModuleIndex | None = None,
    inputs: ModuleInputs | None = None,
    collect: bool = False,
    progress: ProgressFn = no_progress,
) -> EagerRun:
    """Every call without compile (the model must work eagerly). Records module call sites into
    `index` for attribution and, during the first call, module inputs into `inputs`."""
    run = EagerRun()
    progress("eager run", 0, len(calls))
    with index.record() if index is not None else contextlib.nullcontext():
        for i, call in enumerate(calls):
            try:
                with inputs.record() if inputs is not None and i == 0 else contextlib.nullcontext():
                    out = run_call(workload.model, workload, call, i, seed=settings.seed, train=settings.train)
            except Exception as exc:  # noqa: BLE001 - the model's own error, reported as the eager failure
                message = f"call {i} fails in eager mode: {type(exc).__name__}: {describe_error(exc)}"
                run.error = rm.ErrorRecord(phase="eager", type=type(exc).__name__, message=message[:500])
                return run
            if collect:
                run.outputs.append(detached(out))
            progress("eager run", i + 1, len(calls))
    return run


# ---------------------------------------------------------------------------------------------
# the compiled pass under capture
# ---------------------------------------------------------------------------------------------


class RecordingBackend:
    """Wraps the real backend to record every graph Dynamo hands it (public custom-backend API)."""

    def __init__(self, backend: str) -> None:
        self.name = backend
        self.inner = ti.lookup_backend(backend)
        self.graphs: list[tuple[str | None, tuple[dict[str, int], int, int]]] = []
        """(compile id, (ops by name, nodes, placeholders)) per graph, in compile order."""

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
    ) -> None:
        self.workload = workload
        self.calls = calls
        self.settings = settings
        self.dynamo_config = dynamo_config or {}
        self.keep_guard_text = keep_guard_text
        self.collect = collect
        self.capture: ti.CaptureResult | None = None
        self.backend: RecordingBackend | None = None
        self.call_marks: list[tuple[int, int]] = []
        """(events, graphs) recorded when each call started."""
        self.outputs: list[list[torch.Tensor]] = []
        self.error: rm.ErrorRecord | None = None

    def run(self, progress: ProgressFn = no_progress) -> CompiledRun:
        """Fresh Dynamo state, then every call through `torch.compile(model, backend=recording)`.

        Raises ValueError (before compiling) when a `dynamo_config` option does not exist in this torch.
        """
        ti.fresh_dynamo_state()
        self.backend = RecordingBackend(self.settings.backend)
        compiled = torch.compile(self.workload.model, backend=self.backend)
        with ti.capture(backend=self.settings.backend, keep_guard_text=self.keep_guard_text) as cap, ti.dynamo_config(self.dynamo_config):
            self.capture = cap
            for i, call in enumerate(self.calls):
                progress("compile", i, len(self.calls))
                self.call_marks.append((len(cap.events), len(self.backend.graphs)))
                try:
                    out = run_call(compiled, self.workload, call, i, seed=self.settings.seed, train=self.settings.train)
                except Exception as exc:  # noqa: BLE001 - a compile failure is a finding: the calls before it stand
                    kind = "graph break escaped" if ti.is_unsupported(exc) else "torch.compile failed"
                    message = f"call {i}: {kind}: {type(exc).__name__}: {describe_error(exc)}"
                    self.error = rm.ErrorRecord(phase="compile", type=type(exc).__name__, message=message[:500])
                    break
                if self.collect:
                    self.outputs.append(detached(out))
            progress("compile", len(self.calls), len(self.calls))
        return self


# ---------------------------------------------------------------------------------------------
# findings from the captured events
# ---------------------------------------------------------------------------------------------


def _call_index_of(position: int, marks: list[int]) -> int | None:
    found = None
    for i, start in enumerate(marks):
        if position >= start:
            found = i
    return found


@dataclass
class Findings:
    """What one compiled run found, as report entries."""

    graph_breaks: list[rm.GraphBreakSite]
    recompiles: list[rm.Recompile]
    graphs: list[rm.Graph]
    compile_metrics: list[rm.CompileMetric]
    guards: list[rm.GuardSet]
    perf_hints: list[rm.PerfHint]
    call_of_compile: dict[str, int | None]
    """Compile id -> the call during which it compiled."""
    frames_skipped: int

    def summary(self, *, failed: bool, analysis_run: bool = True) -> rm.Summary:
        """The headline counts and verdict (`failed`: the eager pass, compile or deadline failed)."""
        return rm.Summary(
            graph_count=sum(1 for g in self.graphs if g.call_index == 0),
            graphs_compiled=len(self.graphs),
            graph_break_count=sum(s.occurrences for s in self.graph_breaks),
            unique_break_sites=len(self.graph_breaks),
            recompile_count=len(self.recompiles),
            frames_skipped=self.frames_skipped,
            analysis_run=analysis_run,
            compile_time_s=round(sum(m.duration_s or 0.0 for m in self.compile_metrics), 4),
            verdict=rm.compute_verdict(len(self.graph_breaks), len(self.recompiles), failed),
        )


def findings_of(run: CompiledRun | None, index: ModuleIndex | None = None) -> Findings:
    """Deduplicated, ranked, module-attributed findings of a compiled run (empty when it never ran)."""
    cap = run.capture if run is not None and run.capture is not None else ti.CaptureResult()
    marks = run.call_marks if run is not None else []
    event_marks = [m[0] for m in marks]
    graph_marks = [m[1] for m in marks]

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
    backend_graphs = run.backend.graphs if run is not None and run.backend is not None else []
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
    return Findings(
        graph_breaks=sites,
        recompiles=_recompiles(cap, starts, metrics, index, call_of_compile),
        graphs=graphs,
        compile_metrics=[compile_metric(cid, m) for cid, m in metrics.items()],
        guards=[guard_set(ev.compile_id or "?", ev.payload) for ev in cap.events if ev.kind == "dynamo_cpp_guards_str"],
        perf_hints=[rm.PerfHint(message=h.message, compile_id=h.compile_id, logger=h.logger) for h in cap.perf_hints],
        call_of_compile=call_of_compile,
        frames_skipped=sum(1 for m in metrics.values() if is_skipped_frame(m)),
    )


def _recompiles(
    cap: ti.CaptureResult,
    starts: dict[str, list[RawFrame]],
    metrics: dict[str, dict[str, Any]],
    index: ModuleIndex | None,
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
