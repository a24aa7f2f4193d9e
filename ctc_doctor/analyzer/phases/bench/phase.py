"""The bench phase: eager vs compiled vs compiled-with-fixes vs regional compilation, measured.

One pass = every call of the workload in order (first call, then the variants), so recompiles the
workload triggers are part of what is measured. Per compiled arm, in a fresh inductor cache:
1. cold pass: `torch._dynamo.reset()`, then one pass; compile time is Dynamo's frame compile time
   (backend included) from its compilation metrics, graph/break/recompile counts from the same;
2. warm pass: reset again and one more pass, now hitting the on-disk caches the cold pass filled;
3. `warmup` untimed passes, then timed passes with device synchronisation until the median is settled
   (adaptive, `numbers.settled`) or `iters` of them: median and IQR.
What the cold pass produced (outputs; training, losses and gradients too) is judged against eager's
own, both against a float64 copy of the model run once after the eager arm (`running.numerics`).
Inference runs under `torch.no_grad()` (unless `Workload.grad`); `--train` times forward+backward. Arms that fail record their
error and the others still run. With `isolate` the arms run in a child process (`child`), so
one that crashes the process (a segfault, an abort) is a `crash` row too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ....reports.verdicts import best_arm, cold_start, regional_recompile_reason, unmeasured
from ....vocabulary import CUDA_GRAPH_MODES, TRAINING_OPT_IN
from ....workload import Call
from ...fixes.variants import VariantError
from ...resources.load import conclude as conclude_load
from ...resources.load import machine_at_start
from ...resources.preflight import model_bytes
from ...running.calls import calls_on
from ...running.copying import CopyError, working_copy
from ...running.deadline import Stopped
from ...running.draws import replayed_text
from ...running.memory import let_go, release_memory
from ...triage import STAGES, is_torch_failure
from ..context import PhaseContext
from .arms import OPT_IN, Arm, arm_kind, arms_for, fix_arms, materialized, need_beyond, price_opt_in
from .child import run_isolated
from .crash import triage_compiled_arm
from .loop import Measured, measure_arms
from .numbers import (
    AUTO_BUDGET_S,
    AUTO_FEW,
    AUTO_MAX,
    AUTO_MIN,
    LONG_PASS_S,
    best_for_job,
    pace,
)
from .options import BenchOptions
from .runner import WARM_ARMS, ArmRunner, has_compile_cache, put_back
from .staged import Checkpoint


@dataclass
class BenchSection:
    """The benchmark, and what it measured of the suggestions it can judge (regional compilation)."""

    benchmark: rm.Benchmark
    verified: dict[str, rm.Verification] = field(default_factory=dict)
    """Suggestion id -> the measured effect (the regional-compilation suggestion, from its arm)."""
    torch_bugs: list[rm.TorchBug] = field(default_factory=list)
    """The compiled arm crashed inside PyTorch: triaged, ready to file."""


def run_bench(ctx: PhaseContext, bench: BenchOptions, resumed: rm.Benchmark | None = None) -> BenchSection:
    """Measure every arm (in a child process when `bench.isolate`; in this process, a checkpoint before
    each, in a supervised run: `bench.stage`); the regional suggestion gets the measured effect of its arm.
    `resumed`: the arms a supervised run measured before a crash, and the crash's rows (`staged.load`)."""
    report = ctx.report
    assert report is not None
    t0 = time.perf_counter()
    result, bench = _start(ctx, bench)
    if resumed is not None:
        result.settings.update(resumed.settings)
        result.notes, result.arms = resumed.notes, resumed.arms
    try:
        if bench.stage is not None:
            _run_supervised(ctx, bench, result)
        else:
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
    seen = _triaged_already(report, compiled)
    if seen is not None:
        result.notes.append(
            f"the compiled arm crashed as the analysis's own compile did ({seen.stage}): that bug, triaged above, stands for both."
        )
    elif (
        compiled is not None and not compiled.out_of_memory and (is_torch_failure(compiled.error_type) or is_torch_failure(compiled.error))
    ):
        ctx.progress(ProgressEvent(Step.BENCH, subject="compiled: PyTorch bug"))
        source = ctx.pristine if ctx.pristine is not None else ctx.workload.model
        here: PhaseContext | None
        model: torch.nn.Module | None
        try:  # a copy of the pristine model (its weights shared for inference), or the model built again
            # when this process let it go for the arms' child: triage's runs and workarounds leave the pristine
            # model as it was for the accuracy bisection after it
            if ctx.rebuild is not None and let_go(source):
                here = _rebuilt(ctx)
                model = here.workload.model
            else:
                here, model = ctx, working_copy(source, ctx.settings.device, share=ctx.settings.shares)
        except Exception:  # noqa: BLE001 - it cannot be built again or copied here: nothing to triage
            here = model = None
        bug = triage_compiled_arm(here, model, bench) if here is not None and model is not None else None
        del model
        release_memory(ctx.settings.where)  # the model copied or built again for it, and its compiles
        if bug is not None:
            section.torch_bugs.append(bug)
    result.duration_s = round(time.perf_counter() - t0, 3)
    return section


def _triaged_already(report: rm.Report | None, compiled: rm.BenchmarkArm | None) -> rm.TorchBug | None:
    """The bug of the analysis's own compile that the compiled arm's crash repeats: the same error in a stage
    before the backend's (Dynamo, AOTAutograd), which no backend changes."""
    if report is None or compiled is None or not compiled.error:
        return None
    return next(
        (b for b in report.torch_bugs if b.suggestion is None and b.stage in STAGES.values() and b.error in compiled.error),
        None,
    )


def _rebuilt(ctx: PhaseContext) -> PhaseContext:
    """The workload built again in this process (its model was let go for a child that could not start):
    the arms run on it as the child would have."""
    assert ctx.rebuild is not None
    workload = ctx.rebuild()
    device = ctx.settings.device
    calls = calls_on(workload, device)
    return replace(ctx, workload=workload, calls=calls, pristine=workload.model, release=None, rebuild=None)


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
        runner.opt_in_left = left  # priced once the compiled arm is measured (`price_opt_in`)
        arms = [a for a in arms if a.name not in left]
    if bench.memory_limit_mb:
        arms = _affordable(ctx, arms, bench.memory_limit_mb * 2**20, notes)
    return arms


def _affordable(ctx: PhaseContext, arms: list[Arm], limit: int, notes: list[str]) -> list[Arm]:
    """`--memory-limit`: the arms known before they run to hold more than `limit` beyond the workload's own
    (`need_beyond`) are given up, each with one line why, before any of them starts: none is compiled to
    fail out of memory. What shows only as an arm runs is still bounded by its cap (`ArmRunner.capped`)."""
    weights = model_bytes(ctx.workload.model)
    room = ctx.room
    activations = room.activations if room is not None and room.activations is not None else 2 * weights
    kept = []
    for arm in arms:
        need = need_beyond(arm, ctx.calls, weights, activations, ctx.settings.where)
        if need is not None and need[0] > limit:
            notes.append(
                f"{arm.name}: left out before it ran: it needs about {_mb(need[0])} beyond the workload's own "
                f"({need[1]}); --memory-limit allows {_mb(limit)}."
            )
            continue
        kept.append(arm)
    return kept


def measure_arm(ctx: PhaseContext, runner: ArmRunner, arm: Arm) -> tuple[rm.BenchmarkArm, dict[str, Any]]:
    """One arm measured on its own copy of the pristine model, dropped after; the eager arm's copy then
    serves the numerics reference every later arm is judged against (the settings it adds come back)."""
    source = ctx.pristine if ctx.pristine is not None else None
    try:
        with materialized(arm, source, ctx.settings.device, share=ctx.settings.shares) as ready:
            measured = runner.run_arm(ready, ctx.report)
            if arm.name == "eager" and not measured.error:
                settings = after_eager(runner, ready.model, ctx.calls, ready.owned, start=ready.origin)
            else:
                settings = {}
    except (VariantError, CopyError) as exc:  # this arm's copy: the arms before and after it stand
        what = "the fixed copy" if isinstance(exc, VariantError) else "the arm's copy"
        row = rm.BenchmarkArm(name=arm.name, description=arm.description, code=arm.code, error=f"{what}: {exc}"[:500])
        row.error_type = type(exc).__name__
        return row, {}
    finally:
        release_memory(ctx.settings.where)
    return measured, settings


def after_eager(
    runner: ArmRunner, model: torch.nn.Module, calls: list[Call], owned: bool = False, start: torch.nn.Module | None = None
) -> dict[str, Any]:
    """After the eager arm, on its copy: the numerics reference every other arm is judged against; the settings it adds.
    `owned`: the copy is the arm's own, dropped after (the reference need not put it back); `start`: the
    model it was copied from. With an optimizer, the arm's passes stepped its own copy: the reference starts
    from `start`'s state, where eager's kept pass started (from the stepped one, eager's own error against
    float64 was the steps' and every arm's ratio near 1: no judgement at all); without, from its buffers
    (a counter the forward moves and reads: 1e-2 from eager's own)."""
    settings: dict[str, Any] = {}
    if runner.steps and owned and start is not None and not runner.shared:
        model.load_state_dict(start.state_dict())
    elif start is not None and not runner.shared:  # the buffers eager's passes moved (a counter the forward reads)
        put_back(model, dict(start.named_buffers()))
    reference = runner.reference if runner.shared else runner.make_reference(model, calls, disposable=owned)
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
        ) + (replayed_text(reference.run) if reference is not None else "")
    return settings


SUPERVISED = (
    "the arms ran in the analysing process, watched by ctc-doctor's own process, which starts the run again "
    "after a crash in an arm and goes on from the arm after it: a crash costs that arm"
)


def _run_supervised(ctx: PhaseContext, bench: BenchOptions, result: rm.Benchmark) -> None:
    """A supervised run's arms (`cli.supervise`): in this process, with a checkpoint before each; after a
    crash, this is a new stage, and `result` holds the arms before it and its row."""
    assert bench.stage is not None
    crashed = [a.name for a in result.arms if a.crash]
    result.isolation = rm.BenchIsolation(isolated=True, reason=SUPERVISED, crashed=crashed, restarts=len(crashed))
    result.settings["isolation"] = "supervised: a crash costs its arm"
    _run_in_process(ctx, bench, result, Checkpoint(bench.stage))


def _run_in_process(ctx: PhaseContext, bench: BenchOptions, result: rm.Benchmark, checkpoint: Checkpoint | None = None) -> None:
    """Every arm in this process, eager first (a crash in one ends the run, or, with a `checkpoint`, this
    stage): the one arm loop with this process's runner as its executor. The arms already in `result`
    (a stage after a crash) are not measured again; eager is run once more unrecorded when a later arm
    needs its results and the reference, and `isolation.replay_s` counts it."""
    runner = ArmRunner(ctx, bench)
    result.compiler_warmup_s = runner.prime()
    try:
        done = {a.name: a for a in result.arms}
        for name in ("eager", "compiled"):  # the workload's own peak, as measured before a crash
            row = done.get(name)
            if row is not None and row.error is None and row.peak_memory_mb is not None:
                runner.own_peak_mb = max(runner.own_peak_mb or 0.0, row.peak_memory_mb)
        arms = plan_arms(ctx, runner, result.notes if not done else [])
        if runner.opt_in_left:
            result.settings[OPT_IN] = runner.opt_in_left
        for a in arms:  # a crash row gets what its arm is
            if a.name in done and not done[a.name].description:
                done[a.name].description, done[a.name].code = a.description, a.code
        todo = [a for a in arms if a.name not in done]
        if "eager" in done and done["eager"].error:  # it crashed: nothing to compare the others against
            result.notes.append("eager failed: nothing to compare against.")
            todo = []
        eager = next((a for a in arms if a.name == "eager"), None)
        if todo and eager is not None and eager.name in done and runner.reference is None:
            t0 = time.perf_counter()  # a later arm is judged against eager's results and the reference
            _, settings = measure_arm(ctx, runner, eager)
            result.settings.update(settings)
            if result.isolation is not None:
                result.isolation.replay_s = round(result.isolation.replay_s + time.perf_counter() - t0, 3)

        def measure(i: int) -> Measured:
            if checkpoint is None:
                return Measured(*measure_arm(ctx, runner, todo[i]))
            checkpoint.arm(todo[i].name, result)
            try:
                with checkpoint.stderr():
                    return Measured(*measure_arm(ctx, runner, todo[i]))
            finally:  # a stop (--timeout, a signal) or an error leaves no arm running: a later death is not its
                checkpoint.arm(None, result)

        plan = [rm.BenchmarkArm(name=a.name, description=a.description, code=a.code) for a in todo]
        measure_arms(ctx.budget_s, plan, measure, result)
    finally:
        runner.close()


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 10 * 2**20 else f"{n / 2**20:.1f} MB"


KEPT = "numerics_kept"
"""The settings key eager's answer carries what the judgement kept in (moved to `Benchmark.kept`)."""
WARMUP = "compiler_warmup_s"
"""The settings key the first compiled arm's answer carries the compiler's warm-up in (moved to `Benchmark.compiler_warmup_s`)."""
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
    warmup = result.settings.pop(WARMUP, None)
    if warmup is not None:
        result.compiler_warmup_s = warmup
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
    return (
        f"auto: {AUTO_MIN} ({AUTO_FEW} of passes over {LONG_PASS_S:g} s) to {bench.max_iters or AUTO_MAX} passes, "
        f"until the median is known within 2 % or {AUTO_BUDGET_S:g} s"
    )


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
