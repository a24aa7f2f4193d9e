"""The suggest phase: rules keyed by gb_type / registry id / message pattern / guard kind.

`suggest(report, facts)` reads a finished report (and, in a live run, a few facts about the model
that the report does not carry) and returns ranked `Suggestion`s. Each rule names the sites or
recompiles it addresses, says why in terms of this model, and, where the change is mechanical, gives
a diff against the user's file and a `FixAction` that `fix` can apply to a copy of the model.
Suggestions are not verified here: `fix` measures each auto-applicable one.

- `breaks`: rules per graph-break site; `recompiles`: rules per failed guard kind; `model`: model-wide
  advice; `base`: what the rules share.

No torch import: rules work on report data and source files, so offline reports can use them too.
"""

from __future__ import annotations

from typing import Any

from ....reports import models as rm
from ...fixes.facts import ModelFacts
from ..context import PhaseContext
from .base import RuleContext
from .boundary import boundary_suggestions
from .breaks import break_suggestions
from .model import compile_cache_suggestion, model_suggestions
from .recompiles import recompile_suggestions

__all__ = ["compile_cache_suggestion", "renumber", "run_suggest", "suggest"]


def run_suggest(ctx: PhaseContext) -> list[rm.Suggestion]:
    """The phase: suggestions for the report so far."""
    assert ctx.report is not None
    return suggest(ctx.report, ctx.facts)


def _key(s: rm.Suggestion) -> tuple[Any, ...]:
    action = s.action.model_dump_json() if s.action else None
    return (s.rule, action, s.snippet if action is None else None, s.diff)


def _order(s: rm.Suggestion, site_rank: dict[str, int]) -> tuple[int, int]:
    ranks = [site_rank[a] for a in s.applies_to if a in site_rank]
    return (min(ranks) if ranks else len(site_rank) + 1, 0)


def suggest(report: rm.Report, facts: ModelFacts | None = None) -> list[rm.Suggestion]:
    """Suggestions for a report, deduplicated and ranked like the sites and recompiles they address."""
    ctx = RuleContext(report, facts)
    break_suggestions(ctx)
    recompile_suggestions(ctx)
    model_suggestions(ctx)
    boundary_suggestions(ctx)
    merged: dict[tuple[Any, ...], rm.Suggestion] = {}
    for s in ctx.out:
        key = _key(s)
        if key in merged:
            merged[key].applies_to.extend(a for a in s.applies_to if a not in merged[key].applies_to)
        else:
            merged[key] = s
    site_rank = {s.id: i for i, s in enumerate(report.graph_breaks)}
    site_rank.update({r.id: len(report.graph_breaks) + i for i, r in enumerate(report.recompiles)})
    ordered = sorted(merged.values(), key=lambda s: _order(s, site_rank))  # stable: rule order within a site
    renumber(ordered)
    return ordered


def renumber(suggestions: list[rm.Suggestion]) -> None:
    """Ids `S1`, `S2`... in list order."""
    for i, s in enumerate(suggestions, 1):
        s.id = f"S{i}"
