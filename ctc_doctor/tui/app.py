"""DoctorApp: browse a Report (or watch a live analysis, then browse its report).

    DoctorApp(report=...)                a report already loaded (the CLI loads it: bad files exit 9 there)
    DoctorApp(report_path="r.json")      load in the app; a bad file shows a message screen
    DoctorApp(live=LiveRun([...]))       run the analysis in a child process, stream it, then browse

Sections are Textual modes (one screen each, built on first visit and kept): number keys, tab and
clicks on the navigation bar switch between them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

from ..errors import CtcDoctorError
from ..reports.models import Report
from .live_run import LiveRun
from .messages import LiveRunEnded, ShowMessage, ShowSection
from .report_index import ReportIndex
from .screens.benchmark_screen import BenchmarkScreen
from .screens.breaks_screen import BreaksScreen
from .screens.compiles_screen import CompilesScreen
from .screens.help_screen import HelpScreen
from .screens.message_screen import MessageScreen
from .screens.modules_screen import ModulesScreen
from .screens.overview_screen import OverviewScreen
from .screens.recompiles_screen import RecompilesScreen
from .screens.suggestions_screen import SuggestionsScreen

SHORT = {"breaks": "Breaks", "modules": "Modules", "suggestions": "Suggest", "benchmark": "Bench", "compiles": "Hints"}
"""Tab names where the full ones do not fit (80 columns)."""

SECTIONS: list[tuple[str, str, type]] = [
    ("overview", "Overview", OverviewScreen),
    ("breaks", "Graph breaks", BreaksScreen),
    ("recompiles", "Recompiles", RecompilesScreen),
    ("modules", "Module tree", ModulesScreen),
    ("suggestions", "Suggestions", SuggestionsScreen),
    ("benchmark", "Benchmark", BenchmarkScreen),
    ("compiles", "Hints & guards", CompilesScreen),
]
NAMES = [name for name, _, _ in SECTIONS]


class DoctorApp(App[int]):
    """The ctc-doctor report browser. `return_code` is the exit code for the CLI."""

    CSS_PATH = "doctor.tcss"
    TITLE = "ctc-doctor"
    MODES: ClassVar[dict[str, Any]] = {name: cls for name, _, cls in SECTIONS}
    BINDINGS = [
        *[Binding(str(i), f"section('{name}')", label, show=False) for i, (name, label, _) in enumerate(SECTIONS, 1)],
        Binding("tab", "step(1)", "next section", show=False, priority=True),
        Binding("shift+tab", "step(-1)", "previous section", show=False, priority=True),
        Binding("e", "export", "export md"),
        Binding("question_mark", "help", "keys"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        report: Report | None = None,
        *,
        report_path: str | None = None,
        live: LiveRun | None = None,
        source_roots: tuple[str, ...] = (),
        export_dir: str | None = None,
        start_section: str = "overview",
    ) -> None:
        super().__init__()
        self.report_path = report_path
        self.live = live
        self.source_roots = source_roots
        self.export_dir = export_dir
        self.start_section = start_section
        self.index: ReportIndex | None = None
        self.exit_code = 0
        self.pending_break_filter: str | None = None
        if report is not None:
            self.index = ReportIndex(report, source_path=report_path, source_roots=source_roots)

    # --- start-up ------------------------------------------------------------------------------

    def on_mount(self) -> None:
        if self.index is not None:
            self.switch_mode(self.start_section)
        elif self.live is not None:
            from .screens.live_screen import LiveScreen

            self.sub_title = "live analysis"
            self.push_screen(LiveScreen(self.live))
        elif self.report_path is not None:
            self.load_report_file(self.report_path)
        else:
            self.show_message("nothing to show", "give DoctorApp a report, a report path or a live run")

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_report_file(self, path: str) -> Report:
        from ..reports.io import load_report

        return load_report(path)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker results and failures reach the user."""
        worker = event.worker
        if event.state == WorkerState.SUCCESS and worker.group == "load":
            self.show_report(worker.result, self.report_path)  # type: ignore[arg-type]
        elif event.state == WorkerState.ERROR:
            error = worker.error
            message = error.one_line() if isinstance(error, CtcDoctorError) else f"{type(error).__name__}: {error}"
            if worker.group == "load":
                self.exit_code = int(getattr(error, "exit_code", 70))
                self.show_message("cannot open the report", message)
            else:
                self.notify(message, title="error", severity="error", markup=False)

    def show_report(self, report: Report, path: str | None) -> None:
        self.report_path = path
        self.index = ReportIndex(report, source_path=path, source_roots=self.source_roots)
        self.sub_title = report.target.spec
        self.switch_mode(self.start_section)

    def show_message(self, title: str, message: str, details: list[str] | None = None, *, error: bool = True) -> None:
        self.push_screen(MessageScreen(title, message, details, error=error))

    def on_show_message(self, message: ShowMessage) -> None:
        self.show_message(message.title, message.message, error=message.error)

    def on_live_run_ended(self, message: LiveRunEnded) -> None:
        """The child exited: open its report (partial ones too), or say why there is none."""
        run, returncode, cancelled, tail = message.run, message.returncode, message.cancelled, message.tail
        self.exit_code = returncode
        path = run.report_path
        if cancelled:
            self.exit_code = 130
            self.show_message("analysis cancelled", f"stopped after {run.elapsed():.1f} s; no report was written", tail[-20:], error=False)
            return
        failure = next((line for line in reversed(tail) if line.startswith("ctc-doctor: error:")), None)
        if path is None or not os.path.exists(path):
            self.show_message(f"the analysis failed (exit code {returncode})", failure or "it wrote no report", tail[-30:])
            return
        from ..reports.io import load_report

        try:
            report = load_report(path)
        except CtcDoctorError as exc:
            self.show_message("the analysis wrote an unreadable report", exc.one_line(), tail[-30:])
            return
        self.show_report(report, path)
        if returncode:
            self.notify(
                f"{failure or f'exit code {returncode}'} — showing the partial report", severity="warning", timeout=10, markup=False
            )
        self.notify(f"report written to {path}", timeout=6, markup=False)

    # --- navigation ----------------------------------------------------------------------------

    def nav_sections(self) -> list[tuple[str, tuple[str, ...]]]:
        """(section, its tab labels from the longest to the shortest) for the navigation bar: the name
        with its count or state, the short name with its count, the short name alone."""
        counts: dict[str, str] = {}
        states: dict[str, str] = {}
        if self.index is not None:
            r = self.index.report
            counts = {
                "breaks": f" ({len(r.graph_breaks)})",
                "recompiles": f" ({len(r.recompiles)})",
                "suggestions": f" ({len(r.suggestions)})",
            }
            states = {
                "modules": "" if r.bisect is not None else " (no bisect)",
                "benchmark": "" if r.benchmark is not None else " (not run)",
            }
        tabs: list[tuple[str, tuple[str, ...]]] = []
        for name, label, _ in SECTIONS:
            count, short = counts.get(name, ""), SHORT.get(name, label)
            tabs.append((name, (label + count + states.get(name, ""), short + count, short)))
        return tabs

    def action_section(self, name: str) -> None:
        if self.index is None or name not in self.MODES or self.current_mode == name:
            return
        self.switch_mode(name)

    def action_step(self, delta: int) -> None:
        if self.index is None or self.current_mode not in NAMES:
            return
        self.action_section(NAMES[(NAMES.index(self.current_mode) + delta) % len(NAMES)])

    def on_show_section(self, message: ShowSection) -> None:
        self.action_section(message.section)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def show_breaks_of(self, module_path: str) -> None:
        """Open the break table filtered to a module and its submodules (applied when the screen resumes)."""
        self.pending_break_filter = f"module:{module_path}" if module_path else ""
        if self.current_mode == "breaks":
            self.screen.post_message(events.ScreenResume())
        else:
            self.action_section("breaks")

    # --- export --------------------------------------------------------------------------------

    def export_path(self) -> Path:
        stem = Path(self.report_path).stem if self.report_path else "ctc-doctor-report"
        folder = self.export_dir or (os.path.dirname(os.path.abspath(self.report_path)) if self.report_path else os.getcwd())
        return Path(folder) / f"{stem}.md"

    def action_export(self) -> None:
        if self.index is None:
            return
        from ..reports.markdown import render_markdown

        path = self.export_path()
        try:
            path.write_text(render_markdown(self.index.report), encoding="utf-8")
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror}", severity="error", markup=False)
            return
        self.notify(f"Markdown written to {path}", markup=False)

    def action_quit(self) -> None:  # type: ignore[override]
        self.exit(self.exit_code)
