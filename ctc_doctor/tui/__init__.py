"""The Textual terminal UI: browse a report, or watch a live analysis and then browse it.

`ctc-doctor tui report.json`, `ctc-doctor report.json --tui`, `ctc-doctor TARGET --tui`. Imports
textual, never torch: the live analysis runs in a child process (`tui.live_run.LiveRun`).
"""
