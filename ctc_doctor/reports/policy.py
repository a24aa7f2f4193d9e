"""CI thresholds over a report: graph-break and recompile budgets with allowlists (no torch import).

A break site is allowed when its GB id or gb_type is in `allow`, when every module path it runs in is
inside an `allow_modules` prefix, or (with `own_code_only`) when its innermost frame is in a library.
`max_graph_breaks` counts the remaining break *sites*; `max_recompiles` counts recompiles, less the
one-offs a decoding loop pays by design (`Recompile.expected`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .labels import module_label, short_path
from .models import GraphBreakSite, Report


@dataclass(frozen=True)
class Policy:
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None
    allow: Sequence[str] = field(default_factory=tuple)
    """GB ids (`GB0059`) or gb_types (`Failed to trace builtin operator`) that do not count."""
    allow_modules: Sequence[str] = field(default_factory=tuple)
    """Module path prefixes whose breaks do not count (`encoder.embed` covers `encoder.embed.*`)."""
    own_code_only: bool = False
    """Ignore breaks whose innermost frame is in a library (torch, transformers, the stdlib...)."""


def _in_allowed_modules(site: GraphBreakSite, prefixes: Sequence[str]) -> bool:
    if not prefixes or not site.module_paths:
        return False
    return all(any(p == pre or p.startswith(pre + ".") or pre == "" for pre in prefixes) for p in site.module_paths)


def allowed_reason(site: GraphBreakSite, policy: Policy) -> str | None:
    allow = {a.strip().lower() for a in policy.allow}
    if any(gb.lower() in allow for gb in site.registry_ids) or site.gb_type.lower() in allow:
        return "allowed by --allow"
    if _in_allowed_modules(site, policy.allow_modules):
        return "allowed by --allow-module"
    if policy.own_code_only and not site.own_code:
        return f"in {site.library} (--own-code-only)"
    return None


def _in_the_model(report: Report, recompiles: list[Any]) -> tuple[int, str]:
    """How many of `recompiles` the model makes, and how that was counted: a twin's report (a run without
    the weights answered by a 2-layer twin) has each recompile inside a numbered layer once a twin's layer,
    so those scale by `target.twin_scale` (an upper bound: torch stops recompiling a function at its limit)."""
    scale = report.target.twin_scale
    if not scale or scale <= 1:
        return len(recompiles), ""
    layered = [rc for rc in recompiles if any(part.isdigit() for path in rc.module_paths for part in path.split("."))]
    counted = len(recompiles) - len(layered) + math.ceil(len(layered) * scale)
    if not layered:
        return counted, ""
    return counted, f" in your model by the twin's count ({len(recompiles)} on the twin, {len(layered)} inside a layer x {scale:g})"


def violations(report: Report, policy: Policy) -> list[str]:
    """One readable line per violation; empty when the report passes."""
    out: list[str] = []
    fatal = [e for e in report.errors if e.phase in ("eager", "compile", "timeout")]
    for err in fatal:
        out.append(f"the analysis failed ({err.phase}): {err.message}")
    counted = [s for s in report.graph_breaks if allowed_reason(s, policy) is None]
    if policy.max_graph_breaks is not None and len(counted) > policy.max_graph_breaks:
        out.append(f"{len(counted)} graph-break site(s), more than the {policy.max_graph_breaks} allowed:")
        for site in counted:
            frame = site.own_frame or site.user_frame
            ids = ", ".join(site.registry_ids[:2]) or "no GB id"
            out.append(
                f"  {site.id} {short_path(frame.file)}:{frame.line} ({module_label(site.module_paths, 60)}) "
                f"{ids}: {site.gb_type} ×{site.occurrences}"
            )
    recompiles = [rc for rc in report.recompiles if not rc.expected]
    in_model, scaled = _in_the_model(report, recompiles)
    if policy.max_recompiles is not None and in_model > policy.max_recompiles:
        expected = len(report.recompiles) - len(recompiles)
        also = f" (and {expected} expected)" if expected else ""
        out.append(f"{in_model} recompile(s){also}{scaled}, more than the {policy.max_recompiles} allowed:")
        for rc in recompiles:
            guard = rc.failed_guards[0] if rc.failed_guards else None
            what = f"{guard.kind}: {guard.reason}" if guard else "no failed guard recorded"
            out.append(f"  {rc.id} {rc.function} ({module_label(rc.module_paths, 60)}) {what}")
    return out
