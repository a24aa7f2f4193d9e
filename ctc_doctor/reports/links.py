"""Links a report points at: the graph-break site pages of torch's registry ids, and torch docs.

One place for the URLs, so the terminal, Markdown, the TUI and the suggestion rules cannot disagree.
No torch import.
"""

from __future__ import annotations

_GB_PAGE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"

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
"""Torch documentation pages the suggestions cite, by topic."""


def gb_page(registry_id: str) -> str:
    """The graph-break site page of a registry id (`GB0170` -> `.../gb/gb0170.html`: the pages are lower case)."""
    return _GB_PAGE.format(registry_id.lower())


def gb_pages(registry_ids: list[str]) -> list[str]:
    return [gb_page(gb) for gb in registry_ids]
