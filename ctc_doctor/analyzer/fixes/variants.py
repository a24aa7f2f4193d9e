"""A copy of the model and its inputs with fix actions applied: what `fix` verifies and the
benchmark's fixed arms measure.

What an action does to the copy: `dynamo_config` patches `torch._dynamo.config` for the compiled
run only; `disable` wraps submodule forwards with `torch.compiler.disable`; `source_patch` gives the
copy's instances a subclass whose method is the rewritten one (see `rewrite`); `mark_dynamic` and
`scalar_to_tensor` act on copies of the inputs; `set_attribute` sets an attribute on a submodule;
`counter_to_tensor` keeps an integer attribute as a 0-d int64 buffer in every module that holds it;
`warm_up` has whoever compiles the copy call it once eagerly first; `change_first` makes the change a
build() target's `before_call` makes before one call on the copy before it is compiled (`Variant.workload_of`);
`compile_only` has whoever compiles the copy compile those submodules in place and run the rest
eagerly (`Variant.compiled`); `regional` is the benchmark's business and is ignored here. The user's model, inputs and modules'
globals are never modified.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports import models as rm
from ...workload import Call, Workload
from .. import torch_internals as ti
from ..running.calls import run_call
from ..running.copying import CopyError, working_copy
from ..running.modules import forward_arg_names
from ..running.tensors import clone_inputs, iter_tensors
from .rewrite import RewriteError, build_function, edit_line, parse_edits, plan_rewrite


class VariantError(Exception):
    """An action cannot be applied to this model (one line, goes into the report)."""


@dataclass
class Variant:
    """A copy of the model and inputs with actions applied."""

    model: torch.nn.Module
    calls: list[Call]
    config: dict[str, Any] = field(default_factory=dict)
    warm_up: bool = False
    """Call the model once eagerly on the first call's inputs before compiling it."""
    change_at: int | None = None
    """change_first: the call whose `before_call` change is made before compiling (and not again then)."""
    compile_only: list[str] = field(default_factory=list)
    """compile_only: the submodules compiled (in place); the rest of the model runs eagerly."""
    compile_options: dict[str, Any] = field(default_factory=dict)
    """compile_options: torch.compile keyword arguments the copy is compiled with (`dynamic=True`)."""

    @contextlib.contextmanager
    def compiled(self, compile_fn: Callable[..., Any]) -> Iterator[Any]:
        """What the copy's calls go through: `compile_fn(model)`, or with compile_only the model itself, each of
        those submodules compiled in place by `compile_fn` for the duration of the block."""
        if not self.compile_only:
            yield compile_fn(self.model, **self.compile_options)
            return
        modules = [self.model.get_submodule(p) for p in self.compile_only]
        with ti.compiled_in_place(modules, lambda fn: compile_fn(fn, **self.compile_options)):
            yield self.model

    def workload_of(self, workload: Workload) -> Workload:
        """The workload on this copy. With change_first, the workload's own `before_call` for that call runs
        now, on the copy, before anything compiles it, and is skipped when that call comes."""
        fixed = dataclasses.replace(workload, model=self.model)
        at, hook = self.change_at, workload.before_call
        if at is None or hook is None:
            return fixed
        hook(self.model, at)

        def later(model: Any, index: int) -> None:
            if index != at:
                hook(model, index)

        fixed.before_call = later
        return fixed

    def run_warm_up(self, workload: Workload, seed: int | None) -> None:
        """The warm_up action, when applied: one eager call of the first call's inputs, without grad."""
        if self.warm_up:
            with torch.no_grad():
                run_call(self.model, workload, self.calls[0], 0, seed=seed, train=False, model=self.model)


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
            raise VariantError("source_patch needs file, function and class_name")
        grouped.setdefault((a.file, a.function, a.class_name), []).extend(e for e in a.edits)
    for (file, function, class_name), edits in grouped.items():
        try:
            plan = plan_rewrite(file, parse_edits(sorted(set(edits), key=edit_line)))
        except RewriteError as exc:
            raise VariantError(str(exc)) from exc
        targets = [m for m in model.modules() if any(c.__name__ == class_name and function in c.__dict__ for c in type(m).__mro__)]
        if not targets:
            raise VariantError(f"no {class_name} module in the model")
        patched: dict[type, type] = {}
        for module in targets:
            cls = type(module)
            owner = _owner(cls, function)
            if owner is None or owner.__name__ != class_name:
                continue  # a subclass overrides the method: leave it as it is
            original = inspect.unwrap(owner.__dict__[function])
            code = getattr(original, "__code__", None)
            if code is None or code.co_filename != file:
                raise VariantError(f"{class_name}.{function} is not the function in {file}")
            if code.co_firstlineno not in (plan.def_line, *(d.lineno for d in plan.node.decorator_list)):
                raise VariantError(f"{file} changed since it was imported; cannot patch {class_name}.{function}")
            if cls not in patched:
                new_fn = build_function(plan, original.__globals__, owner, torch)
                patched[cls] = type(
                    cls.__name__, (cls,), {function: new_fn, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
                )
            module.__class__ = patched[cls]


def argument_slot(call: Call, names: list[str], argument: str) -> tuple[str, Any] | None:
    if argument in call.kwargs:
        return ("kw", argument)
    if argument in names and names.index(argument) < len(call.args):
        return ("pos", names.index(argument))
    if argument.startswith("arg") and argument[3:].isdigit() and int(argument[3:]) < len(call.args):
        return ("pos", int(argument[3:]))
    return None


def _transform_calls(calls: list[Call], names: list[str], action: rm.FixAction) -> list[Call]:
    out = []
    assert action.argument is not None
    for call in calls:
        args, kwargs = list(call.args), dict(call.kwargs)
        slot = argument_slot(call, names, action.argument)
        if slot is None:
            raise VariantError(f"argument {action.argument!r} is not in every call")
        value = kwargs[slot[1]] if slot[0] == "kw" else args[slot[1]]
        if action.type == "mark_dynamic":
            if not isinstance(value, torch.Tensor):
                raise VariantError(f"{action.argument} is not a tensor")
            for d in action.dims:
                if d >= value.dim():
                    raise VariantError(f"{action.argument} has no dim {d}")
                ti.mark_dynamic(value, d)
        else:  # scalar_to_tensor
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise VariantError(f"{action.argument} is not a Python number")
            # on the call's own device: a host scalar beside CUDA tensors would keep CUDA graphs off the fixed copy
            on = next(iter_tensors((tuple(call.args), dict(call.kwargs))), None)
            value = torch.tensor(float(value), device=on.device if on is not None else None)
        if slot[0] == "kw":
            kwargs[slot[1]] = value
        else:
            args[slot[1]] = value
        out.append(Call(tuple(args), kwargs))
    return out


def make_variant(
    model: torch.nn.Module, calls: list[Call], actions: list[rm.FixAction], device: str | None = None, *, share: bool = False
) -> Variant:
    """A copy of the model (on `device`: the pristine model may live on the host; with `share`, inference,
    sharing its parameters: `copying.working_copy`) and inputs with the actions applied (regional actions
    are ignored here)."""
    try:
        copied = working_copy(model, device, share=share)
    except CopyError as exc:
        raise VariantError(str(exc)) from exc
    variant = Variant(copied, [Call(clone_inputs(c.args), clone_inputs(dict(c.kwargs))) for c in calls])
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
                    raise VariantError(f"no submodule {path!r}") from exc
                module.forward = ti.disable(module.forward)  # instance attribute on the copy
        elif action.type == "source_patch":
            sources.append(action)
        elif action.type == "call_argument":  # the value the library computed from the data, passed from the call
            value = library_value(model, calls, action, device)
            sources.append(action.model_copy(update={"edits": [f"{e}={value!r}" for e in action.edits]}))
        elif action.type == "mark_dynamic" and action.marks:  # tensors marked together: one cause
            for argument, dims in action.marks.items():
                one = action.model_copy(update={"argument": argument, "dims": dims, "marks": {}})
                variant.calls = _transform_calls(variant.calls, names, one)
        elif action.type in ("mark_dynamic", "scalar_to_tensor"):
            variant.calls = _transform_calls(variant.calls, names, action)
        elif action.type == "warm_up":
            variant.warm_up = True
        elif action.type == "change_first":
            variant.change_at = action.call
        elif action.type == "compile_options":
            variant.compile_options.update(action.config)
        elif action.type == "compile_only":
            for path in action.module_paths:
                try:
                    variant.model.get_submodule(path)
                except AttributeError as exc:
                    raise VariantError(f"no submodule {path!r}") from exc
            variant.compile_only = list(action.module_paths)
        elif action.type == "set_attribute":
            if not action.attribute:
                raise VariantError("set_attribute needs an attribute")
            for path in action.module_paths or [""]:
                setattr(variant.model.get_submodule(path), action.attribute, action.value)
        elif action.type == "counter_to_tensor":
            if not _counters_to_tensors(variant.model, action.attribute or ""):
                raise VariantError(f"no module holds an integer attribute {action.attribute!r}")
    if sources:
        _patch_sources(variant.model, sources)
    return variant


def library_value(model: torch.nn.Module, calls: list[Call], action: rm.FixAction, device: str | None = None) -> Any:
    """call_argument: the value the library's own line computes from the data (`action.computed_at`, its local
    `action.local`) when reached from the user's call, read on an eager run of a throwaway copy (inference,
    sharing the weights, so the copy the check compiles stays fresh); the one value every call gave, or
    VariantError (it differs between calls, it is no literal, the line never ran from the user's call)."""
    at, local = action.computed_at, action.local
    if at is None or not local or not action.file or not action.edits:
        raise VariantError("call_argument needs the library's line, its local and the user's call")
    own_line = edit_line(action.edits[0])
    values: list[Any] = []

    def watch(frame: Any, event: str, _arg: Any) -> None:
        if event != "return" or frame.f_code.co_filename != at.file or frame.f_code.co_name != at.function:
            return
        caller = frame.f_back
        while caller is not None:  # reached from the user's own line
            if caller.f_code.co_filename == action.file and caller.f_lineno == own_line:
                values.append(frame.f_locals.get(local))
                return
            caller = caller.f_back

    try:
        probe = working_copy(model, device, share=True).eval()
    except CopyError as exc:
        raise VariantError(str(exc)) from exc
    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        with torch.no_grad():
            for call in calls:
                probe(*clone_inputs(call.args), **clone_inputs(dict(call.kwargs)))
    except Exception as exc:  # noqa: BLE001 - the model's own error on the probe: the value cannot be read
        raise VariantError(f"reading the value {at.function} computes raised {type(exc).__name__}") from exc
    finally:
        sys.setprofile(previous)
        del probe
    where = f"{at.file.rsplit('/', 1)[-1]}:{at.line}"
    if not values:
        raise VariantError(f"{where} did not run from your call: no value to pass")
    distinct = list(dict.fromkeys(repr(v) for v in values))
    if len(distinct) > 1:
        raise VariantError(
            f"the value {where} computes differs between calls ({', '.join(distinct[:4])}): no single value stands for it "
            "on a copy; pass it from your data"
        )
    value = values[0]
    try:
        literal = ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        literal = False
    if not literal:
        raise VariantError(f"{where} computes a {type(value).__name__}, not a plain value to pass")
    return value


def _counters_to_tensors(model: torch.nn.Module, path: str) -> int:
    """Every integer attribute at `path` (`step`, `inner.step`) from any module of the copy, now a 0-d int64
    buffer (not saved with the state dict) on the module's device; how many were converted."""
    *walk, name = path.split(".")
    converted = 0
    for module in model.modules():
        holder: Any = module
        for part in walk:
            holder = getattr(holder, part, None)
        value = vars(holder).get(name) if isinstance(holder, torch.nn.Module) else None
        if isinstance(value, int) and not isinstance(value, bool):
            device = next((t.device for t in holder.parameters()), None)
            delattr(holder, name)
            holder.register_buffer(name, torch.tensor(value, dtype=torch.long, device=device), persistent=False)
            converted += 1
    return converted
