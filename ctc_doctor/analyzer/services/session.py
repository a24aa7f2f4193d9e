"""One doctor run as one object: its settings (`AnalyzeOptions`), its clock and budget (`Clock`), its cost
meter and preflight (`own_cost.RunCost`), and what one phase lends the next (the fix phase's numerics
reference, which judges the benchmark's arms). Both producers make one: a build() target's run
(`pipeline.analyze`) and a script's first rank under `ctc-doctor run` (`script_report`), so each later
phase (bisection, suggest, fix, probe, bench, the accuracy bisection) reads the same settings, is planned
by the same preflight, is counted in the same cost account and stops at the same deadline, whichever
door the user came in by. The model itself and who owns it travel in `PhaseContext` (`release`,
`rebuild`, `pristine`): the session says whether the caller handed it over (`owns_workload`).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass

from ...reports import models as rm
from ..phases.bench import BenchOptions
from ..phases.bisect import BisectOptions
from ..phases.bisect.accuracy import AccuracyOptions
from ..phases.context import LentCompile, PhaseContext
from ..phases.fix import FixOptions
from ..resources.weights import LEFT_OUT, TWIN_LEFT_OUT
from ..running.numerics import Reference
from ..running.settings import ProgressFn, no_progress
from .own_cost import Fit, RunCost, isolated_bench

PLACEHOLDER_SPEC = "<workload>"
"""`AnalyzeOptions.spec` when the caller named no TARGET (the Python API)."""


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
    """Cross-check the first call's break sites against explain's view of it (read from the same trace)."""
    keep_guard_text: bool = False
    """Keep the full guard tree text per compile id (big)."""
    timeout_s: float | None = None
    """Give up after this many seconds (main thread only); the partial report is kept."""
    budget_s: float | None = None
    """Plan the run to fit in about this many seconds: the analysis and the eager and compiled arms always
    run; fix checks, bisection trials and optional arms that would not fit are left out, and said so."""
    spec: str = PLACEHOLDER_SPEC
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
    accuracy: AccuracyOptions | None = AccuracyOptions()
    """When a compiled run fails the numerics check (a benchmark arm, every fix check), find the module
    that diverges (None: say it fails, do not look for where)."""
    progress: ProgressFn | None = dataclasses.field(default=None, compare=False)
    """Called with each step's `ProgressEvent`."""
    memory_limit_mb: int | None = None
    """What a phase (a fix check, a benchmark arm) may add on the device at most; a phase that would need
    more is not started (`NotEnoughMemory`). None: what is free."""
    owns_workload: bool = False
    """The caller hands the workload over (the CLI): before the benchmark's child process rebuilds the
    model, this process frees its own model and copies, so the two never hold them at once. The Python
    API's default keeps the user's model intact."""
    started_s: float | None = dataclasses.field(default=None, compare=False)
    """When the run's clock started (`time.perf_counter()`): the CLI's start, so --timeout and --budget count
    the model's build too. None: when `analyze` is called."""
    resume: bool = False
    """A supervised stage started again after a crash in an arm (`cli.supervise`): the run goes on from the
    checkpoint in `bench.stage`, the benchmark's arms after the crashed one, then the phases after it."""
    catch_signals: bool = False
    """SIGTERM and Ctrl-C stop the run where it is and the report of what was found so far is returned,
    its last error row of phase `interrupted` (the CLI). The Python API's default lets them raise."""
    weights: str = "real"
    """`none`: the workload was built on the meta device (`--weights none`, `resources.weights`): Dynamo's
    findings only, on `eager` (`aot_eager` with train); what needs real numbers (fix numerics, benchmark,
    accuracy bisection) is left out and named, and a run that needs real values stops there; `twin`: the run of
    a small real twin after such a stop (`services.twin`), with the same phases left out."""
    twin: bool = True
    """After a stop without the weights, run a small real twin of a model built from a config with a layer
    count (`services.twin`) and report its findings, labelled; False: the stop is the answer."""

    def rebuild_target(self) -> str:
        """The TARGET that builds the workload again (the CLI's rebuild spec where `spec` is a label: `demo`)."""
        for target in (self.bench.target if self.bench else None, self.accuracy.target if self.accuracy else None):
            if target:
                return target
        return self.spec

    def resolved_backend(self) -> str:
        return self.backend or ("aot_eager" if self.train else "eager")

    def without_weights(self) -> tuple[AnalyzeOptions, list[str]]:
        """`--weights none`: the phases that need real numbers left out (the benchmark, the accuracy bisection,
        the fix checks, whose verification compares results), Dynamo's own backend (`eager`, `aot_eager` for
        training: a backend's code generation needs real tensors), the bisection's trials in this process (a
        child would build the real model); the notes that say so."""
        if self.weights == "real":
            return self, []
        notes = [LEFT_OUT if self.weights == "none" else TWIN_LEFT_OUT]
        backend = self.backend
        if backend not in (None, "eager", "aot_eager"):
            own = "aot_eager" if self.train else "eager"
            notes.append(f"Without the weights the compile runs on {own}, not {backend}: its findings are Dynamo's.")
            backend = None
        bisect = dataclasses.replace(self.bisect, isolate=False) if self.bisect is not None else None
        limit = self.memory_limit_mb if self.weights == "twin" else None  # the twin's tensors are real
        return dataclasses.replace(self, backend=backend, bench=None, accuracy=None, fix=None, bisect=bisect, memory_limit_mb=limit), notes


class Clock:
    """The run's --timeout (a hard stop) and --budget (a plan): what is left of each for the next phase."""

    def __init__(self, timeout_s: float | None, budget_s: float | None = None, t0: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.budget_s = budget_s
        self.t0 = t0 if t0 is not None else time.perf_counter()

    def elapsed(self) -> float:
        return rm.elapsed_s(self.t0)

    def remaining(self) -> float | None:
        """What is left of --timeout (None: no timeout)."""
        if not self.timeout_s:
            return None
        return max(0.0, self.timeout_s - (time.perf_counter() - self.t0))

    def planned(self) -> float | None:
        """What a phase may plan with: the least of what is left of --timeout and of --budget."""
        left = [x for x in (self.remaining(), self.budget_s and max(0.0, self.budget_s - (time.perf_counter() - self.t0))) if x is not None]
        return min(left) if left else None


@dataclass
class Session:
    """One run of the doctor: its settings, clock, cost account and what a phase lends the next."""

    options: AnalyzeOptions
    clock: Clock
    cost: RunCost
    fixed_compile: LentCompile | None = None
    """The fix phase's compile of the applied fixes on the user's backend, lent to the benchmark; its cache
    folder removed by `close`."""
    reference: Reference | None = None
    """The fix phase's numerics reference, lent to the benchmark (its arms judged by it with no run of
    their own); closed by `close`."""

    @classmethod
    def start(cls, options: AnalyzeOptions) -> Session:
        """A session for `options`: its clock started (at `options.started_s` when the CLI's start counts)."""
        clock = Clock(options.timeout_s, options.budget_s, options.started_s)
        cost = RunCost(
            options.device,
            options.progress or no_progress,
            options.owns_workload,
            options.memory_limit_mb,
            train=options.train,
            started_s=options.started_s,
        )
        return cls(options, clock, cost)

    @property
    def progress(self) -> ProgressFn:
        """The run's progress callback (the cost meter sees every event first)."""
        return self.cost.progress

    def fit(self, phase: rm.Phase, ctx: PhaseContext, report: rm.Report, *, isolated: bool | None = None, noted: bool = True) -> Fit:
        """The preflight's plan for `phase` beside the workload (`RunCost.plan`); an adaptation or a phase
        left out is noted in the cost section and the report (`Memory: ...`; `noted=False`: the caller says
        it). `isolated`: whether its child process would run (default: the benchmark's arms' child, when
        there is one)."""
        if isolated is None:  # a supervised run's arms have no child (`cli.supervise`)
            bench = self.options.bench
            isolated = (
                isolated_bench(bench.isolate, bench.target, self.options.spec) and bench.stage is None if bench is not None else False
            )
        fit = self.cost.plan(phase, ctx.pristine, isolated=isolated, shares=ctx.settings.shares)
        if fit.note is not None and noted:
            self.cost.notes.append(fit.note)
            report.notes.append(f"Memory: {fit.note}.")
        return fit

    def lend(self, reference: Reference | None, compiled: LentCompile | None = None) -> None:
        """The fix phase's reference and its compile of the applied fixes on the user's backend, kept for the
        benchmark (a second one closes the first)."""
        if reference is not None or compiled is not None:
            self.close()
            self.reference, self.fixed_compile = reference, compiled

    def close(self) -> None:
        """Give back what the session still holds (the lent reference and its temporary file, the lent
        compile's inductor cache)."""
        if self.reference is not None:
            self.reference.close()
            self.reference = None
        if self.fixed_compile is not None:
            shutil.rmtree(self.fixed_compile.cache_dir, ignore_errors=True)
            self.fixed_compile = None
