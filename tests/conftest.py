"""Shared helpers: a per-process cache of fixture analyses, and a CLI runner (real subprocesses)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import torch

from ctc_doctor import AnalyzeOptions, BisectOptions, analyze
from ctc_doctor.fixtures.registry import all_fixtures
from ctc_doctor.reports import Report

REPO = Path(__file__).resolve().parent.parent
TARGETS = Path(__file__).resolve().parent / "targets"


@cache
def ctrl_c_reaches_the_child() -> None:
    """`preexec_fn` for a child a test will Ctrl-C: a shell without job control starts background
    commands with SIGINT ignored (`make test &`), Python keeps an inherited SIG_IGN, and the child
    would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def analyzed(name: str, train: bool = False) -> Report:
    """Analyze a zoo fixture once per test process (backend eager, or aot_eager with train)."""
    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    return analyze(workload, AnalyzeOptions(spec=spec.target, train=train))


@cache
def fixed(name: str) -> Report:
    """Analyze a zoo fixture with suggestions and the verified fix (eager backend), once per process."""
    from ctc_doctor import FixOptions

    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    return analyze(workload, AnalyzeOptions(spec=spec.target, explain=False, fix=FixOptions()))


@cache
def bisected(name: str, strategy: str = "both", train: bool = False) -> Report:
    """Bisect a zoo fixture once per test process (bisection only, no analysis compile)."""
    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    options = AnalyzeOptions(
        spec=spec.target,
        train=train,
        explain=False,
        compile=False,
        bisect=BisectOptions(strategy=strategy),  # type: ignore[arg-type]
    )
    return analyze(workload, options)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run `python -m ctc_doctor ARGS` in a subprocess from the repo root."""
    full_env = {**os.environ, "PYTHONPATH": str(TARGETS), "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ctc_doctor", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli
