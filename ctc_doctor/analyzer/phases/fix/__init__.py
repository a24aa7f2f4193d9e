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

import functools
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ... import torch_internals as ti
from ...capture.live import Findings
from ...fixes.variants import VariantError
from ...readers.text import describe_error
from ...running.deadline import Stopped
from ...running.device import warm_compiler
from ...running.memory import release_memory
from ...running.numerics import Reference, loose_backend, tolerance
from ...triage import Attempt, attempt, error_line, is_torch_failure, stage_of, triage, write_bug
from ..context import LentCompile, PhaseContext
from .check import AOT, Base, Checker, counted, effect_summary, make_fix_reference, remaining_labels


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
    user_backend: str | None = None
    """The backend the user runs (inductor unless told): the applied set is compiled and run there once
    more before it is recommended (`_Fixer.on_backend`); None: not."""
    user_compile: dict[str, Any] = field(default_factory=dict)
    """The user's own compile options passed with it there (a script's `dynamic`, `mode`; the benchmark's mode)."""


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
    lent_compile: LentCompile | None = None
    """With `FixOptions.keep_reference`: the applied set's compile on the user's backend, its inductor cache
    kept for the benchmark's `compiled_fixed` arm (whoever takes it removes the folder)."""


VERIFIED_ADVICE = ("change_first", "compile_only")
"""Actions of advice the user applies in their own code, verified on a copy but never applied with the fixes."""


def iter_auto(suggestions: list[rm.Suggestion]) -> Iterator[rm.Suggestion]:
    """Auto-applicable suggestions that `fix` verifies one by one (regional is measured by the benchmark),
    and the advice it can verify (`VERIFIED_ADVICE`)."""
    for s in suggestions:
        if s.action is not None and (s.auto_applicable and s.action.type != "regional" or s.action.type in VERIFIED_ADVICE):
            yield s


def _gain(v: rm.Verification) -> int:
    """What a suggestion measurably removed alone: graphs, break sites and recompiles."""
    if v.before is None or v.after is None:
        return 0
    b, a = v.before, v.after
    return (b.graphs_compiled - a.graphs_compiled) + (b.unique_break_sites - a.unique_break_sites) + (b.recompile_count - a.recompile_count)


def _advice_note(suggestion: rm.Suggestion, verification: rm.Verification) -> str:
    """The fix section's note on advice that held on a copy (it is the user's to follow, never applied)."""
    measured = verification.summary or "see its row"
    assert suggestion.action is not None
    if suggestion.action.type == "compile_only":
        return (
            f"{suggestion.id} held on a copy with only {', '.join(suggestion.action.module_paths)} compiled ({measured}): "
            "compile that in your code instead of the whole model; it is not a patch, so nothing is applied for it."
        )
    return (
        f"{suggestion.id} held on a copy changed before it was compiled ({measured}): "
        "make that change in your code; it is not a patch, so nothing is applied for it."
    )


def _why(v: rm.Verification) -> str:
    return (v.error or ("changes results" if v.numerics_ok is False else "did not apply"))[:300]


class _Fixer:
    """The fix phase's loop: each suggestion alone, then the safe, effective ones together, then, when the
    set fails together, the best subset that holds."""

    def __init__(self, ctx: PhaseContext, options: FixOptions, section: FixSection) -> None:
        self.ctx, self.options, self.section = ctx, options, section
        self.t0 = time.perf_counter()
        self.stop_at = self.t0 + ctx.budget_s if ctx.budget_s is not None else None
        self.slowest = 0.0  # the longest check so far: a check that cannot finish in the time left is not started
        self.checker = Checker(ctx, make_fix_reference(ctx))
        self.findings: dict[str, Findings | None] = {}
        """Suggestion id -> what its copy's compiled run found, checked alone."""
        self.counting: str | None = None
        """The backend every suggestion is counted on: None (the analysis's), or `aot_eager` when the
        unchanged copy counts otherwise there (`count_through_aot_autograd`, `recounted`)."""
        self.restart: str | None = None
        """Why every suggestion checked alone so far is checked again, on `counting` (`recounted`)."""

    def time_left(self, checks: int = 1) -> bool:
        return self.stop_at is None or time.perf_counter() + checks * self.slowest <= self.stop_at

    def count_through_aot_autograd(self) -> None:
        """With gradients on, Dynamo alone (the `eager` backend) and AOTAutograd compile other graphs
        around the breaks (the showcase: 17 graphs on eager, 15 through AOTAutograd and inductor): every
        fix is then counted on aot_eager from the start, against the unchanged copy counted there."""
        settings = self.ctx.settings
        grad = settings.grad if settings.grad is not None else settings.train or torch.is_grad_enabled()
        if settings.backend != "eager" or not grad:
            return
        base = self.baseline_on(AOT)
        if base is None:
            self.section.result.notes.append(f"The unchanged copy could not be counted on {AOT}: fixes are counted on eager.")
            return
        self.counting = AOT
        self.section.result.notes.append(
            f"With gradients on, each fix is counted through AOTAutograd ({AOT}), as a real backend compiles it, against "
            f"the unchanged copy counted there ({counted(base.summary)}; the analysis, on eager: {counted(self.checker.base.summary)})."
        )

    def baseline_on(self, backend: str) -> Base | None:
        """The unchanged copy counted on `backend` (`Checker.base_on`), timed as a check is."""
        t0 = time.perf_counter()
        base = self.checker.base_on(backend)
        self.slowest = max(self.slowest, time.perf_counter() - t0)
        ti.fresh_dynamo_state()
        release_memory(self.ctx.settings.where)
        return base

    def check_alone(self, suggestion: rm.Suggestion) -> rm.Verification:
        """`suggestion` on its own copy, counted on `counting`; on eager, then through AOTAutograd as well
        (`through_aot_autograd`), as is a fix whose compile fails on aot_eager (the stage it fails in is
        then named; without the time to, its failure there stands)."""
        failed = None
        if self.counting is not None:
            verification, self.findings[suggestion.id] = self.check([suggestion], self.counting)
            if verification.after is not None or not verification.applied:
                return verification
            failed = verification
        verification, self.findings[suggestion.id] = self.check([suggestion])
        if verification.safe and verification.effective:
            if not self.time_left():
                return failed or verification
            verification = self.through_aot_autograd(suggestion, verification)
        return verification

    def check(self, suggestions: list[rm.Suggestion], backend: str | None = None) -> tuple[rm.Verification, Findings | None]:
        try:
            actions = [s.action for s in suggestions if s.action is not None]
            variant = self.checker.variant(actions)
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
            if after is not None and aot.graphs != after.graphs_compiled and self.counting is None and self.time_left(2):
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
        `eager` backend, whose resumed functions then recompile on their first sizes). When the unchanged
        copy counts otherwise there too, no check on eager holds: every suggestion is checked again there
        (`restart`)."""
        result = self.section.result
        after = verification.after
        assert after is not None
        alone = f"Dynamo alone (the eager backend) compiled {after.graphs_compiled} graph(s): {verification.summary}"
        differs = f"{suggestion.id} compiled {graphs} graph(s) through AOTAutograd where {alone}"
        t0 = time.perf_counter()
        base = self.baseline_on(AOT)
        verification.duration_s = round(verification.duration_s + time.perf_counter() - t0, 3)
        if base is None:
            result.notes.append(f"{differs}; the unchanged copy could not be counted there, so these counts stay.")
            return verification
        if counted(base.summary) != counted(self.checker.base.summary):
            self.counting = AOT
            self.restart = (
                f"{differs}, and the unchanged copy counts {counted(base.summary)} there ({counted(self.checker.base.summary)} "
                f"on eager): every fix is checked through AOTAutograd ({AOT}), as a real backend compiles it."
            )
            return verification
        recount, findings = self.check([suggestion], AOT)
        if recount.after is None:
            result.notes.append(f"{differs}; counted there the check failed ({_why(recount)}), so these counts stay.")
            return verification
        recount.compiled_on = ["eager", AOT]
        recount.duration_s = round(verification.duration_s + recount.duration_s, 3)
        self.findings[suggestion.id] = findings
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
        """Each suggestion on its own copy; the safe, effective, not redundant ones, in order. When a check
        found that the unchanged copy counts otherwise through AOTAutograd (`recounted`), the ones before
        it are checked again there."""
        result = self.section.result
        noted = len(result.notes)
        chosen = self.each_alone(candidates, total)
        if self.restart is not None:
            del result.notes[noted:]
            for kept in (result.unsafe, result.ineffective, result.redundant):
                kept.clear()
            self.section.verified.clear()
            self.section.torch_bugs.clear()  # triaged again as the fixes are checked again
            self.findings.clear()
            result.notes.append(self.restart)
            self.restart = None
            chosen = self.each_alone(candidates, total)
        return chosen

    def each_alone(self, candidates: list[rm.Suggestion], total: int) -> list[rm.Suggestion]:
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
            covered = {f for c in chosen for f in (section.verified[c.id].fixed if c.id in section.verified else [])}
            if suggestion.action is not None and suggestion.action.type == "compile_options" and set(suggestion.applies_to) <= covered:
                # `dynamic=True` recompiles the whole model shape-generic (75 s on a detector): not checked for
                # recompiles a fix checked before it already removes
                result.redundant.append(suggestion.id)
                continue
            advice = suggestion.action is not None and suggestion.action.type in VERIFIED_ADVICE
            if not self.options.verify_each:
                if not advice:  # advice is the user's to follow: never applied with the fixes
                    chosen.append(suggestion)
                continue
            verification = self.check_alone(suggestion)
            if self.restart is not None:
                break
            addressed = [a for a in suggestion.applies_to if a.startswith("B")]
            # the addressed break is gone and another appeared: moved, not removed
            verification.moved_break = bool(addressed and set(addressed) & set(verification.fixed) and verification.new_sites)
            section.verified[suggestion.id] = verification
            if advice:  # the user moves their own code
                if verification.safe and verification.effective:
                    result.notes.append(_advice_note(suggestion, verification))
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
            verification, after = self.check(chosen, self.together_on(chosen))
        if not verification.safe and len(chosen) > 1 and self.options.verify_each:
            verification, after, chosen = self.best_subset(chosen, verification)
        result.verification = verification
        if verification.safe and chosen:
            result.applied = [s.id for s in chosen]
        else:
            result.notes.append("The suggestions were safe one by one but not together: " + _why(verification) + ".")
        if after is not None:
            result.remaining = remaining_labels(after.graph_breaks, after.recompiles)

    def on_top(self, candidates: list[rm.Suggestion]) -> None:
        """Fixes judged on top of each other: a fix that changed nothing alone, of a kind (recompiles, breaks)
        the applied set still leaves, measured again on top of that set; it joins the set when it removes
        some of what is left, and says it was measured that way (`on_top_of`)."""
        result, verified = self.section.result, self.section.verified
        for c in candidates:
            left = result.verification.after if result.verification is not None else None
            if left is None or not result.applied or c.id not in result.ineffective:
                continue
            kinds = {a[:1] for a in c.applies_to}
            if not (("R" in kinds and left.recompile_count) or ("B" in kinds and left.unique_break_sites)):
                continue
            if not self.time_left():
                result.notes.append(f"--budget/--timeout: no time left to measure {c.id} on top of {'+'.join(result.applied)}.")
                return
            applied = [x for x in candidates if x.id in result.applied]
            on = "+".join(x.id for x in applied)
            self.ctx.progress(ProgressEvent(Step.FIX, subject=f"{c.id} on top of {on}"))
            verification, findings = self.check([*applied, c], self.together_on(applied))
            after = verification.after
            if not verification.safe or after is None:
                continue
            now = (after.graphs_compiled, after.recompile_count, after.unique_break_sites)
            was = (left.graphs_compiled, left.recompile_count, left.unique_break_sites)
            if not (all(a <= b for a, b in zip(now, was, strict=True)) and now != was):
                result.notes.append(f"{c.id} changed nothing alone, nor on top of {on} ({effect_summary(left, after)}).")
                continue
            alone = verified[c.id].summary if c.id in verified else None
            own = verification.model_copy(deep=True)
            own.before, own.on_top_of = left, [x.id for x in applied]
            own.fixed = [f for f in verification.fixed if f not in (result.verification.fixed if result.verification else [])]
            own.summary = f"on top of {on}: {effect_summary(left, after)}"
            verified[c.id] = own
            result.ineffective.remove(c.id)
            result.applied.append(c.id)
            result.verification = verification
            if findings is not None:
                result.remaining = remaining_labels(findings.graph_breaks, findings.recompiles)
            result.notes.append(
                f"{c.id} changed nothing alone ({alone}): another cause masked it; measured on top of {on} it removes "
                f"more ({effect_summary(left, after)}), so it is applied with them."
            )

    def on_backend(self, backend: str, kw: dict[str, Any], candidates: list[rm.Suggestion]) -> None:
        """Recommended means it ran on the user's backend: the applied set compiled once on `backend` (with the
        user's own options `kw`) on a copy and run through every call. When that fails, the fixes at fault
        (`culprits`) are marked "breaks the compile on <backend>", their PyTorch bug triaged, and the rest
        verified together again, then compiled there once more. One compile when nothing fails."""
        result, verified = self.section.result, self.section.verified
        applied = [c for c in candidates if c.id in result.applied]
        if not applied or all(backend in (verified[c.id].compiled_on if c.id in verified else []) for c in applied):
            return
        t0 = time.perf_counter()
        check = rm.BackendCheck(backend=backend, options=dict(kw))
        result.on_backend = check
        # the backend's one-time costs paid apart, as the benchmark's warm-up pays them: its figure then
        # counts on the workload's side (a fresh process of the user's pays it once), not in this compile
        warm_compiler(self.ctx.settings.where, backend, kw.get("mode"))
        ti.fresh_dynamo_state()
        while applied:
            if not self.time_left():
                check.note = f"--budget/--timeout: no time left to compile {'+'.join(c.id for c in applied)} on {backend}"
                break
            self.ctx.progress(ProgressEvent(Step.FIX, subject=f"{'+'.join(c.id for c in applied)} on {backend}"))
            tried = self.compile_lent(backend, kw, applied)
            check.compiles += 1
            if tried.error is None:
                check.ran = [c.id for c in applied]
                for c in applied:
                    if c.id in verified and backend not in verified[c.id].compiled_on:
                        verified[c.id].compiled_on.append(backend)
                break
            at_fault = self.culprits(backend, kw, applied, tried, check)
            if not at_fault:
                check.note = (
                    f"{'+'.join(c.id for c in applied)} together fail on {backend} ({error_line(tried.error)}), and no one fix "
                    "alone or left out explains it: kept as verified on the checks' backends"
                )
                break
            for culprit, failed in at_fault:
                self.broke(culprit, backend, kw, failed)
                check.breaks.append(culprit.id)
            applied = [c for c in applied if c.id not in check.breaks]
            result.applied = [a for a in result.applied if a not in check.breaks]
            if applied:
                self.together(applied)  # the rest verified together again, on the checks' backend
                applied = [c for c in applied if c.id in result.applied]
            else:
                result.verification = None
                result.remaining = self.left_unfixed()
        check.duration_s = round(time.perf_counter() - t0, 3)
        result.notes.append(
            f"Compiled on {backend}, your backend, before they are recommended: "
            + (f"{'+'.join(check.ran)} ran" if check.ran else "nothing ran")
            + (f"; {', '.join(check.breaks)} break{'s' if len(check.breaks) == 1 else ''} the compile there" if check.breaks else "")
            + f" ({check.compiles} compile{'s' if check.compiles != 1 else ''}, {check.duration_s:.1f} s)."
        )

    def left_unfixed(self) -> list[str]:
        """What the unchanged copy has, where the fixes are counted: what is left when none is applied."""
        base = (self.checker.bases.get(self.counting) if self.counting else None) or self.checker.base
        return remaining_labels(base.graph_breaks, base.recompiles)

    def replay_with(self, suggestions: list[rm.Suggestion], kw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(`run(compile)` over a fresh copy with `suggestions`, compiled with the user's options `kw`; its config)."""
        run = self.checker.replay(suggestions)
        return (lambda compile_: run(functools.partial(compile_, **kw))), self.checker.config_of(suggestions)

    def compile_lent(self, backend: str, kw: dict[str, Any], applied: list[rm.Suggestion]) -> Attempt:
        """`compile_on`, and when the benchmark follows (`keep_reference`) in an empty inductor cache kept for
        it: its `compiled_fixed` arm compiles the same graphs from there, and takes this compile's cold
        figures (`section.lent_compile`) rather than compiling them cold a second time."""
        if not self.options.keep_reference or not ti.counts_cache_hits():
            return self.compile_on(backend, kw, applied)
        folder = tempfile.mkdtemp(prefix="ctc-fixed-compile-")
        try:
            with ti.fresh_inductor_cache(True, keep_in=folder) as kept, ti.count_compiles() as stats:
                tried = self.compile_on(backend, kw, applied)
        except BaseException:  # a stop (--timeout, a signal) during the compile: the folder goes with it
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if tried.error is None and kept and stats.cache_misses:
            phases = {k: round(v, 4) for k, v in stats.phases.items() if v > 0}
            ids = tuple(c.id for c in applied)
            self.section.lent_compile = LentCompile(folder, backend, kw.get("mode"), ids, round(stats.compile_time_s, 4), phases)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        return tried

    def compile_on(self, backend: str, kw: dict[str, Any], suggestions: list[rm.Suggestion]) -> Attempt:
        """A fresh copy with `suggestions` applied, compiled on `backend` and run through every call."""
        run, config = self.replay_with(suggestions, kw)
        tried = attempt(run, backend, config)
        ti.fresh_dynamo_state()
        release_memory(self.ctx.settings.where)
        return tried

    def culprits(
        self, backend: str, kw: dict[str, Any], applied: list[rm.Suggestion], together: Attempt, check: rm.BackendCheck
    ) -> list[tuple[rm.Suggestion, Attempt]]:
        """The fixes that break the compile on `backend`: the one fix of a set of one; else each fix alone
        there; else, when none fails alone, the one whose leaving out lets the rest compile."""
        if len(applied) == 1:
            return [(applied[0], together)]
        found: list[tuple[rm.Suggestion, Attempt]] = []
        for c in applied:
            if not self.time_left():
                return found
            alone = self.compile_on(backend, kw, [c])
            check.compiles += 1
            if alone.error is not None:
                found.append((c, alone))
        if found:
            return found
        for c in applied:
            if not self.time_left():
                break
            rest = self.compile_on(backend, kw, [o for o in applied if o is not c])
            check.compiles += 1
            if rest.error is None:
                return [(c, together)]
        return []

    def broke(self, suggestion: rm.Suggestion, backend: str, kw: dict[str, Any], failed: Attempt) -> None:
        """`suggestion` breaks the compile on `backend`: not safe to recommend, its PyTorch bug triaged."""
        verification = self.section.verified.get(suggestion.id)
        assert failed.error is not None
        error = error_line(failed.error)
        if verification is not None:
            verification.breaks_compile = f"{backend} ({stage_of(backend)}): {error}"[:500]
            verification.error = f"breaks the compile on {backend}: {error}"[:500]
            verification.summary = f"failed: {verification.error}"[:300]
            verification.safe = verification.effective = False
        self.section.result.unsafe.append(suggestion.id)
        if not (is_torch_failure(f"{type(failed.error).__name__}: {error}") or failed.graph is not None) or not self.time_left():
            return
        self.ctx.progress(ProgressEvent(Step.FIX, subject=f"{suggestion.id}: PyTorch bug on {backend}"))
        run, config = self.replay_with([suggestion], kw)
        known = [Attempt("eager"), Attempt(AOT), failed]  # the checks compiled it there: the stages are known
        found = triage(run, backend, config, where=f"the compile with fix {suggestion.id} on {backend}", known=known)
        if found.bug is not None:
            self.section.torch_bugs[suggestion.id] = found.bug
            if self.options.repro_dir:
                write_bug(found.bug, self.options.repro_dir, suggestion.id.lower())

    def together_on(self, chosen: list[rm.Suggestion]) -> str | None:
        """Where suggestions are counted together: where any of them was counted alone."""
        verified = self.section.verified
        return next((v.counted_on for c in chosen if (v := verified.get(c.id)) is not None and v.counted_on), self.counting)

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
            verification, findings = self.check([*kept, suggestion], self.together_on(chosen))
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
    # a fix before a workaround that runs around the same cause: the one checked first is kept, the other,
    # when it fixes nothing more, is redundant (a call-site argument before `capture_scalar_outputs`)
    candidates = sorted(iter_auto(report.suggestions), key=lambda s: s.category == "workaround")
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
    fixer = _Fixer(ctx, options, section)
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
            if section.lent_compile is not None:
                shutil.rmtree(section.lent_compile.cache_dir, ignore_errors=True)
                section.lent_compile = None
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
    reference = fixer.checker.reference
    if reference.method != "float64_reference":
        result.notes.append(f"Numerics: {reference.method.replace('_', ' ')} ({reference.note}).")
    if options.measure_baseline:
        result.baseline, problem = fixer.checker.measure_baseline()
        if problem is not None:
            result.notes.append(f"The unchanged copy could not be measured ({problem}): nothing was verified.")
            return
        result.notes.append("Counts before and after are measured on the calls kept of the script's run, with and without each fix.")

    fixer.count_through_aot_autograd()
    total = len(candidates) + 1
    chosen = fixer.alone(candidates, total)
    ctx.progress(ProgressEvent(Step.FIX, len(candidates), total, subject="combined"))
    if chosen and not fixer.time_left():
        result.notes.append(f"--budget/--timeout: no time left to verify {', '.join(s.id for s in chosen)} together; nothing applied.")
        chosen = []
    if chosen:
        fixer.together(chosen)
        fixer.on_top(candidates)
        if options.user_backend is not None and options.user_backend != ctx.settings.backend:
            fixer.on_backend(options.user_backend, options.user_compile, candidates)
    else:
        result.remaining = fixer.left_unfixed()
    _workarounds(fixer.section, candidates)
    ctx.progress(ProgressEvent(Step.FIX, total, total, subject="combined"))
