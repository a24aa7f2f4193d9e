"""The child process of `ctc-doctor run`: `python -m ctc_doctor.analyzer.doors.script_runner CONFIG.json SCRIPT
[ARGS...]` (or `-m MODULE [ARGS...]`), one per rank under torchrun.

It runs the script as `python SCRIPT ARGS` would (its argv, `__main__`, `sys.path[0]`, its exit code)
under the live capture, with `torch.compile` watched (`capture.compiles`): nothing of the script
changes but that its compiled objects are recorded. When the script ends (or `--max-steps` or a
signal ends it), it writes this rank's report to OUT/rank{N}.json: the findings of the script's own
compiled calls; module paths, first_call_only and bisection inputs from one eager call of the
analyzed module on its first recorded inputs; and, on the first rank, suggestions, bisection and
fixes verified on copies of the module as it was when compiled. Then it exits as the script did.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ...errors import ExitCode
from ...processes import freeze_heap


@dataclass
class Outcome:
    """How the script ended."""

    exit_code: int
    error: str | None = None
    stopped: str | None = None
    """max_steps, interrupted, terminated (None: it ran to its end)."""
    traced: list[tuple[str, int, str]] | None = None
    """When the error escaped a compile: the frames Dynamo was tracing, outermost first."""


_KEPT: list[object] = []
"""The script's globals (or the exception that ended it, whose frames hold them), alive until this
process exits, as `python script.py` keeps `__main__`'s: `runpy` hands back a copy that would otherwise
be freed at once, running destructors mid-process that a plain run never runs there (DDP's reducer
over a compiled module then hung on gloo, one run in two)."""


def _run_script(command: list[str]) -> Outcome:
    """Run the command as `python COMMAND` would, in this process."""
    from ..capture.compiles import StopScript
    from ..readers.text import describe_error

    try:
        if command[0] == "-m":
            sys.argv = [command[1], *command[2:]]
            _KEPT.append(runpy.run_module(command[1], run_name="__main__", alter_sys=True))
        else:
            path = os.path.abspath(command[0])
            sys.argv = list(command)
            sys.path[0] = os.path.dirname(path)  # as `python script.py` sets it
            _KEPT.append(runpy.run_path(path, run_name="__main__"))
    except SystemExit as exc:
        _KEPT.append(exc)
        code = exc.code
        if code is None:
            return Outcome(0)
        if isinstance(code, int):
            return Outcome(code, None if code == 0 else f"SystemExit: {code}")
        print(code, file=sys.stderr)
        return Outcome(1, f"SystemExit: {code}")
    except StopScript as exc:
        _KEPT.append(exc)
        reason = str(exc)
        if reason.startswith("--max-steps"):
            return Outcome(0, stopped="max_steps")
        return Outcome(128 + signal.SIGTERM, stopped="terminated")
    except KeyboardInterrupt as exc:
        _KEPT.append(exc)
        return Outcome(130, "KeyboardInterrupt", stopped="interrupted")
    except BaseException as exc:  # noqa: BLE001 - the script's own failure: reported as Python would
        _KEPT.append(exc)
        _print_script_traceback(exc, command)
        from .. import torch_internals as ti

        return Outcome(1, f"{type(exc).__name__}: {describe_error(exc)}"[:500], traced=ti.traced_frames(exc))
    return Outcome(0)


def _print_script_traceback(exc: BaseException, command: list[str]) -> None:
    """The traceback as `python script.py` would print it: from the script's own frames on."""
    tb = exc.__traceback__
    script = os.path.abspath(command[0]) if command[0] != "-m" else None
    while tb is not None and script is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    if tb is None and command[0] == "-m":
        # from the module's own frames on: drop runpy's and ctc-doctor's
        tb = exc.__traceback__
        while tb is not None and _ours(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
    # no frame of the script (an import that failed before it ran): the error alone, as Python prints it
    traceback.print_exception(type(exc), exc, tb)


def _ours(path: str) -> bool:
    return "runpy" in os.path.basename(path) or os.path.dirname(os.path.abspath(__file__)) in os.path.abspath(path)


def _seeded(seed: int) -> None:
    """`run --compare`: Python's and torch's generators seeded, so that runs of an unseeded script start
    alike (their losses are compared)."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        config = json.load(fh)
    command = argv[2:]
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(config["out_dir"], f"rank{rank}.pid"), "w", encoding="ascii") as fh:
        fh.write(str(os.getpid()))  # torchrun starts each rank in a session of its own: the parent's last resort
    from ...reports.models import started_now

    started_at = started_now()
    t0 = time.perf_counter()

    from ...progress import ProgressEvent, Step, file_writer, no_progress
    from .. import torch_internals as ti
    from ..capture.compiles import CompileRecorder, StopScript
    from ..capture.live import ScriptRun
    from ..services.own_cost import RunCost

    # the first rank's phases, as lines the parent follows (`launch._Progress`); the cost meter follows them
    # from the script's start: the script's own run is the workload's figure
    progress_path = config.get("progress_path") if rank == 0 else None
    cost = RunCost(None, file_writer(progress_path) if progress_path else no_progress, True, config.get("memory_limit_mb"))
    cost.meter.progress(ProgressEvent(Step.SCRIPT))

    def terminate(signum: int, frame: Any) -> None:
        raise StopScript("terminated")

    signal.signal(signal.SIGTERM, terminate)
    deadline = config.get("deadline")
    if deadline and hasattr(signal, "setitimer"):
        # a script that handles SIGTERM itself (a trainer that checkpoints on preemption) would outlive
        # --timeout until the parent's SIGKILL: stop it here too, just after the parent's SIGTERM
        signal.signal(signal.SIGALRM, terminate)
        signal.setitimer(signal.ITIMER_REAL, max(0.1, float(deadline) - time.time() + 2.0))
    with ti.capture(
        backend="eager", keep_guard_text=config.get("keep_guard_text", False), quiet=True, quiet_only=ti.COMPILER_LOGGERS, keep_caches=True
    ) as cap:
        run = ScriptRun(cap)
        recorder = CompileRecorder(
            backend=config.get("backend"),
            max_steps=config.get("max_steps"),
            snapshot=bool(config.get("fix")) and rank == 0,
            on_primary_call=lambda index: run.call_marks.append(len(cap.events)),
            strategy=config.get("strategy"),
            marks=config.get("marks"),
            target_rank=config.get("target_rank"),
            losses=bool(config.get("compare")),
        )
        if config.get("compare"):
            _seeded(0)  # every strategy's run starts from the same random state (the script's own seed wins)
        freeze_heap()
        # the primary object's calls count the frames they enter; not under --compare, whose rows are timed
        with ti.counting_frames() if not config.get("compare") else contextlib.nullcontext() as frames:
            recorder.frames = frames
            with recorder.installed():
                outcome = _run_script(command)
            if frames is not None:
                frames.end()
                run.served = ti.served_entries(frames)
            recorder.frames = None
        if deadline and hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)  # the report has its own budget
    try:
        from .script_report import rank_report

        report = rank_report(
            run,
            recorder,
            outcome,
            config,
            rank=rank,
            command=command,
            started_at=started_at,
            t0=t0,
            budget_s=_budget(config, outcome),
            plan_s=_plan(config),
            cost=cost,
        )
        _write(os.path.join(config["out_dir"], f"rank{rank}.json"), report)
    except Exception as exc:  # noqa: BLE001 - the script's exit code stands; the parent falls back to the trace
        print(
            f"ctc-doctor: error: the report of rank {rank} could not be written: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return outcome.exit_code or int(ExitCode.INTERNAL_ERROR)
    return outcome.exit_code


def _budget(config: dict[str, Any], outcome: Outcome) -> float | None:
    """Seconds left for the analysis after the script: until --timeout (a little before it, to write
    the report), or a third of the grace period when a signal stopped the script."""
    if outcome.stopped in ("terminated", "interrupted"):
        return max(1.0, float(config.get("grace_s") or 30.0) / 3)
    deadline = config.get("deadline")
    if deadline is None:
        return None
    return max(0.0, float(deadline) - time.time() - 2.0)


def _plan(config: dict[str, Any]) -> float | None:
    """`--budget`: the seconds it leaves the analysis after the script (None: no budget)."""
    end = config.get("budget_end")
    return max(0.0, float(end) - time.time()) if end is not None else None


def _write(path: str, report: Any) -> None:
    from ...reports.io import dump_report

    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(dump_report(report))
    os.replace(tmp, path)  # the parent reads only whole reports


if __name__ == "__main__":
    sys.exit(main(sys.argv))
