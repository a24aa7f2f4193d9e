"""A fix check: a copy of the model with suggestions applied, compiled and run like the original, its
counts compared with the unchanged model's (the report's, or measured: `Checker.measure_baseline`, on
another backend `Checker.base_on`) and its results judged against the float64 reference every check
shares (`make_fix_reference`). The fix phase (`phases.fix`) decides what to check and what to apply.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ....reports.labels import module_path_of
from ....workload import Call
from ... import torch_internals as ti
from ...capture.live import CompiledRun, Findings, eager_pass, findings_of
from ...fixes.variants import Variant, VariantError, make_variant
from ...readers.text import describe_error
from ...running.calls import grad_mode, preserved_state, run_call, run_pass
from ...running.copying import working_copy
from ...running.draws import replayed_text
from ...running.memory import release_memory
from ...running.numerics import KeptResults, Reference, SameAs, loose_backend, record_draws
from ...running.reference.precision import make_reference
from ..context import PhaseContext

AOT = "aot_eager"
"""The backend a fix that held under Dynamo alone is compiled on once more (AOTAutograd, no kernels)."""


def effect_of(summary: rm.Summary) -> rm.Effect:
    """The summary counts an Effect carries (its fields are named as in Summary)."""
    return rm.Effect(**summary.model_dump(include=set(rm.Effect.model_fields)))


def effect_summary(before: rm.Effect, after: rm.Effect) -> str:
    parts = [
        f"graphs {before.graphs_compiled} -> {after.graphs_compiled}",
        f"break sites {before.unique_break_sites} -> {after.unique_break_sites}",
        f"recompiles {before.recompile_count} -> {after.recompile_count}",
    ]
    return ", ".join(parts)


def recompile_key(rc: rm.Recompile) -> tuple[Any, ...]:
    first = rc.failed_guards[0] if rc.failed_guards else None
    return (rc.function, rc.file, rc.line, first.kind if first else None, first.source if first else None)


def site_label(site: rm.GraphBreakSite) -> str:
    return f"{site.gb_type} at {site.user_frame.file.rsplit('/', 1)[-1]}:{site.user_frame.line}"


def remaining_labels(sites: list[rm.GraphBreakSite], recompiles: list[rm.Recompile]) -> list[str]:
    """What a fix left: each break site, and the recompiles folded by frame and guarded source
    (`recompile of forward (model.py:9) x8: attribute self.step`), without torch's source comment and hint."""
    out = [site_label(s) for s in sites]
    folded: dict[tuple[str, str, int, str], int] = {}
    for rc in recompiles:
        g = rc.failed_guards[0] if rc.failed_guards else None
        what = f"{g.kind} {module_path_of(g.source)}" if g is not None and g.source else (g.reason.split("  #")[0] if g else "?")
        key = (rc.function, rc.file.rsplit("/", 1)[-1], rc.line, what)
        folded[key] = folded.get(key, 0) + 1
    for (function, file, line, what), n in folded.items():
        out.append(f"recompile of {function} ({file}:{line}){f' x{n}' if n > 1 else ''}: {what}")
    return out


def _eager_pass(
    model: Any, workload: Any, calls: list[Call], sink: Any = None, draws: Any = None, *, seed: int | None, train: bool, grad: bool
) -> None:
    """One eager pass of the calls into `sink` (under `draws`), the model put back as it was after."""
    with preserved_state(model), torch.set_grad_enabled(grad):
        run_pass(model, workload, calls, seed=seed, train=train, sink=sink, draws=draws)


def make_fix_reference(ctx: PhaseContext) -> Reference:
    """What every fix check is judged against, run once: the original model's eager run, seeded per call
    like the analysis (forward, and backward when training), and the same calls through a float64 copy.
    Both from copies of the snapshot the fixed copies come from, when there is one (a script may have
    trained the model it left behind), else of the model itself."""
    ctx.progress(ProgressEvent(Step.FIX_REFERENCE))
    source = ctx.pristine if ctx.pristine is not None else ctx.workload.model
    # the pristine model may live on the host; for inference the copy shares its parameters
    model = working_copy(source, ctx.settings.device, share=ctx.settings.shares) if ctx.pristine is not None else source
    workload = dataclasses.replace(ctx.workload, model=model)
    train = ctx.settings.train
    seed = ctx.settings.seed
    eager = KeptResults()  # each call's results kept as they come (in a temporary file when large)
    grad = bool(ctx.settings.grad) if ctx.settings.grad is not None else train  # as the checks run their calls
    # each eager pass starts from the model as it is, and leaves it so
    eager_pass = functools.partial(_eager_pass, model, workload, ctx.calls, train=train, grad=grad)
    eager_pass(seed=seed, sink=eager)
    random = False
    if seed is not None:
        same = SameAs(eager)
        eager_pass(seed=seed + 7919, sink=same)
        random = same.differs
        if random:  # its draws, for the reference: eager once more from the same seed, recording them
            record_draws(eager, functools.partial(eager_pass, seed=seed))
    del eager_pass
    # the copy the eager run used is cast for the reference run (inference: in place, put back exact)
    reference = make_reference(
        model, ctx.workload, ctx.calls, eager, seed=seed, train=train,
        device=ctx.settings.where, loose=loose_backend(ctx.settings.backend), room=ctx.room, random=random,
    )  # fmt: skip
    del model
    release_memory(ctx.settings.where)  # the reference's float64 activations: the checks start from what the model holds
    if random:  # eager from another seed differs: dropout, rand
        reference.random = (
            "same seed per call"
            + replayed_text(reference.run)
            + ("; the checks compile with torch._inductor.config.fallback_random=True" if ctx.settings.backend == "inductor" else "")
        )
    return reference


@dataclass
class Base:
    """What a fix is compared with: the report's findings, or a measured baseline with the report's ids."""

    graph_breaks: list[rm.GraphBreakSite]
    recompiles: list[rm.Recompile]
    summary: rm.Summary


def with_report_ids(findings: Findings, report: rm.Report) -> Base:
    """A measured baseline whose sites and recompiles carry the ids of the report's matching ones (a
    site by its innermost frame: the report's own frames may be the script's, `GraphBreakSite.key`);
    one the report has not (another backend's, a replay's) carries none: its own numbering would name
    another of the report's as fixed."""
    site_ids = {s.key(own_frame=False): s.id for s in report.graph_breaks}
    recompile_ids: dict[tuple[Any, ...], list[str]] = {}
    for rc in report.recompiles:
        recompile_ids.setdefault(recompile_key(rc), []).append(rc.id)
    sites = [s.model_copy(update={"id": site_ids.get(s.key(own_frame=False), "")}) for s in findings.graph_breaks]
    recompiles = []
    for rc in findings.recompiles:
        ids = recompile_ids.get(recompile_key(rc))
        recompiles.append(rc.model_copy(update={"id": ids.pop(0) if ids else ""}))
    return Base(sites, recompiles, findings.summary(failed=False))


class Checker:
    """Re-checks variants of the model through the live capture, against the original's counts and outputs."""

    def __init__(self, ctx: PhaseContext, reference: Reference) -> None:
        assert ctx.report is not None
        self.ctx = ctx
        self.base = Base(ctx.report.graph_breaks, ctx.report.recompiles, ctx.report.summary)
        self.bases: dict[str, Base | None] = {}
        """Another backend's measured baseline, with the report's ids (`base_on`; None: it could not be)."""
        self.reference = reference

    def measure_baseline(self) -> tuple[rm.Verification, str | None]:
        """Measure the unchanged copy and compare later checks with it: its check, and None or why it could
        not."""
        verification, base = self.unchanged()
        if base is None:
            return verification, verification.error or "the unchanged copy could not be measured"
        self.base = base
        return verification, None

    def base_on(self, backend: str) -> Base | None:
        """The unchanged copy measured once on `backend`, as the checks counted there are compared with
        it; None when it cannot be measured there."""
        if backend in self.bases:
            return self.bases[backend]
        self.bases[backend] = self.base  # what the measuring check compares with, until it is replaced
        measured: Base | None = None
        try:
            _, measured = self.unchanged(backend)
        except VariantError:
            pass
        finally:
            self.bases[backend] = measured
        return measured

    def unchanged(self, backend: str | None = None) -> tuple[rm.Verification, Base | None]:
        """The unchanged copy's check on `backend`, and its counts with the report's ids (None: it could not
        be measured). A copy whose compile departs from float64 still gives its counts (the compile is
        wrong, not a fix: the checks after it depart alike, and the report leads with it)."""
        verification, findings = self.check(self.variant([]), backend)
        wrong = verification.numerics_ok is False and (verification.error or "").startswith("changes compiled results")
        if findings is None or (verification.error and not wrong):
            return verification, None
        assert self.ctx.report is not None
        return verification, with_report_ids(findings, self.ctx.report)

    def config_of(self, suggestions: list[rm.Suggestion]) -> dict[str, Any]:
        """The Dynamo config a copy with the suggestions compiles under."""
        return self.variant([s.action for s in suggestions if s.action is not None], self.ctx.calls[:1]).config

    def model_of(self) -> torch.nn.Module:
        """The model every check copies: the pristine one, else the workload's."""
        ctx = self.ctx
        model = ctx.pristine if ctx.pristine is not None else ctx.workload.model
        assert isinstance(model, torch.nn.Module)
        return model

    def variant(self, actions: list[rm.FixAction], calls: list[Call] | None = None) -> Variant:
        """A fresh copy of `model_of()` with `actions` applied, on the run's device, over `calls` (default:
        the workload's); raises VariantError when they cannot be applied."""
        settings = self.ctx.settings
        return make_variant(self.model_of(), self.ctx.calls if calls is None else calls, actions, settings.device, share=settings.shares)

    def replay(self, suggestions: list[rm.Suggestion]) -> Callable[[Callable[..., Any]], None]:
        """`run(compile)`: a fresh copy with the suggestions applied, warmed up as the check does, then every
        call through `compile(copy)` (what triage compiles with each backend in turn)."""
        ctx = self.ctx
        actions = [s.action for s in suggestions if s.action is not None]

        def run(compile_: Callable[..., Any]) -> None:
            variant = self.variant(actions)
            fixed = variant.workload_of(ctx.workload)
            with preserved_state(variant.model):
                variant.run_warm_up(fixed, ctx.settings.seed)
            with variant.compiled(compile_) as compiled, preserved_state(variant.model), grad_mode(ctx.settings):
                for i, call in enumerate(variant.calls):
                    run_call(compiled, fixed, call, i, seed=ctx.settings.seed, train=ctx.settings.train)

        return run

    def check(self, variant: Variant, backend: str | None = None) -> tuple[rm.Verification, Findings | None]:
        """Run the variant like the original and compare counts and outputs; on `backend` (None: the
        analysis's), compared with the unchanged copy's counts there (`base_on`)."""
        t0 = time.perf_counter()
        ctx, workload = self.ctx, self.ctx.workload
        settings = ctx.settings if backend is None else dataclasses.replace(ctx.settings, backend=backend)
        base = self.base if backend is None else self.bases[backend]
        assert base is not None
        compiled: CompiledRun | None = None
        try:
            fixed = variant.workload_of(workload)  # before_call and loss_fn act on the copy (change_first: made now)
        except Exception as exc:  # noqa: BLE001 - the user's change, made before compiling, fails there: the advice fails
            error = f"the change made before compiling raised {type(exc).__name__}: {describe_error(exc)}"[:500]
            return rm.Verification(applied=False, error=error, duration_s=round(time.perf_counter() - t0, 3)), None
        try:
            # compiled first, as the analysis does (the copy is fresh); each step from the copy's own buffers
            with preserved_state(variant.model):
                variant.run_warm_up(fixed, ctx.settings.seed)
        except Exception as exc:  # noqa: BLE001 - the model's own error on the warm-up call: the fix fails
            error = f"the eager call before compiling raised {type(exc).__name__}: {describe_error(exc)}"[:500]
            return rm.Verification(applied=False, error=error, duration_s=round(time.perf_counter() - t0, 3)), None
        try:
            # inductor draws random numbers its own way: the check compiles with eager's random kernels
            like_eager = ti.random_like_eager() if settings.backend == "inductor" else contextlib.nullcontext()
            # each run judged as it goes: the copy's eager run (did the change alter the model?) and its
            # compiled run (did it alter what the compiled model computes?)
            since = variant.change_at or 0  # a change made first on purpose alters the calls before it
            compiled_check = self.reference.judgement(from_call=since)
            eager_check = self.reference.judgement(from_call=since)
            with preserved_state(variant.model), like_eager:
                compiled = CompiledRun(
                    fixed, variant.calls, settings, dynamo_config=variant.config, sink=compiled_check,
                    compile_only=variant.compile_only, compile_options=variant.compile_options,
                )  # fmt: skip
                compiled.run()
            release_memory(ctx.settings.where)  # the compiled run's activations, before the eager run makes its own
            with preserved_state(variant.model):
                eager = eager_pass(fixed, variant.calls, settings, sink=eager_check)
            errors = [e for e in (eager.error, compiled.error) if e is not None]
        except ti.ConfigOptionMissing as exc:
            return rm.Verification(applied=False, error=str(exc), duration_s=round(time.perf_counter() - t0, 3)), None
        finally:
            ti.reset_dynamo_quietly()
        findings = findings_of(compiled)
        if errors:
            # a run that crashed counts nothing: no deltas that would read like success
            error = errors[0].message
            return (
                rm.Verification(
                    applied=True,
                    before=effect_of(base.summary),
                    error=error,
                    summary=f"failed: {error}"[:300],
                    duration_s=round(time.perf_counter() - t0, 3),
                ),
                findings,
            )
        after = findings.summary(failed=False)
        verification = rm.Verification(applied=True, before=effect_of(base.summary), after=effect_of(after))
        if backend is not None:
            verification.compiled_on, verification.counted_on = [backend], backend
        # the copy's eager run first: a change that alters eager results alters the model, not the compile
        eager_result = eager_check.result()
        check = compiled_check.result() if eager_result.ok else eager_result
        verification.numerics = check
        verification.numerics_ok = check.ok
        verification.max_abs_error = check.max_abs_vs_eager
        if not eager_result.ok:
            verification.error = f"changes eager results: {eager_result.problem}"
        elif not check.ok:
            verification.error = f"changes compiled results: {check.problem}"

        # the same site by its innermost frame, as in `with_report_ids` (`GraphBreakSite.key`)
        before_sites = {s.key(own_frame=False): s for s in base.graph_breaks}
        after_sites = {s.key(own_frame=False): s for s in findings.graph_breaks}
        after_lines = {k[1:] for k in after_sites}  # a line that breaks no more is fixed, whatever breaks there
        verification.fixed = [s.id for k, s in before_sites.items() if k[1:] not in after_lines and s.id]
        verification.new_sites = [site_label(s) for k, s in after_sites.items() if k not in before_sites]
        after_recompiles: dict[tuple[Any, ...], int] = {}
        for rc in findings.recompiles:
            after_recompiles[recompile_key(rc)] = after_recompiles.get(recompile_key(rc), 0) + 1
        for rc in base.recompiles:
            key = recompile_key(rc)
            if after_recompiles.get(key, 0) > 0:
                after_recompiles[key] -= 1
            elif rc.id:
                verification.fixed.append(rc.id)
        b, a = verification.before, verification.after
        assert b is not None and a is not None
        improved = (
            a.graphs_compiled < b.graphs_compiled
            or a.graph_count < b.graph_count
            or a.unique_break_sites < b.unique_break_sites
            or a.recompile_count < b.recompile_count
        )
        verification.summary = effect_summary(b, a)
        verification.safe = bool(verification.numerics_ok)
        verification.effective = verification.safe and improved
        verification.duration_s = round(time.perf_counter() - t0, 3)
        return verification, findings


def counted(summary: rm.Summary | rm.Effect) -> str:
    """`17 graphs, 2 break sites, 11 recompiles`: what a fix check compares."""
    return f"{summary.graphs_compiled} graphs, {summary.unique_break_sites} break sites, {summary.recompile_count} recompiles"
