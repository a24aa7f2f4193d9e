"""Several ranks of one job: per-rank summaries, where ranks compiled differently, the first
difference (the root cause: a recompile on one rank is how collectives start to hang), and the merge
of per-rank reports (`ctc-doctor run --nproc N`). Torch-free: offline logs and live runs share it.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

from .compile_id import CompileId, qualified
from .models import (
    CompileMetric,
    Graph,
    GraphBreakSite,
    GuardSet,
    RankDivergence,
    RankSummary,
    Recompile,
    Report,
    refresh_verdict,
)


def rank_of(compile_id: str | None) -> int | None:
    cid = CompileId.parse(compile_id)
    return cid.rank if cid is not None else None


def divergence(ranks: list[RankSummary], sites: list[GraphBreakSite], recompiles: list[Recompile]) -> list[RankDivergence]:
    """Ranks that compiled differently: a site some ranks hit and others did not, unequal recompile or compile counts."""
    if len(ranks) < 2:
        return []
    all_ranks = [r.rank for r in ranks]
    out: list[RankDivergence] = []
    for site in sites:
        hit = set(site.ranks)
        if hit and hit != set(all_ranks):
            missing = [r for r in all_ranks if r not in hit]
            out.append(
                RankDivergence(
                    kind="break_sites",
                    ranks=sorted(hit) if len(hit) <= len(missing) else missing,
                    message=(
                        f"{site.id} ({os.path.basename(site.user_frame.file)}:{site.user_frame.line}, {site.gb_type}) "
                        f"breaks on rank(s) {_ranks(sorted(hit))} but not on {_ranks(missing)}"
                    ),
                    items=[site.id],
                )
            )
    for kind, values, noun in (
        ("recompiles", {r.rank: r.recompile_count for r in ranks}, "recompile(s)"),
        ("compiles", {r.rank: r.compiles for r in ranks}, "frame compile(s)"),
    ):
        common, odd = _majority(values, all_ranks)
        if odd:
            items = [rc.id for rc in recompiles if rc.rank in odd] if kind == "recompiles" else []
            detail = ", ".join(f"rank {r}: {values[r]}" for r in odd)
            out.append(
                RankDivergence(
                    kind=kind,  # type: ignore[arg-type]
                    ranks=odd,
                    message=f"{detail} {noun}; the other ranks {common}",
                    items=items,
                )
            )
    return out


def root_cause(report: Report) -> RankDivergence | None:
    """The first compile where the ranks' sequences of compiles differ, which ranks, and what differed.

    Each rank's compiles are taken in the order they happened (`compile_metrics`, ids `rankN:F/A`); two
    compiles agree when they compile the same function at the same place as a first compile or as a
    recompile. At the first position where the ranks do not all agree, the ranks off the majority
    are named with what they did there: the guard that failed (kind, source, dim, expected and
    actual) for a recompile, the function for a compile, or that they compiled nothing more.
    """
    sequences: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    ids: dict[int, list[str]] = defaultdict(list)
    for metric in report.compile_metrics:
        cid = CompileId.parse(metric.compile_id)
        if cid is None or cid.rank is None:
            continue
        sequences[cid.rank].append((metric.function, metric.file, metric.line, bool(cid.attempt)))
        ids[cid.rank].append(metric.compile_id)
    if len(sequences) < 2:
        return None
    order = sorted(sequences)
    recompile_of = {rc.compile_id: rc for rc in report.recompiles}
    for i in range(max(len(s) for s in sequences.values())):
        at = {r: (sequences[r][i] if i < len(sequences[r]) else None) for r in order}
        if len(set(at.values())) == 1:
            continue
        common = Counter(at.values()).most_common(1)[0][0]
        if list(at.values()).count(common) * 2 <= len(order):
            common = at[order[0]]  # no majority: rank 0 stands for the rest
        odd = [r for r in order if at[r] != common]
        parts = [_what(at[r], ids[r][i] if at[r] is not None else None, recompile_of, r) for r in odd]
        others = [r for r in order if r not in odd]
        normal = _what(common, None, {}, None) if common is not None else "compiled nothing more"
        items = [recompile_of[ids[r][i]].id for r in odd if at[r] is not None and ids[r][i] in recompile_of]
        return RankDivergence(
            kind="root_cause",
            ranks=odd,
            message=f"first difference, at compile {i + 1}: " + "; ".join(parts) + f"; rank(s) {_ranks(others)} {normal}",
            items=items,
        )
    return None


def _what(
    entry: tuple[Any, ...] | None,
    compile_id: str | None,
    recompile_of: dict[str, Recompile],
    rank: int | None,
) -> str:
    who = f"rank {rank} " if rank is not None else ""
    if entry is None:
        return f"{who}compiled nothing more"
    function, file, line, recompiled = entry
    where = f"`{function}` ({os.path.basename(file or '?')}:{line})"
    rc = recompile_of.get(compile_id or "")
    if recompiled and rc is not None and rc.failed_guards:
        g = rc.failed_guards[0]
        dim = f" (dim {g.dim})" if g.dim is not None else ""
        values = f": expected {g.expected}, actual {g.actual}" if g.expected is not None or g.actual is not None else ""
        return f"{who}recompiled {where} on {g.kind} of {g.source or '?'}{dim}{values} [{rc.id}]"
    return f"{who}{'recompiled' if recompiled else 'compiled'} {where}"


def _majority(values: dict[int, int], order: list[int]) -> tuple[int, list[int]]:
    """The most common value (rank 0's on a tie) and the ranks that differ from it."""
    counts = Counter(values.values())
    best = max(counts.values())
    common = next(values[r] for r in order if counts[values[r]] == best)
    return common, [r for r in order if values[r] != common]


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks) or "none"


# --- the report of several ranks ---------------------------------------------------------------


def _with_rank(report: Report, rank: int) -> Report:
    """A copy of one rank's report with every compile id qualified by the rank (`rank1:0/0`)."""
    r = report.model_copy(deep=True)
    for site in r.graph_breaks:
        site.compile_ids = [qualified(c, rank) or c for c in site.compile_ids]
        site.ranks = [rank]
    for rc in r.recompiles:
        rc.compile_id = qualified(rc.compile_id, rank) or rc.compile_id
        rc.rank = rank
    items: list[Graph | CompileMetric | GuardSet] = [*r.graphs, *r.compile_metrics, *r.guards]
    for item in items:
        item.compile_id = qualified(item.compile_id, rank) or item.compile_id
    for hint in r.perf_hints:
        hint.compile_id = qualified(hint.compile_id, rank)
    return r


def merge_ranks(reports: dict[int, Report]) -> Report:
    """One report of a job that ran as several ranks, from each rank's report.

    The lowest rank's report is the base: its sites, recompiles, suggestions, bisection and fixes
    stand (its ids too). Sites other ranks hit are merged into the base's when they are the same site
    (`GraphBreakSite.key`: gb_type and place), with their ranks and occurrences, or appended; every
    rank's recompiles, graphs, compile metrics and guards are listed, their compile ids qualified by rank.
    `ranks[]` says what each rank compiled, `divergence[]` where they differ, the root cause first.
    """
    order = sorted(reports)
    merged = _with_rank(reports[order[0]], order[0])
    by_key = {s.key(): s for s in merged.graph_breaks}
    rank_sites: dict[int, list[str]] = {order[0]: [s.id for s in merged.graph_breaks]}
    rank_recompiles: dict[int, list[str]] = {order[0]: [rc.id for rc in merged.recompiles]}
    for rank in order[1:]:
        other = _with_rank(reports[rank], rank)
        rank_sites[rank] = []
        for site in other.graph_breaks:
            mine = by_key.get(site.key())
            if mine is None:
                site.id = f"B{len(merged.graph_breaks) + 1}"
                merged.graph_breaks.append(site)
                by_key[site.key()] = mine = site
            else:
                mine.ranks = sorted({*mine.ranks, rank})
                mine.occurrences += site.occurrences
                mine.compile_ids += site.compile_ids
                mine.module_paths = sorted({*mine.module_paths, *site.module_paths})
                if mine.first_call_only is not None and site.first_call_only is not None:
                    mine.first_call_only = mine.first_call_only and site.first_call_only
            rank_sites[rank].append(mine.id)
        rank_recompiles[rank] = []
        for rc in other.recompiles:
            rc.id = f"R{len(merged.recompiles) + 1}"
            merged.recompiles.append(rc)
            rank_recompiles[rank].append(rc.id)
        merged.graphs += other.graphs
        merged.compile_metrics += other.compile_metrics
        merged.guards += other.guards
        merged.perf_hints += other.perf_hints
        merged.errors += [e.model_copy(update={"message": f"rank {rank}: {e.message}"}) for e in other.errors]
        merged.notes += [f"rank {rank}: {n}" for n in other.notes if n not in merged.notes]
        if merged.run.exit_code in (None, 0) and other.run.exit_code not in (None, 0):
            merged.run.exit_code, merged.run.script_error = other.run.exit_code, other.run.script_error
        merged.run.stopped = merged.run.stopped or other.run.stopped

    merged.ranks = [
        RankSummary(
            rank=rank,
            compiles=sum(1 for m in merged.compile_metrics if rank_of(m.compile_id) == rank),
            graphs=sum(1 for g in merged.graphs if rank_of(g.compile_id) == rank),
            graph_break_count=sum(s.occurrences for s in reports[rank].graph_breaks),
            break_sites=list(dict.fromkeys(rank_sites[rank])),
            recompile_count=len(rank_recompiles[rank]),
            recompiles=rank_recompiles[rank],
            compile_time_s=round(sum(m.duration_s or 0.0 for m in reports[rank].compile_metrics), 4),
        )
        for rank in order
    ]
    cause = root_cause(merged)
    merged.divergence = ([cause] if cause else []) + divergence(merged.ranks, merged.graph_breaks, merged.recompiles)
    s = merged.summary
    s.graph_count = max(r.summary.graph_count for r in reports.values())
    s.graphs_compiled = len(merged.graphs)
    s.graph_break_count = sum(site.occurrences for site in merged.graph_breaks)
    s.unique_break_sites = len(merged.graph_breaks)
    s.recompile_count = len(merged.recompiles)
    s.frames_skipped = sum(r.summary.frames_skipped for r in reports.values())
    s.compile_time_s = round(sum(r.summary.compile_time_s for r in reports.values()), 4)
    s.verdict = "clean"  # recounted from the merged errors and recompiles
    refresh_verdict(merged)
    merged.run.ranks = len(order)
    merged.notes.append(
        f"{len(order)} ranks: the break sites, recompiles and compiles of all of them; module paths, suggestions, "
        f"bisection and fixes are rank {order[0]}'s."
    )
    if merged.divergence:
        merged.notes.append(f"{len(merged.divergence)} divergence(s) between ranks: ranks that compile differently can hang collectives.")
    return merged
