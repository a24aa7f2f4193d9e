"""Mechanical source rewrites of one method, for graph breaks whose fix is local.

Three rewrites, each keyed by the line of the break:
- `guard`: `print(...)` / `logger.x(...)` -> `if not torch.compiler.is_compiling(): ...` (the call still
  runs in eager; under compile the branch is constant-folded away, so there is no break);
- `where`: a data-dependent `if` that only picks a value -> `torch.where(cond, a, b)` (both sides
  are computed; no Python branch, no break). Shapes handled: `if c: v = a` (optionally `else: v = b`),
  `if c: return a` followed by `return b`, `if c: return a else: return b`;
- `keep_tensor`: `v = t.item()` -> `v = t`, then every later `if` on `v` gets the `where` rewrite;
- `keyword`: a call at the line gets one more keyword argument (`keyword@19:global_mean_pool:size=4`): a
  parameter the user left out, which the library then computes from the data (`call_site`).

The same plan gives a unified diff for the report (user's formatting kept: expressions are copied as
written) and, for `fix`, a new function compiled from the rewritten AST with the original file name and
line numbers, so breaks that remain still point at the user's lines. No torch import: the function is
built by the caller with the globals and the `torch` module it passes in. Nothing here runs user code.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

EDIT_KINDS = ("guard", "where", "keep_tensor", "keyword")


class RewriteError(Exception):
    """The source cannot be rewritten this way (shape not handled, file changed, not found)."""


@dataclass
class Plan:
    """A rewrite of one function: its new AST and the text replacements for the diff."""

    file: str
    function: str
    class_name: str | None
    def_line: int
    edits: list[str]
    node: ast.FunctionDef | ast.AsyncFunctionDef
    replacements: list[tuple[int, int, list[str]]] = field(default_factory=list)
    """(first line, last line, new lines) in the file, 1-based inclusive."""

    def diff(self, label: str | None = None) -> str:
        lines = _file_lines(self.file)
        new = apply_replacements(lines, self.replacements)
        name = label or patch_path(self.file)[1]
        return "".join(difflib.unified_diff(lines, new, f"a/{name}", f"b/{name}", n=2))


@functools.lru_cache(maxsize=64)
def _parsed(file: str, mtime: float) -> tuple[ast.Module, tuple[str, ...]]:
    with open(file, encoding="utf-8") as fh:
        text = fh.read()
    return ast.parse(text, filename=file), tuple(text.splitlines(keepends=True))


def _load(file: str) -> tuple[ast.Module, tuple[str, ...]]:
    try:
        return _parsed(file, os.path.getmtime(file))
    except (OSError, SyntaxError, ValueError) as exc:
        raise RewriteError(f"cannot read {file}: {exc}") from exc


def _file_lines(file: str) -> list[str]:
    return list(_load(file)[1])


def repo_root(path: str) -> str | None:
    """The git top level holding `path` (the nearest parent with `.git`), or None."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(os.path.join(folder, ".git")):
        if os.path.dirname(folder) == folder:
            return None
        folder = os.path.dirname(folder)
    return folder


def patch_path(file: str) -> tuple[str, str]:
    """(where a patch of `file` applies, the file as the patch names it): its git repository's root, else
    the current directory, else its own folder (never `a//home/...`)."""
    root = repo_root(file) or os.getcwd()
    try:
        shown = os.path.relpath(file, root)
    except ValueError:  # another drive
        shown = ".."
    if shown.startswith(".."):
        root, shown = os.path.dirname(os.path.abspath(file)), os.path.basename(file)
    return root, shown.replace(os.sep, "/")


def apply_replacements(lines: list[str], replacements: list[tuple[int, int, list[str]]]) -> list[str]:
    """The file's lines with each (first line, last line, new lines) replaced, 1-based inclusive, last first."""
    new = list(lines)
    for first, last, text in sorted(replacements, key=lambda r: -r[0]):
        new[first - 1 : last] = [t + "\n" for t in text]
    return new


def file_sha256(path: str) -> str:
    """The file's content hash (`Suggestion.file_sha256`: `--write` refuses a file changed since)."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _enclosing(tree: ast.Module, line: int) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]:
    """Innermost function containing `line`, and the class it is a method of (None if not a method)."""
    best: tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None] | None = None

    def walk(node: ast.AST, owner: str | None) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    best = (child, owner)
                walk(child, None)
            elif isinstance(child, ast.ClassDef):
                walk(child, child.name)
            else:
                walk(child, None if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else owner)

    walk(tree, None)
    if best is None:
        raise RewriteError(f"line {line} is not inside a function")
    return best


def _statement_at(body: list[ast.stmt], line: int) -> tuple[list[ast.stmt], int] | None:
    """The statement list and index of the statement starting at `line`, searched through nested blocks."""
    for i, stmt in enumerate(body):
        if stmt.lineno == line:
            return body, i
        for attr in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, attr, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                stmts = [s for s in inner if isinstance(s, ast.stmt)]
                for handler in inner:
                    if isinstance(handler, ast.ExceptHandler):
                        found = _statement_at(handler.body, line)
                        if found:
                            return found
                found = _statement_at(stmts, line) if stmts else None
                if found:
                    return found
    return None


def _containing_statement(body: list[ast.stmt], line: int) -> tuple[list[ast.stmt], int] | None:
    """Like `_statement_at`, but also accepts a line inside a multi-line simple statement."""
    exact = _statement_at(body, line)
    if exact:
        return exact
    for i, stmt in enumerate(body):
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if not any(isinstance(getattr(stmt, a, None), list) for a in ("body", "orelse")):
                return body, i
            for attr in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, attr, None)
                if isinstance(inner, list):
                    found = _containing_statement(inner, line)
                    if found:
                        return found
    return None


def _torch_attr(*names: str) -> ast.expr:
    node: ast.expr = ast.Name("torch", ast.Load())
    for name in names:
        node = ast.Attribute(node, name, ast.Load())
    return node


def _where(test: ast.expr, a: ast.expr, b: ast.expr) -> ast.Call:
    return ast.Call(_torch_attr("where"), [test, a, b], [])


class _Rewriter:
    def __init__(self, file: str, line: int) -> None:
        self.file = file
        tree, lines = _load(file)
        self.lines = lines
        original, self.class_name = _enclosing(tree, line)
        self.original = original
        self.node = copy.deepcopy(original)
        self.replacements: list[tuple[int, int, list[str]]] = []
        self.edits: list[str] = []

    def seg(self, node: ast.AST) -> str:
        text = ast.get_source_segment("".join(self.lines), node)
        return text if text is not None and "\n" not in text else ast.unparse(node)

    def indent(self, stmt: ast.stmt) -> str:
        raw = self.lines[stmt.lineno - 1]
        return raw[: len(raw) - len(raw.lstrip())]

    def find(self, line: int) -> tuple[list[ast.stmt], int]:
        found = _containing_statement(self.node.body, line)
        if found is None:
            raise RewriteError(f"no statement at {os.path.basename(self.file)}:{line}")
        return found

    def apply(self, kind: str, line: int, payload: str = "") -> None:
        if kind == "guard":
            self.guard(line)
        elif kind == "where":
            self.where(line)
        elif kind == "keep_tensor":
            self.keep_tensor(line)
        elif kind == "keyword":
            self.keyword(line, payload)
        else:
            raise RewriteError(f"unknown rewrite {kind!r}")
        self.edits.append(f"{kind}@{line}" + (f":{payload}" if payload else ""))

    def keyword(self, line: int, payload: str) -> None:
        """`callee:name=expression`: the one call of `callee` in the statement at `line` gets `name=expression`."""
        callee, _, assignment = payload.partition(":")
        name, _, source = assignment.partition("=")
        try:
            value = ast.parse(source, mode="eval").body
        except SyntaxError as exc:
            raise RewriteError(f"bad keyword value {source!r}") from exc
        if not (callee and name.isidentifier()):
            raise RewriteError(f"bad keyword edit {payload!r}")
        body, i = self.find(line)
        stmt = body[i]
        calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and _called_name(n) == callee]
        if len(calls) != 1:
            raise RewriteError(f"no single call of {callee} at line {line}")
        call = calls[0]
        if any(k.arg == name or k.arg is None for k in call.keywords):
            raise RewriteError(f"{callee} already gets {name} (or **kwargs) at line {line}")
        call.keywords.append(ast.keyword(arg=name, value=value))
        end = call.end_lineno or call.lineno
        raw = self.lines[end - 1].rstrip("\n")
        upto = raw.encode("utf-8")[: call.end_col_offset].decode("utf-8", errors="replace")  # ast columns count bytes
        if not upto.endswith(")"):
            raise RewriteError(f"the call of {callee} at line {line} does not end with `)`")
        head = upto[:-1].rstrip()
        sep = "" if head.endswith(("(", ",")) else ", "
        sep = " " if head.endswith(",") else sep
        self.replacements.append((end, end, [f"{head}{sep}{name}={source})" + raw[len(upto) :]]))

    def guard(self, line: int) -> None:
        body, i = self.find(line)
        stmt = body[i]
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            raise RewriteError("the break is not a plain call statement")
        test = ast.UnaryOp(ast.Not(), ast.Call(_torch_attr("compiler", "is_compiling"), [], []))
        body[i] = ast.copy_location(ast.If(test=test, body=[stmt], orelse=[]), stmt)
        pad = self.indent(stmt)
        old = [ln.rstrip("\n") for ln in self.lines[stmt.lineno - 1 : stmt.end_lineno]]
        new = [f"{pad}if not torch.compiler.is_compiling():"] + ["    " + ln if ln.strip() else ln for ln in old]
        self.replacements.append((stmt.lineno, stmt.end_lineno or stmt.lineno, new))

    def where(self, line: int) -> None:
        body, i = self.find(line)
        stmt = body[i]
        if not isinstance(stmt, ast.If):
            raise RewriteError("the break is not at an `if` statement")
        self._where_at(body, i)

    def _where_at(self, body: list[ast.stmt], i: int) -> None:
        stmt = body[i]
        assert isinstance(stmt, ast.If)
        pad = self.indent(stmt)
        test = self.seg(stmt.test)
        then = stmt.body
        other = stmt.orelse
        last = stmt.end_lineno or stmt.lineno
        drop_next = False
        if len(then) == 1 and isinstance(then[0], ast.Assign) and _single_name(then[0]):
            name = _single_name(then[0])
            assert name is not None  # checked just above
            if not other:
                new_value = _where(stmt.test, then[0].value, ast.Name(name, ast.Load()))
                text = f"{pad}{name} = torch.where({test}, {self.seg(then[0].value)}, {name})"
            elif len(other) == 1 and isinstance(other[0], ast.Assign) and _single_name(other[0]) == name:
                new_value = _where(stmt.test, then[0].value, other[0].value)
                text = f"{pad}{name} = torch.where({test}, {self.seg(then[0].value)}, {self.seg(other[0].value)})"
            else:
                raise RewriteError("the `else` branch does more than assign the same name")
            new: ast.stmt = ast.Assign([ast.Name(name, ast.Store())], new_value)
        elif len(then) == 1 and isinstance(then[0], ast.Return) and then[0].value is not None:
            if other:
                if not (len(other) == 1 and isinstance(other[0], ast.Return) and other[0].value is not None):
                    raise RewriteError("the `else` branch does more than return a value")
                alt = other[0].value
            else:
                following = body[i + 1] if i + 1 < len(body) else None
                if not (isinstance(following, ast.Return) and following.value is not None):
                    raise RewriteError("the `if` returns early but is not followed by a `return`")
                alt = following.value
                last = following.end_lineno or following.lineno
                drop_next = True
            new = ast.Return(_where(stmt.test, then[0].value, alt))
            text = f"{pad}return torch.where({test}, {self.seg(then[0].value)}, {self.seg(alt)})"
        else:
            raise RewriteError("the `if` does more than choose one value")
        body[i] = ast.copy_location(new, stmt)
        if drop_next:
            del body[i + 1]
        self.replacements.append((stmt.lineno, last, [text]))

    def keep_tensor(self, line: int) -> None:
        body, i = self.find(line)
        stmt = body[i]
        name = _single_name(stmt) if isinstance(stmt, ast.Assign) else None
        value = stmt.value if isinstance(stmt, ast.Assign) else None
        if not (
            name
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "item"
            and not value.args
            and not value.keywords
        ):
            raise RewriteError("the break is not `name = tensor.item()`")
        assert isinstance(stmt, ast.Assign)
        stmt.value = value.func.value
        pad = self.indent(stmt)
        self.replacements.append((stmt.lineno, stmt.end_lineno or stmt.lineno, [f"{pad}{name} = {self.seg(value.func.value)}"]))
        j = i + 1
        while j < len(body):
            later = body[j]
            if isinstance(later, ast.If) and name in {n.id for n in ast.walk(later.test) if isinstance(n, ast.Name)}:
                before = len(body)
                self._where_at(body, j)
                j += 1 - (before - len(body))
                continue
            j += 1

    def plan(self) -> Plan:
        return Plan(
            file=self.file,
            function=self.original.name,
            class_name=self.class_name,
            def_line=self.original.lineno,
            edits=list(self.edits),
            node=self.node,
            replacements=list(self.replacements),
        )


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _single_name(stmt: ast.Assign) -> str | None:
    if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


def plan_rewrite(file: str, edits: list[tuple[str, int]] | list[tuple[str, int, str]]) -> Plan:
    """Plan rewrites (kind, line[, payload]) inside one function of `file`. Raises RewriteError when not possible."""
    if not edits:
        raise RewriteError("no edits")
    rewriter = _Rewriter(file, edits[0][1])
    for kind, line, *payload in edits:
        rewriter.apply(kind, line, *payload)
    return rewriter.plan()


def parse_edits(edits: list[str]) -> list[tuple[str, int, str]]:
    """`["guard@46", "keyword@19:pool:size=4"]` -> `[("guard", 46, ""), ("keyword", 19, "pool:size=4")]` (the
    form kept in the report's FixAction)."""
    out = []
    for edit in edits:
        kind, _, rest = edit.partition("@")
        line, _, payload = rest.partition(":")
        if kind not in EDIT_KINDS or not line.isdigit():
            raise RewriteError(f"bad edit {edit!r}")
        out.append((kind, int(line), payload))
    return out


def edit_line(edit: str) -> int:
    """The line of an edit in its kept form (`keyword@19:pool:size=4` -> 19)."""
    return int(edit.partition("@")[2].partition(":")[0])


def build_function(plan: Plan, globals_: dict[str, Any], owner: type | None, torch_module: Any) -> Any:
    """Compile the rewritten function against the original module's globals (not modified).

    `__class__` (for zero-argument `super()`) and `torch` come in as closure cells of a factory, so
    the rewrite works whatever the user's module calls torch. Line numbers are the original ones.
    """
    factory = ast.parse("def __ctc_factory__(__class__, torch):\n    pass\n").body[0]
    assert isinstance(factory, ast.FunctionDef)
    fn = copy.deepcopy(plan.node)
    factory.body = [fn, ast.Return(ast.Name(fn.name, ast.Load()))]
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, plan.file, "exec")
    namespace: dict[str, Any] = {}
    exec(code, globals_, namespace)  # defines the factory only; the user's module globals are untouched
    return namespace["__ctc_factory__"](owner, torch_module)
