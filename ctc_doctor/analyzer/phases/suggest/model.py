"""Model-wide rules: regional compilation of repeated blocks, CUDA graphs, and the compile cache
(advised only once the benchmark measured a slow cold compile)."""

from __future__ import annotations

from ....reports import models as rm
from ....reports.links import DOCS
from ....vocabulary import CUDA_GRAPH_MODES
from ...fixes.facts import RepeatedGroup
from .base import RuleContext

COMPILE_CACHE_ADVICE_S = 10.0
"""Cold compile time (s) above which the report suggests persisting the compile cache."""


def model_suggestions(ctx: RuleContext) -> None:
    """Advice about the model as a whole: regional compilation of repeated blocks, CUDA graphs."""
    facts = ctx.facts
    for group in facts.repeated if facts and not _compiled_per_block(ctx.report) else []:
        n = len(group.paths)
        where = f"`{group.container}` holds" if group.container else "The model holds"
        why = f" (the blocks it declares in `{group.declared}`)" if group.declared else ""
        ctx.add(
            "regional-compile",
            f"Compile the {n} repeated `{group.class_name}` blocks one by one (regional compilation)",
            f"{where} {n} `{group.class_name}` blocks{why}. Compiling each block reuses one compiled graph for all of "
            "them, so cold compile time is about one block's, not the whole model's.",
            "regional",
            [],
            auto_applicable=True,
            snippet=_regional_snippet(group, facts.compile_repeated_blocks if facts else False),
            references=[DOCS["regional"]],
            action=rm.FixAction(type="regional", module_paths=list(group.paths)),
        )
    # CUDA graphs already (reduce-overhead, max-autotune): never suggest the mode in use
    modes = {o.options.get("mode", "").strip("'\"") for o in ctx.report.compiled}
    in_use = modes & set(CUDA_GRAPH_MODES)
    if ctx.report.environment.device.startswith("cuda") and ctx.report.summary.verdict in ("clean", "recompiles") and not in_use:
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


def _compiled_per_block(report: rm.Report) -> bool:
    """The script already compiles block by block (`compile_repeated_blocks()`, a loop of torch.compile):
    the analyzed object is one of several of its class, so regional advice inside it would split a block."""
    analyzed = report.analyzed_compile
    if analyzed is None:
        return False
    # one compile call for many blocks (a loop, `compile_repeated_blocks`): not two models of one class, not a double compile
    return sum(o.name == analyzed.name and o.site == analyzed.site and o.relation is None for o in report.compiled) > 1


def _regional_snippet(group: RepeatedGroup, has_compile_repeated_blocks: bool) -> str:
    """The library's own call when it has one, else a loop over the blocks."""
    if group.declared == "_repeated_blocks" and has_compile_repeated_blocks:
        return "model.compile_repeated_blocks(fullgraph=True)  # compiles the blocks listed in model._repeated_blocks"
    if group.container:  # their common parent (`model_facts`): a loop over it
        return f"for block in model.get_submodule({group.container!r}):\n    block.compile()"
    return f"for module in model.modules():\n    if type(module).__name__ == {group.class_name!r}:\n        module.compile()"


def compile_cache_suggestion(benchmark: rm.Benchmark | None) -> rm.Suggestion | None:
    """Advice once the benchmark measured a slow cold compile (None when it did not)."""
    compiled = next((a for a in benchmark.arms if a.name == "compiled"), None) if benchmark is not None else None
    if compiled is None or compiled.compile_time_s is None or compiled.compile_time_s < COMPILE_CACHE_ADVICE_S:
        return None
    cold_s, warm_s = compiled.compile_time_s, compiled.warm_compile_time_s
    warm = f", {warm_s:.1f} s with a warm cache" if warm_s is not None else ""
    if compiled.warm_start_compile_s is not None:
        warm += f", {compiled.warm_start_compile_s:.1f} s in a fresh cache loaded from save_cache_artifacts"
    return rm.Suggestion(
        id="",
        rule="compile-cache",
        category="advice",
        title="Keep the compile cache between runs",
        rationale=f"Measured: cold compile {cold_s:.1f} s{warm}. Inductor's on-disk caches are on by default but "
        "live in /tmp; point TORCHINDUCTOR_CACHE_DIR at a persistent directory, or ship the artifacts with "
        "torch.compiler.save_cache_artifacts / load_cache_artifacts.",
        kind="config",
        snippet="export TORCHINDUCTOR_CACHE_DIR=$HOME/.cache/torchinductor\n"
        "# or, after a warm-up run:\nartifacts = torch.compiler.save_cache_artifacts()",
        references=[DOCS["cache"]],
    )
