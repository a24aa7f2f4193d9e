"""Shared helpers: a cache of fixture analyses shared by the test processes, the saved reports of real
analyses the fast tier reads instead (`saved`), and a CLI runner (real subprocesses)."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache, wraps
from pathlib import Path

import pytest
import torch
from filelock import FileLock

import ctc_doctor
from ctc_doctor import AnalyzeOptions, BisectOptions, analyze
from ctc_doctor.fixtures.registry import all_fixtures
from ctc_doctor.processes import freeze_heap
from ctc_doctor.reports import Report

REPO = Path(__file__).resolve().parent.parent
TARGETS = Path(__file__).resolve().parent / "targets"


@cache
def ctrl_c_reaches_the_child() -> None:
    """`preexec_fn` for a child a test will Ctrl-C: a shell without job control starts background
    commands with SIGINT ignored (`make test &`), Python keeps an inherited SIG_IGN, and the child
    would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_SHARED = "CTC_TEST_SHARED_REPORTS"
"""The environment variable naming the folder where the session's processes (pytest-xdist workers) share
the fixture analyses: each is computed by the first process that needs it, under a lock, and read back
from its JSON by the others (about 30 analyses the two workers both needed, 2-25 s each)."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and _SHARED not in os.environ:  # the controller, before workers start
        os.environ[_SHARED] = tempfile.mkdtemp(prefix="ctc-test-reports-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(_SHARED), ignore_errors=True))


_SLOWEST_FIRST = (
    "test_run.py", "test_numerics.py", "test_bisect.py", "test_fixtures_zoo.py", "test_fixes.py",
    "test_sweep.py", "test_cli.py", "test_tui.py", "test_aot.py", "test_tickets.py", "test_generate.py",
    "test_saved_data.py",
)  # fmt: skip
"""The test files that take longest (about 250 s down to 25 s of test time), run first: pytest-xdist's
`--dist loadfile` hands out files in collection order, and a long file started last leaves the other
worker idle at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(_SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def shared(analysis: Callable[..., Report]) -> Callable[..., Report]:
    """`analysis(...)` once per test session (see `_SHARED`), and once per process in memory."""

    @cache
    @wraps(analysis)
    def once(*args: object, **kwargs: object) -> Report:
        folder = os.environ.get(_SHARED)
        if folder is None:
            return analysis(*args, **kwargs)
        key = [analysis.__name__, *map(str, args), *(f"{k}={v}" for k, v in sorted(kwargs.items()))]
        path = Path(folder) / ("-".join(key) + ".json")
        with FileLock(f"{path}.lock"):
            if not path.exists():
                path.write_text(analysis(*args, **kwargs).model_dump_json())
        return Report.model_validate_json(path.read_text())

    return once


@shared
def analyzed(name: str, train: bool = False) -> Report:
    """Analyze a zoo fixture once per test process (backend eager, or aot_eager with train)."""
    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    return analyze(workload, AnalyzeOptions(spec=spec.target, train=train))


@shared
def full_showcase() -> Report:
    """The showcase through every phase: top-down bisection, the verified fix, the benchmark (eager backend,
    2 timed passes), as `ctc-doctor demo` runs it."""
    from ctc_doctor import BenchOptions, FixOptions

    torch.manual_seed(0)
    options = AnalyzeOptions(
        spec="demo", bisect=BisectOptions(strategy="top-down"), fix=FixOptions(), bench=BenchOptions(backend="eager", iters=2, warmup=0)
    )
    return analyze(all_fixtures()["showcase"].builder()(), options)


SAVED_REPORTS = Path(__file__).resolve().parent / "data" / "reports"
SAVED_SWEEP = Path(__file__).resolve().parent / "data" / "sweep" / "dashboard"
"""Reports and a sweep from real runs, written by `tests/data/reports/make_reports.py` (see its docstring):
what the fast tier reads where other tests run the analysis live."""
_MACHINE_MARKS = {"$REPO": str(REPO), "$STDLIB": os.path.dirname(os.__file__)}
"""The marks the saved reports hold in place of the writing machine's paths, and this machine's."""


@cache
def _saved_text(name: str) -> str:
    text = (SAVED_REPORTS / f"{name}.json").read_text(encoding="utf-8")
    for mark, path in _MACHINE_MARKS.items():
        text = text.replace(mark, json.dumps(path)[1:-1])
    return text


def saved(name: str) -> Report:
    """The saved report `tests/data/reports/NAME.json` (`full_showcase`, `analyzed-clean`, `bisected-showcase`:
    what that conftest helper returned when it was written), with this checkout's and this Python's paths
    put back; a new object on each call."""
    try:
        return Report.model_validate_json(_saved_text(name))
    except ValueError as exc:
        raise AssertionError(
            f"tests/data/reports/{name}.json does not load under the current report models: "
            f"regenerate it with `.venv/bin/python tests/data/reports/make_reports.py {name}`\n{exc}"
        ) from exc


def saved_path(name: str, folder: Path) -> Path:
    """The saved report NAME written into `folder` with this machine's paths, for a command to read."""
    path = folder / f"{name}.json"
    path.write_text(_saved_text(name), encoding="utf-8")
    return path


def doctor_frames(report: Report) -> list[str]:
    """Every place the report names as a break site, recompile or cause that lies inside ctc_doctor
    itself: the doctor's own code must never show up as the user's problem."""
    places = [f.file for s in report.graph_breaks for f in (s.user_frame, s.own_frame, *s.user_stack) if f is not None]
    places += [r.file for r in report.recompiles]
    places += [f.file for c in report.recompile_causes for f in c.user_stack]
    package = os.path.dirname(os.path.abspath(ctc_doctor.__file__)) + os.sep
    fixtures = os.path.join(package, "fixtures") + os.sep  # the zoo's models are the user's code here
    own = [p for p in places if os.path.abspath(p).startswith(package) and not os.path.abspath(p).startswith(fixtures)]
    return own + [p for p in places if p.startswith("ctc_doctor/")]  # a path kept relative


@shared
def fixed(name: str) -> Report:
    """Analyze a zoo fixture with suggestions and the verified fix (eager backend), once per process."""
    from ctc_doctor import FixOptions

    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    return analyze(workload, AnalyzeOptions(spec=spec.target, explain=False, fix=FixOptions()))


@shared
def advised(name: str) -> Report:
    """A zoo fixture as `ctc-doctor fix` analyzes it: bisection, suggestions and the verified fix (eager
    backend), once per process: what the next steps of the ecosystem fixtures are judged on."""
    from ctc_doctor import FixOptions

    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    options = AnalyzeOptions(spec=spec.target, explain=False, bisect=BisectOptions(strategy="top-down"), fix=FixOptions())
    return analyze(workload, options)


@shared
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


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ctc_doctor ARGS` in a subprocess from the repo root (or `cwd`)."""
    full_env = {**os.environ, "PYTHONPATH": str(TARGETS), "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ctc_doctor", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


PRINTING_NET = (
    "import torch\n\n\n"
    "class Net(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = torch.nn.Linear(8, 8)\n\n"
    "    def forward(self, x):\n"
    "        h = self.fc(x)\n"
    "        print('h', h.shape)\n"
)
"""The head of a user's model file whose forward prints (a graph break with a source fix): tests add its end."""


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`ctc-doctor ARGS` in this process (click's runner), from the repo root with the test targets
    importable: for errors raised before any compile, where a subprocess would cost a torch import."""
    from click.testing import CliRunner

    from ctc_doctor.cli.main import cli

    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(TARGETS))

    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        result = CliRunner().invoke(cli, list(args), prog_name="ctc-doctor")
        return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)

    return invoke


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap() -> None:
    """What earlier test modules left alive (torch, cached analyses) out of the cyclic collector's reach,
    as the CLI does once a model is built (`processes.freeze_heap`): each full collection during a
    test's compiles then walks only that module's objects (zoo and capture tests: 140 -> 119 s). Garbage
    cycles are collected first: only what is still alive is frozen."""
    gc.collect()
    freeze_heap()
