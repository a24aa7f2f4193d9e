"""The bench phase: eager vs compiled vs compiled-with-fixes vs regional compilation, measured.

One pass = every call of the workload in order (first call, then the variants), so recompiles the
workload triggers are part of what is measured. Per compiled arm, in a fresh inductor cache:
1. cold pass: `torch._dynamo.reset()`, then one pass; compile time is Dynamo's frame compile time
   (backend included) from its compilation metrics, graph/break/recompile counts from the same;
2. warm pass: reset again and one more pass, now hitting the on-disk caches the cold pass filled;
3. `warmup` untimed passes, then timed passes with device synchronisation until the median is settled
   (adaptive, `bench_numbers.settled`) or `iters` of them: median and IQR.
What the cold pass produced (outputs; training, losses and gradients too) is judged against eager's
own, both against a float64 copy of the model run once after the eager arm (`running.numerics`).
Inference runs under `torch.no_grad()` (unless `Workload.grad`); `--train` times forward+backward. Arms that fail record their
error and the others still run. With `isolate` the arms run in a child process (`bench_isolated`), so
one that crashes the process (a segfault, an abort) is a `crash` row too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ...reports.verdicts import best_arm, cold_start, regional_recompile_reason, unmeasured
from ...vocabulary import CUDA_GRAPH_MODES, TRAINING_OPT_IN
from ...workload import Call
from .. import torch_internals as ti
from ..fixes.variants import VariantError
from ..readers.causes import arm_recompiles, recompile_causes
from ..readers.text import describe_error
from ..resources.cpu import QUIET_WAIT_S
from ..resources.load import CpuWindow, busy, machine_at_start, wait_for_quiet
from ..resources.load import conclude as conclude_load
from ..running import device as dev
from ..running.calls import Sample, calls_on, preserved_state, run_pass
from ..running.deadline import Stopped
from ..running.memory import out_of_memory, release_memory
from ..running.numerics import KeptResults, Reference, SameAs, loose_backend
from ..running.precision import make_reference
from ..triage import is_torch_failure
from .bench_aot import run_aot_arm
from .bench_arms import OPT_IN_MARK, Arm, arm_kind, arms_for, fix_arms, materialized, price_opt_in
from .bench_crash import triage_compiled_arm
from .bench_isolated import run_isolated
from .bench_numbers import (
    AUTO_BUDGET_S,
    AUTO_MAX,
    AUTO_MIN,
    WARM_ENOUGH_S,
    ArmBudget,
    behind,
    best_for_job,
    latency_stats,
    mark_unstable,
    pace,
    settled,
    spread,
)
from .bench_options import BenchOptions
from .context import PhaseContext


@dataclass
class BenchSection:
    """The benchmark, and what it measured of the suggestions it can judge (regional compilation)."""

    benchmark: rm.Benchmark
    verified: dict[str, rm.Verification] = field(default_factory=dict)
    """Suggestion id -> the measured effect (the regional-compilation suggestion, from its arm)."""
    torch_bugs: list[rm.TorchBug] = field(default_factory=list)
    """The compiled arm crashed inside PyTorch: triaged, ready to file."""


class ArmRunner:
    """Runs arms: their passes, timings and numerics judgement (the eager arm's outputs and the reference)."""

    def __init__(self, ctx: PhaseContext, bench: BenchOptions) -> None:
        self.workload = ctx.workload
        self.seed = ctx.settings.seed
        self.bench = bench
        self.device = ctx.settings.where
        self.train = ctx.settings.train
        self.progress = ctx.progress
        self.eager: KeptResults | None = None
        """What the eager arm's first pass produced (when the reference is this benchmark's own)."""
        self.fastest_s = float("inf")
        """The fastest median pass of the arms measured so far (eager's and the compiled arms' that ran
        without error): adaptive timing stops an arm once it is clearly behind it."""
        self.quiet_wait_s = QUIET_WAIT_S
        """What is left of the time the arms may wait, together, for a load to pass before timing again: a
        machine that stays busy costs it once, not once per arm."""
        self.reference: Reference | None = None
        self.room = ctx.room
        self.random = False
        """The model draws random numbers (dropout, rand): eager from another seed gave other results."""
        self.shared = False
        """The reference came from the fix phase (same calls, seed and pristine model): no run of its own."""
        if ctx.reference is not None and not self.steps:
            self.adopt(ctx.reference)

    def grad(self) -> contextlib.AbstractContextManager[Any]:
        """Gradients on to train, or when the workload says its inference runs with them (`Workload.grad`)."""
        return contextlib.nullcontext() if self.train or self.workload.grad else torch.no_grad()

    @property
    def steps(self) -> bool:
        """Each call is a whole training step (an optimizer runs after backward)."""
        return self.train and self.workload.optimizer is not None

    def new_optimizer(self, arm: Arm) -> None:
        """The arm's own optimizer over its model's parameters, `step` compiled when the arm says."""
        if not self.steps:
            return
        arm.optimizer = self.workload.optimizer(arm.model.parameters())  # type: ignore[misc]
        if arm.optimizer_compiled:
            arm.optimizer.step = torch.compile(arm.optimizer.step, **self.compile_kwargs())

    def run_pass(self, fn: Callable[..., Any], arm: Arm, **kw: Any) -> Sample:
        """One pass of the arm's calls (training steps with its optimizer)."""
        kw.setdefault("seed", None)
        return run_pass(fn, self.workload, arm.calls, train=self.train, model=arm.model, optimizer=arm.optimizer, **kw)

    def compile_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"backend": self.bench.backend}
        if self.bench.mode and self.bench.mode != "default":
            kw["mode"] = self.bench.mode
        return kw

    @contextlib.contextmanager
    def _compiled(self, arm: Arm) -> Iterator[Callable[..., Any]]:
        if not arm.compiled:
            yield arm.model
            return
        if arm.regional_paths:
            blocks = [arm.model.get_submodule(p) for p in arm.regional_paths]
            with ti.regional_compile(blocks, **self.compile_kwargs()):
                yield arm.model
            return
        yield torch.compile(arm.model, **{**self.compile_kwargs(), **arm.compile_options})

    def prime(self) -> None:
        """Pay the backend's one-time costs (imports, compiler checks) before the first measured arm."""
        self.progress(ProgressEvent(Step.BENCH, activity="warming up the compiler"))
        with contextlib.suppress(Exception), torch.no_grad(), ti.fresh_inductor_cache(has_compile_cache(self.bench.backend)):
            x = torch.ones(4, device=self.device)
            torch.compile(lambda t: torch.relu(t) + 1, **self.compile_kwargs())(x)
        ti.fresh_dynamo_state()

    def cudagraphs(self, arm: Arm) -> bool:
        """Whether the arm's compiled code runs under CUDA graph trees (reduce-overhead and
        max-autotune in inductor, or the cudagraphs backend)."""
        if not arm.compiled or arm.aot:
            return False
        mode = arm.compile_options.get("mode", self.bench.mode)
        return self.bench.backend == "cudagraphs" or (self.bench.backend == "inductor" and mode in CUDA_GRAPH_MODES)

    def step(self, arm: Arm) -> Callable[[], None] | None:
        """The step mark each call of a CUDA-graph arm begins with, else None."""
        return ti.cudagraph_mark_step_begin if self.cudagraphs(arm) else None

    def timed(self, fn: Callable[..., Any], arm: Arm, out: rm.BenchmarkArm | None = None, ran: int = 0) -> rm.LatencyStats:
        """Warm-up passes, then timed passes: `iters` of them, more while the spread is wide (IQR over 5 % of
        the median) up to `max_iters`; adaptive (iters None): until the median is settled, within a budget,
        or as soon as the arm is clearly behind the fastest arm so far (`behind`). Adaptive warm-up of a
        pass longer than WARM_ENOUGH_S stops early: after one pass when the arm ran `ran` >= 2 whole passes
        already (its first and its warm-cache pass; not under CUDA graphs, which record on later passes),
        else once two passes agree within 10 %. Other processes' CPU during the timed passes goes to `out.busy`."""
        fixed = self.bench.iters is not None
        least = self.bench.iters if self.bench.iters is not None else AUTO_MIN
        limit = self.bench.max_iters or (3 * least if fixed else AUTO_MAX)
        total = self.bench.warmup + least
        warm: list[float] = []
        for i in range(self.bench.warmup):
            self.progress(ProgressEvent(Step.ARM, i, total, subject=arm.name, activity="timing", timing=True))
            t0 = time.perf_counter()
            self.run_pass(fn, arm, step=self.step(arm))
            dev.synchronize(self.device)
            warm.append(time.perf_counter() - t0)
            if fixed or warm[-1] <= WARM_ENOUGH_S:
                continue
            if (ran >= 2 and self.step(arm) is None) or (len(warm) >= 2 and abs(warm[-1] - warm[-2]) <= 0.1 * warm[-2]):
                break
        times: list[float] = []

        def more() -> bool:
            if len(times) < least:
                return True
            if len(times) >= limit:
                return False
            if fixed:
                return spread(times) > 0.05
            return not settled(times) and sum(times) < AUTO_BUDGET_S and not behind(times, self.fastest_s)

        def passes() -> float | None:
            window = CpuWindow.start()
            while more():
                done = self.bench.warmup + min(len(times), least)
                self.progress(ProgressEvent(Step.ARM, done, total, subject=arm.name, activity="timing", timing=True))
                t0 = time.perf_counter()
                self.run_pass(fn, arm, step=self.step(arm))
                dev.synchronize(self.device)
                times.append(time.perf_counter() - t0)
            # timed passes of a small model take milliseconds, too short to read the machine's load over:
            # the window is read after MIN_WINDOW_S at least (the load just after the passes)
            time.sleep(max(0.0, MIN_WINDOW_S - (time.perf_counter() - window.wall)))
            return window.others()

        threads = torch.get_num_threads()
        others = passes()
        retimed = None
        if busy(others, threads) and self.quiet_wait_s > 0 and self.waited_for_quiet(threads):
            # timed under load: once the others have left the cores, timed again, and that figure kept
            retimed = f"timed again once the load passed (other processes had used {others:.1f} cores)"
            times.clear()
            others = passes()
        if out is not None:
            out.busy = others
        self.progress(ProgressEvent(Step.ARM, total, total, subject=arm.name, activity="timing", timing=True))
        stats = latency_stats(times)
        stats.retimed = retimed
        mark_unstable(stats, others=others, busy=busy(others, threads))
        if stats.n and (out is None or (out.error is None and out.numerics_ok is not False)):
            self.fastest_s = min(self.fastest_s, stats.median / 1e3)
        return stats

    def waited_for_quiet(self, threads: int) -> bool:
        """Wait for other processes to leave the cores, out of what is left of `quiet_wait_s`."""
        t0 = time.perf_counter()
        quiet = wait_for_quiet(threads, limit_s=self.quiet_wait_s)
        self.quiet_wait_s = max(0.0, self.quiet_wait_s - (time.perf_counter() - t0)) if quiet else 0.0
        return quiet

    def warm_start(self, fn: Callable[..., Any], arm: Arm) -> float | None:
        """What a new process pays with the caches shipped: this process' compile artifacts saved
        (`torch.compiler.save_cache_artifacts`), loaded into empty caches, then one pass compiled."""
        blob = ti.save_cache_artifacts()
        if blob is None:
            return None
        self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="compiling (caches loaded from artifacts)"))
        with ti.fresh_inductor_cache(True):
            ti.fresh_dynamo_state()
            if not ti.load_cache_artifacts(blob):
                return None
            with ti.count_compiles() as started:
                self.run_pass(fn, arm, step=self.step(arm))
        ti.fresh_dynamo_state()
        return round(started.compile_time_s, 4)

    def draws_random(self, arm: Arm) -> bool:
        """Whether the model draws random numbers: the eager pass once more from another seed, compared."""
        if self.eager is None or self.seed is None:
            return False
        same = SameAs(self.eager)
        with preserved_state(arm.model, parameters=self.steps), self.grad():
            self.new_optimizer(arm)
            self.run_pass(arm.model, arm, seed=self.seed + 7919, sink=same)
        return same.differs

    def like_eager(self, arm: Arm) -> bool:
        """A random model's compiled inductor arm: its numerics need a compile that draws as eager does."""
        return self.random and arm.compiled and not arm.aot and self.bench.backend == "inductor"

    def comparable_pass(self, arm: Arm, step: Callable[[], None] | None, start: dict[str, torch.Tensor]) -> rm.NumericsCheck:
        """The arm compiled once more with `fallback_random` (inductor's own random kernels draw other numbers
        than eager's), from the state the arm started in, one seeded pass judged as it runs; the timings
        stay those of the arm's own compile."""
        assert self.reference is not None
        self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="numerics (random numbers drawn as eager draws them)"))
        judgement = self.reference.judgement(arm.compare_outputs)
        with preserved_state(arm.model, parameters=True):
            arm.model.load_state_dict(start)
            self.new_optimizer(arm)
            ti.fresh_dynamo_state()
            with ti.random_like_eager(), self._compiled(arm) as fn:
                self.run_pass(fn, arm, seed=self.seed, sink=judgement, step=step)
            ti.fresh_dynamo_state()
        return judgement.result()

    def make_reference(self, model: torch.nn.Module, calls: list[Call]) -> Reference | None:
        """After the eager arm, on its copy: the same calls at float64, once for every arm; eager's
        results are kept in the reference's store (memory, or a temporary file when large)."""
        if self.eager is None:
            return None
        self.progress(ProgressEvent(Step.BENCH_REFERENCE))
        self.reference = make_reference(
            model, self.workload, calls, self.eager, seed=self.seed, train=self.train,
            device=self.device, loose=loose_backend(self.bench.backend), steps=self.steps, room=self.room,
        )  # fmt: skip
        ti.fresh_dynamo_state()
        return self.reference

    def adopt(self, reference: Reference) -> None:
        """Judge every arm by `reference` (the fix phase's, or the parent's shared with this child)."""
        self.reference, self.shared = reference, True
        self.random = reference.random is not None
        reference.loose = loose_backend(self.bench.backend)  # the elementwise fallback, for this backend's float math

    def close(self) -> None:
        """Let go of eager's kept results and the reference (a shared one stays its owner's)."""
        if self.reference is not None and not self.shared:
            self.reference.close()
        if self.eager is not None:
            self.eager.close()
        self.reference = None
        self.eager = None

    def run_arm(self, arm: Arm, report: rm.Report | None = None) -> rm.BenchmarkArm:
        if arm.aot:
            return run_aot_arm(
                arm, self.workload, report, self.reference, lambda fn: self.timed(fn, arm),
                device=self.device, strict=self.bench.aot_strict, progress=self.progress,
            )  # fmt: skip
        out = rm.BenchmarkArm(name=arm.name, description=arm.description, code=arm.code)
        step = self.step(arm)
        graphs: ti.CudaGraphLog | None = None  # set once the arm's passes start under CUDA graphs
        try:
            with (
                preserved_state(arm.model, parameters=self.steps),
                self.grad(),
                ti.fresh_inductor_cache(arm.compiled and self.bench.fresh_cache and has_compile_cache(self.bench.backend)),
                ti.dynamo_config(arm.config),
            ):
                ti.fresh_dynamo_state()
                with ti.cudagraph_log() if step is not None else contextlib.nullcontext(None) as graphs:
                    self._run(arm, out, step)
        except Exception as exc:  # noqa: BLE001 - one failing arm is a row, not the benchmark
            out.error = f"{type(exc).__name__}: {describe_error(exc)}"[:500]
            out.out_of_memory = out_of_memory(exc)
        finally:
            out.peak_memory_mb = dev.peak_memory_mb(self.device)  # what it reached, also when it failed
            out.peak_reserved_mb = dev.peak_reserved_mb(self.device)
            ti.fresh_dynamo_state()
        if graphs is not None:
            out.cudagraphs = rm.CudaGraphStats(
                step_marked=True,
                recordings=graphs.recordings,
                skip_count=graphs.skip_count,
                skips=dict(graphs.skips.most_common(10)),
                rerecords=dict(graphs.rerecords.most_common(10)),
                warnings=dict(graphs.warnings.most_common(5)),
            )
        return out

    def _run(self, arm: Arm, out: rm.BenchmarkArm, step: Callable[[], None] | None) -> None:
        """The arm's cold pass, warm-cache pass, numerics check and timed passes, into `out`."""
        seed = self.seed
        dev.reset_peak_memory(self.device)
        if arm.variant is not None:
            arm.variant.run_warm_up(self.workload, seed)
        self.new_optimizer(arm)  # fresh state: the first pass starts where eager's and the reference's did
        start = {k: v.detach().clone() for k, v in arm.model.state_dict().items()} if self.like_eager(arm) else {}
        with self._compiled(arm) as fn:
            self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="compiling (cold)" if arm.compiled else "first pass"))
            # eager's results are kept (every arm is judged against them); an arm's are judged as they come
            judging = arm.compiled and self.reference is not None and not self.like_eager(arm)
            judgement = self.reference.judgement(arm.compare_outputs) if judging and self.reference is not None else None
            kept = KeptResults() if not arm.compiled and not self.shared else None
            with ti.count_compiles() as cold:
                t0 = time.perf_counter()
                self.run_pass(fn, arm, seed=seed, sink=kept or judgement, step=step)
                dev.synchronize(self.device)
                out.first_pass_s = round(time.perf_counter() - t0, 4)
            if arm.compiled:
                out.compile_time_s = round(cold.compile_time_s, 4)
                out.compile_phases = {k: round(v, 4) for k, v in cold.phases.items() if v > 0}
                out.backward_compile_s = round(cold.backward_s, 4) if cold.backward_s else None
                out.graph_count, out.graph_break_count, out.recompile_count = cold.graphs, cold.graph_breaks, cold.recompiles
                if has_compile_cache(self.bench.backend) and (arm.name in WARM_ARMS or self.bench.aot):
                    self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="compiling (warm cache)"))
                    ti.fresh_dynamo_state()
                    with ti.count_compiles() as warm:
                        self.run_pass(fn, arm, step=step)
                    out.warm_compile_time_s = round(warm.compile_time_s, 4)
            passes = 1 + (out.warm_compile_time_s is not None)
            if kept is not None:
                self.eager = kept
                self.random = self.draws_random(arm)
                passes += self.seed is not None  # the pass from another seed
            elif judgement is not None:
                record_check(out, judgement.result())
            with ti.count_compiles() as during:
                out.latency_ms = self.timed(fn, arm, out, ran=passes)
            compiles = None
            if arm.compiled:
                extra = during.frames
                out.recompile_causes = recompile_causes(arm_recompiles(cold.recompile_events + during.recompile_events))
                if extra:
                    out.recompile_count = (out.recompile_count or 0) + extra
                    out.timed_compiles = extra
                    timed = recompile_causes(arm_recompiles(during.recompile_events))
                    named = "; ".join(c.summary for c in timed[:2]) if timed else "compiles of new frames"
                    compiles = f"{extra} compile(s) during the timed passes ({named}): the steady state was never reached"
                    mark_unstable(out.latency_ms, compiles=compiles, others=out.busy, busy=busy(out.busy, torch.get_num_threads()))
            if arm.compiled and self.bench.aot and self.bench.backend == "inductor" and arm.name == "compiled":
                out.warm_start_compile_s = self.warm_start(fn, arm)  # it clears the compiled code
        if self.reference is not None and self.like_eager(arm):
            record_check(out, self.comparable_pass(arm, step, start))
            if out.numerics is not None:
                out.numerics.random = "judged on a second compile with torch._inductor.config.fallback_random=True, same seed per call"
        elif self.random and arm.compiled and out.numerics is not None:
            out.numerics.random = "same seed per call (this backend draws as eager does)"


def record_check(out: rm.BenchmarkArm, check: rm.NumericsCheck) -> None:
    """The arm's numerics: its first pass judged against eager's (`running.numerics`)."""
    out.numerics, out.numerics_ok, out.max_abs_error = check, check.ok, check.max_abs_vs_eager


MIN_WINDOW_S = 0.1
"""The shortest window over which an arm's timing reads other processes' CPU (`CpuWindow`)."""


def run_bench(ctx: PhaseContext, bench: BenchOptions) -> BenchSection:
    """Measure every arm (in a child process when `bench.isolate`); the regional suggestion gets the
    measured effect of its arm."""
    report = ctx.report
    assert report is not None
    t0 = time.perf_counter()
    result, bench = _start(ctx, bench)
    try:
        where = run_isolated(ctx, bench, result)
        if where != "child":
            _run_in_process(_rebuilt(ctx) if where == "rebuild here" else ctx, bench, result)
    except Stopped as stop:  # the arms measured before the stop are kept, and concluded on
        done = ", ".join(a.name for a in result.arms) or "none"
        result.notes.append(f"the run was stopped during the benchmark: arms measured before it: {done}.")
        _conclude(result, bench, len(ctx.calls))
        result.duration_s = round(time.perf_counter() - t0, 3)
        stop.partial = BenchSection(result, _regional_verifications(report, result))
        raise
    _conclude(result, bench, len(ctx.calls))
    section = BenchSection(result, _regional_verifications(report, result))
    compiled = next((a for a in result.arms if a.name == "compiled"), None)
    if compiled is not None and not compiled.out_of_memory and is_torch_failure(compiled.error):
        ctx.progress(ProgressEvent(Step.BENCH, subject="compiled: PyTorch bug"))
        try:  # the model, built again when this process let it go for the arms' child
            here: PhaseContext | None = _rebuilt(ctx) if ctx.rebuild is not None else ctx
        except Exception:  # noqa: BLE001 - it cannot be built again here: nothing to triage
            here = None
        bug = triage_compiled_arm(here, bench) if here is not None else None
        release_memory(ctx.settings.where)  # the model built again for it, and its compiles
        if bug is not None:
            section.torch_bugs.append(bug)
    result.duration_s = round(time.perf_counter() - t0, 3)
    return section


def _rebuilt(ctx: PhaseContext) -> PhaseContext:
    """The workload built again in this process (its model was let go for a child that could not start):
    the arms run on it as the child would have."""
    assert ctx.rebuild is not None
    workload = ctx.rebuild()
    device = ctx.settings.device
    calls = calls_on(workload, device)
    return replace(ctx, workload=workload, calls=calls, pristine=workload.model, release=None, rebuild=None)


WARM_ARMS = ("compiled", "compiled_fixed")
"""The arms whose warm-cache compile is measured (a compile again, from the caches the cold one filled): the
cache lever and the fixes' verdicts read them; each other arm's would cost a compile and decide nothing
(with --aot every arm's, for the cold start of a new process)."""


def has_compile_cache(backend: str) -> bool:
    """Whether `backend` keeps a compile cache a restart reuses (inductor's FX graph and AOTAutograd
    caches): only then does each arm get a fresh cache and is a warm-cache compile measured. With eager
    or aot_eager a second compile measured 0.6-1.3x the first (the built-in training step's arms, 2-core CPU)."""
    return backend == "inductor"


def _start(ctx: PhaseContext, bench: BenchOptions) -> tuple[rm.Benchmark, BenchOptions]:
    """The benchmark's settings and the notes on options that do not apply; the options as they apply."""
    device = ctx.settings.where
    result = rm.Benchmark(
        device=device,
        machine=machine_at_start(device),
        settings={
            "backend": bench.backend,
            "mode": bench.mode or "default",
            "iters": bench.iters if bench.iters is not None else _auto_iters(bench),
            "warmup": bench.warmup,
            "grad": _grad_setting(ctx),
            "fresh_cache": bench.fresh_cache and has_compile_cache(bench.backend),
            "warm_compile": (
                ("measured on every arm (--aot: the cold start)" if bench.aot else f"measured on {' and '.join(WARM_ARMS)} (caches filled)")
                if has_compile_cache(bench.backend)
                else f"not measured: backend {bench.backend} has no compile cache"
            ),
            "torch_threads": torch.get_num_threads(),
            "pass": f"{len(ctx.calls)} call(s): the first call and its variants",
            **({"aot_export": "strict" if bench.aot_strict else "non-strict"} if bench.aot else {}),
        },
    )
    if bench.mode and bench.mode != "default" and bench.backend != "inductor":
        result.notes.append(f"--mode {bench.mode} applies to inductor only; ignored for backend {bench.backend}.")
        bench = replace(bench, mode=None)
    if bench.modes and bench.backend != "inductor":
        result.notes.append(f"--modes {','.join(bench.modes)}: modes are inductor's; no mode arms with backend {bench.backend}.")
    cuda_graph_modes = [m for m in bench.modes if m in CUDA_GRAPH_MODES]
    if cuda_graph_modes and not device.startswith("cuda"):
        result.notes.append(f"{', '.join(cuda_graph_modes)} use CUDA graphs: on CPU they measure inductor without them.")
    if bench.mode == "reduce-overhead" and not device.startswith("cuda"):
        result.notes.append("reduce-overhead uses CUDA graphs: on CPU it behaves like the default mode.")
    return result, bench


def plan_arms(ctx: PhaseContext, runner: ArmRunner, notes: list[str]) -> list[Arm]:
    """The arms to measure, in order (eager first), none holding a copy of the model yet (`measure_arm`
    makes each one's when it runs); why an arm is left out goes to `notes`."""
    report, bench = ctx.report, runner.bench
    assert report is not None
    arms = arms_for(report, ctx.workload, ctx.calls, ctx.facts, bench, ctx.settings.train)
    fixed = next((i for i, a in enumerate(arms) if a.name == "compiled_fixed"), None)
    if bench.per_fix and fixed is not None and (not bench.arms or "fixed" in bench.arms):
        arms[fixed + 1 : fixed + 1] = fix_arms(report, ctx.workload.model, ctx.calls, runner.steps)
    if ctx.settings.train:
        notes.extend(f"{a.name}: AOT arms are inference only; not run with --train." for a in arms if a.aot)
        arms = [a for a in arms if not a.aot]
    if bench.arms:
        chosen = {"eager", "compiled", *bench.arms}
        kept = [a for a in arms if a.name.startswith("compiled[") or arm_kind(a.name) in chosen]
        left = [a.name for a in arms if a not in kept]
        if left:
            notes.append(f"--arms {','.join(bench.arms)}: {', '.join(left)} not measured.")
        arms = kept
    elif runner.steps:
        left = [a.name for a in arms if arm_kind(a.name) in TRAINING_OPT_IN and arm_kind(a.name) not in bench.add_arms]
        if left:
            kinds = ",".join(f"+{k}" for k in TRAINING_OPT_IN if any(arm_kind(n) == k for n in left))
            notes.append(f"{OPT_IN_MARK}{', '.join(left)} not measured (opt-in for training steps: --arms {kinds})")
            arms = [a for a in arms if a.name not in left]
    return arms


def measure_arm(ctx: PhaseContext, runner: ArmRunner, arm: Arm) -> tuple[rm.BenchmarkArm, dict[str, Any]]:
    """One arm measured on its own copy of the pristine model, dropped after; the eager arm's copy then
    serves the numerics reference every later arm is judged against (the settings it adds come back)."""
    source = ctx.pristine if ctx.pristine is not None else None
    try:
        with materialized(arm, source, ctx.settings.device, share=ctx.settings.shares) as ready:
            measured = runner.run_arm(ready, ctx.report)
            settings = after_eager(runner, ready.model, ctx.calls) if arm.name == "eager" and not measured.error else {}
    except VariantError as exc:
        return rm.BenchmarkArm(name=arm.name, description=arm.description, code=arm.code, error=f"the fixed copy: {exc}"[:500]), {}
    finally:
        release_memory(ctx.settings.where)
    return measured, settings


def after_eager(runner: ArmRunner, model: torch.nn.Module, calls: list[Call]) -> dict[str, Any]:
    """After the eager arm, on its copy: the numerics reference every other arm is judged against; the settings it adds."""
    settings: dict[str, Any] = {}
    reference = runner.reference if runner.shared else runner.make_reference(model, calls)
    if reference is not None:
        settings["numerics"] = reference.method + (f" ({reference.note})" if reference.note else "")
        settings["numerics_reference_s"] = reference.duration_s
        if runner.shared:
            settings["numerics_reference"] = "the fix phase's (the same calls and seed on the same pristine model): no run of its own"
        in_memory, on_disk = reference.kept_bytes()
        settings[KEPT] = f"{_mb(in_memory)} in memory, {_mb(on_disk)} in a temporary file"
        if not runner.shared and reference.run is not None:
            settings[REFERENCE_RUN] = reference.run.model_dump(mode="json")
    if runner.random:
        settings["random"] = (
            "the model draws random numbers (eager from another seed differs): every run seeded alike per call; "
            "inductor arms judged on a second compile with fallback_random=True"
        )
    return settings


def _run_in_process(ctx: PhaseContext, bench: BenchOptions, result: rm.Benchmark) -> None:
    """Every arm in this process, eager first (a crash in one ends the run)."""
    runner = ArmRunner(ctx, bench)
    runner.prime()
    budget = ArmBudget(ctx.budget_s)
    try:
        for arm in plan_arms(ctx, runner, result.notes):
            why = budget.left_out(arm.name) or budget.needless(arm.name, result.arms)
            if why is not None:
                result.notes.append(why)
                continue
            t0 = time.perf_counter()
            measured, settings = measure_arm(ctx, runner, arm)
            budget.spent(time.perf_counter() - t0, arm.compiled)
            result.arms.append(measured)
            if arm.name == "eager" and measured.error:
                result.notes.append("eager failed: nothing to compare against.")
                break
            result.settings.update(settings)
    finally:
        runner.close()


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 10 * 2**20 else f"{n / 2**20:.1f} MB"


KEPT = "numerics_kept"
"""The settings key eager's answer carries what the judgement kept in (moved to `Benchmark.kept`)."""
REFERENCE_RUN = "numerics_reference_run"
"""The settings key eager's answer carries the benchmark's own reference run in (moved to `Benchmark.reference`)."""


def _conclude(result: rm.Benchmark, bench: BenchOptions, calls: int) -> None:
    """Speedups, pace, the arm for the job, the best arm and the cold start, from the arms measured."""
    kept = result.settings.pop(KEPT, None)
    if kept is not None:
        result.kept = f"eager's results and the reference's differences: {kept}"
    run = result.settings.pop(REFERENCE_RUN, None)
    if run is not None:
        result.reference = rm.ReferenceRun.model_validate(run)
    price_opt_in(result)
    if result.machine is not None:
        conclude_load(result.machine, result.arms)
        if result.machine.note:
            result.notes.append(result.machine.note)
    eager = next((a for a in result.arms if a.name == "eager"), None)
    if eager and eager.latency_ms:
        for arm_result in result.arms:
            if arm_result.latency_ms and arm_result.latency_ms.median > 0:
                arm_result.speedup_vs_eager = round(eager.latency_ms.median / arm_result.latency_ms.median, 3)
    for arm_result in result.arms:
        pace(arm_result, eager, calls)
    result.objective = bench.objective  # type: ignore[assignment]
    result.best_arm, result.best_arm_reason, result.within_noise = best_arm(result, result.objective)
    if bench.job_steps is not None:
        result.job_steps = bench.job_steps
        # no compiled arm measured: no arm for the job either (eager would win by default, not by measure)
        result.job_best_arm = best_for_job(result.arms, calls, bench.job_steps) if unmeasured(result) is None else None
    result.cold_start = cold_start(result) if bench.aot else None


def _auto_iters(bench: BenchOptions) -> str:
    return f"auto: {AUTO_MIN} to {bench.max_iters or AUTO_MAX} passes, until the median is known within 2 % or {AUTO_BUDGET_S:g} s"


def _grad_setting(ctx: PhaseContext) -> str:
    if not ctx.settings.train:
        return "grad enabled (Workload.grad)" if ctx.workload.grad else "no_grad"
    if ctx.workload.optimizer is None:
        return "forward+backward"
    return "training step: forward, loss, backward, optimizer.step, zero_grad"


def _regional_verifications(report: rm.Report, result: rm.Benchmark) -> dict[str, rm.Verification]:
    """The regional-compilation suggestion's measured effect: its arm against the whole-model arm."""
    arms = {a.name: a for a in result.arms}
    whole = arms.get("compiled_fixed") or arms.get("compiled")
    regional = arms.get("regional_fixed") or arms.get("regional")
    verified: dict[str, rm.Verification] = {}
    if regional is None or whole is None:
        return verified
    for s in report.suggestions:
        if s.rule != "regional-compile":
            continue
        ok = regional.error is None and regional.numerics_ok is not False
        summary = None
        if whole.compile_time_s is not None and regional.compile_time_s is not None:
            summary = f"cold compile {whole.compile_time_s:.2f} s ({whole.name}) -> {regional.compile_time_s:.2f} s ({regional.name})"
            if whole.latency_ms and regional.latency_ms:
                summary += f"; latency {whole.latency_ms.median:.3f} -> {regional.latency_ms.median:.3f} ms"
        why = regional_recompile_reason(regional)
        if why:
            summary = f"{summary}; {why}" if summary else why
        verified[s.id] = rm.Verification(
            applied=regional.error is None,
            safe=ok,
            effective=bool(
                ok
                and whole.compile_time_s is not None
                and regional.compile_time_s is not None
                and regional.compile_time_s < whole.compile_time_s
            ),
            numerics_ok=regional.numerics_ok,
            numerics=regional.numerics,
            max_abs_error=regional.max_abs_error,
            max_rel_error=regional.max_rel_error,
            error=regional.error,
            summary=summary,
        )
    return verified
