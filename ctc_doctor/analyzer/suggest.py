"""Fix suggestions: rules keyed by gb_type / registry id / message pattern / guard kind.

`suggest(report, facts)` reads a finished report (and, in a live run, a few facts about the model
that the report does not carry) and returns ranked `Suggestion`s. Each rule names the sites or
recompiles it addresses, says why in terms of this model, and, where the change is mechanical, gives
a diff against the user's file and a `FixAction` that `fix` can apply to a copy of the model.
Suggestions are not verified here: `fix` measures each auto-applicable one and fills `verified`.

No torch import: rules work on report data and source files, so offline reports can use them too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..reports import models as rm
from .rewrite import RewriteError, plan_rewrite

GB_PAGE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"
DOCS = {
    "troubleshooting": "https://docs.pytorch.org/docs/stable/torch.compiler_troubleshooting.html",
    "dynamic": "https://docs.pytorch.org/docs/stable/torch.compiler_dynamic_shapes.html",
    "disable": "https://docs.pytorch.org/docs/stable/generated/torch.compiler.disable.html",
    "is_compiling": "https://docs.pytorch.org/docs/stable/generated/torch.compiler.is_compiling.html",
    "cond": "https://docs.pytorch.org/docs/stable/generated/torch.cond.html",
    "where": "https://docs.pytorch.org/docs/stable/generated/torch.where.html",
    "regional": "https://docs.pytorch.org/tutorials/recipes/regional_compilation.html",
    "cache": "https://docs.pytorch.org/tutorials/recipes/torch_compile_caching_tutorial.html",
    "mark_dynamic": "https://docs.pytorch.org/docs/stable/torch.compiler_dynamic_shapes.html#mark-dynamic",
    "cudagraphs": "https://docs.pytorch.org/docs/stable/torch.compiler_cudagraph_trees.html",
}


CONFIG_OPTIONS_USED = (
    "reorderable_logging_functions",
    "ignore_logger_methods",
    "ignore_logging_functions",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "recompile_limit",
)
"""`torch._dynamo.config` options the rules name (the live analyzer says which exist)."""


@dataclass
class RepeatedGroup:
    """Sibling modules of one class and structure in a container (`layers.0` ... `layers.N`)."""

    container: str
    class_name: str
    paths: list[str]


@dataclass
class ModelFacts:
    """What the live analyzer knows about the model beyond the report (None offline)."""

    arg_names: list[str] = field(default_factory=list)
    """forward's parameter names, in order."""
    arg_kinds: dict[str, str] = field(default_factory=dict)
    """Kind of each argument in the first call: tensor, float, int, bool, other."""
    repeated: list[RepeatedGroup] = field(default_factory=list)
    """Groups of identical blocks."""
    config_options: frozenset[str] = frozenset()
    """Those of CONFIG_OPTIONS_USED this torch has (to check torch's own hints against)."""


@dataclass
class _Ctx:
    report: rm.Report
    facts: ModelFacts | None
    out: list[rm.Suggestion] = field(default_factory=list)

    def add(self, rule: str, title: str, rationale: str, kind: rm.SuggestionKind, applies_to: list[str], **kw: Any) -> None:
        self.out.append(rm.Suggestion(id="", rule=rule, title=title, rationale=rationale, kind=kind, applies_to=applies_to, **kw))


def _refs(site: rm.GraphBreakSite, *docs: str) -> list[str]:
    return [GB_PAGE.format(i.lower()) for i in site.registry_ids] + [DOCS[d] for d in docs]


def _where(site: rm.GraphBreakSite) -> str:
    frame = site.own_frame or site.user_frame
    paths = [p or "(root)" for p in site.module_paths]
    at = f"{frame.file.rsplit('/', 1)[-1]}:{frame.line}"
    if not paths:
        return at
    shown = ", ".join(paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
    return f"`{shown}` at {at}"


def _own_line(site: rm.GraphBreakSite) -> rm.Frame | None:
    """The user's own frame of the site, when it is a line the user can edit."""
    if site.own_code:
        return site.user_frame
    return site.own_frame


def _source_edit(ctx: _Ctx, site: rm.GraphBreakSite, rule: str, title: str, rationale: str, edit: str, refs: list[str], applies: list[str]) -> bool:
    """Add a source_edit suggestion with its diff; False when the code has another shape."""
    frame = _own_line(site)
    if frame is None:
        return False
    try:
        plan = plan_rewrite(frame.file, [(edit, frame.line)])
    except RewriteError:
        return False
    auto = plan.class_name is not None
    action = (
        rm.FixAction(type="source_patch", file=plan.file, function=plan.function, class_name=plan.class_name, edits=plan.edits)
        if auto
        else None
    )
    ctx.add(rule, title, rationale, "source_edit", applies, auto_applicable=auto, diff=plan.diff(), references=refs, action=action)
    return True


def _config(
    ctx: _Ctx, rule: str, title: str, rationale: str, applies: list[str], option: tuple[str, Any], snippet: str, refs: list[str]
) -> None:
    """An auto-applicable `torch._dynamo.config` suggestion: `option` is (name, value) for the compiled run."""
    name, value = option
    ctx.add(
        rule,
        title,
        rationale,
        "config",
        applies,
        auto_applicable=True,
        snippet=snippet,
        references=refs,
        action=rm.FixAction(type="dynamo_config", config={name: value}),
    )


def _disable(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str], why: str) -> None:
    targets = [p for p in site.module_paths if p]
    if not targets:
        return
    bisect = ctx.report.bisect
    confirmed = bisect is not None and any(p in bisect.smallest_failing for p in targets)
    shown = ", ".join(targets[:3]) + (" ..." if len(targets) > 3 else "")
    rationale = (
        f"{why} Running `{shown}` eagerly keeps the break at the module boundary, so the code around it "
        "compiles into whole graphs; the module itself is not compiled."
        + (" Bisection confirms it is the smallest failing module." if confirmed else "")
    )
    first = targets[0]
    snippet = (
        f"mod = model.get_submodule({first!r})\nmod.forward = torch.compiler.disable(mod.forward)"
        if len(targets) == 1
        else f"for name in {targets!r}:\n    mod = model.get_submodule(name)\n    mod.forward = torch.compiler.disable(mod.forward)"
    )
    ctx.add(
        "disable-module",
        f"Run `{shown}` eagerly with torch.compiler.disable",
        rationale,
        "wrap",
        applies,
        auto_applicable=True,
        snippet=snippet,
        references=_refs(site, "disable"),
        action=rm.FixAction(type="disable", module_paths=targets),
    )


# --- graph-break rules -------------------------------------------------------------------------


def _is(site: rm.GraphBreakSite, ids: tuple[str, ...] = (), pattern: str | None = None) -> bool:
    if set(ids) & set(site.registry_ids):
        return True
    return bool(pattern and re.search(pattern, site.gb_type, re.I))


def _code(site: rm.GraphBreakSite) -> str:
    frame = _own_line(site) or site.user_frame
    return frame.code or ""


def _print_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    reorder_failed = site.gb_type.startswith("attempted to reorder a debugging function")
    if not (reorder_failed or (_is(site, ("GB0059",)) and re.search(r"\bprint\s*\(", _code(site)))):
        return False
    _source_edit(
        ctx,
        site,
        "print-guard",
        "Skip the print while compiling: `if not torch.compiler.is_compiling():`",
        f"The `print` in {_where(site)} cannot go into a graph, so Dynamo splits the graph around it. "
        "Under the guard, compiled code skips it (the branch is folded away at trace time) and eager runs still print.",
        "guard",
        _refs(site, "is_compiling"),
        applies,
    )
    if not reorder_failed:
        _config(
            ctx,
            "print-reorder",
            "Let Dynamo move prints after the graph: `torch._dynamo.config.reorderable_logging_functions`",
            "Dynamo can defer a print to after the compiled graph when its arguments are tensors, constants or "
            "format strings, keeping one graph and still printing.",
            applies,
            ("reorderable_logging_functions", ["print"]),
            "torch._dynamo.config.reorderable_logging_functions.add(print)",
            _refs(site, "troubleshooting"),
        )
    return True


def _logger_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0291",), r"^logging\.Logger method"):
        return False
    calls = re.findall(r"\.(\w+)\s*\(", site.user_frame.code or "")
    method = calls[0] if calls else "debug"
    options = ctx.facts.config_options if ctx.facts else frozenset()
    caveat = ""
    if options and "ignore_logging_functions" not in options and "ignore_logger_methods" in options:
        caveat = " (torch's own hint names `ignore_logging_functions`, which this torch does not have; the option is `ignore_logger_methods`)"
    _config(
        ctx,
        "logger-ignore",
        f"Make `Logger.{method}` a no-op under compile: `torch._dynamo.config.ignore_logger_methods`",
        f"The `{method}` call in {_where(site)} cannot be traced. Listing the method in "
        f"`ignore_logger_methods`{caveat} drops it from compiled code only; eager runs still log.",
        applies,
        ("ignore_logger_methods", [f"logging.Logger.{method}"]),
        f"import logging\ntorch._dynamo.config.ignore_logger_methods.add(logging.Logger.{method})",
        _refs(site, "troubleshooting"),
    )
    if site.own_code:
        _source_edit(
            ctx,
            site,
            "logger-guard",
            "Skip the log call while compiling: `if not torch.compiler.is_compiling():`",
            f"The log call in {_where(site)} splits the graph; under the guard compiled code skips it.",
            "guard",
            _refs(site, "is_compiling"),
            applies,
        )
    return True


def _item_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0124",), r"Tensor\.item\(\)|tolist"):
        return False
    _source_edit(
        ctx,
        site,
        "keep-tensor",
        "Keep the value a tensor (drop `.item()`) and choose with `torch.where`",
        f"`.item()` in {_where(site)} copies a tensor value into Python, which a graph cannot do. Kept as a "
        "0-d tensor, the value and the branches that read it stay in the graph.",
        "keep_tensor",
        _refs(site, "where"),
        applies,
    )
    _config(
        ctx,
        "capture-scalar-outputs",
        "Trace `.item()` into the graph: `torch._dynamo.config.capture_scalar_outputs = True`",
        "With this option `.item()` becomes a symbolic scalar inside the graph. Python control flow on the "
        "value still breaks the graph, further down.",
        applies,
        ("capture_scalar_outputs", True),
        "torch._dynamo.config.capture_scalar_outputs = True",
        _refs(site, "troubleshooting"),
    )
    return True


def _dynamic_op_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0036",), r"dynamic shape operator|dynamic output shape"):
        return False
    _config(
        ctx,
        "capture-dynamic-output-shape-ops",
        "Trace ops with data-dependent output shapes (nonzero, unique...): `capture_dynamic_output_shape_ops`",
        f"The op in {_where(site)} returns a shape that depends on tensor values. With this option Dynamo keeps "
        "it in the graph with an unbacked symbolic size.",
        applies,
        ("capture_dynamic_output_shape_ops", True),
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
        _refs(site, "dynamic"),
    )
    return True


def _branch_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0170",), r"^Data-dependent branching"):
        return False
    _source_edit(
        ctx,
        site,
        "branchless-where",
        "Replace the data-dependent `if` with `torch.where`",
        f"The `if` in {_where(site)} needs a tensor's value in Python, so the graph ends there. "
        "`torch.where` computes both sides and picks per element inside the graph; results are the same "
        "as long as both sides are safe to compute.",
        "where",
        _refs(site, "where"),
        applies,
    )
    frame = _own_line(site) or site.user_frame
    ctx.add(
        "torch-cond",
        "Or express the branch with `torch.cond` (both branches traced as subgraphs)",
        "When the branches differ in more than one value, `torch.cond(pred, true_fn, false_fn, operands)` keeps "
        "data-dependent control flow in one graph. Both functions must return tensors of the same shape.",
        "source_edit",
        applies,
        snippet=f"# at {frame.file.rsplit('/', 1)[-1]}:{frame.line}\n"
        "out = torch.cond(pred, lambda t: true_branch(t), lambda t: false_branch(t), (x,))",
        references=_refs(site, "cond"),
    )
    return True


_UNTRACEABLE = (
    (("GB0294",), r"numpy", "numpy-torch", "Use torch ops instead of numpy here",
     "numpy calls that torch cannot map run in Python. The torch equivalent (e.g. `torch.randn(shape, generator=g)`) traces.",
     "noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(x)"),
    (("GB4198",), r"deepcopy", "deepcopy-outside", "Create the copy outside forward",
     "`copy.deepcopy` of modules or tensors cannot be traced. Make the copy once (in `__init__`, or an EMA "
     "update outside the compiled step) and use it in forward.",
     "# in __init__:\nself.shadow = copy.deepcopy(self.fc).requires_grad_(False)\n# in forward:\nreturn self.fc(x) + self.shadow(x)"),
    (("GB0007",), r"marked as skipped", "move-untraceable-call", "Move the untraceable call out of the compiled region",
     "The function is on Dynamo's skip list (a C extension, or code torch chose not to trace): call it "
     "before or after the compiled model, or pass its result in.", None),
    (("GB0142",), r"context manager", "context-manager", "Take the context manager out of forward",
     "Dynamo supports a fixed set of context managers (no_grad, autocast...). Hold locks and other managers "
     "around the call of the compiled model instead.", None),
    ((), r"generator", "generator", "Avoid generators in forward",
     "Dynamo cannot trace this generator use; build a list or loop directly.", None),
)


def _untraceable_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    for ids, pattern, rule, title, why, snippet in _UNTRACEABLE:
        if _is(site, ids, pattern):
            ctx.add(rule, title, f"{why} (at {_where(site)})", "source_edit", applies, snippet=snippet, references=_refs(site, "troubleshooting"))
            _disable(ctx, site, applies, "Until the code changes, the break can be isolated.")
            return True
    return False


def _transformers_loss_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    frames = site.user_stack + [site.user_frame]
    if not any(f.function == "loss_function" and "transformers" in f.file for f in frames):
        return False
    targets = site.module_paths or [""]
    ctx.add(
        "transformers-loss-type",
        "Set the model's loss function explicitly: `model.loss_type = \"ForCausalLM\"`",
        "transformers picks the loss in Python on every call and logs a warning when `loss_type` is unset; "
        "the logger call breaks the graph. Setting `loss_type` (the default it falls back to) removes the "
        "lookup and the warning.",
        "config",
        applies,
        auto_applicable=True,
        snippet='model.loss_type = "ForCausalLM"  # or the loss your head needs: see transformers.loss.loss_utils.LOSS_MAPPING',
        references=_refs(site),
        action=rm.FixAction(type="set_attribute", module_paths=targets, attribute="loss_type", value="ForCausalLM"),
    )
    return True


def _library_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if site.own_code or site.library in (None, "stdlib", "torch"):
        return False
    version = getattr(ctx.report.environment, site.library or "", None)
    at = f"{site.library} {version}" if isinstance(version, str) else site.library
    ctx.add(
        "library-upgrade",
        f"The break is inside {at}: check a newer release",
        f"{site.user_frame.file.rsplit('/', 1)[-1]}:{site.user_frame.line} is library code, so the fix belongs "
        f"there; torch.compile support in {site.library} improves release by release. Until then, the "
        "suggestions for your own call site apply.",
        "upgrade",
        applies,
        snippet=f"pip install -U {site.library}",
        references=_refs(site),
    )
    return False  # advice only: other rules still run


def _fallback_rule(ctx: _Ctx, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    hints = [h for h in site.hints if h and not h.startswith("Please report")]
    rationale = (site.explanation or site.reason) + (" Torch's hints: " + " ".join(hints) if hints else "")
    ctx.add(
        "registry-hints",
        f"Rewrite the code at {_where(site)}: {site.gb_type}",
        rationale,
        "source_edit",
        applies,
        references=_refs(site, "troubleshooting"),
    )
    _disable(ctx, site, applies, "If the code cannot change, the break can be isolated.")
    return True


_BREAK_RULES: tuple[Callable[[_Ctx, rm.GraphBreakSite, list[str]], bool], ...] = (
    _transformers_loss_rule,
    _library_rule,
    _print_rule,
    _logger_rule,
    _item_rule,
    _dynamic_op_rule,
    _branch_rule,
    _untraceable_rule,
)


def _break_suggestions(ctx: _Ctx) -> None:
    sites = ctx.report.graph_breaks
    loop_ids = ("GB7000",)
    by_line: dict[tuple[str, int], list[str]] = {}
    for site in sites:
        by_line.setdefault((site.user_frame.file, site.user_frame.line), []).append(site.id)
    for site in sites:
        if _is(site, loop_ids, r"^graph break in loop") and len(by_line[(site.user_frame.file, site.user_frame.line)]) > 1:
            continue  # a consequence: the sibling site at the same line is the cause, and its fix covers this one
        applies = [site.id] + [
            other
            for other in by_line[(site.user_frame.file, site.user_frame.line)]
            if other != site.id and _is(next(s for s in sites if s.id == other), loop_ids, r"^graph break in loop")
        ]
        matched = False
        for rule in _BREAK_RULES:
            if rule(ctx, site, applies):
                matched = True
                break
        if not matched:
            _fallback_rule(ctx, site, applies)


# --- recompile rules ---------------------------------------------------------------------------


def _argument(source: str | None, facts: ModelFacts | None) -> str | None:
    """The forward argument a guard source names (`x`, `L['x']`, `kwargs['input_ids']`), if any."""
    if not source or facts is None:
        return None
    match = re.fullmatch(r"(?:L\[')?(\w+)(?:'\])?(?:\[['\"](\w+)['\"]\])?", source)
    if not match:
        return None
    name, key = match.group(1), match.group(2)
    if name == "kwargs" and key:
        name = key
    return name if name in facts.arg_names or name in facts.arg_kinds else None


def _is_root(recompile: rm.Recompile) -> bool:
    return "" in recompile.module_paths


def _recompile_suggestions(ctx: _Ctx) -> None:
    facts = ctx.facts
    dims: dict[str, set[int]] = {}
    # insertion-ordered sets keyed by id: a long job's logs can hold thousands of recompiles
    dims_applies: dict[str, dict[str, None]] = {}
    size_set: dict[str, None] = {}
    kinds: dict[str, dict[str, rm.Recompile]] = {}
    for rc in ctx.report.recompiles:
        for guard in rc.failed_guards:
            kinds.setdefault(guard.kind, {}).setdefault(rc.id, rc)
            arg = _argument(guard.source, facts)
            if guard.kind == "size":
                size_set.setdefault(rc.id, None)
                if arg and _is_root(rc) and guard.dim is not None and facts and facts.arg_kinds.get(arg) == "tensor":
                    dims.setdefault(arg, set()).add(guard.dim)
                    dims_applies.setdefault(arg, {}).setdefault(rc.id, None)
    size_ids = list(size_set)
    by_kind = {kind: list(rcs.values()) for kind, rcs in kinds.items()}

    for arg, ds in dims.items():
        ordered = sorted(ds)
        calls = "\n".join(f"torch._dynamo.mark_dynamic({arg}, {d})" for d in ordered)
        ctx.add(
            "mark-dynamic",
            f"Mark `{arg}` dim {', '.join(map(str, ordered))} dynamic before the first call",
            f"`{arg}` changes size at dim {', '.join(map(str, ordered))} between calls, so the first compile "
            "specializes on the first size and the next size recompiles. Marked dynamic, the first compile "
            "is already shape-generic.",
            "dynamic_shapes",
            list(dims_applies[arg]),
            auto_applicable=True,
            snippet=calls + "\nout = compiled_model(...)",
            references=[DOCS["mark_dynamic"]],
            action=rm.FixAction(type="mark_dynamic", argument=arg, dims=ordered),
        )
    if size_ids:
        ctx.add(
            "dynamic-or-buckets",
            "Or compile with `dynamic=True`, or pad inputs to a few bucket sizes",
            "`dynamic=True` makes every dimension symbolic from the start (slower kernels in some cases); padding "
            "sequence lengths to e.g. multiples of 64 bounds the number of distinct shapes, and so of compiles.",
            "dynamic_shapes",
            size_ids,
            snippet="compiled = torch.compile(model, dynamic=True)\n# or: pad to a bucket\n"
            "length = -(-x.shape[1] // 64) * 64\nx = torch.nn.functional.pad(x, (0, 0, 0, length - x.shape[1]))",
            references=[DOCS["dynamic"]],
        )
    ids = lambda kind: [rc.id for rc in by_kind.get(kind, [])]  # noqa: E731
    if by_kind.get("dtype"):
        ctx.add(
            "dtype-recompile",
            "Cast inputs to one dtype before the compiled model",
            "A compiled graph is specialized to its input dtypes; each new dtype compiles again. Cast at the "
            "boundary (or keep one compiled model per dtype on purpose).",
            "source_edit",
            ids("dtype"),
            snippet="out = compiled_model(x.to(torch.float32))",
            references=[DOCS["troubleshooting"]],
        )
    for rc in by_kind.get("value", []):
        for guard in rc.failed_guards:
            arg = _argument(guard.source, facts)
            if guard.kind != "value" or not arg or not _is_root(rc):
                continue
            kind = facts.arg_kinds.get(arg) if facts else None
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
    attr_ids = ids("attribute") + [i for i in ids("object_id") + ids("type") if i not in ids("attribute")]
    if attr_ids:
        sources = sorted({g.source for rc in ctx.report.recompiles for g in rc.failed_guards if g.kind in ("attribute", "object_id", "type") and g.source})
        shown = ", ".join(f"`{s}`" for s in sources[:3]) or "module state"
        ctx.add(
            "state-recompile",
            f"Stop changing {shown} between calls, or compile one model per setting",
            "Compiled code guards on module attributes and object identities it read. Flipping them between calls "
            "recompiles, and alternating settings can exhaust the recompile limit. Fix the setting before "
            "compiling, keep one compiled wrapper per setting, or read the flag from a tensor.",
            "source_edit",
            attr_ids,
            snippet="fast_gelu = torch.compile(model_with_gelu)\nfast_relu = torch.compile(model_with_relu)",
            references=[DOCS["troubleshooting"]],
        )
    if by_kind.get("requires_grad"):
        ctx.add(
            "requires-grad-recompile",
            "Keep `requires_grad` of inputs consistent (or run inference under `torch.no_grad()`)",
            "A frame compiled for an input without grad recompiles when an input that needs grad arrives (e.g. the "
            "first block gets the raw input, later blocks get activations). Under `torch.no_grad()` inference "
            "there is one kind of input.",
            "source_edit",
            ids("requires_grad"),
            snippet="with torch.no_grad():\n    out = compiled_model(x)",
            references=[DOCS["troubleshooting"]],
        )
    if by_kind.get("global_state"):
        ctx.add(
            "global-state-recompile",
            "Keep grad mode / autocast / deterministic settings fixed around the compiled model",
            "Compiled code guards on global torch state; switching it between calls recompiles.",
            "source_edit",
            ids("global_state"),
            references=[DOCS["troubleshooting"]],
        )
    limit_hits = [m for m in ctx.report.compile_metrics if re.search(r"recompile.?limit|cache_size_limit|cache size limit", m.fail_reason or "", re.I)]
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


# --- model-wide rules --------------------------------------------------------------------------


def _model_suggestions(ctx: _Ctx) -> None:
    facts = ctx.facts
    for group in facts.repeated if facts else []:
        n = len(group.paths)
        ctx.add(
            "regional-compile",
            f"Compile the {n} repeated `{group.class_name}` blocks one by one (regional compilation)",
            f"`{group.container}` holds {n} identical `{group.class_name}` blocks. Compiling each block reuses one "
            "compiled graph for all of them, so cold compile time is about one block's, not the whole model's.",
            "regional",
            [],
            auto_applicable=True,
            snippet=f"for block in model.get_submodule({group.container!r}):\n    block.compile()",
            references=[DOCS["regional"]],
            action=rm.FixAction(type="regional", module_paths=list(group.paths)),
        )
    if ctx.report.environment.device.startswith("cuda") and ctx.report.summary.verdict in ("clean", "recompiles"):
        ctx.add(
            "mode-reduce-overhead",
            'Try `mode="reduce-overhead"` (CUDA graphs) for small batches',
            "With one graph and launch-bound kernels, CUDA graphs remove per-kernel launch overhead. Measure it: "
            "`ctc-doctor bench TARGET --device cuda --mode reduce-overhead`.",
            "mode",
            [],
            snippet='compiled = torch.compile(model, mode="reduce-overhead")',
            references=[DOCS["cudagraphs"]],
        )


def compile_cache_suggestion(cold_s: float, warm_s: float | None) -> rm.Suggestion:
    """Advice added after the benchmark measured a slow cold compile."""
    warm = f", {warm_s:.1f} s with a warm cache" if warm_s is not None else ""
    return rm.Suggestion(
        id="",
        rule="compile-cache",
        title="Keep the compile cache between runs",
        rationale=f"Measured: cold compile {cold_s:.1f} s{warm}. Inductor's on-disk caches are on by default but "
        "live in /tmp; point TORCHINDUCTOR_CACHE_DIR at a persistent directory, or ship the artifacts with "
        "torch.compiler.save_cache_artifacts / load_cache_artifacts.",
        kind="config",
        snippet="export TORCHINDUCTOR_CACHE_DIR=$HOME/.cache/torchinductor\n"
        "# or, after a warm-up run:\nartifacts = torch.compiler.save_cache_artifacts()",
        references=[DOCS["cache"]],
    )


# --- entry point -------------------------------------------------------------------------------


def _key(s: rm.Suggestion) -> tuple[Any, ...]:
    action = s.action.model_dump_json() if s.action else None
    return (s.rule, action, s.snippet if action is None else None, s.diff)


def _order(s: rm.Suggestion, site_rank: dict[str, int]) -> tuple[int, int]:
    ranks = [site_rank[a] for a in s.applies_to if a in site_rank]
    return (min(ranks) if ranks else len(site_rank) + 1, 0)


def suggest(report: rm.Report, facts: ModelFacts | None = None) -> list[rm.Suggestion]:
    """Suggestions for a report, deduplicated and ranked like the sites and recompiles they address."""
    ctx = _Ctx(report, facts)
    _break_suggestions(ctx)
    _recompile_suggestions(ctx)
    _model_suggestions(ctx)
    merged: dict[tuple[Any, ...], rm.Suggestion] = {}
    for s in ctx.out:
        key = _key(s)
        if key in merged:
            merged[key].applies_to.extend(a for a in s.applies_to if a not in merged[key].applies_to)
        else:
            merged[key] = s
    site_rank = {s.id: i for i, s in enumerate(report.graph_breaks)}
    site_rank.update({r.id: len(report.graph_breaks) + i for i, r in enumerate(report.recompiles)})
    ordered = sorted(merged.values(), key=lambda s: _order(s, site_rank))  # stable: rule order within a site
    renumber(ordered)
    return ordered


def renumber(suggestions: list[rm.Suggestion]) -> None:
    for i, s in enumerate(suggestions, 1):
        s.id = f"S{i}"


def iter_auto(suggestions: list[rm.Suggestion]) -> Iterator[rm.Suggestion]:
    """Auto-applicable suggestions that `fix` verifies one by one (regional is measured by the benchmark)."""
    for s in suggestions:
        if s.auto_applicable and s.action is not None and s.action.type != "regional":
            yield s
