"""Run a sweep's targets, each in its own `ctc-doctor` child process, N at once.

A child writes its JSON report and its stderr (a log) under the sweep directory. A child past the
per-target limit gets SIGTERM, then SIGKILL, to its whole process group (torchrun ranks included):
the target costs one `timeout` row, never the sweep. Children share the machine's cores: each gets
OMP_NUM_THREADS = cores / jobs unless the environment sets it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..processes import signal_group
from .manifest import Entry

GIB = 1024**3
MEMORY_PER_JOB = 3 * GIB
"""What one child may use (torch, a small model, its compiles): bounds the default --jobs."""


@dataclass
class SweepOptions:
    timeout_s: float = 900.0
    backend: str | None = None
    device: str | None = None
    full: bool = False
    """The whole analysis per target (bisection, verified fixes, benchmark), not just the diagnosis."""
    bench: bool = False
    """The diagnosis and a light benchmark (eager and compiled arms: speedup, compile time, memory,
    numerics), without bisection or fix checks; scripts: `run --compare eager,default`."""
    redact: bool = False

    def argv(self) -> list[str]:
        """The options as they are passed on, for the summary."""
        out = [f"--timeout {self.timeout_s:g}"]
        out += [f"--backend {self.backend}"] if self.backend else []
        out += [f"--device {self.device}"] if self.device else []
        out += ["--full"] if self.full else ["--bench"] if self.bench else []
        out += ["--redact"] if self.redact else []
        return out


@dataclass
class Finished:
    """What one child left."""

    entry: Entry
    exit_code: int | None
    """None: killed at the timeout, or never started (skipped, interrupted)."""
    duration_s: float
    report_path: Path
    log_path: Path
    killed: bool = False
    interrupted: bool = False
    stopped_by: str | None = None
    """The signal that stopped the sweep while this target ran (`SIGINT`, `SIGTERM`)."""


@dataclass
class _Running:
    entry: Entry
    process: subprocess.Popen[bytes]
    started: float
    report_path: Path
    log_path: Path
    log: object
    terminated_at: float | None = None
    killed: bool = False


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_jobs() -> int:
    """The machine's cores, bounded by the memory available (MEMORY_PER_JOB per child)."""
    cores = _cores()
    available = _available_memory()
    by_memory = max(1, available // MEMORY_PER_JOB) if available else cores
    return max(1, min(cores, by_memory))


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def child_argv(entry: Entry, report_path: Path, options: SweepOptions) -> list[str]:
    """`python -m ctc_doctor ...` for the entry: the sweep's options first, the line's own after
    them (the line wins)."""
    base = [sys.executable, "-m", "ctc_doctor"]
    ours = ["--json", str(report_path), "--quiet", "--timeout", f"{options.timeout_s:g}"]
    ours += ["--backend", options.backend] if options.backend else []
    ours += ["--redact"] if options.redact else []
    if entry.kind == "run":
        ours += [] if options.full else ["--no-bisect", "--no-fix"]
        own = entry.tokens[1 : entry.tokens.index("--")]
        if (options.full or options.bench) and not any(t == "--compare" or t.startswith("--compare=") for t in own):
            ours += ["--compare", "eager,default"]  # a script's speedup: its own steps under each
        return [*base, "run", *ours, *entry.tokens[1:]]
    ours += ["--device", options.device] if options.device else []
    if options.bench and not options.full:
        ours += ["--no-bisect", "--no-fix", "--no-regional"]
    elif not options.full:
        ours += ["--no-bisect", "--no-fix", "--no-bench"]
    return [*base, "analyze", entry.tokens[0], *ours, *entry.tokens[1:]]


def _kill_after(entry: Entry, options: SweepOptions) -> float:
    """The child's own --timeout (the line's, else the sweep's) starts after torch is imported and the
    model built, and ends in a partial report; past this much more, the child is stopped (a builder
    that never returns)."""
    timeout = entry.timeout_s or options.timeout_s
    return timeout + min(60.0, max(15.0, 0.25 * timeout))


def run_entries(
    entries: list[Entry],
    out_dir: Path,
    options: SweepOptions,
    jobs: int,
    on_start: Callable[[Entry], None] = lambda entry: None,
    on_done: Callable[[Finished], None] = lambda finished: None,
) -> list[Finished]:
    """Run every entry (skipped ones are not started); results in completion order. Ctrl-C stops the
    running children and returns what finished, the stopped ones marked `interrupted`."""
    (out_dir / "reports").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, _cores() // jobs))
    pending = [e for e in entries if e.skip is None]
    running: list[_Running] = []
    results: list[Finished] = []
    stop: dict[str, str] = {}
    restore = _sigterm_as_interrupt(stop)
    try:
        while pending or running:
            while pending and len(running) < jobs:
                entry = pending.pop(0)
                report_path, log_path = out_dir / "reports" / f"{entry.slug}.json", out_dir / "logs" / f"{entry.slug}.log"
                report_path.unlink(missing_ok=True)  # a report left by an earlier sweep must not count
                log = open(log_path, "wb")  # noqa: SIM115 - closed when the child ends
                process = subprocess.Popen(
                    child_argv(entry, report_path, options),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # its own process group: a timeout stops torchrun's ranks too
                )
                running.append(_Running(entry, process, time.perf_counter(), report_path, log_path, log))
                on_start(entry)
            time.sleep(0.05)
            for job in list(running):
                code = job.process.poll()
                now = time.perf_counter()
                if code is None:
                    _enforce_limit(job, now, _kill_after(job.entry, options))
                    continue
                signal_group(job.process, signal.SIGKILL)  # what it left in its session (ranks, workers)
                job.log.close()  # type: ignore[attr-defined]
                running.remove(job)
                finished = Finished(
                    job.entry, None if job.killed else code, now - job.started, job.report_path, job.log_path, killed=job.killed
                )
                results.append(finished)
                on_done(finished)
    except KeyboardInterrupt:
        by = stop.get("signal", "SIGINT")
        for job in running:
            signal_group(job.process, signal.SIGKILL)
            job.process.wait()
            job.log.close()  # type: ignore[attr-defined]
            elapsed = time.perf_counter() - job.started
            results.append(Finished(job.entry, None, elapsed, job.report_path, job.log_path, interrupted=True, stopped_by=by))
        raise SweepInterrupted(results, by) from None
    finally:
        restore()
    return results


def _sigterm_as_interrupt(stop: dict[str, str]) -> Callable[[], None]:
    """The children run in sessions of their own, so a SIGTERM to the sweep (a cancelled CI job) would
    orphan them: it stops them like Ctrl-C instead, noting `stop["signal"] = "SIGTERM"`. Returns what
    puts the old handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_term(signum: int, frame: object) -> None:
        stop["signal"] = "SIGTERM"
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


class SweepInterrupted(Exception):
    """Ctrl-C or SIGTERM: carries what finished (and what was stopped) so the summary is still written."""

    def __init__(self, results: list[Finished], signal_name: str = "SIGINT") -> None:
        super().__init__("interrupted")
        self.results = results
        self.signal_name = signal_name


def _enforce_limit(job: _Running, now: float, limit: float) -> None:
    elapsed = now - job.started
    if job.terminated_at is None and elapsed > limit:
        job.terminated_at = now
        job.killed = True
        signal_group(job.process, signal.SIGTERM)  # `run` writes what the script did on SIGTERM
    elif job.terminated_at is not None and now - job.terminated_at > 10.0:
        signal_group(job.process, signal.SIGKILL)
