"""TUI scale: open a report with 5,000 break sites, then search, filter, sort and scroll it.

Times (headless Textual, the same code path as a terminal):
  load     read + validate the JSON report
  open     app start until the break table shows every row (the first screen a user switches to)
  search   one keystroke in `/` search over all sites (the table is rebuilt)
  filter   pick a category with `f`
  sort     `s` (by occurrences)
  page     one PageDown step (cursor, detail pane, repaint), averaged over 50
and print each as a ratio of the 1 s budget the issue sets for opening.

    .venv/bin/python benchmarks/tui_open.py [--sites 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from ctc_doctor.fixtures.synthetic import large_report
from ctc_doctor.reports.io import dump_report, load_report
from ctc_doctor.tui.app import DoctorApp
from ctc_doctor.tui.screens.breaks_screen import BreaksScreen
from ctc_doctor.tui.widgets.virtual_table import VirtualTable

BUDGET_S = 1.0


async def measure(path: str, sites: int) -> dict[str, float]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    report = load_report(path)
    times["load"] = time.perf_counter() - t0
    app = DoctorApp(report, report_path=path, start_section="breaks")
    async with app.run_test(size=(160, 50)) as pilot:
        while not (isinstance(app.screen, BreaksScreen) and len(app.screen.shown) == sites):
            await pilot.pause(0.005)
        times["open"] = time.perf_counter() - t0
        screen = app.screen
        t = time.perf_counter()
        await pilot.press("slash", "4")
        await pilot.pause()
        times["search"] = time.perf_counter() - t
        await pilot.press("escape")
        await pilot.pause()
        t = time.perf_counter()
        screen.apply_filter("type:Data-dependent branching")
        await pilot.pause()
        times["filter"] = time.perf_counter() - t
        screen.apply_filter("")
        t = time.perf_counter()
        await pilot.press("s")
        await pilot.pause()
        times["sort"] = time.perf_counter() - t
        table = screen.query_one(VirtualTable)
        t = time.perf_counter()
        for _ in range(50):  # each step: move a page, update the detail pane, repaint
            table.action_page(1)
            await pilot.pause()
        times["page down (per step)"] = (time.perf_counter() - t) / 50
        t = time.perf_counter()
        for _ in range(50):
            await pilot.press("x")  # an unbound key: the test driver's own cost per key press
        times["no-op key press (driver cost)"] = (time.perf_counter() - t) / 50
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "large.json")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(dump_report(large_report(args.sites)))
        size_mb = os.path.getsize(path) / 1e6
        times = asyncio.run(measure(path, args.sites))
    print(f"report: {args.sites} break sites, {size_mb:.1f} MB of JSON")
    for name, seconds in times.items():
        print(f"{name:30s} {seconds * 1000:8.1f} ms   {seconds / BUDGET_S:5.2f}x of the {BUDGET_S:.0f} s budget")


if __name__ == "__main__":
    main()
