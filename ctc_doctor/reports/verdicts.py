"""Measured verdicts: what each suggestion is worth on the numbers this run measured, and which
benchmark arm is best for the user's objective.

A doctor never recommends what its own measurement shows is worse. Counts (graphs, break sites,
recompiles) come from the fix check of each suggestion alone; times and memory from the benchmark,
where the fixed arm carries every applied suggestion together (its numbers are then shared, and the
source says so). A difference smaller than the noise is no difference:
  - latency: the larger of the two arms' interquartile ranges, and at least 3 % of the median;
  - compile times: 10 % and at least 0.05 s (one cold compile each: no spread to go by);
  - peak memory: 5 % and at least 1 MB.
Torch-free: works on report data only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from . import models as rm
from .labels import numerics_text

_UNITS = {
    "latency_ms": " ms", "cold_compile_s": " s", "warm_compile_s": " s", "trace_compile_s": " s", "peak_memory_mb": " MB",
    "first_call_s": " s",
}  # fmt: skip
_LABELS = {
    "graphs": "graphs",
    "break_sites": "break sites",
    "recompiles": "recompiles",
    "trace_compile_s": "trace time",
    "cold_compile_s": "cold compile",
    "warm_compile_s": "warm compile",
    "latency_ms": "latency",
    "peak_memory_mb": "peak memory",
    "first_call_s": "first call",
}
_ORDER = {"recommended": 0, "trade_off": 1, "unmeasured": 2, "no_effect": 3, "worse": 4, "failed": 5}
_CATEGORY_ORDER = {"fix": 0, "workaround": 1, "advice": 2, None: 1}


def _better(metric: str, before: float, after: float, spread: float = 0.0) -> bool | None:
    """True better (lower), False worse, None within noise."""
    if metric in ("graphs", "break_sites", "recompiles"):
        return None if after == before else after < before
    if metric == "latency_ms":
        noise = max(spread, 0.03 * before)
    elif metric == "peak_memory_mb":
        noise = max(0.05 * before, 1.0)
    else:
        noise = max(0.10 * before, 0.05)
    if abs(after - before) <= noise:
        return None
    return after < before


def percent_change(before: float, after: float) -> str:
    """`-30 %`, `-99.6 %` (never `-100 %` for what is not all of it), `+4.2x` beyond doubling."""
    if after > 2 * before > 0:
        return f"{after / before:.3g}x"
    change = 100.0 * (after - before) / before
    for digits in (0, 1, 2):
        text = f"{change:+.{digits}f}"
        if abs(float(text)) != 100.0 or change in (-100.0, 100.0):
            return f"{text} %"
    return f"{change:+.2f} %"


def delta_text(d: rm.Delta) -> str:
    """`latency 5.79 -> 7.09 ms (+22 %)`."""
    unit = _UNITS.get(d.metric, "")
    if unit:
        change = f" ({percent_change(d.before, d.after)})" if d.before else ""
        text = f"{_LABELS[d.metric]} {d.before:.3g} -> {d.after:.3g}{unit}{change}"
    else:
        text = f"{_LABELS[d.metric]} {d.before:g} -> {d.after:g}"
    if d.unstable:
        return f"{text} (unstable: {d.unstable.split(': ', 1)[0]})"  # the arm it rests on
    return text + (" (within noise)" if d.better is None and unit else "")


def _arm_deltas(before: rm.BenchmarkArm, after: rm.BenchmarkArm, source: str, together: list[str] | None = None) -> list[rm.Delta]:
    out = []
    pairs = [
        ("cold_compile_s", before.compile_time_s, after.compile_time_s, 0.0),
        ("warm_compile_s", before.warm_compile_time_s, after.warm_compile_time_s, 0.0),
        ("peak_memory_mb", before.peak_memory_mb, after.peak_memory_mb, 0.0),
    ]
    shaky = None
    if before.latency_ms and after.latency_ms:
        spread = max(before.latency_ms.iqr, after.latency_ms.iqr)
        pairs.insert(0, ("latency_ms", before.latency_ms.median, after.latency_ms.median, spread))
        shaky = "; ".join(f"{a.name}: {a.latency_ms.unstable}" for a in (before, after) if a.latency_ms and a.latency_ms.unstable) or None
    # other processes on the cores: every timing of either arm is off (torch's threads wait on a descheduled
    # peer: 270x slower on a 2-core box), so none of them judges the change either way
    loaded = "; ".join(f"{a.name}: {BUSY_TEXT}" for a in (before, after) if _busy(a)) or None
    for metric, b, a, spread in pairs:
        if b is None or a is None:
            continue
        better = _better(metric, b, a, spread)
        unstable = loaded if metric in BUSY_METRICS and loaded else (shaky if metric == "latency_ms" else None)
        if unstable and (better or (loaded and metric in BUSY_METRICS)):
            better = None  # a gain read off a figure that cannot be trusted is no gain; a loss still warns, unless the machine was busy
        out.append(
            rm.Delta(
                metric=metric,  # type: ignore[arg-type]
                before=round(b, 4),
                after=round(a, 4),
                better=better,
                source=source,
                together=together or [],
                unstable=unstable,
            )
        )  # type: ignore[arg-type]
    return out


BUSY_TEXT = "not measured: busy machine"
"""What a timing delta of an arm timed while other processes held the cores says (`Delta.unstable`)."""
BUSY_METRICS = ("latency_ms", "cold_compile_s", "warm_compile_s")
"""The deltas a busy machine makes meaningless (memory and counts stand)."""


def _busy(arm: rm.BenchmarkArm) -> bool:
    """The arm was timed while other processes used the cores torch computes on (`mark_unstable`'s reason)."""
    return bool(arm.latency_ms and arm.latency_ms.unstable and "other processes used" in arm.latency_ms.unstable)


def _usable(arm: rm.BenchmarkArm | None) -> bool:
    return arm is not None and arm.error is None and arm.numerics_ok is not False and arm.latency_ms is not None


def suggestion_deltas(report: rm.Report, s: rm.Suggestion) -> list[rm.Delta]:
    """The measured deltas of one suggestion: its fix check, then the benchmark arms that carry it."""
    out: list[rm.Delta] = []
    v = s.verified
    if v is not None and v.before is not None and v.after is not None and not v.error:
        b, a = v.before, v.after
        for metric, x, y in (
            ("graphs", b.graphs_compiled, a.graphs_compiled),
            ("break_sites", b.unique_break_sites, a.unique_break_sites),
            ("recompiles", b.recompile_count, a.recompile_count),
            ("trace_compile_s", b.compile_time_s, a.compile_time_s),
        ):
            out.append(rm.Delta(metric=metric, before=x, after=y, better=_better(metric, x, y), source="fix check"))  # type: ignore[arg-type]
    bench = report.benchmark
    if bench is None:
        return out
    arms = {a.name: a for a in bench.arms}
    applied = report.fix.applied if report.fix else []
    if s.rule == "compile-submodules":
        whole, alone = arms.get("compiled"), arms.get("submodules")
        if _usable(whole) and _usable(alone):
            assert whole is not None and alone is not None
            out += _arm_deltas(whole, alone, "benchmark compiled -> submodules")
    elif s.rule == "regional-compile":
        whole = arms.get("compiled_fixed") if "regional_fixed" in arms else arms.get("compiled")
        regional = arms.get("regional_fixed") or arms.get("regional")
        if _usable(whole) and _usable(regional):
            assert whole is not None and regional is not None
            out += _arm_deltas(whole, regional, f"benchmark {whole.name} -> {regional.name}")
    elif s.id in applied and _usable(arms.get(f"fixed[{s.id}]")) and _usable(arms.get("compiled")):
        out += _arm_deltas(arms["compiled"], arms[f"fixed[{s.id}]"], f"benchmark compiled -> fixed[{s.id}] ({s.id} alone)")
    elif s.id in applied and _usable(arms.get(f"fixed[-{s.id}]")) and _usable(arms.get("compiled_fixed")):
        without = f"fixed[-{s.id}]"
        source = f"benchmark {without} -> compiled_fixed ({s.id}'s share: the others, then all)"
        out += _arm_deltas(arms[without], arms["compiled_fixed"], source)
    elif s.id in applied and _usable(arms.get("compiled")) and _usable(arms.get("compiled_fixed")):
        together = list(applied) if len(applied) > 1 else []
        shown = f" ({'+'.join(together)} together)" if together else ""
        out += _arm_deltas(arms["compiled"], arms["compiled_fixed"], f"benchmark compiled -> compiled_fixed{shown}", together)
    return out


def _verdict(s: rm.Suggestion, deltas: list[rm.Delta]) -> tuple[rm.MeasuredVerdict, str | None]:
    v = s.verified
    if v is not None and (not v.applied or v.error or not v.safe):
        why = v.error or ("changes results" if v.numerics_ok is False else "did not apply")
        return "failed", why
    if not deltas:
        return "unmeasured", None
    # a count that went down is the point of a fix; timing deltas decide whether it pays
    # the fix check's trace time is one eager-backend measurement, a script's first call one run each: never decisive
    decisive = [d for d in deltas if d.metric not in ("trace_compile_s", "first_call_s")]
    gains = [d for d in decisive if d.better is True]
    losses = [d for d in decisive if d.better is False]
    moved = v is not None and v.moved_break
    if moved:
        gains = [d for d in gains if d.metric != "break_sites"]
    shown = [d for d in decisive if d.better is not None] or decisive[:1]
    reason = ", ".join(delta_text(d) for d in shown[:4])
    together = next((d.together for d in shown if d.together), None)
    if together:  # the combination's numbers, said so where they are read
        reason += f" ({'+'.join(together)} together, not measured alone)"
    if moved and v is not None:
        reason = f"moved the break to {'; '.join(v.new_sites[:2])}" + (f" ({reason})" if reason else "")
    if any(d.unstable and BUSY_TEXT in d.unstable for d in decisive):  # the verdict rests on the counts
        reason = f"{reason}; timings {BUSY_TEXT}" if reason else f"timings {BUSY_TEXT}"
    first = next((d for d in deltas if d.metric == "first_call_s"), None)
    if first is not None:  # told, not judged: one run of the script each
        reason = f"{reason}; {_LABELS[first.metric]} {first.before:.3g} -> {first.after:.3g} s (one run each)"
    if gains and losses:
        return "trade_off", reason
    if losses:
        return "worse", reason
    if gains:
        return "recommended", reason
    return "no_effect", reason


def _rel(deltas: Iterable[rm.Delta], metric: str) -> float:
    """Relative improvement on a metric (positive better); 0 when not measured or within noise."""
    for d in deltas:
        if d.metric == metric and d.better is not None and d.before:
            return (d.before - d.after) / d.before
    return 0.0


def score(s: rm.Suggestion, objective: rm.Objective) -> float:
    """Measured benefit on the objective (higher first): the timing gains, then, a hundredth as heavy, how much
    of the graphs, break sites and recompiles it removed (17 -> 5 graphs before 17 -> 16)."""
    moved = s.verified is not None and s.verified.moved_break  # a break it only moved is not one it removed
    counts = sum(_rel(s.deltas, metric) for metric in ("graphs", "break_sites", "recompiles") if not (moved and metric == "break_sites"))
    latency, compile_ = _rel(s.deltas, "latency_ms"), _rel(s.deltas, "cold_compile_s")
    if objective == "latency":
        return latency + 0.01 * counts
    if objective == "compile":
        return compile_ + 0.01 * counts
    return latency + compile_ + 0.01 * counts


def rank_key(s: rm.Suggestion, objective: rm.Objective) -> tuple[int, float, int]:
    """Sort key: verdict (recommended first; under `balanced` a trade-off that costs latency after the
    plainly good), then the measured benefit on the objective (graphs 23 -> 9 before 23 -> 22, whatever
    each is called), then fix before workaround before advice."""
    verdict = _ORDER.get(s.verdict or "unmeasured", 2)
    if s.verdict == "trade_off" and objective != "compile" and _rel(s.deltas, "latency_ms") < 0:
        verdict = _ORDER["no_effect"]  # it costs what the user asked for: after what does not
    return (verdict, -round(score(s, objective), 9), _CATEGORY_ORDER.get(s.category, 1))


def broken_in_benchmark(report: rm.Report, s: rm.Suggestion) -> str | None:
    """Why the benchmark's arm that carries an applied fix failed on the real backend while the compiled
    arm without it ran (the fix breaks that compile), or None: `compiled_fixed` failed where the set without this
    fix (`fixed[-S]`, four fixes or more) ran; its own arm `fixed[S]`; `compiled_fixed` when it carries this fix
    alone. Running out of memory is not the fix's failure."""
    bench, fix = report.benchmark, report.fix
    if bench is None or fix is None or s.id not in fix.applied:
        return None
    arms = {a.name: a for a in bench.arms}
    compiled = arms.get("compiled")
    if compiled is None or compiled.error is not None:
        return None
    backend = bench.settings.get("backend") or "the benchmark's backend"
    whole, without = arms.get("compiled_fixed"), arms.get(f"fixed[-{s.id}]")
    if whole is not None and whole.error is not None and not whole.out_of_memory and without is not None and without.error is None:
        # the leave-one-out arms (four fixes or more) attribute a failure of the whole set: without this fix it ran
        return (
            f"breaks the compile: the benchmark's compiled_fixed arm ({backend}) failed: {whole.error}; "
            f"without {s.id} ({without.name}) it ran"
        )[:400]
    arm = arms.get(f"fixed[{s.id}]") or (whole if fix.applied == [s.id] else None)
    if arm is None or arm.error is None or arm.out_of_memory:
        return None
    return f"breaks the compile: the benchmark's {arm.name} arm ({backend}) failed: {arm.error}"[:400]


def judge_one(report: rm.Report, s: rm.Suggestion) -> tuple[list[rm.Delta], rm.MeasuredVerdict, str | None] | None:
    """(deltas, verdict, reason) of a suggestion that a check or the benchmark measured; None otherwise.
    A fix whose benchmark arm fails on the real backend fails, whatever its check measured."""
    if s.verified is None and not (s.rule == "regional-compile" and report.benchmark is not None):
        return None
    deltas = suggestion_deltas(report, s)
    broken = broken_in_benchmark(report, s)
    if broken is not None:
        return deltas, "failed", broken
    verdict, reason = _verdict(s, deltas)
    if s.rule == "regional-compile" and report.benchmark is not None:
        arms = {a.name: a for a in report.benchmark.arms}
        regional = arms.get("regional_fixed") or arms.get("regional")
        why = regional_recompile_reason(regional) if regional is not None else None
        if why:
            reason = f"{reason}; {why}" if reason else why
    return deltas, verdict, reason


def regional_recompile_reason(arm: rm.BenchmarkArm) -> str | None:
    """When a regional arm recompiled because of a guard per block: which, and the way out."""
    per_block = [c for c in arm.recompile_causes if c.per_instance]
    if not per_block:
        return None
    cause = max(per_block, key=lambda c: len(c.recompiles))
    if cause.kind in ("value", "attribute") and all(v.isdigit() for v in cause.values):
        way_out = "torch._dynamo.config.allow_unspec_int_on_nn_module = True (Dynamo's own hint), or pass the index as a tensor"
    else:
        way_out = (
            "create that state before compiling (a pre-created cache, or use_cache=False), "
            "or wrap the block in torch.compiler.nested_compile_region"
        )
    return (
        f"regional recompiled {len(cause.recompiles)} time(s) on one guard per block ({cause.summary}): "
        f"the blocks share code but each guards its own state; {way_out}"
    )


def _blocked_by_numerics(bench: rm.Benchmark, best: rm.BenchmarkArm) -> str | None:
    """Faster arms left out because their numerics fail: what they measured, never a silent choice."""
    assert best.latency_ms is not None
    faster = [
        a for a in bench.arms
        if a.numerics_ok is False and a.error is None and a.latency_ms is not None and a.latency_ms.median < best.latency_ms.median
    ]  # fmt: skip
    if not faster:
        return None
    arm = min(faster, key=lambda a: a.latency_ms.median if a.latency_ms else 0.0)
    speed = f" {arm.speedup_vs_eager:.2f}x eager," if arm.speedup_vs_eager else ""
    check = numerics_text(arm.numerics) if arm.numerics is not None else "outputs differ from eager's"
    compiled = [a for a in bench.arms if a.name != "eager" and a.latency_ms is not None and a.error is None]
    if best.name == "eager" and all(a.numerics_ok is False for a in compiled):
        return f"numerics is what blocks compile: every compiled arm changes the results ({arm.name}{speed} {check})"
    return f"{', '.join(a.name for a in faster)} faster but left out: {arm.name}{speed} {check}"


def unmeasured(bench: rm.Benchmark) -> str | None:
    """When no compiled arm could be measured (each ran out of memory, crashed or failed): why, with the
    peak each reached; such an arm is not a loss for compile, and eager is not "best" for it."""
    compiled = [a for a in bench.arms if a.name != "eager"]
    if not compiled or any(a.error is None and a.latency_ms is not None for a in compiled):
        return None
    parts = []
    for a in compiled[:4]:
        why = "out of memory" if a.out_of_memory else (f"crashed ({a.crash})" if a.crash else _failed_as(a))
        peak = f", peak {a.peak_memory_mb:,.0f} MB" if a.peak_memory_mb is not None else ""
        parts.append(f"{a.name}: {why}{peak}")
    more = f" and {len(compiled) - 4} more" if len(compiled) > 4 else ""
    return f"the compiled arms could not be measured ({'; '.join(parts)}{more}): no verdict on compile"


def _failed_as(arm: rm.BenchmarkArm) -> str:
    """The type of what failed the arm (`error_type`); a report before schema 1.18 has only the error's
    text, whose first part names it."""
    if arm.error_type is not None:
        return arm.error_type
    return (arm.error or "no result").split(":")[0]


def unstable_arms(bench: rm.Benchmark, names: list[str]) -> str | None:
    """`unstable: compiled (its spread is 45 % of the median)`: which of `names` rest on a figure that cannot be trusted."""
    arms = {a.name: a for a in bench.arms}
    shaky = [f"{n} ({arms[n].latency_ms.unstable})" for n in names if n in arms and arms[n].latency_ms and arms[n].latency_ms.unstable]  # type: ignore[union-attr]
    return f"unstable figures: {'; '.join(shaky)}" if shaky else None


def best_arm(bench: rm.Benchmark, objective: rm.Objective) -> tuple[str | None, str | None, list[str]]:
    """(best arm, why, arms within noise of it) for the objective; no best arm when no compiled arm could be
    measured; the reason says when the figures it rests on are unstable (`LatencyStats.unstable`)."""
    ok = [a for a in bench.arms if _usable(a)]
    cannot = unmeasured(bench)
    if cannot is not None:
        return None, cannot, []
    if not ok:
        return None, None, []
    eager = next((a for a in ok if a.name == "eager"), None)
    fastest = min(ok, key=lambda a: a.latency_ms.median if a.latency_ms else float("inf"))
    assert fastest.latency_ms is not None
    # an unstable arm is not "within noise" of a stable fastest one: its wide spread is no evidence that it
    # is as fast, and the tie-break (compile time) would otherwise crown the slowest
    tied = [
        a.name
        for a in ok
        if a is not fastest
        and a.latency_ms is not None
        and not (a.latency_ms.unstable and not fastest.latency_ms.unstable)
        and _better("latency_ms", a.latency_ms.median, fastest.latency_ms.median, max(a.latency_ms.iqr, fastest.latency_ms.iqr)) is None
    ]
    compiled = [a for a in ok if a.compile_time_s is not None]
    if objective == "compile" and compiled:
        best = min(compiled, key=lambda a: a.compile_time_s or 0.0)
        reason = f"{best.name} compiles fastest: cold {best.compile_time_s:.2f} s" + (
            f", latency {best.latency_ms.median:.3g} ms" if best.latency_ms else ""
        )
        return best.name, reason, []
    best = fastest
    if tied:
        # arms that cannot be told apart on latency: the one that compiles fastest wins
        group = [fastest] + [a for a in ok if a.name in tied]
        best = min(group, key=lambda a: a.compile_time_s if a.compile_time_s is not None else float("inf") if a.name != "eager" else -1.0)
    assert best.latency_ms is not None
    speed = f", {eager.latency_ms.median / best.latency_ms.median:.2f}x eager" if eager and eager.latency_ms and best is not eager else ""
    reason = f"{best.name}: {best.latency_ms.median:.3g} ± {best.latency_ms.iqr:.2g} ms{speed}"
    within = [n for n in [fastest.name, *tied] if n != best.name]
    if within:
        reason += f"; within noise of {', '.join(within)} (so it is chosen for" + (
            " no compile)" if best.name == "eager" else " its compile time)"
        )
    blocked = _blocked_by_numerics(bench, best)
    if blocked:
        reason += f"; {blocked}"
    shaky = unstable_arms(bench, list(dict.fromkeys([best.name, fastest.name, *(["eager"] if eager and best is not eager else [])])))
    if shaky:
        reason += f"; {shaky}: the choice may not hold"
    if bench.machine is not None and bench.machine.busy:
        reason += "; the machine was busy while timing"
    return best.name, reason, within


def cold_start(bench: rm.Benchmark) -> str | None:
    """With AOT arms: the cheapest way for a new process to get a compiled model — a JIT compile
    (cold, or with a warm cache) or loading an AOT package built once — with the numbers."""
    ways: list[tuple[float, str]] = []
    failed: list[str] = []
    for a in bench.arms:
        if a.name == "eager":
            continue
        if a.error is not None and a.latency_ms is None:
            if a.name.startswith("aot"):
                failed.append(f"{a.name} failed (see its error)")
            continue
        if a.numerics_ok is False:
            failed.append(f"{a.name} changes the outputs")
            continue
        latency = f", {a.latency_ms.median:.3g} ms" if a.latency_ms else ""
        if a.load_time_s is not None:
            ways.append((a.load_time_s, f"{a.name} loads in {a.load_time_s:.3f} s (built once in {a.compile_time_s or 0:.1f} s{latency})"))
        elif a.compile_time_s is not None:
            ways.append((a.compile_time_s, f"{a.name} compiles in {a.compile_time_s:.2f} s{latency}"))
            if a.warm_compile_time_s is not None:
                ways.append((a.warm_compile_time_s, f"{a.name} with a warm cache {a.warm_compile_time_s:.2f} s"))
            if a.warm_start_compile_s is not None:
                ways.append((a.warm_start_compile_s, f"{a.name} with its cache artifacts shipped {a.warm_start_compile_s:.2f} s"))
    if not ways:
        return "; ".join(failed) or None
    ways.sort(key=lambda w: w[0])
    text = f"cheapest: {ways[0][1]}"
    if len(ways) > 1:
        text += "; then " + "; ".join(w for _, w in ways[1:4])
    return text + (f"; {'; '.join(failed)}" if failed else "")


# --- `run --compare`: the script's pace under each way of compiling it ---------------------------------

MIN_PACE_CALLS = 12
"""Calls a strategy needs for a steady pace: the later half of its call-to-call periods times it, and a
steady figure rests on 5 of them at least (the benchmark's rule for short passes: `phases.bench.numbers.AUTO_MIN`)."""
UNSTABLE_PACE = 0.25
"""A pace whose periods' IQR is over this share of their median is unstable."""


def strategy_row(strategy: str, report: rm.Report) -> rm.StrategyRow:
    """One strategy's row from the report of the script run under it (its analyzed object's pace)."""
    s = report.summary
    obj = report.analyzed_compile
    row = rm.StrategyRow(
        strategy=strategy,
        exit_code=report.run.exit_code,
        calls=obj.calls if obj else 0,
        first_call_s=obj.first_call_s if obj else None,
        calls_s=obj.calls_s if obj else None,
        compile_time_s=s.compile_time_s,
        graphs_compiled=s.graphs_compiled,
        recompiles=s.recompile_count,
        expected_recompiles=s.expected_recompiles,
        verdict=s.verdict,
    )
    if report.run.exit_code not in (None, 0):
        row.error = f"the script failed: {report.run.script_error or f'exit code {report.run.exit_code}'}"
    elif obj is None:
        row.error = "nothing compiled ran"
    elif obj.calls < MIN_PACE_CALLS or obj.period_ms is None:
        row.error = f"{obj.calls} call(s): too few to measure a pace (fewer than {MIN_PACE_CALLS}; run more steps)"
    else:
        row.period_ms = obj.period_ms
        row.period_iqr_ms, row.period_n = obj.period_iqr_ms, obj.period_n
        row.steps_per_s = round(1e3 / obj.period_ms, 3) if obj.period_ms > 0 else None
        if obj.period_iqr_ms is not None and obj.period_ms > 0 and obj.period_iqr_ms / obj.period_ms > UNSTABLE_PACE:
            row.unstable = f"its steps' spread is {obj.period_iqr_ms / obj.period_ms:.0%} of the median over {obj.period_n} steps"
    return row


def break_even_calls(first_s: float, eager_first_s: float, calls: int, per_call_s: float, eager_per_call_s: float) -> int | None:
    """The call from which a compiled way's total time beats eager's: each ran its first `calls` calls in
    `first_s` / `eager_first_s` (the compile included), then runs at its steady per-call time. None when
    it is not faster."""
    saved_s = eager_per_call_s - per_call_s
    if saved_s <= 0:
        return None
    extra_s = first_s - eager_first_s  # the compile
    return max(calls, calls + math.ceil(max(extra_s, 0.0) / saved_s))


STEP_LOSS_TOLERANCE = 1e-2
"""`run --compare`: the relative change of the loss after K steps allowed against eager's (the same script,
seed and data; float rounding compounds over the steps)."""
DROPOUT_LOSS_TOLERANCE = 0.1
"""The same with a dropout in the model: compiled code draws other random numbers than eager, so the
losses agree in trend only."""


def dynamic_marks(report: rm.Report) -> dict[str, list[int]]:
    """The arguments and dims the run's mark_dynamic suggestion marks (`run --compare mark-dynamic`); {}: none."""
    for s in report.suggestions:
        a = s.action
        if a is not None and a.type == "mark_dynamic" and a.argument is not None:
            return {k: list(v) for k, v in a.marks.items()} if a.marks else {a.argument: list(a.dims)}
    return {}


def compare_losses(rows: list[rm.StrategyRow], runs: dict[str, rm.CompiledObject | None]) -> None:
    """Each row's losses against eager's at the calls kept in both runs: the largest relative change."""
    eager = runs.get("eager")
    if eager is None or not eager.losses:
        return
    for r in rows:
        run = runs.get(r.strategy)
        if r.strategy == "eager" or run is None:
            continue
        common = sorted(set(run.losses) & set(eager.losses))
        if not common:
            continue
        r.loss_call = common[-1]
        r.loss = run.losses[r.loss_call]
        r.loss_change = max(abs(run.losses[i] - eager.losses[i]) / max(abs(eager.losses[i]), 1e-12) for i in common)
        r.loss_tolerance = DROPOUT_LOSS_TOLERANCE if (run.dropout or eager.dropout) else STEP_LOSS_TOLERANCE
        r.loss_ok = bool(r.loss_change <= r.loss_tolerance)  # a NaN change is not ok


def compare_strategies(rows: list[rm.StrategyRow], runs: dict[str, rm.CompiledObject | None] | None = None) -> None:
    """Each timed row's speed-up over eager, the call from which its total time beats eager's, and (with
    the runs' analyzed objects) its loss against eager's."""
    compare_losses(rows, runs or {})
    eager = next((r for r in rows if r.strategy == "eager" and r.period_ms), None)
    if eager is None or eager.period_ms is None:
        return
    for r in rows:
        if r is eager or r.period_ms is None or r.first_call_s is None:
            continue
        r.speedup = round(eager.period_ms / r.period_ms, 3) if r.period_ms > 0 else None
        r.break_even_calls = break_even_calls(r.first_call_s, eager.first_call_s or 0.0, 1, r.period_ms / 1e3, eager.period_ms / 1e3)


def total_time(row: rm.StrategyRow, steps: int) -> float:
    """Seconds for `steps` calls: what its calls took when it made that many (recompiles included), else its
    first call plus the steady pace for the rest."""
    if row.calls == steps and row.calls_s is not None:
        return row.calls_s
    return (row.first_call_s or 0.0) + (steps - 1) * (row.period_ms or 0.0) / 1e3


def strategy_verdict(rows: list[rm.StrategyRow], steps: int | None = None) -> str:
    """`max-autotune: 1.40x eager's pace, pays off after 2,300 calls`; with `steps`, the strategy with the
    least total time for that many calls. Failed strategies are never best."""
    timed = [r for r in rows if r.period_ms is not None and r.error is None and r.verdict != "failed" and r.loss_ok is not False]
    drifted = [r.strategy for r in rows if r.loss_ok is False]
    if not timed:
        return "no strategy gave a steady pace: nothing to compare"
    fastest = min(timed, key=lambda r: r.period_ms or 0.0)
    text = f"fastest steady pace: {fastest.strategy} ({fastest.period_ms:.3g} ms per call"
    if fastest.speedup is not None:
        pays = f", pays off after {fastest.break_even_calls:,} calls" if fastest.break_even_calls else ""
        text += f", {fastest.speedup:.2f}x eager's{pays}"
    text += ")"
    eager = next((r for r in rows if r.strategy == "eager"), None)
    shaky = [f"{r.strategy} ({r.unstable})" for r in (fastest, eager) if r is not None and r.unstable]
    if shaky:
        text += f"; unstable: {'; '.join(dict.fromkeys(shaky))}: the choice may not hold"
    if steps is not None:
        total = min(timed, key=lambda r: total_time(r, steps))
        text += f"; for {steps:,} calls the least total time: {total.strategy}"
    if drifted:
        text += f"; left out, its loss drifted from eager's: {', '.join(drifted)}"
    return text


def site_costs(report: rm.Report) -> None:
    """Each break site's run-time cost: the graphs it adds, and the latency measured by the benchmark arm of
    the suggestion that removes it (after `judge_one` filled the suggestions' deltas)."""
    for site in report.graph_breaks:
        added = len({c.rsplit(":", 1)[-1] for c in site.compile_ids if c.endswith("/0")}) or (1 if site.occurrences else 0)
        cost = rm.BreakCost(graphs_added=added)
        site.cost = cost
        if site.expected:
            _wrapper_cost(report, site, cost)
            continue
        for s in report.suggestions:
            d = next((d for d in s.deltas if d.metric == "latency_ms"), None) if site.id in s.applies_to else None
            if d is None or not d.before:
                continue
            cost.measured_by = f"{s.id}: {d.source}"
            cost.latency_ms = round(d.before - d.after, 4) if d.better is not None else 0.0
            cost.share = round(cost.latency_ms / d.before, 4)
            if d.better is None:
                cost.note = "within noise of the arm without it"
            elif d.together:
                cost.note = "measured with the other applied fixes together, not alone"
            break
        else:
            cost.note = (
                "not measured: no benchmarked fix removes it"
                if report.benchmark is not None
                else "not measured: the benchmark did not run (`ctc-doctor bench TARGET` measures its fix)"
            )


def _wrapper_cost(report: rm.Report, site: rm.GraphBreakSite, cost: rm.BreakCost) -> None:
    """A wrapper's by-design break: priced by `run --compare default,inner` when it ran (the step with the
    module compiled inside the wrapper, against the wrapper compiled), which covers all its breaks at once."""
    rows = {r.strategy: r for r in report.comparison}
    default, inner = rows.get("default"), rows.get("inner")
    wrapper = site.wrapper or "the wrapper"
    if default is not None and inner is not None and default.period_ms and inner.period_ms and inner.error is None:
        cost.latency_ms = round(default.period_ms - inner.period_ms, 4)
        cost.share = round(cost.latency_ms / default.period_ms, 4)
        cost.measured_by = "run --compare: default -> inner (the module compiled inside the wrapper), per step"
        cost.note = f"{wrapper}'s breaks together, by design"
        return
    cost.note = f"{wrapper}'s eager code by design; `run --compare default,inner` measures compiling inside it instead"


COMPARED_BY = {"lora-hotswap": "hotswap", "library-compile-dynamic": "dynamic"}
"""Suggestions that a `run --compare` strategy replays on the script itself: rule -> strategy."""


def compared_suggestions(report: rm.Report) -> None:
    """Each suggestion a `run --compare` row replayed: its deltas from the `default` row to that row
    (recompiles, the first call with its compile) and its verdict. A row too short for a pace still counts
    its recompiles and first call."""
    rows = {r.strategy: r for r in report.comparison if r.first_call_s is not None and r.exit_code in (None, 0) and r.loss_ok is not False}
    default = rows.get("default")
    for s in report.suggestions:
        row = rows.get(COMPARED_BY.get(s.rule, ""))
        if default is None or row is None or s.verified is not None:
            continue
        source = f"run --compare: default -> {row.strategy}"
        assert default.first_call_s is not None and row.first_call_s is not None
        pairs = [("recompiles", float(default.recompiles), float(row.recompiles)), ("first_call_s", default.first_call_s, row.first_call_s)]
        s.deltas = [
            rm.Delta(metric=metric, before=round(b, 4), after=round(a, 4), better=_better(metric, b, a), source=source)  # type: ignore[arg-type]
            for metric, b, a in pairs
        ]
        s.verdict, s.verdict_reason = _verdict(s, s.deltas)
