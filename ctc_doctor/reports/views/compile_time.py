"""Where compile time went, in the terminal: one line of phases, the recompiles' share by cause, the
costliest compiles, and the levers with what was measured of them (`Report.compile_profile`)."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from ..models import Benchmark, BenchmarkArm, CompileProfile, Report

PHASE_NAMES = {
    "dynamo": "Dynamo",
    "aot_autograd": "AOTAutograd",
    "inductor": "lowering",
    "codegen": "codegen",
    "kernel_compile": "kernel compile",
    "other": "other",
}
PHASE_LABELS = {
    "dynamo": "Dynamo tracing and guards",
    "aot_autograd": "AOTAutograd (joint graph, partitioning)",
    "inductor": "Inductor passes and lowering",
    "codegen": "Inductor code generation",
    "kernel_compile": "C++/Triton kernel compile",
    "other": "other",
}
_INDUCTOR = ("inductor", "codegen", "kernel_compile")


def phases_text(phases: dict[str, float], total: float) -> str:
    """`Dynamo 11 %, AOTAutograd 26 %, Inductor 63 % (codegen 48 %, lowering 15 %)`."""
    if total <= 0:
        return ""

    def pct(seconds: float) -> str:
        return f"{100 * seconds / total:.0f} %"

    shown = {k: v for k, v in phases.items() if v >= 0.005 * total}  # under half a percent: left out
    parts = [f"{PHASE_NAMES[k]} {pct(shown[k])}" for k in ("dynamo", "aot_autograd") if k in shown]
    inductor = {k: shown[k] for k in _INDUCTOR if k in shown}
    if inductor:
        inner = ", ".join(f"{PHASE_NAMES[k]} {pct(v)}" for k, v in sorted(inductor.items(), key=lambda kv: -kv[1]))
        parts.append(f"Inductor {pct(sum(inductor.values()))} ({inner})")
    if shown.get("other", 0.0) >= 0.01 * total:
        parts.append(f"other {pct(phases['other'])}")
    return ", ".join(parts)


def _arm(b: Benchmark | None, *names: str) -> BenchmarkArm | None:
    arms = {a.name: a for a in b.arms} if b is not None else {}
    return next((arms[n] for n in names if n in arms and arms[n].error is None), None)


def levers(report: Report) -> list[str]:
    """What would cut the compile time, costliest first, with what was measured of each."""
    p = report.compile_profile
    assert p is not None
    out = []
    for row in p.causes:
        cause = next((c for c in report.recompile_causes if c.id == row.key), None)
        if cause is not None and not cause.expected and row.seconds >= 0.05 * p.total_s:
            fix = f" ({', '.join(cause.suggestion_ids)})" if cause.suggestion_ids else ""
            out.append(f"fewer recompiles: {row.key}{fix} cost {row.seconds:.2f} s ({100 * row.share:.0f} %)")
    b = report.benchmark
    whole, regional = _arm(b, "compiled_fixed", "compiled"), _arm(b, "regional_fixed", "regional")
    if whole is not None and regional is not None and whole.compile_time_s and regional.compile_time_s:
        out.append(f"regional compilation, measured: cold compile {whole.compile_time_s:.2f} -> {regional.compile_time_s:.2f} s")
    compiled = _arm(b, "compiled")
    if compiled is not None and compiled.compile_time_s and compiled.warm_compile_time_s is not None:
        out.append(
            f"the compile cache, measured: {compiled.compile_time_s:.2f} s cold -> {compiled.warm_compile_time_s:.2f} s warm "
            "(keep TORCHINDUCTOR_CACHE_DIR between runs)"
        )
    return out


def bench_phases(b: Benchmark | None) -> tuple[BenchmarkArm, float, str] | None:
    """The compiled arm, its compile seconds and its backend, when the benchmark split its compile by phase."""
    arm = _arm(b, "compiled")
    if b is None or arm is None or not arm.compile_phases:
        return None
    return arm, sum(arm.compile_phases.values()), str(b.settings.get("backend", "?"))


def modules_text(p: CompileProfile, top: int = 3) -> str | None:
    """`by module (estimate): h.* (12 blocks) 81 %, wte 6 %`; None when one row holds it all or none."""
    rows = [r for r in p.modules[:top] if r.share >= 0.05]
    if not rows or (len(p.modules) == 1 and not p.modules[0].key):
        return None
    return "by module (estimate, by op count): " + ", ".join(f"{r.label} {100 * r.share:.0f} %" for r in rows)


def profile_text(report: Report, width: int = 80) -> Group | None:
    """The compile profile in a few lines (None without one)."""
    p: CompileProfile | None = report.compile_profile
    if p is None or p.total_s <= 0:
        return None
    backward = f": frames {p.total_s - p.backward_s:.2f} s + backward graphs {p.backward_s:.2f} s" if p.backward_s else ""
    lines = [Text(f"by phase: {phases_text(p.phases, p.total_s)}")]
    measured = bench_phases(report.benchmark)
    if measured is not None and measured[2] != p.backend:
        arm, total, backend = measured
        lines.append(Text(f"the benchmark's compiled arm ({backend}, {total:.2f} s): {phases_text(arm.compile_phases, total)}"))
    recompiled = p.total_s - p.first_compile_s
    if recompiled > 0:
        share = 100 * recompiled / p.total_s
        lines.append(Text(f"first compiles {p.first_compile_s:.2f} s, recompiles {recompiled:.2f} s ({share:.0f} %)"))
    by_module = modules_text(p)
    if by_module:
        lines.append(Text(by_module))
    top = [r for r in p.compiles[:3] if r.share >= 0.05]
    if top:
        shown = " · ".join(f"{r.key} {r.label} {r.seconds:.2f} s" + (f" [{r.cause}]" if r.cause else "") for r in top)
        lines.append(Text(f"costliest: {shown}", style="dim"))
    hits = {k: v for k, v in p.caches.items() if any(v)}
    if hits:
        lines.append(Text("caches: " + ", ".join(f"{k} {h} hit(s) / {n} miss(es)" for k, (h, n) in hits.items()), style="dim"))
    for lever in levers(report):
        lines.append(Text(f"lever: {lever}", style="cyan"))
    head = Text(f"Compile time {p.total_s:.2f} s ({p.backend or 'its backend'}{backward})", style="bold")
    return Group(head, *(Padding(line, (0, 0, 0, 2)) for line in lines))
