"""`fix`: apply auto-applicable suggestions to a copy of the model, re-analyze, and check numerics.

Each auto-applicable suggestion is first tried alone on its own copy: the copy is analyzed like the
original (same calls, seeds, backend) with the suggestion's `FixAction` applied, and its outputs are
compared with the original model's eager outputs, both in eager mode (did the change alter the
model's semantics?) and compiled (did it alter what the compiled model computes?). A suggestion that
fails either check is unsafe and not applied; one that changes no count is ineffective. The safe,
effective ones are then applied together and verified once more.

What an action does to the copy: `dynamo_config` patches `torch._dynamo.config` for the compiled
run only; `disable` wraps submodule forwards with `torch.compiler.disable`; `source_patch` gives the
copy's instances a subclass whose method is the rewritten one (see `rewrite`); `mark_dynamic` and
`scalar_to_tensor` act on copies of the inputs; `set_attribute` sets an attribute on a submodule.
The user's model, inputs and modules' globals are never modified.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..reports import models as rm
from ..workload import Call, Workload
from . import torch_internals as ti
from .attribution import forward_arg_names
from .rewrite import RewriteError, build_function, parse_edits, plan_rewrite
from .suggest import CONFIG_OPTIONS_USED, ModelFacts, RepeatedGroup, iter_auto

if TYPE_CHECKING:
    from .run import AnalyzeOptions

# torch.testing.assert_close defaults (rtol, atol) per dtype; compiled backends that reorder floating
# point math (inductor) get `loose` instead.
_TOLERANCE = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_LOOSE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2), torch.float32: (1e-4, 1e-4), torch.float64: (1e-6, 1e-6)}


def loose_backend(backend: str) -> bool:
    """Backends other than eager/aot_eager may reorder float math: compare with `_LOOSE` tolerances."""
    return backend not in ("eager", "aot_eager")


@dataclass(frozen=True)
class FixOptions:
    """How `fix` verifies."""

    verify_each: bool = True
    """Verify each auto-applicable suggestion alone before combining (else: all together, once)."""


# ---------------------------------------------------------------------------------------------
# facts about the model the rules need
# ---------------------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float"
    if isinstance(value, int):
        return "int"
    return "other"


def _shape_signature(module: torch.nn.Module) -> tuple[Any, ...]:
    return tuple((name, tuple(p.shape)) for name, p in module.named_parameters()) + tuple(
        (name, type(m).__name__) for name, m in module.named_modules()
    )


def repeated_groups(model: torch.nn.Module, minimum: int = 2) -> list[RepeatedGroup]:
    """Sibling blocks of one user-defined class and identical structure (regional-compilation candidates)."""
    groups = []
    for path, parent in model.named_modules():
        by_signature: dict[tuple[Any, ...], list[str]] = {}
        for name, child in parent.named_children():
            cls = type(child)
            if cls.__module__.startswith("torch.nn") or not list(child.children()):
                continue  # leaf layers (Linear...) are not blocks worth compiling on their own
            key = (cls, _shape_signature(child))
            by_signature.setdefault(key, []).append(f"{path}.{name}" if path else name)
        for (cls, _), paths in by_signature.items():
            if len(paths) >= minimum:
                groups.append(RepeatedGroup(container=path, class_name=cls.__name__, paths=paths))
    # an outer group (e.g. two stacks) already compiles its inner repeats: keep the outermost
    return [g for g in groups if not any(o is not g and any(p.startswith(q + ".") for p in g.paths for q in o.paths) for o in groups)]


def model_facts(model: torch.nn.Module, first: Call) -> ModelFacts:
    names = forward_arg_names(model) or []
    kinds = {names[i] if i < len(names) else f"arg{i}": _kind(v) for i, v in enumerate(first.args)}
    kinds.update({k: _kind(v) for k, v in first.kwargs.items()})
    options = frozenset(n for n in CONFIG_OPTIONS_USED if ti.config_has(n))
    return ModelFacts(arg_names=names, arg_kinds=kinds, repeated=repeated_groups(model), config_options=options)


# ---------------------------------------------------------------------------------------------
# applying actions to a copy
# ---------------------------------------------------------------------------------------------


class FixError(Exception):
    """An action cannot be applied to this model (one line, goes into the report)."""


def copy_model(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy; attributes deepcopy refuses (locks, handles) are shared with the original."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - retry sharing what cannot be copied
        pass
    memo: dict[int, Any] = {}
    for module in model.modules():
        for key, value in vars(module).items():
            if key in ("_parameters", "_buffers", "_modules"):
                continue
            try:
                copy.deepcopy(value)
            except Exception:  # noqa: BLE001 - share it
                memo[id(value)] = value
    try:
        return copy.deepcopy(model, memo)
    except Exception as exc:
        raise FixError(f"cannot copy the model: {type(exc).__name__}: {exc}") from exc


@dataclass
class Variant:
    """A copy of the model and inputs with actions applied."""

    model: torch.nn.Module
    calls: list[Call]
    config: dict[str, Any] = field(default_factory=dict)


def _merge_config(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + [v for v in value if v not in into[key]]
        else:
            into[key] = value


def _owner(instance_type: type, function: str) -> type | None:
    for cls in instance_type.__mro__:
        if function in cls.__dict__:
            return cls
    return None


def _patch_sources(model: torch.nn.Module, actions: list[rm.FixAction]) -> None:
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for a in actions:
        if not (a.file and a.function and a.class_name):
            raise FixError("source_patch needs file, function and class_name")
        grouped.setdefault((a.file, a.function, a.class_name), []).extend(e for e in a.edits)
    for (file, function, class_name), edits in grouped.items():
        try:
            plan = plan_rewrite(file, parse_edits(sorted(set(edits), key=lambda e: int(e.split("@")[1]))))
        except RewriteError as exc:
            raise FixError(str(exc)) from exc
        targets = [m for m in model.modules() if any(c.__name__ == class_name and function in c.__dict__ for c in type(m).__mro__)]
        if not targets:
            raise FixError(f"no {class_name} module in the model")
        patched: dict[type, type] = {}
        for module in targets:
            cls = type(module)
            owner = _owner(cls, function)
            if owner is None or owner.__name__ != class_name:
                continue  # a subclass overrides the method: leave it as it is
            original = inspect.unwrap(owner.__dict__[function])
            code = getattr(original, "__code__", None)
            if code is None or code.co_filename != file:
                raise FixError(f"{class_name}.{function} is not the function in {file}")
            if code.co_firstlineno not in (plan.def_line, *(d.lineno for d in plan.node.decorator_list)):
                raise FixError(f"{file} changed since it was imported; cannot patch {class_name}.{function}")
            if cls not in patched:
                new_fn = build_function(plan, original.__globals__, owner, torch)
                patched[cls] = type(cls.__name__, (cls,), {function: new_fn, "__module__": cls.__module__, "__qualname__": cls.__qualname__})
            module.__class__ = patched[cls]


def _argument_slot(call: Call, names: list[str], argument: str) -> tuple[str, Any] | None:
    if argument in call.kwargs:
        return ("kw", argument)
    if argument in names and names.index(argument) < len(call.args):
        return ("pos", names.index(argument))
    if argument.startswith("arg") and argument[3:].isdigit() and int(argument[3:]) < len(call.args):
        return ("pos", int(argument[3:]))
    return None


def _clone_tensor(value: torch.Tensor) -> torch.Tensor:
    out = value.detach().clone()
    return out.requires_grad_(True) if value.requires_grad and out.is_floating_point() else out


def clone_inputs(value: Any) -> Any:
    """Detached copies of the tensors in a call's inputs (requires_grad kept); other values shared."""
    from .run import map_tensors

    return map_tensors(value, _clone_tensor)


def _transform_calls(calls: list[Call], names: list[str], action: rm.FixAction) -> list[Call]:
    out = []
    assert action.argument is not None
    for call in calls:
        args, kwargs = list(call.args), dict(call.kwargs)
        slot = _argument_slot(call, names, action.argument)
        if slot is None:
            raise FixError(f"argument {action.argument!r} is not in every call")
        value = kwargs[slot[1]] if slot[0] == "kw" else args[slot[1]]
        if action.type == "mark_dynamic":
            if not isinstance(value, torch.Tensor):
                raise FixError(f"{action.argument} is not a tensor")
            for d in action.dims:
                if d >= value.dim():
                    raise FixError(f"{action.argument} has no dim {d}")
                ti.mark_dynamic(value, d)
        else:  # scalar_to_tensor
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise FixError(f"{action.argument} is not a Python number")
            value = torch.tensor(float(value))
        if slot[0] == "kw":
            kwargs[slot[1]] = value
        else:
            args[slot[1]] = value
        out.append(Call(tuple(args), kwargs))
    return out


def make_variant(model: torch.nn.Module, calls: list[Call], actions: list[rm.FixAction]) -> Variant:
    """A copy of the model and inputs with the actions applied (regional actions are ignored here)."""
    variant = Variant(copy_model(model), [Call(clone_inputs(c.args), clone_inputs(dict(c.kwargs))) for c in calls])
    names = forward_arg_names(model) or []
    sources = []
    for action in actions:
        if action.type == "dynamo_config":
            _merge_config(variant.config, action.config)
        elif action.type == "disable":
            for path in action.module_paths:
                try:
                    module = variant.model.get_submodule(path)
                except AttributeError as exc:
                    raise FixError(f"no submodule {path!r}") from exc
                module.forward = ti.disable(module.forward)  # instance attribute on the copy
        elif action.type == "source_patch":
            sources.append(action)
        elif action.type in ("mark_dynamic", "scalar_to_tensor"):
            variant.calls = _transform_calls(variant.calls, names, action)
        elif action.type == "set_attribute":
            if not action.attribute:
                raise FixError("set_attribute needs an attribute")
            for path in action.module_paths or [""]:
                setattr(variant.model.get_submodule(path), action.attribute, action.value)
    if sources:
        _patch_sources(variant.model, sources)
    return variant


# ---------------------------------------------------------------------------------------------
# numerics
# ---------------------------------------------------------------------------------------------


@dataclass
class Numerics:
    ok: bool
    max_abs: float
    max_rel: float
    problem: str | None = None


def compare_outputs(got: list[list[torch.Tensor]], want: list[list[torch.Tensor]], loose: bool = False) -> Numerics:
    """Per-call output tensors against the reference, assert_close-style; max errors over everything."""
    max_abs = max_rel = 0.0
    ok = True
    problem = None
    if len(got) != len(want):
        return Numerics(False, float("inf"), float("inf"), f"{len(got)} outputs, expected {len(want)}")
    for i, (g_call, w_call) in enumerate(zip(got, want, strict=True)):
        if len(g_call) != len(w_call):
            return Numerics(False, float("inf"), float("inf"), f"call {i}: {len(g_call)} output tensors, expected {len(w_call)}")
        for g, w in zip(g_call, w_call, strict=True):
            if g.shape != w.shape:
                return Numerics(False, float("inf"), float("inf"), f"call {i}: shape {list(g.shape)}, expected {list(w.shape)}")
            g, w = g.to(w.device), w
            if not (w.is_floating_point() or w.is_complex()):
                if not torch.equal(g, w):
                    ok, problem = False, f"call {i}: integer/bool outputs differ"
                continue
            rtol, atol = (_LOOSE if loose else _TOLERANCE).get(w.dtype, (1e-5, 1e-8))
            diff = (g.double() - w.double()).abs()
            nan_mismatch = torch.isnan(g) != torch.isnan(w)
            diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                rel = diff / w.double().abs().clamp_min(1e-12)
                max_rel = max(max_rel, float(rel.max()))
            if bool(nan_mismatch.any()) or bool((diff > atol + rtol * w.double().abs()).any()):
                ok = False
                problem = problem or f"call {i}: outputs differ beyond rtol={rtol:g}, atol={atol:g}"
    return Numerics(ok, max_abs, max_rel, problem)


def reference_outputs(workload: Workload, calls: list[Call], options: AnalyzeOptions) -> list[list[torch.Tensor]]:
    """The original model's eager outputs, seeded per call like the analysis."""
    from .run import _run_call, preserved_state

    sink: dict[str, list[Any]] = {}
    opts = dataclasses.replace(options, output_sink=sink, train=False)
    with preserved_state(workload.model), torch.no_grad():
        for i, call in enumerate(calls):
            _run_call(workload.model, workload, call, i, opts, sink="eager")
    return sink.get("eager", [])


# ---------------------------------------------------------------------------------------------
# verification
# ---------------------------------------------------------------------------------------------


def effect_of(report: rm.Report) -> rm.Effect:
    """The summary counts an Effect carries (its fields are named as in Summary)."""
    return rm.Effect(**report.summary.model_dump(include=set(rm.Effect.model_fields)))


def effect_summary(before: rm.Effect, after: rm.Effect) -> str:
    parts = [
        f"graphs {before.graphs_compiled} -> {after.graphs_compiled}",
        f"break sites {before.unique_break_sites} -> {after.unique_break_sites}",
        f"recompiles {before.recompile_count} -> {after.recompile_count}",
    ]
    return ", ".join(parts)


def _site_key(site: rm.GraphBreakSite) -> tuple[str, str, int]:
    return (site.gb_type, site.user_frame.file, site.user_frame.line)


def _recompile_key(rc: rm.Recompile) -> tuple[Any, ...]:
    first = rc.failed_guards[0] if rc.failed_guards else None
    return (rc.function, rc.file, rc.line, first.kind if first else None, first.source if first else None)


def _label(site: rm.GraphBreakSite) -> str:
    return f"{site.gb_type} at {site.user_frame.file.rsplit('/', 1)[-1]}:{site.user_frame.line}"


def check_variant(
    base: rm.Report,
    workload: Workload,
    variant: Variant,
    reference: list[list[torch.Tensor]],
    options: AnalyzeOptions,
) -> tuple[rm.Verification, rm.Report | None]:
    """Analyze the variant like the original and compare counts and outputs."""
    from .run import analyze

    t0 = time.perf_counter()
    sink: dict[str, list[Any]] = {}
    opts = dataclasses.replace(
        options,
        explain=False,
        bisect=None,
        suggest=False,
        fix=None,
        probe_shapes=False,
        bench=None,
        device=None,  # the copy and its inputs are already where the original ran
        timeout_s=None,
        dynamo_config=variant.config,
        output_sink=sink,
        progress=None,
    )
    fixed = Workload(variant.model, variant.calls[0].args, variant.calls[0].kwargs, variants=[c for c in variant.calls[1:]], name=workload.name, loss_fn=workload.loss_fn, before_call=workload.before_call)
    try:
        report = analyze(fixed, opts)
    except ValueError as exc:  # an unknown dynamo config option
        return rm.Verification(applied=False, error=str(exc), duration_s=round(time.perf_counter() - t0, 3)), None
    errors = [e for e in report.errors if e.phase in ("eager", "compile", "timeout")]
    verification = rm.Verification(applied=True, before=effect_of(base), after=effect_of(report))
    if errors:
        verification.error = errors[0].message
    want = reference
    eager_check = compare_outputs(sink.get("eager", []), want) if not errors else None
    compiled = sink.get("compiled", [])
    compiled_check = compare_outputs(compiled, want[: len(compiled)], loose=loose_backend(options.resolved_backend())) if compiled and not errors else None
    if eager_check is not None and compiled_check is not None:
        verification.numerics_ok = eager_check.ok and compiled_check.ok
        verification.max_abs_error = compiled_check.max_abs
        verification.max_rel_error = compiled_check.max_rel
        if not eager_check.ok:
            verification.error = f"changes eager results: {eager_check.problem}"
        elif not compiled_check.ok:
            verification.error = f"changes compiled results: {compiled_check.problem}"

    before_sites = {_site_key(s): s for s in base.graph_breaks}
    after_sites = {_site_key(s): s for s in report.graph_breaks}
    after_lines = {k[1:] for k in after_sites}
    verification.fixed = [s.id for k, s in before_sites.items() if k[1:] not in after_lines]
    verification.new_sites = [_label(s) for k, s in after_sites.items() if k not in before_sites]
    after_recompiles: dict[tuple[Any, ...], int] = {}
    for rc in report.recompiles:
        after_recompiles[_recompile_key(rc)] = after_recompiles.get(_recompile_key(rc), 0) + 1
    for rc in base.recompiles:
        key = _recompile_key(rc)
        if after_recompiles.get(key, 0) > 0:
            after_recompiles[key] -= 1
        else:
            verification.fixed.append(rc.id)
    b, a = verification.before, verification.after
    assert b is not None and a is not None
    improved = (
        a.graphs_compiled < b.graphs_compiled
        or a.graph_count < b.graph_count
        or a.unique_break_sites < b.unique_break_sites
        or a.recompile_count < b.recompile_count
    )
    verification.summary = effect_summary(b, a)
    verification.safe = bool(verification.numerics_ok) and not errors
    verification.effective = verification.safe and improved
    verification.duration_s = round(time.perf_counter() - t0, 3)
    return verification, report


def _remaining_labels(report: rm.Report) -> list[str]:
    out = [_label(s) for s in report.graph_breaks]
    for rc in report.recompiles:
        guard = rc.failed_guards[0].reason if rc.failed_guards else "?"
        out.append(f"recompile of {rc.function} ({rc.file.rsplit('/', 1)[-1]}:{rc.line}): {guard}")
    return out


def run_fix(report: rm.Report, workload: Workload, calls: list[Call], facts: ModelFacts, options: AnalyzeOptions) -> rm.FixResult:
    """Verify each auto-applicable suggestion alone, then apply the safe, effective ones together."""
    t0 = time.perf_counter()
    fix_options = options.fix or FixOptions()
    progress = options.progress or (lambda phase, done, total: None)
    backend = options.resolved_backend()
    rtol, atol = (_LOOSE if loose_backend(backend) else _TOLERANCE)[torch.float32]
    result = rm.FixResult(backend=backend, tolerance={"rtol": rtol, "atol": atol})
    candidates = list(iter_auto(report.suggestions))
    if not candidates:
        result.notes.append("No auto-applicable suggestion: nothing to apply.")
        result.duration_s = round(time.perf_counter() - t0, 3)
        return result
    model = workload.model
    assert isinstance(model, torch.nn.Module)
    reference = reference_outputs(workload, calls, options)
    if options.train:
        result.notes.append("Numerics are checked on forward outputs; gradients are not compared.")

    chosen: list[rm.Suggestion] = []
    total = len(candidates) + 1
    for i, suggestion in enumerate(candidates):
        progress(f"fix {suggestion.id}", i, total)
        if not fix_options.verify_each:
            chosen.append(suggestion)
            continue
        assert suggestion.action is not None
        try:
            variant = make_variant(model, calls, [suggestion.action])
        except FixError as exc:
            suggestion.verified = rm.Verification(applied=False, error=str(exc))
            result.unsafe.append(suggestion.id)
            continue
        verification, _ = check_variant(report, workload, variant, reference, options)
        suggestion.verified = verification
        covered = {i for c in chosen for i in (c.verified.fixed if c.verified else [])}
        if not verification.safe:
            result.unsafe.append(suggestion.id)
        elif not verification.effective:
            result.ineffective.append(suggestion.id)
        elif verification.fixed and set(verification.fixed) <= covered:
            result.redundant.append(suggestion.id)  # an earlier (preferred) suggestion already fixes the same
        else:
            chosen.append(suggestion)
        ti.fresh_dynamo_state()

    progress("fix combined", len(candidates), total)
    if chosen:
        try:
            variant = make_variant(model, calls, [s.action for s in chosen if s.action is not None])
            verification, after = check_variant(report, workload, variant, reference, options)
        except FixError as exc:
            verification, after = rm.Verification(applied=False, error=str(exc)), None
        result.verification = verification
        if verification.safe:
            result.applied = [s.id for s in chosen]
        else:
            result.notes.append(
                "The suggestions were safe one by one but not together: " + (verification.error or "numerics differ") + "."
            )
        if after is not None:
            result.remaining = _remaining_labels(after)
    else:
        result.remaining = _remaining_labels(report)
    progress("fix combined", total, total)
    result.duration_s = round(time.perf_counter() - t0, 3)
    return result


def fixed_variant(report: rm.Report, workload: Workload, calls: list[Call]) -> Variant | None:
    """The combined fix as applied by `run_fix`, rebuilt for the benchmark (None when nothing applied)."""
    if report.fix is None or not report.fix.applied:
        return None
    by_id = {s.id: s for s in report.suggestions}
    actions = [by_id[i].action for i in report.fix.applied if i in by_id and by_id[i].action is not None]
    return make_variant(workload.model, calls, [a for a in actions if a is not None])
