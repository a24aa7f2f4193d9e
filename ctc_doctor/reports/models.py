"""The report: pydantic v2 models of everything one ctc-doctor run found.

This is the contract other tools read (bug trackers, CI, the TUI, offline log ingestion). Field
names are stable; renaming or removing one is a `SCHEMA_VERSION` major bump. The JSON Schema is
generated from these models into `report.schema.json` (`ctc-doctor schema`), and a test fails when
the committed file drifts.

A report is assembled here too, by `assemble_report`, for each of its four producers: a live analysis
(`analyzer/pipeline.py`), one rank of a script run (`analyzer/script_report.py`), logs read offline
(`analyzer/offline.py`), and a script run that left neither a rank's report nor a trace
(`analyzer/launch.py`). Each describes its own target and environment and finds its own findings;
`assemble_report` adds the run header every report gets the same way (tool version, start time, wall
time) and the schema version, and `summarize` counts the summary and verdict from the findings.
What follows the assembly stays with the producers: the later phases merge their sections in
(`pipeline`), the recompile causes are attached once the suggestions are final
(`analyzer/readers/causes.attach_causes`), the ranks of one job are merged (`ranks.merge_ranks`).
No torch import here.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..version import __version__

SCHEMA_VERSION = "1.17"
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
]
ExplainMethod = Literal["same_trace", "separate_call"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")  # field docstrings: read by reports.io.described_schema


class Frame(_Model):
    """One frame of Python source: where a break happened or a call was made."""

    file: str
    """Absolute path of the source file, as Python reported it."""
    line: int
    """1-based line number."""
    function: str
    """Function name (Dynamo resume functions are mapped back to the function they resume)."""
    code: str | None = None
    """The source line, stripped, when it could be read."""


class BreakCost(_Model):
    """What a break site costs at run time (schema 1.12)."""

    graphs_added: int = 0
    """Graphs it splits a call into beyond one: the first compiles of frames that ended at it."""
    latency_ms: float | None = None
    """Measured: the compiled arm's median latency per pass minus that of the arm with the fix that
    removes it (its own arm where there is one); negative when the fix made it slower; 0.0 within noise."""
    share: float | None = None
    """`latency_ms` over the compiled arm's latency."""
    measured_by: str | None = None
    """The suggestion and arms it was measured with: `S1: benchmark compiled -> fixed[S1] (S1 alone)`."""
    note: str | None = None
    """Why there is no latency (`not measured: ...`), or what qualifies it (`within noise`, the fixes together)."""


class GraphBreakSite(_Model):
    """One deduplicated graph-break site: the same gb_type at the same place, with every occurrence."""

    id: str
    """Stable id within this report, in rank order: `B1` is the most costly site."""
    gb_type: str
    """Dynamo's graph-break type (first line of the Unsupported message), e.g. `Data-dependent branching`."""
    registry_ids: list[str] = Field(default_factory=list)
    """Graph-break registry ids (`GB0170`...) from torch's `graph_break_registry.json`; a break in a loop lists the inner cause too."""
    reason: str
    """One-line reason, readable on its own."""
    explanation: str | None = None
    """Dynamo's explanation text, when the torch version provides one."""
    hints: list[str] = Field(default_factory=list)
    """Dynamo's hints for this break, in order (registry hints when the message had none)."""
    user_frame: Frame
    """The innermost frame of the break: where tracing stopped."""
    own_frame: Frame | None = None
    """The innermost frame in the user's own code, when `user_frame` is in a library (else equal to it)."""
    user_stack: list[Frame] = Field(default_factory=list)
    """The call stack down to the break, outermost first, without torch's and ctc-doctor's own frames."""
    module_paths: list[str] = Field(default_factory=list)
    """Every `named_modules()` path whose code runs this site (`""` is the root model)."""
    module_class: str | None = None
    """Class name of the module(s) in `module_paths`."""
    occurrences: int
    """How many times this break happened over the whole workload (all compile ids)."""
    compile_ids: list[str] = Field(default_factory=list)
    """Compile ids (`frame/attempt`, as in TORCH_LOGS and tlparse) of the frames where it happened."""
    own_code: bool
    """True when `user_frame` is in the user's code, not in site-packages, torch or the standard library."""
    library: str | None = None
    """The library that holds `user_frame` (`torch`, `transformers`, `stdlib`...) when not own code."""
    owner: Literal["user", "library", "wrapper"] | None = None
    """Whose code breaks: the user's, a library the model calls (transformers, timm...), or a framework
    wrapper around the model (DDP, FSDP, accelerate, the Trainer, Lightning); schema 1.11."""
    wrapper: str | None = None
    """The wrapper, when `owner` is wrapper (`DistributedDataParallel`)."""
    expected: str | None = None
    """Why the site is a wrapper's by-design break, one sentence: not in the verdict, no advice (schema 1.11)."""
    frame_skipped: bool = False
    """True when Dynamo gave up on the whole function (e.g. a graph break in a loop): it ran fully eager."""
    ops_in_split_graphs: int = 0
    """Ops in the graphs of the frames where this break happened: a measure of the work it splits."""
    cost: BreakCost | None = None
    """What it costs at run time: the graphs it adds, and the latency its fix's benchmark arm measured
    (schema 1.12; None before the suggestions were judged)."""
    ranks: list[int] = Field(default_factory=list)
    """Distributed ranks that hit this site (offline reports of multi-rank logs; empty otherwise)."""
    first_call_only: bool | None = None
    """True when the break happens only on a fresh model's first compiled call: its line did not run when
    the warmed-up model ran the same call again (lazy set-up, hooks installed once, a warning logged once).
    Compiled code keeps such a break for good. False: the line runs every time; None: not checked (not a
    site of the first call, or a report read from logs)."""

    def place(self) -> Frame:
        """Where the break is in the user's code: `own_frame` under a library's frame, else `user_frame`."""
        return self.own_frame or self.user_frame

    def key(
        self,
        *,
        own_frame: bool = True,
        across_runs: bool = False,
        line_moved: bool = False,
        module_paths: bool = False,
    ) -> tuple[Any, ...]:
        """Equal for the same site: the one definition, for three comparisons.

        - Within one report (the default; the ranks of one job, `ranks.merge_ranks`): what
          `group_break_sites` deduplicated: (gb_type, `user_frame` file and line, `own_frame` file and
          line or None).
        - A report against fresh captures of the same model (`own_frame=False`: the fix phase's baseline
          and fixed copies): the innermost frame alone. The own frame may be a caller of the model that
          differs though the site is the same (a library model's break seen from the script that ran
          it, then from ctc-doctor calling the copy).
        - Across runs (`across_runs`: `ctc-doctor diff`; two checkouts, machines or library versions):
          (gb_type, `file_key` of `place()`, its line, or its function when `line_moved` (a fix edited
          the file above the site), the module paths when `module_paths` (both reports have them)).
          The library line under the user's frame drops out: it moves with the library's version.
        """
        if across_runs:
            here = self.place()
            paths = tuple(self.module_paths) if module_paths else ()
            return (self.gb_type, file_key(here.file), here.function if line_moved else here.line, paths)
        own = (self.own_frame.file, self.own_frame.line) if own_frame and self.own_frame else None
        return (self.gb_type, self.user_frame.file, self.user_frame.line, own)


def file_key(path: str) -> str:
    """The last two components of a path: the same file in two checkouts or machines."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


class FailedGuard(_Model):
    """One guard that failed on a cached compiled entry, forcing a recompile."""

    reason: str
    """The guard failure text as Dynamo reported it (first line)."""
    kind: GuardKind
    """Classified cause: size, stride, dtype, device, requires_grad, value, type, object_id, attribute, global_state, other."""
    source: str | None = None
    """The guarded expression, e.g. `x`, `kwargs['input_ids']`, `self.use_relu`."""
    expected: str | None = None
    """The value the cached entry was compiled for, when the text says."""
    actual: str | None = None
    """The value that failed the guard, when the text says."""
    dim: int | None = None
    """Tensor dimension for size/stride guards."""
    cache_entry: str | None = None
    """Compile id of the cached entry whose guard failed."""
    user_stack: list[Frame] = Field(default_factory=list)
    """Where the guard came from: the user code that installed it, innermost last (torch >= 2.13 says)."""


class Recompile(_Model):
    """One recompilation of a frame, with every failed guard of every cached entry."""

    id: str
    """Stable id within this report: `R1`, `R2`... in the order they happened."""
    function: str
    """The recompiled function."""
    file: str
    """Its file."""
    line: int
    """Its first line."""
    compile_id: str
    """Compile id of the new compile (`0/1`)."""
    module_paths: list[str] = Field(default_factory=list)
    """Module paths whose code the recompiled frame belongs to."""
    module_class: str | None = None
    """Class name of those modules."""
    call_index: int | None = None
    """Which workload call triggered it (0 = first call, 1 = first variant...)."""
    failed_guards: list[FailedGuard] = Field(default_factory=list)
    """Every failed guard, one per cached entry that was tried."""
    rank: int | None = None
    """Distributed rank whose process recompiled (offline reports of multi-rank logs)."""
    expected: str | None = None
    """Why this recompile is one a loop pays once by design (a decoding loop's prefill → decode), when it
    is: it does not count against the verdict."""
    trigger: str | None = None
    """script: the line that made the call, and what was in force (`train.py:24 in estimate_loss, no_grad`;
    schema 1.11)."""


class RecompileCause(_Model):
    """One reason the model recompiles, with every recompile it explains: the disease, not the symptoms.

    A size change of one input fans out into a recompile of every frame that sees it (sub-module forwards,
    Dynamo's resume functions); a guard on a per-layer object recompiles the shared code once per layer.
    Each recompile id belongs to exactly one cause; the other failed guards of an event stay in the event."""

    id: str
    """Stable id within this report: `C1`, `C2`... in the order the causes first struck."""
    kind: GuardKind
    """The guard kind of the triggering failure."""
    source: str | None = None
    """The user-level input or attribute (`x`, `kwargs['input_ids']`, `self.flag`); per-instance guards
    show the instance index as `*` (`past_key_values.layers[*].is_initialized`)."""
    dim: int | None = None
    """Tensor dimension for size/stride causes."""
    values: list[str] = Field(default_factory=list)
    """Values the guards show, in call order (`2`, `3`); a value guard shows the values compiled for."""
    recompiles: list[str] = Field(default_factory=list)
    """The recompile ids it explains."""
    functions: list[str] = Field(default_factory=list)
    """The recompiled functions (`ShowcaseBlock.forward`), first seen first."""
    code_objects: int = 0
    """Distinct compiled frames it recompiled (a forward and its resume functions count apart)."""
    module_paths: list[str] = Field(default_factory=list)
    """Module paths of those functions."""
    first_call: int | None = None
    """The workload call where it first struck (0 = first call)."""
    per_instance: bool = False
    """The guard names a different instance each time (a per-layer cache, a module index): regional
    compilation recompiles once per instance."""
    storm: bool = False
    """One module class's code compiled once per instance, each of its own shapes (a YOLO model's `Conv`
    blocks after a break split the layer loop): the events of several guards, one cause (schema 1.17)."""
    user_stack: list[Frame] = Field(default_factory=list)
    """Where the triggering guard came from, when torch says."""
    summary: str
    """One line: `x dim 0 changes 2 → 3`."""
    suggestion_ids: list[str] = Field(default_factory=list)
    """Suggestions that address its recompiles."""
    expected: str | None = None
    """Why its recompiles are expected one-offs (each of them is), one sentence; None: a cause to fix."""
    compile_time_s: float | None = None
    """What its recompiles cost: their frame compiles and backward compiles, seconds (schema 1.11)."""
    trigger: str | None = None
    """script: where the call that first struck was made, and the context in force (its first recompile's
    `trigger`; schema 1.11)."""
    recurrence: Recurrence | None = None
    """one_off (a fixed pair of states: grad mode, train/eval, a flag, prefill/decode; expected), bounded
    (a few variants, then it settles), recurring (a new compile per new value, or the recompile limit hit:
    the frame runs eagerly from then on); schema 1.11."""


class Graph(_Model):
    """One FX graph Dynamo handed to the backend."""

    compile_id: str
    """Compile id of the frame that produced it."""
    call_index: int | None = None
    """Which workload call compiled it."""
    op_count: int
    """Number of call_function/call_method/call_module nodes."""
    node_count: int
    """All nodes including placeholders and output."""
    input_count: int
    """Placeholder count."""
    ops: dict[str, int] = Field(default_factory=dict)
    """Op name -> count in this graph."""
    module_ops: dict[str, int] = Field(default_factory=dict)
    """Ops per module, from each node's `nn_module_stack` (its innermost module), the path relative to
    the compiled frame's `self` (`""`: the frame's own code); live analyses only (schema 1.12)."""


class DdpSplit(_Model):
    """A compile DDPOptimizer split at gradient-bucket boundaries (`DDP(torch.compile(model))`): one
    graph of the user's became `subgraphs`, compiled one by one so each bucket's all-reduce can start
    while the backward goes on. By design, not a graph break (schema 1.12)."""

    compile_id: str
    """The compile whose graph was split."""
    subgraphs: int
    """Subgraphs it was split into (DDPOptimizer's `submod_N`)."""
    bucket_cap_bytes: int | None = None
    """The DDP bucket size in force (`DDP(bucket_cap_mb=...)`, 25 MiB by default), when torch said."""
    buckets: int | None = None
    """Gradient buckets DDPOptimizer made, when torch said."""


class PerfHint(_Model):
    """A performance hint torch logged (mostly inductor's)."""

    message: str
    """The hint text."""
    compile_id: str | None = None
    """Compile id active when it was logged."""
    logger: str
    """The torch logger that emitted it."""


class CompileMetric(_Model):
    """Compile metrics of one frame compile (from torch's compilation_metrics)."""

    compile_id: str
    """Compile id."""
    function: str | None = None
    """Compiled function name."""
    file: str | None = None
    """Its file."""
    line: int | None = None
    """Its first line."""
    duration_s: float | None = None
    """Whole frame compile time in seconds."""
    backend_compile_time_s: float | None = None
    """Time spent in the backend."""
    op_count: int | None = None
    """Graph op count (None when no graph was produced)."""
    guard_count: int | None = None
    """Guards installed."""
    shape_env_guard_count: int | None = None
    """Symbolic-shape guards."""
    cache_size: int | None = None
    """Cache entries for this code object before this compile."""
    fail_type: str | None = None
    """Exception type when the compile failed or the frame was skipped."""
    fail_reason: str | None = None
    """Its message (first line)."""
    fail_file: str | None = None
    """A compile that failed: the user's file Dynamo was tracing when it did (schema 1.17)."""
    fail_line: int | None = None
    """Its line."""
    restart_reasons: list[str] = Field(default_factory=list)
    """First lines of the reasons Dynamo restarted analysis."""
    recompile_reason: str | None = None
    """First failed guard when this compile was a recompile."""
    call_index: int | None = None
    """The workload call (0 = first) during which this compile happened (schema 1.14; None: logs)."""
    backward_s: float | None = None
    """Its backward graph's compile, at the first backward (not in `duration_s`; schema 1.11)."""
    module_paths: list[str] = Field(default_factory=list)
    """The modules whose code the compiled frame runs, outermost first (live analyses; schema 1.11)."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds per compile phase, forward and backward together (`readers.costs.PHASES`: dynamo,
    aot_autograd, inductor, codegen, kernel_compile); they add up to duration_s + backward_s (schema 1.11)."""
    graph_passes_s: float | None = None
    """Of those, Inductor's pre-grad, joint-graph and post-grad FX passes (schema 1.11)."""
    caches: dict[str, list[int]] = Field(default_factory=dict)
    """{cache: [hits, misses]}: fx_graph, aot_autograd (and their `_remote` twins), as torch counted them."""


class CostRow(_Model):
    """One line of the compile profile: a compile or a cause, and what it cost."""

    key: str
    """The compile id (`0/1`) or the cause id (`C1`)."""
    label: str
    """The compiled function and its module path, or the cause's summary."""
    seconds: float
    """Its compile seconds (a cause: its recompiles', frames and backward graphs)."""
    share: float
    """Of the profile's total."""
    cause: str | None = None
    """A compile: the recompile cause it belongs to (None: a first compile)."""


class CompileProfile(_Model):
    """Where compile time went (schema 1.11): by phase, by compile, by recompile cause, and the caches.
    From the report's own compiles (the analysis backend's; a script's own backend under `run`)."""

    total_s: float
    """Every frame compile and backward compile of the report."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds per phase (dynamo, aot_autograd, inductor, codegen, kernel_compile, other); they add up to total_s."""
    backward_s: float = 0.0
    """Of total_s, the backward graphs' compiles."""
    graph_passes_s: float | None = None
    """Of total_s, Inductor's FX graph passes."""
    first_compile_s: float = 0.0
    """Of total_s, the first compiles (the rest is recompiles)."""
    compiles: list[CostRow] = Field(default_factory=list)
    """Each compile, costliest first."""
    causes: list[CostRow] = Field(default_factory=list)
    """Each recompile cause, costliest first."""
    modules: list[CostRow] = Field(default_factory=list)
    """Compile seconds by module, costliest first: an estimate, each compile's seconds shared among the
    modules its graph's ops came from (`Graph.module_ops`) by op count; repeated blocks fold into one row
    (`h.*`, key `h.*`, label with their count). Live analyses with a recorded graph (schema 1.12)."""
    caches: dict[str, list[int]] = Field(default_factory=dict)
    """{cache: [hits, misses]} over the compiles."""
    backend: str | None = None
    """The backend that compiled (phases past Dynamo exist only for aot_eager and inductor)."""


class GuardSet(_Model):
    """Guards installed on one compiled frame."""

    compile_id: str
    """Compile id."""
    count: int
    """Number of guard lines in the guard tree."""
    tree: str | None = None
    """The guard tree text (only with --guards)."""


class Summary(_Model):
    """Headline numbers and the verdict."""

    graph_count: int
    """Graphs compiled during the first call: how fragmented one forward is (1 = one graph)."""
    graphs_compiled: int = 0
    """Graphs compiled over the whole workload, recompiles included."""
    graph_break_count: int
    """Graph-break events over the whole workload, repeats included."""
    unique_break_sites: int
    """Deduplicated break sites (`graph_breaks[]`)."""
    recompile_count: int
    """Recompilations over the whole workload."""
    expected_recompiles: int = 0
    """Of `recompile_count`, the one-offs a loop pays by design (`Recompile.expected`): not in the verdict."""
    expected_break_sites: int = 0
    """Of `unique_break_sites`, a framework wrapper's by-design breaks (`GraphBreakSite.expected`): not in
    the verdict (schema 1.11)."""
    frames_skipped: int = 0
    """Functions Dynamo gave up on entirely (run fully eager)."""
    analysis_run: bool = True
    """False for `ctc-doctor bisect` alone: the counts above are then zero, not measured."""
    compile_time_s: float
    """Total frame compile time over the workload, seconds."""
    verdict: Verdict
    """clean, graph_breaks, recompiles, graph_breaks_and_recompiles, or failed."""
    wrong_results: str | None = None
    """Compiled gives wrong results: one line with the figures, and the module that diverges when the
    accuracy bisection found it (`accuracy`); None when no compiled run failed the numerics check (schema 1.14)."""


class Target(_Model):
    """What was analyzed."""

    kind: TargetKind = "build"
    """build (a `build()` TARGET), script (`ctc-doctor run -- script`), logs (`ctc-doctor logs`)."""
    spec: str
    """The TARGET as given (`pkg.mod:build`, `file.py:build`, `demo`), or the script's command line."""
    command: list[str] = Field(default_factory=list)
    """script: the command as passed to Python (`train.py --epochs 1`, `-m pkg.serve`)."""
    name: str
    """Workload name."""
    model_class: str
    """Class of the root model."""
    parameters: int
    """Parameter count."""
    modules: int
    """Number of modules in `named_modules()`."""
    calls: int = 1
    """Calls run: the first plus the variants."""
    train: bool = False
    """Whether forward+backward was analyzed."""
    inputs: list[str] = Field(default_factory=list)
    """Signature of each call's inputs, e.g. `x: float32[4, 8]`."""


class Environment(_Model):
    """Versions and settings the run used."""

    python: str
    """Python version."""
    torch: str
    """torch version."""
    transformers: str | None = None
    """transformers version, when installed."""
    platform: str
    """OS and machine."""
    device: str
    """Device the model ran on."""
    backend: str
    """torch.compile backend used for the analysis."""
    unavailable: list[str] = Field(default_factory=list)
    """Capture and benchmark features this torch lacks, as `feature: what the report loses`
    (structured trace, guard user stacks, perf hints, explain, GB ids, compile cache artifacts, cudagraph step marks)."""


class RunInfo(_Model):
    """How and when the report was produced."""

    command: str
    """The command line."""
    started_at: str
    """ISO-8601 start time (UTC)."""
    duration_s: float
    """Wall time of the whole run (a `build()` target's from the command's start, the model's build included)."""
    tool_version: str
    """ctc-doctor version."""
    seed: int | None = None
    """Random seed set before building the workload."""
    exit_code: int | None = None
    """script: the script's exit code (the first rank that failed, with several)."""
    script_error: str | None = None
    """script: the last error line when it raised (`ValueError: ... (at train.py:42)`), or how its process
    died when a signal killed it (`the script's process died (SIGSEGV)`, schema 1.12)."""
    stopped: str | None = None
    """script: why it did not run to its end: `max_steps`, `timeout`, `interrupted` (None: it did)."""
    ranks: int = 1
    """script: the processes it ran as (`--nproc`)."""


class ErrorRecord(_Model):
    """Something that went wrong during the run (the report is still written)."""

    phase: Phase
    """Where: load, eager, explain, compile, capture, bisect, report, timeout; `interrupted` (schema 1.16): a
    signal stopped the run there (SIGTERM, Ctrl-C), its name as the type."""
    type: str
    """Exception type name."""
    message: str
    """One-line message."""
    hint: str | None = None
    """What the failure means and what to do, when it is a known one (a CUDA-graphs overwrite, a
    mark_dynamic constraint violation, the recompile limit)."""


class ExplainCheck(_Model):
    """What `torch._dynamo.explain` reported on the first call, as a cross-check."""

    graph_count: int
    """explain's graph count."""
    graph_break_count: int
    """explain's break count (always graph_count - 1)."""
    break_reasons: int
    """Number of break reasons explain listed."""
    op_count: int
    """Total ops over explain's graphs."""
    missed_sites: int = 0
    """Break sites ctc-doctor found on the first call that explain did not list."""
    method: ExplainMethod = "separate_call"
    """`same_trace`: explain's view (graphs, their break reasons and ops) taken from the compiled run the
    capture watched, at no extra trace; `separate_call`: a `torch._dynamo.explain` call of its own."""


class BisectTrial(_Model):
    """One module of the model in the bisection: its fullgraph trial, inferred result, or why not tried."""

    module_path: str
    """`named_modules()` path (`""` is the root model)."""
    module_class: str
    """Class name of the module."""
    passed: bool | None = None
    """True when `torch.compile(module, fullgraph=True)` ran on its captured inputs; None when not tried."""
    status: TrialStatus
    """passed, failed (a graph break), timeout, crashed (another compile error or a dead child process),
    skipped (not exercised, not needed, or over --max-trials; see `reason`), or inferred (from `inferred_from`)."""
    duration_s: float | None = None
    """Wall time of the trial (None when not run here)."""
    gb_type: str | None = None
    """Dynamo's graph-break type of the failure."""
    registry_ids: list[str] = Field(default_factory=list)
    """Graph-break registry ids of the failure (`GB0170`...)."""
    reason: str | None = None
    """One line: why it failed, crashed, timed out or was skipped."""
    user_frame: Frame | None = None
    """Innermost frame of the failure: where fullgraph tracing stopped."""
    own_frame: Frame | None = None
    """Innermost frame in the user's own code, when `user_frame` is in a library."""
    inferred_from: str | None = None
    """For `inferred`: the module path whose trial stands for this one (same class, inputs and structure)."""
    parent: str | None = None
    """Nearest exercised ancestor in the bisection tree (None for the root); containers never called are skipped."""
    parameters: int = 0
    """Parameters of the module and its submodules."""
    calls: int = 0
    """Times the module was called during the first call of the workload (0: not exercised)."""
    inputs: str | None = None
    """Signature of the captured inputs of its first call, e.g. `arg0: float32[4, 16]`."""
    own_break: bool = False
    """The failure's innermost frame is in this module's own code, not inside a submodule it calls."""
    repro_path: str | None = None
    """The standalone repro script of this module's failure, when one was written (an inferred row
    shares its representative's)."""
    crash: str | None = None
    """An isolated trial whose child process died: the signal (SIGSEGV, SIGABRT...) or `exit status N` (schema 1.12)."""
    stderr_tail: list[str] = Field(default_factory=list)
    """An isolated trial whose child process died: its last lines of stderr (schema 1.12)."""


class BisectStrategyResult(_Model):
    """What one strategy concluded."""

    smallest_failing: list[str] = Field(default_factory=list)
    """Module paths this strategy reports as smallest failing."""
    trial_count: int = 0
    """Distinct trials this strategy needed (shared trials count for each strategy that used them)."""
    complete: bool = True
    """False when --max-trials stopped it before it could conclude."""


class Bisect(_Model):
    """Module bisection: the smallest submodules that fail `torch.compile(fullgraph=True)`."""

    strategy: Strategy
    """top-down, bottom-up, or both."""
    trials: list[BisectTrial] = Field(default_factory=list)
    """One row per module of the model, in `named_modules()` order."""
    smallest_failing: list[str] = Field(default_factory=list)
    """Module paths to look at (`""` for the root); for `both`, the union of the strategies' answers."""
    trial_count: int = 0
    """fullgraph trials actually run."""
    exhaustive_count: int = 0
    """Trials an exhaustive search would run: one per exercised module."""
    agreement: bool | None = None
    """For `both`: whether top-down and bottom-up returned the same modules."""
    repro_paths: list[str] = Field(default_factory=list)
    """Standalone repro scripts written, one per distinct failing module (inferred copies share one)."""
    by_strategy: dict[str, BisectStrategyResult] = Field(default_factory=dict)
    """Each strategy's own answer and trial count."""
    untried: list[str] = Field(default_factory=list)
    """Module paths left untried because --max-trials was reached."""
    backend: str = "eager"
    """Backend of the trials."""
    train: bool = False
    """Whether trials ran backward too."""
    isolated: bool = False
    """Whether the trials ran in a child process (one serves them all; a new one after a crash or hang)."""
    child_processes: int = 0
    """Child processes started for isolated trials: one, plus one after each crash or hang."""
    memoized: bool = True
    """Whether identical modules (class, input signature, structure) were tried once."""
    trial_timeout_s: float | None = None
    """Per-trial time limit."""
    duration_s: float = 0.0
    """Wall time of the bisection."""
    notes: list[str] = Field(default_factory=list)
    """Caveats: shared inputs, timeouts not enforced, disagreements explained."""


class FixAction(_Model):
    """What `ctc-doctor fix` does to a copy of the model for one suggestion (plain data, never code)."""

    type: ActionType
    """dynamo_config (patch `torch._dynamo.config` for the compiled run), disable (`torch.compiler.disable`
    on submodules), source_patch (a rewritten method bound to the copy's instances), mark_dynamic (on input
    tensors), scalar_to_tensor (a Python float argument passed as a 0-d tensor), set_attribute (on
    submodules), regional (compile each repeated block instead of the whole model), warm_up (one eager call
    of the first call's inputs before compiling: first-call set-up runs outside the compiled code),
    counter_to_tensor (schema 1.17: an integer attribute of the modules that hold it, `attribute`, kept as a
    0-d int64 buffer instead, so a new value changes no guard)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """dynamo_config: option name -> value; functions are named by dotted path (`print`, `logging.Logger.debug`)."""
    module_paths: list[str] = Field(default_factory=list)
    """disable / set_attribute / regional: the modules it applies to."""
    attribute: str | None = None
    """set_attribute: the attribute name; counter_to_tensor: its path from the frame's module (`step`,
    `inner.step`), converted in every module that holds it as an int."""
    value: Any = None
    """set_attribute: the value (JSON)."""
    argument: str | None = None
    """mark_dynamic / scalar_to_tensor: the forward argument (`x`, `kwargs['input_ids']` is `input_ids`)."""
    dims: list[int] = Field(default_factory=list)
    """mark_dynamic: the dimensions."""
    marks: dict[str, list[int]] = Field(default_factory=dict)
    """mark_dynamic of tensors whose dimension changes together (one recompile cause): argument -> dims,
    all marked at once (`argument`/`dims` are the first of them). Marking one of them alone makes Dynamo
    specialize it to the others' static size (`ConstraintViolationError`). Schema 1.9."""
    file: str | None = None
    """source_patch: the file of the method."""
    function: str | None = None
    """source_patch: the method name."""
    class_name: str | None = None
    """source_patch: the nn.Module class whose method is rewritten."""
    edits: list[str] = Field(default_factory=list)
    """source_patch: the rewrites, as `kind@line` (`guard@46`, `where@114`, `keep_tensor@113`)."""


class Effect(_Model):
    """Counts of one compiled run: before or after a fix."""

    graph_count: int
    """Graphs of the first call."""
    graphs_compiled: int
    """Graphs over the whole workload."""
    graph_break_count: int
    """Break events over the whole workload."""
    unique_break_sites: int
    """Distinct break sites."""
    recompile_count: int
    """Recompilations."""
    compile_time_s: float
    """Frame compile time over the workload (analysis backend)."""


class NumericsCheck(_Model):
    """One run judged against eager's own (schema 1.9): both against a higher-precision reference run of
    the same calls (a float64 copy of the model and inputs, on the same device), as PyTorch's inductor
    accuracy check does (`torch._dynamo.utils.same` with `fp64_ref`). A floating-point tensor passes when
    its RMSE against the reference is at most `multiplier` x eager's own RMSE on it (never less than
    eager's typical relative error over the run times the tensor's scale: one number, like a loss, is
    not judged by one lucky rounding) plus one rounding step of its dtype. Other tensors must be equal."""

    method: Literal["float64_reference", "float32_reference", "elementwise"]
    """float64_reference; float32_reference (a bf16/fp16 model whose float64 copy could not be made or
    would not fit, see `note`); elementwise (no higher-precision reference: assert_close-style
    tolerances against eager, see `note`)."""
    ok: bool
    """Every compared tensor passes."""
    compared: list[str] = Field(default_factory=list)
    """What was compared: `outputs (3 calls, 6 tensors)`, `loss (3 calls)`, `gradients (26 parameters)`."""
    eager_error: float | None = None
    """Eager's own RMSE against the reference, pooled over the floating-point outputs."""
    candidate_error: float | None = None
    """This run's RMSE against the reference, pooled the same way."""
    ratio: float | None = None
    """candidate_error / eager_error (below 1: closer to the reference than eager)."""
    multiplier: float | None = None
    """The multiple of eager's error allowed: 2 (float32/float64), 3 (float16/bfloat16), more for
    tensors of few elements (5 up to 500, 10 up to 10), as torch's check."""
    worst: str | None = None
    """The tensor closest to failing (or failing): `call 0 output 0`, `loss call 2`, `grad h.0.attn.c_attn.weight`,
    with its own errors."""
    worst_ratio: float | None = None
    """That tensor's error over what it is allowed (above 1: fails)."""
    max_abs_vs_eager: float | None = None
    """Largest elementwise difference from eager's outputs (information, not the verdict)."""
    problem: str | None = None
    """Why it fails, one line."""
    note: str | None = None
    """Why the method is not float64_reference."""
    random: str | None = None
    """The model draws random numbers (dropout, rand): how the runs were made comparable (every call
    seeded alike; for inductor, a compile with `fallback_random`); None: it draws none (schema 1.11)."""


class Verification(_Model):
    """What applying a fix measurably did, checked against eager outputs."""

    applied: bool
    """Whether the fix could be applied to the copy at all (see `error`)."""
    before: Effect | None = None
    """Counts without the fix."""
    after: Effect | None = None
    """Counts with the fix."""
    fixed: list[str] = Field(default_factory=list)
    """Break-site / recompile ids of the original report that are gone."""
    new_sites: list[str] = Field(default_factory=list)
    """Break sites that appeared (`gb_type at file:line`), e.g. a break moved further down."""
    effective: bool = False
    """Fewer graphs, break sites or recompiles, and no new failure."""
    numerics_ok: bool | None = None
    """The check's results pass the numerics judgement against eager's (`numerics`; None when not compared)."""
    max_abs_error: float | None = None
    """Largest absolute difference from the eager outputs over all calls (information)."""
    max_rel_error: float | None = None
    """Largest relative difference from the eager outputs (reports before 1.9; from 1.9 see `numerics`)."""
    safe: bool = False
    """Applied without error and outputs unchanged: eligible for the combined fix."""
    numerics: NumericsCheck | None = None
    """The numerics judgement: the compiled run with the fix against the reference, eager's error beside it
    (or the eager run with the fix, when that already changes the results). Schema 1.9."""
    error: str | None = None
    """Why it could not be applied or run, one line."""
    moved_break: bool = False
    """The break it addresses is gone but a new one appeared in its place: the change moved the break
    (e.g. `capture_scalar_outputs` moves an `.item()` break to the `if` that reads it)."""
    summary: str | None = None
    """The measured effect in one line, e.g. `graphs 7 -> 1, recompiles 3 -> 0`."""
    duration_s: float = 0.0
    """Wall time of the check."""
    compiled_on: list[str] = Field(default_factory=list)
    """Backends the copy with the fix compiled and ran on: the check's own, then `aot_eager` (AOTAutograd)
    when the check's backend (`eager`) stops at Dynamo (schema 1.17)."""
    breaks_compile: str | None = None
    """The fix works under Dynamo but the compile crashes further down: `aot_eager (AOTAutograd):
    BackendCompilerFailed: ...`. Such a fix is not applied, and the next one for the same cause is
    (schema 1.17)."""


class Delta(_Model):
    """One measured number of a suggestion, before and after it."""

    metric: DeltaMetric
    """graphs, break_sites, recompiles (the fix check), trace_compile_s (the fix check's compile time,
    analysis backend), cold_compile_s, warm_compile_s, latency_ms, peak_memory_mb (the benchmark),
    first_call_s (`run --compare`: the script's first call of its compiled object, compile included; 1.15)."""
    before: float
    """Without the change."""
    after: float
    """With it."""
    better: bool | None = None
    """True better, False worse, None the same within noise."""
    source: str
    """Where it was measured: `fix check` or `benchmark compiled -> compiled_fixed (S1+S3 together)`."""
    together: list[str] = Field(default_factory=list)
    """The suggestions measured together in the arm this comes from (`S1`, `S3`: the fixed arm carries every
    applied fix); empty when this suggestion was measured on its own (schema 1.16)."""
    unstable: str | None = None
    """A latency from an arm whose figure is unstable (`fixed[S1]: its spread is 45 % of the median`, or the
    machine was busy): a gain then counts for nothing (`better` None); a loss still warns (schema 1.17)."""


class Suggestion(_Model):
    """One thing to change, why, where, and (after `fix`) what it is measured to be worth."""

    id: str
    """Stable id within this report: `S1`, `S2`... in the order of the sites they address."""
    rule: str
    """The rule that produced it (`print-guard`, `mark-dynamic`...), stable across versions."""
    title: str
    """One line: what to do."""
    rationale: str
    """Why this helps, for this site."""
    applies_to: list[str] = Field(default_factory=list)
    """Break-site (`B1`) and recompile (`R1`) ids it addresses (empty for model-wide advice)."""
    kind: SuggestionKind
    """config, wrap, dynamic_shapes, regional, source_edit, upgrade or mode."""
    category: SuggestionCategory | None = None
    """fix (removes the cause), workaround (runs around it: `torch.compiler.disable`, a config flip that
    moves the break, a raised recompile limit) or advice (a practice or a strategy to measure). A fix
    whose verification shows the break only moved becomes a workaround. None in reports before 1.6."""
    auto_applicable: bool = False
    """`ctc-doctor fix` can apply it to a copy of the model (see `action`)."""
    snippet: str | None = None
    """Code to use, when the change is not a diff of the user's file."""
    diff: str | None = None
    """Unified diff against the user's source file, when the change is local and mechanical."""
    file: str | None = None
    """The source file the diff edits, absolute (schema 1.11)."""
    file_sha256: str | None = None
    """Its content hash when the diff was made: `fix --write` refuses a file changed since (schema 1.11)."""
    references: list[str] = Field(default_factory=list)
    """The graph-break site page of the GB id, torch docs."""
    action: FixAction | None = None
    """What `fix` applies (None for advice only)."""
    verified: Verification | None = None
    """Measured effect of applying this suggestion alone (None until `fix` ran)."""
    deltas: list[Delta] = Field(default_factory=list)
    """What it measurably changed, per metric (counts from the fix check, times and memory from the benchmark)."""
    verdict: MeasuredVerdict | None = None
    """recommended (better on what was measured, nothing worse beyond noise), trade_off (better on one
    metric, worse on another), worse, no_effect, failed (did not apply, crashed or changed results),
    unmeasured. None before schema 1.6."""
    verdict_reason: str | None = None
    """The numbers behind the verdict, one line: `cold compile 24.0 -> 12.0 s, latency 5.79 -> 7.09 ms (+22 %)`."""
    not_recommended: str | None = None
    """Why it is not recommended whatever it measured: it runs compiled a module whose compiled output is
    wrong (`Report.accuracy`) (schema 1.14)."""


class FixResult(_Model):
    """`ctc-doctor fix`: the safe, effective suggestions applied together to a copy of the model."""

    applied: list[str] = Field(default_factory=list)
    """Suggestion ids applied together."""
    unsafe: list[str] = Field(default_factory=list)
    """Suggestion ids that changed results or failed: not applied."""
    ineffective: list[str] = Field(default_factory=list)
    """Suggestion ids that were safe but changed no count: not applied."""
    redundant: list[str] = Field(default_factory=list)
    """Suggestion ids that work but fix only what an earlier suggestion already fixes: not applied."""
    dropped: dict[str, str] = Field(default_factory=dict)
    """Suggestion id -> why it was left out of the combined fix although it works alone (it fails or
    changes results together with the ones kept). Schema 1.9."""
    verification: Verification | None = None
    """The combined effect (None when nothing was applied)."""
    remaining: list[str] = Field(default_factory=list)
    """Break sites and recompiles left after the combined fix (`gb_type at file:line`, `recompile: reason`)."""
    backend: str = "eager"
    """Backend of the checks."""
    tolerance: dict[str, float] = Field(default_factory=dict)
    """rtol/atol of the elementwise fallback for float32 outputs (used only when no higher-precision
    reference can be made: `Verification.numerics.method`)."""
    duration_s: float = 0.0
    """Wall time of the fix phase."""
    notes: list[str] = Field(default_factory=list)
    """Caveats."""
    baseline: Verification | None = None
    """`run`: the unchanged copy measured on the script's kept calls, what each fix is compared with; its
    `numerics` say whether the compile itself departs from float64 (schema 1.16)."""


class ProbedDim(_Model):
    """One input dimension varied by `--probe-shapes`."""

    argument: str
    """Forward argument name."""
    dim: int
    """Dimension index."""
    size: int
    """Size in the first call."""
    probed_size: int
    """Size tried."""
    outcome: Literal["recompiles", "no_recompile", "eager_rejects", "error"]
    """recompiles (mark it dynamic), no_recompile (already dynamic or unused), eager_rejects (the model needs
    this size: static by design), error (see `reason`)."""
    grouped_with: list[str] = Field(default_factory=list)
    """Other `arg[dim]` varied together because the model needs them equal (e.g. input_ids and attention_mask)."""
    reason: str | None = None
    """One line for eager_rejects / error."""


class ShapeProbe(_Model):
    """`--probe-shapes`: which input dimensions recompile when they change, before production hits them."""

    dims: list[ProbedDim] = Field(default_factory=list)
    """Every dimension of every input tensor of the first call."""
    recommended: list[str] = Field(default_factory=list)
    """`torch._dynamo.mark_dynamic(arg, dim)` calls that remove the recompiles found."""
    verified: bool | None = None
    """With those marks, none of the probed sizes recompiled (None when there was nothing to mark)."""
    trials: int = 0
    """Compiled runs used."""
    duration_s: float = 0.0
    """Wall time."""


class LatencyStats(_Model):
    """Steady-state latency of one pass over the workload's calls."""

    median: float
    """Median, milliseconds."""
    iqr: float
    """Interquartile range, milliseconds."""
    n: int
    """Timed passes."""
    unstable: str | None = None
    """Why this figure cannot be trusted as a steady figure, when it cannot: a spread over 25 % of the
    median, too few steady samples, compiles during the timed passes, a busy machine (schema 1.13). A
    verdict or a speedup that rests on it says so."""
    retimed: str | None = None
    """Its first timing had other processes on the cores: once they left, it was timed again and this is
    that figure (schema 1.17)."""


class BenchmarkArm(_Model):
    """One way of running the model, measured."""

    name: str
    """eager, compiled, compiled[MODE] (`--modes`), or one of the optional arms: compiled_optimizer,
    compiled_fixed, fixed[S1] (that fix alone) or fixed[-S1] (every fix but that one), regional,
    regional_fixed, modular, dynamic, marked, padded, aot, aot_regional, aot_fixed."""
    description: str = ""
    """What the arm runs, one line."""
    compile_time_s: float | None = None
    """Cold compile time: Dynamo frame compile time (backend included) of the first pass, fresh inductor cache."""
    compile_phases: dict[str, float] = Field(default_factory=dict)
    """The cold pass's compile seconds per phase (`CompileMetric.phases`), backward compiles included (schema 1.11)."""
    backward_compile_s: float | None = None
    """The cold pass's backward-graph compiles (training; not in compile_time_s; schema 1.11)."""
    warm_compile_time_s: float | None = None
    """Compile time again after `torch._dynamo.reset()`, with the cache the cold run filled."""
    first_pass_s: float | None = None
    """Wall time of the first pass (compile plus first run)."""
    steps_per_s: float | None = None
    """Calls per second at the median pass (training steps per second when the workload has an
    optimizer; schema 1.10)."""
    break_even_calls: int | None = None
    """The call (step) from which this arm's total time, its first pass (compile included) and then steady
    calls, beats eager's; None when it is not faster (schema 1.10)."""
    latency_ms: LatencyStats | None = None
    """Steady-state latency per pass."""
    speedup_vs_eager: float | None = None
    """Eager median latency / this arm's median latency."""
    graph_count: int | None = None
    """Graphs compiled over the arm (cold pass)."""
    graph_break_count: int | None = None
    """Graph breaks over the arm."""
    recompile_count: int | None = None
    """Recompilations over the arm."""
    recompile_causes: list[RecompileCause] = Field(default_factory=list)
    """The arm's own recompiles, folded into causes (ids local to the arm): why an arm recompiled,
    e.g. a per-layer guard that makes regional compilation recompile once per block."""
    peak_memory_mb: float | None = None
    """CUDA: peak allocated by the caching allocator. CPU (Linux): peak resident set size of the process during the arm."""
    peak_reserved_mb: float | None = None
    """CUDA: the caching allocator's peak reserved memory (allocated plus cached) in the arm's process during
    the arm (schema 1.16)."""
    max_abs_error: float | None = None
    """Largest absolute difference from eager outputs (information: `numerics` is the verdict)."""
    max_rel_error: float | None = None
    """Largest relative difference from eager outputs (reports before 1.9; from 1.9 see `numerics`)."""
    numerics_ok: bool | None = None
    """Passes the numerics judgement against eager's (`numerics`)."""
    numerics: NumericsCheck | None = None
    """The numerics judgement of the arm's cold pass (schema 1.9; None for eager, the baseline)."""
    error: str | None = None
    """Why the arm failed or was cut short, one line."""
    warm_start_compile_s: float | None = None
    """`compiled` with --aot (inductor): compile time of a pass in empty caches after loading the cold
    pass' cache artifacts (`torch.compiler.load_cache_artifacts`): a new process with the caches shipped."""
    load_time_s: float | None = None
    """AOT arms: loading the compiled package(s), what a deployed process pays instead of compiling."""
    code: str | None = None
    """The lines to paste for this arm's way of compiling, when it is more than `torch.compile(model)`
    (the optimizer's step, dynamic=True, the marks; schema 1.10)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """AOT arms: export mode (strict or non-strict), dynamic dims, export time, package size, the
    packages of a regional arm (class, exported instance, instances that load it)."""
    cudagraphs: CudaGraphStats | None = None
    """Compiled arms under CUDA graphs (`--mode reduce-overhead`/`max-autotune`, backend `cudagraphs`):
    step marking, recordings, skips and re-recordings with torch's reasons (schema 1.8)."""
    crash: str | None = None
    """The arm's child process died while running it: the signal (SIGSEGV, SIGABRT...) or `exit status N`;
    `error` says so, and no verdict picks the arm (schema 1.12)."""
    out_of_memory: bool = False
    """The arm ran out of memory (its `peak_memory_mb` is what it reached); it is not a loss for compile:
    the verdict says the arm could not be measured (schema 1.13)."""
    timed_compiles: int = 0
    """Compiles during the timed passes (recompiles past the first passes): the steady state was never
    reached, and `latency_ms.unstable` names the causes (schema 1.13)."""
    busy: float | None = None
    """Other processes' CPU while this arm was timed, in cores (schema 1.13; None: not measured)."""
    stderr_tail: list[str] = Field(default_factory=list)
    """A crashed arm: the child process' last lines of stderr (schema 1.12)."""


class CudaGraphStats(_Model):
    """What CUDA graphs did in one benchmark arm, from torch's `cudagraphs` log and counters."""

    step_marked: bool
    """Each call began with `torch.compiler.cudagraph_mark_step_begin()` (outputs kept across calls are copies)."""
    recordings: int = 0
    """CUDA graphs recorded (a new input size, a new path through the tree, a re-recording)."""
    skip_count: int = 0
    """Graph compiles without CUDA graphs over the arm's compiles (cold and warm-cache: a graph counts
    once per compile; torch's `cudagraph_skips` counter, which also counts skips torch does not log)."""
    skips: dict[str, int] = Field(default_factory=dict)
    """Skip reason -> times, as torch logged it (`skipping cudagraphs due to cpu device`, a mutated input, ...)."""
    rerecords: dict[str, int] = Field(default_factory=dict)
    """Re-recording reason -> times (`function=... reason=...`: an input's address or a static input changed)."""
    warnings: dict[str, int] = Field(default_factory=dict)
    """Torch's other warnings on CUDA graphs -> times (a graph recorded per distinct input size, ...)."""


class BenchIsolation(_Model):
    """Where the benchmark's arms ran, and what running them in a child process cost (schema 1.12)."""

    isolated: bool
    """Every arm ran in a child process (`python -m ctc_doctor.analyzer.bench_worker`), so a crash costs
    that arm; False: every arm ran in the analysing process."""
    reason: str
    """Why: the default, --no-isolate-arms, or a target a child cannot rebuild (or a child that could not)."""
    child_processes: int = 0
    """Children started: one, plus one after each crash."""
    startup_s: float = 0.0
    """Seconds the children took to start (import torch, rebuild the workload, one eager call), all starts."""
    replay_s: float = 0.0
    """Seconds children started after a crash spent re-running the eager arm and the numerics reference
    (what the arms after a crash are judged against)."""
    crashed: list[str] = Field(default_factory=list)
    """The arms whose child process died."""


class Benchmark(_Model):
    """Eager vs compiled vs compiled-with-fixes (and regional compilation), measured."""

    device: str
    """Device the arms ran on."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """backend, mode, iters, warmup, grad mode, tolerance, fresh cache, torch threads."""
    arms: list[BenchmarkArm] = Field(default_factory=list)
    """Measured arms, eager first."""
    job_steps: int | None = None
    """`--steps N`: the user's job length in calls (training steps; schema 1.10)."""
    job_best_arm: str | None = None
    """The arm with the least total time (first pass with its compile, then steady calls) for `job_steps`."""
    best_arm: str | None = None
    """The best arm with correct numerics for the objective: the fastest (latency, balanced; of arms
    within noise of it, the one that compiles fastest) or the one that compiles fastest (compile)."""
    best_arm_reason: str | None = None
    """Why, with the numbers; says when the arms are within noise of each other."""
    objective: Objective = "balanced"
    """What `best_arm` and the suggestion ranking optimise (`--objective`)."""
    within_noise: list[str] = Field(default_factory=list)
    """Arms whose latency cannot be told apart from the best arm's (median difference within the spread)."""
    duration_s: float = 0.0
    """Wall time of the benchmark."""
    notes: list[str] = Field(default_factory=list)
    """Caveats."""
    cold_start: str | None = None
    """With AOT arms: the cheapest way for a new process to get a compiled model (JIT compile, warm
    cache, or loading an AOT package built once), with the numbers."""
    isolation: BenchIsolation | None = None
    """Where the arms ran (a child process, or this one) and why, and what the child processes cost (schema 1.12)."""
    machine: MachineLoad | None = None
    """How busy the machine was while the arms were timed (schema 1.13)."""
    kept: str | None = None
    """What the arms' numerics judgement kept and where: eager's results and the reference's differences
    from them, in memory or in a temporary file (schema 1.13)."""
    reference: ReferenceRun | None = None
    """The benchmark's own numerics reference (training steps, or no fix phase before it): where it ran and
    what it cost; None when its arms were judged by the fix phase's (schema 1.16)."""


class MachineLoad(_Model):
    """Whether other work shared the machine while the benchmark timed its arms (pyperf's rule: a figure
    from a busy machine is not a figure) (schema 1.13)."""

    cores: int
    """CPU cores this process may run on."""
    threads: int
    """Threads torch computes with (`torch.get_num_threads()`)."""
    load_average: float | None = None
    """The 1-minute load average when the benchmark started."""
    other_cpu: float | None = None
    """The most CPU, in cores, other processes used while an arm was timed."""
    gpu_processes: list[str] = Field(default_factory=list)
    """Other processes holding the GPU (`pid name memory`), when it can be read."""
    busy: bool = False
    """The machine was busy: the timings are less reliable and the verdict says so."""
    note: str | None = None
    """What was seen, one line (also printed on the terminal)."""


LogKind = Literal["torch_trace", "torch_logs"]
DivergenceKind = Literal["root_cause", "break_sites", "recompiles", "compiles"]


class ParseStats(_Model):
    """How the log files read (offline reports): what was used, ignored, unknown or unreadable."""

    lines: int = 0
    """Lines read."""
    records: int = 0
    """torch log records recognised (a trace event, or one TORCH_LOGS message)."""
    used: int = 0
    """Records that went into this report."""
    ignored: int = 0
    """Known records the report does not use (chromium events, tensor descriptions, bytecode dumps...)."""
    unknown: int = 0
    """Records of a kind this ctc-doctor does not know (a newer torch); `--strict` fails on them."""
    unknown_kinds: dict[str, int] = Field(default_factory=dict)
    """Unknown record kind -> count."""
    unreadable: int = 0
    """Records or lines that could not be read; `--strict` fails on them."""
    problems: dict[str, int] = Field(default_factory=dict)
    """Unreadable by cause: `bad JSON`, `payload without a record`, `payload checksum mismatch`, `file cut off mid-record`..."""
    examples: list[str] = Field(default_factory=list)
    """The first unreadable or unknown records as `file:line: what`."""
    foreign_lines: int = 0
    """Lines that are not torch log records, e.g. the program's own output in a captured stderr."""
    payloads_truncated: int = 0
    """Payloads longer than the size cap, kept only in part (the count is still right)."""
    truncated_files: list[str] = Field(default_factory=list)
    """Files that end in the middle of a record (a job killed while writing)."""


class LogSource(_Model):
    """Where an offline report came from (`ctc-doctor logs`)."""

    kind: LogKind
    """`torch_trace` (TORCH_TRACE structured logs) or `torch_logs` (TORCH_LOGS text)."""
    paths: list[str] = Field(default_factory=list)
    """The paths as given."""
    files: list[str] = Field(default_factory=list)
    """Every file read."""
    ranks: list[int] = Field(default_factory=list)
    """Distributed ranks found (empty for a single-process job)."""
    torch: str | None = None
    """torch version the logs were written by, when they say."""


class RankSummary(_Model):
    """What one rank of a distributed job compiled (offline reports of multi-rank logs)."""

    rank: int
    """The rank."""
    files: list[str] = Field(default_factory=list)
    """Its log files."""
    compiles: int = 0
    """Frame compiles (compilation_metrics records)."""
    graphs: int = 0
    """Graphs compiled."""
    graph_break_count: int = 0
    """Graph-break events."""
    break_sites: list[str] = Field(default_factory=list)
    """Ids of the break sites it hit."""
    recompile_count: int = 0
    """Recompilations."""
    recompiles: list[str] = Field(default_factory=list)
    """Ids of its recompiles."""
    compile_time_s: float = 0.0
    """Total frame compile time, seconds."""


class RankDivergence(_Model):
    """Ranks that compiled differently from the others: collectives can then hang or time out."""

    kind: DivergenceKind
    """root_cause (the first compile where ranks differ, and what differed), break_sites, recompiles or compiles."""
    ranks: list[int]
    """The ranks that differ from the majority (or from rank 0 on a tie)."""
    message: str
    """What differs, readable on its own."""
    items: list[str] = Field(default_factory=list)
    """Break-site or recompile ids involved."""


class CompiledObject(_Model):
    """One `torch.compile` call of a script (`ctc-doctor run`): what it compiled, how, and how often it ran."""

    name: str
    """The module's class, or the function's name."""
    kind: Literal["module", "method", "function"]
    """module: `torch.compile(model)`; method: `model.compile()`; function: `torch.compile(fn)`."""
    options: dict[str, str] = Field(default_factory=dict)
    """The torch.compile options as the script passed them (after `--backend`), as text."""
    calls: int = 0
    """Times the compiled object was called."""
    inputs: list[str] = Field(default_factory=list)
    """The inputs of its first call and of each later call with a new signature (what was kept)."""
    rank: int | None = None
    """The rank that compiled it (several ranks: rank 0's objects are listed)."""
    analyzed: bool = False
    """The object the module paths, bisection and fixes are about (the first compiled module that ran)."""
    site: str | None = None
    """Where torch.compile was called (`train.py:12`; `transformers/modeling_utils.py:4835` for a library's)."""
    library: str | None = None
    """The package whose code compiled it (`transformers`); None: the script's own code."""
    driver: str | None = None
    """A library loop that called it (`generate`), when one did."""
    relation: str | None = None
    """How it relates to another compile of the run (a double or nested compile)."""
    first_call_s: float | None = None
    """Seconds from its first call to its second: the first step, compile included."""
    period_ms: float | None = None
    """Median milliseconds from one call to the next over the later half of the run: the script's steady
    step (a decoding step: the time per generated token), compile excluded."""
    period_iqr_ms: float | None = None
    """The IQR of those periods, milliseconds (schema 1.13)."""
    period_n: int = 0
    """How many periods the later half holds: the samples `period_ms` rests on (schema 1.13)."""
    losses: dict[int, float] = Field(default_factory=dict)
    """`run --compare`: the loss its calls 0, 1, 2, 4, 8... returned (a one-element tensor, `.loss` or
    `["loss"]`), by call (schema 1.11)."""
    dropout: bool = False
    """Its module holds a training-mode dropout (schema 1.11)."""
    lora_rank: int | None = None
    """The largest LoRA rank its module's PEFT layers held when the script ended (None: no LoRA layer):
    what `run --compare hotswap` prepares the model for (schema 1.15)."""
    calls_s: float | None = None
    """Seconds its calls took, from the first call's start to the last call's start plus one steady period:
    every compile and recompile included (schema 1.15)."""


class StrategyRow(_Model):
    """One run of the script under one way of compiling it (`run --compare`), timed by its own calls."""

    strategy: str
    """eager (nothing compiled), default (the script's own options), dynamic, static, or a mode."""
    exit_code: int | None = None
    """The script's exit code under this strategy."""
    error: str | None = None
    """Why it gave no pace: the script failed, or too few calls for a steady one."""
    calls: int = 0
    """Calls of the analyzed object."""
    first_call_s: float | None = None
    """First call to second: the first step, compile included."""
    period_ms: float | None = None
    """Median call-to-call time over the later half of the run: the steady step."""
    period_iqr_ms: float | None = None
    """Their IQR (schema 1.13)."""
    period_n: int = 0
    """The periods it rests on (schema 1.13)."""
    unstable: str | None = None
    """Why the pace cannot be trusted as a steady figure (a spread over 25 % of the median, other processes on
    the cores while it ran); the speedup and the verdict say so (schema 1.13)."""
    busy: float | None = None
    """Other processes' CPU, in cores, while this row's run of the script ran (None: not measured; schema 1.16)."""
    steps_per_s: float | None = None
    """1000 / period_ms."""
    speedup: float | None = None
    """Eager's period over this one's (None without an eager row)."""
    break_even_calls: int | None = None
    """The call from which this strategy's total time (first step + steady steps) beats eager's; None:
    never (not faster), or no eager row."""
    compile_time_s: float = 0.0
    """Total frame compile time of the run."""
    graphs_compiled: int = 0
    """Graphs compiled over the run."""
    calls_s: float | None = None
    """The time its calls took, recompiles included (`CompiledObject.calls_s`; schema 1.15)."""
    recompiles: int = 0
    """Recompilations over the run."""
    expected_recompiles: int = 0
    """Of those, the one-offs a decoding loop pays by design."""
    verdict: Verdict = "clean"
    """The run's verdict under this strategy."""
    loss_call: int | None = None
    """`run --compare`: the call whose loss is compared with eager's, the latest kept in both runs (calls
    0, 1, 2, 4, 8... are kept; schema 1.11)."""
    loss: float | None = None
    """The loss that call returned under this strategy."""
    loss_change: float | None = None
    """The largest |loss - eager's loss| / |eager's loss| over the calls kept in both runs, up to `loss_call`."""
    loss_tolerance: float | None = None
    """The relative change allowed: STEP_LOSS_TOLERANCE, or DROPOUT_LOSS_TOLERANCE when the model has a
    dropout (compiled code draws other random numbers than eager)."""
    loss_ok: bool | None = None
    """False: this strategy's training drifted from eager's beyond the tolerance; it is never the fastest."""


class AccuracyTrial(_Model):
    """One module compiled alone on its recorded first-call inputs and judged against its own float64
    run, by the rule of `NumericsCheck` (schema 1.14)."""

    module_path: str
    """Dotted path (`""` is the root)."""
    module_class: str
    """Its class name."""
    status: Literal["passed", "failed", "skipped", "timeout", "crashed", "untried"]
    """failed: its compiled output departs from the float64 reference beyond eager's own error."""
    ratio: float | None = None
    """Its compiled error over eager's own, both against float64 (pooled over its outputs)."""
    worst_ratio: float | None = None
    """Its worst tensor's error over what it is allowed (above 1: fails)."""
    problem: str | None = None
    """Why it fails, or why it could not be judged."""
    inferred_from: str | None = None
    """Not run: the same class, inputs and structure as this module, whose result it shares."""
    duration_s: float = 0.0
    """What judging it took (0 when inferred)."""


class AccuracyBisect(_Model):
    """Where compiled goes wrong: when a compiled run fails the numerics check, the smallest module whose
    compiled output departs from its float64 reference beyond eager's own error, found top-down like the
    graph-break bisection (each module compiled alone on its recorded first-call inputs) (schema 1.14)."""

    trigger: str
    """What failed the check: `the compiled arm: error 30657x eager's own against float64`."""
    backend: str
    """The backend the modules were compiled with (the failing run's)."""
    module_path: str | None = None
    """The smallest diverging module (`""`: the root, none of its submodules diverges alone); None: not found."""
    module_class: str | None = None
    """Its class name."""
    source: str | None = None
    """Where its own code is: `file:line` of its forward."""
    own_code: bool = False
    """Every submodule it calls agrees alone: the divergence is in its own code (or between its children)."""
    path: list[AccuracyTrial] = Field(default_factory=list)
    """The levels from the root down to `module_path`, each with its error ratio."""
    trials: list[AccuracyTrial] = Field(default_factory=list)
    """Every module judged (or inferred, or left untried)."""
    trial_count: int = 0
    """Modules compiled and judged."""
    untried: list[str] = Field(default_factory=list)
    """Modules the trial or time budget left out."""
    repro_path: str | None = None
    """A standalone script: the module, its captured inputs (saved beside it) and the comparison; exit 1
    while the divergence is there."""
    inputs_path: str | None = None
    """The module's captured inputs the repro loads (`torch.load(weights_only=True)`); None: not saveable."""
    duration_s: float = 0.0
    """What the accuracy bisection cost."""
    notes: list[str] = Field(default_factory=list)
    """Caveats: a root that agrees alone, other modules that diverge too, a budget that stopped it."""


class FrameCalls(_Model):
    """How one compiled frame was served during the workload's calls: by a version Dynamo compiled, or by
    its own code run eagerly (after the recompile limit, a skipped frame, a compile that fell back), counted
    by entering the frame (schema 1.17)."""

    function: str
    """The frame's function."""
    file: str | None = None
    """Its file."""
    line: int | None = None
    """Its first line."""
    frame: str | None = None
    """Dynamo's frame index (the `F` of compile ids `F/A`)."""
    module_paths: list[str] = Field(default_factory=list)
    """Where it runs in the model."""
    compiled: int = 0
    """Entries served by a compiled version."""
    eager: int = 0
    """Entries that ran the function's own code."""
    first_eager_call: int | None = None
    """The workload call (0 = first) of its first eager entry."""
    by_call: list[list[int]] = Field(default_factory=list)
    """Per workload call with entries: `[call, compiled, eager]`."""
    why_eager: str | None = None
    """`the recompile limit (compile 0/8)`, `skipped (...)`, `a compile that fell back`; None when none ran eagerly."""


class TorchBug(_Model):
    """A compile that crashed inside PyTorch itself, not in the user's code, ready to file (schema 1.17):
    the stage that fails (found by compiling with the cheaper backends), the user's line that triggers
    it, a standalone repro of the smallest failing graph (verified to fail the same way under plain
    `python`), the text of an issue, and a workaround verified on the user's code where one was found."""

    where: str
    """What crashed: `fix S1 compiled through aot_eager`, `the script's compile of Net`."""
    error: str
    """The innermost error, one line: `AttributeError: type object 'TensorReferenceAnalysis' has no ...`."""
    error_type: str
    """Its type name, what the repro must fail with."""
    stage: str
    """Where in torch.compile it fails: `Dynamo`, `AOTAutograd`, or `the backend (inductor)`."""
    tried: list[str] = Field(default_factory=list)
    """Each backend tried, cheapest first, and what it did: `eager (Dynamo only): compiles and runs`."""
    user_line: str | None = None
    """The user's line whose operation triggers it (`model.py:14`), from the failing graph's stack traces."""
    user_code: str | None = None
    """That line's code."""
    operation: str | None = None
    """The graph operation that triggers it (`add % 1000`): the first one whose graph, cut after it, fails."""
    graph_nodes: int | None = None
    """Operations in the graph that failed."""
    repro_nodes: int | None = None
    """Operations in the repro's graph (the failing graph cut after the triggering operation)."""
    repro: str | None = None
    """The repro script: torch only, no user code (its graph is the failing one, its inputs random, same shapes)."""
    repro_path: str | None = None
    """Where it was written (`--repro-dir`, else beside the `--json` report); None: in the report only."""
    repro_verified: bool | None = None
    """It ran under plain `python` in a fresh process and failed with `error_type` (None: not run)."""
    repro_note: str | None = None
    """What running it gave, when it did not fail the same way (or why it was not run)."""
    issue_title: str
    """A title for a PyTorch issue."""
    issue_text: str | None = None
    """The issue's text: what fails, the repro, the error, what was tried, the versions."""
    issue_path: str | None = None
    """Where the issue's text was written (beside the repro)."""
    workaround: str | None = None
    """A way around it on the user's code: the fix verified in its place, or a change checked on a replay."""
    workaround_verified: bool = False
    """The workaround was compiled and run on the user's code (a copy, or the script's recorded call)."""


class RecompileCliff(_Model):
    """A frame that hit the recompile limit: from then on the calls that match none of its compiled
    versions run it eagerly, with no error (schema 1.14)."""

    function: str
    """The frame's function."""
    file: str | None = None
    """Its file."""
    line: int | None = None
    """Its first line."""
    compile_id: str
    """The compile that hit the limit."""
    limit: int | None = None
    """`torch._dynamo.config.recompile_limit` at the time."""
    from_call: int | None = None
    """The first workload call (0 = first) that ran the frame eagerly."""
    eager_calls: int | None = None
    """Calls from `from_call` to the end of the workload: with a new value per call, every one ran eagerly."""
    cause: str | None = None
    """The recompile cause that drove it (`C1`)."""
    cost: str | None = None
    """What those calls cost against compiled ones, measured from the benchmark's arms, or why not."""
    ran_eagerly: int | None = None
    """Of the calls from `from_call` on, those in which the frame did run its own code, counted
    (`FrameCalls`); None: not counted (schema 1.17)."""


class Report(_Model):
    """A ctc-doctor report."""

    schema_version: str = SCHEMA_VERSION
    """Report schema version, `major.minor`."""
    target: Target
    """What was analyzed."""
    environment: Environment
    """Versions and settings."""
    run: RunInfo
    """How it was produced."""
    summary: Summary
    """Headline numbers and verdict."""
    graph_breaks: list[GraphBreakSite] = Field(default_factory=list)
    """Deduplicated break sites, most costly first."""
    recompiles: list[Recompile] = Field(default_factory=list)
    """Recompilations in the order they happened."""
    recompile_causes: list[RecompileCause] = Field(default_factory=list)
    """The causes of those recompiles: each recompile id belongs to exactly one."""
    graphs: list[Graph] = Field(default_factory=list)
    """Every graph compiled."""
    perf_hints: list[PerfHint] = Field(default_factory=list)
    """Performance hints torch logged."""
    ddp_splits: list[DdpSplit] = Field(default_factory=list)
    """Compiles DDPOptimizer split at gradient-bucket boundaries (not graph breaks; schema 1.12)."""
    compile_metrics: list[CompileMetric] = Field(default_factory=list)
    """Per frame compile."""
    compile_profile: CompileProfile | None = None
    """Where compile time went: by phase, compile, cause; caches (schema 1.11; None: no compile metrics)."""
    guards: list[GuardSet] = Field(default_factory=list)
    """Guards installed, per compile id."""
    explain: ExplainCheck | None = None
    """torch._dynamo.explain cross-check (None when skipped or unavailable)."""
    notes: list[str] = Field(default_factory=list)
    """Caveats: degraded capture on older torch, explain disagreements, skipped phases."""
    errors: list[ErrorRecord] = Field(default_factory=list)
    """What failed; a failed run still reports what it found before."""
    redacted: bool = False
    """True when paths, the home directory, user and host names were removed (`--redact`)."""
    bisect: Bisect | None = None
    """Module bisection (None when not run: no breaks found, or --no-bisect)."""
    suggestions: list[Suggestion] = Field(default_factory=list)
    """What to change, per cause, ranked like the sites they address (empty when none apply)."""
    fix: FixResult | None = None
    """The safe suggestions applied to a copy and verified (None when `fix` did not run)."""
    shape_probe: ShapeProbe | None = None
    """Dynamic-shape probing (None without --probe-shapes)."""
    benchmark: Benchmark | None = None
    """Eager vs compiled vs fixed vs regional (None when not run)."""
    source: LogSource | None = None
    """Offline reports (`ctc-doctor logs`): the logs they were read from (None for a live analysis)."""
    parse_stats: ParseStats | None = None
    """Offline reports: records used, ignored, unknown and unreadable."""
    ranks: list[RankSummary] = Field(default_factory=list)
    """Offline reports of multi-rank logs: what each rank compiled."""
    divergence: list[RankDivergence] = Field(default_factory=list)
    """Reports of several ranks (logs, `run --nproc`): ranks that compiled differently."""
    compiled: list[CompiledObject] = Field(default_factory=list)
    """script: every `torch.compile` the script made (empty for `build()` targets and logs)."""
    comparison: list[StrategyRow] = Field(default_factory=list)
    """`run --compare`: the script run once per way of compiling it, its pace under each (schema 1.10)."""
    accuracy: AccuracyBisect | None = None
    """Where compiled goes wrong (None: no compiled run failed the numerics check, or not run; schema 1.14)."""
    recompile_cliffs: list[RecompileCliff] = Field(default_factory=list)
    """Frames that hit the recompile limit and ran eagerly from then on (schema 1.14)."""
    frame_calls: list[FrameCalls] = Field(default_factory=list)
    """Each compiled frame: the entries a compiled version served and those that ran eagerly, by call
    (a live analysis; schema 1.17)."""
    torch_bugs: list[TorchBug] = Field(default_factory=list)
    """Compiles that crashed inside PyTorch, each ready to file (schema 1.17)."""
    cost: DoctorCost | None = None
    """What the doctor itself cost: wall time and peak memory per phase, against the workload's own (schema 1.13)."""

    @property
    def analyzed_compile(self) -> CompiledObject | None:
        """script: the compiled object the report analyzes (None for `build()` targets and logs)."""
        return next((o for o in self.compiled if o.analyzed), None)

    @property
    def lora_rank(self) -> int | None:
        """script: the largest LoRA rank any compiled module held (None: no LoRA layer)."""
        return max((o.lora_rank for o in self.compiled if o.lora_rank), default=None)


class Footprint(_Model):
    """What the workload took on its first calls (the analysis's eager pass): what the preflight checks
    size each phase from (schema 1.13)."""

    model_mb: float
    """Parameters and buffers."""
    activations_mb: float
    """The eager pass's peak above the model: activations, outputs, workspace."""
    output_mb: float = 0.0
    """The largest call's outputs."""
    method: str = ""
    """How `activations_mb` was taken: the CUDA allocator's peak, or an estimate from the module outputs (host)."""


class PhaseCost(_Model):
    """One phase of the doctor's own run: its wall time and the peak memory of the doctor's processes
    during it (schema 1.13)."""

    phase: str
    """capture, eager pass, bisection, fix checks, fix reference, bench set-up, reference, or an arm (`arm compiled`)."""
    wall_s: float
    """Seconds spent in it."""
    peak_rss_mb: float | None = None
    """The peak resident memory of the doctor's process tree (this process and its children) during it."""
    peak_cuda_mb: float | None = None
    """CUDA: the peak the analysing process's caching allocator had allocated during it (the arms' child
    reports each arm's own: `BenchmarkArm.peak_memory_mb`)."""
    peak_cuda_reserved_mb: float | None = None
    """CUDA: the peak it had reserved (allocated plus cached: what the device sees of the process, less its
    CUDA context) during it (schema 1.16)."""


class ReferenceRun(_Model):
    """The higher-precision run every numerics judgement compares against: where it ran so that it fits
    beside the model, and what it cost (schema 1.16)."""

    method: Literal["float64_reference", "float32_reference", "elementwise"]
    """As `NumericsCheck.method`: float32 is the last resort for a bf16/fp16 model, elementwise for a float32 one."""
    placement: str | None = None
    """`whole` (the model cast in place on its device), `blockwise` (each module cast while its forward runs),
    `host` (the cast model on the host); training also `offloaded` (what the backward needs kept on the
    host) and `checkpointed` (the repeated blocks' activations recomputed in the backward); None without a
    higher-precision run."""
    slices: int = 1
    """The batch's rows ran this many at a time (each result written at its rows), so that the activations
    of one slice at a time sit beside the model; 1: the whole batch."""
    device_mb: float | None = None
    """What the way taken allocates on the run's device, estimated from the workload's footprint."""
    beyond_workload_mb: float | None = None
    """Of that, what is beyond the workload's own activations: what it adds to the workload's footprint."""
    room_mb: float | None = None
    """What it was allowed to add (`room_basis`); None: free memory only."""
    room_basis: str | None = None
    """`the doctor's margin, half the workload's own 1.2 GiB` (at least 256 MB), or `--memory-limit`."""
    device_peak_mb: float | None = None
    """CUDA: the allocator's peak during the run above what was allocated before it (measured)."""
    duration_s: float = 0.0
    """Wall time of the run (eager's kept results are not part of it)."""
    not_taken: list[str] = Field(default_factory=list)
    """The ways tried before it, and why each was not taken (would not fit, failed)."""


class DoctorCost(_Model):
    """What ctc-doctor itself cost, against what the workload costs on its own (schema 1.13)."""

    phases: list[PhaseCost] = Field(default_factory=list)
    """Each phase, in order."""
    wall_s: float = 0.0
    """The whole analysis, from its start (the model's build and imports before it are not counted, as the
    workload's own figure does not count them; `run.duration_s` does)."""
    peak_rss_mb: float | None = None
    """Peak resident memory of the doctor's process tree over the whole analysis."""
    peak_cuda_mb: float | None = None
    """Peak GPU memory in use over the whole analysis (above the start's)."""
    workload_wall_s: float | None = None
    """The workload's own time: one eager pass and one compile of its calls (`workload_basis`)."""
    workload_peak_mb: float | None = None
    """The workload's own peak memory (host RSS; on a GPU, the device's) (`workload_basis`)."""
    workload_basis: str | None = None
    """How the workload's own figures were taken."""
    time_ratio: float | None = None
    """wall_s / workload_wall_s."""
    memory_ratio: float | None = None
    """The doctor's peak / the workload's (host RSS; the GPU's on a GPU)."""
    footprint: Footprint | None = None
    """The workload's footprint the preflight checks used."""
    kept: str | None = None
    """What the numerics judgement kept and where (eager's results and the reference's differences)."""
    released: str | None = None
    """What the analysing process let go of before the benchmark's child rebuilt the model."""
    notes: list[str] = Field(default_factory=list)
    """Adaptations made to fit (the reference elsewhere, a model moved to the host) and phases left out (`--budget`)."""
    reference: ReferenceRun | None = None
    """The numerics reference the fix checks and the benchmark's arms were judged by: where it ran and what it
    cost (schema 1.16)."""
    summary: str | None = None
    """`the doctor used 1.4x the workload's memory and 2.6x its time`."""


FAILED_PHASES = ("eager", "compile", "timeout", "script")
"""Errors of these phases make the verdict `failed` (a script that exits with an error included)."""


def refresh_verdict(report: Report) -> None:
    """Recount `summary.expected_recompiles` and the verdict from the report's recompiles and errors
    (after recompiles were marked expected, or several ranks merged)."""
    s = report.summary
    s.expected_recompiles = sum(1 for rc in report.recompiles if rc.expected)
    s.expected_break_sites = sum(1 for site in report.graph_breaks if site.expected)
    if not s.analysis_run:
        return  # bisection only: the verdict is the bisection's (whether a module fails fullgraph=True)
    failed = s.verdict == "failed" or any(e.phase in FAILED_PHASES for e in report.errors)
    s.verdict = compute_verdict(s.unique_break_sites - s.expected_break_sites, s.recompile_count - s.expected_recompiles, failed)


def compute_verdict(summary_breaks: int, recompiles: int, failed: bool) -> Verdict:
    """The verdict from counts: failed wins, then breaks and recompiles."""
    if failed:
        return "failed"
    if summary_breaks and recompiles:
        return "graph_breaks_and_recompiles"
    if summary_breaks:
        return "graph_breaks"
    if recompiles:
        return "recompiles"
    return "clean"


# --- assembling a report (see the module's docstring) -----------------------------------------------


def started_now() -> str:
    """The start time a report records: now, UTC, ISO-8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def elapsed_s(t0: float) -> float:
    """Seconds since `t0` (a `time.perf_counter()` reading), as a report records a duration."""
    return round(time.perf_counter() - t0, 3)


def summarize(
    *,
    graph_breaks: Sequence[GraphBreakSite] = (),
    recompiles: Sequence[Recompile] = (),
    graphs: Sequence[Graph] = (),
    compile_metrics: Sequence[CompileMetric] = (),
    graph_count: int,
    frames_skipped: int = 0,
    failed: bool,
    analysis_run: bool = True,
) -> Summary:
    """The headline counts and verdict of these findings (none: a run that compiled nothing).

    `graph_count` is the producer's: the first call's graphs (live), the first compiles' (logs, which
    do not mark calls). `failed`: the eager pass, a compile or the deadline failed.
    """
    return Summary(
        graph_count=graph_count,
        graphs_compiled=len(graphs),
        graph_break_count=sum(s.occurrences for s in graph_breaks),
        unique_break_sites=len(graph_breaks),
        expected_break_sites=sum(1 for s in graph_breaks if s.expected),
        recompile_count=len(recompiles),
        frames_skipped=frames_skipped,
        analysis_run=analysis_run,
        compile_time_s=round(sum(m.duration_s or 0.0 for m in compile_metrics), 4),
        verdict=compute_verdict(sum(1 for s in graph_breaks if not s.expected), len(recompiles), failed),
    )


def unknown_environment(
    *,
    python: str | None = None,
    torch: str | None = None,
    platform: str | None = None,
    device: str | None = None,
    backend: str | None = None,
) -> Environment:
    """The environment of a run that was not observed (logs, a run that left nothing): what is known,
    `unknown` for the rest."""
    return Environment(
        python=python or "unknown",
        torch=torch or "unknown",
        platform=platform or "unknown",
        device=device or "unknown",
        backend=backend or "unknown",
    )


def assemble_report(
    *,
    target: Target,
    environment: Environment,
    summary: Summary,
    command: str = "",
    started_at: str = "",
    t0: float | None = None,
    seed: int | None = None,
    exit_code: int | None = None,
    script_error: str | None = None,
    stopped: str | None = None,
    **sections: Any,
) -> Report:
    """A report of `target` from its sections (`graph_breaks`, `notes`, `source`...: `Report` fields).

    The run header: `command` and `started_at` as given, the wall time since `t0` (None: not timed,
    0 s), the seed set before each phase, and for a script its `exit_code`, `script_error` and why it
    `stopped`.
    """
    return Report(
        target=target,
        environment=environment,
        run=RunInfo(
            command=command,
            started_at=started_at,
            duration_s=elapsed_s(t0) if t0 is not None else 0.0,
            tool_version=__version__,
            seed=seed,
            exit_code=exit_code,
            script_error=script_error,
            stopped=stopped,
        ),
        summary=summary,
        **sections,
    )
