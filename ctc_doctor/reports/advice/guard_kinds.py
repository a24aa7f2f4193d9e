"""The kinds of recompile cause, one entry each: everything the doctor knows of a guard kind in one place.

A recompile happens because a guard failed; `readers/parsing.classify_guard` gives each failed guard a
kind (`GuardKind` in the report models). Every other place that treats kinds differently reads this
registry instead of keeping a table of its own:
  - the parser, for the words a tensor guard uses (`tensor 'x' size mismatch at index 0`);
  - the causes (`readers/causes`), for the one-line summary and whether the change travels into every
    frame the value reaches (a tensor's property does, a Python value of one frame does not);
  - the costs (`readers/compile_time`), for how a cause of the kind recurs;
  - the next steps (`reports/advice`), for the one line of advice;
  - the suggestion rules (`analyzer/phases/suggest/recompiles.RULES`), by the rule's name.

Adding a kind: one `GuardKind` value in the models, one entry here with the guard texts torch writes
for it (`examples`, checked against the parser by the tests) and its rule. Torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Recurrence = Literal["one_off", "by_values", "bounded"]
"""How a cause of the kind recurs, before the evidence of its own events (`readers/compile_time.recurrence`):
`one_off` (a pair of states the workload switches between once: grad mode on and off), `by_values`
(each new value compiles anew: recurring once it has compiled a few), `bounded` (a few variants)."""


@dataclass(frozen=True)
class Change:
    """What a cause's summary says: who changed (`name`), in which dimension, through which values."""

    name: str
    source: str | None
    dim: int | None
    values: list[str]
    reason: str
    reasons: list[str] = field(default_factory=list)
    """Every event's guard text (a cause that folds several, like an adapter's), oldest first."""

    @property
    def shown(self) -> str:
        """The values as `2 → 3`, the middle folded past four."""
        values = self.values
        if len(values) > 4:
            values = [*values[:2], f"… ({len(values) - 3} more)", values[-1]]
        return " → ".join(values)


def _size(kind: GuardKindEntry, c: Change) -> str:
    what = f"{c.name} dim {c.dim}" if c.dim is not None else f"{c.name} shape"
    return f"{what} changes {c.shown}" if len(c.values) > 1 else f"{what} changes (was {c.shown or '?'})"


def _tensor_property(kind: GuardKindEntry, c: Change) -> str:
    what = f"{c.name} {kind.noun or kind.name}"
    return f"{what} changes {c.shown}" if len(c.values) > 1 else f"{what} changes"


def _value(kind: GuardKindEntry, c: Change) -> str:
    label = "attribute " if kind.name == "attribute" else ""
    return f"{label}{c.name} changes value" + (f" (compiled for {', '.join(c.values)})" if c.values else "")


def _type(kind: GuardKindEntry, c: Change) -> str:
    return f"{c.name} changes type" + (f" (was {c.values[0]})" if c.values else "")


def _identity(kind: GuardKindEntry, c: Change) -> str:
    return f"{c.name} is a different object each time"


def _global_state(kind: GuardKindEntry, c: Change) -> str:
    return f"global state changes: {c.source}" if c.source else "global state changes (grad mode, autocast…)"


_ADAPTER_CHANGES = (
    (re.compile(r"len\(.*lora_|lora_[AB]\b.*(?:___check_(?:type|obj)_id|is not|is\b)"), "added or removed"),
    (re.compile(r"active_adapter|_disable_adapters"), "switched"),
    (re.compile(r"\.scaling\["), "rescaled"),
    (re.compile(r"requires_grad"), "made trainable (or frozen)"),
)
"""How a LoRA adapter changed, by what its guard checks: the number of adapters under `lora_A`, the active
adapter, a scale, the grad mode of its weights."""


def adapter_change(text: str) -> str:
    """`added or removed`, `switched`, `rescaled`, `made trainable (or frozen)`, else `changed`."""
    return next((what for pattern, what in _ADAPTER_CHANGES if pattern.search(text)), "changed")


def _adapter(kind: GuardKindEntry, c: Change) -> str:
    changes = list(dict.fromkeys(adapter_change(text) for text in (c.reasons or [c.reason])))
    where = f" (`{c.name}`)" if c.source else ""
    return f"a LoRA adapter was {' / '.join(changes)} after compile{where}"


_MODEL_CHANGES = (
    (re.compile(r"KeyError on .*_parameters\["), "a parameter was removed or reparametrized (pruning, weight norm)"),
    (re.compile(r"expected type of .*_parameters\[.*but found"), "a parameter was replaced by a tensor subclass (quantization)"),
)
"""How the model changed after compile, by what its guard checks (torch 2.13's texts)."""


def model_change(text: str) -> str:
    """What changed in the model after compile, in plain words (`a parameter was removed ...`)."""
    return next((what for pattern, what in _MODEL_CHANGES if pattern.search(text)), "the model changed")


_PARAMETER_NAME = re.compile(r"_modules\['([^']+)'\]|_parameters\['([^']+)'\]")


def changed_path(text: str) -> str | None:
    """`fc.weight` from `self._modules['fc']._parameters['weight']` in a guard's text."""
    src = re.search(r"(?:self|L\['self'\])((?:\._modules\['[^']+'\])*(?:\._parameters\['[^']+'\])?)", text)
    if src is None or not src.group(1):
        return None
    return ".".join(a or b for a, b in _PARAMETER_NAME.findall(src.group(1))) or None


def _changed(kind: GuardKindEntry, c: Change) -> str:
    changes = list(dict.fromkeys(model_change(text) for text in (c.reasons or [c.reason])))
    path = changed_path(c.reason)
    where = f" (`{path}`)" if path else ""
    return f"the model changed after compile{where}: {' / '.join(changes)}"


def _raw(kind: GuardKindEntry, c: Change) -> str:
    return c.reason if len(c.reason) <= 100 else c.reason[:97] + "..."


@dataclass(frozen=True)
class GuardKindEntry:
    """One kind of failed guard."""

    name: str
    """The `GuardKind` value."""
    family: Literal["tensor", "python", "state", "unknown"]
    """`tensor`: a property of a tensor input, checked by Dynamo's tensor guards; `python`: a Python
    value, attribute, type or object the code read; `state`: torch's global state."""
    advice: str
    """One line of advice; `{src}` and `{dim}` are the guard's source and dimension."""
    rule: str | None
    """The suggestion rule that answers it (a key of `analyzer/phases/suggest/recompiles.RULES`); kinds
    that share a rule get one suggestion between them. None: no suggestion (the guard text says it all)."""
    examples: tuple[str, ...]
    """Guard-failure texts torch writes for this kind (from real logs): the parser must classify each
    as this kind (tests/test_guard_kinds.py)."""
    summary: Callable[[GuardKindEntry, Change], str] = field(repr=False)
    """The cause's one line (`x dim 0 changes 2 → 3`)."""
    tensor_words: tuple[str, ...] = ()
    """The words of `tensor '<src>' <word> mismatch` that mean this kind."""
    noun: str | None = None
    """How the summary names the property (`strides`); the kind's name when None."""
    recurrence: Recurrence = "bounded"
    claims: re.Pattern[str] | None = None
    """A guard whose text matches is of this kind whatever its shape (an adapter's `len(...lora_A...)`, an
    attribute or tensor guard on its structure): the parser gives it this kind over the structural one."""

    @property
    def travels(self) -> bool:
        """A change of this kind shows in every frame the value reaches (so the same change seen in two
        frames of one call is one cause): true of a tensor's properties."""
        return self.family == "tensor"

    def advise(self, source: str | None, dim: int | None) -> str:
        """The advice with the guard's own source and dimension in it."""
        return self.advice.format(src=source or "the input", dim=dim if dim is not None else "dim")

    def describe(
        self, name: str, source: str | None, dim: int | None, values: list[str], reason: str, reasons: list[str] | None = None
    ) -> str:
        """The cause's one-line summary (`reasons`: every event's guard text, when the cause folds several)."""
        return self.summary(self, Change(name, source, dim, values, reason, reasons or []))


KINDS: tuple[GuardKindEntry, ...] = (
    GuardKindEntry(
        name="adapter",
        family="python",
        advice="load every LoRA adapter before compiling, or prepare the model for hotswapping (enable_lora_hotswap) before the first load",
        rule="adapter",
        examples=(
            "0/0: len(self._modules['to_k']._modules['lora_A']._modules) != 1",
            "0/1: self._modules['to_q']._active_adapter is self._modules['to_k']._active_adapter",
            "0/2: self._modules['to_k'].scaling['b'] == 1.0                # result = result + lora_B(lora_A(dropout(x))) * scaling",
            "0/0: self.active_adapter == 'default'                         # if self.peft_config[self.active_adapter].is_prompt_learning:",
            "0/0: tensor 'self._modules['to_k']._modules['lora_A']._modules['b']._parameters['weight']' requires_grad mismatch. "
            "expected requires_grad=0",
        ),
        summary=_adapter,
        recurrence="by_values",
        claims=re.compile(
            r"lora_(?:[AB]|embedding_[AB]|magnitude_vector)\b|\bactive_adapters?\b|_active_adapter\b|\.scaling\[|_disable_adapters\b"
        ),
    ),
    GuardKindEntry(
        name="changed",
        family="python",
        advice="make the change (pruning, quantization, weight norm) before compiling: compile the model as it will run",
        rule="changed",
        examples=(
            "0/0: KeyError on self._modules['fc']._parameters['weight']",
            "0/0: expected type of 'self._modules['fc']._parameters['weight']' to be a tensor type, "
            "' but found <class 'torchao.quantization.Int8Tensor'>",
        ),
        summary=_changed,  # bounded, not one_off: a one-off is "expected" and left out of the verdict
        # a submodule whose type changes (`___check_type_id(self._modules['act'], ...)`) stays a `type` cause:
        # by its text alone, a module swapped once is not told from one a setting flips between calls
        claims=re.compile(r"KeyError on .*_parameters\[|expected type of .*_parameters\[.*but found"),
    ),
    GuardKindEntry(
        name="size",
        family="tensor",
        advice="mark the changing dimension dynamic: torch._dynamo.mark_dynamic({src}, {dim}), or pad inputs to a few bucket sizes",
        rule="size",
        examples=(
            "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5",
            "tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12",
            "0/0: tensor 'x' rank mismatch. expected 2, actual 3",
        ),
        summary=_size,
        tensor_words=("size", "rank", "dim"),
    ),
    GuardKindEntry(
        name="dtype",
        family="tensor",
        advice="call the model with one dtype (cast inputs before the call)",
        rule="dtype",
        examples=("0/1: tensor 'x' dtype mismatch. expected Float, actual Double",),
        summary=_tensor_property,
        tensor_words=("dtype",),
    ),
    GuardKindEntry(
        name="value",
        family="python",
        advice="pass the changing Python scalar as a tensor, or let it be dynamic (it changes per call)",
        rule="value",
        examples=("0/0: s == 1.0                          # def forward(self, x, s): return x * s",),
        summary=_value,
        recurrence="by_values",
    ),
    GuardKindEntry(
        name="attribute",
        family="python",
        advice="do not change module attributes between calls; pass the switch as an argument or build two modules",
        rule="state",
        examples=(
            "0/0: self.use_relu == False            # if self.use_relu:",
            "0/0: self._modules['d'].training == True  # return F.dropout(...)",
        ),
        summary=_value,
        recurrence="by_values",
    ),
    GuardKindEntry(
        name="object_id",
        family="python",
        advice="avoid guarding on object identity: reuse the same objects between calls",
        rule="state",
        examples=("0/0: ___check_obj_id(L['self'].act, 1403)",),
        summary=_identity,
        recurrence="by_values",
    ),
    GuardKindEntry(
        name="type",
        family="python",
        advice="keep the same submodule types per call site (one forward shared by blocks with different children recompiles)",
        rule="state",
        examples=("0/0: ___check_type_id(self._modules['act'], 94560513906352), type=<class 'torch.nn.modules.activation.ReLU'>  # x",),
        summary=_type,
    ),
    GuardKindEntry(
        name="requires_grad",
        family="tensor",
        advice="keep requires_grad consistent between calls (or expect one extra compile per mode)",
        rule="requires_grad",
        examples=("1/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",),
        summary=_tensor_property,
        tensor_words=("requires_grad",),
    ),
    GuardKindEntry(
        name="global_state",
        family="state",
        advice="keep global state (grad mode, autocast, deterministic flags) the same between calls",
        rule="global_state",
        examples=("0/0: GLOBAL_STATE changed: grad_mode ",),
        summary=_global_state,
        recurrence="one_off",
    ),
    GuardKindEntry(
        name="stride",
        family="tensor",
        advice="make the input contiguous before the call, or mark the dimension dynamic",
        rule="stride",
        examples=("0/0: tensor 'x' stride mismatch at index 0. expected 8, actual 1",),
        summary=_tensor_property,
        tensor_words=("stride",),
        noun="strides",
    ),
    GuardKindEntry(
        name="device",
        family="tensor",
        advice="keep inputs on one device",
        rule="advice",
        examples=("0/0: tensor 'x' device mismatch. expected device index 0, actual 1",),
        summary=_tensor_property,
        tensor_words=("device",),
    ),
    GuardKindEntry(
        name="other",
        family="unknown",
        advice="see the failed guard text",
        rule=None,
        examples=(
            "0/0: 'NoneType' object has no attribute 'size'",
            "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU), actual DispatchKeySet(CPU, AutogradCPU)",
        ),
        summary=_raw,
        tensor_words=("dispatch key set", "layout"),
    ),
)
"""The kinds, in the order their suggestions are listed (by the first kind of each rule)."""

BY_NAME: dict[str, GuardKindEntry] = {k.name: k for k in KINDS}
TENSOR_WORDS: dict[str, str] = {word: k.name for k in KINDS for word in k.tensor_words}
CLAIMS: tuple[tuple[re.Pattern[str], str], ...] = tuple((k.claims, k.name) for k in KINDS if k.claims is not None)
"""(pattern, kind) of the kinds that claim a guard by its text (`GuardKindEntry.claims`)."""
"""`tensor '<src>' <word> mismatch` -> the kind."""


def guard_kind(name: str) -> GuardKindEntry:
    """The entry of a kind; `other`'s for a name no entry has (a report from a newer doctor)."""
    return BY_NAME.get(name, BY_NAME["other"])


def rules() -> list[tuple[str, tuple[str, ...]]]:
    """(rule, the kinds it answers), in the order of `KINDS`."""
    out: dict[str, list[str]] = {}
    for k in KINDS:
        if k.rule is not None:
            out.setdefault(k.rule, []).append(k.name)
    return [(rule, tuple(kinds)) for rule, kinds in out.items()]
