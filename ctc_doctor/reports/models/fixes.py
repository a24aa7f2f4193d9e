"""Suggestions and their verification on a copy: actions, effects, numerics, deltas, fix results, the shape
probe, PyTorch bugs ready to file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import ActionType, DeltaMetric, MeasuredVerdict, SuggestionCategory, SuggestionKind, _Model
from .findings import Frame


class FixAction(_Model):
    """What `ctc-doctor fix` does to a copy of the model for one suggestion (plain data, never code)."""

    type: ActionType
    """dynamo_config (patch `torch._dynamo.config` for the compiled run), disable (`torch.compiler.disable`
    on submodules), source_patch (a rewritten method bound to the copy's instances), mark_dynamic (on input
    tensors), scalar_to_tensor (a Python float argument passed as a 0-d tensor), set_attribute (on
    submodules), regional (compile each repeated block instead of the whole model), warm_up (one eager call
    of the first call's inputs before compiling: first-call set-up runs outside the compiled code),
    counter_to_tensor (schema 1.17: an integer attribute of the modules that hold it, `attribute`, kept as a
    0-d int64 buffer instead, so a new value changes no guard), change_first (schema 1.19: the change a
    build() target's `before_call` made to the model before call `call` made once before compiling, and not
    again at that call: "prune or quantize first", verified; advice, never applied with the fixes), compile_only
    (schema 1.22: compile the submodules `module_paths` only, each in place, and run the rest of the model
    eagerly: "compile the network, not the module that also runs the augmentation"; verified on a copy,
    advice, never applied with the fixes), call_argument (schema 1.22: the user's call at `edits`' line passes
    one more keyword argument, the parameter a library computes from the data when it is left out; checked on
    a copy passing the value the library computed in each call, `computed_at`), compile_options (schema 1.22:
    torch.compile keyword arguments for the copy, `config`: `{"dynamic": true}`)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """dynamo_config: option name -> value; functions are named by dotted path (`print`, `logging.Logger.debug`);
    compile_options: torch.compile keyword arguments (`dynamic`)."""
    module_paths: list[str] = Field(default_factory=list)
    """disable / set_attribute / regional / compile_only: the modules it applies to."""
    call: int | None = None
    """change_first: the call before which the model was changed (schema 1.19)."""
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
    """source_patch: the rewrites, as `kind@line` (`guard@46`, `where@114`, `keep_tensor@113`); call_argument:
    `keyword@line:callee:argument` (`keyword@19:global_mean_pool:size`)."""
    computed_at: Frame | None = None
    """call_argument: the library's line that computes the value from the data when the argument is left out
    (schema 1.22)."""
    local: str | None = None
    """call_argument: the name the value has at `computed_at` (`dim_size`) (schema 1.22)."""


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
    counted_on: str | None = None
    """The backend the counts before and after were taken on when not the analysis's: `aot_eager` for a fix
    whose copy compiles another number of graphs through AOTAutograd than under Dynamo alone (a dim marked
    dynamic carries past a graph break there, not on the `eager` backend), for the fixes together once one
    of them was, and for every fix when the unchanged copy itself counts otherwise there (with gradients
    on) (schema 1.21)."""
    breaks_compile: str | None = None
    """The fix works under Dynamo but the compile crashes further down: `aot_eager (AOTAutograd):
    BackendCompilerFailed: ...`. Such a fix is not applied, and the next one for the same cause is
    (schema 1.17). `<backend> (...)`: on the user's own backend (`FixResult.on_backend`; schema 1.23)."""
    on_top_of: list[str] = Field(default_factory=list)
    """Measured on top of these applied fixes, not alone: alone it changed nothing, as another cause masked
    it (recompiles that reach the recompile limit anyway), and on top of them it removed what they left;
    `before` is then their counts (schema 1.23)."""


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


class BackendCheck(_Model):
    """The applied fixes compiled once more on the backend the user runs (inductor unless told), on a copy,
    through every call: "recommended" means it ran there (schema 1.23)."""

    backend: str
    """The user's backend (`--fix-backend`; the benchmark's; under `run`, the script's own)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The compile's own options passed with it (`mode`, `dynamic`: the script's, the benchmark's mode)."""
    ran: list[str] = Field(default_factory=list)
    """The fixes that compiled and ran there together (the applied set, once the ones that broke it left)."""
    breaks: list[str] = Field(default_factory=list)
    """Fixes that break the compile there: taken out of the applied set, their PyTorch bug triaged."""
    compiles: int = 0
    """Compiles made on that backend: 1 when nothing fails; a culprit's search adds one per fix tried."""
    duration_s: float = 0.0
    """What the check cost."""
    note: str | None = None
    """Why it stopped short (no time left, no single fix found at fault)."""


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
    on_backend: BackendCheck | None = None
    """The applied set compiled and run on the user's own backend (None: not done, or the checks' own
    backend is that one) (schema 1.23)."""


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


class TorchBug(_Model):
    """A compile that crashed inside PyTorch itself, not in the user's code, ready to file (schema 1.17), or
    (schema 1.19) a backend that computes a right graph wrong (`kind`), or the bug of a backend registered
    outside PyTorch (`owner`):
    the stage that fails (found by compiling with the cheaper backends), the user's line that triggers
    it, a standalone repro of the smallest failing graph (verified to fail the same way under plain
    `python`), the text of an issue, and a workaround verified on the user's code where one was found."""

    where: str
    """What crashed: `fix S1 compiled through aot_eager`, `the script's compile of Net`."""
    kind: Literal["crash", "wrong_result"] = "crash"
    """`wrong_result` (schema 1.19): no crash, but the backend computes an operation of a right graph wrong
    (the accuracy bisection's `backend` operation); `error` then gives the figures."""
    owner: str | None = None
    """The module that registered the failing backend when it is not PyTorch's own (schema 1.19): the bug
    is then that backend's, to file with its authors; None: PyTorch's."""
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
    repro_reducer: str | None = None
    """What cut the failing graph down to the repro's (schema 1.24): `torch's minifier`
    (`torch._functorch.fx_minifier`, with the triage's own test: the operation alone, with its own inputs),
    or `prefix cut` (the graph cut after the triggering operation: where the minifier did no better, ran out
    of time, or its repro did not fail the same way)."""
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
    """The workaround was compiled and run on the user's code (a copy, or the script's recorded call), or the
    whole script ran to its end with it (`workaround_rerun`)."""
    workaround_strategy: str | None = None
    """The `run --compare` strategy that applies the workaround to a whole script (`static`: `dynamic=False`;
    `submodules`: the network inside a LightningModule compiled in its place),
    where there is one (schema 1.23)."""
    workaround_rerun: str | None = None
    """`run`: what the script did when run again with the workaround (`workaround_strategy`), when its own run
    was cheap enough to repeat (schema 1.23)."""
    suggestion: str | None = None
    """The suggestion whose candidate fix walked into it (`S3`), when the user's own compile does not: the bug
    stays on that fix (ready to file), and never leads what to do next (schema 1.22)."""
