"""What every suggestion rule shares: the rule context (report, facts, output) and the ways a
rule states a suggestion (a source edit with its diff, a config option, a module run eagerly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....reports import models as rm
from ....reports.links import DOCS, gb_pages
from ...fixes.facts import ModelFacts
from ...fixes.rewrite import RewriteError, file_sha256, plan_rewrite


@dataclass
class Failures:
    """The failed guards of some kinds: (recompile, guard) pairs in the order the recompiles happened."""

    kinds: tuple[str, ...]
    items: list[tuple[rm.Recompile, rm.FailedGuard]]

    def ids(self) -> list[str]:
        """The recompiles involved, each once, in order (a long job's logs hold thousands)."""
        return list(dict.fromkeys(rc.id for rc, _ in self.items))


@dataclass
class RuleContext:
    """What a rule reads (the report, the model's facts) and where it writes (`out`)."""

    report: rm.Report
    facts: ModelFacts | None
    out: list[rm.Suggestion] = field(default_factory=list)

    def add(self, rule: str, title: str, rationale: str, kind: rm.SuggestionKind, applies_to: list[str], **kw: Any) -> None:
        kw.setdefault("category", category_of(rule, kind))
        self.out.append(rm.Suggestion(id="", rule=rule, title=title, rationale=rationale, kind=kind, applies_to=applies_to, **kw))


WORKAROUNDS = {
    "disable-module",  # the module runs eagerly: the break stays, at a module boundary
    "capture-scalar-outputs",  # the `.item()` becomes a graph input; the `if` that reads it still breaks
    "capture-dynamic-output-shape-ops",
    "recompile-limit",  # more cache entries, same recompiles
}
"""Rules that run around a cause rather than remove it."""
ADVICE = {"registry-hints", "regional-compile", "mode-reduce-overhead", "compile-cache", "specialized-size", "rnn-eager"}
"""Rules that say what to keep in mind or measure, with no change that removes a site or recompile."""


def category_of(rule: str, kind: rm.SuggestionKind) -> rm.SuggestionCategory:
    """fix / workaround / advice of a rule (see `Suggestion.category`)."""
    if rule in WORKAROUNDS:
        return "workaround"
    if rule in ADVICE:
        return "advice"
    return "fix"


def refs(site: rm.GraphBreakSite, *docs: str) -> list[str]:
    return gb_pages(site.registry_ids) + [DOCS[d] for d in docs]


def where(site: rm.GraphBreakSite) -> str:
    frame = site.own_frame or site.user_frame
    paths = [p or "(root)" for p in site.module_paths]
    at = f"{frame.file.rsplit('/', 1)[-1]}:{frame.line}"
    if not paths:
        return at
    shown = ", ".join(paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
    return f"`{shown}` at {at}"


def own_line(site: rm.GraphBreakSite) -> rm.Frame | None:
    """The user's own frame of the site, when it is a line the user can edit."""
    if site.own_code:
        return site.user_frame
    return site.own_frame


def source_edit(
    ctx: RuleContext, site: rm.GraphBreakSite, rule: str, title: str, rationale: str, edit: str, references: list[str], applies: list[str]
) -> bool:
    """Add a source_edit suggestion with its diff; False when the code has another shape."""
    frame = own_line(site)
    if frame is None:
        return False
    try:
        plan = plan_rewrite(frame.file, [(edit, frame.line)])
    except RewriteError:
        return False
    auto = plan.class_name is not None
    action = (
        rm.FixAction(type="source_patch", file=plan.file, function=plan.function, class_name=plan.class_name, edits=plan.edits)
        if auto
        else None
    )
    ctx.add(
        rule, title, rationale, "source_edit", applies, auto_applicable=auto, diff=plan.diff(),
        file=plan.file, file_sha256=file_sha256(plan.file), references=references, action=action,
    )  # fmt: skip
    return True


def config(
    ctx: RuleContext, rule: str, title: str, rationale: str, applies: list[str], option: tuple[str, Any], snippet: str, refs: list[str]
) -> None:
    """An auto-applicable `torch._dynamo.config` suggestion: `option` is (name, value) for the compiled run."""
    name, value = option
    ctx.add(
        rule,
        title,
        rationale,
        "config",
        applies,
        auto_applicable=True,
        snippet=snippet,
        references=refs,
        action=rm.FixAction(type="dynamo_config", config={name: value}),
    )


MOST_OF_THE_MODEL = 0.5
"""Modules holding more than this share of the model, together, are never left eager as a workaround: that is
turning compilation off (a YOLO model's `model` Sequential holds every layer; a causal LM's `model` all but
its head; an augmentation stage and the network after it, called in one loop)."""


def suggest_disable(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str], why: str) -> None:
    """`torch.compiler.disable` on the smallest modules that hold the break, as a workaround: never the
    root, never a module that is most of the model."""
    shares = ctx.facts.shares if ctx.facts is not None else {}
    targets = [p for p in site.module_paths if p and shares.get(p, 0.0) <= MOST_OF_THE_MODEL]
    if not targets or sum(shares.get(p, 0.0) for p in targets) > MOST_OF_THE_MODEL:
        return
    bisect = ctx.report.bisect
    confirmed = bisect is not None and any(p in bisect.smallest_failing for p in targets)
    shown = ", ".join(targets[:3]) + (" ..." if len(targets) > 3 else "")
    rationale = (
        f"{why} Running `{shown}` eagerly keeps the break at the module boundary, so the code around it "
        "compiles into whole graphs; the module itself is not compiled."
        + (" Bisection confirms it is the smallest failing module." if confirmed else "")
    )
    first = targets[0]
    snippet = (
        f"mod = model.get_submodule({first!r})\nmod.forward = torch.compiler.disable(mod.forward)"
        if len(targets) == 1
        else f"for name in {targets!r}:\n    mod = model.get_submodule(name)\n    mod.forward = torch.compiler.disable(mod.forward)"
    )
    ctx.add(
        "disable-module",
        f"Run `{shown}` eagerly with torch.compiler.disable",
        rationale,
        "wrap",
        applies,
        auto_applicable=True,
        snippet=snippet,
        references=refs(site, "disable"),
        action=rm.FixAction(type="disable", module_paths=targets),
    )
