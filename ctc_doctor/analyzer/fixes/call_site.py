"""A call-site argument that avoids a data-dependent op in a library: found from the signatures and the
source along the break's stack, not from a list of libraries.

A library function often computes a value from the data only because its caller left a parameter at its
default: `if dim_size is None: dim_size = int(index.max()) + 1` (torch_geometric's `scatter`, reached from
`global_mean_pool(x, batch, size=None)`). The `.item()` breaks the graph; passing the value from the user's
own call avoids it. `find_call_site` reads the innermost frame's function: the break's statement computes a
parameter `NAME` under `if NAME is None` (or `NAME = ... if NAME is None else NAME`) and `NAME` defaults to
None; it then walks out through each library frame's call of the next one, following `NAME` while each
caller passes its own None-defaulted parameter through, up to the user's line, whose call leaves it out.
Nothing here imports torch or runs user code.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass

from ...reports import models as rm
from ..readers.sources import classify_file

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class CallSite:
    """The user's call that leaves out a parameter the library then computes from the data."""

    frame: rm.Frame
    """The user's own line that makes the call."""
    callee: str
    """The function the user's line calls (`global_mean_pool`)."""
    argument: str
    """Its parameter left at its default (`size`)."""
    computed: rm.Frame
    """The library's line that computes the value from the data (the break)."""
    local: str
    """The name the value has there (`dim_size`)."""
    expression: str
    """How the library computes it (`int(index.max()) + 1 if index.numel() > 0 else 0`)."""
    library: str
    """The library (`torch_geometric`)."""


@functools.lru_cache(maxsize=128)
def _tree(file: str, mtime: float) -> tuple[ast.Module, str] | None:
    try:
        with open(file, encoding="utf-8") as fh:
            text = fh.read()
        return ast.parse(text, filename=file), text
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _parsed(file: str) -> tuple[ast.Module, str] | None:
    try:
        return _tree(file, os.path.getmtime(file))
    except OSError:
        return None


def _function_at(file: str, line: int, name: str) -> Function | None:
    """The innermost function named `name` whose body holds `line`."""
    parsed = _parsed(file)
    if parsed is None:
        return None
    best: Function | None = None
    for node in ast.walk(parsed[0]):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            if node.lineno <= line <= (node.end_lineno or node.lineno) and (best is None or node.lineno > best.lineno):
                best = node
    return best


def _none_defaults(fn: Function) -> set[str]:
    """Parameters of `fn` whose default is None."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    out = {a.arg for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True) if _is_none(d)}
    out |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None and _is_none(d)}
    return out


def _is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _tests_none(test: ast.AST, name: str) -> bool:
    """`name is None`."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and _is_none(test.comparators[0])
    )


def _computed(fn: Function, line: int, candidates: set[str]) -> tuple[str, str] | None:
    """(NAME, the expression) when the statement at `line` computes a None-defaulted parameter `NAME` because it
    is None: inside `if NAME is None:` assigning NAME, or `NAME = <expr> if NAME is None else NAME`."""

    def walk(body: list[ast.stmt], guarded: set[str]) -> tuple[str, str] | None:
        for stmt in body:
            if not (stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)):
                continue
            if isinstance(stmt, ast.If):
                inner = {n for n in candidates if _tests_none(stmt.test, n)}
                found = walk(stmt.body, guarded | inner) or walk(stmt.orelse, guarded)
                if found:
                    return found
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)} & candidates
                value = stmt.value
                for name in names:
                    if name in guarded and value is not None:
                        return name, ast.unparse(value)
                    if isinstance(value, ast.IfExp) and _tests_none(value.test, name):
                        return name, ast.unparse(value.body)
            for attr in ("body", "orelse", "finalbody"):
                inner_body = getattr(stmt, attr, None)
                if isinstance(inner_body, list) and not isinstance(stmt, ast.If):
                    found = walk(inner_body, guarded)
                    if found:
                        return found
        return None

    return walk(fn.body, set())


def _calls_at(fn: Function, line: int, callee: str) -> list[ast.Call]:
    """The calls of `callee` (a name or an attribute) in the statement of `fn` that holds `line`."""
    out = []
    for stmt in ast.walk(fn):
        if not isinstance(stmt, ast.stmt) or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if not (stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)) or any(
            isinstance(getattr(stmt, a, None), list) for a in ("body", "orelse")
        ):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
                if name == callee:
                    out.append(node)
    return out


def _passed(call: ast.Call, callee: Function, name: str) -> ast.expr | None | bool:
    """What `call` passes for `callee`'s parameter `name`: the expression, None when left out, False when it
    cannot be told (`*args`, `**kwargs`)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
        if kw.arg is None:
            return False
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    params = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    if name in params and params.index(name) < len(call.args):
        return call.args[params.index(name)]
    return None


def find_call_site(site: rm.GraphBreakSite) -> CallSite | None:
    """The user's call that leaves out the parameter the break computes from the data, or None."""
    chain = list(site.user_stack)
    inner = site.user_frame
    if not chain or (chain[-1].file, chain[-1].line) != (inner.file, inner.line):
        chain.append(inner)
    own = [i for i, f in enumerate(chain) if classify_file(f.file)[0]]
    if not own or own[-1] >= len(chain) - 1:
        return None
    start = own[-1]
    library = classify_file(inner.file)[1]
    if classify_file(inner.file)[0] or library in (None, "stdlib", "torch", "python"):
        return None
    fn = _function_at(inner.file, inner.line, inner.function)
    if fn is None:
        return None
    found = _computed(fn, inner.line, _none_defaults(fn))
    if found is None:
        return None
    local, expression = found
    name = local
    for k in range(len(chain) - 2, start - 1, -1):
        caller, called = chain[k], chain[k + 1]
        callee_fn = _function_at(called.file, called.line, called.function)
        caller_fn = _function_at(caller.file, caller.line, caller.function)
        if callee_fn is None or caller_fn is None:
            return None
        calls = _calls_at(caller_fn, caller.line, called.function)
        if len(calls) != 1:
            return None
        passed = _passed(calls[0], callee_fn, name)
        if passed is False:
            return None
        if passed is None:  # left at its default here
            if k != start:
                return None  # the library's own call leaves it out: not the user's to pass
            return CallSite(caller, called.function, name, inner, local, expression, library or "")
        if not (isinstance(passed, ast.Name) and passed.id in _none_defaults(caller_fn)):
            return None  # the caller computes what it passes: nothing for the user to add
        name = passed.id
    return None
