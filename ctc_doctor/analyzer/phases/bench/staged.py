"""The arms of a supervised run (`cli.supervise`): in the analysing process, a checkpoint before each arm,
and what a stage started again after a crash reads back.

Before the first arm the stage writes `run.json`: the report so far (the phases before the benchmark),
and the cost account's phases. Before each arm it writes `arms.json`: the arm it starts (`running`) and
the benchmark as measured so far. The arm's stderr, Python and C level, goes to `arm.log` meanwhile
(its tail is the crash row's), then on to where it went before. When the stage dies of a signal in an
arm, the supervisor adds the death to `crash.json` and starts the stage again: it reads all three
(`Resumed`), builds the model again and measures the arms after the crashed one.

File names are `processes`'s, which the supervising command (no torch) shares.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ....processes import ARM_LOG, ARMS_FILE, CRASH_FILE, RUN_FILE, read_json, write_json
from ....reports import models as rm
from ...running.worker import Death
from .child import crash_row


@dataclass
class Resumed:
    """What a stage started again after a crash goes on from."""

    report: rm.Report
    """The report before the benchmark."""
    benchmark: rm.Benchmark
    """The arms measured before the crash, then a `crash` row for each arm the stage died in."""
    phases: list[rm.PhaseCost] = field(default_factory=list)
    """The cost account's phases before the crash (the stages' own, in order)."""
    footprint: rm.Footprint | None = None


class Checkpoint:
    """The stage's side of the supervised benchmark: what it writes before the arms and before each one."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def start(self, report: rm.Report, phases: list[rm.PhaseCost], footprint: rm.Footprint | None) -> None:
        """Before the first arm: the report so far and the cost account's phases (a stage that goes on after
        a crash keeps the file its first stage wrote)."""
        if os.path.exists(self.path(RUN_FILE)):
            return
        write_json(
            self.path(RUN_FILE),
            {
                "report": report.model_dump(mode="json"),
                "phases": [p.model_dump(mode="json") for p in phases],
                "footprint": footprint.model_dump(mode="json") if footprint is not None else None,
            },
        )

    def arm(self, name: str | None, result: rm.Benchmark) -> None:
        """`name` starts (None: none runs), after the arms in `result`."""
        write_json(self.path(ARMS_FILE), {"running": name, "benchmark": result.model_dump(mode="json")})

    @contextlib.contextmanager
    def stderr(self) -> Iterator[None]:
        """The block's stderr, Python and C level, in `arm.log` (its tail is the arm's crash row if the
        process dies), then written on to the stderr it replaced."""
        before = sys.stderr
        with contextlib.suppress(ValueError, OSError):
            before.flush()
        text = ""
        with open(self.path(ARM_LOG), "w+", encoding="utf-8", errors="replace", buffering=1) as log:
            saved = os.dup(2)
            try:
                os.dup2(log.fileno(), 2)
                sys.stderr = log
                yield
            finally:
                sys.stderr = before
                with contextlib.suppress(ValueError, OSError):
                    log.flush()
                os.dup2(saved, 2)
                os.close(saved)
                with contextlib.suppress(ValueError, OSError):
                    log.seek(0)
                    text = log.read()
        if text:
            with contextlib.suppress(ValueError, OSError):
                before.write(text)


def load(folder: str) -> Resumed:
    """What the stages before this one left: the report before the benchmark, the arms measured and a
    `crash` row for each arm a stage died in (its signal, the arm's last lines of stderr)."""
    run = read_json(os.path.join(folder, RUN_FILE))
    arms = read_json(os.path.join(folder, ARMS_FILE))
    crashes: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        crashes = read_json(os.path.join(folder, CRASH_FILE))
    benchmark = rm.Benchmark.model_validate(arms["benchmark"])
    done = {a.name for a in benchmark.arms}
    for crash in crashes:
        if crash["arm"] in done:
            continue
        done.add(crash["arm"])
        death = Death(signal=crash["signal"], stderr_tail=crash.get("stderr_tail", []))
        benchmark.arms.append(crash_row({"name": crash["arm"]}, death, "the process running this arm"))
    footprint = rm.Footprint.model_validate(run["footprint"]) if run.get("footprint") else None
    return Resumed(
        report=rm.Report.model_validate(run["report"]),
        benchmark=benchmark,
        phases=[rm.PhaseCost.model_validate(p) for p in run.get("phases", [])],
        footprint=footprint,
    )
