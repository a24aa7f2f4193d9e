"""Guard sources as people read them: a walk through `_modules` / `_parameters` / `_buffers` (and torch
2.13's `__dict__['_modules']` form) is shown as the dotted module path in the causes, the suggestions, the
terminal, Markdown and the TUI, while `failed_guards[].source` / `.reason` keep torch's text as evidence.
A parameter whose `requires_grad` changes gets advice about that parameter, never the `no_grad` advice."""

from __future__ import annotations

import io

import pytest

from ctc_doctor.analyzer.phases.suggest import suggest
from ctc_doctor.analyzer.readers.assembly import derive
from ctc_doctor.analyzer.readers.causes import recompile_causes
from ctc_doctor.analyzer.readers.parsing import classify_guard
from ctc_doctor.reports import models as rm
from ctc_doctor.reports.labels import module_path_of
from ctc_doctor.reports.markdown import render_markdown

from .conftest import saved

# guard texts torch 2.13 wrote (tests' own models: a nested ModuleDict that gains an entry, a deep flag,
# a dropout's `.training`, a parameter's `requires_grad`; the `__dict__` forms from modules with their
# own `__getattr__`, as diffusers' and peft's have)
DICT_LEN = (
    "len(self.__dict__['_modules']['mid_block'].__dict__['_modules']['attentions']._modules['0']"
    ".__dict__['_modules']['to_k'].__dict__['_modules']['lora_A']._modules) != 1"
)
DICT_FLAG = (
    "self.__dict__['_modules']['mid_block'].__dict__['_modules']['attentions']._modules['0'].flag == False"
    "  # if self.flag:  # m.py:30 in forward"
)
DEEP_TRAINING = (
    "self._modules['mid_block']._modules['attentions']._modules['0']._modules['d'].training == False"
    "  # return F.dropout(input, self.p, self.training, self.inplace)  # nn/modules/dropout.py:73 in forward"
)
DICT_PARAMETER = (
    "tensor 'self.__dict__['_modules']['mid_block'].__dict__['_modules']['attentions']._modules['0']"
    ".__dict__['_modules']['to_k'].__dict__['_modules']['lora_A']._modules['style_b']._parameters['weight']' "
    "requires_grad mismatch. expected requires_grad=0. Guard failed on a parameter, consider using "
    "torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters."
)
DICT_TRAINABLE = (  # a frozen model, one weight made trainable after the first call
    "tensor 'self.__dict__['_modules']['mid_block'].__dict__['_modules']['attentions']._modules['0']"
    ".__dict__['_modules']['to_k'].__dict__['_modules']['experts']._modules['style_a']._parameters['weight']' "
    "requires_grad mismatch. expected requires_grad=0. Guard failed on a parameter, consider using "
    "torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters."
)
WRAPPED_PARAMETER = (
    "tensor 'fn._parameters['weight']' requires_grad mismatch. expected requires_grad=1. Guard failed on a parameter, "
    "consider using torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters."
)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("reason", "path"),
    [
        (DICT_LEN, "len(mid_block.attentions.0.to_k.lora_A)"),
        (DICT_FLAG, "mid_block.attentions.0.flag"),
        (DEEP_TRAINING, "mid_block.attentions.0.d.training"),
        (DICT_PARAMETER, "mid_block.attentions.0.to_k.lora_A.style_b.weight"),
        (DICT_TRAINABLE, "mid_block.attentions.0.to_k.experts.style_a.weight"),
        (WRAPPED_PARAMETER, "fn.weight"),
    ],
    ids=["len", "flag", "training", "lora-weight", "trainable-weight", "wrapped-weight"],
)
def test_a_deep_guard_source_reads_as_its_module_path_and_stays_raw_as_evidence(reason, path):
    guard = classify_guard(f"0/0: {reason}")
    assert "_modules" in guard["source"] or "_parameters" in guard["source"]
    assert module_path_of(guard["source"]) == path
    shown = module_path_of(guard["reason"])
    assert path in shown and "_modules" not in shown and "_parameters" not in shown and "__dict__" not in shown
    assert guard["reason"] == reason  # the parser keeps torch's text


@pytest.mark.fast
def test_log_forms_and_sources_without_a_walk():
    assert module_path_of("L['self']._modules['blocks']._modules['3']._parameters['weight']") == "blocks.3.weight"
    assert module_path_of("len(self._modules['mid']._modules['lora_A']._modules)") == "len(mid.lora_A)"
    assert module_path_of("L['model']._modules['bn']._buffers['running_mean']") == "model.bn.running_mean"
    assert module_path_of("self._modules['blocks']._modules['0'].cache.layers[0].initialized") == "blocks.0.cache.layers[0].initialized"
    # nothing to walk: as before
    for source, shown in [
        ("L['self'].flag", "self.flag"),
        ("L['x']", "x"),
        ("kwargs['input_ids']", "kwargs['input_ids']"),
        ("___stack0", "___stack0"),
    ]:
        assert module_path_of(source) == shown
    assert (
        module_path_of("tensor 'x' size mismatch at index 0. expected 2, actual 3")
        == "tensor 'x' size mismatch at index 0. expected 2, actual 3"
    )


def _recompile(rid: str, reason: str, call: int, **kw: object) -> rm.Recompile:
    guard = rm.FailedGuard(**classify_guard(f"0/{call - 1}: {reason}"))
    return rm.Recompile(
        id=rid, function="forward", file="m.py", line=1, compile_id=f"0/{call}", call_index=call, failed_guards=[guard], **kw
    )


def _report(*recompiles: rm.Recompile) -> rm.Report:
    report = saved("analyzed-clean")
    report.recompiles = list(recompiles)
    report.suggestions = suggest(report)
    return derive(report)


@pytest.mark.fast
def test_causes_suggestions_and_renderings_show_the_module_path():
    report = _report(
        _recompile("R1", DICT_FLAG, 1, module_paths=[""]),
        _recompile("R2", DEEP_TRAINING.replace("'0'", "'1'"), 2, module_paths=["mid_block.attentions.1"]),
    )
    flag, training = report.recompile_causes
    assert flag.source == "mid_block.attentions.0.flag"
    assert flag.summary == "attribute mid_block.attentions.0.flag changes value (compiled for False)"
    assert training.source == "mid_block.attentions.1.d.training"
    state = next(s for s in report.suggestions if s.rule == "state-recompile")
    assert state.title.startswith("Stop changing `mid_block.attentions.0.flag`, `mid_block.attentions.1.d.training` between calls")
    # the JSON keeps torch's text
    assert report.recompiles[0].failed_guards[0].source.startswith("self.__dict__['_modules']['mid_block']")
    markdown = render_markdown(report)
    terminal = _terminal(report)
    for text in (markdown, terminal):
        assert "mid_block.attentions.0.flag" in text and "_modules" not in text and "__dict__" not in text


def _terminal(report: rm.Report) -> str:
    from rich.console import Console

    from ctc_doctor.reports.render import render_summary

    buf = io.StringIO()
    render_summary(report, Console(width=400, file=buf, force_terminal=False, color_system=None))
    return buf.getvalue()


@pytest.mark.fast
def test_per_layer_module_paths_fold_into_one_cause():
    events = [
        _recompile(
            f"R{i}", f"self._modules['blocks']._modules['{i}'].cache.layers[0].initialized == False", 1, module_paths=[f"blocks.{i}"]
        )
        for i in range(1, 4)
    ]
    (cause,) = recompile_causes(events)
    assert cause.per_instance and cause.source == "blocks.*.cache.layers[*].initialized"


NO_GRAD = "with torch.no_grad()"


@pytest.mark.fast
def test_a_parameter_that_changes_requires_grad_gets_advice_about_that_parameter():
    report = _report(_recompile("R1", DICT_TRAINABLE, 1, module_paths=[""]))
    (cause,) = report.recompile_causes
    path = "mid_block.attentions.0.to_k.experts.style_a.weight"
    assert cause.source == path and cause.summary == f"{path} requires_grad changes"
    rules = {s.rule: s for s in report.suggestions}
    assert "requires-grad-recompile" not in rules  # the input advice (and its no_grad) is not for parameters
    s = rules["requires-grad-parameter"]
    assert s.title == f"`{path}` changed `requires_grad` between calls: freeze it (or set it) before compiling"
    assert "adapter added trainable" in s.rationale and NO_GRAD not in (s.snippet or "")
    assert "model.get_submodule('mid_block.attentions.0.to_k.experts.style_a').weight.requires_grad_(False)" in (s.snippet or "")
    assert s.applies_to == ["R1"] and s.id in cause.suggestion_ids


@pytest.mark.fast
def test_an_input_keeps_the_input_advice_and_loses_no_grad_when_the_run_is_under_it():
    reason = "tensor 'x' requires_grad mismatch. expected requires_grad=0"
    plain = {s.rule: s for s in _report(_recompile("R1", reason, 1, module_paths=[""])).suggestions}
    assert "requires-grad-parameter" not in plain
    assert plain["requires-grad-recompile"].snippet == "with torch.no_grad():\n    out = compiled_model(x)"
    under = _recompile("R1", reason, 1, module_paths=[""], trigger="train.py:24 in evaluate, no_grad")
    (s,) = [s for s in _report(under).suggestions if s.rule.startswith("requires-grad")]
    assert s.rule == "requires-grad-recompile" and "no_grad()`)" not in s.title and NO_GRAD not in (s.snippet or "")


# --- live: real torch.compile (backend eager) --------------------------------------------------------


def _model():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.use_gate = False

        def forward(self, x):
            x = self.proj(x)
            return torch.sigmoid(x) * x if self.use_gate else x

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.ModuleDict({"layers": nn.ModuleList([Block(), Block()])})

        def forward(self, x):
            for block in self.encoder["layers"]:
                x = block(x)
            return x

    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 4)


def _analyzed(before_call):
    from ctc_doctor import analyze
    from ctc_doctor.analyzer.doors.pipeline import AnalyzeOptions
    from ctc_doctor.workload import Workload

    model, x = _model()
    return analyze(Workload(model, (x,), variants=[(x,), (x,)], before_call=before_call), AnalyzeOptions(explain=False))


def test_a_nested_modules_attribute_reads_as_a_dotted_path_live():
    def toggle(model, index):
        if index == 1:
            model.encoder["layers"][1].use_gate = True

    report = _analyzed(toggle)
    (cause,) = report.recompile_causes
    assert cause.source == "encoder.layers.1.use_gate", cause
    assert cause.summary == "attribute encoder.layers.1.use_gate changes value (compiled for False)"
    raw = {g.source for rc in report.recompiles for g in rc.failed_guards}
    assert raw == {"self._modules['encoder']._modules['layers']._modules['1'].use_gate"}
    state = next(s for s in report.suggestions if s.rule == "state-recompile")
    assert "`encoder.layers.1.use_gate`" in state.title
    assert "encoder.layers.1.use_gate" in render_markdown(report) and "_modules" not in render_markdown(report)
    assert "_modules" not in _terminal(report)


def test_a_parameter_made_trainable_gets_the_parameter_advice_live():
    def unfreeze(model, index):
        if index == 0:
            model.requires_grad_(False)
        if index == 1:
            model.encoder["layers"][0].proj.weight.requires_grad_(True)

    report = _analyzed(unfreeze)
    (cause,) = report.recompile_causes
    assert cause.kind == "requires_grad" and cause.source == "encoder.layers.0.proj.weight", cause
    assert all("_parameters['weight']" in (g.source or "") for rc in report.recompiles for g in rc.failed_guards)
    rules = {s.rule: s for s in report.suggestions}
    assert "requires-grad-recompile" not in rules
    s = rules["requires-grad-parameter"]
    assert s.title.startswith("`encoder.layers.0.proj.weight` changed `requires_grad` between calls")
    assert "model.get_submodule('encoder.layers.0.proj').weight.requires_grad_(False)" in (s.snippet or "")
    assert all(NO_GRAD not in (t.snippet or "") and "no_grad()`)" not in t.title for t in report.suggestions)


@pytest.mark.fast
def test_a_diffusers_module_stack_reads_as_a_module_path():
    from ctc_doctor.analyzer.readers.compile_time import stack_path

    assert stack_path("L['self'].__dict__['_modules']['down_blocks'].__dict__['_modules']['0']") == "down_blocks.0"
    assert stack_path("self._modules['layers']._modules['0'].fc") == "layers.0.fc"
