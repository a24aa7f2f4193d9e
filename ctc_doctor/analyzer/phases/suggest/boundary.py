"""Boundary advice: where to draw the compiled region when the breaks are in code the user cannot edit.

A library routine compiled whole with the network it calls (a sliding-window inference routine and its
predictor, an ODE solver and its dynamics), an augmentation stage compiled with the classifier after it:
the breaks are the library's, and no edit of the user's removes them. What the user controls is what they
compile. The bisection already knows which submodules compile to one graph on their own (`fullgraph=True`
passed) while the module around them fails: compiling the largest of them in place, and calling the model
as before, keeps the library code eager, where its breaks cost nothing. The suggestion is checked on a copy
(`compile_only`: counts and results), and the benchmark measures its latency and compile time against
compiling the whole model. Drawn from the bisection and the capture alone: no rule per library.
"""

from __future__ import annotations

from ....reports import models as rm
from .base import RuleContext, refs

MOST = 0.5
"""The clean submodules together hold at least this share of the model (its parameters; its modules when it
has none): compiling them is compiling the model's work, not a corner of it."""
UNEDITABLE = frozenset({None, "stdlib", "torch", "python"})
"""`GraphBreakSite.library` values of code that is not a third-party library's (the user's, Python's, torch's)."""


def in_library(site: rm.GraphBreakSite) -> bool:
    """Whether the break is in a third-party library's code, which the user cannot edit."""
    return not site.own_code and site.library not in UNEDITABLE


def _passed(t: rm.BisectTrial) -> bool:
    return t.status == "passed" or (t.status == "inferred" and t.passed is True)


def _failed(t: rm.BisectTrial) -> bool:
    return t.status in ("failed", "crashed") or (t.status == "inferred" and t.passed is False)


def clean_frontier(bisect: rm.Bisect) -> list[str]:
    """The largest submodules that compile with fullgraph=True while every module above them fails: the
    passed trials whose exercised ancestors all failed, in the bisection's order."""
    trials = {t.module_path: t for t in bisect.trials}
    out = []
    for t in bisect.trials:
        if t.module_path == "" or not _passed(t):
            continue
        parent, clean = t.parent, True
        while parent is not None:
            above = trials.get(parent)
            if above is None or not _failed(above):
                clean = False
                break
            parent = above.parent
        if clean:
            out.append(t.module_path)
    return out


def _inside(path: str, modules: list[str]) -> bool:
    return any(path == m or path.startswith(m + ".") for m in modules)


def compile_code(paths: list[str]) -> str:
    """Each module's forward compiled in place (`model.net.forward = torch.compile(model.net.forward)`;
    `model.get_submodule("a.0")` for a path that is no plain attribute walk), then the call as before. Not
    `module.compile()`, which compiles nothing on a `torch.nn` container such as a `Sequential` (torch 2.13)."""
    lines = []
    for p in paths:
        module = f"model.{p}" if all(part.isidentifier() for part in p.split(".")) else f"model.get_submodule({p!r})"
        lines.append(f"{module}.forward = torch.compile({module}.forward)")
    return (
        "\n".join(lines)
        + "\nout = model(*args)  # called as before: the rest of the model runs eagerly\n# instead of: model = torch.compile(model)"
    )


def boundary_suggestions(ctx: RuleContext) -> None:
    """`compile-submodules`: compile the clean submodules the bisection found, not the whole model, when the
    whole fails because of breaks in a library's code outside them."""
    report, facts = ctx.report, ctx.facts
    b = report.bisect
    if b is None or facts is None:
        return
    root = next((t for t in b.trials if t.module_path == ""), None)
    if root is None or not _failed(root):
        return
    # the clean submodules that hold the model's work: those with parameters, when the model has any
    weighted = root.parameters > 0
    frontier = [p for p in clean_frontier(b) if not weighted or next(t.parameters for t in b.trials if t.module_path == p) > 0]
    share = sum(facts.shares.get(p, 0.0) for p in frontier)
    if not frontier or share < MOST:
        return
    # a break or recompile stays out of the compiled region unless every module its code runs in is inside it
    outside = [s for s in report.graph_breaks if not s.expected and not all(_inside(p, frontier) for p in s.module_paths or [""])]
    recompiles = [r.id for r in report.recompiles if not r.expected and not all(_inside(p, frontier) for p in r.module_paths or [""])]
    library = [s for s in outside if in_library(s)]
    if not library:
        return  # the breaks are the user's own: their rules edit them
    trials = {t.module_path: t for t in b.trials}
    shown = ", ".join(f"`{p}` ({trials[p].module_class})" for p in frontier[:3]) + (
        f" (+{len(frontier) - 3} more)" if len(frontier) > 3 else ""
    )
    libraries = ", ".join(sorted({s.library or "" for s in library}))
    where = ", ".join(sorted({f"{s.user_frame.file.rsplit('/', 1)[-1]}:{s.user_frame.line}" for s in library})[:3])
    names = ", ".join(f"`{p}`" for p in frontier[:3]) + (" ..." if len(frontier) > 3 else "")
    ctx.add(
        "compile-submodules",
        f"Compile {names} alone, not the whole `{root.module_class}`: {libraries}'s code around it then runs eagerly",
        f"{len(library)} break site(s) ({', '.join(s.id for s in library[:4])}) are in {libraries}'s code ({where}), which "
        f"you cannot edit; the bisection found that {shown} compile{'s' if len(frontier) == 1 else ''} to one graph on "
        f"{'its' if len(frontier) == 1 else 'their'} own (fullgraph=True), holding {share:.0%} of the model's parameters. "
        "Its forward compiled in place, with the model called as before, the code around it stays eager, where "
        "its breaks cost nothing. Checked on a copy (graphs, breaks, recompiles, results); the benchmark measures its "
        "latency and compile time against compiling the whole model.",
        "regional",
        [s.id for s in outside] + recompiles,
        category="advice",
        snippet=compile_code(frontier),
        references=refs(library[0], "troubleshooting"),
        action=rm.FixAction(type="compile_only", module_paths=frontier),
    )
