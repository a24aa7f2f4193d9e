"""The arms' runner: one arm's passes (cold compile, warm compile, warm-up and timed passes), its
numerics judged against eager's run and the float64 reference, the same in this process and in the
arms' child (`child`, `analyzer/workers/bench`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ....vocabulary import CUDA_GRAPH_MODES
from ....workload import Call
from ... import torch_internals as ti
from ...readers.causes import arm_recompiles, recompile_causes
from ...readers.text import describe_error
from ...resources.cpu import QUIET_WAIT_S
from ...resources.load import CpuWindow, busy, wait_for_quiet
from ...running import device as dev
from ...running.calls import Sample, preserved_state, run_pass
from ...running.memory import arm_cap, out_of_memory
from ...running.numerics import KeptResults, Reference, SameAs, loose_backend, record_draws
from ...running.reference.precision import make_reference
from ..context import LentCompile, PhaseContext
from .aot import run_aot_arm
from .arms import Arm
from .numbers import (
    AUTO_BUDGET_S,
    AUTO_FEW,
    AUTO_MAX,
    AUTO_MIN,
    MIN_STEADY,
    WARM_ENOUGH_S,
    behind,
    latency_stats,
    least_passes,
    mark_unstable,
    settled,
    spread,
)
from .options import BenchOptions

WARM_ARMS = ("compiled", "compiled_fixed")
"""The arms whose warm-cache compile is measured (a compile again, from the caches the cold one filled): the
cache lever and the fixes' verdicts read them; each other arm's would cost a compile and decide nothing
(with --aot every arm's, for the cold start of a new process)."""


def has_compile_cache(backend: str) -> bool:
    """Whether `backend` keeps a compile cache a restart reuses (inductor's FX graph and AOTAutograd
    caches): only then does each arm get a fresh cache and is a warm-cache compile measured. With eager
    or aot_eager a second compile measured 0.6-1.3x the first (the built-in training step's arms, 2-core CPU)."""
    return backend == "inductor"


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
        self.steady_least = MIN_STEADY
        """The timed passes the last figure `timed` measured needed to be steady (AUTO_FEW when its long passes
        settled): what marking it again, with the compiles during its passes, holds it to."""
        self.fastest_s = float("inf")
        """The fastest median pass of the arms measured so far (eager's and the compiled arms' that ran
        without error): adaptive timing stops an arm once it is clearly behind it."""
        self.quiet_wait_s = QUIET_WAIT_S
        """What is left of the time the arms may wait, together, for a load to pass before timing again: a
        machine that stays busy costs it once, not once per arm."""
        self.reference: Reference | None = None
        self.room = ctx.room
        self.lent = ctx.fixed_compile
        """The fix phase's compile of the applied fixes on this backend (`from_fix_compile`)."""
        self.random = False
        """The model draws random numbers (dropout, rand): eager from another seed gave other results."""
        self.shared = False
        """The reference came from the fix phase (same calls, seed and pristine model): no run of its own."""
        self.own_peak_mb: float | None = None
        """The workload's own peak: the larger of the eager arm's and the compiled arm's (the user's own compile);
        with `--memory-limit` every other compiled arm may hold it plus the limit, and no more."""
        self.opt_in_left: list[str] = []
        """The training arms the plan left out for the asking (`arms.price_opt_in` says what they would cost)."""
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
        if arm.variant is not None and arm.variant.compile_only:  # submodules compiled in place, the rest eager
            options = {**self.compile_kwargs(), **arm.compile_options}
            with arm.variant.compiled(lambda fn, **kw: torch.compile(fn, **{**options, **kw})) as compiled:
                yield compiled
            return
        if arm.regional_paths:
            blocks = [arm.model.get_submodule(p) for p in arm.regional_paths]
            with ti.regional_compile(blocks, **{**self.compile_kwargs(), **arm.compile_options}):
                yield arm.model
            return
        yield torch.compile(arm.model, **{**self.compile_kwargs(), **arm.compile_options})

    def prime(self) -> float:
        """Pay the backend's one-time costs (imports, compiler checks) before the first measured arm; the
        seconds they took (in this process, once: after the fix phase's compile on the user's backend, the
        figure that compile's warm-up took). In the caller's own compile cache, not a fresh one: what they build there (the C++
        compiler's vector-ISA checks, 4-5 s on a 2-core CPU) is the machine's, not the model's, and the
        user's own compiles reuse it just the same; each arm still compiles in a fresh cache."""
        self.progress(ProgressEvent(Step.BENCH, activity="warming up the compiler"))
        seconds = dev.warm_compiler(self.device, self.bench.backend, self.bench.mode)  # paid once a process
        ti.fresh_dynamo_state()
        return seconds

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
        the median) up to `max_iters`; adaptive (iters None): until the median is settled (AUTO_FEW long passes at least), within a budget,
        or as soon as the arm is clearly behind the fastest arm so far (`behind`). Adaptive warm-up of a
        pass longer than WARM_ENOUGH_S stops early (not under CUDA graphs, which record on later passes): a
        compiled arm that ran `ran` >= 2 whole passes already (its first and its warm-cache pass), or an
        uncompiled one (eager) that ran one (its first: the model's first-call set-up done, nothing left to
        compile), needs none, and its first pass is timed; a compiled arm that ran one (its cold pass) needs
        one; else once two passes agree within 10 %. Other processes' CPU during the timed passes goes to
        `out.busy`."""
        fixed = self.bench.iters is not None
        least = self.bench.iters if self.bench.iters is not None else AUTO_MIN
        limit = self.bench.max_iters or (3 * least if fixed else AUTO_MAX)
        total = self.bench.warmup + least
        warm: list[float] = []
        times: list[float] = []
        whole = 2 if arm.compiled else 1  # whole passes after which the arm needs no warm-up (one after one fewer)
        graphs = self.step(arm) is not None  # CUDA graphs record on later passes: warmed up until two agree
        moved: CpuWindow | None = None  # the load read over a warm-up pass that became the first timed one
        for i in range(self.bench.warmup):
            window = CpuWindow.start()
            self.progress(ProgressEvent(Step.ARM, i, total, subject=arm.name, activity="timing", timing=True))
            t0 = time.perf_counter()
            self.run_pass(fn, arm, step=self.step(arm))
            dev.synchronize(self.device)
            warm.append(time.perf_counter() - t0)
            if fixed or warm[-1] <= WARM_ENOUGH_S:
                continue
            if not graphs and ran >= whole and len(warm) == 1:
                times.append(warm.pop())  # warm already: its first pass after them is a timed one
                moved = window
                break
            agree = len(warm) >= 2 and abs(warm[-1] - warm[-2]) <= 0.1 * warm[-2]
            if (not graphs and ran >= 1 and ran + len(warm) >= whole) or agree:
                break

        def more() -> bool:
            if len(times) < least:
                # long passes (LONG_PASS_S): a settled median on AUTO_FEW of them stands (adaptive only)
                return fixed or not settled(times)
            if len(times) >= limit:
                return False
            if fixed:
                return spread(times) > 0.05
            return not settled(times) and sum(times) < AUTO_BUDGET_S and not behind(times, self.fastest_s)

        def passes(window: CpuWindow | None = None) -> float | None:
            window = window or CpuWindow.start()
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
        others = passes(moved)
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
        settled_few = not fixed and least_passes(times) == AUTO_FEW and settled(times)  # long passes, settled on 3
        self.steady_least = AUTO_FEW if settled_few else MIN_STEADY
        mark_unstable(stats, others=others, busy=busy(others, threads), least=self.steady_least)
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

    @contextlib.contextmanager
    def as_it_started(self, arm: Arm, start: dict[str, torch.Tensor]) -> Iterator[None]:
        """The eager arm's model as its kept pass started (`start`, a fresh optimizer) for one more pass,
        then as it was before."""
        with preserved_state(arm.model, parameters=self.steps), self.grad():
            put_back(arm.model, start)
            self.new_optimizer(arm)
            yield

    def draws_random(self, arm: Arm, start: dict[str, torch.Tensor]) -> bool:
        """Whether the model draws random numbers: the eager pass once more from another seed, compared. It
        starts from `start`, the state the first pass started from: with an optimizer its parameters (that
        pass stepped them: from them, a model that draws nothing random would differ all the same), else its
        buffers (running statistics, a counter the forward moves)."""
        if self.eager is None or self.seed is None:
            return False
        same = SameAs(self.eager)
        with self.as_it_started(arm, start):
            self.run_pass(arm.model, arm, seed=self.seed + 7919, sink=same)
        return same.differs

    def record_draws(self, arm: Arm, start: dict[str, torch.Tensor]) -> None:
        """A random model's draws, for the reference: the eager pass once more from the kept pass's seed and
        state, recording them (`running.draws`: not in the kept, timed pass)."""
        if self.eager is None or self.seed is None:
            return
        with self.as_it_started(arm, start):
            eager, seed = self.eager, self.seed
            record_draws(eager, lambda sink, draws: self.run_pass(arm.model, arm, seed=seed, sink=sink, draws=draws))

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
        with contextlib.nullcontext() if arm.owned else preserved_state(arm.model, parameters=True):  # its own copy: dropped after
            arm.model.load_state_dict(start)
            self.new_optimizer(arm)
            ti.fresh_dynamo_state()
            with ti.random_like_eager(), self._compiled(arm) as fn:
                self.run_pass(fn, arm, seed=self.seed, sink=judgement, step=step)
            ti.fresh_dynamo_state()
        return judgement.result()

    def start_state(self, arm: Arm) -> dict[str, torch.Tensor]:
        """The state the arm starts in, for its second compile's judged pass: the pristine model's own tensors
        when the arm's model is a fresh copy of it (no copy: a 1B model's 2.4 GB), else a copy of its own."""
        if arm.owned and arm.origin is not None:
            return dict(arm.origin.state_dict())
        return {k: v.detach().clone() for k, v in arm.model.state_dict().items()}

    def make_reference(self, model: torch.nn.Module, calls: list[Call], disposable: bool = False) -> Reference | None:
        """After the eager arm, on its copy: the same calls at float64, once for every arm; eager's
        results are kept in the reference's store (memory, or a temporary file when large). `disposable`:
        the copy is dropped after, so a training run need not keep its values to put them back."""
        if self.eager is None:
            return None
        self.progress(ProgressEvent(Step.BENCH_REFERENCE))
        self.reference = make_reference(
            model, self.workload, calls, self.eager, seed=self.seed, train=self.train,
            device=self.device, loose=loose_backend(self.bench.backend), steps=self.steps, room=self.room, random=self.random,
            disposable=disposable,
        )  # fmt: skip
        ti.fresh_dynamo_state()
        return self.reference

    def adopt(self, reference: Reference) -> None:
        """Judge every arm by `reference` (the fix phase's, or the parent's shared with this child)."""
        self.reference, self.shared = reference, True
        self.random = reference.random is not None
        reference.loose = loose_backend(self.bench.backend)  # the elementwise fallback, for this backend's float math

    def capped(self, arm: Arm) -> contextlib.AbstractContextManager[str | None]:
        """The cap the arm runs under (`memory.arm_cap`: past it, it fails as out of memory); what was
        capped, or None. With `--memory-limit`, a compiled arm the doctor explores (fixed, regional, a
        mode...) may hold the workload's own peak (eager's and the user's own compile's, the `compiled` arm)
        plus the limit: not the eager and compiled arms, which are the workload itself, nor on CUDA under
        `--arm-memory-limit`, the child's own share of the device."""
        limit, peak = self.bench.memory_limit_mb, self.own_peak_mb
        cuda_capped = bool(self.bench.arm_memory_mb) and self.device.startswith("cuda")
        if not limit or peak is None or not arm.compiled or arm.name in ("eager", "compiled") or cuda_capped:
            return contextlib.nullcontext(None)
        return arm_cap(peak + limit, self.device, f"the workload's own peak {peak:.0f} MB + --memory-limit {limit} MB")

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
        fresh = arm.compiled and self.bench.fresh_cache and has_compile_cache(self.bench.backend)
        lent = self.from_fix_compile(arm, report) if fresh else None
        try:
            with (
                self.capped(arm) as out.memory_cap,
                contextlib.nullcontext() if arm.owned else preserved_state(arm.model, parameters=self.steps),
                self.grad(),
                ti.fresh_inductor_cache(fresh, keep_in=lent.cache_dir if lent is not None else None),
                ti.dynamo_config(arm.config),
            ):
                ti.fresh_dynamo_state()
                with ti.cudagraph_log() if step is not None else contextlib.nullcontext(None) as graphs:
                    self._run(arm, out, step, lent)
        except Exception as exc:  # noqa: BLE001 - one failing arm is a row, not the benchmark
            out.error, out.error_type = f"{type(exc).__name__}: {describe_error(exc)}"[:500], type(exc).__name__
            out.out_of_memory = out_of_memory(exc)
            if out.out_of_memory and out.memory_cap:
                out.error = f"out of memory within its cap ({out.memory_cap}): {out.error}"[:500]
        finally:
            out.peak_memory_mb = dev.peak_memory_mb(self.device)  # what it reached, also when it failed
            out.peak_reserved_mb = dev.peak_reserved_mb(self.device)
            ti.fresh_dynamo_state()
        if arm.name in ("eager", "compiled") and out.error is None and out.peak_memory_mb is not None:
            self.own_peak_mb = max(self.own_peak_mb or 0.0, out.peak_memory_mb)
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

    def from_fix_compile(self, arm: Arm, report: rm.Report | None) -> LentCompile | None:
        """The fix phase's compile this arm may compile from: `compiled_fixed` of an inference run, the same
        fixes compiled on the same backend and mode (the fix phase compiled them in an empty cache it kept)."""
        lent = self.lent
        if lent is None or arm.name != "compiled_fixed" or self.train or report is None or report.fix is None:
            return None
        same = (lent.backend, lent.mode or "default") == (self.bench.backend, self.bench.mode or "default")
        return lent if same and list(lent.applied) == list(report.fix.applied) else None

    def _run(self, arm: Arm, out: rm.BenchmarkArm, step: Callable[[], None] | None, lent: LentCompile | None = None) -> None:
        """The arm's cold pass, warm-cache pass, numerics check and timed passes, into `out`. With `lent` (the
        fix phase compiled these graphs cold in the cache it runs in), its first pass compiles from that cache:
        its cold figures are that compile's, its first pass that pass with that compile in place of its own
        (an estimate, said in `settings`), and the compile it made is its warm-cache one."""
        seed = self.seed
        dev.reset_peak_memory(self.device)
        if arm.variant is not None:
            arm.variant.run_warm_up(self.workload, seed)
        self.new_optimizer(arm)  # fresh state: the first pass starts where eager's and the reference's did
        kept = KeptResults() if not arm.compiled and not self.shared else None
        # where its first pass starts: for a second compile's judged pass, or eager's pass from another seed
        start = self.start_state(arm) if self.like_eager(arm) or (kept is not None and self.steps and self.seed is not None) else {}
        if kept is not None and not start and self.seed is not None:  # the buffers its first pass may move (running
            start = {n: b.detach().clone() for n, b in arm.model.named_buffers()}  # stats, a counter): for the later passes
        with self._compiled(arm) as fn:
            self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="compiling (cold)" if arm.compiled else "first pass"))
            # eager's results are kept (every arm is judged against them); an arm's are judged as they come
            judging = arm.compiled and self.reference is not None and not self.like_eager(arm)
            judgement = self.reference.judgement(arm.compare_outputs) if judging and self.reference is not None else None
            warmed = False  # compiled from a filled cache already (the fix phase's)
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
                if lent is not None and cold.cache_hits and not cold.cache_misses:
                    out.warm_compile_time_s = round(cold.compile_time_s, 4)
                    out.first_pass_s = round(out.first_pass_s - cold.compile_time_s + lent.compile_time_s, 4)
                    out.compile_time_s, out.compile_phases = lent.compile_time_s, dict(lent.phases)
                    out.settings["cold_compile"] = (
                        f"the fix phase's compile of the same graphs on {lent.backend} ({lent.compile_time_s:.1f} s, an empty cache); "
                        f"this arm compiled from its cache in {cold.compile_time_s:.1f} s, and its first pass is estimated with "
                        "the cold compile in place of that one"
                    )
                elif lent is not None and cold.cache_hits:
                    out.settings["cold_compile"] = (
                        f"{cold.cache_hits} of {cold.cache_hits + cold.cache_misses} graphs came from the fix phase's compile: "
                        "the cold compile is an underestimate"
                    )
                warmed = out.warm_compile_time_s is not None
                if has_compile_cache(self.bench.backend) and (arm.name in WARM_ARMS or self.bench.aot) and not warmed:
                    self.progress(ProgressEvent(Step.ARM, subject=arm.name, activity="compiling (warm cache)"))
                    ti.fresh_dynamo_state()
                    with ti.count_compiles() as warm:
                        self.run_pass(fn, arm, step=step)
                        dev.synchronize(self.device)  # its queued work ends here, not in the first timed pass
                    out.warm_compile_time_s = round(warm.compile_time_s, 4)
            passes = 1 + (out.warm_compile_time_s is not None and not warmed)
            if kept is not None:
                self.eager = kept
                self.random = self.draws_random(arm, start)
                passes += self.seed is not None  # the pass from another seed
                if self.random:
                    self.record_draws(arm, start)
                    passes += 1
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
                    loaded = busy(out.busy, torch.get_num_threads())
                    mark_unstable(out.latency_ms, compiles=compiles, others=out.busy, busy=loaded, least=self.steady_least)
            if arm.compiled and self.bench.aot and self.bench.backend == "inductor" and arm.name == "compiled":
                out.warm_start_compile_s = self.warm_start(fn, arm)  # it clears the compiled code
        if self.reference is not None and self.like_eager(arm):
            record_check(out, self.comparable_pass(arm, step, start))
            if out.numerics is not None:
                out.numerics.random = "judged on a second compile with torch._inductor.config.fallback_random=True, same seed per call"
        elif self.random and arm.compiled and out.numerics is not None:
            out.numerics.random = "same seed per call (this backend draws as eager does)"


def put_back(model: torch.nn.Module, start: dict[str, torch.Tensor]) -> None:
    """The model's tensors named in `start` (a state dict, or its buffers alone) given those values."""
    if start:
        own = {**dict(model.named_buffers()), **model.state_dict(keep_vars=True)}
        with torch.no_grad():
            for name, value in start.items():
                own[name].copy_(value)


def record_check(out: rm.BenchmarkArm, check: rm.NumericsCheck) -> None:
    """The arm's numerics: its first pass judged against eager's (`running.numerics`)."""
    out.numerics, out.numerics_ok, out.max_abs_error = check, check.ok, check.max_abs_vs_eager


MIN_WINDOW_S = 0.1
"""The shortest window over which an arm's timing reads other processes' CPU (`CpuWindow`)."""
