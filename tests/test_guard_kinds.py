"""The registry of recompile kinds: every kind the parser can give has one entry, and every entry is whole
(its guard texts parse to it, its rule exists, its summary and advice read). Torch-free, on texts torch wrote."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from ctc_doctor.analyzer.doors.offline import ingest
from ctc_doctor.analyzer.phases.suggest.recompiles import RULES
from ctc_doctor.analyzer.readers.causes import cause_line
from ctc_doctor.analyzer.readers.parsing import classify_guard
from ctc_doctor.reports.advice.guard_kinds import BY_NAME, KINDS, guard_kind, rules
from ctc_doctor.reports.models import GuardKind

pytestmark = pytest.mark.fast

LOGS = Path(__file__).parent / "data" / "logs"


def test_every_guard_kind_of_the_report_has_exactly_one_entry():
    names = [k.name for k in KINDS]
    assert len(names) == len(set(names))
    assert set(names) == set(get_args(GuardKind))


@pytest.mark.parametrize("entry", KINDS, ids=lambda k: k.name)
def test_an_entrys_guard_texts_parse_to_its_kind(entry):
    assert entry.examples, f"{entry.name}: no guard text to recognize it by"
    for text in entry.examples:
        assert classify_guard(text)["kind"] == entry.name, text


@pytest.mark.parametrize("entry", KINDS, ids=lambda k: k.name)
def test_an_entry_reads_in_a_cause_and_a_step(entry):
    summary = cause_line(entry.name, "x", 1, ["2", "3"], False, entry.examples[0])
    assert summary and "{" not in summary
    advice = entry.advise("x", 1)
    assert advice and "{" not in advice
    if entry.rule is not None:
        assert entry.rule in RULES


def test_every_rule_answers_some_kind_and_rules_come_in_the_registrys_order():
    named = [rule for rule, _ in rules()]
    assert set(named) == set(RULES)
    assert named[:3] == ["adapter", "changed", "size"] and dict(rules())["state"] == ("attribute", "object_id", "type")


def test_an_unknown_kind_from_a_newer_report_reads_as_other():
    assert guard_kind("adapter_from_the_future") is BY_NAME["other"]


@pytest.mark.parametrize("name", ["showcase_trace", "two_rank_trace", "showcase_torch_logs.log", "train_step_inductor_trace"])
def test_every_guard_in_committed_logs_parses_to_a_kind_with_an_entry(name):
    report = ingest([str(LOGS / name)], keep_guard_text=True)
    guards = [g for rc in report.recompiles for g in rc.failed_guards]
    assert guards
    for g in guards:
        assert g.kind in BY_NAME
        assert classify_guard(g.reason)["kind"] == g.kind
    assert {c.kind for c in report.recompile_causes} <= set(BY_NAME)
