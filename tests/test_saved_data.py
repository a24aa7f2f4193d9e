"""The saved reports and sweep the fast tier reads (`tests/data/reports`, `tests/data/sweep`) stay honest.

They load under the current schema and carry the version the package writes now (a schema bump makes
these fail until they are written again), and a live analysis still finds what each saved report says
(a change to the findings makes the saved data fail here rather than rot). Both failures name the
command that writes them again: `.venv/bin/python tests/data/reports/make_reports.py`.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ctc_doctor.errors import ReportError
from ctc_doctor.reports import SCHEMA_VERSION, Report, load_report
from ctc_doctor.reports.io import dump_report
from ctc_doctor.reports.models import Frame
from ctc_doctor.sweep.summary import load_summary
from ctc_doctor.sweep.summary_models import SWEEP_SCHEMA_VERSION

from . import conftest
from .conftest import REPO, SAVED_REPORTS, SAVED_SWEEP, saved

REGENERATE = ".venv/bin/python tests/data/reports/make_reports.py"


def _make_reports():
    spec = importlib.util.spec_from_file_location("make_reports", SAVED_REPORTS / "make_reports.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE_REPORTS = _make_reports()
REPORTS: dict[str, tuple[str, tuple[str, ...]]] = MAKE_REPORTS.REPORTS


def _loaded(path: Path) -> Report:
    try:
        return load_report(path)
    except ReportError as exc:
        pytest.fail(f"{exc.one_line()}: write it again with `{REGENERATE} {path.stem}`")


@pytest.mark.fast
def test_the_saved_reports_are_the_ones_make_reports_writes():
    written = sorted(p.stem for p in SAVED_REPORTS.glob("*.json") if p != MAKE_REPORTS.LOCK)
    assert written == sorted(REPORTS) and sorted(MAKE_REPORTS.read_lock()) == sorted(REPORTS), f"run `{REGENERATE}`"


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_each_saved_report_loads_under_the_current_schema_and_version(name):
    path = SAVED_REPORTS / f"{name}.json"
    report = _loaded(path)
    assert report.schema_version == SCHEMA_VERSION, (
        f"{path.name} has schema_version {report.schema_version}, the package writes {SCHEMA_VERSION}: "
        f"write it again with `{REGENERATE} {name}`"
    )
    assert str(REPO) not in path.read_text(), f"{path.name} names this checkout's path: `{REGENERATE} {name}` marks it as $REPO"
    assert saved(name) is not None  # and with this machine's paths put back


@pytest.mark.fast
def test_the_saved_sweep_loads_under_the_current_schemas_and_versions():
    summary, directory = load_summary(SAVED_SWEEP)
    assert summary.schema_version == SWEEP_SCHEMA_VERSION, (
        f"the saved sweep has schema_version {summary.schema_version}, the package writes {SWEEP_SCHEMA_VERSION}: "
        f"write it again with `{REGENERATE} sweep`"
    )
    reports = [directory / row.report for row in summary.targets if row.report]
    assert len(reports) == 3
    for path in reports:
        report = _loaded(path)
        assert report.schema_version == SCHEMA_VERSION, f"{path.name} is {report.schema_version}: `{REGENERATE} sweep`"


def _locked(report: Report) -> dict[str, object]:
    """make_reports' findings of a report (what the lock holds), from its JSON as written."""
    text = dump_report(report)
    for path, mark in MAKE_REPORTS.machine_paths():  # as the saved files name them
        text = text.replace(path, mark)
    return json.loads(json.dumps(MAKE_REPORTS.findings(json.loads(text))))


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_each_saved_report_holds_the_findings_the_lock_holds(name):
    """The behaviour lock: a saved report's findings (recurrence and expected flags, verdicts, the next steps'
    order included) are the lock's, or their change is listed in `intended-changes.txt` and applied."""
    locked = MAKE_REPORTS.read_lock().get(name)
    assert locked is not None, f"{name} is not in findings.lock.json: run `{REGENERATE} {name}`"
    now = _locked(saved(name))
    changed = MAKE_REPORTS.changed_findings(locked, now)
    assert not changed, (
        f"tests/data/reports/{name}.json: {', '.join(changed)} changed and the change is not in the lock: if it is meant, "
        f"add `{name} | <finding> | <why>` to tests/data/reports/intended-changes.txt and run `{REGENERATE} {name}`\n"
        + "\n".join(f"{key}:\n  locked {locked.get(key)}\n  now    {now[key]}" for key in changed)
    )


@pytest.mark.fast
def test_the_lock_fails_when_a_one_off_is_read_as_recurring():
    """The regression the lock is for: the last partial batch's recompile, a one-off, read as recurring
    (and so no longer expected) changes the locked findings; the comparison names the causes."""
    name = "advised-last_partial_batch"
    data = json.loads(dump_report(saved(name)))
    [cause] = data["recompile_causes"]
    assert cause["recurrence"] == "one_off" and cause["expected"]
    cause["recurrence"], cause["expected"] = "recurring", None
    changed = MAKE_REPORTS.changed_findings(MAKE_REPORTS.read_lock()[name], MAKE_REPORTS.findings(data))
    assert "recompile causes" in changed, changed


def _where(frame: Frame | None) -> tuple[str, int, str] | None:
    return None if frame is None else (frame.file, frame.line, frame.function)


def findings(report: Report) -> dict[str, object]:
    """What an analysis finds and a rerun finds again: no times, no measured verdicts, no temporary paths."""
    bisect = report.bisect
    return {
        "verdict": report.summary.verdict,
        "break sites": [
            (s.id, s.gb_type, s.registry_ids, _where(s.user_frame), _where(s.own_frame), s.module_paths, s.own_code)
            for s in report.graph_breaks
        ],
        "recompile causes": [(c.id, c.kind, c.source, c.dim, c.recompiles) for c in report.recompile_causes],
        "suggestions": [(s.id, s.rule, s.applies_to) for s in report.suggestions],
        "bisection": None if bisect is None else (bisect.strategy, bisect.smallest_failing),
    }


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_live_analysis_still_finds_what_each_saved_report_says(name):
    """The live analysis is the one the test session shares (`tests/conftest.py`): the `analyzed` reports are
    made for the zoo's tests of `make test` anyway; `full_showcase` (about 20 s) is made for this test alone
    now that the tests which read it read the saved one, and the two bisections take about 1 s each."""
    helper, args = REPORTS[name]
    report = getattr(conftest, helper)(*args)
    live, kept = {**findings(report), **_locked(report)}, {**findings(saved(name)), **_locked(saved(name))}
    stale = [key for key in live if live[key] != kept[key]]
    assert not stale, (
        f"tests/data/reports/{name}.json no longer matches a live analysis ({', '.join(stale)} changed): if the change "
        f"is meant, write it again with `{REGENERATE} {name}` and check its diff\n"
        + "\n".join(f"{key}:\n  saved {kept[key]}\n  live  {live[key]}" for key in stale)
    )
