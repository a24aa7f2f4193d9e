"""Parsers on texts captured from torch 2.13 (tests/data) and the older 2.6 formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctc_doctor.analyzer.readers.parsing import classify_guard, parse_break_text, split_recompile_reasons

pytestmark = pytest.mark.fast

DATA = Path(__file__).parent / "data"


def test_a_nested_loop_break_keeps_the_cause_the_effect_and_both_ids():
    parsed = parse_break_text((DATA / "break_in_loop_2.13.txt").read_text())
    assert parsed.gb_type == "graph break in loop"
    assert parsed.causes == ["Data-dependent branching"]
    assert parsed.registry_ids == ["GB7000", "GB0170"]
    assert parsed.file.endswith("models.py") and parsed.line == 8
    assert any("torch.cond" in h for h in parsed.hints)
    assert parsed.frames[-1][:3] == ("/tmp/scratch/models.py", 8, "forward")
    assert parsed.frames[-1][3] == "if x.sum() > 0:"


def test_a_legacy_2_6_break_text_maps_to_a_modern_gb_type():
    text = (
        "Graph break in user code at /m.py:10\nReason: generic_jump TensorVariable()\n"
        'User code traceback:\n  File "/m.py", line 10, in forward\n    if x.sum() > 0:\n'
    )
    parsed = parse_break_text(text)
    assert parsed.gb_type == "Data-dependent branching" and parsed.registry_ids == []
    assert (parsed.file, parsed.line) == ("/m.py", 10)


@pytest.mark.parametrize(
    ("reason", "kind", "source", "expected", "actual", "dim"),
    [
        ("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5", "size", "x", "4", "5", 0),
        ("0/0: tensor 'x' stride mismatch at index 0. expected 8, actual 1", "stride", "x", "8", "1", 0),
        ("0/1: tensor 'x' dtype mismatch. expected Float, actual Double", "dtype", "x", "Float", "Double", None),
        ("1/0: tensor 'x' requires_grad mismatch. expected requires_grad=0", "requires_grad", "x", "0", None, None),
        ("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12", "size", "kwargs['input_ids']", "8", "12", 1),
        ("0/0: s == 1.0                          # def forward(self, x, s): return x * s", "value", "s", "1.0", None, None),
        ("0/0: self.use_relu == False            # if self.use_relu:", "attribute", "self.use_relu", "False", None, None),
        (
            "0/0: self._modules['d'].training == True  # return F.dropout(...)",
            "attribute",
            "self._modules['d'].training",
            "True",
            None,
            None,
        ),
        (
            "0/0: ___check_type_id(self._modules['act'], 94560513906352), type=<class 'torch.nn.modules.activation.ReLU'>  # x",
            "type",
            "self._modules['act']",
            "torch.nn.modules.activation.ReLU",
            None,
            None,
        ),
        ("0/0: ___check_obj_id(L['self'].act, 1403)", "object_id", "L['self'].act", None, None, None),
        ("0/0: GLOBAL_STATE changed: grad_mode ", "global_state", "grad_mode", None, None, None),
        ("0/0: 'NoneType' object has no attribute 'size'", "other", None, None, None, None),
    ],
)
def test_guard_failures_are_classified_with_source_and_values(reason, kind, source, expected, actual, dim):
    g = classify_guard(reason)
    assert (g["kind"], g["source"], g["expected"], g["actual"], g["dim"]) == (kind, source, expected, actual, dim)


def test_recompile_reason_payloads_come_as_a_string_or_a_json_list():
    assert split_recompile_reasons("0/0: n == 1") == ["0/0: n == 1"]
    assert split_recompile_reasons('[\n"0/1: a",\n"0/0: b"\n]') == ["0/1: a", "0/0: b"]
