"""Recompile rules for a model changed after compile or sizes made inside a library: a parameter pruned or
quantized in place, a submodule swapped for another class once (each "make the change before compiling",
verified on a build() target by making its own change first on a copy: `change_first`), and sizes a
library's code makes from the data while the inputs keep theirs (`dynamic=True`, not "pad your inputs")."""

from __future__ import annotations

from ....reports import models as rm
from ....reports.labels import module_path_of
from ....reports.links import DOCS
from ...readers.causes import STORM_INSTANCES
from .base import Failures, RuleContext


def made_inside_libraries(ctx: RuleContext, failures: Failures, marked: bool) -> bool:
    """Every size that changes is one a library's code makes from the data, in a frame of its own (after a
    break): the number of boxes a detector keeps, a count of matches, while the inputs keep their sizes from
    call to call. No input of yours has it, so padding your inputs does not bound it; `dynamic=True` compiles
    those frames shape-generic from the start (torch's automatic dynamic shapes already makes a dim generic
    after its first recompile). Said so; True when it was."""
    from ...readers.sources import classify_file

    if marked or ctx.facts is None:
        return False
    if any(len({tuple(s) for s in shapes if s is not None}) > 1 for shapes in ctx.facts.arg_shapes.values()):
        return False  # the inputs change size: the sizes inside may follow them (a sequence length), and padding bounds them
    where = [classify_file(rc.file) for rc, _ in failures.items]
    if not where or any(own or library in (None, "python") for own, library in where):
        return False
    if any(len(rc.module_paths) >= STORM_INSTANCES for rc, _ in failures.items):
        return False  # one module class run by several instances: their own widths (weights), not data sizes
    libraries = sorted({library for _, library in where if library})
    tensors = sorted({g.source.split("'")[1] if g.source and "'" in g.source else (g.source or "?") for _, g in failures.items})
    shown = ", ".join(f"`{t}`" for t in tensors[:3]) + (f" and {len(tensors) - 3} more" if len(tensors) > 3 else "")
    functions = sorted({rc.function for rc, _ in failures.items})
    ctx.add(
        "dynamic-library-sizes",
        f"{'Or compile' if marked else 'Compile'} with `dynamic=True`: the sizes that change are made inside "
        f"{', '.join(libraries)}, from your data",
        f"{shown} change size in {', '.join(libraries)}'s own code ({', '.join(f'`{f}`' for f in functions[:3])}, frames "
        "of their own after a break): tensors the model makes from the data (how many boxes it keeps, how many "
        "matches it finds), not inputs you pass, so padding your inputs does not bound them. `dynamic=True` compiles "
        "those frames shape-generic from the start; without it, torch's automatic dynamic shapes makes each dim "
        "generic after its first recompile (the cause then settles: `bounded`).",
        "dynamic_shapes",
        failures.ids(),
        snippet="compiled = torch.compile(model, dynamic=True)",
        references=[DOCS["dynamic"]],
    )
    return True


def _change_first(ctx: RuleContext, call: int | None) -> rm.FixAction | None:
    """The action that checks "make the change before compiling": a build() target's change comes from its
    `before_call` hook for `call`, which the fix check makes before compiling (None: a script's own code)."""
    if call is None or ctx.report.target is None or ctx.report.target.kind != "build":
        return None
    return rm.FixAction(type="change_first", call=call)


def swapped_once(failures: Failures) -> list[tuple[rm.Recompile, rm.FailedGuard]]:
    """Type guards on submodules that changed class once and stayed so (one recompile each, in one call): a
    submodule swapped after compile, not a setting flipped between calls (which recompiles again and again)."""
    items = [(rc, g) for rc, g in failures.items if g.kind == "type" and g.source and "_modules[" in g.source]
    by_source: dict[str, list[rm.Recompile]] = {}
    for rc, g in items:
        by_source.setdefault(g.source or "", []).append(rc)
    calls = {rc.call_index for rc, _ in items}
    # after compile: in a later call (the first call's type recompiles are blocks with other children)
    if not items or any(len(rcs) > 1 for rcs in by_source.values()) or len(calls) != 1 or not next(iter(calls)):
        return []
    return items


def swapped_rule(ctx: RuleContext, failures: Failures) -> None:
    """A submodule swapped for another class after compile: make the swap before compiling (on a build()
    target, verified by making the target's own change first on a copy, as for pruning)."""
    rc, g = failures.items[0]
    paths = sorted({module_path_of(g.source) for _, g in failures.items if g.source})
    shown = ", ".join(f"`{p}`" for p in paths[:3])
    was = f" (it was {g.expected.rsplit('.', 1)[-1]})" if g.expected else ""
    ctx.add(
        "change-before-compile",
        f"Swap {shown} before compiling",
        f"{shown} became another class{was} before call {rc.call_index} and stayed so: the model changed after it was "
        "compiled, and the compiled code, which guarded on the class, recompiles once for the new one. Make the swap "
        "before `torch.compile`, and compile the model as it will run.",
        "source_edit",
        failures.ids(),
        snippet="model.fc = new_module  # first the swap\ncompiled = torch.compile(model)",
        references=[DOCS["troubleshooting"]],
        action=_change_first(ctx, rc.call_index),
    )


def changed_rule(ctx: RuleContext, failures: Failures) -> None:
    """The model was changed after compile (pruned, quantized in place, reparametrized, a submodule swapped):
    one cause per frame, and the advice is to make the change before compiling."""
    from ....reports.advice.guard_kinds import changed_path, model_change

    texts = [g.reason for _, g in failures.items]
    changes = list(dict.fromkeys(model_change(t) for t in texts))
    paths = list(dict.fromkeys(p for p in (changed_path(t) for t in texts) if p))
    shown = ", ".join(f"`{p}`" for p in paths[:3]) or "the model"
    calls = sorted({rc.call_index for rc, _ in failures.items if rc.call_index is not None})
    at = f" before call {calls[0]}" if calls else ""
    ctx.add(
        "change-before-compile",
        f"Make the change to {shown} before compiling",
        f"The model changed after it was compiled{at}: {'; '.join(changes)}. The compiled code guarded on the "
        "model as it was, so it recompiles for the changed one, and the first compile was for a model you no "
        "longer run. Prune, quantize or reparametrize first, then `torch.compile` the model as it will run.",
        "source_edit",
        failures.ids(),
        snippet="# first the change, e.g.:\n# torch.nn.utils.prune.l1_unstructured(model.fc, 'weight', amount=0.5)\n"
        "# torchao.quantization.quantize_(model, Int8WeightOnlyConfig())\ncompiled = torch.compile(model)",
        references=[DOCS["troubleshooting"]],
        action=_change_first(ctx, calls[0] if calls else None),
    )
