"""What compiling cost and what each recompile cause costs, from torch's compilation metrics (torch-free).

Each compile id's `compilation_metrics` carries nested cumulative timers: Dynamo's whole frame compile
holds AOTAutograd's, which holds Inductor's, which holds its code generation, which holds the C++/Triton
kernel compile. Differencing the chain gives each phase's own seconds, so the phases add up to the
measured compile time by construction (a timer an older torch or another backend does not write folds
into the phase above it). The backward graph compiles lazily, at the first backward, with its own
`bwd_compilation_metrics` under the same compile id: its phases are added to the same buckets and
its total is kept apart as `backward_s`. The logs reader keeps the same keys (`logfiles.METRIC_KEYS`).

`price_causes` gives each recompile cause its `compile_time_s` and `recurrence`, `recompile_cliffs` the
frames that hit the recompile limit and ran eagerly from some call on (below), and `compile_profile` the
report's profile (by phase, by compile, by cause, caches); `assembly.derive` calls them in that order.
Recurrence: `one_off` (a fixed pair of states: grad mode on/off, train/eval, a decoding loop's prefill
and decode; marked expected; a flag of the user's own stays `bounded`, a cause to fix), `recurring` (a
new compile per new value, or the recompile limit hit: from then on the frame runs eagerly), or
`bounded` (a few variants, then it settles); a kind's own leaning is its registry entry's
(`reports/advice/guard_kinds`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from ...reports import models as rm
from ...reports.advice.guard_kinds import guard_kind

PHASES = ("dynamo", "aot_autograd", "inductor", "codegen", "kernel_compile", "other")
_CHAIN = (
    ("dynamo", "dynamo_cumulative_compile_time_us"),
    ("aot_autograd", "aot_autograd_cumulative_compile_time_us"),
    ("inductor", "inductor_cumulative_compile_time_us"),
    ("codegen", "inductor_code_gen_cumulative_compile_time_us"),
    ("kernel_compile", "triton_compile_time_us"),
)
_BACKWARD_TOTAL = "backward_cumulative_compile_time_us"
_CACHES = {
    "fx_graph": ("inductor_fx_local_cache_hit_count", "inductor_fx_local_cache_miss_count"),
    "fx_graph_remote": ("inductor_fx_remote_cache_hit_count", "inductor_fx_remote_cache_miss_count"),
    "aot_autograd": ("aotautograd_local_cache_hit_count", "aotautograd_local_cache_miss_count"),
    "aot_autograd_remote": ("aotautograd_remote_cache_hit_count", "aotautograd_remote_cache_miss_count"),
}
PASS_KEYS = ("pre_grad_pass_time_us", "joint_graph_pass_time_us", "post_grad_pass_time_us")
METRIC_KEYS = frozenset(
    {"duration_us", _BACKWARD_TOTAL, *(k for _, k in _CHAIN), *PASS_KEYS, *(k for pair in _CACHES.values() for k in pair)}
)
"""The compilation-metrics keys this module reads (beside `entire_frame_compile_time_s`)."""
RECURRING_VALUES = 3
"""A value cause that compiled this many distinct values, each anew in one frame, does not settle."""


_FRAME_ROOT = re.compile(r"""^(?:[LG]\[['"][^'"]+['"]\]|self\b)""")
_DICT_WALK = re.compile(r"""\.__dict__\[['"]_(?:modules|parameters|buffers)['"]\]""")
"""`.__dict__['_modules']`: how Dynamo names a child of a module that defines its own `__getattr__` (diffusers')."""
_INDEXED = re.compile(r"""(?:\._modules)?\[['"]?([^\]'"]+)['"]?\]""")


def stack_path(fqn: str) -> str:
    """A node's `nn_module_stack` entry as a module path relative to the compiled frame's `self`:
    `L['self'].layers.0.fc`, `L['self'].layers[0].fc`, `self._modules['layers']._modules['0'].fc` and
    `L['self'].__dict__['_modules']['layers']...` all give `layers.0.fc`; the frame's own module gives `""`."""
    rest = _FRAME_ROOT.sub("", _DICT_WALK.sub("", fqn.strip()), count=1)
    return _INDEXED.sub(r".\1", rest).strip(".")


def _pattern(paths: list[str]) -> str | None:
    """The one module a compiled frame ran (`blocks.3`), or the pattern of the repeated blocks that share
    its code (`blocks.0` ... `blocks.63` -> `blocks.*`); None when they have no such common form."""
    if len(paths) == 1:
        return paths[0]
    forms = {".".join("*" if part.isdigit() else part for part in p.split(".")) for p in paths}
    return forms.pop() if len(forms) == 1 else None


def _fold(path: str) -> tuple[str, str | None]:
    """(the row a module path counts under, the concrete block it is one of): the path up to its
    first list index, folded to `*` (`h.3.attn.c_attn` -> `h.*`, one of `h.3`), else its first two
    parts (`embeddings.word_embeddings`)."""
    kept: list[str] = []
    for part in path.split(".") if path else []:
        if part.isdigit() or part == "*":
            return ".".join([*kept, "*"]), ".".join([*kept, part]) if part != "*" else None
        kept.append(part)
        if len(kept) == 2:
            break
    return ".".join(kept), None


def module_costs(report: rm.Report, total: float) -> list[rm.CostRow]:
    """Compile seconds by module (an estimate): each compile's seconds shared among the modules of its
    graph's ops by op count (a compile without a graph: all to the frame's module); repeated blocks fold
    into one row. None without recorded graphs (logs, a script's own backend)."""
    graphs: dict[str, dict[str, int]] = defaultdict(dict)
    for g in report.graphs:
        for rel, n in g.module_ops.items():
            graphs[g.compile_id][rel] = graphs[g.compile_id].get(rel, 0) + n
    seconds: dict[str, float] = defaultdict(float)
    blocks: dict[str, set[str]] = defaultdict(set)
    for m in report.compile_metrics:
        base = _pattern(m.module_paths) if m.module_paths else ""
        if base is None or _total(m) <= 0 or not report.graphs:
            continue
        ops = graphs.get(m.compile_id) or {"": 1}  # no graph (a frame that broke at once): its tracing is its module's
        count = sum(ops.values())
        for rel, n in ops.items():
            key, block = _fold(".".join(p for p in (base, rel) if p))
            seconds[key] += _total(m) * n / count
            if block is not None:
                blocks[key].add(block)
            elif key.endswith("*") and len(m.module_paths) > 1:
                blocks[key].update(m.module_paths)
    rows = []
    for key, value in sorted(seconds.items(), key=lambda kv: -kv[1]):
        label = key or "(the model's own code)"
        if blocks.get(key):
            label += f" ({len(blocks[key])} blocks)"
        rows.append(rm.CostRow(key=key, label=label, seconds=round(value, 4), share=round(value / total, 4) if total else 0.0))
    return rows


def _seconds(m: dict[str, Any], key: str) -> float | None:
    value = m.get(key)
    return value / 1e6 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def phase_split(m: dict[str, Any], backward: bool = False) -> dict[str, float]:
    """One compile's seconds per phase (`PHASES`), from its nested timers; {} without a total. A
    backward compile starts at AOTAutograd (its Dynamo work was the forward's)."""
    chain = list(_CHAIN[1:] if backward else _CHAIN)
    total = _seconds(m, _BACKWARD_TOTAL if backward else chain[0][1])
    if total is None:
        total = _seconds(m, "duration_us") if backward else m.get("entire_frame_compile_time_s")
    if not isinstance(total, (int, float)) or total <= 0:
        return {}
    levels = [(chain[0][0], float(total))]
    for name, key in chain[1:]:
        value = _seconds(m, key)
        if value is not None:  # an inner timer is capped by its outer one (kernel compiles summed over workers)
            levels.append((name, min(value, levels[-1][1])))
    inner = [value for _, value in levels[1:]] + [0.0]
    return {name: value - below for (name, value), below in zip(levels, inner, strict=True)}


def caches(m: dict[str, Any]) -> dict[str, list[int]]:
    """{cache: [hits, misses]} for the caches the compile consulted."""
    out = {}
    for name, (hit, miss) in _CACHES.items():
        h, n = m.get(hit), m.get(miss)
        if isinstance(h, int) or isinstance(n, int):
            out[name] = [h if isinstance(h, int) else 0, n if isinstance(n, int) else 0]
    return out


def add_costs(metric: rm.CompileMetric, m: dict[str, Any], backward: dict[str, Any] | None) -> rm.CompileMetric:
    """A compile metric with its phases, backward compile and cache counts filled."""
    phases = phase_split(m)
    metric.backward_s = None
    if backward:
        for name, seconds in phase_split(backward, backward=True).items():
            phases[name] = phases.get(name, 0.0) + seconds
        total = _seconds(backward, _BACKWARD_TOTAL) or _seconds(backward, "duration_us")
        metric.backward_s = round(total, 4) if total is not None else None
    metric.phases = {k: round(v, 4) for k, v in phases.items() if v > 0}
    passes = [s for k in PASS_KEYS for d in (m, backward or {}) if (s := _seconds(d, k)) is not None]
    metric.graph_passes_s = round(sum(passes), 4) if passes else None
    metric.caches = _summed([caches(m), caches(backward or {})])
    return metric


def _summed(counts: list[dict[str, list[int]]]) -> dict[str, list[int]]:
    """{cache: [hits, misses]} added up."""
    out: dict[str, list[int]] = {}
    for one in counts:
        for name, (hits, misses) in one.items():
            total = out.setdefault(name, [0, 0])
            total[0] += hits
            total[1] += misses
    return out


def _total(m: rm.CompileMetric) -> float:
    return (m.duration_s or 0.0) + (m.backward_s or 0.0)


def drove_to_the_limit(cause: rm.RecompileCause, report: rm.Report) -> bool:
    """Whether this cause's recompiles took a frame to its recompile limit: the recompile recorded at the
    compile that hit the limit is one of its own. Another cause that recompiled the same frame once (a
    switch to eval) did not. Where no recompile is recorded at that compile (a log without recompile
    reasons), the cause that made most of that frame's recompiles did."""
    mine = set(cause.recompiles)
    at = {rc.compile_id: rc for rc in report.recompiles}
    for m in report.compile_metrics:
        if not hit_the_limit(m):
            continue
        recorded = at.get(m.compile_id)
        if recorded is not None:
            if recorded.id in mine:
                return True
            continue
        frame = m.compile_id.rpartition("/")[0]
        in_frame = [rc for rc in report.recompiles if rc.compile_id.rpartition("/")[0] == frame]
        if in_frame and 2 * sum(rc.id in mine for rc in in_frame) > len(in_frame):
            return True
        if not in_frame and m.function is not None and m.function in {f.rpartition(".")[2] for f in cause.functions}:
            return True
    return False


SETTLED_CALLS = 2
"""Calls after a size cause's only change that ran without recompiling: automatic dynamic shapes settled it."""


def settled_after_one(cause: rm.RecompileCause, report: rm.Report) -> bool:
    """A size that changed once (one recompile per compiled frame, in one call), and the calls after it (at
    least `SETTLED_CALLS`) ran without recompiling on it: automatic dynamic shapes compiled the dim as
    dynamic and served the rest. Marking it dynamic first saves that one compile, once."""
    if cause.kind != "size" or cause.first_call is None or len(cause.recompiles) != cause.code_objects:
        return False
    calls = {rc.call_index for rc in report.recompiles if rc.id in set(cause.recompiles)}
    return calls == {cause.first_call} and report.target.calls - cause.first_call - 1 >= SETTLED_CALLS


def recurrence(cause: rm.RecompileCause, report: rm.Report) -> tuple[rm.Recurrence, str | None]:
    """(how the cause recurs, why it is expected when it is a one-off)."""
    if drove_to_the_limit(cause, report):
        return "recurring", None
    if cause.expected:
        return "one_off", cause.expected
    source = cause.source or ""
    values = {v.strip() for v in cause.values}
    entry = guard_kind(cause.kind)
    if entry.recurrence == "one_off" or source.endswith(".training"):
        what = "grad mode" if "grad" in " ".join([*cause.values, cause.summary]).lower() else (source or cause.kind)
        return "one_off", f"{what} switches between training and evaluation: one extra compile per function, once"
    if cause.first_call == 1 and len(values) == 2 and "None" in cause.values[:1]:
        return "one_off", None  # set on the first call, held since (lazy state): one eager call first removes it
    if settled_after_one(cause, report):
        return "one_off", None  # one new size, then automatic dynamic shapes served every later call
    per_code = len(cause.recompiles) / max(cause.code_objects, 1)
    if entry.recurrence == "by_values" and len(values) >= RECURRING_VALUES and per_code >= 2:
        return "recurring", None
    return "bounded", None


def price_causes(report: rm.Report) -> None:
    """Each cause's compile seconds and recurrence; a one-off marks its recompiles expected (the verdict
    is the caller's to recount: `assembly.derive`)."""
    by_compile = {m.compile_id: m for m in report.compile_metrics}
    by_recompile = {rc.id: rc for rc in report.recompiles}
    for cause in report.recompile_causes:
        ids = [by_recompile[r].compile_id for r in cause.recompiles if r in by_recompile]
        cause.compile_time_s = round(sum(_total(by_compile[c]) for c in ids if c in by_compile), 4)
        cause.recurrence, why = recurrence(cause, report)
        if cause.recurrence == "one_off" and why and not cause.expected:
            cause.expected = why
            for r in cause.recompiles:
                if r in by_recompile and not by_recompile[r].expected:
                    by_recompile[r].expected = why


def compile_profile(report: rm.Report) -> rm.CompileProfile | None:
    """Where the report's compile time went: by phase, by compile (its function and module), by cause."""
    metrics = [m for m in report.compile_metrics if _total(m) > 0]
    if not metrics:
        return None
    total = sum(_total(m) for m in metrics)
    phases = {name: 0.0 for name in PHASES}
    for m in metrics:
        split = m.phases or {"other": _total(m)}
        for name, seconds in split.items():
            phases[name] = phases.get(name, 0.0) + seconds
        phases["other"] += max(_total(m) - sum(split.values()), 0.0)
    caches_seen = _summed([m.caches for m in metrics])
    recompile_of = {rc.compile_id: rc for rc in report.recompiles}
    cause_of = {r: c.id for c in report.recompile_causes for r in c.recompiles}
    rows = []
    for m in sorted(metrics, key=_total, reverse=True):
        rc = recompile_of.get(m.compile_id)
        paths = m.module_paths or (rc.module_paths if rc is not None else [])
        rows.append(
            rm.CostRow(
                key=m.compile_id,
                label=f"{m.function or '?'}" + (f" in {paths[-1] or '(root)'}" if paths else ""),
                seconds=round(_total(m), 4),
                share=round(_total(m) / total, 4),
                cause=cause_of.get(rc.id) if rc is not None else None,
            )
        )
    causes = sorted(
        (
            rm.CostRow(key=c.id, label=c.summary, seconds=c.compile_time_s or 0.0, share=round((c.compile_time_s or 0.0) / total, 4))
            for c in report.recompile_causes
        ),
        key=lambda r: r.seconds,
        reverse=True,
    )
    return rm.CompileProfile(
        total_s=round(total, 4),
        phases={k: round(v, 4) for k, v in phases.items() if v >= 0.0005},
        backward_s=round(sum(m.backward_s or 0.0 for m in metrics), 4),
        graph_passes_s=round(sum(m.graph_passes_s or 0.0 for m in metrics), 4) or None,
        compiles=rows,
        causes=causes,
        caches=caches_seen,
        modules=module_costs(report, total),
        backend=report.environment.backend if report.environment else None,
        first_compile_s=round(sum(_total(m) for m in metrics if m.compile_id not in recompile_of), 4),
    )


# --- recompile-limit cliffs ------------------------------------------------------------------
# Recompile-limit cliffs: a frame that compiled `recompile_limit` versions and then stopped compiling.
#
# From the compile that hit the limit on, Dynamo runs the frame from its cache only: a call that matches
# one of the compiled versions runs it, any other call runs the frame eagerly, with no error and no log
# line past the first warning. A counter read from a module attribute (`self.step`) matches none, so every
# later call runs eagerly and the compiled speed-up is gone. Each cliff says from which call, how many
# calls followed and, when the benchmark measured both, what they cost against compiled calls. Torch-free.

_LIMIT = re.compile(r"recompile.?limit|cache_size_limit|cache size limit", re.I)


def hit_the_limit(metric: rm.CompileMetric) -> bool:
    """The compile failed because its frame had used up its recompile limit."""
    return bool(_LIMIT.search(metric.fail_reason or "") or _LIMIT.search(metric.fail_type or ""))


def _attempt(compile_id: str) -> int | None:
    """`0/8` -> 8: the frame's compiled versions before this compile (its cache entries)."""
    m = re.search(r"/(\d+)$", compile_id)
    return int(m.group(1)) if m else None


def _per_call_ms(arm: rm.BenchmarkArm | None, calls: int) -> float | None:
    if arm is None or arm.latency_ms is None or not calls:
        return None
    return arm.latency_ms.median / calls


def _cost(report: rm.Report, eager_calls: int | None, limit: int | None) -> str:
    """The later calls' cost, from the benchmark's eager arm and its best compiled arm that did not hit the
    limit itself; else why it is not measured."""
    b = report.benchmark
    if b is None and report.target.kind == "script":
        return "not measured: the script's calls are not timed against compiled runs of the same frame (`run --compare` times whole runs)"
    if b is None:
        return "not measured: `ctc-doctor bench` times the eager calls against compiled ones"
    calls = report.target.calls
    arms = {a.name: a for a in b.arms}
    eager = _per_call_ms(arms.get("eager"), calls)
    steady = [
        a
        for a in b.arms
        if a.name != "eager" and a.numerics_ok is not False and a.latency_ms is not None and (a.recompile_count or 0) < (limit or 1 << 30)
    ]
    best = min(steady, key=lambda a: a.latency_ms.median if a.latency_ms else float("inf"), default=None)
    compiled = _per_call_ms(best, calls)
    if eager is None or compiled is None or best is None:
        return "not measured: every compiled arm of the benchmark hit the limit too"
    extra = (eager - compiled) * (eager_calls or 0)
    return (
        f"each ran eagerly at {eager:.3g} ms against {compiled:.3g} ms compiled ({best.name}, its cause fixed): "
        f"{extra:+.3g} ms over the {eager_calls} call(s)"
    )


def recompile_cliffs(report: rm.Report) -> list[rm.RecompileCliff]:
    """One cliff per compile that hit the limit, with the call it happened in and what followed."""
    cause_of = {r: c.id for c in report.recompile_causes for r in c.recompiles}
    recompile_of = {rc.compile_id: rc for rc in report.recompiles}
    out = []
    for m in report.compile_metrics:
        if not hit_the_limit(m):
            continue
        rc = recompile_of.get(m.compile_id)
        call = m.call_index if m.call_index is not None else (rc.call_index if rc is not None else None)
        later = report.target.calls - call if call is not None and report.target.kind in ("build", "script") else None
        limit = _attempt(m.compile_id)
        function = m.function or (rc.function if rc is not None and rc.function != "?" else None)
        previous = next((p for p in report.compile_metrics if p.compile_id.rpartition("/")[0] == m.compile_id.rpartition("/")[0]), None)
        frame = next((f for f in report.frame_calls if f.frame == m.compile_id.rpartition("/")[0]), None)
        ran = sum(1 for c, _, eager in frame.by_call if eager and (call is None or c >= call)) if frame is not None else None
        out.append(
            rm.RecompileCliff(
                function=function or (previous.function if previous is not None and previous.function else "?"),
                file=m.file or (previous.file if previous is not None else None),
                line=m.line or (previous.line if previous is not None else None),
                compile_id=m.compile_id,
                limit=limit,
                from_call=call,
                eager_calls=later,
                cause=cause_of.get(rc.id) if rc is not None else None,
                cost=_cost(report, later, limit),
                ran_eagerly=ran,
            )
        )
    return out
