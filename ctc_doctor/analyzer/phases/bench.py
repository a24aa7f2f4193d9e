"""The bench phase: eager vs compiled vs compiled-with-fixes vs regional compilation, measured.

One pass = every call of the workload in order (first call, then the variants), so recompiles the
workload triggers are part of what is measured. Per compiled arm, in a fresh inductor cache:
1. cold pass: `torch._dynamo.reset()`, then one pass; compile time is Dynamo's frame compile time
   (backend included) from its compilation metrics, graph/break/recompile counts from the same;
2. warm pass: reset again and one more pass, now hitting the on-disk caches the cold pass filled;
3. `warmup` untimed passes, then `iters` timed passes with device synchronisation: median and IQR.
What the cold pass produced (outputs; training, losses and gradients too) is judged against eager's
own, both against a float64 copy of the model run once after the eager arm (`running.numerics`).
Inference runs under `torch.no_grad()`; `--train` times forward+backward. Arms that fail record their
error and the others still run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports import models as rm
from ...reports.verdicts import best_arm, cold_start, regional_recompile_reason
from ...workload import Call, Workload
from .. import torch_internals as ti
from ..fixes.facts import ModelFacts
from ..fixes.variants import Variant, make_variant
from ..readers.causes import arm_recompiles, recompile_causes
from ..readers.text import describe_error
from ..running import device as dev
from ..running.calls import Sample, preserved_state, run_pass
from ..running.copying import copy_model
from ..running.modules import forward_arg_names, modular_paths
from ..running.numerics import Reference, loose_backend, make_reference
from .bench_aot import run_aot_arm
from .bench_numbers import RECOMPILE_LIMIT, best_for_job, latency_stats, pace, pad_calls, spread
from .context import PhaseContext


@dataclass(frozen=True)
class BenchOptions:
    """How to benchmark. Defaults are the CLI defaults."""

    backend: str = "inductor"
    """torch.compile backend of the compiled arms."""
    mode: str | None = None
    """torch.compile mode (default, reduce-overhead, max-autotune); inductor only."""
    iters: int = 20
    """Timed passes per arm."""
    warmup: int = 3
    """Untimed passes before timing."""
    regional: bool = True
    """Add regional-compilation arms when the model has repeated blocks."""
    fresh_cache: bool = True
    """A fresh, empty inductor cache per arm, so arms cannot warm each other."""
    objective: str = "balanced"
    """What the best arm optimises: latency, compile or balanced."""
    max_iters: int | None = None
    """Timed passes at most: more than `iters` are run while the spread is wide (default 3 x iters)."""
    aot: bool = False
    """Add the ahead-of-time arms: aot (torch.export + AOTInductor), aot_regional, aot_fixed."""
    aot_strict: bool = False
    """Export in strict mode (Dynamo traces, as torch.compile does) instead of non-strict."""
    job_steps: int | None = None
    """The user's job length in calls (training steps): the arm with the least total time for it is named too."""
    shape_arms: bool = False
    """When the calls' shapes vary: add `dynamic` (dynamic=True) and `marked` (mark_dynamic on every varying
    dim) beside `compiled`, which is torch's automatic dynamic shapes."""
    modes: tuple[str, ...] = ()
    """More inductor modes, one arm each (`compiled[max-autotune]`), beside `compiled` in `mode`."""


@dataclass
class BenchSection:
    """The benchmark, and what it measured of the suggestions it can judge (regional compilation)."""

    benchmark: rm.Benchmark
    verified: dict[str, rm.Verification] = field(default_factory=dict)
    """Suggestion id -> the measured effect (the regional-compilation suggestion, from its arm)."""


@dataclass
class _Arm:
    name: str
    description: str
    model: torch.nn.Module
    calls: list[Call]
    compiled: bool
    config: dict[str, Any]
    regional_paths: list[str]
    fresh: bool = False
    """Compile a fresh copy of the model (as the builder returned it), so the cold pass is a user's."""
    variant: Variant | None = None
    """The fixed copy the arm runs (its warm_up action, if applied, runs before compiling)."""
    aot: str | None = None
    """AOT arms: `whole` (export the model) or `regional` (export each repeated block class once)."""
    aot_groups: list[list[str]] = field(default_factory=list)
    """A regional AOT arm: the instances of each repeated block class."""
    optimizer_compiled: bool = False
    """Training steps: `optimizer.step` compiled too."""
    optimizer: Any = None
    """Training steps: the arm's own optimizer, built fresh when the arm starts (`Workload.optimizer`)."""
    compile_options: dict[str, Any] = field(default_factory=dict)
    """torch.compile options of this arm beyond the benchmark's (`dynamic=True`)."""
    code: str | None = None
    """What a user pastes to compile as this arm does (`rm.BenchmarkArm.code`)."""
    compare_outputs: bool = True
    """False for padded inputs: outputs have other shapes, so losses and gradients are judged."""


class _Bench:
    def __init__(self, ctx: PhaseContext, bench: BenchOptions) -> None:
        self.workload = ctx.workload
        self.seed = ctx.settings.seed
        self.bench = bench
        self.device = ctx.settings.device or "cpu"
        self.train = ctx.settings.train
        self.progress = ctx.progress
        self.source = ctx.pristine if ctx.pristine is not None else ctx.workload.model
        """What the float64 reference copies."""
        self.eager: Sample | None = None
        """What the eager arm's first pass produced."""
        self.reference: Reference | None = None

    def grad(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext() if self.train else torch.no_grad()

    @property
    def steps(self) -> bool:
        """Each call is a whole training step (an optimizer runs after backward)."""
        return self.train and self.workload.optimizer is not None

    def new_optimizer(self, arm: _Arm) -> None:
        """The arm's own optimizer over its model's parameters, `step` compiled when the arm says."""
        if not self.steps:
            return
        arm.optimizer = self.workload.optimizer(arm.model.parameters())  # type: ignore[misc]
        if arm.optimizer_compiled:
            arm.optimizer.step = torch.compile(arm.optimizer.step, **self.compile_kwargs())

    def run_pass(self, fn: Callable[..., Any], arm: _Arm, **kw: Any) -> Sample:
        """One pass of the arm's calls (training steps with its optimizer)."""
        kw.setdefault("seed", None)
        return run_pass(fn, self.workload, arm.calls, train=self.train, model=arm.model, optimizer=arm.optimizer, **kw)

    def compile_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"backend": self.bench.backend}
        if self.bench.mode and self.bench.mode != "default":
            kw["mode"] = self.bench.mode
        return kw

    @contextlib.contextmanager
    def _compiled(self, arm: _Arm) -> Iterator[Callable[..., Any]]:
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
        self.progress("bench: warming up the compiler", 0, 0)
        with contextlib.suppress(Exception), torch.no_grad(), ti.fresh_inductor_cache(self.bench.backend == "inductor"):
            x = torch.ones(4, device=self.device)
            torch.compile(lambda t: torch.relu(t) + 1, **self.compile_kwargs())(x)
        ti.fresh_dynamo_state()

    def cudagraphs(self, arm: _Arm) -> bool:
        """Whether the arm's compiled code runs under CUDA graph trees (reduce-overhead and
        max-autotune in inductor, or the cudagraphs backend)."""
        if not arm.compiled or arm.aot:
            return False
        mode = arm.compile_options.get("mode", self.bench.mode)
        return self.bench.backend == "cudagraphs" or (self.bench.backend == "inductor" and mode in ("reduce-overhead", "max-autotune"))

    def step(self, arm: _Arm) -> Callable[[], None] | None:
        """The step mark each call of a CUDA-graph arm begins with, else None."""
        return ti.cudagraph_mark_step_begin if self.cudagraphs(arm) else None

    def timed(self, fn: Callable[..., Any], arm: _Arm) -> rm.LatencyStats:
        label = f"bench {arm.name}: timing"
        total = self.bench.warmup + self.bench.iters
        for i in range(self.bench.warmup):
            self.progress(label, i, total)
            self.run_pass(fn, arm, step=self.step(arm))
        dev.synchronize(self.device)
        times: list[float] = []
        limit = self.bench.max_iters or 3 * self.bench.iters
        # repeat until the spread is tight (IQR within 5 % of the median) or the limit is reached
        while len(times) < self.bench.iters or (len(times) < limit and spread(times) > 0.05):
            self.progress(label, self.bench.warmup + min(len(times), self.bench.iters), total)
            t0 = time.perf_counter()
            self.run_pass(fn, arm, step=self.step(arm))
            dev.synchronize(self.device)
            times.append(time.perf_counter() - t0)
        self.progress(label, total, total)
        return latency_stats(times)

    def warm_start(self, fn: Callable[..., Any], arm: _Arm) -> float | None:
        """What a new process pays with the caches shipped: this process' compile artifacts saved
        (`torch.compiler.save_cache_artifacts`), loaded into empty caches, then one pass compiled."""
        blob = ti.save_cache_artifacts()
        if blob is None:
            return None
        self.progress(f"bench {arm.name}: compiling (caches loaded from artifacts)", 0, 0)
        with ti.fresh_inductor_cache(True):
            ti.fresh_dynamo_state()
            if not ti.load_cache_artifacts(blob):
                return None
            with ti.count_compiles() as started:
                self.run_pass(fn, arm, step=self.step(arm))
        ti.fresh_dynamo_state()
        return round(started.compile_time_s, 4)

    def make_reference(self, calls: list[Call]) -> Reference | None:
        """After the eager arm: the same calls through a float64 copy of the model, once for every arm."""
        if self.eager is None:
            return None
        self.progress("bench: numerics reference (float64 copy)", 0, 0)
        self.reference = make_reference(
            self.source, self.workload, calls, self.eager, seed=self.seed, train=self.train,
            device=self.device, loose=loose_backend(self.bench.backend), steps=self.steps,
        )  # fmt: skip
        ti.fresh_dynamo_state()
        return self.reference

    def run_arm(self, arm: _Arm, report: rm.Report | None = None) -> rm.BenchmarkArm:
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
                ti.fresh_inductor_cache(arm.compiled and self.bench.fresh_cache and self.bench.backend == "inductor"),
                ti.dynamo_config(arm.config),
            ):
                ti.fresh_dynamo_state()
                with ti.cudagraph_log() if step is not None else contextlib.nullcontext(None) as graphs:
                    self._run(arm, out, step)
                out.peak_memory_mb = dev.peak_memory_mb(self.device)
        except Exception as exc:  # noqa: BLE001 - one failing arm is a row, not the benchmark
            out.error = f"{type(exc).__name__}: {describe_error(exc)}"[:500]
        finally:
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

    def _run(self, arm: _Arm, out: rm.BenchmarkArm, step: Callable[[], None] | None) -> None:
        """The arm's cold pass, warm-cache pass, numerics check and timed passes, into `out`."""
        seed = self.seed
        dev.reset_peak_memory(self.device)
        if arm.variant is not None:
            arm.variant.run_warm_up(self.workload, seed)
        self.new_optimizer(arm)  # fresh state: the first pass starts where eager's and the reference's did
        with self._compiled(arm) as fn:
            self.progress(f"bench {arm.name}: {'compiling (cold)' if arm.compiled else 'first pass'}", 0, 0)
            with ti.count_compiles() as cold:
                t0 = time.perf_counter()
                outputs = self.run_pass(fn, arm, seed=seed, collect=True, step=step)
                dev.synchronize(self.device)
                out.first_pass_s = round(time.perf_counter() - t0, 4)
            if arm.compiled:
                out.compile_time_s = round(cold.compile_time_s, 4)
                out.graph_count, out.graph_break_count, out.recompile_count = cold.graphs, cold.graph_breaks, cold.recompiles
                self.progress(f"bench {arm.name}: compiling (warm cache)", 0, 0)
                ti.fresh_dynamo_state()
                with ti.count_compiles() as warm:
                    self.run_pass(fn, arm, step=step)
                out.warm_compile_time_s = round(warm.compile_time_s, 4)
            if not arm.compiled:
                self.eager = outputs
            elif self.reference is not None:
                judge_arm(out, self.reference, outputs, arm.compare_outputs)
            with ti.count_compiles() as during:
                out.latency_ms = self.timed(fn, arm)
            if arm.compiled:
                extra = during.frames
                if extra:
                    out.recompile_count = (out.recompile_count or 0) + extra
                    out.error = f"{extra} compile(s) during the timed passes: latency includes them"
                out.recompile_causes = recompile_causes(arm_recompiles(cold.recompile_events + during.recompile_events))
                if self.bench.aot and self.bench.backend == "inductor" and arm.name == "compiled":
                    out.warm_start_compile_s = self.warm_start(fn, arm)  # last: it clears the compiled code


def judge_arm(out: rm.BenchmarkArm, reference: Reference, sample: Sample, outputs: bool = True) -> None:
    """The arm's numerics: its first pass judged against eager's (`running.numerics`)."""
    check = reference.judge(sample, outputs)
    out.numerics, out.numerics_ok, out.max_abs_error = check, check.ok, check.max_abs_vs_eager


def _arms(
    report: rm.Report,
    workload: Workload,
    calls: list[Call],
    facts: ModelFacts | None,
    bench: BenchOptions,
    variant: Variant | None,
    train: bool = False,
) -> list[_Arm]:
    model = workload.model
    backend = bench.backend + (f", mode={bench.mode}" if bench.mode and bench.mode != "default" else "")
    arms = [
        _Arm("eager", "the model as is, no compile", model, calls, False, {}, []),
        _Arm("compiled", f"torch.compile(model, backend={backend})", model, calls, True, {}, [], fresh=True),
    ]
    steps = train and workload.optimizer is not None
    if steps:
        arms.append(
            _fresh_compiled(
                "compiled_optimizer",
                f"torch.compile(model, backend={backend}), and optimizer.step = torch.compile(optimizer.step)",
                model,
                calls,
                optimizer_compiled=True,
                code="model = torch.compile(model); optimizer.step = torch.compile(optimizer.step)",
            )
        )
    for mode in bench.modes if bench.backend == "inductor" else ():
        if mode == (bench.mode or "default"):
            continue  # that is `compiled`
        options = {"mode": mode} if mode != "default" else {}
        code = f'model = torch.compile(model, mode="{mode}")' if mode != "default" else None
        arms.append(
            _fresh_compiled(f"compiled[{mode}]", f"torch.compile(model, mode={mode!r})", model, calls, compile_options=options, code=code)
        )
    if bench.shape_arms and facts is not None and facts.varying_dims():
        arms += _shape_arms(model, calls, facts, backend)
        padded = _padded_arm(workload, calls, backend) if train and workload.pad else None
        arms += [padded] if padded is not None else []
    if variant is not None:
        applied = ", ".join(report.fix.applied) if report.fix else ""
        arms.append(
            _Arm(
                "compiled_fixed",
                f"torch.compile of a copy with {applied} applied" + (", optimizer.step compiled" if steps else ""),
                variant.model,
                variant.calls,
                True,
                variant.config,
                [],
                variant=variant,
                optimizer_compiled=steps,
            )
        )
    if steps and bench.regional:
        arms += _modular_arm(model, calls, facts)
    if bench.regional and facts is not None and facts.repeated:
        paths = [p for g in facts.repeated for p in g.paths]
        shown = ", ".join(f"{len(g.paths)}x {g.class_name}" for g in facts.repeated)
        if variant is not None:
            arms.append(
                _Arm(
                    "regional_fixed",
                    f"each repeated block compiled ({shown}), fixes applied",
                    variant.model,
                    variant.calls,
                    True,
                    variant.config,
                    paths,
                    variant=variant,
                )
            )
        else:
            arms.append(
                _Arm("regional", f"each repeated block compiled ({shown}), the rest eager", model, calls, True, {}, paths, fresh=True)
            )
    if bench.aot:
        arms.append(
            _Arm(
                "aot",
                "torch.export of the model, AOTInductor-compiled into a package, loaded",
                model,
                calls,
                True,
                {},
                [],
                fresh=True,
                aot="whole",
            )
        )
        if facts is not None and facts.repeated:
            shown = ", ".join(f"{len(g.paths)}x {g.class_name}" for g in facts.repeated)
            groups = [list(g.paths) for g in facts.repeated]
            arms.append(
                _Arm(
                    "aot_regional",
                    f"each repeated block class exported and AOT-compiled once ({shown}), loaded per instance",
                    model,
                    calls,
                    True,
                    {},
                    [],
                    fresh=True,
                    aot="regional",
                    aot_groups=groups,
                )
            )
        if variant is not None:
            arms.append(
                _Arm(
                    "aot_fixed",
                    "torch.export + AOTInductor of the copy with the fixes applied",
                    variant.model,
                    variant.calls,
                    True,
                    variant.config,
                    [],
                    variant=variant,
                    aot="whole",
                )
            )
    return arms


def _fresh_compiled(name: str, description: str, model: torch.nn.Module, calls: list[Call], **kw: Any) -> _Arm:
    """A whole-model compiled arm on a fresh copy of the model (its cold pass is a user's), options in `kw`."""
    return _Arm(name, description, model, calls, True, {}, [], fresh=True, **kw)


def _modular_arm(model: torch.nn.Module, calls: list[Call], facts: ModelFacts | None) -> list[_Arm]:
    """Modular compilation (training steps): each top-level part compiled on its own, the optimizer eager;
    none when the parts are the repeated blocks (that is `regional`) or there are fewer than two."""
    paths = modular_paths(model)
    regional = {p for g in facts.repeated for p in g.paths} if facts is not None else set()
    if not paths or set(paths) == regional:
        return []
    shown = ", ".join(paths) if len(paths) <= 4 else f"{', '.join(paths[:3])} and {len(paths) - 3} more"
    loop = f"for name in {tuple(paths)!r}: model.get_submodule(name).compile()"
    return [_Arm("modular", f"each top-level part compiled on its own ({shown})", model, calls, True, {}, paths, fresh=True, code=loop)]


def _shape_arms(model: torch.nn.Module, calls: list[Call], facts: ModelFacts, backend: str) -> list[_Arm]:
    """The shape strategies beside `compiled` (automatic dynamic shapes), everything else as it has (the
    optimizer eager): `dynamic=True`, and every varying dim marked dynamic before the first call (one
    mark_dynamic action, all together)."""
    varying = facts.varying_dims()
    shown = ", ".join(f"{arg} dim {','.join(map(str, dims))}" for arg, dims in varying.items())
    arms = [
        _fresh_compiled(
            "dynamic",
            f"torch.compile(model, backend={backend}, dynamic=True)",
            model,
            calls,
            compile_options={"dynamic": True},
            code="model = torch.compile(model, dynamic=True)",
        )
    ]
    first, dims = next(iter(varying.items()))
    action = rm.FixAction(type="mark_dynamic", argument=first, dims=dims, marks=varying)
    try:
        marked = make_variant(model, calls, [action])
    except Exception:  # noqa: BLE001 - an input that cannot be marked: no such arm
        return arms
    arms.append(
        _Arm(
            "marked",
            f"mark_dynamic on {shown}, then torch.compile",
            marked.model,
            marked.calls,
            True,
            {},
            [],
            variant=marked,
            code="; ".join(f"torch._dynamo.mark_dynamic({arg}, {d})" for arg, dims in varying.items() for d in dims)
            + "  # each batch, before the compiled call",
        )
    )
    return arms


def _padded_arm(workload: Workload, calls: list[Call], backend: str) -> _Arm | None:
    """`Workload.pad`: every call padded up to a multiple of a bucket, compiled as `compiled` is, judged on
    its losses (its outputs have other shapes). The bucket: the smallest of 8, 16, 32... that leaves fewer
    sizes than the data has, within the recompile limit (8 when none does but 8 pads something)."""
    assert workload.pad is not None
    names = forward_arg_names(workload.model) or []
    chosen = None
    for bucket in (8, 16, 32, 64, 128, 256):
        found = pad_calls(calls, names, workload.pad, bucket)
        if found is None:
            return None
        _, before, after = found
        if len(after) < len(before) and len(after) <= RECOMPILE_LIMIT:
            chosen = (bucket, found)
            break
        if bucket == 8 and after != before and len(after) <= RECOMPILE_LIMIT:
            chosen = chosen or (bucket, found)
    if chosen is None:
        return None
    bucket, (padded, _, after) = chosen
    shown = ", ".join(f"{a} dim {d}" for a, (d, _) in workload.pad.items())
    return _fresh_compiled(
        "padded",
        f"{shown} padded to multiples of {bucket} ({len(after)} size(s)), then torch.compile(model, backend={backend})",
        workload.model,
        padded,
        compare_outputs=False,
        code=f"pad {shown} up to a multiple of {bucket} in your collate function",
    )


def _fixed_variant(report: rm.Report, model: torch.nn.Module, calls: list[Call]) -> Variant | None:
    """The combined fix as the fix phase applied it, on a fresh copy (None when nothing was applied)."""
    if report.fix is None or not report.fix.applied:
        return None
    by_id = {s.id: s for s in report.suggestions}
    actions = [by_id[i].action for i in report.fix.applied if i in by_id and by_id[i].action is not None]
    return make_variant(model, calls, [a for a in actions if a is not None])


def run_bench(ctx: PhaseContext, bench: BenchOptions) -> BenchSection:
    """Measure every arm; the regional suggestion gets the measured effect of its arm."""
    report = ctx.report
    assert report is not None
    workload, calls = ctx.workload, ctx.calls
    t0 = time.perf_counter()
    runner = _Bench(ctx, bench)
    result = rm.Benchmark(
        device=runner.device,
        settings={
            "backend": bench.backend,
            "mode": bench.mode or "default",
            "iters": bench.iters,
            "warmup": bench.warmup,
            "grad": _grad_setting(ctx),
            "fresh_cache": bench.fresh_cache and bench.backend == "inductor",
            "torch_threads": torch.get_num_threads(),
            "pass": f"{len(calls)} call(s): the first call and its variants",
            **({"aot_export": "strict" if bench.aot_strict else "non-strict"} if bench.aot else {}),
        },
    )
    if bench.mode and bench.mode != "default" and bench.backend != "inductor":
        result.notes.append(f"--mode {bench.mode} applies to inductor only; ignored for backend {bench.backend}.")
        bench = BenchOptions(**{**bench.__dict__, "mode": None})
        runner.bench = bench
    if bench.modes and bench.backend != "inductor":
        result.notes.append(f"--modes {','.join(bench.modes)}: modes are inductor's; no mode arms with backend {bench.backend}.")
    cuda_graph_modes = [m for m in bench.modes if m in ("reduce-overhead", "max-autotune")]
    if cuda_graph_modes and not runner.device.startswith("cuda"):
        result.notes.append(f"{', '.join(cuda_graph_modes)} use CUDA graphs: on CPU they measure inductor without them.")
    if bench.mode == "reduce-overhead" and not runner.device.startswith("cuda"):
        result.notes.append("reduce-overhead uses CUDA graphs: on CPU it behaves like the default mode.")
    runner.prime()
    source = ctx.pristine if ctx.pristine is not None else workload.model
    try:
        variant = _fixed_variant(report, source, calls)
    except Exception as exc:  # noqa: BLE001 - the other arms still run
        variant = None
        result.notes.append(f"the fixed copy could not be rebuilt: {type(exc).__name__}: {exc}")
    for arm in _arms(report, workload, calls, ctx.facts, bench, variant, ctx.settings.train):
        if arm.fresh and ctx.pristine is not None:
            arm.model = copy_model(ctx.pristine)
        if arm.aot and ctx.settings.train:
            result.notes.append(f"{arm.name}: AOT arms are inference only; not run with --train.")
            continue
        measured = runner.run_arm(arm, report)
        if arm.fresh:
            arm.model = workload.model  # one fresh copy at a time
        result.arms.append(measured)
        if arm.name == "eager" and measured.error:
            result.notes.append("eager failed: nothing to compare against.")
            break
        if arm.name == "eager":
            reference = runner.make_reference(calls)
            if reference is not None:
                result.settings["numerics"] = reference.method + (f" ({reference.note})" if reference.note else "")
                result.settings["numerics_reference_s"] = reference.duration_s
    eager = next((a for a in result.arms if a.name == "eager"), None)
    if eager and eager.latency_ms:
        for arm_result in result.arms:
            if arm_result.latency_ms and arm_result.latency_ms.median > 0:
                arm_result.speedup_vs_eager = round(eager.latency_ms.median / arm_result.latency_ms.median, 3)
    for arm_result in result.arms:
        pace(arm_result, eager, len(calls))
    if bench.job_steps is not None:
        result.job_steps = bench.job_steps
        result.job_best_arm = best_for_job(result.arms, len(calls), bench.job_steps)
    result.objective = bench.objective  # type: ignore[assignment]
    result.best_arm, result.best_arm_reason, result.within_noise = best_arm(result, result.objective)
    result.cold_start = cold_start(result) if bench.aot else None
    result.duration_s = round(time.perf_counter() - t0, 3)
    return BenchSection(result, _regional_verifications(report, result))


def _grad_setting(ctx: PhaseContext) -> str:
    if not ctx.settings.train:
        return "no_grad"
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
