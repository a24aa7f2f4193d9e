"""The benchmark's arms in a child process, so that a crash in one (a segfault in a compiler, an abort,
a CUDA error that kills the process) costs that arm, not the run.

The parent (this module) lets go of its own model first (when the caller handed it over: `ctx.release`),
then starts `python -m ctc_doctor.analyzer.workers.bench SETUP.json`: the child rebuilds the workload from
the TARGET as the parent built it (seed, device; the rebuilt model is the pristine one the arms copy),
reads the report so far, the bench options and the fix phase's numerics reference (shared through an
inherited descriptor), and answers with the arms it will measure. The parent then asks for one arm at
a time, eager first, and each answer is that arm's row (and, for eager, the numerics settings). When the
child dies mid-arm, the arm becomes a `crash` row (its signal or exit status, the tail of its stderr)
and a new child is started for the arms after it; without a shared reference, the new child re-runs
the eager arm and the numerics reference first (they judge every other arm), which
`BenchIsolation.replay_s` counts.

In-process instead (`phase._run_in_process`), said in `Benchmark.isolation`: with isolation off, a
target a child cannot rebuild (the Python API's workload objects), or a child that cannot start.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Literal

from ....progress import ProgressEvent, Step
from ....reports import models as rm
from ...running.worker import ChildWorker, Death, rebuild_setup
from ..context import PhaseContext
from .arms import OPT_IN
from .loop import Measured, measure_arms
from .options import BenchOptions

_STARTUP_S = 300.0
"""A child imports torch, rebuilds the workload, copies the model and runs one eager call first."""
WORKER_MODULE = "ctc_doctor.analyzer.workers.bench"


Where = Literal["child", "here", "rebuild here"]
"""Where the arms ran: in the child; in this process; in this process on a workload built again (this
process had let go of its model for a child that could not start)."""


def run_isolated(ctx: PhaseContext, bench: BenchOptions, result: rm.Benchmark) -> Where:
    """Measure the arms in a child process into `result`; "here" or "rebuild here" (with
    `result.isolation` saying why) when they must run in this process instead."""
    target = bench.target or ctx.spec
    setup = rebuild_setup(target, ctx.settings) if bench.isolate else None
    if setup is None:
        why = (
            f"the target {target!r} is not importable: no child process can rebuild it"
            if bench.isolate
            else "isolation is off (--no-isolate-arms; the Python API's default)"
        )
        result.isolation = rm.BenchIsolation(isolated=False, reason=f"in this process: {why}")
        if bench.isolate:
            result.settings["isolation"] = "in-process"
            result.notes.append(f"every arm ran in this process ({why}): a crash in one ends the run.")
        if bench.arm_memory_mb:
            result.notes.append(f"--arm-memory-limit {bench.arm_memory_mb} caps the arms' child process: not applied in this process.")
        return "here"
    assert ctx.report is not None
    with tempfile.TemporaryDirectory(prefix="ctc-bench-") as workdir:
        report_file = os.path.join(workdir, "report.json")
        with open(report_file, "w", encoding="utf-8") as fh:
            fh.write(ctx.report.model_dump_json())
        setup.update(bench=dataclasses.asdict(bench), report_file=report_file)
        if ctx.room is not None:  # the child's own reference (training steps) fits beside the model as the parent's does
            setup["room"] = dataclasses.asdict(ctx.room)
        if ctx.fixed_compile is not None:  # the fix phase's cache, on disk: the child's compiled_fixed compiles from it
            setup["fixed_compile"] = dataclasses.asdict(ctx.fixed_compile)
        fds: tuple[int, ...] = ()
        steps = ctx.settings.train and ctx.workload.optimizer is not None
        if ctx.reference is not None and not steps:  # the fix phase's reference judges the child's arms too
            fd, setup["reference"] = ctx.reference.share()
            setup["reference_fd"], fds = fd, (fd,)
        child = ChildWorker(WORKER_MODULE, setup, startup_s=_STARTUP_S, prefix="ctc-bench-", workdir=workdir, pass_fds=fds)
        try:
            # this process lets go of its model first: the child rebuilds it, and the two never hold it at once
            released = ctx.release() if ctx.release is not None else 0
            ctx.progress(ProgressEvent(Step.BENCH, activity="starting the child process that runs the arms"))
            ready, problem = child.wait_ready(None)
            if ready is None:
                why = f"the child process could not start ({problem})"
                result.isolation = rm.BenchIsolation(isolated=False, reason=f"in this process: {why}", child_processes=child.starts)
                result.notes.append(f"every arm ran in this process: {why}" + ("; the model was rebuilt here." if released else "."))
                result.settings["isolation"] = "in-process"
                return "rebuild here" if released else "here"
            isolation = result.isolation = rm.BenchIsolation(
                isolated=True,
                reason="a child process (python -m ctc_doctor.analyzer.workers.bench) runs every arm, eager first: a crash costs that arm",
            )
            result.settings["isolation"] = "child process"
            result.notes.extend(ready.get("notes", []))
            if ready.get("opt_in"):
                result.settings[OPT_IN] = ready["opt_in"]
            _measure(ctx, child, ready["arms"], result, isolation)
            isolation.child_processes = child.starts
            isolation.startup_s = round(child.startup_total_s, 3)
            isolation.first_start_s = round(child.first_start_s, 3)
        finally:
            child.shutdown()
    return "child"


def _measure(ctx: PhaseContext, child: ChildWorker, plan: list[dict[str, Any]], result: rm.Benchmark, isolation: rm.BenchIsolation) -> None:
    """Ask the child for each planned arm in order (the one arm loop, the child its executor); a death is
    that arm's `crash` row and a new child."""

    def progress(fields: Any) -> None:
        event = ProgressEvent.of(fields) if isinstance(fields, dict) else None
        if event is not None:
            ctx.progress(event)

    def measure(i: int) -> Measured | str:
        arm = plan[i]
        ready, problem = child.wait_ready(None)
        if ready is None:  # the child after a crash could not start: the rest cannot be measured
            return f"not run: after a crash, {problem}"
        answer = child.request({"arm": arm["name"]}, None, progress)
        if isinstance(answer, Death):
            isolation.crashed.append(arm["name"])
            return Measured(crash_row(arm, answer, "the child process running this arm"))
        if answer is None or "arm" not in answer:
            return Measured(rm.BenchmarkArm(**arm, error=f"the child process answered no result: {answer}"[:500]))
        isolation.replay_s = round(isolation.replay_s + float(answer.get("replay_s", 0.0)), 3)
        return Measured(rm.BenchmarkArm.model_validate(answer["arm"]), answer.get("settings", {}))

    measure_arms(ctx.budget_s, [rm.BenchmarkArm(**arm) for arm in plan], measure, result)


def crash_row(arm: dict[str, Any], death: Death, who: str) -> rm.BenchmarkArm:
    """The row of an arm whose process (`who`: the arms' child, or a supervised run's stage) died while
    running it."""
    last = f"; last stderr line: {death.stderr_tail[-1][:300]}" if death.stderr_tail else ""
    return rm.BenchmarkArm(
        **arm,
        error=f"crashed ({death.how}): {who} died{last}"[:500],
        crash=death.how,
        stderr_tail=[line[:300] for line in death.stderr_tail],
    )
