"""Recompile rules for module state (the `state` rule of the guard kinds' registry: attribute, object_id and
type guards): a module's integer counter, a submodule swapped once, state set on the first call, state a
library manages in its own code, and the rest ("stop changing it, or compile one model per setting")."""

from __future__ import annotations

import re

from ....reports import models as rm
from ....reports.labels import module_path_of
from ....reports.links import DOCS
from ...readers.compile_time import hit_the_limit
from .base import Failures, RuleContext, config
from .changes import swapped_once, swapped_rule

_SELF_ATTRIBUTE = re.compile(r"^(?:self|L\['self'\])(?:\._modules\['\w+'\]|\.\w+)*\.(?P<name>[A-Za-z_]\w*)$")
INT = re.compile(r"^-?\d+$")


def int_attributes(failures: Failures) -> dict[str, list[str]]:
    """Integer attributes of a module that the failed guards pinned (`self.step == 7`): source -> the
    recompiles. Dynamo treats them as static, so a counter recompiles once per value."""
    out: dict[str, list[str]] = {}
    for rc, guard in failures.items:
        if guard.kind == "attribute" and guard.source and _SELF_ATTRIBUTE.match(guard.source) and INT.match(guard.expected or ""):
            out.setdefault(guard.source, []).append(rc.id)
    return out


def _int_attribute_rule(ctx: RuleContext, attributes: dict[str, list[str]]) -> None:
    """A module's integer attribute that keeps changing (a step counter): torch's own option makes it a
    symbolic int at its first recompile (verified on a copy), or the counter moves into a tensor."""
    names = ", ".join(f"`{module_path_of(s)}`" for s in list(attributes)[:3])
    applies = list(dict.fromkeys(r for ids in attributes.values() for r in ids))
    limit = any(hit_the_limit(m) for m in ctx.report.compile_metrics)
    cliff = " until the recompile limit, after which the frame runs eagerly" if limit else ""
    option = "allow_unspec_int_on_nn_module"
    if ctx.facts is None or option in ctx.facts.config_options:
        config(
            ctx,
            "unspec-int-attribute",
            f"Let the integer attribute {names} be dynamic: `torch._dynamo.config.{option} = True`",
            f"Dynamo treats integer attributes of an nn.Module as static: {names} compiles once per value{cliff}. "
            "With this option its first recompile makes it a symbolic integer and later values reuse that graph. "
            "Scope it to the compiled calls with `torch._dynamo.config.patch`, or set it once before the first call.",
            applies,
            (option, True),
            f"with torch._dynamo.config.patch({option}=True):\n    out = compiled_model(x)",
            [DOCS["troubleshooting"]],
        )
    first = list(attributes)[0]
    name = first.rsplit(".", 1)[-1]
    relative = module_path_of(first).removeprefix("self.")
    keep = f"keep {names} in a tensor buffer"
    ctx.add(
        "tensor-counter",
        keep[0].upper() + keep[1:],  # an alternative that reads alone: "what to do next" may list it without S1
        f"A tensor is an input like any other: a new value of `{name}` then changes no guard. Update it in place "
        "(`+=` on the buffer, or `.fill_(value)`), never by assigning a Python int. Verified on a copy whose "
        "modules hold it as a 0-d int64 buffer.",
        "source_edit",
        applies,
        auto_applicable=True,
        snippet=f"self.register_buffer('{name}', torch.zeros((), dtype=torch.long), persistent=False)\n"
        f"# each step, instead of assigning an int:\nmodel.{name}.fill_(step)",
        references=[DOCS["troubleshooting"]],
        action=rm.FixAction(type="counter_to_tensor", attribute=relative),
    )


def _lazy_state_rule(ctx: RuleContext, failures: Failures) -> None:
    """State a module (or its library: torchvision's RoIAlign scales, a cache made on first use) sets on its
    first call: the first compile guarded on `None`, the second call recompiles once for the value it now
    holds. Nothing changes it after that, so "stop changing it" is wrong; one eager call before compiling
    sets it up outside the compiled code (verified by `fix`, as for first-call breaks)."""
    sources = sorted({module_path_of(g.source) for _, g in failures.items if g.source})
    shown = ", ".join(f"`{s}`" for s in sources[:3]) or "module state"
    applies = failures.ids()
    existing = next((s for s in ctx.out if s.rule == "warm-up-before-compile"), None)
    if existing is not None:  # a first-call break asked for the same eager call: one suggestion for both
        existing.applies_to = list(dict.fromkeys([*existing.applies_to, *applies]))
        return
    ctx.add(
        "warm-up-before-compile",
        "Call the model once eagerly before compiling it",
        f"{shown} is set on the model's first call (the first compile saw it as None), so the second call "
        "recompiles once for the value it now holds; nothing changes it after that. One eager call before "
        "`torch.compile` sets it up outside the compiled code, and the compile sees it as it stays.",
        "source_edit",
        applies,
        auto_applicable=True,
        snippet="with torch.no_grad():\n    model(*example_args, **example_kwargs)  # first-call set-up runs eagerly\n"
        "compiled = torch.compile(model)",
        references=[DOCS["troubleshooting"]],
        action=rm.FixAction(type="warm_up"),
    )


_IMPORTED = re.compile(r"^G\[['\"]__import_(?P<module>[A-Za-z_]\w*?)(?:_dot_|['\"])")
"""How Dynamo names a module the code imported: `G['__import_torch_geometric_dot_typing']`."""


def library_of(rc: rm.Recompile, guard: rm.FailedGuard | None = None) -> str | None:
    """The library that keeps the guarded state: the one whose own code the recompiled frame is
    (`torchdiffeq`), or whose module-level state the guard reads (`G['__import_kornia_dot_...']`); None for
    the user's code, torch's, the standard library's, or code with no file."""
    from ...readers.sources import classify_file, module_file

    own, library = classify_file(rc.file)
    match = _IMPORTED.match(guard.source or "") if guard is not None else None
    if (own or library in (None, "python")) and match is not None:
        origin = module_file(match.group("module"))
        own, library = classify_file(origin) if origin else (True, None)
    return None if own or library in (None, "python", "stdlib", "torch") else library


def _library_state_rule(ctx: RuleContext, failures: Failures) -> None:
    """State a library's own code keeps and changes (a module-level cache, a registry, an object its solver
    passes between its own functions, a field its batch objects set): not the user's to stop changing. If it
    settles after a first call, one eager call before compiling sets it up outside the compiled code (`fix`
    checks it, as for lazy state); if not, what keeps that library's code out of the compiled region (the
    boundary suggestions) is the way."""
    sources = sorted({module_path_of(g.source) for _, g in failures.items if g.source})
    shown = ", ".join(f"`{s}`" for s in sources[:3]) or "its state"
    libraries = sorted({lib for rc, g in failures.items if (lib := library_of(rc, g))})
    where = sorted({f"{rc.file.rsplit('/', 1)[-1]}:{rc.line}" for rc, _ in failures.items})
    existing = next((s for s in ctx.out if s.rule == "warm-up-before-compile"), None)
    if existing is not None:  # one eager call asked for already: one suggestion for both
        existing.applies_to = list(dict.fromkeys([*existing.applies_to, *failures.ids()]))
        return
    ctx.add(
        "warm-up-before-compile",
        "Call the model once eagerly before compiling it",
        f"{shown} is state {', '.join(libraries)} manages in its own code ({', '.join(where[:3])}), not something you "
        "set, so there is nothing of yours to stop changing. If it is set up once (a cache filled on first use), one "
        "eager call before `torch.compile` does that outside the compiled code, and the compile sees it as it stays: "
        "checked on a copy. If it keeps changing, keep that library code out of the compiled region instead.",
        "source_edit",
        failures.ids(),
        auto_applicable=True,
        snippet="with torch.no_grad():\n    model(*example_args, **example_kwargs)  # the library's set-up runs eagerly\n"
        "compiled = torch.compile(model)",
        references=[DOCS["troubleshooting"]],
        action=rm.FixAction(type="warm_up"),
    )


def state_rule(ctx: RuleContext, failures: Failures) -> None:
    attributes = int_attributes(failures)
    if attributes:
        _int_attribute_rule(ctx, attributes)
        counted = {r for ids in attributes.values() for r in ids}
        failures = Failures(failures.kinds, [(rc, g) for rc, g in failures.items if rc.id not in counted])
        if not failures.items:
            return
    swapped = swapped_once(failures)
    if swapped:
        swapped_rule(ctx, Failures(failures.kinds, swapped))
        failures = Failures(failures.kinds, [(rc, g) for rc, g in failures.items if (rc, g) not in swapped])
        if not failures.items:
            return
    lazy = [(rc, g) for rc, g in failures.items if g.expected == "None" and rc.call_index == 1]
    if lazy:
        _lazy_state_rule(ctx, Failures(failures.kinds, lazy))
        failures = Failures(failures.kinds, [(rc, g) for rc, g in failures.items if (rc, g) not in lazy])
        if not failures.items:
            return
    managed = [(rc, g) for rc, g in failures.items if library_of(rc, g) is not None]
    if managed:
        _library_state_rule(ctx, Failures(failures.kinds, managed))
        failures = Failures(failures.kinds, [(rc, g) for rc, g in failures.items if (rc, g) not in managed])
        if not failures.items:
            return
    sources = sorted({module_path_of(g.source) for _, g in failures.items if g.source})
    shown = ", ".join(f"`{s}`" for s in sources[:3]) or "module state"
    ctx.add(
        "state-recompile",
        f"Stop changing {shown} between calls, or compile one model per setting",
        "Compiled code guards on module attributes and object identities it read. Flipping them between calls "
        "recompiles, and alternating settings can exhaust the recompile limit. Fix the setting before "
        "compiling, keep one compiled wrapper per setting, or read the flag from a tensor.",
        "source_edit",
        failures.ids(),
        snippet="fast_gelu = torch.compile(model_with_gelu)\nfast_relu = torch.compile(model_with_relu)",
        references=[DOCS["troubleshooting"]],
    )
