"""`ctc-doctor run -- SCRIPT ARGS`: an unmodified script under the doctor, in one process or N ranks.

This is the parent side, and it imports no torch. It starts the script through
`python -m ctc_doctor.analyzer.doors.script_runner` (or through `torch.distributed.run` with `--nproc N`,
the real launcher, one runner per rank), with TORCH_TRACE pointed at a private directory. The
script's stdin, stdout and stderr are the terminal's; it runs in its own process group, so that
`--timeout` and Ctrl-C reach every rank: a SIGTERM (or SIGINT) first, so each rank can write what it
found, then a SIGKILL after a grace period (`processes.signal_group`). Each rank writes its report;
several are merged (`reports.ranks.merge_ranks`: ranks, divergence and its root cause). When no rank
wrote one, the report is read from the traces (`offline.ingest`), or, with no trace either, an empty
one is assembled (`reports.models.assemble_report`).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal

from ...errors import LogsInvalid, TargetInvalid, TargetNotFound
from ...processes import signal_group, signal_name
from ...progress import ProgressEvent, ProgressFn, Step, no_progress

if TYPE_CHECKING:
    from ...reports import models as rm

Status = Literal["finished", "failed", "timeout", "interrupted"]
_PYTHONS = ("python", "python3", os.path.basename(sys.executable))


@dataclass(frozen=True)
class RunOptions:
    """How `ctc-doctor run` runs the script. Defaults are the CLI's."""

    nproc: int = 1
    """Ranks, through torch.distributed.run (1: the script runs as one plain process)."""
    backend: str | None = None
    """Replace the backend of every torch.compile call of the script (None: the script's own)."""
    max_steps: int | None = None
    """Stop the script at the start of the analyzed object's call N+1."""
    timeout_s: float | None = None
    """Stop the script (every rank) after this long; the partial report is still written."""
    bisect: bool = True
    """Bisect the analyzed module on its recorded inputs when the script broke the graph."""
    fix: bool = True
    """Verify the auto-applicable suggestions on copies of the analyzed module."""
    keep_guard_text: bool = False
    strategy: str | None = None
    """`run --compare`: how every torch.compile of the script is replaced (`eager`, a mode...; None: as written)."""
    compare: bool = False
    """`run --compare`: seed the script's generators at start, keep the losses its compiled calls return."""
    marks: dict[str, list[int]] | None = None
    """`mark-dynamic`: the analyzed object's arguments and dims to mark dynamic before each call."""
    target_rank: int | None = None
    """`hotswap`: the LoRA rank to prepare for (the largest the script's own run loaded)."""
    accuracy_of: str | None = None
    """`run --compare`: the departed loss of the strategy run again (its text): the run looks for where
    the script's compiled module goes wrong under that strategy (the accuracy bisection), and nothing else."""
    trial_timeout_s: float | None = 60.0
    budget_s: float | None = None
    """`--budget`: plan the run (the script's own run counted) to fit in about this long."""
    memory_limit_mb: int | None = None
    """`--memory-limit`: what the doctor may hold beyond what the script's model and activations hold."""
    grace_s: float = 30.0
    """After a stop signal, how long the ranks have to write their reports before they are killed."""
    repro_dir: str | None = None
    """Where the repro and issue text of a crash inside PyTorch go (None: in the report only)."""


@dataclass
class RunResult:
    report: rm.Report
    status: Status
    exit_code: int
    """The script's (the first failing rank's), or the signal's."""
    notes: list[str] = field(default_factory=list)


def script_command(argv: list[str]) -> list[str]:
    """What to pass to Python: `train.py ARGS` or `-m pkg.mod ARGS` (a leading `python` is dropped).

    Raises TargetNotFound (exit 3, one line with a hint) for no script, a missing file, `-m` without
    a module, or a Python option such as `-c` in the script's place.
    """
    command = list(argv)
    if command and (command[0] in _PYTHONS or os.path.realpath(command[0]) == os.path.realpath(sys.executable)):
        command = command[1:]
    if not command:
        raise TargetNotFound("no script to run", hint="ctc-doctor run -- train.py ARGS, or run -- -m pkg.module ARGS")
    if command[0] == "-m":
        if len(command) < 2:
            raise TargetNotFound("-m needs a module name", hint="ctc-doctor run -- -m pkg.module ARGS")
        top = command[1].split(".")[0]
        # the top-level package only: finding it imports nothing (a submodule's parents would run)
        local = os.path.exists(os.path.join(os.getcwd(), top)) or os.path.exists(os.path.join(os.getcwd(), top + ".py"))
        if not local and importlib.util.find_spec(top) is None:
            raise TargetNotFound(f"no module named {top!r}", hint="run from the directory that holds it, or install it")
        return command
    if command[0].startswith("-"):
        raise TargetNotFound(f"python option {command[0]!r} is not supported", hint="give the script or -m MODULE first")
    if not os.path.isfile(command[0]):
        raise TargetNotFound(f"no such script: {command[0]}")
    try:
        with open(command[0], "rb") as fh:
            compile(fh.read(), command[0], "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TargetInvalid(f"{command[0]}:{exc.lineno}: {exc.msg}", hint="the script does not compile as Python") from None
    except (OSError, ValueError) as exc:
        raise TargetInvalid(f"{command[0]}: cannot be read as Python: {exc}") from None
    return command


def _say(text: str) -> None:
    print(f"ctc-doctor: {text}", file=sys.stderr, flush=True)


def run_script(
    command: list[str],
    options: RunOptions,
    *,
    say: Callable[[str], None] = _say,
    progress: ProgressFn | None = None,
    stdout: int | IO[Any] | None = None,
) -> RunResult:
    """Run the script as asked and return its report (written even when the script fails or is stopped).

    `say` gets ctc-doctor's own lines; `progress` the phases (`script`, then the first rank's
    `report`, `bisect PATH`, `fix S1`...); `stdout` replaces the script's stdout (`--json -`
    keeps stdout for the report).
    """
    out = tempfile.mkdtemp(prefix="ctc-run-")
    try:
        return _run(command, options, out, say, progress or no_progress, stdout)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _run(
    command: list[str],
    options: RunOptions,
    out: str,
    say: Callable[[str], None],
    progress: ProgressFn,
    stdout: int | IO[Any] | None,
) -> RunResult:
    config = {
        "out_dir": out,
        "backend": options.backend,
        "max_steps": options.max_steps,
        "bisect": options.bisect,
        "fix": options.fix,
        "keep_guard_text": options.keep_guard_text,
        "strategy": options.strategy,
        "compare": options.compare,
        "marks": options.marks,
        "target_rank": options.target_rank,
        "accuracy_of": options.accuracy_of,
        "trial_timeout_s": options.trial_timeout_s,
        "budget_end": time.time() + options.budget_s if options.budget_s else None,
        "memory_limit_mb": options.memory_limit_mb,
        "progress_path": os.path.join(out, "progress.jsonl"),
        "deadline": time.time() + options.timeout_s if options.timeout_s else None,
        "grace_s": options.grace_s,
        "repro_dir": options.repro_dir,
    }
    config_path = os.path.join(out, "config.json")
    with open(config_path, "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    trace_dir = os.path.join(out, "trace")
    env = {**os.environ, "TORCH_TRACE": trace_dir}
    notes = []
    if os.environ.get("TORCH_TRACE"):
        notes.append(f"TORCH_TRACE={os.environ['TORCH_TRACE']} was replaced by ctc-doctor's own directory for this run.")
    runner = [sys.executable, "-m", "ctc_doctor.analyzer.doors.script_runner", config_path, *command]
    if options.nproc > 1:
        runner = [
            sys.executable, "-m", "ctc_doctor.analyzer.doors.torchrun", "--standalone", f"--nproc-per-node={options.nproc}",
            "--log-dir", os.path.join(out, "torchelastic"),  # not a /tmp/torchelastic_* left behind
            "-m", "ctc_doctor.analyzer.doors.script_runner", config_path, *command,
        ]  # fmt: skip
    shown = shlex.join(command)
    say(f"running {shown} under capture" + (f" on {options.nproc} ranks" if options.nproc > 1 else "") + "; its output follows")
    t0 = time.perf_counter()
    progress(ProgressEvent(Step.SCRIPT))
    proc = subprocess.Popen(runner, env=env, stdout=stdout, start_new_session=True)
    status, code = _wait(proc, options, say, _Progress(str(config["progress_path"]), progress))
    if status in ("timeout", "interrupted"):
        _kill_ranks(out)
    say(f"the script {_ended(status, code)} after {time.perf_counter() - t0:.1f} s")

    from ...errors import ReportError
    from ...reports import models as rm  # here, not at the top: pydantic loads while the script runs
    from ...reports.io import load_report
    from ...reports.ranks import merge_ranks
    from ..readers.assembly import derive

    reports = {}
    for path in sorted(glob.glob(os.path.join(out, "rank*.json"))):
        rank = int(os.path.basename(path)[4:-5])
        try:
            reports[rank] = load_report(path)
        except ReportError as exc:  # a rank that wrote half a report: the others (or the trace) still stand
            notes.append(f"rank {rank}'s report could not be read ({exc.one_line().replace(path, f'rank{rank}.json')}).")
    missing = [r for r in range(options.nproc) if r not in reports]
    if not reports:
        report = _from_trace(trace_dir, command, notes)
    elif len(reports) == 1 and options.nproc == 1:
        report = reports[0]
    else:
        report = merge_ranks(reports)
        derive(report)  # recompiles of every rank, each rank's causes apart
    if missing and reports:
        notes.append(f"rank(s) {', '.join(map(str, missing))} wrote no report (killed, or failed before): not in this one.")
    report.notes[:0] = notes
    report.run.ranks = options.nproc
    if status == "timeout":
        report.run.stopped = "timeout"
        report.errors.append(
            rm.ErrorRecord(
                phase="timeout",
                type="ScriptTimeout",
                message=f"the script ran past --timeout {options.timeout_s:g} s; partial report",
            )
        )
    elif status == "interrupted":
        report.run.stopped = "interrupted"
    if report.run.exit_code in (None, 0) and code != 0 and status != "timeout":
        report.run.exit_code = code
    if code < 0 and status == "failed" and report.run.script_error is None:  # a native crash: no traceback to quote
        report.run.script_error = f"the script's process died ({signal_name(-code)})"
    return RunResult(report, status, code, notes)


def _ended(status: Status, code: int) -> str:
    return {
        "finished": "ended",
        "failed": f"failed (exit code {code})",
        "timeout": "was stopped at --timeout",
        "interrupted": "was interrupted",
    }[status]


class _Progress:
    """Follows the first rank's progress file (JSON lines) and passes each new step on."""

    def __init__(self, path: str, progress: ProgressFn) -> None:
        self.path = path
        self.progress = progress
        self.offset = 0

    def poll(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as fh:
                fh.seek(self.offset)
                lines = fh.readlines()
        except OSError:
            return
        for line in lines:
            if not line.endswith("\n"):
                break  # being written: read it next time
            self.offset += len(line.encode("utf-8"))
            event = ProgressEvent.parse(line)
            if event is not None:
                self.progress(event)


class _Terminated(Exception):
    """SIGTERM reached `ctc-doctor run` (the TUI's cancel, a CI runner): stop the script like Ctrl-C."""


def _wait(proc: subprocess.Popen[bytes], options: RunOptions, say: Callable[[str], None], follow: _Progress) -> tuple[Status, int]:
    """Wait for the script; stop its whole process group at --timeout, Ctrl-C or SIGTERM (TERM/INT, then KILL)."""
    deadline = time.monotonic() + options.timeout_s if options.timeout_s else None

    def terminated(signum: int, frame: Any) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminated) if threading.current_thread() is threading.main_thread() else None
    try:
        while True:
            follow.poll()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                say(f"--timeout {options.timeout_s:g} s: stopping the script (every rank); they write what they found")
                return "timeout", _stop(proc, signal.SIGTERM, options.grace_s, follow)
            try:
                code = proc.wait(timeout=min(0.25, left) if left is not None else 0.25)
                follow.poll()
                return ("finished" if code == 0 else "failed"), code
            except subprocess.TimeoutExpired:
                continue
    except (KeyboardInterrupt, _Terminated) as exc:
        say("interrupted: stopping the script" + ("; press Ctrl-C again to kill it at once" if isinstance(exc, KeyboardInterrupt) else ""))
        try:
            return "interrupted", _stop(
                proc,
                signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM,
                options.grace_s,
                follow,
            )
        except (KeyboardInterrupt, _Terminated):
            signal_group(proc, signal.SIGKILL)
            return "interrupted", proc.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _kill_ranks(out: str) -> None:
    """SIGKILL whatever is left of each rank's session once the script was stopped: torchrun starts
    every rank in a session of its own, so a rank stuck in a collective outlives a kill of torchrun's group
    (torchrun itself would kill it 30 s after its SIGTERM, unless it was killed first)."""
    for name in os.listdir(out) if os.path.isdir(out) else []:
        if name.startswith("rank") and name.endswith(".pid"):
            try:
                with open(os.path.join(out, name), encoding="ascii") as fh:
                    pid = int(fh.read().strip() or 0)
                if pid > 0:
                    os.killpg(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass  # gone already, or never a group leader


def _stop(proc: subprocess.Popen[bytes], sig: int, grace_s: float, follow: _Progress) -> int:
    signal_group(proc, sig)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            return proc.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            follow.poll()
    signal_group(proc, signal.SIGKILL)  # a rank stuck where signals cannot reach (a collective)
    return proc.wait()


def _from_trace(trace_dir: str, command: list[str], notes: list[str]) -> rm.Report:
    """No rank wrote a report: what their traces say (no module paths), or an empty report."""
    from ...reports import models as rm
    from .offline import ingest

    try:
        report = ingest([trace_dir])
        notes.append("No rank wrote its report (killed, or the runner failed): this is what their traces say.")
    except LogsInvalid:
        notes.append("No rank wrote a report and there is no trace: the script compiled nothing before it ended.")
        report = rm.assemble_report(  # nothing found, nothing timed
            target=rm.Target(spec=" ".join(command), name=command[0], model_class="none", parameters=0, modules=0, calls=0),
            environment=rm.unknown_environment(),
            summary=rm.summarize(graph_count=0, failed=False),
        )
    report.target.kind = "script"
    report.target.spec = " ".join(command)
    report.target.command = list(command)
    return report
