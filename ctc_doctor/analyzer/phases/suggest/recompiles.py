"""Recompile rules, named in the guard kinds' registry (`reports/advice/guard_kinds`) by the kinds they answer
(like the break rules are keyed by gb_type). Each rule sees the failed guards of its kinds, in the order
the recompiles happened; kinds without a rule of their own get their entry's one line of advice."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ....reports import models as rm
from ....reports.advice.guard_kinds import guard_kind, rules
from ....reports.labels import module_path_of
from ....reports.links import DOCS
from ...fixes.facts import ModelFacts
from ...readers.causes import input_names, of_self, recompile_causes, trigger
from ...readers.compile_time import hit_the_limit, settled_after_one
from .adapters import adapter_rule
from .base import Failures, RuleContext
from .changes import changed_rule, made_inside_libraries
from .schedulers import in_scheduler, scheduler_suggestion
from .state import INT, state_rule


def _argument(source: str | None, facts: ModelFacts | None) -> str | None:
    """The forward argument a guard source names (`x`, `L['x']`, `kwargs['input_ids']`), if any."""
    if not source or facts is None:
        return None
    positional = re.fullmatch(r"(?:L\[')?args(?:'\])?\[(\d+)\]", source)
    if positional:  # through a `*args` wrapper (transformers' forward decorators): the Nth argument
        index = int(positional.group(1))
        return facts.arg_names[index] if index < len(facts.arg_names) else None
    match = re.fullmatch(r"(?:L\[')?(\w+)(?:'\])?(?:\[['\"](\w+)['\"]\])?", source)
    if not match:
        return None
    name, key = match.group(1), match.group(2)
    if name == "kwargs" and key:
        name = key
    return name if name in facts.arg_names or name in facts.arg_kinds else None


def _is_root(recompile: rm.Recompile) -> bool:
    return "" in recompile.module_paths


@dataclass
class _Marks:
    """Input dimensions to mark dynamic together, and the recompiles they address."""

    pairs: set[tuple[str, int]]
    applies: dict[str, None]
    first: str
    """The argument whose guard failed first."""

    def by_argument(self, order: list[str]) -> dict[str, list[int]]:
        """Argument -> its dims, the first guarded argument first, then in forward's order."""
        rank = {name: i for i, name in enumerate(order)}
        out: dict[str, list[int]] = {}
        for arg, dim in sorted(self.pairs, key=lambda p: (p[0] != self.first, rank.get(p[0], len(rank)), p[0], p[1])):
            out.setdefault(arg, []).append(dim)
        return out


def _mark_groups(ctx: RuleContext, failures: Failures) -> list[_Marks]:
    """The size guards of forward's tensor arguments, one group per changing length: a dimension that
    takes the same sizes in several arguments (`input_ids`, `labels`, `attention_mask` dim 1) is one
    cause and is marked in all of them at once; one argument's own dimensions stay one group."""
    facts = ctx.facts
    groups: list[_Marks] = []
    for rc, guard in failures.items:
        arg = _argument(guard.source, facts)
        if not (arg and _is_root(rc) and guard.dim is not None and facts and facts.arg_kinds.get(arg) == "tensor"):
            continue
        pairs = {(a, d) for a, ds in facts.tied_dims(arg, guard.dim).items() for d in ds}
        args = {a for a, _ in pairs}
        merged = _Marks(pairs, {rc.id: None}, arg)
        matched = [g for g in groups if g.pairs & pairs or {a for a, _ in g.pairs} == args == {arg}]
        for g in matched:
            groups.remove(g)
            merged.pairs |= g.pairs
            merged.applies = {**g.applies, **merged.applies}
        if matched:
            merged.first = matched[0].first
        groups.append(merged)
    return groups


def _sizes(facts: ModelFacts | None, marks: dict[str, list[int]], first_only: bool = False) -> set[int]:
    """The sizes the marked dimensions took over the calls (`first_only`: in the first call)."""
    out: set[int] = set()
    for arg, dims in marks.items():
        shapes = facts.arg_shapes.get(arg, []) if facts else []
        for shape in shapes[:1] if first_only else shapes:
            out.update(shape[d] for d in dims if shape is not None and d < len(shape))
    return out


def _specialized_size(ctx: RuleContext, group: _Marks, arg: str, dims: str, sizes: set[int]) -> None:
    """A dimension that takes the size 0 or 1 cannot be marked dynamic (torch specializes those sizes):
    the recompile is paid once for that size, not fixed (a decoding loop's prefill, then one-token steps)."""
    seen = " → ".join(str(n) for n in sorted(sizes, reverse=True))
    ctx.add(
        "specialized-size",
        f"`{arg}` {dims} takes the size {min(sizes)}: a one-off recompile, not a fix to make",
        f"`{arg}` {dims} takes the sizes {seen}. Torch specializes sizes 0 and 1, so marking it dynamic cannot hold "
        "(`ConstraintViolationError`): the first call of that size compiles once more, and automatic dynamic shapes "
        "cover the other sizes after it. In a decoding loop this is the prefill → one-token step recompile every "
        "loop pays once.",
        "dynamic_shapes",
        list(group.applies),
        references=[DOCS["dynamic"]],
    )


def compiled_by_library(report: rm.Report) -> rm.CompiledObject | None:
    """The analyzed object when a library compiled it (`run`: diffusers' `compile_repeated_blocks`,
    transformers' generate compile): the library calls it too, so its arguments are not the user's."""
    analyzed = report.analyzed_compile
    return analyzed if analyzed is not None and analyzed.library not in (None, "torch", "stdlib") else None


def _library_compile(compiled: rm.CompiledObject) -> tuple[str, str]:
    """How the user sets the options of a library's compile: (words, a snippet with `dynamic=True`)."""
    if compiled.library == "diffusers" and "modeling_utils" in (compiled.site or ""):
        return "`compile_repeated_blocks()`", "model.compile_repeated_blocks(dynamic=True)  # its options reach every block's torch.compile"
    words = f"{compiled.library}'s compile call (`{compiled.site}`)"
    return words, f"# where {compiled.library} takes its torch.compile options:\ndynamic=True"


def _library_sizes(ctx: RuleContext, failures: Failures, compiled: rm.CompiledObject) -> None:
    """Sizes that change in a block a library compiled and calls: its arguments cannot be marked by the
    user; `dynamic=True` in the library's compile call (`run --compare dynamic` measures it) can."""
    words, snippet = _library_compile(compiled)
    ctx.add(
        "library-compile-dynamic",
        f"Pass `dynamic=True` to {words}: the sizes change inside `{compiled.name}`, which {compiled.library} compiles and calls",
        f"`{compiled.name}` was compiled by {compiled.library} (`{compiled.site}`) and is called by its code, so its "
        "arguments never pass through your hands: marking them dynamic is not yours to do. The sizes that change "
        "(a new resolution or batch size) recompile each block's frame until automatic dynamic shapes settle it. "
        "Compiled with `dynamic=True`, the first compile is already shape-generic (a size of 1, or blocks of "
        "another width, still get a graph of their own). `ctc-doctor run --compare default,dynamic` measures the "
        "change on your script.",
        "dynamic_shapes",
        failures.ids(),
        snippet=snippet,
        references=[DOCS["dynamic"]],
    )


def _stride_rule(ctx: RuleContext, failures: Failures) -> None:
    """A layout change: at the user's own call, a contiguous input; inside a block the library calls (or a
    frame past a break), the layout follows the model's input, which is what to keep in one format."""
    library = compiled_by_library(ctx.report)

    def at_the_call(rc: rm.Recompile) -> bool:  # the user's own call: the root module, or a compiled function
        return library is None and (not rc.module_paths or _is_root(rc))

    inside = [(rc, g) for rc, g in failures.items if not at_the_call(rc)]
    own = [(rc, g) for rc, g in failures.items if at_the_call(rc)]
    if own:
        _advice_rule(ctx, Failures(failures.kinds, own))
    if not inside:
        return
    sources = list(dict.fromkeys(module_path_of(g.source) for _, g in inside if g.source))
    shown = ", ".join(f"`{s}`" for s in sources[:3]) or "a tensor"
    where = f"`{library.name}`, which {library.library} compiles and calls" if library else "a frame your call does not reach"
    ctx.add(
        "stride-inside",
        "Pass the model's inputs in one memory format (all contiguous, or all channels_last)",
        f"The strides of {shown} changed inside {where}: that tensor is made by the model's code from your input, "
        "and its layout follows your input's (a channels_last image, a transposed view). No call you make passes "
        "it, so there is nothing to make contiguous there. Keep the model's inputs in one layout across calls.",
        "source_edit",
        Failures(failures.kinds, inside).ids(),
        snippet="x = x.contiguous()  # or x.to(memory_format=torch.channels_last), the same for every call\nout = model(x)",
        references=[DOCS["troubleshooting"]],
    )


def _above(path: str, modules: set[str]) -> bool:
    """Whether the module at `path` holds one of `modules` (the root holds them all)."""
    return path == "" or any(m == path or m.startswith(path + ".") for m in modules)


def _storm_rule(ctx: RuleContext, failures: Failures) -> Failures:
    """A module class compiled once per instance, each of its own shapes (`RecompileCause.storm`): the
    blocks are called one by one from eager code (a break split the loop that calls them), so each is a
    frame of its own. Marking sizes dynamic does not help (the weights differ); what does is keeping the
    loop in one graph. The failures left for the other size rules are returned."""
    # the causes as `derive` will fold them (it runs once the suggestions are made)
    storms = [c for c in recompile_causes([r for r in ctx.report.recompiles if not r.expected]) if c.storm]
    stormy = {r for c in storms for r in c.recompiles}
    if not stormy:
        return failures
    # one suggestion for every storm (a layer loop split by a break makes one per block class it calls)
    parents = {p.rpartition(".")[0] for cause in storms for p in cause.module_paths}
    # the breaks in the code that calls the blocks: in a module above them (the root included)
    sites = [s for s in ctx.report.graph_breaks if not s.expected and any(_above(p, parents) for p in s.module_paths or [""])]
    classes = ", ".join(f"`{c.functions[0].rpartition('.')[0] or c.functions[0]}`" for c in storms)
    shown = ", ".join(s.id for s in sites[:3])
    title = (
        f"Remove the break that splits the loop over the {classes} blocks ({shown})"
        if sites
        else f"Compile the {classes} blocks in one graph, or each on its own with `dynamic=False`"
    )
    each = "; ".join(f"`{c.functions[0]}` compiled once per instance ({len(c.module_paths)} instances)" for c in storms)
    ctx.add(
        "per-instance-storm",
        title,
        f"{each}, each of its own widths: the blocks are called one by one from code that runs eagerly, so each is a "
        "frame of its own, and the frame recompiles for every new width until the recompile limit, after which the "
        "blocks run eagerly. Marking sizes dynamic does not help (each block's weights differ). "
        + (
            f"Removing {shown} keeps the loop in one graph, the blocks inlined (its own suggestions are checked on a copy)."
            if sites
            else "Compile the module that loops over them, or each block on its own (regional compilation)."
        ),
        "source_edit",
        [*(r for c in storms for r in c.recompiles), *(s.id for s in sites)],
        references=[DOCS["troubleshooting"]],
    )
    return Failures(failures.kinds, [(rc, g) for rc, g in failures.items if rc.id not in stormy])


def _size_rule(ctx: RuleContext, failures: Failures) -> None:
    library = compiled_by_library(ctx.report)
    if library is not None:
        _library_sizes(ctx, failures, library)
        return
    failures = _storm_rule(ctx, failures)
    if not failures.items:
        return
    marked = False
    padded: dict[str, list[int]] = {}
    settled = _settled(ctx.report)
    for group in _mark_groups(ctx, failures):
        marks = group.by_argument(ctx.facts.arg_names if ctx.facts else [])
        (arg, ordered), *others = marks.items()
        calls = "\n".join(f"torch._dynamo.mark_dynamic({a}, {d})" for a, ds in marks.items() for d in ds)
        dims = f"dim {', '.join(map(str, ordered))}"
        sizes = _sizes(ctx.facts, marks)
        if set(group.applies) <= settled:  # the size of 1 (a decode step) is a cause of its own, expected already
            actual = [g.actual for rc, g in failures.items if rc.id in group.applies]
            sizes = _sizes(ctx.facts, marks, first_only=True) | {int(a) for a in actual if a is not None and a.isdigit()}
        if sizes & {0, 1}:
            _specialized_size(ctx, group, arg, dims, sizes)
            continue
        padded = padded or marks
        if others:
            names = ", ".join(f"`{a}`" for a in marks)
            title = f"Mark {names} {dims} dynamic together before the first call"
            rationale = (
                f"{names} change size together at {dims} between calls: one changing length, one recompile cause. "
                "Marked dynamic together, the first compile is already shape-generic; marking one alone makes Dynamo "
                "specialize it to the size of the others, still static (`ConstraintViolationError`)."
            )
        else:
            title = f"Mark `{arg}` {dims} dynamic before the first call"
            rationale = (
                f"`{arg}` changes size at {dims} between calls, so the first compile specializes on the first size and "
                "the next size recompiles. Marked dynamic, the first compile is already shape-generic."
            )
        ctx.add(
            "mark-dynamic",
            title,
            rationale,
            "dynamic_shapes",
            list(group.applies),
            auto_applicable=True,
            snippet=calls + "\nout = compiled_model(...)",
            references=[DOCS["mark_dynamic"]],
            action=rm.FixAction(type="mark_dynamic", argument=arg, dims=ordered, marks=marks if others else {}),
        )
        marked = True
    if set(failures.ids()) <= settled:
        return  # one new size, then automatic dynamic shapes served the rest: no `dynamic=True` or padding for a one-off
    if made_inside_libraries(ctx, failures, marked):
        return
    pad = pad_snippet(padded, ctx.facts)
    how = "compile with `dynamic=True`" + (", or pad inputs to a few bucket sizes" if pad else "")
    ctx.add(
        "dynamic-or-buckets",
        f"Or {how}" if marked else how[0].upper() + how[1:],  # an alternative only after what it is one to
        "`dynamic=True` makes every dimension symbolic from the start (slower kernels in some cases)"
        + (
            f"; padding {_dims_text(padded)} to e.g. multiples of 64 (with a value the model ignores: a pad token, a "
            "masked position) bounds the number of distinct shapes, and so of compiles."
            if pad
            else "."
        ),
        "dynamic_shapes",
        failures.ids(),
        auto_applicable=True,  # the `dynamic=True` half, checked on a copy compiled with it
        snippet="compiled = torch.compile(model, dynamic=True)" + (f"\n# or: pad to a bucket\n{pad}" if pad else ""),
        references=[DOCS["dynamic"]],
        action=DYNAMIC,
    )


DYNAMIC = rm.FixAction(type="compile_options", config={"dynamic": True})
"""What `fix` checks of "compile with `dynamic=True`": a copy compiled with it."""


def _settled(report: rm.Report) -> set[str]:
    """The recompiles of size causes that changed once and then settled (`compile_time.settled_after_one`)."""
    causes = recompile_causes([r for r in report.recompiles if not r.expected], (), input_names(report))
    return {r for c in causes if settled_after_one(c, report) for r in c.recompiles}


def _dims_text(marks: dict[str, list[int]]) -> str:
    """`x dim 0` / `input_ids, attention_mask dim 1`: what changes, as the marks name it."""
    dims = {tuple(d) for d in marks.values()}
    if len(dims) == 1:
        return f"{', '.join(f'`{a}`' for a in marks)} dim {', '.join(map(str, next(iter(dims))))}"
    return ", ".join(f"`{a}` dim {', '.join(map(str, d))}" for a, d in marks.items())


def pad_snippet(marks: dict[str, list[int]], facts: ModelFacts | None) -> str | None:
    """Code that pads each changing dimension of the forward arguments that change (the dims the marks name,
    of the rank each argument has) up to a multiple of 64; None when no argument of the user's call changes
    size (padding what the model makes inside would not bound it)."""
    lines: list[str] = []
    for arg, dims in marks.items():
        shapes = [s for s in (facts.arg_shapes.get(arg, []) if facts else []) if s is not None]
        if not shapes or not arg.isidentifier():
            continue
        rank = len(shapes[0])
        for dim in dims:
            if not 0 <= dim < rank:
                continue
            size = f"{arg}.shape[{dim}]"
            # F.pad takes (left, right) pairs from the last dimension backwards: the pair of `dim` last
            pairs = ["0, 0"] * (rank - 1 - dim) + [f"0, -(-{size} // 64) * 64 - {size}"]
            lines.append(f"{arg} = torch.nn.functional.pad({arg}, ({', '.join(pairs)}))  # dim {dim} up to a multiple of 64")
    return "\n".join(lines) or None


def _dtype_rule(ctx: RuleContext, failures: Failures) -> None:
    ctx.add(
        "dtype-recompile",
        "Cast inputs to one dtype before the compiled model",
        "A compiled graph is specialized to its input dtypes; each new dtype compiles again. Cast at the "
        "boundary (or keep one compiled model per dtype on purpose).",
        "source_edit",
        failures.ids(),
        snippet="out = compiled_model(x.to(torch.float32))",
        references=[DOCS["troubleshooting"]],
    )


_GLOBAL = re.compile(r"^G\['(?P<name>\w+)'\]$")


def _global_counter(ctx: RuleContext, failures: Failures) -> None:
    """An integer global the code reads (`STEP`) and that keeps changing: no option makes it dynamic (torch
    specializes integer globals), so the advice is a tensor."""
    found = {
        g.source: m.group("name") for _, g in failures.items if g.source and (m := _GLOBAL.match(g.source)) and INT.match(g.expected or "")
    }
    if not found:
        return
    applies = list(dict.fromkeys(rc.id for rc, g in failures.items if g.source in found))
    name = next(iter(found.values()))
    names = ", ".join(f"`{n}`" for n in found.values())
    ctx.add(
        "tensor-counter",
        f"Keep the global {names} in a tensor",
        f"Compiled code guards on the value of the integer global {names} and compiles again for each new value "
        "(torch keeps integer globals static; no option changes that). A tensor is read as an input: update it in place.",
        "source_edit",
        applies,
        snippet=f"{name} = torch.zeros((), dtype=torch.long)\n# each step, instead of assigning an int:\n{name}.fill_(step)",
        references=[DOCS["troubleshooting"]],
    )


def _value_rule(ctx: RuleContext, failures: Failures) -> None:
    _global_counter(ctx, failures)
    for rc, guard in failures.items:
        arg = _argument(guard.source, ctx.facts)
        if not arg or not _is_root(rc):
            continue
        kind = ctx.facts.arg_kinds.get(arg) if ctx.facts else None
        if kind == "float":
            ctx.add(
                "scalar-to-tensor",
                f"Pass `{arg}` as a 0-d tensor, not a Python float",
                f"Dynamo bakes Python floats into the graph as constants and guards on `{arg} == {guard.expected}`; "
                "each new value recompiles (until automatic dynamic kicks in). A tensor is an input like any other.",
                "dynamic_shapes",
                [rc.id],
                auto_applicable=True,
                snippet=f"out = compiled_model(..., {arg}=torch.tensor({guard.expected}))",
                references=[DOCS["dynamic"]],
                action=rm.FixAction(type="scalar_to_tensor", argument=arg),
            )
        else:
            ctx.add(
                "scalar-specialization",
                f"`{arg}` is a Python {kind or 'value'} baked into the graph",
                f"Each new value of `{arg}` recompiles until Dynamo makes it dynamic. Keep it constant, pass it as a "
                "tensor, or compile with `dynamic=True`.",
                "dynamic_shapes",
                [rc.id],
                references=[DOCS["dynamic"]],
            )


_PARAMETER = re.compile(r"(?:\._parameters|\.__dict__\[(['\"])_parameters\1\])\[(['\"])[^'\"]*\2\]$")
_ON_A_PARAMETER = "Guard failed on a parameter"
"""What torch (2.13) adds to a tensor guard's text when the tensor is a parameter."""


def parameter_path(recompile: rm.Recompile, guard: rm.FailedGuard) -> str | None:
    """The parameter a tensor guard is on, as its module path (`mid.lora_A.default.weight`), None for
    an input: a walk to `_parameters[...]`, torch's own note, or a tensor reached from the module itself."""
    if not guard.source or not (_PARAMETER.search(guard.source) or _ON_A_PARAMETER in guard.reason or of_self(guard.source)):
        return None
    path = module_path_of(guard.source)
    if recompile.function == "inner" and path.startswith("fn."):  # torch.compile's wrapper frame around a torch.nn module
        path = path[len("fn.") :]
    return path


def _under_no_grad(items: list[tuple[rm.Recompile, rm.FailedGuard]]) -> bool:
    """Whether the calls that recompiled already ran under `torch.no_grad()` (a script's `trigger` says so)."""
    return any("no_grad" in (rc.trigger or "").split(", ")[1:] for rc, _ in items)


def _getter(path: str) -> str:
    """`model.get_submodule('mid.lora_A.default').weight` for a parameter's module path."""
    module, _, name = path.rpartition(".")
    return f"model.get_submodule('{module}').{name}" if module else f"model.{name}"


def _parameter_rule(ctx: RuleContext, items: list[tuple[rm.Recompile, rm.FailedGuard, str]]) -> None:
    paths = list(dict.fromkeys(path for _, _, path in items))
    shown = ", ".join(f"`{p}`" for p in paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
    it = "it" if len(paths) == 1 else "them"
    ctx.add(
        "requires-grad-parameter",
        f"{shown} changed `requires_grad` between calls: freeze {it} (or set {it}) before compiling",
        f"{shown} {'is a parameter' if len(paths) == 1 else 'are parameters'} of the model, not an input. Compiled code "
        "guards on a parameter's `requires_grad` like on an input's, so a parameter that becomes trainable (an adapter "
        "added trainable, `requires_grad_()` toggled by a training loop) or frozen recompiles every frame that reads it. "
        "`torch.no_grad()` changes nothing here: the guard reads the parameter's flag, not the grad mode. Give it its "
        "final `requires_grad` before the first compiled call and keep it.",
        "source_edit",
        list(dict.fromkeys(rc.id for rc, _, _ in items)),
        snippet="\n".join(f"{_getter(p)}.requires_grad_(False)  # or True if it is trained" for p in paths[:3])
        + "\nout = compiled_model(x)  # the first compiled call comes after",
        references=[DOCS["troubleshooting"]],
    )


def _requires_grad_rule(ctx: RuleContext, failures: Failures) -> None:
    parameters = [(rc, g, path) for rc, g in failures.items if (path := parameter_path(rc, g)) is not None]
    if parameters:
        _parameter_rule(ctx, parameters)
    on = {(rc.id, id(g)) for rc, g, _ in parameters}
    inputs = [(rc, g) for rc, g in failures.items if (rc.id, id(g)) not in on]
    if not inputs:
        return
    if _under_no_grad(inputs):
        title = "Keep `requires_grad` of inputs consistent"
        rationale = (
            "A frame compiled for an input without grad recompiles when an input that needs grad arrives. These calls "
            "already run under `torch.no_grad()`, which does not change an input's own `requires_grad`: detach the "
            "input (or make it without grad) before the call."
        )
        snippet = "out = compiled_model(x.detach())"
    else:
        title = "Keep `requires_grad` of inputs consistent (or run inference under `torch.no_grad()`)"
        rationale = (
            "A frame compiled for an input without grad recompiles when an input that needs grad arrives (e.g. the "
            "first block gets the raw input, later blocks get activations). Under `torch.no_grad()` inference "
            "there is one kind of input."
        )
        snippet = "with torch.no_grad():\n    out = compiled_model(x)"
    ctx.add(
        "requires-grad-recompile",
        title,
        rationale,
        "source_edit",
        Failures(failures.kinds, inputs).ids(),
        snippet=snippet,
        references=[DOCS["troubleshooting"]],
    )


def _global_state_rule(ctx: RuleContext, failures: Failures) -> None:
    ctx.add(
        "global-state-recompile",
        "Keep grad mode / autocast / deterministic settings fixed around the compiled model",
        "Compiled code guards on global torch state; switching it between calls recompiles.",
        "source_edit",
        failures.ids(),
        references=[DOCS["troubleshooting"]],
    )


def _advice_rule(ctx: RuleContext, failures: Failures) -> None:
    """Kinds without a rule of their own: each kind's one line of advice (`guard_kinds`), as a suggestion."""
    for kind in failures.kinds:
        items = [(rc, g) for rc, g in failures.items if g.kind == kind]
        if not items:
            continue
        sources = list(dict.fromkeys(g.source for _, g in items if g.source))
        shown = ", ".join(f"`{module_path_of(s)}`" for s in sources[:3]) or "an input"
        advice = guard_kind(kind).advise(sources[0] if sources else None, None)
        ctx.add(
            f"{kind}-recompile",
            advice[0].upper() + advice[1:],
            f"Compiled code guards on the {kind} of {shown}; it changed between calls, so each new {kind} compiles again.",
            "source_edit",
            Failures((kind,), items).ids(),
            references=[DOCS["troubleshooting"]],
        )


RULES: dict[str, Callable[[RuleContext, Failures], None]] = {
    "size": _size_rule,
    "dtype": _dtype_rule,
    "value": _value_rule,
    "state": state_rule,
    "requires_grad": _requires_grad_rule,
    "global_state": _global_state_rule,
    "advice": _advice_rule,
    "adapter": adapter_rule,
    "stride": _stride_rule,
    "changed": changed_rule,
}
"""The rules by name; which kinds each answers, and in what order they are listed, is the guard kinds'
registry's (`reports/advice/guard_kinds.KINDS`)."""


def _recompile_limit_rule(ctx: RuleContext) -> None:
    limit_hits = [m for m in ctx.report.compile_metrics if hit_the_limit(m)]
    if limit_hits:
        ctx.add(
            "recompile-limit",
            "Recompile limit hit: fix the cause (above) before raising `torch._dynamo.config.recompile_limit`",
            f"{len(limit_hits)} compile(s) hit the limit; those frames now run eagerly for good. Raising the limit "
            "hides the cause and costs a compile per new value.",
            "config",
            [],
            snippet="torch._dynamo.config.recompile_limit = 32  # the cause is usually a shape or attribute that changes",
            references=[DOCS["troubleshooting"]],
        )


def recompile_suggestions(ctx: RuleContext) -> None:
    """Each rule over the failed guards of the kinds it answers (a loop's expected one-offs left out:
    nothing to fix), in the registry's order, then the recompile-limit rule."""
    by_kind: dict[str, list[tuple[rm.Recompile, rm.FailedGuard]]] = {}
    recompiles = [r for r in ctx.report.recompiles if not r.expected]
    scheduled = [r.id for r in recompiles if in_scheduler(r)]
    if scheduled:  # a scheduler's counter: one answer, whatever the guard's kind
        scheduler_suggestion(ctx, scheduled)
    for rc in (r for r in recompiles if r.id not in scheduled):
        # a rule answers the guard that explains the recompile (its cause's), not an older cache entry's failure
        # that rode along: no "keep grad mode fixed" on a recompile a size change made
        guard = trigger(rc)
        if guard is not None:
            by_kind.setdefault(guard.kind, []).append((rc, guard))
    for rule, kinds in rules():
        items = [item for kind in kinds for item in by_kind.get(kind, [])]
        if items:
            RULES[rule](ctx, Failures(kinds, items))
    _recompile_limit_rule(ctx)
