"""The fix phase: apply the auto-applicable suggestions to a copy of the model, re-check, compare.

Each auto-applicable suggestion is first tried alone on its own copy (`fixes.variants`), made from a
snapshot of the model taken before the analysis ran it: the copy is compiled through the live capture
and then run eagerly, like the original (same calls, seeds, backend, order), with the suggestion's
`FixAction` applied. Its outputs are compared with the original model's eager
outputs, both in eager mode (did the change alter the model's semantics?) and compiled (did it alter
what the compiled model computes?). A suggestion that fails either check is unsafe and not applied;
one that changes no count is ineffective. The safe, effective ones are then applied together and
verified once more. The section carries each suggestion's verification; the pipeline merges them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...progress import ProgressEvent, Step
from ...reports import models as rm
from ...reports.labels import module_path_of
from .. import torch_internals as ti
from ..capture.live import CompiledRun, Findings, eager_pass, findings_of
from ..fixes.variants import Variant, VariantError, make_variant
from ..readers.text import describe_error
from ..running.calls import grad_mode, preserved_state, run_call, run_pass
from ..running.copying import working_copy
from ..running.deadline import Stopped
from ..running.memory import release_memory
from ..running.numerics import KeptResults, Reference, SameAs, loose_backend, tolerance
from ..running.precision import make_reference
from ..triage import Attempt, attempt, is_torch_failure, triage, write_bug
from .context import PhaseContext


@dataclass(frozen=True)
class FixOptions:
    """How `fix` verifies."""

    verify_each: bool = True
    """Verify each auto-applicable suggestion alone before combining (else: all together, once)."""
    measure_baseline: bool = False
    """Measure the unchanged copy on the workload's calls first and compare each fix with that, not with
    the report's counts (a script's report counts all its calls; the workload holds the ones kept)."""
    keep_reference: bool = False
    """Hand the numerics reference over in the section (`FixSection.reference`) instead of closing it."""
    repro_dir: str | None = None
    """Where the repro and issue text of a PyTorch bug a fix walks into go (None: in the report only)."""


@dataclass
class FixSection:
    """The fix phase's part of the report: the combined result, and each suggestion's verification."""

    result: rm.FixResult
    verified: dict[str, rm.Verification] = field(default_factory=dict)
    """Suggestion id -> what applying it alone measured."""
    reference: Reference | None = None
    """With `FixOptions.keep_reference`: the numerics reference the checks were judged by, still open
    (the benchmark judges its arms by it; whoever takes it closes it)."""
    reference_run: rm.ReferenceRun | None = None
    """Where the checks' numerics reference ran and what it cost."""
    torch_bugs: dict[str, rm.TorchBug] = field(default_factory=dict)
    """Suggestion id -> the PyTorch bug its compile walked into (`breaks_compile`), ready to file."""


AOT = "aot_eager"
"""The backend a fix that held under Dynamo alone is compiled on once more (AOTAutograd, no kernels)."""

VERIFIED_ADVICE = ("change_first",)
"""Actions of advice the user applies in their own code, verified on a copy but never applied with the fixes."""


def iter_auto(suggestions: list[rm.Suggestion]) -> Iterator[rm.Suggestion]:
    """Auto-applicable suggestions that `fix` verifies one by one (regional is measured by the benchmark),
    and the advice it can verify (`VERIFIED_ADVICE`)."""
    for s in suggestions:
        if s.action is not None and (s.auto_applicable and s.action.type != "regional" or s.action.type in VERIFIED_ADVICE):
            yield s


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


def _recompile_key(rc: rm.Recompile) -> tuple[Any, ...]:
    first = rc.failed_guards[0] if rc.failed_guards else None
    return (rc.function, rc.file, rc.line, first.kind if first else None, first.source if first else None)


def _label(site: rm.GraphBreakSite) -> str:
    return f"{site.gb_type} at {site.user_frame.file.rsplit('/', 1)[-1]}:{site.user_frame.line}"


def _remaining_labels(sites: list[rm.GraphBreakSite], recompiles: list[rm.Recompile]) -> list[str]:
    """What a fix left: each break site, and the recompiles folded by frame and guarded source
    (`recompile of forward (model.py:9) x8: attribute self.step`), without torch's source comment and hint."""
    out = [_label(s) for s in sites]
    folded: dict[tuple[str, str, int, str], int] = {}
    for rc in recompiles:
        g = rc.failed_guards[0] if rc.failed_guards else None
        what = f"{g.kind} {module_path_of(g.source)}" if g is not None and g.source else (g.reason.split("  #")[0] if g else "?")
        key = (rc.function, rc.file.rsplit("/", 1)[-1], rc.line, what)
        folded[key] = folded.get(key, 0) + 1
    for (function, file, line, what), n in folded.items():
        out.append(f"recompile of {function} ({file}:{line}){f' x{n}' if n > 1 else ''}: {what}")
    return out


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
    with preserved_state(model), torch.set_grad_enabled(grad):
        run_pass(model, workload, ctx.calls, seed=seed, train=train, sink=eager)
    random = False
    if seed is not None:
        same = SameAs(eager)
        with preserved_state(model), torch.set_grad_enabled(grad):
            run_pass(model, workload, ctx.calls, seed=seed + 7919, train=train, sink=same)
        random = same.differs
    # the copy the eager run used is cast for the reference run (inference: in place, put back exact)
    reference = make_reference(
        model, ctx.workload, ctx.calls, eager, seed=seed, train=train,
        device=ctx.settings.where, loose=loose_backend(ctx.settings.backend), room=ctx.room,
    )  # fmt: skip
    del model
    release_memory(ctx.settings.where)  # the reference's float64 activations: the checks start from what the model holds
    if random:  # eager from another seed differs: dropout, rand
        reference.random = "same seed per call" + (
            "; the checks compile with torch._inductor.config.fallback_random=True" if ctx.settings.backend == "inductor" else ""
        )
    return reference


@dataclass
class _Base:
    """What a fix is compared with: the report's findings, or a measured baseline with the report's ids."""

    graph_breaks: list[rm.GraphBreakSite]
    recompiles: list[rm.Recompile]
    summary: rm.Summary


def _with_report_ids(findings: Findings, report: rm.Report) -> _Base:
    """A measured baseline whose sites and recompiles carry the ids of the report's matching ones (a
    site by its innermost frame: the report's own frames may be the script's, `GraphBreakSite.key`)."""
    site_ids = {s.key(own_frame=False): s.id for s in report.graph_breaks}
    recompile_ids: dict[tuple[Any, ...], list[str]] = {}
    for rc in report.recompiles:
        recompile_ids.setdefault(_recompile_key(rc), []).append(rc.id)
    sites = [s.model_copy(update={"id": site_ids.get(s.key(own_frame=False), s.id)}) for s in findings.graph_breaks]
    recompiles = []
    for rc in findings.recompiles:
        ids = recompile_ids.get(_recompile_key(rc))
        recompiles.append(rc.model_copy(update={"id": ids.pop(0)}) if ids else rc)
    return _Base(sites, recompiles, findings.summary(failed=False))


class _Checker:
    """Re-checks variants of the model through the live capture, against the original's counts and outputs."""

    def __init__(self, ctx: PhaseContext, reference: Reference) -> None:
        assert ctx.report is not None
        self.ctx = ctx
        self.base = _Base(ctx.report.graph_breaks, ctx.report.recompiles, ctx.report.summary)
        self.bases: dict[str, _Base | None] = {}
        """Another backend's measured baseline, with the report's ids (`base_on`; None: it could not be)."""
        self.reference = reference

    def measure_baseline(self, model: torch.nn.Module) -> tuple[rm.Verification, str | None]:
        """Measure the unchanged copy and compare later checks with it: its check, and None or why it could
        not. A copy whose compile departs from float64 still gives its counts (the compile is wrong, not a
        fix: the checks after it depart alike, and the report leads with it)."""
        settings = self.ctx.settings
        verification, findings = self.check(make_variant(model, self.ctx.calls, [], settings.device, share=settings.shares))
        wrong = verification.numerics_ok is False and (verification.error or "").startswith("changes compiled results")
        if findings is None or (verification.error and not wrong):
            return verification, verification.error or "the unchanged copy could not be measured"
        assert self.ctx.report is not None
        self.base = _with_report_ids(findings, self.ctx.report)
        return verification, None

    def base_on(self, backend: str) -> _Base | None:
        """The unchanged copy measured once on `backend`, as the checks counted there are compared with
        it; None when it cannot be measured there."""
        if backend not in self.bases:
            self.bases[backend] = self.base  # what the measuring check compares with, until it is replaced
            settings = self.ctx.settings
            variant = make_variant(self.model_of(), self.ctx.calls, [], settings.device, share=settings.shares)
            verification, findings = self.check(variant, backend)
            wrong = verification.numerics_ok is False and (verification.error or "").startswith("changes compiled results")
            measured = findings is not None and not (verification.error and not wrong)
            assert self.ctx.report is not None
            self.bases[backend] = _with_report_ids(findings, self.ctx.report) if measured and findings is not None else None
        return self.bases[backend]

    def config_of(self, suggestions: list[rm.Suggestion]) -> dict[str, Any]:
        """The Dynamo config a copy with the suggestions compiles under."""
        actions = [s.action for s in suggestions if s.action is not None]
        return make_variant(self.model_of(), self.ctx.calls[:1], actions, self.ctx.settings.device, share=self.ctx.settings.shares).config

    def model_of(self) -> torch.nn.Module:
        ctx = self.ctx
        return ctx.pristine if ctx.pristine is not None else ctx.workload.model  # type: ignore[no-any-return]

    def replay(self, suggestions: list[rm.Suggestion]) -> Callable[[Callable[..., Any]], None]:
        """`run(compile)`: a fresh copy with the suggestions applied, warmed up as the check does, then every
        call through `compile(copy)` (what triage compiles with each backend in turn)."""
        ctx = self.ctx
        actions = [s.action for s in suggestions if s.action is not None]

        def run(compile_: Callable[..., Any]) -> None:
            variant = make_variant(self.model_of(), ctx.calls, actions, ctx.settings.device, share=ctx.settings.shares)
            fixed = variant.workload_of(ctx.workload)
            with preserved_state(variant.model):
                variant.run_warm_up(fixed, ctx.settings.seed)
            compiled = compile_(variant.model)
            with preserved_state(variant.model), grad_mode(ctx.settings):
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
                compiled = CompiledRun(fixed, variant.calls, settings, dynamo_config=variant.config, sink=compiled_check)
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

        # the same site by its innermost frame, as in `_with_report_ids` (`GraphBreakSite.key`)
        before_sites = {s.key(own_frame=False): s for s in base.graph_breaks}
        after_sites = {s.key(own_frame=False): s for s in findings.graph_breaks}
        after_lines = {k[1:] for k in after_sites}  # a line that breaks no more is fixed, whatever breaks there
        verification.fixed = [s.id for k, s in before_sites.items() if k[1:] not in after_lines]
        verification.new_sites = [_label(s) for k, s in after_sites.items() if k not in before_sites]
        after_recompiles: dict[tuple[Any, ...], int] = {}
        for rc in findings.recompiles:
            after_recompiles[_recompile_key(rc)] = after_recompiles.get(_recompile_key(rc), 0) + 1
        for rc in base.recompiles:
            key = _recompile_key(rc)
            if after_recompiles.get(key, 0) > 0:
                after_recompiles[key] -= 1
            else:
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


def _gain(v: rm.Verification) -> int:
    """What a suggestion measurably removed alone: graphs, break sites and recompiles."""
    if v.before is None or v.after is None:
        return 0
    b, a = v.before, v.after
    return (b.graphs_compiled - a.graphs_compiled) + (b.unique_break_sites - a.unique_break_sites) + (b.recompile_count - a.recompile_count)


def _why(v: rm.Verification) -> str:
    return (v.error or ("changes results" if v.numerics_ok is False else "did not apply"))[:300]


class _Fixer:
    """The fix phase's loop: each suggestion alone, then the safe, effective ones together, then, when the
    set fails together, the best subset that holds."""

    def __init__(self, ctx: PhaseContext, options: FixOptions, section: FixSection, model: torch.nn.Module) -> None:
        self.ctx, self.options, self.section, self.model = ctx, options, section, model
        self.t0 = time.perf_counter()
        self.stop_at = self.t0 + ctx.budget_s if ctx.budget_s is not None else None
        self.slowest = 0.0  # the longest check so far: a check that cannot finish in the time left is not started
        self.checker = _Checker(ctx, make_fix_reference(ctx))
        self.findings: dict[str, Findings | None] = {}
        """Suggestion id -> what its copy's compiled run found, checked alone."""
        self.counting: str | None = None
        """The backend the suggestions together are counted on: None (the analysis's), or `aot_eager` once a
        suggestion alone counted differently through AOTAutograd (`recounted`)."""

    def time_left(self) -> bool:
        return self.stop_at is None or time.perf_counter() + self.slowest <= self.stop_at

    def check(self, suggestions: list[rm.Suggestion], backend: str | None = None) -> tuple[rm.Verification, Findings | None]:
        try:
            actions = [s.action for s in suggestions if s.action is not None]
            variant = make_variant(self.model, self.ctx.calls, actions, self.ctx.settings.device, share=self.ctx.settings.shares)
        except VariantError as exc:
            return rm.Verification(applied=False, error=str(exc)), None
        verification, findings = self.checker.check(variant, backend)
        self.slowest = max(self.slowest, verification.duration_s)
        ti.fresh_dynamo_state()
        del variant
        release_memory(self.ctx.settings.where)  # the copy and its activations: the next check starts from the model alone
        return verification, findings

    def through_aot_autograd(self, suggestion: rm.Suggestion, verification: rm.Verification) -> rm.Verification:
        """A fix that held under Dynamo alone (the `eager` backend) compiled once more through AOTAutograd
        (`aot_eager`: cheap, no kernels), as any real backend compiles it: a fix that crashes there (a
        PyTorch bug its change walks into, e.g. a symbolic int under `%`) is not safe to recommend, and one
        that compiles another number of graphs there is counted there (`recounted`)."""
        if self.ctx.settings.backend != "eager":
            verification.compiled_on = [self.ctx.settings.backend]
            return verification
        t0 = time.perf_counter()
        # the fix's copy run through every call on aot_eager, as triage runs each backend (one runner for both)
        run, config = self.checker.replay([suggestion]), self.checker.config_of([suggestion])
        aot = attempt(run, AOT, config)
        release_memory(self.ctx.settings.where)
        verification.duration_s = round(verification.duration_s + time.perf_counter() - t0, 3)
        if aot.error is None:
            verification.compiled_on = ["eager", AOT]
            after = verification.after
            if after is not None and aot.graphs != after.graphs_compiled and self.time_left():
                return self.recounted(suggestion, verification, aot.graphs)
            return verification
        error = f"{type(aot.error).__name__}: {describe_error(aot.error)}"
        verification.compiled_on = ["eager"]
        verification.breaks_compile = f"aot_eager (AOTAutograd): {error}"[:500]
        verification.error = f"breaks the compile: {verification.breaks_compile}"[:500]
        verification.summary = f"failed: {verification.error}"[:300]
        verification.safe = verification.effective = False
        if is_torch_failure(error) and self.time_left():  # a bug of torch's the fix walks into: ready to file
            self.ctx.progress(ProgressEvent(Step.FIX, subject=f"{suggestion.id}: PyTorch bug"))
            # the eager check passed, aot_eager just failed: the stages are known, not compiled again
            found = triage(run, "aot_eager", config, where=f"the compile with fix {suggestion.id}", known=[Attempt("eager"), aot])
            if found.bug is not None:
                self.section.torch_bugs[suggestion.id] = found.bug
                if self.options.repro_dir:
                    write_bug(found.bug, self.options.repro_dir, suggestion.id.lower())
        return verification

    def recounted(self, suggestion: rm.Suggestion, verification: rm.Verification, graphs: int) -> rm.Verification:
        """A fix whose copy compiled `graphs` graphs through AOTAutograd, another number than under Dynamo
        alone, counted there instead, against the unchanged copy counted there too: what the backend the
        user runs sees (a dim marked dynamic carries past a graph break through AOTAutograd, not on the
        `eager` backend, whose resumed functions then recompile on their first sizes). The suggestions
        together are then counted there as well."""
        result = self.section.result
        after = verification.after
        assert after is not None
        alone = f"Dynamo alone (the eager backend) compiled {after.graphs_compiled} graph(s): {verification.summary}"
        differs = f"{suggestion.id} compiled {graphs} graph(s) through AOTAutograd where {alone}"
        if self.checker.base_on(AOT) is None:
            result.notes.append(f"{differs}; the unchanged copy could not be counted there, so these counts stay.")
            return verification
        recount, findings = self.check([suggestion], AOT)
        if recount.error is not None or recount.after is None:
            result.notes.append(f"{differs}; counted there the check failed ({_why(recount)}), so these counts stay.")
            return verification
        recount.compiled_on = ["eager", AOT]
        recount.duration_s = round(verification.duration_s + recount.duration_s, 3)
        self.findings[suggestion.id] = findings
        self.counting = AOT
        result.notes.append(
            f"{suggestion.id} is counted through AOTAutograd ({AOT}), as a real backend compiles it: {recount.summary}, where {alone}."
        )
        return recount

    def reproduced(self, suggestion: rm.Suggestion) -> bool:
        """Whether the measured baseline holds any of the sites and recompiles the suggestion addresses (a
        script's replayed calls miss the recompiles its own state changes drove: a check would say "no
        effect" of what it never saw)."""
        base = self.checker.base
        present = {s.id for s in base.graph_breaks} | {rc.id for rc in base.recompiles}
        return not suggestion.applies_to or bool(set(suggestion.applies_to) & present)

    def alone(self, candidates: list[rm.Suggestion], total: int) -> list[rm.Suggestion]:
        """Each suggestion on its own copy; the safe, effective, not redundant ones, in order."""
        section, result = self.section, self.section.result
        chosen: list[rm.Suggestion] = []
        for i, suggestion in enumerate(candidates):
            self.ctx.progress(ProgressEvent(Step.FIX, i, total, subject=suggestion.id))
            if not self.time_left():
                left = ", ".join(c.id for c in candidates[i:])
                result.notes.append(f"--budget/--timeout: no time left to verify {left}; not applied.")
                break
            if self.options.measure_baseline and not self.reproduced(suggestion):
                result.notes.append(
                    f"{suggestion.id} not verified: the replayed calls do not reproduce {', '.join(suggestion.applies_to[:4])} "
                    "(the script changed the module's state between its calls, which a replay of its inputs does not)."
                )
                continue
            advice = suggestion.action is not None and suggestion.action.type in VERIFIED_ADVICE
            if not self.options.verify_each:
                if not advice:  # advice is the user's to follow: never applied with the fixes
                    chosen.append(suggestion)
                continue
            verification, self.findings[suggestion.id] = self.check([suggestion])
            if verification.safe and verification.effective and self.time_left():
                verification = self.through_aot_autograd(suggestion, verification)
            addressed = [a for a in suggestion.applies_to if a.startswith("B")]
            # the addressed break is gone and another appeared: moved, not removed
            verification.moved_break = bool(addressed and set(addressed) & set(verification.fixed) and verification.new_sites)
            section.verified[suggestion.id] = verification
            covered = {f for c in chosen for f in (section.verified[c.id].fixed if c.id in section.verified else [])}
            if advice:  # the user moves their own code
                if verification.safe and verification.effective:
                    result.notes.append(
                        f"{suggestion.id} held on a copy changed before it was compiled ({verification.summary or 'see its row'}): "
                        "make that change in your code; it is not a patch, so nothing is applied for it."
                    )
                continue
            if not verification.safe:
                result.unsafe.append(suggestion.id)
            elif not verification.effective:
                result.ineffective.append(suggestion.id)
            elif verification.fixed and set(verification.fixed) <= covered:
                result.redundant.append(suggestion.id)  # an earlier (preferred) suggestion already fixes the same
            else:
                chosen.append(suggestion)
        return chosen

    def together(self, chosen: list[rm.Suggestion]) -> None:
        """The chosen suggestions on one copy; when they fail together, the best subset that holds: the
        suggestions in order of what each removed alone, each kept while the set stays safe."""
        result = self.section.result
        alone = self.section.verified.get(chosen[0].id) if len(chosen) == 1 else None
        if alone is not None:  # one suggestion: its check alone is the combined one
            verification, after = alone, self.findings.get(chosen[0].id)
        else:
            verification, after = self.check(chosen, self.counting)
        if not verification.safe and len(chosen) > 1 and self.options.verify_each:
            verification, after, chosen = self.best_subset(chosen, verification)
        result.verification = verification
        if verification.safe and chosen:
            result.applied = [s.id for s in chosen]
        else:
            result.notes.append("The suggestions were safe one by one but not together: " + _why(verification) + ".")
        if after is not None:
            result.remaining = _remaining_labels(after.graph_breaks, after.recompiles)

    def best_subset(
        self, chosen: list[rm.Suggestion], failed: rm.Verification
    ) -> tuple[rm.Verification, Findings | None, list[rm.Suggestion]]:
        result, verified = self.section.result, self.section.verified
        ranked = sorted(chosen, key=lambda s: -_gain(verified[s.id]))  # stable: ties keep the report's order
        result.notes.append(
            f"{'+'.join(s.id for s in chosen)} together: {_why(failed)}; looking for the best subset that holds "
            f"(each added in order of what it removed alone: {', '.join(s.id for s in ranked)})."
        )
        kept = [ranked[0]]
        best = (verified[ranked[0].id], self.findings.get(ranked[0].id))
        for suggestion in ranked[1:]:
            if not self.time_left():
                result.dropped[suggestion.id] = "--budget/--timeout: no time left to verify it with the others"
                continue
            self.ctx.progress(ProgressEvent(Step.FIX, subject="+".join(s.id for s in [*kept, suggestion])))
            verification, findings = self.check([*kept, suggestion], self.counting)
            if verification.safe:
                kept.append(suggestion)
                best = (verification, findings)
            else:
                result.dropped[suggestion.id] = f"with {'+'.join(s.id for s in kept)}: {_why(verification)}"
        order = {s.id: i for i, s in enumerate(chosen)}
        return best[0], best[1], sorted(kept, key=lambda s: order[s.id])


def run_fix(ctx: PhaseContext, options: FixOptions) -> FixSection:
    """Verify each auto-applicable suggestion alone, then apply the safe, effective ones together (or the
    best subset of them that holds together)."""
    t0 = time.perf_counter()
    report = ctx.report
    assert report is not None
    backend = ctx.settings.backend
    rtol, atol = tolerance(torch.float32, loose_backend(backend))
    section = FixSection(rm.FixResult(backend=backend, tolerance={"rtol": rtol, "atol": atol}))
    result = section.result
    candidates = list(iter_auto(report.suggestions))
    if not candidates:
        regional = [s.id for s in report.suggestions if s.auto_applicable and s.action is not None and s.action.type == "regional"]
        result.notes.append(
            f"Nothing to apply here: {', '.join(regional)} (regional compilation) is measured by the benchmark's regional arm "
            "(`ctc-doctor bench` on a build() target), not by a fix check."
            if regional
            else "No auto-applicable suggestion: nothing to apply."
        )
        result.duration_s = round(time.perf_counter() - t0, 3)
        return section
    model = ctx.pristine if ctx.pristine is not None else ctx.workload.model
    assert isinstance(model, torch.nn.Module)
    fixer = _Fixer(ctx, options, section, model)
    kept = False
    section.reference_run = fixer.checker.reference.run
    try:
        _verify(ctx, options, fixer, candidates)
        kept = options.keep_reference
    except Stopped as stop:  # each check that finished is kept; nothing is applied
        done = ", ".join(section.verified) or "none"
        result.notes.append(f"The run was stopped during the fix checks: verified alone before it: {done}; nothing applied.")
        result.duration_s = round(time.perf_counter() - t0, 3)
        stop.partial = section
        raise
    finally:
        if kept:
            section.reference = fixer.checker.reference
        else:
            fixer.checker.reference.close()
        release_memory(ctx.settings.where)
    result.duration_s = round(time.perf_counter() - t0, 3)
    return section


def _workarounds(section: FixSection, suggestions: list[rm.Suggestion]) -> None:
    """Each PyTorch bug a fix walked into gets, as its workaround, the applied fix for the same cause."""
    by_id = {s.id: s for s in suggestions}
    for sid, bug in section.torch_bugs.items():
        crashed = by_id.get(sid)
        other = next(
            (
                by_id[a]
                for a in section.result.applied
                if a in by_id and crashed is not None and set(by_id[a].applies_to) & set(crashed.applies_to)
            ),
            None,
        )
        if other is not None and other.id in section.verified:
            check = section.verified[other.id]
            through = ", ".join(check.compiled_on) or "the check's backend"
            bug.workaround = f"{other.id} instead: {other.title} (verified on a copy through {through}: {check.summary or 'verified'})"
            bug.workaround_verified = True
        elif crashed is not None:
            bug.workaround = f"leave {sid} out: the model compiles without it (the recompiles it addresses stay)"


def _verify(ctx: PhaseContext, options: FixOptions, fixer: _Fixer, candidates: list[rm.Suggestion]) -> None:
    """Each candidate alone, then the chosen ones together, into the fixer's section."""
    result = fixer.section.result
    model = fixer.model
    reference = fixer.checker.reference
    if reference.method != "float64_reference":
        result.notes.append(f"Numerics: {reference.method.replace('_', ' ')} ({reference.note}).")
    if options.measure_baseline:
        result.baseline, problem = fixer.checker.measure_baseline(model)
        if problem is not None:
            result.notes.append(f"The unchanged copy could not be measured ({problem}): nothing was verified.")
            return
        result.notes.append("Counts before and after are measured on the calls kept of the script's run, with and without each fix.")

    total = len(candidates) + 1
    chosen = fixer.alone(candidates, total)
    ctx.progress(ProgressEvent(Step.FIX, len(candidates), total, subject="combined"))
    if chosen and not fixer.time_left():
        result.notes.append(f"--budget/--timeout: no time left to verify {', '.join(s.id for s in chosen)} together; nothing applied.")
        chosen = []
    if chosen:
        fixer.together(chosen)
    else:
        result.remaining = _remaining_labels(fixer.checker.base.graph_breaks, fixer.checker.base.recompiles)
    _workarounds(fixer.section, candidates)
    ctx.progress(ProgressEvent(Step.FIX, total, total, subject="combined"))
