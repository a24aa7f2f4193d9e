"""Write the saved reports and the saved sweep the fast test tier reads instead of live analyses.

Run it from the repository root after a change that alters what a report holds (a schema bump, new or
changed findings; the tests in `tests/test_saved_data.py` say when):

    .venv/bin/python tests/data/reports/make_reports.py            # every report, then the sweep
    .venv/bin/python tests/data/reports/make_reports.py full_showcase analyzed-clean   # some reports only
    .venv/bin/python tests/data/reports/make_reports.py sweep      # the sweep only

The behaviour lock: `findings.lock.json` holds each saved report's findings (the verdict and counts, break
sites with their lines, recompile causes with their recurrence and expected flag, suggestions with what
their checks measured and their verdicts, the next steps' order, the fix, the benchmark's arms, the
bisection's answer; timings are left out). After writing a report, this prints which findings differ from
the lock, and updates the lock only for the ones listed in `intended-changes.txt` (one line each:
`report | finding | why`), moving each line it used under `## applied`; a change not listed stays out of
the lock, and `tests/test_saved_data.py` fails on it until it is listed and this is run again.

Each report is what a helper of `tests/conftest.py` returns, called here with the same options:
`full_showcase()`, `analyzed(name)` or `bisected(name)`, each in a fresh child process of its own. The
file is named as the test session's cache names it (`analyzed-clean.json`) and written with the package's
writer (`dump_report`), so `load_report` reads it. This checkout's path and the standard library's are
written as `$REPO` and `$STDLIB`: `saved(name)` in `tests/conftest.py` puts the reading machine's back,
so a saved report names the same files as a live one would there (the TUI reads their source).

The sweep is `tests/test_sweep_dashboard.py`'s fleet swept with `--bench` as its `swept` fixture sweeps
it, into `tests/data/sweep/dashboard/` (`summary.json`, `summary.md`, `reports/`, `logs/`); the manifest
is written beside it, `tests/data/sweep/models.txt`, and the sweep runs on relative paths from the
repository root, so the summary holds no path of this machine but in what a child printed (the builder
that raises names its file): those are marked too, and left marked when a test reads the sweep.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

OUT = Path(__file__).resolve().parent
SWEEP = OUT.parent / "sweep"
REPO_MARK, STDLIB_MARK = "$REPO", "$STDLIB"

REPORTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "full_showcase": ("full_showcase", ()),
    "analyzed-showcase": ("analyzed", ("showcase",)),
    "analyzed-clean": ("analyzed", ("clean",)),
    "analyzed-print_in_forward": ("analyzed", ("print_in_forward",)),
    "analyzed-deepcopy_in_forward": ("analyzed", ("deepcopy_in_forward",)),
    "analyzed-two_causes": ("analyzed", ("two_causes",)),
    "analyzed-python_scalar_arg": ("analyzed", ("python_scalar_arg",)),
    "bisected-showcase": ("bisected", ("showcase",)),
    "bisected-deepcopy_in_forward": ("bisected", ("deepcopy_in_forward",)),
    # the ecosystem fixtures as `ctc-doctor fix` analyzes them: their next steps are judged in the fast tier
    **{
        f"advised-{name}": ("advised", (name,))
        for name in (
            "pool_size_from_data",
            "augment_with_net",
            "sliding_window_routine",
            "ode_solver_routine",
            "static_cache_decoder",
            "last_partial_batch",
        )
    },
}
"""File name (without `.json`) -> the `tests/conftest.py` helper and its arguments."""


def _json_escaped(text: str) -> str:
    return json.dumps(text)[1:-1]


def machine_paths() -> list[tuple[str, str]]:
    """(this machine's path as JSON text, its mark): the checkout first, then the standard library."""
    return [(_json_escaped(str(REPO)), REPO_MARK), (_json_escaped(os.path.dirname(os.__file__)), STDLIB_MARK)]


def plain_paths() -> list[tuple[str, str]]:
    """The same, as plain text (a log, Markdown)."""
    return [(str(REPO), REPO_MARK), (os.path.dirname(os.__file__), STDLIB_MARK)]


def write_one(name: str) -> None:
    """In this (fresh) process: run the helper, write its report with its machine paths marked."""
    from ctc_doctor.reports.io import dump_report
    from tests import conftest

    helper, args = REPORTS[name]
    report = getattr(conftest, helper)(*args)
    text = dump_report(report)
    for path, mark in machine_paths():
        text = text.replace(path, mark)
    (OUT / f"{name}.json").write_text(text)


def findings(report: dict) -> dict[str, object]:
    """What a saved report finds, apart from timings: the verdict and counts, each break site (type, ids,
    line, module paths), each recompile cause (kind, source, how many recompiles, recurrence, expected or
    not), each suggestion (rule, applied or not, what its check measured, its verdict), the fix applied, the
    benchmark's arms and best arm, the bisection's answer, the errors."""
    summary = report.get("summary", {})
    counts = ("verdict", "graphs_compiled", "unique_break_sites", "recompile_count")
    sites = [
        (s["id"], s["gb_type"], tuple(s.get("registry_ids", [])), s["user_frame"]["line"], tuple(s.get("module_paths", [])))
        for s in report.get("graph_breaks", [])
    ]
    causes = [
        (c["id"], c["kind"], c.get("source"), len(c.get("recompiles", [])), c.get("recurrence"), bool(c.get("expected")))
        for c in report.get("recompile_causes", [])
    ]
    suggestions = [
        (s["id"], s["rule"], (s.get("verified") or {}).get("applied"), _untimed((s.get("verified") or {}).get("summary")), _verdict(s))
        for s in report.get("suggestions", [])
    ]
    bench = report.get("benchmark") or {}
    bisect = report.get("bisect") or {}
    return {
        "verdict": list(summary.get(k) for k in counts),
        "break sites": [list(x) for x in sites],
        "recompile causes": [list(x) for x in causes],
        "suggestions": [list(x) for x in suggestions],
        "next steps": None if bench else _step_order(report),
        "fix applied": (report.get("fix") or {}).get("applied"),
        "arms": [a["name"] for a in bench.get("arms", [])] if bench else None,
        "bisection": [bisect.get("smallest_failing"), bisect.get("trial_count")] if bisect else None,
        "errors": [[e["phase"], e["type"]] for e in report.get("errors", [])],
    }


def _verdict(suggestion: dict) -> str | None:
    """Its verdict, or `timed` where a benchmark's timing took part in it (a timing is no finding)."""
    timed = any(str(d.get("source", "")).startswith("benchmark") for d in suggestion.get("deltas", []))
    return "timed" if timed else suggestion.get("verdict")


def _step_order(report: dict) -> list[str]:
    """What each of "what to do next" is, in order: its suggestion (`S3`), else its first words (numbers as #)."""
    from ctc_doctor.reports import Report
    from ctc_doctor.reports.advice import next_steps

    out = []
    for step in next_steps(Report.model_validate(report)):
        ids = re.findall(r"\[(S\d+)[,\]]", step)
        out.append(ids[0] if ids else re.sub(r"\d+", "#", " ".join(step.split()[:5])))
    return out


def _untimed(text: str | None) -> str | None:
    """A measured summary with its timings left out (`cold compile <t> -> <t>`): every decimal number (the
    counts a fix check measures are whole numbers)."""
    return re.sub(r"\d+\.\d+( m?s\b)?", "<t>", text) if text else text


LOCK = OUT / "findings.lock.json"
"""Each saved report's findings as last intended: what `tests/test_saved_data.py` holds the saved reports to."""
INTENDED = OUT / "intended-changes.txt"
"""`report | finding | why`, one line per intended change of a saved report's findings (pending until applied)."""
APPLIED = "## applied"


def read_lock() -> dict[str, dict]:
    return json.loads(LOCK.read_text()) if LOCK.exists() else {}


def pending_changes() -> list[tuple[str, str, str]]:
    """The lines of `intended-changes.txt` above `## applied`: (report, finding, why)."""
    if not INTENDED.exists():
        return []
    out = []
    for line in _sections(INTENDED.read_text())[0].splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and not line.startswith("#") and all(parts):
            out.append((parts[0], parts[1], parts[2]))
    return out


def changed_findings(locked: dict, now: dict) -> list[str]:
    """The findings (keys) that differ between the lock's and a report's."""
    return [key for key, value in now.items() if locked.get(key) != value]


def lock_one(name: str) -> None:
    """The report just written against the lock: what changed is printed; the lock takes a change only when
    `intended-changes.txt` lists it (the line then moves under `## applied`), and a new report whole."""
    now = json.loads(json.dumps(findings(json.loads((OUT / f"{name}.json").read_text()))))
    lock = read_lock()
    if name not in lock:
        lock[name] = now
        print(f"{name}: new in the lock")
    else:
        changed = changed_findings(lock[name], now)
        pending = pending_changes()
        used = [p for p in pending if p[0] == name and p[1] in changed]
        for key in changed:
            listed = any(p[1] == key for p in used)
            print(f"{name}: {key} changed ({'listed as intended' if listed else 'NOT LISTED in intended-changes.txt'}):")
            print(f"    was {lock[name].get(key)}\n    now {now[key]}")
            if listed:
                lock[name][key] = now[key]
        if not changed:
            print(f"{name}: same findings")
        if used:
            _mark_applied(used)
    LOCK.write_text(json.dumps(dict(sorted(lock.items())), indent=1) + "\n")


def _sections(text: str) -> tuple[str, str]:
    """(the pending lines, the applied ones): split at the line `## applied`."""
    parts = re.split(rf"^{APPLIED}$", text, maxsplit=1, flags=re.M)
    return parts[0], parts[1] if len(parts) > 1 else ""


def _mark_applied(used: list[tuple[str, str, str]]) -> None:
    head, tail = _sections(INTENDED.read_text())
    lines = head.splitlines()
    for report, key, why in used:
        lines = [ln for ln in lines if [p.strip() for p in ln.split("|")] != [report, key, why]]
    stamp = time.strftime("%Y-%m-%d")
    applied = "".join(f"\n{stamp} {r} | {k} | {w}" for r, k, w in used)
    INTENDED.write_text("\n".join(lines).rstrip() + f"\n\n{APPLIED}{applied}{tail}")


def write_sweep() -> None:
    from tests.conftest import run_cli
    from tests.test_sweep_dashboard import FLEET

    manifest, out = SWEEP / "models.txt", SWEEP / "dashboard"
    SWEEP.mkdir(exist_ok=True)
    manifest.write_text(FLEET)
    shutil.rmtree(out, ignore_errors=True)
    relative = [str(p.relative_to(REPO)) for p in (manifest, out)]
    done = run_cli("sweep", relative[0], "--bench", "--out", relative[1], "--jobs", "2", "--timeout", "120", timeout=400)
    if done.returncode != 0:
        sys.exit(f"the sweep failed (exit {done.returncode}):\n{done.stderr}")
    for path in out.rglob("*"):  # the summary, reports and logs: each may name a path of this machine
        if path.is_file():
            text = path.read_text()
            for machine, mark in machine_paths() if path.suffix == ".json" else plain_paths():
                text = text.replace(machine, mark)
            path.write_text(text)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        write_one(argv[1])
        return
    names = argv or [*REPORTS, "sweep"]
    unknown = [n for n in names if n not in REPORTS and n != "sweep"]
    if unknown:
        sys.exit(f"unknown: {', '.join(unknown)} (known: {', '.join(REPORTS)}, sweep)")
    for name in names:
        t0 = time.monotonic()
        if name == "sweep":
            write_sweep()
        else:
            subprocess.run([sys.executable, __file__, "--one", name], cwd=REPO, check=True)
            lock_one(name)
        print(f"{name}: {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
