"""How much CPU other processes took while something was timed (torch-free: `run`'s parent reads it too).

A window's CPU for the whole machine (`/proc/stat`) less what this process (and, when asked, the children
it waited for: a script it ran) spent is what other processes took, in cores (`resources.load` judges it).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

BUSY_CORES = 0.25
"""Other processes' CPU, in cores, from which a window counts as busy (when the cores are short)."""


def cores() -> int:
    """The CPU cores this process may run on."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _machine_busy_s() -> float | None:
    """Seconds of CPU the whole machine spent busy since boot (`/proc/stat`), None where unreadable."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields[:8]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s(children: bool = False) -> float:
    t = os.times()
    return t.user + t.system + ((t.children_user + t.children_system) if children else 0.0)


@dataclass
class CpuWindow:
    """One timed window: what the machine and this process spent in it."""

    machine: float | None
    own: float
    wall: float
    children: bool = False
    """Count the children this process waited for as its own (a script it ran, every process below it)."""

    @classmethod
    def start(cls, children: bool = False) -> CpuWindow:
        return cls(_machine_busy_s(), _own_cpu_s(children), time.perf_counter(), children)

    def others(self) -> float | None:
        """Other processes' CPU during the window, in cores (None: /proc/stat unreadable, or too short).
        With `children`, read it once the children ended (their CPU counts when they are waited for)."""
        machine = _machine_busy_s()
        wall = time.perf_counter() - self.wall
        if machine is None or self.machine is None or wall < 0.05:
            return None
        other = (machine - self.machine) - (_own_cpu_s(self.children) - self.own)
        return round(max(0.0, other / wall), 2)


def busy(other: float | None, threads: int) -> bool:
    """Whether other processes' CPU (cores) competed with torch's `threads` for the cores."""
    return other is not None and other >= BUSY_CORES and threads + other > cores()


QUIET_WAIT_S = 10.0
"""How long the benchmark waits for other processes to leave the cores before it re-times a busy arm."""


def wait_for_quiet(threads: int, limit_s: float = QUIET_WAIT_S, window_s: float = 0.5) -> bool:
    """Wait, in windows of `window_s`, until other processes leave torch's `threads` their cores: True once a
    window is quiet, False when `limit_s` passed first (pyperf re-runs rather than trusting a noisy sample)."""
    end = time.perf_counter() + limit_s
    while time.perf_counter() < end:
        window = CpuWindow.start()
        time.sleep(window_s)
        if not busy(window.others(), threads):
            return True
    return False
