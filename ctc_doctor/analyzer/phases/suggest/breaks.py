"""Graph-break rules, keyed by registry id / gb_type / message pattern: the first that matches a site
states its suggestions (the fallback repeats torch's own hints and offers to isolate the break)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ....reports import models as rm
from ...fixes.call_site import find_call_site
from ...fixes.rewrite import RewriteError, plan_rewrite
from .base import RuleContext, config, own_line, refs, source_edit, suggest_disable, where
from .boundary import in_library
from .schedulers import scheduler_frame, scheduler_suggestion


def _is(site: rm.GraphBreakSite, ids: tuple[str, ...] = (), pattern: str | None = None) -> bool:
    if set(ids) & set(site.registry_ids):
        return True
    return bool(pattern and re.search(pattern, site.gb_type, re.I))


def _code(site: rm.GraphBreakSite) -> str:
    frame = own_line(site) or site.user_frame
    return frame.code or ""


def _print_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    reorder_failed = site.gb_type.startswith("attempted to reorder a debugging function")
    if not (reorder_failed or (_is(site, ("GB0059",)) and re.search(r"\bprint\s*\(", _code(site)))):
        return False
    source_edit(
        ctx,
        site,
        "print-guard",
        "Skip the print while compiling: `if not torch.compiler.is_compiling():`",
        f"The `print` in {where(site)} cannot go into a graph, so Dynamo splits the graph around it. "
        "Under the guard, compiled code skips it (the branch is folded away at trace time) and eager runs still print.",
        "guard",
        refs(site, "is_compiling"),
        applies,
    )
    if not reorder_failed:
        config(
            ctx,
            "print-reorder",
            "Let Dynamo move prints after the graph: `torch._dynamo.config.reorderable_logging_functions`",
            "Dynamo can defer a print to after the compiled graph when its arguments are tensors, constants or "
            "format strings, keeping one graph and still printing.",
            applies,
            ("reorderable_logging_functions", ["print"]),
            "torch._dynamo.config.reorderable_logging_functions.add(print)",
            refs(site, "troubleshooting"),
        )
    return True


def _logger_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0291",), r"^logging\.Logger method"):
        return False
    calls = re.findall(r"\.(\w+)\s*\(", site.user_frame.code or "")
    method = calls[0] if calls else "debug"
    options = ctx.facts.config_options if ctx.facts else frozenset()
    caveat = ""
    if options and "ignore_logging_functions" not in options and "ignore_logger_methods" in options:
        caveat = (
            " (torch's own hint names `ignore_logging_functions`, which this torch does not have; the option is `ignore_logger_methods`)"
        )
    config(
        ctx,
        "logger-ignore",
        f"Make `Logger.{method}` a no-op under compile: `torch._dynamo.config.ignore_logger_methods`",
        f"The `{method}` call in {where(site)} cannot be traced. Listing the method in "
        f"`ignore_logger_methods`{caveat} drops it from compiled code only; eager runs still log.",
        applies,
        ("ignore_logger_methods", [f"logging.Logger.{method}"]),
        f"import logging\ntorch._dynamo.config.ignore_logger_methods.add(logging.Logger.{method})",
        refs(site, "troubleshooting"),
    )
    if site.own_code:
        source_edit(
            ctx,
            site,
            "logger-guard",
            "Skip the log call while compiling: `if not torch.compiler.is_compiling():`",
            f"The log call in {where(site)} splits the graph; under the guard compiled code skips it.",
            "guard",
            refs(site, "is_compiling"),
            applies,
        )
    return True


def _item_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0124",), r"Tensor\.item\(\)|tolist"):
        return False
    source_edit(
        ctx,
        site,
        "keep-tensor",
        "Keep the value a tensor (drop `.item()`) and choose with `torch.where`",
        f"`.item()` in {where(site)} copies a tensor value into Python, which a graph cannot do. Kept as a "
        "0-d tensor, the value and the branches that read it stay in the graph.",
        "keep_tensor",
        refs(site, "where"),
        applies,
    )
    config(
        ctx,
        "capture-scalar-outputs",
        "Trace `.item()` into the graph: `torch._dynamo.config.capture_scalar_outputs = True`",
        "With this option `.item()` becomes a symbolic scalar inside the graph. Python control flow on the "
        "value still breaks the graph, further down.",
        applies,
        ("capture_scalar_outputs", True),
        "torch._dynamo.config.capture_scalar_outputs = True",
        refs(site, "troubleshooting"),
    )
    return True


def _dynamic_op_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0036",), r"dynamic shape operator|dynamic output shape"):
        return False
    config(
        ctx,
        "capture-dynamic-output-shape-ops",
        "Trace ops with data-dependent output shapes (nonzero, unique...): `capture_dynamic_output_shape_ops`",
        f"The op in {where(site)} returns a shape that depends on tensor values. With this option Dynamo keeps "
        "it in the graph with an unbacked symbolic size.",
        applies,
        ("capture_dynamic_output_shape_ops", True),
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
        refs(site, "dynamic"),
    )
    return True


def _branch_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not _is(site, ("GB0170",), r"^Data-dependent branching"):
        return False
    if in_library(site):  # not the user's `if` to rewrite
        return _fallback_rule(ctx, site, applies)
    source_edit(
        ctx,
        site,
        "branchless-where",
        "Replace the data-dependent `if` with `torch.where`",
        f"The `if` in {where(site)} needs a tensor's value in Python, so the graph ends there. "
        "`torch.where` computes both sides and picks per element inside the graph; results are the same "
        "as long as both sides are safe to compute.",
        "where",
        refs(site, "where"),
        applies,
    )
    frame = own_line(site) or site.user_frame
    ctx.add(
        "torch-cond",
        "Or express the branch with `torch.cond` (both branches traced as subgraphs)",
        "When the branches differ in more than one value, `torch.cond(pred, true_fn, false_fn, operands)` keeps "
        "data-dependent control flow in one graph. Both functions must return tensors of the same shape.",
        "source_edit",
        applies,
        snippet=f"# at {frame.file.rsplit('/', 1)[-1]}:{frame.line}\n"
        "out = torch.cond(pred, lambda t: true_branch(t), lambda t: false_branch(t), (x,))",
        references=refs(site, "cond"),
    )
    return True


_UNTRACEABLE = (
    (
        ("GB0294",),
        r"numpy",
        "numpy-torch",
        "Use torch ops instead of numpy here",
        "numpy calls that torch cannot map run in Python. The torch equivalent (e.g. `torch.randn(shape, generator=g)`) traces.",
        "noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(x)",
    ),
    (
        ("GB4198",),
        r"deepcopy",
        "deepcopy-outside",
        "Create the copy outside forward",
        "`copy.deepcopy` of modules or tensors cannot be traced. Make the copy once (in `__init__`, or an EMA "
        "update outside the compiled step) and use it in forward.",
        "# in __init__:\nself.shadow = copy.deepcopy(self.fc).requires_grad_(False)\n# in forward:\nreturn self.fc(x) + self.shadow(x)",
    ),
    (
        ("GB0007", "GB9193"),  # torch 2.15 names `time.perf_counter()` in compiled code "Call to a time function"
        r"marked as skipped|time function",
        "move-untraceable-call",
        "Move the untraceable call out of the compiled region",
        "The function is on Dynamo's skip list (a C extension, or code torch chose not to trace): call it "
        "before or after the compiled model, or pass its result in.",
        None,
    ),
    (
        ("GB0142",),
        r"context manager",
        "context-manager",
        "Take the context manager out of forward",
        "Dynamo supports a fixed set of context managers (no_grad, autocast...). Hold locks and other managers "
        "around the call of the compiled model instead.",
        None,
    ),
    (
        (),
        r"generator",
        "generator",
        "Avoid generators in forward",
        "Dynamo cannot trace this generator use; build a list or loop directly.",
        None,
    ),
)


def _untraceable_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    for ids, pattern, rule, title, why, snippet in _UNTRACEABLE:
        if _is(site, ids, pattern):
            if in_library(site):  # the library's own call is not the user's to move
                return _fallback_rule(ctx, site, applies)
            ctx.add(
                rule, title, f"{why} (at {where(site)})", "source_edit", applies, snippet=snippet, references=refs(site, "troubleshooting")
            )
            suggest_disable(ctx, site, applies, "Until the code changes, the break can be isolated.")
            return True
    return False


def _transformers_loss_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    frames = site.user_stack + [site.user_frame]
    if not any(f.function == "loss_function" and "transformers" in f.file for f in frames):
        return False
    targets = site.module_paths or [""]
    ctx.add(
        "transformers-loss-type",
        'Set the model\'s loss function explicitly: `model.loss_type = "ForCausalLM"`',
        "transformers picks the loss in Python on every call and logs a warning when `loss_type` is unset; "
        "the logger call breaks the graph. Setting `loss_type` (the default it falls back to) removes the "
        "lookup and the warning.",
        "config",
        applies,
        auto_applicable=True,
        snippet='model.loss_type = "ForCausalLM"  # or the loss your head needs: see transformers.loss.loss_utils.LOSS_MAPPING',
        references=refs(site),
        action=rm.FixAction(type="set_attribute", module_paths=targets, attribute="loss_type", value="ForCausalLM"),
    )
    return True


def _scheduler_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    """A break in a diffusers scheduler's code: the scheduler belongs outside the compiled code."""
    frame = scheduler_frame([*site.user_stack, site.user_frame])
    if frame is None:
        return False
    scheduler_suggestion(ctx, applies, frame)
    return True


def _rnn_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    """nn.LSTM, GRU and RNN: Dynamo runs the layer eagerly and splits the graph around it (GB0014). The split
    already is the smallest region left eager: no `disable` of the module that calls it; torch's own
    `allow_rnn` traces it, verified on a copy where this torch has it."""
    if not _is(site, ("GB0014",), r"^Attempted to wrap RNN"):
        return False
    options = ctx.facts.config_options if ctx.facts else frozenset()
    if "allow_rnn" in options:
        config(
            ctx,
            "rnn-allow",
            "Let Dynamo trace the RNN layer (experimental): `torch._dynamo.config.allow_rnn = True`",
            f"Dynamo does not trace nn.LSTM, GRU or RNN by default: it runs the layer called at {where(site)} eagerly "
            "and splits the graph around it. `allow_rnn` traces it; torch marks it experimental, so its check on a "
            "copy says whether it holds here. Without it, the split is already the smallest region left eager: "
            "the code around the layer compiles.",
            applies,
            ("allow_rnn", True),
            "torch._dynamo.config.allow_rnn = True",
            refs(site, "troubleshooting"),
        )
    else:
        ctx.add(
            "rnn-eager",
            "The RNN layer runs eagerly: the code around it compiles",
            f"Dynamo does not trace nn.LSTM, GRU or RNN: it runs the layer called at {where(site)} eagerly and splits "
            "the graph around it, the smallest region left eager already. Nothing to disable; a newer torch can trace "
            "it (`torch._dynamo.config.allow_rnn`).",
            "config",
            applies,
            references=refs(site, "troubleshooting"),
        )
    return True


def _rationale(site: rm.GraphBreakSite) -> str:
    """torch's explanation of a break, with its own hints (but the "Please report" one)."""
    hints = [h for h in site.hints if h and not h.startswith("Please report")]
    return (site.explanation or site.reason) + (" Torch's hints: " + " ".join(hints) if hints else "")


def _fallback_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    """The break's own hints. In a library's line, which the user cannot rewrite: keep it out of the compiled
    region (the boundary suggestions, when the bisection found where), or leave the smallest module that holds
    it eager."""
    rationale = _rationale(site)
    if in_library(site):
        at = f"{site.user_frame.file.rsplit('/', 1)[-1]}:{site.user_frame.line}"
        title = f"Keep {site.library}'s code at {at} out of the compiled region ({site.gb_type})"
        rationale += (
            f" The line is {site.library}'s, not yours to rewrite: compile around it (the boundary suggestions), "
            "or leave the smallest module that holds it eager."
        )
    else:
        title = f"Rewrite the code at {where(site)}: {site.gb_type}"
    ctx.add("registry-hints", title, rationale, "source_edit", applies, references=refs(site, "troubleshooting"))
    isolated = "The break can be isolated." if in_library(site) else "If the code cannot change, the break can be isolated."
    suggest_disable(ctx, site, applies, isolated)
    return True


def _call_site_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    """A break in a library function that computes a value from the data only because the user's call left a
    parameter at its default (`fixes.call_site`): pass it from the call. Checked on a copy that passes the
    value the library computed in each call. The break's own rules still run (alternatives, ranked by what
    each measures)."""
    if not in_library(site):
        return False
    found = find_call_site(site)
    if found is None:
        return False
    own = f"{found.frame.file.rsplit('/', 1)[-1]}:{found.frame.line}"
    at = f"{found.computed.file.rsplit('/', 1)[-1]}:{found.computed.line}"
    payload = f"{found.callee}:{found.argument}"
    try:
        plan = plan_rewrite(found.frame.file, [("keyword", found.frame.line, f"{payload}={found.argument}")])
    except RewriteError:
        plan = None
    line = plan.replacements[0][2][0].strip() if plan is not None else None
    action = (
        rm.FixAction(
            type="call_argument",
            file=plan.file,
            function=plan.function,
            class_name=plan.class_name,
            edits=[f"keyword@{found.frame.line}:{payload}"],
            argument=found.argument,
            computed_at=found.computed,
            local=found.local,
        )  # fmt: skip
        if plan is not None and plan.class_name is not None
        else None
    )
    ctx.add(
        "call-site-argument",
        f"Pass `{found.argument}=` to `{found.callee}` at {own}: left out, {found.library} computes it from the data",
        f"Your call `{found.callee}(...)` at {own} leaves `{found.argument}` at its default (None), so {found.library} "
        f"computes it from tensor values ({at}: `{found.local} = {found.expression}`), which ends the graph there "
        f"({site.gb_type}). Passed from your call, a value known before the model runs, nothing is read from the "
        f"data. A Python int that changes between calls recompiles once, then automatic dynamic shapes cover it. "
        "Checked on a copy that passes the value the library computed in each call.",
        "source_edit",
        applies,
        category="fix",
        auto_applicable=action is not None,
        snippet=f"# {found.library} computes `{found.argument}` from the data when it is left out ({at}):\n"
        f"#     {found.local} = {found.expression}\n# pass what you know before the call instead:\n{line or found.frame.code or ''}",
        references=refs(site, "troubleshooting"),
        action=action,
    )
    return False  # the break's own rules still run


def _first_call_rule(ctx: RuleContext, site: rm.GraphBreakSite, applies: list[str]) -> bool:
    if not site.first_call_only:
        return False
    ctx.add(
        "warm-up-before-compile",
        "Call the model once eagerly before compiling it",
        f"The break at {where(site)} happens only on a fresh model's first call: that call runs set-up code "
        "(lazy initialisation, hooks installed under a lock, a warning logged once) which Dynamo cannot trace, "
        "and the code it compiles then keeps the break unless a guard makes it recompile. One eager call "
        "before `torch.compile` does the set-up outside the compiled code.",
        "source_edit",
        applies,
        auto_applicable=True,
        snippet="with torch.no_grad():\n    model(*example_args, **example_kwargs)  # first-call set-up runs eagerly\n"
        "compiled = torch.compile(model)",
        references=refs(site, "troubleshooting"),
        action=rm.FixAction(type="warm_up"),
    )
    return False  # the rules of the break itself still apply


_BREAK_RULES: tuple[Callable[[RuleContext, rm.GraphBreakSite, list[str]], bool], ...] = (
    _first_call_rule,
    _call_site_rule,
    _transformers_loss_rule,
    _scheduler_rule,
    _print_rule,
    _logger_rule,
    _item_rule,
    _dynamic_op_rule,
    _branch_rule,
    _rnn_rule,
    _untraceable_rule,
)


def break_suggestions(ctx: RuleContext) -> None:
    """The first matching rule per site (a `graph break in loop` consequence joins the site that causes it)."""
    sites = ctx.report.graph_breaks
    loop_ids = ("GB7000",)
    by_line: dict[tuple[str, int], list[str]] = {}
    for site in sites:
        by_line.setdefault((site.user_frame.file, site.user_frame.line), []).append(site.id)
    for site in sites:
        if site.expected:
            continue  # a framework wrapper's by-design break: said in the report, not the user's to fix
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
