"""Write the saved reports and the saved sweep the fast test tier reads instead of live analyses.

Run it from the repository root after a change that alters what a report holds (a schema bump, new or
changed findings; the tests in `tests/test_saved_data.py` say when):

    .venv/bin/python tests/data/reports/make_reports.py            # every report, then the sweep
    .venv/bin/python tests/data/reports/make_reports.py full_showcase analyzed-clean   # some reports only
    .venv/bin/python tests/data/reports/make_reports.py sweep      # the sweep only

Before it overwrites a report, it prints which findings changed (the verdict and counts, break sites with
their lines, recompile causes with their recurrence, suggestions and what their checks measured, the fix,
the benchmark's arms and best arm, the bisection's answer; timings are left out): a change to them needs
a line in the commit saying why.

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
    target = OUT / f"{name}.json"
    if target.exists():  # the behaviour lock: what a change does to the findings is said, not buried in the diff
        changes = changed_findings(json.loads(target.read_text()), json.loads(text))
        print(f"{name}: findings changed (say why in the commit):" if changes else f"{name}: same findings", *changes, sep="\n")
    target.write_text(text)


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
        (s["id"], s["rule"], (s.get("verified") or {}).get("applied"), _untimed((s.get("verified") or {}).get("summary")), s.get("verdict"))
        for s in report.get("suggestions", [])
    ]
    bench = report.get("benchmark") or {}
    bisect = report.get("bisect") or {}
    return {
        "verdict": tuple(summary.get(k) for k in counts),
        "break sites": sites,
        "recompile causes": causes,
        "suggestions": suggestions,
        "fix applied": (report.get("fix") or {}).get("applied"),
        "arms": ([a["name"] for a in bench.get("arms", [])], bench.get("best_arm")) if bench else None,
        "bisection": (bisect.get("smallest_failing"), bisect.get("trial_count")) if bisect else None,
        "errors": [(e["phase"], e["type"]) for e in report.get("errors", [])],
    }


def _untimed(text: str | None) -> str | None:
    """A measured summary with its timings left out (`cold compile <t> -> <t>`): every decimal number (the
    counts a fix check measures are whole numbers)."""
    return re.sub(r"\d+\.\d+( m?s\b)?", "<t>", text) if text else text


def changed_findings(before: dict, after: dict) -> list[str]:
    """Lines saying which findings differ between two versions of a saved report; empty when none."""
    old, new = findings(before), findings(after)
    lines = []
    for key, value in new.items():
        if old.get(key) != value:
            lines.append(f"  {key}:\n    was {old.get(key)}\n    now {value}")
    return lines


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
        print(f"{name}: {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
