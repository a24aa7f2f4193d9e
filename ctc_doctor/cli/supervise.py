"""Crash isolation for the benchmark's arms by restart, with one torch in memory at a time.

The command's own process (this module: no torch) starts the run as a child stage, `python -m ctc_doctor`
with the same arguments and `CTC_DOCTOR_STAGE` naming a folder. The stage runs the whole analysis and then
the arms in its own process, writing a checkpoint before each arm (the report so far, the arms measured,
the arm it starts: `analyzer.phases.bench.staged`). When the stage dies of a signal during an arm (a
segfault in a compiler, an abort), this process writes what it knows of the death (the signal, the arm's
last lines of stderr) and starts the stage again with `CTC_DOCTOR_RESUME`: it builds the model again and
goes on from the arm after the crash, and its report is the run's. So a crash costs that arm, as with a
child process for the arms, but no second Python with torch and a second model is alive beside the
analysing one (on a 2-core CPU that child's imports were a third of the doctor's peak on a 45M GPT-2).

The stage keeps the terminal's streams: its stdin, stdout and stderr are this process's, and its exit
status is the command's. It runs in a process group of its own, so SIGINT (Ctrl-C at the terminal),
SIGTERM and SIGHUP reach this process, which passes the first on (a hang-up as SIGTERM; the stage writes
its partial report) and starts no stage after it. The stage dies with this process (`PR_SET_PDEATHSIG`,
so Linux only). A death of the stage outside an arm ends the command with 128 + the signal.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..processes import (
    ARM_LOG,
    ARMS_FILE,
    CRASH_FILE,
    RESUME,
    STAGE,
    STARTED,
    read_json,
    remove_spilled,
    signal_name,
    stderr_tail,
    write_json,
)

ENTRY: list[str] | None = None
"""The command's arguments when it runs as a program (`cli.main`); None under click's test runner, which
must not start processes from the test process's own argv."""

_IMPORTABLE = re.compile(r"^[\w.\-/\\]+(:[\w.]+)?$")


def wanted(spec: str, *, bench: bool, isolate: bool, tui: bool, arm_memory: bool = False) -> bool:
    """Whether this command runs supervised: it runs the benchmark with isolated arms on a TARGET a new
    process can build again, as a program, on Linux (a stage must die with the command:
    `PR_SET_PDEATHSIG`), and is not itself a stage. `--arm-memory-limit` keeps the arms' child process it
    caps (a cap on the analysing process would count the analysis's own memory against the arms)."""
    return (
        ENTRY is not None
        and bench
        and isolate
        and not tui
        and not arm_memory
        and sys.platform.startswith("linux")
        and STAGE not in os.environ
        and bool(_IMPORTABLE.match(spec))
    )


def run() -> int:
    """Run the command as supervised stages; the exit status the command ends with (128 + N when the stage
    died of signal N outside an arm, as a shell reports it)."""
    assert ENTRY is not None
    folder = tempfile.mkdtemp(prefix="ctc-doctor-run-")
    env = {**os.environ, STAGE: folder, STARTED: repr(time.time())}
    argv = [sys.executable, "-m", "ctc_doctor", *ENTRY]
    fds = _inheritable_fds()
    stage: subprocess.Popen[bytes] | None = None
    stopping: list[int] = []

    def pass_on(signum: int, _frame: Any) -> None:
        # once: the stage writes its partial report (a second signal would end it as it does so), and a run
        # asked to stop is not started again; a hang-up stops it as SIGTERM does
        if stopping:
            return
        stopping.append(signum)
        if stage is not None and stage.poll() is None:
            stage.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, pass_on)
    code = 0
    try:
        crashed: list[str] = []
        while not stopping:
            # its own process group: a Ctrl-C at the terminal reaches this process only, and is passed on
            # once (a second SIGINT would end the stage while it writes its partial report)
            stage = subprocess.Popen(argv, env=env, pass_fds=fds, preexec_fn=os.setpgrp)
            code = stage.wait()
            running = _running_arm(folder)
            # a death in an arm (a signal, or an exit that skipped Python's clean-up) costs that arm; the
            # same arm again, or a run asked to stop, ends here
            if code == 0 or running is None or running in crashed or stopping:
                break
            crashed.append(running)
            _record_crash(folder, running, code)
            env = {**env, RESUME: "1"}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        remove_spilled(os.path.basename(folder))  # a stage that died left its model copy on disk
    return 128 - code if code < 0 else code


def _inheritable_fds() -> tuple[int, ...]:
    """Descriptors beyond stdio the command was given and may name (`--progress-fd N`)."""
    fds = []
    args = ENTRY or []
    for i, arg in enumerate(args):
        value = (
            arg.split("=", 1)[1]
            if arg.startswith("--progress-fd=")
            else (args[i + 1] if arg == "--progress-fd" and i + 1 < len(args) else None)
        )
        if value is not None and value.isdigit():
            fds.append(int(value))
    return tuple(fds)


def _running_arm(folder: str) -> str | None:
    """The arm the stage had started when it died (None: it was not in an arm)."""
    try:
        return read_json(os.path.join(folder, ARMS_FILE)).get("running")
    except (OSError, ValueError):
        return None


def _record_crash(folder: str, arm: str, code: int) -> None:
    """The death of the stage in `arm` (`code`: minus its signal, or its exit status) and the arm's last
    lines of stderr, for its row."""
    tail: list[str] = []
    with contextlib.suppress(OSError):
        with open(os.path.join(folder, ARM_LOG), encoding="utf-8", errors="replace") as fh:
            tail = stderr_tail(fh.read())
    path = os.path.join(folder, CRASH_FILE)
    crashes: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        crashes = read_json(path)
    name = signal_name(-code) if code < 0 else f"exit status {code}"
    write_json(path, [*crashes, {"arm": arm, "signal": name, "stderr_tail": tail}])
