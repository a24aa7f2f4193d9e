"""Where a source file lives: the user's own code, a library (which one), torch, or the stdlib;
and the user's own frame in an exception's traceback.

Pure path logic (no torch import), shared by live analysis and offline log ingestion.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re
import sysconfig
import traceback
from functools import lru_cache

# `.../lib/python3.10/copy.py`, `.../lib/python3.10/logging/__init__.py`: not site-packages
RawFrame = tuple[str, int, str, str | None]
"""(file, line, function, source line) as torch reports a frame; stacks list the outermost first."""

_FOREIGN_STDLIB = re.compile(r"/lib/python3\.\d+/(?!(?:site|dist)-packages/)")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_\d+$")


@lru_cache(maxsize=1)
def _roots() -> tuple[str | None, str | None, str, tuple[str, ...]]:
    spec = importlib.util.find_spec("torch")
    torch_dir = os.path.dirname(spec.origin) if spec and spec.origin else None
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # ctc_doctor/
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    fixtures = (os.path.join(here, "fixtures"),)
    return torch_dir, here, stdlib, fixtures


@lru_cache(maxsize=8192)  # every frame of every break asks; realpath is a syscall per component
def classify_file(path: str) -> tuple[bool, str | None]:
    """(own_code, library) for a source path. Fixture models count as the user's own code, the zoo's stand-in
    libraries (`fixtures/libs/<name>/`) as the library `<name>`'s."""
    if not path or path.startswith("<"):
        return False, "python"
    torch_dir, pkg_dir, stdlib, fixtures = _roots()
    real = os.path.realpath(path)
    for f in fixtures:
        stand_ins = os.path.join(os.path.realpath(f), "libs") + os.sep
        if real.startswith(stand_ins):  # the zoo's stand-in libraries (`fixtures/libs/<name>/`): a library's code
            return False, real[len(stand_ins) :].split(os.sep)[0].removesuffix(".py")
    if any(real.startswith(os.path.realpath(f) + os.sep) for f in fixtures):
        return True, None
    if torch_dir and real.startswith(os.path.realpath(torch_dir) + os.sep):
        return False, "torch"
    if pkg_dir and real.startswith(os.path.realpath(pkg_dir) + os.sep):
        return False, "ctc_doctor"
    parts = real.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            idx = len(parts) - 1 - parts[::-1].index(marker)
            name = parts[idx + 1] if idx + 1 < len(parts) else marker
            return False, name[:-3] if name.endswith(".py") else name
    if real.startswith(stdlib + os.sep) or _FOREIGN_STDLIB.search(path):
        return False, "stdlib"  # this interpreter's, or another machine's (paths in logs read offline)
    return True, None


@lru_cache(maxsize=256)
def module_file(name: str) -> str | None:
    """Where a top-level module or package lives (its `__init__.py`), found without importing it; None when
    it cannot be found."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None


def is_dynamo_file(path: str) -> bool:
    """A file of torch._dynamo itself (its polyfills stand in for builtins it traces)."""
    torch_dir = _roots()[0]
    if not torch_dir:
        return False
    return os.path.realpath(path).startswith(os.path.join(os.path.realpath(torch_dir), "_dynamo") + os.sep)


def is_tool_frame(path: str) -> bool:
    """Frames that belong to torch or ctc-doctor itself, hidden from user stacks."""
    own, library = classify_file(path)
    return not own and library in ("torch", "ctc_doctor")


def function_name(name: str) -> str:
    """Map Dynamo resume functions (`torch_dynamo_resume_in_forward_at_15`) back to `forward`."""
    m = _RESUME.match(name)
    return m.group("name") if m else name


def repro_slug(module_path: str, target: str = "") -> str:
    """The part of a repro script's name (`ctc_repro_{slug}.py`): the target (its module or file stem
    and builder, so two models' repros in one directory do not overwrite each other), then the module."""
    where, _, attr = target.rpartition(":")
    stem = os.path.splitext(os.path.basename(where.replace(".", "/") if not where.endswith(".py") else where))[0]
    model = "_".join(p for p in (stem, attr) if p)
    module = re.sub(r"[^A-Za-z0-9_]+", "_", module_path) or "root"
    return re.sub(r"[^A-Za-z0-9_]+", "_", f"{model}_{module}") if model else module


def source_line(path: str, line: int) -> str | None:
    text = linecache.getline(path, line).strip()
    return text or None


def innermost_own_frame(exc: BaseException, prefer: str | None = None) -> str | None:
    """`file:line` of the innermost traceback frame in the user's own code (in `prefer` if given and present)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if classify_file(f.filename)[0]]
    if prefer:
        wanted = os.path.abspath(prefer)
        frames = [f for f in frames if os.path.abspath(f.filename) == wanted] or frames
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
