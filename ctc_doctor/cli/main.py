"""The `ctc-doctor` group: its help, `--version`, the commands of every family, and the default
command chosen from the first argument (a TARGET, a report, or logs)."""

from __future__ import annotations

import os
import sys

import click

from ..version import __version__
from . import analyze, logs, run, saved, sweep


class _DefaultGroup(click.Group):
    """`ctc-doctor TARGET ...` means `ctc-doctor analyze TARGET ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands and not {"--help", "-h", "--version"} & set(args[:1]):
            if first.endswith(".json") or os.path.isfile(os.path.join(first, "summary.json")):
                command = "show"  # a report, or a sweep's directory
            elif os.path.isdir(first) or first.endswith((".log", ".log.gz")):
                command = "logs"  # a TORCH_TRACE directory or a log file: never a TARGET
            else:
                command = "analyze"
            args = [command, *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctc-doctor")
def cli() -> None:
    """A torch.compile doctor: why your model is not one fast graph, where, and what to change.

    \b
    ctc-doctor run -- train.py ARGS            your script, unmodified (--nproc N: torchrun ranks)
    ctc-doctor mypkg.models:build              analyze (build() returns (model, args[, variants]) or a Workload)
    ctc-doctor path/to/file.py:build --json report.json
    ctc-doctor mypkg.models:build --json -     JSON on stdout, summary on stderr
    ctc-doctor bisect mypkg.models:build       smallest submodules that fail fullgraph=True
    ctc-doctor fix mypkg.models:build          apply the safe suggestions to a copy and verify them
    ctc-doctor bench mypkg.models:build        eager vs compiled vs fixed vs regional, measured
    ctc-doctor demo                            the built-in example
    ctc-doctor report.json                     summary of a saved report (same as: show report.json)
    ctc-doctor tui report.json                 browse a saved report in the terminal UI
    ctc-doctor show sweep/ --tui               browse a sweep: dashboard, targets, plot
    ctc-doctor logs ./trace                    diagnose TORCH_TRACE / TORCH_LOGS output of a run you cannot repeat
    ctc-doctor mypkg.models:build --tui        watch the analysis live, then browse its report
    ctc-doctor sweep models.txt --out sweep/   many models: a summary row each (merge, diff)
    ctc-doctor schema                          the report's JSON Schema

    Exit codes: 0 ok, 1 check failed, 2 usage, 3 target not found, 4 target invalid,
    5 builder raised, 6 model fails in eager, 7 torch.compile crashed, 8 timeout, 9 bad report
    file, 10 no readable torch logs (or --strict found bad records), 11 the script failed,
    12 the script compiled nothing, 13 patch refused, 14 no memory, 15 needs the weights
    (--weights none stopped), 70 internal error, 130 interrupted.
    """


# the order of `ctc-doctor --help`'s command list is click's (alphabetical), whatever the order here
for _command in [*analyze.COMMANDS, *saved.COMMANDS, run.run, logs.logs, sweep.sweep]:
    cli.add_command(_command)


def main() -> None:
    from . import supervise

    supervise.ENTRY = sys.argv[1:]  # a program's own arguments: its benchmark may run supervised
    cli.main(prog_name="ctc-doctor")
