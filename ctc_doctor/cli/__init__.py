"""The `ctc-doctor` command. Parses arguments, calls the layers, writes files, sets the exit code.

- main: the group, its help and the default command; `main()` is the console script
- options: the click options the commands share, and their typed conversion into the analyzer's options
- output: one-line errors and exit codes, the stderr console, summaries, writing reports, the CI gate
- analyze: analyze, fix, bench, bisect, demo, check (a `build()` TARGET); run: an unmodified script;
  logs: TORCH_TRACE / TORCH_LOGS on disk; saved: show, tui, report, diff, schema; sweep: many targets

stdout carries data only (`--json -`, `schema`, `report`); everything for humans goes to stderr. Heavy
modules (torch, the analyzer, textual) are imported inside commands, so `ctc-doctor --help` stays fast.
"""

from .main import cli, main

__all__ = ["cli", "main"]
