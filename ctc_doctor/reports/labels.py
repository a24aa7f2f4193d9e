"""Short text for report entries: paths, module lists, statuses, bisection marks and lines.

Plain strings (no rich, no torch), shared by the terminal summary, Markdown, the advice and the TUI.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from .models import (
    Benchmark,
    BenchmarkArm,
    Bisect,
    BisectTrial,
    CompiledObject,
    DdpSplit,
    DoctorCost,
    FixResult,
    GraphBreakSite,
    NumericsCheck,
    RecompileCause,
    RecompileCliff,
    ReferenceRun,
    Report,
    Suggestion,
    Summary,
    TorchBug,
    Verification,
)

STATUS_STYLE = {
    "applied": "green",
    "works": "green",
    "measured": "green",
    "unsafe": "red",
    "failed": "red",
    "no effect": "yellow",
    "no gain": "yellow",
    "redundant": "dim",
    "auto": "",
    "advice": "dim",
}
"""The rich style of a suggestion's status (the terminal summary, the TUI)."""


class VerdictLook(NamedTuple):
    """How the reports show a verdict: the terminal summary's style and headline, the Markdown's headline."""

    style: str
    terminal: str
    markdown: str


VERDICTS = {
    "clean": VerdictLook("bold green", "CLEAN: one graph per call, no recompiles", "✅ clean: one graph per call, no recompiles"),
    "graph_breaks": VerdictLook("bold yellow", "GRAPH BREAKS", "⚠️ graph breaks"),
    "recompiles": VerdictLook("bold yellow", "RECOMPILES", "⚠️ recompiles"),
    "graph_breaks_and_recompiles": VerdictLook("bold red", "GRAPH BREAKS AND RECOMPILES", "❌ graph breaks and recompiles"),
    "failed": VerdictLook("bold red", "FAILED", "❌ failed"),
}

WARNING_NOTE = "warning during the run"
"""How the notes on Python warnings raised during a run start."""
TORCH_LOG_NOTE = "torch log"
"""How the notes on the records torch logged during a run start."""


def short_path(path: str, width: int = 48) -> str:
    """Shorten a file path for tables: package-relative in site-packages, cwd-relative inside cwd."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = path
        if not rel.startswith(".."):
            path = rel
    if len(path) <= width:
        return path
    tail = path[-(width - 1) :]
    cut = tail.find(os.sep)
    return "…" + (tail[cut:] if 0 <= cut < len(tail) - 1 else tail)


def module_label(paths: list[str], width: int | None = 40, limit: int = 3) -> str:
    """`a, b to z (N instances)` beyond `limit` paths, cut to `width` characters (None: no cut)."""
    if not paths:
        return "—"
    names = ["(root)" if p == "" else p for p in paths]
    if len(names) > limit:
        text = f"{names[0]}, {names[1]} to {names[-1]} ({len(names)} instances)"
    else:
        text = ", ".join(names)
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


_LOCAL_NAME = re.compile(r"\bL\[(['\"])([A-Za-z_]\w*)\1\]")
_WALK = r"(?:\.__dict__\[(['\"])_(?:modules|parameters|buffers)\1\]|\._(?:modules|parameters|buffers))\[(['\"])([^'\"]*)\2\]"
_SELF_WALK = re.compile(r"(?<![\w.])self" + _WALK)
_STEP = re.compile(_WALK)
_DUNDER_DICT = re.compile(r"\.__dict__\[(['\"])([A-Za-z_]\w*)\1\]")
_CHILDREN = re.compile(r"(?:\.__dict__\[(['\"])_modules\1\]|\._modules)(?=\)|$)")


def module_path_of(source: str) -> str:
    """A guard source (or a guard's text) as people read it: the walks through `_modules`, `_parameters`
    and `_buffers` (`self.__dict__['_modules']['mid']._modules['0']._parameters['weight']`) as the dotted
    module path plus the attribute (`mid.0.weight`), from the model itself when the walk starts at `self`
    (`L['self']`); `L['x']` -> `x`; `len(self._modules['m']._modules)` -> `len(m)`. Other text is kept:
    `self.flag` stays, `tensor 'x' size mismatch` too. The raw text stays the evidence (`FailedGuard`)."""
    text = _LOCAL_NAME.sub(lambda m: m.group(2), source)
    text = _SELF_WALK.sub(lambda m: m.group(3), text)
    text = _STEP.sub(lambda m: "." + m.group(3), text)
    text = _DUNDER_DICT.sub(lambda m: "." + m.group(2), text)
    return _CHILDREN.sub("", text)


FIRST_CALL_ONLY = "a fresh model's first call only"
"""The mark of a break site whose line runs only on a fresh model's first call (`first_call_only`)."""


def site_marks(site: GraphBreakSite) -> list[str]:
    """Short marks for a break site: the whole function ran eager, the first call only."""
    marks = ["whole function ran eager"] if site.frame_skipped else []
    return marks + ([FIRST_CALL_ONLY] if site.first_call_only else [])


def suggestion_status(s: Suggestion, fix: FixResult | None) -> str:
    """applied / safe, no effect / redundant / unsafe / not applied / advice."""
    if fix is not None and s.id in fix.applied:
        return "applied"
    if fix is not None and s.id in fix.redundant and s.verified is None:  # not checked: what it addresses was removed already
        return "redundant"
    if s.verified is not None:
        if not s.verified.applied or not s.verified.safe:
            return "unsafe" if s.verified.applied and s.verified.numerics_ok is False else "failed"
        if fix is not None and s.id in fix.redundant:
            return "redundant"
        if s.rule == "regional-compile":
            return "measured" if s.verified.effective else "no gain"
        return "no effect" if not s.verified.effective else "works"
    return "auto" if s.auto_applicable else "advice"


_MARKS = {
    "passed": ("✓", "green"),
    "failed": ("✗", "bold red"),
    "timeout": ("⏱", "yellow"),
    "crashed": ("✖", "bold red"),
    "skipped": ("·", "dim"),
}


def trial_symbol(t: BisectTrial) -> tuple[str, str]:
    """(symbol, rich style) of a bisection row: ✓ ✗ ⏱ ✖ ·, and ≈✓ ≈✗ for inferred rows."""
    if t.status != "inferred":
        return _MARKS[t.status]
    return ("≈✓", "green") if t.passed else ("≈✗", "red")


def failure_text(t: BisectTrial) -> str:
    frame = t.own_frame or t.user_frame
    where = f" at {short_path(frame.file, 40)}:{frame.line}" if frame else ""
    ids = f"{', '.join(t.registry_ids[:2])} " if t.registry_ids else ""
    what = t.gb_type or (t.reason or t.status)
    return f"{ids}{what}{where}"


def bisect_summary_line(b: Bisect) -> str:
    """`6 trials for 193 modules (3%)`, strategy and agreement, in one line."""
    share = f" ({100 * b.trial_count / b.exhaustive_count:.0f}%)" if b.exhaustive_count else ""
    strategy = "top-down + bottom-up" if b.strategy == "both" else b.strategy
    agree = ""
    if b.agreement is not None:
        agree = ", strategies agree" if b.agreement else ", strategies DISAGREE"
    mode = ", isolated" if b.isolated else ""
    return f"{strategy}{agree}{mode}: {b.trial_count} trial(s) for {b.exhaustive_count} exercised module(s){share}, {b.duration_s:.1f} s"


def cudagraph_text(arm: BenchmarkArm) -> str | None:
    """One line on what CUDA graphs did in an arm: recordings, skips and re-recordings with torch's reasons."""
    g = arm.cudagraphs
    if g is None:
        return None

    def times(text: str, n: int) -> str:
        return text + (f" ({n}×)" if n > 1 else "")

    parts = [f"{g.recordings} recorded"]
    skipped = g.skip_count or sum(g.skips.values())
    if skipped:
        reasons = "; ".join(times(reason, n) for reason, n in g.skips.items())
        parts.append(f"{skipped} graph compile(s) without them" + (f": {reasons}" if reasons else " (torch logged no reason)"))
    if g.rerecords:
        parts.append(f"re-recorded {sum(g.rerecords.values())}×: " + "; ".join(f"{reason} ({n}×)" for reason, n in g.rerecords.items()))
    parts += [times(f"torch warns: {text}", n) for text, n in g.warnings.items()]
    marked = ", each call a step (cudagraph_mark_step_begin)" if g.step_marked else ""
    return f"{arm.name} CUDA graphs{marked}: " + " · ".join(parts)


def benchmark_headline(b: Benchmark) -> str | None:
    """`compiled_fixed: 1.6x vs eager, cold compile 31.0 s -> 2.0 s` for the verdict."""
    arms = {a.name: a for a in b.arms}
    best = arms.get(b.best_arm or "")
    compiled = arms.get("compiled")
    head = f"benchmark ({b.settings.get('backend', '?')}, {b.device}, objective {b.objective})"
    if best is None:
        return f"{head}: {b.best_arm_reason}{crashed_arms(b)}" if b.best_arm_reason else None
    if b.best_arm_reason:
        return f"{head}: best {b.best_arm_reason}{pace_of_arm(b, best)}{crashed_arms(b)}"
    text = f"benchmark ({b.settings.get('backend', '?')}, {b.device}): fastest {best.name}"
    if best.speedup_vs_eager is not None:
        text += f" {best.speedup_vs_eager:.2f}x vs eager"
    if compiled is not None and compiled.compile_time_s is not None:
        other = arms.get("compiled_fixed") or arms.get("regional_fixed") or arms.get("regional")
        if other is not None and other.compile_time_s is not None:
            text += f" · cold compile {compiled.compile_time_s:.1f} s (compiled) -> {other.compile_time_s:.1f} s ({other.name})"
    return text + pace_of_arm(b, best) + crashed_arms(b)


def unstable(arm: BenchmarkArm) -> bool:
    """Whether the arm's latency cannot be trusted as a steady figure (`LatencyStats.unstable`)."""
    return arm.latency_ms is not None and arm.latency_ms.unstable is not None


def speedup_cell(b: Benchmark, arm: BenchmarkArm) -> str:
    """`1.62x`, `1.62x?` when it rests on an unstable figure (the arm's or eager's); empty when not measured."""
    if arm.speedup_vs_eager is None:
        return ""
    eager = next((a for a in b.arms if a.name == "eager"), None)
    shaky = unstable(arm) or (eager is not None and unstable(eager))
    return f"{arm.speedup_vs_eager:.2f}x" + ("?" if shaky else "")


def unstable_lines(b: Benchmark) -> list[str]:
    """One line per arm whose figure cannot be trusted: `compiled: unstable: its spread is 45 % of the median`."""
    return [f"{a.name}: unstable: {a.latency_ms.unstable}" for a in b.arms if a.latency_ms is not None and a.latency_ms.unstable]


UNSTABLE_KEY = "?: rests on an unstable figure (see below); ± is the IQR, n the timed passes"
"""The legend of the `?` a speedup cell carries when it rests on an unstable figure."""


def crashed_arms(b: Benchmark) -> str:
    """` · crashed: regional (SIGSEGV)`: the arms whose child process died (empty when none did)."""
    crashed = [f"{a.name} ({a.crash})" for a in b.arms if a.crash]
    return f" · crashed: {', '.join(crashed)}" if crashed else ""


def crash_cell(arm: BenchmarkArm) -> str:
    """`crashed (SIGSEGV)` for an arm whose child process died, else empty: what its latency cell shows."""
    return f"crashed ({arm.crash})" if arm.crash else ""


def stderr_tail_text(arm: BenchmarkArm, lines: int = 3) -> str:
    """A crashed arm's last lines of stderr, ` | `-joined (empty when it left none)."""
    return " | ".join(line.strip() for line in arm.stderr_tail[-lines:])


def pace_of_arm(b: Benchmark, arm: BenchmarkArm) -> str:
    """` · 81.2 steps/s, pays off after 2,300 steps` (calls without an optimizer; empty when not measured)."""
    if arm.steps_per_s is None:
        return ""
    unit = "step" if str(b.settings.get("grad", "")).startswith("training step") else "call"
    text = f" · {arm.steps_per_s:,.1f} {unit}s/s"
    text += f", pays off after {arm.break_even_calls:,} {unit}s" if arm.break_even_calls else ""
    if b.job_steps is not None:
        text += f"; for a {b.job_steps:,}-{unit} job: {b.job_best_arm or 'no arm measured'}"
    return text


def script_outcome(report: Report) -> str | None:
    """`run` reports: how the script ended, one line (None for other reports)."""
    t, r = report.target, report.run
    if t.kind != "script":
        return None
    ranks = f" on {r.ranks} ranks" if r.ranks > 1 else ""
    if r.stopped == "timeout":
        ended = "stopped at --timeout"
    elif r.stopped == "interrupted":
        ended = "interrupted"
    elif r.stopped == "max_steps":
        ended = "stopped at --max-steps"
    elif r.exit_code:
        ended = f"failed, exit code {r.exit_code}" + (f": {r.script_error}" if r.script_error else "")
    else:
        ended = "ran to its end" + (" (exit code 0)" if r.exit_code == 0 else "")
    return f"{' '.join(t.command) or t.spec}{ranks}: {ended}"


def compiled_line(obj: CompiledObject) -> str:
    """`Net (module, backend=eager): 12 calls, analyzed`."""
    options = ", ".join(f"{k}={v}" for k, v in obj.options.items())
    text = f"{obj.name} ({obj.kind}{', ' + options if options else ''}): {obj.calls} call(s)"
    text += f" by {obj.driver}" if obj.driver and obj.calls else ""
    text += f", compiled at {obj.site}" if obj.site else ""
    text += f"; {obj.relation}" if obj.relation else ""
    text += f"; {pace_text(obj)}" if obj.period_ms is not None and obj.first_call_s is not None else ""
    return text + (", analyzed" if obj.analyzed else "")


def pace_text(obj: CompiledObject) -> str:
    """`first call 4.10 s (compile included), then 5.6 ms per token (178/s)`: the script's own pace."""
    step = "token" if obj.driver == "generate" else "call"
    period = obj.period_ms or 0.0
    rate = f" ({1e3 / period:,.0f}/s)" if period > 0 else ""
    return f"first call {obj.first_call_s:.2f} s (compile included), then {period:.3g} ms per {step}{rate}"


def verdict_label(s: Suggestion) -> str:
    """`trade-off: graphs 2 -> 1, latency 0.12 -> 1.4 ms (+1 000 %)` (empty when not measured)."""
    if s.verdict is None or s.verdict == "unmeasured":
        return ""
    label = "trade-off" if s.verdict == "trade_off" else s.verdict.replace("_", " ")
    return f"{label}: {s.verdict_reason}" if s.verdict_reason else label


def cause_headline(cause: RecompileCause) -> str:
    """`C1: x dim 0 changes 2 → 3 — 11 recompiles in 9 functions`."""
    n = len(cause.recompiles)
    where = f" in {cause.code_objects} functions" if cause.code_objects > 1 else ""
    cost = f", {cause.compile_time_s:.2f} s of compile" if cause.compile_time_s else ""
    if cause.expected:
        how = f" (expected: {cause.expected})"
    else:
        how = f" ({RECURRENCE[cause.recurrence]})" if cause.recurrence else ""
    return f"{cause.id}: {cause.summary} — {n} recompile{'s' if n != 1 else ''}{where}{cost}{how}"


RECURRENCE = {
    "one_off": "one-off",
    "bounded": "bounded: a few variants, then it settles",
    "recurring": "recurring: each new value compiles again; past the recompile limit the frame runs eagerly",
}


def cause_of(report: Report) -> dict[str, str]:
    """Recompile id -> the id of its cause."""
    return {rid: c.id for c in report.recompile_causes for rid in c.recompiles}


def graphs_text(report: Report) -> str:
    """`N graph(s)`, or `graph count unknown` for logs that do not record graphs (TORCH_LOGS text)."""
    s = report.summary
    if report.source is not None and s.graph_count == 0 and not report.graphs and not report.compile_metrics:
        return "graph count unknown (not in these logs)"
    return f"{s.graph_count} graph(s) {'in first compiles' if report.source else 'on the first call'}"


def compile_time_text(report: Report) -> str:
    """`compile time N s`, or unknown for logs without compile metrics (TORCH_LOGS text)."""
    if report.source is not None and not report.compile_metrics:
        return "compile time unknown (no compile metrics in these logs)"
    return f"compile time {report.summary.compile_time_s:.2f} s"


def ratio_text(ratio: float) -> str:
    """`0.86x`, `1.00x`, `13x`."""
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def numerics_cell(arm: BenchmarkArm) -> str:
    """A benchmark arm's numerics in a table cell: its error over eager's (`0.86x`), ✗ when it fails."""
    check = arm.numerics
    if check is None or check.method == "elementwise" or check.ratio is None:
        value = "" if arm.max_abs_error is None else f"{arm.max_abs_error:.1e}"  # reports before 1.9, elementwise
    else:
        value = ratio_text(check.ratio)
    return value + (" ✗" if arm.numerics_ok is False else "")


def fix_lists(fix: FixResult) -> list[tuple[str, str]]:
    """The suggestions `fix` did not apply, by why: (`unsafe or failed`, `S1, S2`), (`left out`, `S4 (with S1: ...)`)."""
    rows = [("unsafe or failed", ", ".join(fix.unsafe)), ("no effect", ", ".join(fix.ineffective))]
    rows.append(("left out", "; ".join(f"{sid} ({why})" for sid, why in fix.dropped.items())))
    return [(label, ids) for label, ids in rows if ids]


def verification_numerics(v: Verification, backend: str) -> str:
    """` · numerics ok: error 1.00x eager's own against float64 (eager)` for a verified fix ('' when not compared)."""
    if v.numerics is not None:
        return f" · {numerics_text(v.numerics)} ({backend})"
    return "" if v.max_abs_error is None else f" · outputs match eager (max abs error {v.max_abs_error:.2e}, {backend})"


def numerics_text(check: NumericsCheck) -> str:
    """One line: `numerics ok: error 0.86x eager's own against float64`."""
    against = {"float64_reference": "float64", "float32_reference": "float32"}.get(check.method)
    head = "numerics ok" if check.ok else "numerics FAIL"
    if against is None:
        text = f"{head}: elementwise against eager"
    elif check.ratio is not None:
        text = f"{head}: error {ratio_text(check.ratio)} eager's own against {against}"
    else:
        text = f"{head}: against {against}"
    if not check.ok and check.problem:
        text += f" ({check.problem})"
    return text


def folded_counts(notes: list[str]) -> tuple[int, int]:
    """(records, kinds) of counted notes: one kind per `(n×)` note, and the `k more kind(s), r in all` note's own."""
    total = kinds = 0
    for note in notes:
        more = re.search(r"(\d+) more kind\(s\), (\d+) in all", note)
        one = re.search(r"\((\d+)×\)", note)
        if more:
            kinds, total = kinds + int(more.group(1)), total + int(more.group(2))
        elif one:
            kinds, total = kinds + 1, total + int(one.group(1))
    return total, kinds


def recompiles_text(s: Summary) -> str:
    """`3 recompile(s)`, `3 recompile(s) (2 expected)`: the ones a decoding loop pays by design apart."""
    return f"{s.recompile_count} recompile(s)" + (f" ({s.expected_recompiles} expected)" if s.expected_recompiles else "")


def ddp_split_text(splits: list[DdpSplit]) -> str | None:
    """One sentence for the summary: what DDPOptimizer did, that it is by design, and its knobs."""
    if not splits:
        return None
    parts = ", ".join(f"{s.compile_id} into {s.subgraphs}" for s in splits[:4]) + (" ..." if len(splits) > 4 else "")
    caps = {s.bucket_cap_bytes for s in splits if s.bucket_cap_bytes}
    cap = f" (bucket cap {next(iter(caps)) / 2**20:g} MiB)" if len(caps) == 1 else ""
    return (
        f"DDPOptimizer split graph {parts} subgraphs at gradient-bucket boundaries{cap}, so each bucket's "
        "all-reduce overlaps the backward: by design, not graph breaks. Fewer splits: a larger "
        "DDP(bucket_cap_mb=...); none: torch._dynamo.config.optimize_ddp = False (no overlap)."
    )


def cost_text(site: GraphBreakSite) -> str | None:
    """`cost: 1 graph added; 0.42 ms a pass (31 %), measured by S1: benchmark compiled -> fixed[S1] (S1 alone)`."""
    c = site.cost
    if c is None:
        return None
    parts = [f"{c.graphs_added} graph(s) added"] if c.graphs_added else []
    if c.latency_ms is not None and c.note != "within noise of the arm without it":
        share = f" ({100 * c.share:.0f} %)" if c.share is not None else ""
        parts.append(f"{c.latency_ms:.3g} ms a pass{share}, measured by {c.measured_by}")
    if c.note:
        parts.append(c.note)
    return "cost: " + "; ".join(parts) if parts else None


def doctor_cost_text(cost: DoctorCost | None, phases: int = 3) -> str | None:
    """`the doctor used 1.4x the workload's memory and 2.6x its time (151 s, peak 2.1 GB; the workload 46 s,
    1.2 GB) · longest: arm compiled 38 s, fix checks 19 s`; None without a cost section."""
    if cost is None:
        return None
    peak = cost.peak_cuda_mb if cost.peak_cuda_mb is not None else cost.peak_rss_mb
    own = f"{_s(cost.wall_s)}" + (f", peak {_mb(peak)}" if peak is not None else "")
    theirs = ""
    if cost.workload_wall_s is not None:
        theirs = f"; the workload {_s(cost.workload_wall_s)}" + (f", {_mb(cost.workload_peak_mb)}" if cost.workload_peak_mb else "")
    head = cost.summary or "the doctor's own cost"
    text = f"{head} ({own}{theirs})"
    longest = sorted(cost.phases, key=lambda p: -p.wall_s)[:phases]
    if longest:
        text += " · longest: " + ", ".join(f"{p.phase} {_s(p.wall_s)}" for p in longest)
    reference = reference_text(cost.reference)
    if reference is not None:
        text += f" · {reference}"
    return text


_WAYS = {
    "whole": "the model cast whole",
    "blockwise": "block by block",
    "checkpointed": "block by block (activations recomputed)",
    "offloaded": "with its activations on the host",
    "streamed": "one module's parameters at a time",
    "streamed_checkpointed": "one module's parameters and one block's activations at a time",
    "host": "on the host",
}


def reference_text(run: ReferenceRun | None) -> str | None:
    """`float64 reference block by block, in 4 slices of the batch (120 MB beyond the workload's own, 331 MB
    allowed: the doctor's margin, ...)`, when it did not simply run whole; None otherwise."""
    if run is None or run.placement is None or (run.placement == "whole" and run.slices == 1):
        return None
    what = run.method.removesuffix("_reference")
    sliced = f", in {run.slices} slices of the batch" if run.slices > 1 else ""
    room = ""
    if run.beyond_workload_mb is not None and run.room_mb is not None:
        room = f" ({_mb(run.beyond_workload_mb)} beyond the workload's own, {_mb(run.room_mb)} allowed: {run.room_basis})"
    return f"{what} reference {_WAYS.get(run.placement, run.placement)}{sliced}{room}"


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def _mb(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"


def cliff_line(cliff: RecompileCliff, calls: int | None = None) -> str:
    """`forward hit the recompile limit (8) at call 9 of 12 [C1]: from there it runs eagerly for every
    call that matches none of its 8 compiled versions (4 calls left)`."""
    limit = f" ({cliff.limit})" if cliff.limit is not None else ""
    where = f" at call {cliff.from_call + 1}" + (f" of {calls}" if calls else "") if cliff.from_call is not None else ""
    cause = f" [{cliff.cause}]" if cliff.cause else ""
    versions = f"its {cliff.limit} compiled versions" if cliff.limit is not None else "its compiled versions"
    left = f" ({cliff.eager_calls} call(s) left)" if cliff.eager_calls else ""
    head = f"{cliff.function} hit the recompile limit{limit}{where}{cause}"
    if cliff.ran_eagerly is not None and cliff.eager_calls:  # counted, not inferred
        return f"{head}: from there it ran eagerly in {cliff.ran_eagerly} of the {cliff.eager_calls} call(s) left (counted)"
    return f"{head}: from there it runs eagerly for every call that matches none of {versions}{left}"


def eager_frames_line(report: Report, limit: int = 3) -> str | None:
    """`frames run eagerly: forward (block0.attn) in 2 of 4 calls, skipped (...)`: the compiled frames that ran
    their own code for another reason than the recompile limit (a cliff says its own); None when none did."""
    frames = [f for f in report.frame_calls if f.eager and f.why_eager and not f.why_eager.startswith("the recompile limit")]
    if not frames:
        return None
    shown = []
    for f in frames[:limit]:
        where = f" in {', '.join(p or '(root)' for p in f.module_paths[:2])}" if f.module_paths else ""
        calls = sum(1 for _, _, eager in f.by_call if eager)
        total = len(f.by_call)
        first = f", from call {f.first_eager_call + 1}" if f.first_eager_call is not None else ""
        shown.append(f"{f.function}{where}, {calls} of {total} call(s){first}: {f.why_eager}")
    more = f"; and {len(frames) - limit} more" if len(frames) > limit else ""
    return "frames run eagerly: " + "; ".join(shown) + more


def accuracy_line(report: Report) -> str | None:
    """The module where compiled goes wrong, with its repro: `blocks.3 (Block, model.py:40) diverges alone:
    error 52.1x eager's own; repro: python ctc_accuracy_blocks_3.py`; None when no module was found."""
    a = report.accuracy
    if a is None or a.module_path is None:
        return None
    level = next((t for t in reversed(a.path) if t.module_path == a.module_path), None)
    ratio = f": error {level.ratio:.3g}x eager's own" if level is not None and level.ratio is not None else ""
    where = f", {a.source}" if a.source else ""
    what = "its own code" if a.own_code else "it"
    repro = f"; repro: python {a.repro_path}" if a.repro_path else ""
    op = a.operation
    at = ""
    if op is not None and op.operation:
        why = "only the compiled graph runs it" if op.kind == "traced_only" else "the backend computes it wrong"
        at = f"; at `{op.operation}` ({op.user_line}: `{op.user_code}`; {why})" if op.user_line else f"; at `{op.operation}` ({why})"
    return f"`{a.module_path or '(root)'}` ({a.module_class}{where}) diverges compiled alone, in {what}{ratio}{at}{repro}"


def torch_bug_title(bug: TorchBug) -> str:
    """`a PyTorch bug, ready to file`, or the bug of a backend registered outside PyTorch."""
    return f"a bug in {bug.owner}'s backend, ready to file" if bug.owner else "a PyTorch bug, ready to file"


def torch_bug_lines(bug: TorchBug) -> list[str]:
    """A PyTorch bug as lines people read: whose fault, where, the repro and the issue, the way around it."""
    whose = f"; {bug.owner}'s backend, to file with its authors" if bug.owner else ""
    if bug.kind == "wrong_result":
        lines = [f"not your code: {bug.stage} computes `{bug.operation}` wrong ({bug.where}{whose}): {bug.error}"]
    else:
        lines = [f"not your code: torch.compile crashes in {bug.stage} ({bug.where}{whose}): {bug.error}"]
    if bug.user_line:
        op = f" (`{bug.operation}`)" if bug.operation else ""
        lines.append(f"triggered by {short_path(bug.user_line)}{op}" + (f": {bug.user_code}" if bug.user_code else ""))
    lines.append("tried: " + "; ".join(bug.tried))
    if bug.repro_path or bug.repro:
        where = f"python {bug.repro_path}" if bug.repro_path else "the report's torch_bugs[].repro"
        state = {
            True: "fails the same way under plain python",
            False: bug.repro_note or "did not fail the same way",
            None: bug.repro_note or "not run",
        }
        by = " (torch's minifier)" if bug.repro_reducer == "torch's minifier" else ""
        cut = f", {bug.repro_nodes} of {bug.graph_nodes} operations{by}" if bug.repro_nodes and bug.graph_nodes else ""
        lines.append(f"repro: {where} ({state[bug.repro_verified]}{cut})")
    elif bug.repro_note:
        lines.append(f"no repro: {bug.repro_note}")
    if bug.issue_path:
        lines.append(f"issue text, ready to file: {bug.issue_path}")
    if bug.workaround:
        lines.append(f"workaround{' (verified)' if bug.workaround_verified else ''}: {bug.workaround}")
    if bug.workaround_rerun:
        lines.append(f"the whole script with it: {bug.workaround_rerun}")
    return lines
