"""Recompile causes: fold the recompile events of a report into the few reasons behind them.

One input whose batch size changes recompiles every frame that sees it: the root forward, each
sub-module's forward, Dynamo's resume functions after a break. One guard on a per-layer object
(`past_key_values.layers[3].is_initialized`) recompiles a shared block once per layer. The events are
symptoms; a cause is what to fix. Torch-free: works on a live report and on one read from logs alike.

An event joins an existing cause when
  - it recompiled the same code for the same guard (kind, source with instance indices as `*`, dim),
    in any call: a value that keeps changing, a per-layer guard, a resume function's entry again; or
  - in the same workload call, its triggering guard is of the same kind and shows the same change
    (`expected 2, actual 3`): the change travelled down from the frame that saw it first; or
  - in the same workload call, its triggering guard is on the same attribute of `self` in a function of
    the same class and file: one object's attribute that several of its methods read; or
  - in the same workload call, it recompiled the same code, shared by several instances of one module
    class, on a shape (size, stride), whichever tensor: one class's blocks, each of its own width (a YOLO
    model's `Conv` layers after a break split its layer loop), compiled once per instance: a storm.
Otherwise it starts a new cause. Every event belongs to exactly one cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...reports import models as rm
from ...reports.advice.guard_kinds import guard_kind
from ...reports.labels import module_path_of
from .parsing import classify_guard, split_recompile_reasons
from .sources import function_name

_INDEX = re.compile(r"\[(\d+|'\d+')\]")
_DOTTED_INDEX = re.compile(r"\.(\d+)(?=\.|\[|$)")
_INTERNAL = re.compile(r"^(___stack\d+|___\w+|L\['___\w+'\])")
_OF_SELF = re.compile(r"^(?:self|L\[(['\"])self\1\])[.\[]")
_SHAPES = ("size", "stride")
"""Guard kinds of a tensor's shape: a module class compiled once per instance of its own width."""
STORM_INSTANCES = 3
"""Instances of one module, each compiled for its own shapes, that make a storm."""


def user_source(source: str | None) -> str | None:
    """A guard source as people read it (`reports/labels.module_path_of`): `L['x']` -> `x`,
    `L['self'].flag` -> `self.flag`, a walk through the model's modules as its dotted module path
    (`self._modules['blocks']._modules['3']._parameters['weight']` -> `blocks.3.weight`)."""
    return None if source is None else module_path_of(source)


def of_self(source: str | None) -> bool:
    """Whether a (raw) guard source starts at the compiled module itself: `self.x`, `L['self']._modules[...]`."""
    return source is not None and bool(_OF_SELF.match(source))


def instance_pattern(source: str | None) -> str | None:
    """A source with its instance indices as `*`: `layers[3].x` and `layers[4].x` are one guard."""
    if source is None:
        return None
    return _DOTTED_INDEX.sub(".*", _INDEX.sub("[*]", source))


def trigger(rc: rm.Recompile) -> rm.FailedGuard | None:
    """The guard that explains an event: the newest cache entry's failure, skipping unclassified ones
    (a guard that raised while being checked) when a classified one is there."""
    if not rc.failed_guards:
        return None
    return next((g for g in rc.failed_guards if g.kind != "other"), rc.failed_guards[0])


def to_one(g: rm.FailedGuard) -> bool:
    """A size guard whose new size is 0 or 1 where the compiled one was not: torch specializes those sizes."""
    return g.kind == "size" and g.actual in ("0", "1") and g.expected not in (None, "0", "1")


def _code(rc: rm.Recompile) -> tuple[object, ...]:
    """What identifies the recompiled code: Dynamo's frame id (one per code object: `0` of `0/3`, with
    its rank prefix), else the function's file and line."""
    frame, sep, _ = rc.compile_id.rpartition("/")
    if sep and frame:
        return (rc.rank, frame)
    return (rc.rank, rc.file, rc.line)


def _is_internal(source: str | None) -> bool:
    return source is None or bool(_INTERNAL.match(source))


def _function(rc: rm.Recompile) -> str:
    return f"{rc.module_class}.{rc.function}" if rc.module_class else rc.function


def _values(events: list[tuple[rm.Recompile, rm.FailedGuard | None]]) -> list[str]:
    """What the triggering guards show, oldest cache entry first, then what failed them."""
    values: list[str] = []

    def add(value: str | None) -> None:
        if value is not None and (not values or values[-1] != value) and value not in values:
            values.append(value)

    for rc, g in events:
        if g is None:
            continue
        same = [f for f in rc.failed_guards if f.kind == g.kind and instance_pattern(f.source) == instance_pattern(g.source)]
        if g.kind == "size" and not to_one(g):  # the entry compiled for a size of 1 is that one-off's, not this change's
            same = [f for f in same if f.expected not in ("0", "1")]
        for f in sorted(same, key=lambda f: _entry_order(f.cache_entry)):
            add(f.expected)
        add(g.actual)
    return values


def _entry_order(entry: str | None) -> tuple[int, int]:
    if entry and "/" in entry:
        a, _, b = entry.partition("/")
        if a.isdigit() and b.isdigit():
            return int(a), int(b)
    return (1 << 30, 0)


def cause_line(
    kind: str, source: str | None, dim: int | None, values: list[str], per_instance: bool, reason: str, reasons: list[str] | None = None
) -> str:
    """One line for a cause (`x dim 0 changes 2 → 3`), in the words of its kind's entry (`reasons`: every
    event's guard text, for a kind whose line says what changed across them: an adapter's)."""
    text = guard_kind(kind).describe(source or "an input", source, dim, values, reason, reasons)
    return text + (", a separate guard per instance" if per_instance else "")


_ARGS = re.compile(r"^args\[(\d+)\]")
_KWARGS = re.compile(r"^kwargs\['(\w+)'\]")
_INPUT_NAME = re.compile(r"(?:^|, )(\w+): ")


def input_names(report: rm.Report) -> list[str]:
    """The first call's argument names in call order (positional first), from `target.inputs`."""
    return _INPUT_NAME.findall(report.target.inputs[0]) if report.target.inputs else []


def user_argument(source: str | None, names: list[str]) -> str | None:
    """A guard source through a `*args, **kwargs` wrapper back to the user's argument: `args[0]` ->
    `pixel_values` (the first argument of the call), `kwargs['input_ids']` -> `input_ids`."""
    if source is None:
        return None
    m = _ARGS.match(source)
    if m and int(m.group(1)) < len(names) and not re.fullmatch(r"arg\d+", names[int(m.group(1))]):
        return names[int(m.group(1))] + source[m.end() :]
    m = _KWARGS.match(source)
    if m:
        return m.group(1) + source[m.end() :]
    return source


def recompile_causes(
    recompiles: list[rm.Recompile], suggestions: Iterable[rm.Suggestion] = (), names: list[str] | None = None
) -> list[rm.RecompileCause]:
    """Group recompile events into causes (see the module docstring); ids `C1`... in order of first
    strike. `names`: the call's argument names, to name `args[N]` / `kwargs[...]` sources after them."""
    groups: list[list[tuple[rm.Recompile, rm.FailedGuard | None]]] = []
    by_code: dict[tuple[object, ...], int] = {}
    by_change: dict[tuple[object, ...], int] = {}
    by_shape: dict[tuple[object, ...], int] = {}
    for rc in recompiles:
        g = trigger(rc)
        code = _code(rc)
        if g is None:
            code_key: tuple[object, ...] = (*code, "none", rc.failed_guards[0].reason if rc.failed_guards else "")
            change_key: tuple[object, ...] | None = None
        else:
            # an adapter's guards (how many, which is active, its scale) are one change of one structure; a size
            # that becomes 0 or 1 (torch specializes them: a decoder's one-token step) is a cause of its own,
            # apart from the other sizes the same dim takes (a new prompt length)
            code_key = (*code, g.kind, "lora" if g.kind == "adapter" else instance_pattern(g.source), g.dim, to_one(g))
            # a tensor property travels into every frame the tensor reaches; a Python value of one
            # frame says nothing about another frame's value unless both sides of the change are known
            known = g.expected is not None and (g.actual is not None or guard_kind(g.kind).travels)
            change_key = (rc.rank, rc.call_index, g.kind, g.expected, g.actual) if known else None
            if change_key is None and of_self(g.source):
                # one object's attribute read by several of its methods (or their resume functions) in one
                # call: `self` of one class's file, changed once (a scheduler's `_step_index`)
                change_key = (rc.rank, rc.call_index, g.kind, g.source, rc.module_class, rc.file)
        index = by_code.get(code_key)
        if index is None and change_key is not None:
            index = by_change.get(change_key)
        shared = len(rc.module_paths) >= STORM_INSTANCES
        shape_key = (*code, "shape", rc.call_index) if g is not None and g.kind in _SHAPES and shared else None
        if index is None and shape_key is not None:
            index = by_shape.get(shape_key)  # the same code for another instance, in the same call: one storm
        if index is None:
            index = len(groups)
            groups.append([])
        groups[index].append((rc, g))
        by_code.setdefault(code_key, index)
        if change_key is not None:
            by_change.setdefault(change_key, index)
        if shape_key is not None:
            by_shape.setdefault(shape_key, index)

    by_recompile: dict[str, list[str]] = {}
    for s in suggestions:
        for rid in s.applies_to:
            by_recompile.setdefault(rid, []).append(s.id)
    causes = []
    for i, events in enumerate(groups, 1):
        causes.append(_cause(f"C{i}", events, by_recompile, names or []))
    return causes


def _cause(
    cid: str, events: list[tuple[rm.Recompile, rm.FailedGuard | None]], by_recompile: dict[str, list[str]], names: list[str]
) -> rm.RecompileCause:
    first_rc, first_g = events[0]
    # the source a user recognises: the first event whose guard names a real input, not `___stack0`
    named = next((g for _, g in events if g is not None and not _is_internal(g.source)), first_g)
    sources = {g.source for _, g in events if g is not None and g.source is not None}
    per_instance = any(instance_pattern(s) != s for s in sources) and len(sources) > 1
    values_seen = _values(events)
    if not per_instance and first_g is not None and first_g.kind in ("value", "attribute"):
        # an integer attribute of `self` that takes a new value in one call, in one shared code
        # object: a per-instance index (`self.layer_idx`); Dynamo treats it as static
        same_call = len({rc.call_index for rc, _ in events}) == 1
        index_like = len(values_seen) > 1 and all(v.isdigit() for v in values_seen)
        per_instance = same_call and index_like and of_self(first_g.source)
    at_root = next((not rc.module_paths or "" in rc.module_paths for rc, g in events if g is named), False)
    source = user_source(named.source if named else None)
    if at_root:  # the call's own arguments are the root frame's
        source = user_argument(source, names)
    if per_instance:
        source = instance_pattern(source)
    kind = first_g.kind if first_g else "other"
    values = _values(events)
    reason = first_g.reason if first_g else "no guard failure recorded"
    functions = list(dict.fromkeys(_function(rc) for rc, _ in events))
    paths = list(dict.fromkeys(p for rc, _ in events for p in rc.module_paths))
    shapes = {(g.source, g.dim) for _, g in events if g is not None}
    storm = (
        kind in _SHAPES
        and len(functions) == 1
        and len({_code(rc) for rc, _ in events}) == 1
        and len({rc.call_index for rc, _ in events}) == 1
        and len(paths) >= STORM_INSTANCES
        # several tensors of the blocks change (`x` and `conv.bias`), or one takes a width per instance in one
        # call (ultralytics' Conv.forward: `x` dim 1 is 3, 16, 32... across its instances)
        and (len(shapes) > 1 or len(values) >= STORM_INSTANCES)
    )
    suggestion_ids = list(dict.fromkeys(sid for rc, _ in events for sid in by_recompile.get(rc.id, [])))
    return rm.RecompileCause(
        id=cid,
        kind=kind,
        source=source,
        dim=named.dim if named is not None else None,
        values=values,
        recompiles=[rc.id for rc, _ in events],
        functions=functions,
        code_objects=len({_code(rc) for rc, _ in events}),
        module_paths=paths,
        first_call=first_rc.call_index,
        per_instance=per_instance,
        user_stack=list(named.user_stack) if named is not None else [],
        summary=(
            f"{functions[0]} compiles once per instance: {len(paths)} instances of its module, each of its own "
            f"shapes ({cause_line(kind, source, named.dim if named is not None else None, values, False, reason)})"
            if storm
            else cause_line(
                kind,
                source,
                named.dim if named is not None else None,
                values,
                per_instance,
                reason,
                [g.reason for _, g in events if g is not None],
            )
        ),
        storm=storm,
        suggestion_ids=suggestion_ids,
        expected=first_rc.expected if all(rc.expected for rc, _ in events) else None,
        trigger=next((rc.trigger for rc, _ in events if rc.trigger), None),
    )


def arm_recompiles(events: list[tuple[str, str, dict[str, object]]]) -> list[rm.Recompile]:
    """Recompile entries from `CompileStats.recompile_events` (a benchmark arm's own recompiles; no
    module paths or call index: ids `R1`... are the arm's own)."""
    out: list[rm.Recompile] = []
    for cid, payload, metrics in events:
        guards = [rm.FailedGuard(**classify_guard(r)) for r in split_recompile_reasons(payload)]  # type: ignore[arg-type]
        out.append(
            rm.Recompile(
                id=f"R{len(out) + 1}",
                function=function_name(str(metrics.get("co_name") or "?")),
                file=str(metrics.get("co_filename") or "?"),
                line=int(metrics.get("co_firstlineno") or 0),  # type: ignore[call-overload]
                compile_id=cid,
                failed_guards=guards,
            )
        )
    return out
