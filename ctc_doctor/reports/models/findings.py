"""What the capture finds: graph breaks and their sites, recompiles and their causes, the graphs, guards,
compiled objects and per-frame call counts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import GuardKind, Recurrence, _Model


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


class GuardSet(_Model):
    """Guards installed on one compiled frame."""

    compile_id: str
    """Compile id."""
    count: int
    """Number of guard lines in the guard tree."""
    tree: str | None = None
    """The guard tree text (only with --guards)."""


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
