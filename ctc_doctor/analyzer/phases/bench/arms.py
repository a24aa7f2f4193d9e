"""The benchmark's arms: which ways of compiling the model are measured, each as an `Arm` (the model
copy it runs, its calls, its options and the code a user pastes to compile as it does)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ....reports import models as rm
from ....vocabulary import CUDA_GRAPH_MODES, TRAINING_OPT_IN
from ....workload import Call, Workload
from ...fixes.facts import ModelFacts
from ...fixes.variants import Variant, make_variant
from ...resources.preflight import value_bytes
from ...running.copying import working_copy
from ...running.modules import forward_arg_names, modular_paths
from .numbers import RECOMPILE_LIMIT, pad_calls
from .options import BenchOptions


@dataclass
class Arm:
    name: str
    description: str
    model: torch.nn.Module
    calls: list[Call]
    compiled: bool
    config: dict[str, Any]
    regional_paths: list[str]
    fresh: bool = False
    """Compile a fresh copy of the model (as the builder returned it), so the cold pass is a user's."""
    actions: list[rm.FixAction] | None = None
    """A copy with these fix actions applied (`fixes.variants`), built when the arm runs (`materialized`)."""
    owned: bool = False
    """Its model is its own copy while it runs (`materialized`): nothing else runs it, so it is not put back
    after the arm (for a training arm, no copy of its parameters is kept to restore them)."""
    origin: torch.nn.Module | None = None
    """The pristine model its own copy was made from, unchanged (`materialized`, a fresh arm): the state it
    starts in, read from there rather than kept as one more copy."""
    variant: Variant | None = None
    """While the arm runs: the fixed copy it runs (its warm_up action, if applied, runs before compiling)."""
    aot: str | None = None
    """AOT arms: `whole` (export the model) or `regional` (export each repeated block class once)."""
    aot_groups: list[list[str]] = field(default_factory=list)
    """A regional AOT arm: the instances of each repeated block class."""
    optimizer_compiled: bool = False
    """Training steps: `optimizer.step` compiled too."""
    optimizer: Any = None
    """Training steps: the arm's own optimizer, built fresh when the arm starts (`Workload.optimizer`)."""
    compile_options: dict[str, Any] = field(default_factory=dict)
    """torch.compile options of this arm beyond the benchmark's (`dynamic=True`)."""
    code: str | None = None
    """What a user pastes to compile as this arm does (`rm.BenchmarkArm.code`)."""
    compare_outputs: bool = True
    """False for padded inputs: outputs have other shapes, so losses and gradients are judged."""


@contextlib.contextmanager
def materialized(arm: Arm, source: torch.nn.Module | None, device: str | None, *, share: bool = False) -> Iterator[Arm]:
    """The arm with its own model for the time it runs: a copy of `source` (the pristine model) for a fresh
    arm, a copy with the fixes applied for a fixed one, on `device` (the pristine model may live on the
    host; with `share`, inference, the copy shares its parameters: `copying.working_copy`); planned as it
    was afterwards, the copy dropped. Raises VariantError when the fixes cannot be applied to a copy."""
    planned = (arm.model, arm.calls, arm.config, arm.compile_options)
    try:
        if arm.actions is not None:
            arm.variant = make_variant(source if source is not None else arm.model, arm.calls, arm.actions, device, share=share)
            arm.model, arm.calls = arm.variant.model, arm.variant.calls
            arm.config = {**arm.config, **arm.variant.config}
            arm.compile_options = {**arm.compile_options, **arm.variant.compile_options}
            arm.owned = not share  # a variant sharing the pristine weights must leave them as they were
        elif arm.fresh and source is not None:
            arm.model = working_copy(source, device, share=share)
            arm.owned, arm.origin = not share, source
        yield arm
    finally:
        arm.model, arm.calls, arm.config, arm.compile_options = planned
        arm.variant, arm.owned, arm.origin = None, False, None


def arms_for(
    report: rm.Report,
    workload: Workload,
    calls: list[Call],
    facts: ModelFacts | None,
    bench: BenchOptions,
    train: bool = False,
) -> list[Arm]:
    """The arms to measure, in order, each planned without a copy of the model (`materialized` makes it)."""
    model = workload.model
    fixed = fixed_actions(report) if report is not None else None
    backend = bench.backend + (f", mode={bench.mode}" if bench.mode and bench.mode != "default" else "")
    arms = [
        Arm("eager", "the model as is, no compile", model, calls, False, {}, [], fresh=True),
        Arm("compiled", f"torch.compile(model, backend={backend})", model, calls, True, {}, [], fresh=True),
    ]
    steps = train and workload.optimizer is not None
    if steps:
        arms.append(
            _fresh_compiled(
                "compiled_optimizer",
                f"torch.compile(model, backend={backend}), and optimizer.step = torch.compile(optimizer.step)",
                model,
                calls,
                optimizer_compiled=True,
                code="model = torch.compile(model); optimizer.step = torch.compile(optimizer.step)",
            )
        )
    for mode in bench.modes if bench.backend == "inductor" else ():
        if mode == (bench.mode or "default"):
            continue  # that is `compiled`
        options = {"mode": mode} if mode != "default" else {}
        code = f'model = torch.compile(model, mode="{mode}")' if mode != "default" else None
        arms.append(
            _fresh_compiled(f"compiled[{mode}]", f"torch.compile(model, mode={mode!r})", model, calls, compile_options=options, code=code)
        )
    if bench.shape_arms and facts is not None and facts.varying_dims():
        arms += _shape_arms(model, calls, facts, backend)
        padded = _padded_arm(workload, calls, backend) if train and workload.pad else None
        arms += [padded] if padded is not None else []
    if fixed is not None:
        applied = ", ".join(report.fix.applied) if report.fix else ""
        arms.append(
            Arm(
                "compiled_fixed",
                f"torch.compile of a copy with {applied} applied" + (", optimizer.step compiled" if steps else ""),
                model,
                calls,
                True,
                {},
                [],
                actions=fixed,
                optimizer_compiled=steps,
            )
        )
    if steps and bench.regional:
        arms += _modular_arm(model, calls, facts)
    arms += _submodules_arm(report, model, calls) if report is not None else []
    if bench.regional and facts is not None and facts.repeated:
        paths = [p for g in facts.repeated for p in g.paths]
        shown = ", ".join(f"{len(g.paths)}x {g.class_name}" for g in facts.repeated)
        if fixed is not None:
            what = f"each repeated block compiled ({shown}), fixes applied"
            arms.append(Arm("regional_fixed", what, model, calls, True, {}, paths, actions=fixed))
        else:
            arms.append(
                Arm("regional", f"each repeated block compiled ({shown}), the rest eager", model, calls, True, {}, paths, fresh=True)
            )
    if bench.aot:
        arms.append(
            Arm(
                "aot",
                "torch.export of the model, AOTInductor-compiled into a package, loaded",
                model,
                calls,
                True,
                {},
                [],
                fresh=True,
                aot="whole",
            )
        )
        if facts is not None and facts.repeated:
            shown = ", ".join(f"{len(g.paths)}x {g.class_name}" for g in facts.repeated)
            groups = [list(g.paths) for g in facts.repeated]
            arms.append(
                Arm(
                    "aot_regional",
                    f"each repeated block class exported and AOT-compiled once ({shown}), loaded per instance",
                    model,
                    calls,
                    True,
                    {},
                    [],
                    fresh=True,
                    aot="regional",
                    aot_groups=groups,
                )
            )
        if fixed is not None:
            arms.append(
                Arm(
                    "aot_fixed",
                    "torch.export + AOTInductor of the copy with the fixes applied",
                    model,
                    calls,
                    True,
                    {},
                    [],
                    actions=fixed,
                    aot="whole",
                )
            )
    return arms


def _fresh_compiled(name: str, description: str, model: torch.nn.Module, calls: list[Call], **kw: Any) -> Arm:
    """A whole-model compiled arm on a fresh copy of the model (its cold pass is a user's), options in `kw`."""
    return Arm(name, description, model, calls, True, {}, [], fresh=True, **kw)


def _submodules_arm(report: rm.Report, model: torch.nn.Module, calls: list[Call]) -> list[Arm]:
    """The clean submodules a `compile-submodules` suggestion names, compiled alone on a fresh copy, the rest
    eager: its latency and compile time against compiling the whole model. Only when its check held."""
    s = next((s for s in report.suggestions if s.rule == "compile-submodules" and s.action is not None), None)
    if s is None or s.action is None or s.verified is None or not (s.verified.safe and s.verified.effective):
        return []
    paths = s.action.module_paths
    shown = ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")
    code = "; ".join(f"model.get_submodule({p!r}).forward = torch.compile(model.get_submodule({p!r}).forward)" for p in paths[:3])
    return [
        Arm("submodules", f"{shown} compiled alone ({s.id}), the rest eager", model, calls, True, {}, [], actions=[s.action], code=code)
    ]


def _modular_arm(model: torch.nn.Module, calls: list[Call], facts: ModelFacts | None) -> list[Arm]:
    """Modular compilation (training steps): each top-level part compiled on its own, the optimizer eager;
    none when the parts are the repeated blocks (that is `regional`) or there are fewer than two."""
    paths = modular_paths(model)
    regional = {p for g in facts.repeated for p in g.paths} if facts is not None else set()
    if not paths or set(paths) == regional:
        return []
    shown = ", ".join(paths) if len(paths) <= 4 else f"{', '.join(paths[:3])} and {len(paths) - 3} more"
    loop = f"for name in {tuple(paths)!r}: model.get_submodule(name).compile()"
    return [Arm("modular", f"each top-level part compiled on its own ({shown})", model, calls, True, {}, paths, fresh=True, code=loop)]


def _shape_arms(model: torch.nn.Module, calls: list[Call], facts: ModelFacts, backend: str) -> list[Arm]:
    """The shape strategies beside `compiled` (automatic dynamic shapes), everything else as it has (the
    optimizer eager): `dynamic=True`, and every varying dim marked dynamic before the first call (one
    mark_dynamic action, all together)."""
    varying = facts.varying_dims()
    shown = ", ".join(f"{arg} dim {','.join(map(str, dims))}" for arg, dims in varying.items())
    arms = [
        _fresh_compiled(
            "dynamic",
            f"torch.compile(model, backend={backend}, dynamic=True)",
            model,
            calls,
            compile_options={"dynamic": True},
            code="model = torch.compile(model, dynamic=True)",
        )
    ]
    first, dims = next(iter(varying.items()))
    action = rm.FixAction(type="mark_dynamic", argument=first, dims=dims, marks=varying)
    arms.append(
        Arm(
            "marked",
            f"mark_dynamic on {shown}, then torch.compile",
            model,
            calls,
            True,
            {},
            [],
            actions=[action],
            code="; ".join(f"torch._dynamo.mark_dynamic({arg}, {d})" for arg, dims in varying.items() for d in dims)
            + "  # each batch, before the compiled call",
        )
    )
    return arms


def _padded_arm(workload: Workload, calls: list[Call], backend: str) -> Arm | None:
    """`Workload.pad`: every call padded up to a multiple of a bucket, compiled as `compiled` is, judged on
    its losses (its outputs have other shapes). The bucket: the smallest of 8, 16, 32... that leaves fewer
    sizes than the data has, within the recompile limit (8 when none does but 8 pads something)."""
    assert workload.pad is not None
    names = forward_arg_names(workload.model) or []
    chosen = None
    for bucket in (8, 16, 32, 64, 128, 256):
        found = pad_calls(calls, names, workload.pad, bucket)
        if found is None:
            return None
        _, before, after = found
        if len(after) < len(before) and len(after) <= RECOMPILE_LIMIT:
            chosen = (bucket, found)
            break
        if bucket == 8 and after != before and len(after) <= RECOMPILE_LIMIT:
            chosen = chosen or (bucket, found)
    if chosen is None:
        return None
    bucket, (padded, _, after) = chosen
    shown = ", ".join(f"{a} dim {d}" for a, (d, _) in workload.pad.items())
    return _fresh_compiled(
        "padded",
        f"{shown} padded to multiples of {bucket} ({len(after)} size(s)), then torch.compile(model, backend={backend})",
        workload.model,
        padded,
        compare_outputs=False,
        code=f"pad {shown} up to a multiple of {bucket} in your collate function",
    )


ALONE_UP_TO = 3
"""Per-fix arms: each fix alone up to this many applied fixes; leave-one-out beyond (as many arms as fixes)."""


def fix_arms(report: rm.Report, model: torch.nn.Module, calls: list[Call], steps: bool) -> list[Arm]:
    """`BenchOptions.per_fix`: one arm per applied fix, that fix alone (`fixed[S1]`) or every other one
    (`fixed[-S1]`), its copy built when it runs."""
    applied = report.fix.applied if report.fix else []
    actions = {s.id: s.action for s in report.suggestions if s.id in applied and s.action is not None}
    if len(actions) < 2:
        return []
    alone = len(actions) <= ALONE_UP_TO
    arms = []
    for sid in actions:
        chosen = [sid] if alone else [other for other in actions if other != sid]
        name, what = (f"fixed[{sid}]", f"{sid} alone") if alone else (f"fixed[-{sid}]", f"every fix but {sid}")
        picked = [a for i, a in actions.items() if i in chosen and a is not None]
        arms.append(
            Arm(name, f"torch.compile of a copy with {what} applied", model, calls, True, {}, [], actions=picked, optimizer_compiled=steps)
        )
    return arms


def fixed_actions(report: rm.Report) -> list[rm.FixAction] | None:
    """The combined fix as the fix phase applied it (None when nothing was applied)."""
    if report.fix is None or not report.fix.applied:
        return None
    by_id = {s.id: s for s in report.suggestions}
    actions = [by_id[i].action for i in report.fix.applied if i in by_id and by_id[i].action is not None]
    return [a for a in actions if a is not None]


OPT_IN = "opt_in_left_out"
"""The benchmark setting (popped when it concludes) that carries the training arms left out for the asking,
by name, from the plan (this process's or the arms' child's) to the note that prices them."""
OPT_IN_MARK = "training steps: "


def need_beyond(arm: Arm, calls: list[Call], weights: int, activations: int, device: str) -> tuple[int, str] | None:
    """What `arm` holds beyond the workload's own (its model and activations), known before it runs, and
    what that is; None when nothing is known beyond it (an arm that shares the weights and runs the same
    calls: what its compile or backend allocates shows only when it runs, under `ArmRunner.capped`)."""
    if arm.aot:
        return weights, "its own set of the weights, loaded from its package"
    if arm.calls is not calls:  # padded inputs: the activations grow with the largest call
        mine, theirs = _largest_call(arm.calls), _largest_call(calls)
        if theirs and mine > theirs:
            return int(activations * (mine / theirs - 1)), f"activations of inputs padded to {mine / theirs:.2f}x the largest call"
    mode = arm.compile_options.get("mode")
    if device.startswith("cuda") and mode in CUDA_GRAPH_MODES:
        return activations, "the CUDA graphs' own memory pool, about one set of activations (an estimate)"
    return None


def _largest_call(calls: list[Call]) -> int:
    return max((value_bytes((c.args, dict(c.kwargs))) for c in calls), default=0)


def arm_kind(name: str) -> str:
    """`fixed` for a per-fix arm (`fixed[S1]`), else the arm's name."""
    return "fixed" if name.startswith("fixed[") else name


def price_opt_in(result: rm.Benchmark) -> None:
    """The note on the training arms left out for the asking (`OPT_IN`), with what each would cost: about
    what the compiled arm took (its cold pass and its timing)."""
    left: list[str] = result.settings.pop(OPT_IN, None) or []
    if not left:
        return
    price = ""
    compiled = next((a for a in result.arms if a.name == "compiled" and a.first_pass_s is not None), None)
    if compiled is not None:
        each = compiled.first_pass_s or 0.0
        if compiled.latency_ms is not None:
            each += compiled.latency_ms.median * compiled.latency_ms.n / 1e3
        price = f" (about {each:.0f} s each, {len(left) * each:.0f} s in all)"
    kinds = ",".join(f"+{k}" for k in TRAINING_OPT_IN if any(arm_kind(n) == k for n in left))
    result.notes.append(f"{OPT_IN_MARK}{', '.join(left)} not measured{price} (opt-in for training steps: --arms {kinds})")
