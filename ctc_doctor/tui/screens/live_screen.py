"""LiveScreen: the analysis runs in a child process; its phases and output stream here. Escape cancels."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Log, ProgressBar, Static

from ...progress import Step
from ..live_run import LiveRun
from ..messages import LiveRunEnded, OutputReceived, ProgressReported, RunFinished, ShowMessage

STAGES = [
    ("load", "load the target (imports torch)"),
    ("eager", "eager run"),
    ("explain", "explain cross-check"),
    ("compile", "compile under capture"),
    ("report", "build the report"),
    ("bisect", "bisect the module tree"),
    ("fix", "verify fixes on a copy"),
    ("probe", "probe input shapes"),
    ("bench", "benchmark"),
]


SCRIPT_STAGES = [
    ("script", "run the script under capture"),
    ("report", "build the report (module paths)"),
    ("bisect", "bisect the compiled module"),
    ("fix", "verify fixes on a copy"),
]
"""`ctc-doctor run -- script`: the script, then the first rank's phases."""


_STAGE_OF = {Step.EAGER: "eager", Step.FIX_REFERENCE: "fix", Step.BENCH_REFERENCE: "bench", Step.ARM: "bench"}


def stage_of(step: Step) -> str:
    """The stage a step belongs to on this screen: the fix checks' reference is `fix`, an arm is `bench`."""
    return _STAGE_OF.get(step, step.value)


class LiveScreen(Screen[None]):
    BINDINGS = [Binding("escape", "cancel", "cancel the analysis"), Binding("q", "quit", "quit")]

    def __init__(self, run: LiveRun) -> None:
        super().__init__()
        self.run = run
        self.current = ""
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.output_tail: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="live"):
            yield Static(Text(f"analyzing: {self.run.label}", style="bold"), id="live-title")
            yield Static(Text("starting…", style="dim"), id="live-phase")
            yield ProgressBar(id="live-progress", show_eta=False)
            yield Static(id="live-stages")
            yield Static(Text("output of the run (the model's prints, warnings)", style="dim"))
            yield Log(id="live-log", max_lines=2000)
        yield Footer()

    def on_mount(self) -> None:
        try:
            self.run.start()
        except OSError as exc:
            self.post_message(ShowMessage("could not start the analysis", f"{type(exc).__name__}: {exc}"))
            return
        self.started["load"] = time.perf_counter()
        self.current = "load"
        self.render_stages()
        self.read_progress()
        self.read_output()
        self.set_interval(0.5, self.tick)

    # --- the child's streams (thread workers: reading blocks) -------------------------------------

    @work(thread=True, exclusive=False, group="live-progress", exit_on_error=False)
    def read_progress(self) -> None:
        for event in self.run.progress():
            stage, elapsed = stage_of(event.step), event.elapsed_s or 0.0
            self.post_message(ProgressReported(phase=event.label, stage=stage, done=event.done, total=event.total, elapsed_s=elapsed))

    @work(thread=True, exclusive=False, group="live-output", exit_on_error=False)
    def read_output(self) -> None:
        for line in self.run.output():
            self.post_message(OutputReceived(line))
        returncode = self.run.wait()
        self.post_message(RunFinished(returncode=returncode, cancelled=self.run.cancelled))

    @work(thread=True, exclusive=True, group="live-cancel", exit_on_error=False)
    def cancel_run(self) -> None:
        self.run.cancel()

    # --- handlers ------------------------------------------------------------------------------

    def on_progress_reported(self, message: ProgressReported) -> None:
        stage = message.stage
        now = time.perf_counter()
        if stage != self.current:
            if self.current:
                self.finished[self.current] = now
            self.started.setdefault(stage, now)
            self.current = stage
        label = Text(message.phase, style="bold cyan")
        if message.total:
            label.append(f"  {message.done}/{message.total}", style="dim")
        elif message.done:
            label.append(f"  {message.done} done", style="dim")
        self.query_one("#live-phase", Static).update(label)
        bar = self.query_one(ProgressBar)
        bar.update(total=message.total or None, progress=message.done)
        self.render_stages()

    def on_output_received(self, message: OutputReceived) -> None:
        self.output_tail = (self.output_tail + [message.line])[-40:]
        self.query_one(Log).write_line(message.line)

    def on_run_finished(self, message: RunFinished) -> None:
        if self.current:
            self.finished.setdefault(self.current, time.perf_counter())
        self.post_message(LiveRunEnded(self.run, message.returncode, message.cancelled, list(self.output_tail)))

    def tick(self) -> None:
        self.render_stages()

    def render_stages(self) -> None:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column("mark", no_wrap=True, width=2)
        table.add_column("stage", no_wrap=True)
        table.add_column("time", no_wrap=True, justify="right")
        now = time.perf_counter()
        for stage, label in SCRIPT_STAGES if self.run.args[:1] == ["run"] else STAGES:
            if stage in self.finished:
                table.add_row(
                    Text("✓", style="green"), Text(label), Text(f"{self.finished[stage] - self.started[stage]:.1f} s", style="dim")
                )
            elif stage == self.current:
                table.add_row(Text("▶", style="bold cyan"), Text(label, style="bold"), Text(f"{now - self.started[stage]:.1f} s"))
            else:
                table.add_row(Text("·", style="dim"), Text(label, style="dim"), Text(""))
        table.add_row(Text(""), Text("elapsed", style="dim"), Text(f"{self.run.elapsed():.1f} s", style="dim"))
        self.query_one("#live-stages", Static).update(table)

    def action_cancel(self) -> None:
        if self.run.returncode is None:
            self.query_one("#live-phase", Static).update(Text("cancelling: stopping the analysis and its child processes…", style="yellow"))
            self.cancel_run()

    def action_quit(self) -> None:
        self.run.cancel()  # no orphaned analysis: wait (up to a few seconds) for it to stop
        self.app.exit()
