"""What to do next: the steps a report leads to.

The steps come from the report's suggestions when it has them (the suggestion rules are the advice
engine), else from the break sites' own hints and the one line of advice each guard kind has
(`guard_kinds`). Plain strings: the terminal, Markdown and the TUI show the same steps. No torch, no rich.
"""

from __future__ import annotations

from ..labels import accuracy_line, cliff_line, failure_text, module_label, module_path_of, short_path, suggestion_status
from ..models import FAILED_PHASES, Report, Suggestion
from ..verdicts import rank_key
from .guard_kinds import guard_kind


def next_steps(report: Report) -> list[str]:
    """Plain-text next steps derived from the findings."""
    steps: list[str] = []
    failed = [e for e in report.errors if e.phase in FAILED_PHASES]
    for err in failed[:2]:
        if err.phase in ("script", "compile") and any(b.suggestion is None for b in report.torch_bugs):
            continue  # a crash inside PyTorch: its own steps below say what happened and the way around it
        if err.phase == "script":
            steps.append(f"The script failed: {err.hint}" if err.hint else f"The script failed; fix that first: {err.message}")
        elif err.phase == "eager":
            steps.append(f"Fix eager mode first: {err.message}")
        elif err.phase == "timeout":
            steps.append(f"{err.message}; raise --timeout or analyze a smaller input")
        else:
            steps.append(f"torch.compile crashed ({err.type}): {err.message}")
    steps.extend(_wrong_result_steps(report))
    steps.extend(_torch_bug_steps(report))
    steps.extend(_strategy_steps(report))
    calls = report.target.calls if report.target.kind in ("build", "script") else None
    rows = _suggestion_steps(report) if report.suggestions else []
    changes = [text for text, _ in rows]
    # the best measured change leads; a cliff is what the cause below it costs, said after the change
    lead = changes[:1] if rows and rows[0][1] else []
    steps.extend(lead)
    for cliff in report.recompile_cliffs:
        fix = f"; its cause {cliff.cause} is {'above' if lead or not changes else 'below'}" if cliff.cause else ""
        steps.append(f"{cliff_line(cliff, calls)}{fix}")
    if report.suggestions:
        steps.extend(changes[len(lead) :])
        clean = report.summary.verdict == "clean" and not report.summary.expected_break_sites and not report.summary.wrong_results
        if report.summary.analysis_run and clean and not failed and not lead:
            steps.insert(0, _clean_line(report))  # the strategies below are for speed or compile time, nothing to fix
        return steps + _bisect_steps(report) + _candidate_bug_steps(report)
    for site in [s for s in report.graph_breaks if not s.expected][:3]:
        frame = site.own_frame or site.user_frame
        where = f"{short_path(frame.file)}:{frame.line}"
        mod = module_label(site.module_paths, 30)
        hint = site.hints[0] if site.hints else site.reason
        steps.append(f"{site.id} {where} ({mod}): {hint}")
    for cause in [c for c in report.recompile_causes if not c.expected][:3]:
        advice = guard_kind(cause.kind).advise(cause.source, cause.dim)
        n = len(cause.recompiles)
        steps.append(f"{cause.id} {cause.summary} ({n} recompile{'s' if n != 1 else ''}): {advice}")
    seen = {"other"} if report.recompile_causes else set()
    for rc in report.recompiles if not report.recompile_causes else []:
        for g in rc.failed_guards:
            # one step per kind; Dynamo's internal stack slots (`___stack0`) name no user variable
            if g.kind in seen or g.kind == "other" or (g.source or "").startswith("___"):
                continue
            seen.add(g.kind)
            source = module_path_of(g.source) if g.source else None
            advice = guard_kind(g.kind).advise(source, g.dim)
            steps.append(f"{rc.id} {rc.function} recompiles on {g.kind} of {source or '?'}: {advice}")
            if len(seen) >= 3:
                break
        if len(seen) >= 3:
            break
    steps.extend(_bisect_steps(report))
    steps.extend(_candidate_bug_steps(report))
    b = report.bisect
    if not report.summary.analysis_run:
        if b is not None and not b.smallest_failing and not b.untried:
            steps.append(
                "Every exercised module compiles with fullgraph=True on its first-call inputs; "
                "run the full analysis (`ctc-doctor TARGET`) for recompiles."
            )
    elif report.summary.verdict == "clean" and report.summary.expected_break_sites:
        wrappers = sorted({s.wrapper for s in report.graph_breaks if s.wrapper})
        ops = max([g.op_count for g in report.graphs] + [m.op_count or 0 for m in report.compile_metrics], default=0)
        largest = f"; the largest, {ops} ops, is your model's" if ops else ""
        alternative = "" if report.comparison else " An alternative to measure: compile the inner module before wrapping it"
        if alternative and "DistributedDataParallel" in wrappers:
            alternative += ", `DDP(torch.compile(model))` (`ctc-doctor run --compare default,inner -- SCRIPT` measures it)"
        if not report.summary.graphs_compiled:  # the wrapper's frames broke before any op: nothing compiled
            how = "`DDP(torch.compile(model))`" if "DistributedDataParallel" in wrappers else "the inner module compiled before wrapping it"
            measure = "" if report.comparison else " (`ctc-doctor run --compare default,inner -- SCRIPT` measures it)"
            steps.append(
                f"Your model ran eagerly: compiling the {', '.join(wrappers)} wrapper compiled no graph (its "
                f"{report.summary.expected_break_sites} break site(s) come before any op, and the forward it calls is "
                f"skipped). Compile {how}{measure}."
            )
        else:
            steps.append(
                f"Nothing of yours to fix: the {report.summary.expected_break_sites} break site(s) are {', '.join(wrappers)}'s own "
                f"code, eager by design (they split each call into {report.summary.graph_count} graphs{largest})."
                + (alternative + "." if alternative else "")
            )
    elif report.summary.verdict == "clean":
        steps.append(_clean_line(report))
    return steps


def _clean_line(report: Report) -> str:
    """Nothing to fix, and the one-offs a clean verdict leaves out of it, when there are some."""
    n = report.summary.expected_recompiles
    if not n:
        return "Nothing to fix: this workload compiles to one graph per call without recompiles."
    reasons = list(dict.fromkeys(rc.expected.split(":")[0] for rc in report.recompiles if rc.expected))
    return (
        f"Nothing to fix: one graph per call; the {n} recompile{'s are' if n != 1 else ' is'} expected, paid once "
        f"({'; '.join(reasons[:3])}): see the causes."
    )


def _wrong_result_steps(report: Report) -> list[str]:
    """Compiled gives wrong results: the figures, the module that diverges with its repro, and how to keep
    it eager meanwhile. The first step: no speed-up is worth a wrong result."""
    wrong = report.summary.wrong_results
    if not wrong:
        return []
    a = report.accuracy
    step = f"Compiled gives wrong results ({wrong.split('; ')[0]})"
    found = accuracy_line(report)
    around = next((b.workaround for b in report.torch_bugs if b.kind == "wrong_result" and b.workaround_verified), None)
    if found is not None and around is not None:  # the backend's bug: the way around it checked on the whole model
        step += f": {found}. Until it is fixed: {around} (verified on the whole model)"
    elif found is not None and a is not None and a.module_path:
        keep = f"model.get_submodule({a.module_path!r}).forward = torch.compiler.disable(model.get_submodule({a.module_path!r}).forward)"
        step += f": {found}. Until it is fixed, keep it eager: `{keep}`"
    elif found is not None and a is not None and a.operation is not None:  # the root, narrowed down to an operation
        step += f": {found}"
    elif a is not None:
        step += f": {a.notes[0] if a.notes else 'no single module diverges alone'}"
    else:
        step += ": run the full analysis for the module that diverges"
    return [step + ". The speed-ups below are not recommended until then."]


def _torch_bug_steps(report: Report) -> list[str]:
    """A crash inside PyTorch that the user's own compile hits: the way around it, then the issue to file (its
    repro and text written). A bug that only a candidate fix walks into stays on that fix (`_candidate_bug_steps`)."""
    steps = []
    for bug in report.torch_bugs:
        if bug.suggestion is not None:
            continue
        if bug.workaround:
            around = f"{bug.workaround}" + ("" if bug.workaround_verified else " (not verified)")
        else:
            around = "no workaround found"
        whose = f"{bug.owner}'s backend bug" if bug.owner else "PyTorch bug"
        fails = f"computes `{bug.operation}` wrong" if bug.kind == "wrong_result" else "crashes"
        steps.append(f"{whose}: {bug.where} {fails} in {bug.stage} ({bug.error_type}); {around}")
        if bug.issue_path or bug.repro_path:
            repro = f"; repro: python {bug.repro_path}" + (" (fails the same way)" if bug.repro_verified else "") if bug.repro_path else ""
            upstream = f"with {bug.owner}'s authors" if bug.owner else "upstream"
            steps.append(f"File it {upstream}: {bug.issue_path or 'the issue text is in the report'}{repro}")
    return steps


def _candidate_bug_steps(report: Report) -> list[str]:
    """PyTorch bugs that only one of the doctor's own candidate fixes walks into: ready to file, last. The user
    does not need that fix (it is left out, and what else addresses its cause is above)."""
    steps = []
    for bug in report.torch_bugs:
        if bug.suggestion is None:
            continue
        whose = f"{bug.owner}'s backend bug" if bug.owner else "A PyTorch bug"
        where = bug.issue_path or "the issue text is in the report"
        repro = f"; repro: python {bug.repro_path}" + (" (fails the same way)" if bug.repro_verified else "") if bug.repro_path else ""
        steps.append(
            f"{whose} in candidate fix {bug.suggestion} only, not in your code (it is left out): {bug.stage} "
            f"({bug.error_type}); ready to file: {where}{repro}"
        )
    return steps


def _strategy_steps(report: Report) -> list[str]:
    """The benchmark's winning way of compiling, as code to paste, when it is more than `torch.compile(model)`:
    the fastest steady arm, and the arm for the job length (`--steps`) when another."""
    b = report.benchmark
    if b is None:
        return []
    arms = {a.name: a for a in b.arms}
    steps = []
    best = arms.get(b.best_arm or "")
    if best is not None and best.code:
        pace = f", {best.speedup_vs_eager:.2f}x eager" if best.speedup_vs_eager else ""
        steps.append(f"Compile as the {best.name} arm did (best measured{pace}): `{best.code}`")
    job = arms.get(b.job_best_arm or "")
    if job is not None and job is not best and b.job_steps is not None:
        how = f": `{job.code}`" if job.code else ""
        steps.append(f"For a {b.job_steps:,}-call job the least total time is {job.name} (its compile included){how}")
    return steps


def _bisect_steps(report: Report) -> list[str]:
    b = report.bisect
    if b is None or not b.smallest_failing:
        return []
    repro = f"; repro: python {b.repro_paths[0]}" if b.repro_paths else ""
    first = next((t for t in b.trials if t.module_path == b.smallest_failing[0]), None)
    why = f" ({failure_text(first)})" if first is not None else ""
    return [f"Bisection: start with {module_label(b.smallest_failing, 60)}{why}{repro}"]


def _one_off_only(s: Suggestion, one_offs: set[str]) -> bool:
    """The suggestion addresses recompiles of one-off causes only (a first-call set-up, a switch made once): it
    saves a compile once, so it comes after what removes breaks or recurring recompiles."""
    return bool(s.applies_to) and set(s.applies_to) <= one_offs


def _suggestion_steps(report: Report, limit: int = 5) -> list[tuple[str, bool]]:
    """One step per addressed site, with whether it carries a measurement: the best measured change first (by
    verdict, then the measured gain on the objective, then fix before workaround before advice), what
    addresses only a one-off after the rest."""
    steps: list[tuple[str, bool]] = []
    covered: set[str] = set()
    objective = report.benchmark.objective if report.benchmark is not None else "balanced"
    if any(s.verdict is not None for s in report.suggestions):
        ranked = sorted(report.suggestions, key=lambda s: rank_key(s, objective))
    else:
        ranked = sorted(
            report.suggestions, key=lambda s: {"applied": 0, "works": 1, "measured": 1}.get(suggestion_status(s, report.fix), 2)
        )
    one_offs = {r for c in report.recompile_causes if c.recurrence == "one_off" for r in c.recompiles}
    ranked = [s for s in ranked if not _one_off_only(s, one_offs)] + [s for s in ranked if _one_off_only(s, one_offs)]
    expected = {rc.id for rc in report.recompiles if rc.expected}
    listed: set[str] = set()
    for s in ranked:
        if s.applies_to and set(s.applies_to) <= expected:
            continue  # a one-off the report calls expected: said in the causes, not a step
        status = suggestion_status(s, report.fix)
        if status in ("unsafe", "failed", "no effect", "redundant", "no gain") or s.verdict in ("worse", "failed", "no_effect"):
            continue
        if s.verdict != "trade_off" and s.applies_to and set(s.applies_to) <= covered:
            continue  # a trade-off is always listed: what it costs is worth knowing
        covered.update(s.applies_to)
        measured = ""
        if s.verdict is not None and s.verdict_reason:
            label = "trade-off" if s.verdict == "trade_off" else s.verdict.replace("_", " ")
            measured = f" — {label}: {s.verdict_reason}"
        elif s.verified and s.verified.summary:
            measured = f" — measured: {s.verified.summary}"
        if s.not_recommended:
            measured = f" — not recommended: {s.not_recommended}"
        kind = f", {s.category}" if s.category == "workaround" else ""
        if _one_off_only(s, one_offs):
            kind += ", saves a one-off compile"
        target = ",".join(s.applies_to[:3]) + (f" +{len(s.applies_to) - 3}" if len(s.applies_to) > 3 else "") if s.applies_to else "model"
        title = s.title
        if title.startswith("Or ") and not set(s.applies_to) & listed:  # what it is an alternative to is not listed
            title = title[3].upper() + title[4:]
        listed.update(s.applies_to)
        steps.append((f"{target}: {title} [{s.id}, {status}{kind}]{measured}", bool(measured) and not s.not_recommended))
        if len(steps) >= limit:
            break
    return steps
