"""The bisection (which module breaks fullgraph) and the accuracy bisection (which module's compile is
wrong)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Strategy, TrialStatus, _Model
from .findings import Frame


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


class AccuracyOperation(_Model):
    """Within the diverging module, the operation where compiled goes wrong (schema 1.18)."""

    kind: Literal["traced_only", "backend"]
    """`traced_only`: the compiled graph runs an operation on a line eager's forward never runs (the traced
    program is not eager's); `backend`: the graph is eager's, and the backend computes this operation wrong
    (the graph cut after it, compiled, departs from the same cut run at float64)."""
    operation: str | None = None
    """The operation as the graph's code reads it: `mul(h, 1.05)`, `tanh(fc)`."""
    user_line: str | None = None
    """`file:line` of the user's code that makes it."""
    user_code: str | None = None
    """That line."""
    ratio: float | None = None
    """`backend`: the cut's compiled error against float64, in multiples of its own error at the model's precision."""
    note: str | None = None
    """Why it is this operation, one line."""


class AccuracyBisect(_Model):
    """Where compiled goes wrong: when a compiled run fails the numerics check, the smallest module whose
    compiled output departs from its float64 reference beyond eager's own error, found top-down like the
    graph-break bisection (each module compiled alone on its recorded first-call inputs) (schema 1.14)."""

    trigger: str
    """What failed the check: `the compiled arm: error 30657x eager's own against float64`."""
    backend: str
    """The backend the modules were compiled with (the failing run's)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The failing compile's other `torch.compile` options the modules were compiled with too (`run
    --compare`'s strategy whose loss departed: `{"mode": "max-autotune"}`; schema 1.19)."""
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
    operation: AccuracyOperation | None = None
    """Within the module, the operation where compiled goes wrong (None: not narrowed down; schema 1.18)."""
    repro_path: str | None = None
    """A standalone script: the module, its captured inputs (saved beside it) and the comparison; exit 1
    while the divergence is there."""
    inputs_path: str | None = None
    """The module's captured inputs the repro loads (`torch.load(weights_only=True)`); None: not saveable."""
    duration_s: float = 0.0
    """What the accuracy bisection cost."""
    notes: list[str] = Field(default_factory=list)
    """Caveats: a root that agrees alone, other modules that diverge too, a budget that stopped it."""
