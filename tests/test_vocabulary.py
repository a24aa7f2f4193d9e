"""One vocabulary, read everywhere: the commands' options land in their argument objects, and the docs'
tables name what the code defines (modes, arms, strategies). Torch-free."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

from ctc_doctor import vocabulary
from ctc_doctor.cli import analyze, run
from ctc_doctor.cli.options import AnalysisArgs, GateArgs, RunArgs

pytestmark = pytest.mark.fast

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _names(*classes: type) -> set[str]:
    return {f.name for cls in classes for f in fields(cls)}


@pytest.mark.parametrize(
    ("command", "lands_in"),
    [*((c, (AnalysisArgs, GateArgs)) for c in analyze.COMMANDS), (run.run, (RunArgs, GateArgs))],
    ids=lambda v: getattr(v, "name", ""),
)
def test_every_option_of_a_command_has_a_field_to_land_in(command, lands_in):
    own = {p for p in inspect.signature(command.callback).parameters if p != "kw"}
    options = {p.name for p in command.params} - own
    assert options and options <= _names(*lands_in), sorted(options - _names(*lands_in))


def _row(page: str, option: str) -> str:
    rows = [line for line in (DOCS / page).read_text().splitlines() if line.startswith(f"| `{option}")]
    assert len(rows) == 1, f"{page}: one row for {option}"
    return rows[0]


def test_the_docs_name_every_arm_and_every_mode_the_code_has():
    arms = _row("analyze.md", "--arms")
    for name in vocabulary.ARMS:
        assert f"`{name}`" in arms, name
    opt_in = re.search(r"`(\w+)`, `(\w+)` and `(\w+)` are opt-in", arms)
    assert opt_in and set(opt_in.groups()) == set(vocabulary.TRAINING_OPT_IN)
    modes = _row("analyze.md", "--modes")
    assert all(f"`{mode}`" in modes for mode in vocabulary.MODES)
    mode = _row("analyze.md", "--mode M")
    assert re.findall(r"`([\w-]+)`", mode.split("(inductor only)")[0]) == list(vocabulary.BENCH_MODES)


def test_the_docs_name_every_strategy_of_run_compare():
    text = (DOCS / "run.md").read_text()
    section = text.split("## Comparing ways of compiling (`--compare`)")[1].split("\n## ")[0]
    named = set(re.findall(r"`([\w-]+)`", section.split("Each run starts")[0]))
    assert set(vocabulary.STRATEGIES) <= named, set(vocabulary.STRATEGIES) - named
