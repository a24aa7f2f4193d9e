"""Attribute source locations to nn.Module paths (`named_modules()` names).

Two kinds of evidence, both gathered from the user's real model:
- call sites: forward pre-hooks during one eager pass record, for each module call, the file:line of
  the frame that called it (`x = self.b2(x)` -> `b2`). Walking a break's full stack through these
  call sites narrows the candidates from the root down.
- code ownership: the line ranges of every method of every module class. The innermost frame inside
  a module method names the class; every exercised instance of it runs that code. A decorator's
  wrapper that several classes share (transformers' `deprecate_kwarg` on every forward) names none.
Where the stack cannot tell instances apart (a loop over blocks), every instance that runs the code is
listed, which is the honest answer.
"""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from collections.abc import Sequence
from types import FrameType
from typing import Any

import torch

from ..running.modules import forward_pre_hooks, path_key

_MODULE_PY = torch.nn.modules.module.__file__
_SKIP_CLASSES = {torch.nn.Module, object}


def _codes_of(value: Any) -> list[Any]:
    """Code objects behind a class attribute: functions, static/class methods, properties, wrappers."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [c for f in (value.fget, value.fset) if f is not None for c in _codes_of(f)]
    codes = []
    seen = 0
    while value is not None and seen < 8:
        code = getattr(value, "__code__", None)
        if code is not None:
            codes.append(code)
        value = getattr(value, "__wrapped__", None)
        seen += 1
    return codes


def _line_range(code: Any) -> tuple[int, int]:
    lines = [ln for _, _, ln in code.co_lines() if ln is not None] if hasattr(code, "co_lines") else []
    first = code.co_firstlineno
    return first, max(lines + [first])


def _is_proper_descendant(child: str, parent: str) -> bool:
    if child == parent:
        return False
    return parent == "" or child.startswith(parent + ".")


class ModuleIndex:
    """Module paths of a model, their classes, which ran, and where each was called from."""

    def __init__(self, model: Any) -> None:
        self.modules: dict[str, Any] = {}
        if isinstance(model, torch.nn.Module):
            self.modules = dict(model.named_modules(remove_duplicate=False))
        self.exercised: dict[str, int] = {}
        self.call_sites: dict[tuple[str, int], set[str]] = defaultdict(set)
        self._ranges: dict[str, list[tuple[int, int, type]]] | None = None

    # --- recording -------------------------------------------------------------------------
    def record(self) -> contextlib.AbstractContextManager[None]:
        """Forward pre-hooks for the block that record exercised modules and their call sites."""
        return forward_pre_hooks(self.modules, self._hook_for)

    def _hook_for(self, path: str) -> Any:
        def hook(module: Any, args: Any) -> None:
            self.exercised[path] = self.exercised.get(path, 0) + 1
            frame: FrameType | None = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename == _MODULE_PY:
                frame = frame.f_back  # skip _call_impl / _wrapped_call_impl
            if frame is not None:
                self.call_sites[(frame.f_code.co_filename, frame.f_lineno)].add(path)

        return hook

    # --- lookups ---------------------------------------------------------------------------
    def class_name(self, paths: Sequence[str]) -> str | None:
        names = sorted({type(self.modules[p]).__name__ for p in paths if p in self.modules})
        return ", ".join(names) if names else None

    def _code_ranges(self) -> dict[str, list[tuple[int, int, type]]]:
        if self._ranges is None:
            owned: dict[Any, set[type]] = defaultdict(set)
            wrappers: set[Any] = set()
            seen: set[type] = set()
            for module in self.modules.values():
                for klass in type(module).__mro__:
                    if klass in _SKIP_CLASSES or klass in seen:
                        continue
                    seen.add(klass)
                    for value in vars(klass).values():
                        codes = _codes_of(value)
                        wrappers.update(codes[:-1])  # all but the wrapped function itself
                        for code in codes:
                            owned[code].add(klass)
            ranges: dict[str, list[tuple[int, int, type]]] = defaultdict(list)
            for code, classes in owned.items():
                if code in wrappers and len(classes) > 1:
                    continue  # a decorator's wrapper shared by several classes: its frame names no class
                first, last = _line_range(code)
                ranges[code.co_filename].extend((first, last, klass) for klass in classes)
            self._ranges = ranges
        return self._ranges

    def owners_of_line(self, file: str, line: int) -> list[str]:
        """Exercised module paths whose class defines the code at file:line (smallest enclosing method)."""
        best: list[tuple[int, type]] = []
        for first, last, klass in self._code_ranges().get(file, ()):
            if first <= line <= last:
                best.append((last - first, klass))
        if not best:
            return []
        width = min(w for w, _ in best)
        classes = {k for w, k in best if w == width}
        return [p for p, m in self.modules.items() if isinstance(m, tuple(classes)) and self._ran(p)]

    def _ran(self, path: str) -> bool:
        return not self.exercised or path in self.exercised

    def attribute(self, stack: Sequence[tuple[str, int]]) -> list[str]:
        """Module paths that run the innermost frame of `stack` (outermost frame first)."""
        if not self.modules:
            return []
        current: set[str] = {""} if "" in self.modules else set()
        for file, line in stack:
            callees = {p for p in self.call_sites.get((file, line), ()) if self._ran(p)}
            if not callees:
                continue
            narrowed = {c for c in callees if any(_is_proper_descendant(c, p) for p in current)}
            current = narrowed or callees  # a resume chain leaves sibling call sites on the stack
        for file, line in reversed(stack):
            owners = self.owners_of_line(file, line)
            if owners:
                refined = {o for o in owners if any(o == c or _is_proper_descendant(o, c) for c in current)}
                current = refined or set(owners)
                break
        return sorted(current, key=path_key)
