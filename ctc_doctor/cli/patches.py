"""From verified fixes to a change in the user's repository: `--diff` (one patch on stdout that `git apply`
and `patch -p1` take) and `--write` (the edits made in place, as `ruff --fix` does). Torch-free.

The applied source edits are planned again from their actions (the edits of one function together, as
the fix phase verified them), one diff per file from the original to the result, with paths relative to
the repository root that holds the file (its git top level), or to the current directory outside a
repository. `--write` checks each file's content hash against the one taken when the analysis made the
diff (`Suggestion.file_sha256`) before writing anything.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..reports.models import Report, Suggestion

_LIBRARY_DIRS = ("site-packages", "dist-packages")


class PatchError(Exception):
    """A verified edit cannot become a patch or be written (file changed, not the user's, hunk not found)."""


@dataclass
class FileEdit:
    """The combined edit of one file."""

    path: str
    """Absolute path."""
    shown: str
    """The path in the patch: relative to `root`."""
    root: str
    """Where `git apply` / `patch -p1` is run: the repository root, or the current directory."""
    before: list[str]
    after: list[str]
    suggestions: list[str]

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.before, self.after, f"a/{self.shown}", f"b/{self.shown}", n=3))


def is_library(path: str) -> bool:
    """An installed package's file (site-packages), or ctc-doctor's own (its examples): never written."""
    parts = os.path.abspath(path).split(os.sep)
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return any(p in _LIBRARY_DIRS for p in parts) or os.path.abspath(path).startswith(own + os.sep)


def source_edits(report: Report) -> tuple[list[FileEdit], list[Suggestion]]:
    """The applied fixes' source edits, combined per file, and the applied fixes that are no source edit
    (mark_dynamic, a config, options: a snippet). The edits of one function are planned together, as the
    fix phase verified them together (`fixes.rewrite.plan_rewrite`); those of several functions of a file
    replace disjoint lines of the original."""
    from ..analyzer.fixes.rewrite import RewriteError, apply_replacements, parse_edits, patch_path, plan_rewrite

    by_id = {s.id: s for s in report.suggestions}
    groups: dict[str, dict[tuple[str | None, str | None], list[tuple[str, int, str]]]] = {}
    owners: dict[str, list[str]] = {}
    other: list[Suggestion] = []
    for sid in report.fix.applied if report.fix else []:
        s = by_id.get(sid)
        a = s.action if s is not None else None
        if s is None:
            continue
        if a is None or a.type != "source_patch" or not a.file:
            other.append(s)
            continue
        groups.setdefault(a.file, {}).setdefault((a.class_name, a.function), []).extend(parse_edits(a.edits))
        owners.setdefault(a.file, []).append(sid)
    edits = []
    for file, functions in groups.items():
        if not os.path.isfile(file):
            raise PatchError(f"{file} no longer exists")
        with open(file, encoding="utf-8") as fh:
            before = fh.read().splitlines(keepends=True)
        try:
            replacements = [r for planned in functions.values() for r in plan_rewrite(file, planned).replacements]
        except RewriteError as exc:
            raise PatchError(f"{', '.join(owners[file])}: {exc}") from None
        root, shown = patch_path(file)
        edits.append(FileEdit(file, shown, root, before, apply_replacements(before, replacements), owners[file]))
    return edits, other


def check_unchanged(report: Report, edit: FileEdit) -> None:
    """Refuse a file changed since the analysis (its content hash), or one that is not the user's."""
    if is_library(edit.path):
        raise PatchError(f"{edit.path} belongs to an installed package: not written (apply the patch from --diff where you vendor it)")
    by_id = {s.id: s for s in report.suggestions}
    expected = {by_id[i].file_sha256 for i in edit.suggestions if by_id[i].file_sha256}
    if not expected:
        raise PatchError(f"{edit.shown}: the report has no content hash for it (made before schema 1.11): not written")
    from ..analyzer.fixes.rewrite import file_sha256

    if file_sha256(edit.path) not in expected:
        raise PatchError(f"{edit.shown} changed since the analysis: not written (run the analysis again)")


def write_edits(report: Report, edits: list[FileEdit]) -> list[str]:
    """Write every file's edit, after checking all of them first (none is written if one is refused)."""
    for edit in edits:
        check_unchanged(report, edit)
    written = []
    for edit in edits:
        with open(edit.path, "w", encoding="utf-8") as fh:
            fh.write("".join(edit.after))
        written.append(f"{edit.shown} ({', '.join(edit.suggestions)})")
    return written


def snippet_text(s: Suggestion) -> str:
    """A fix that is no source edit: what to add, and where."""
    code = s.snippet or (s.action.type if s.action else "")
    return f"{s.id}: {s.title}\n{code}".rstrip()


def emit(report: Report, *, diff: bool, write: bool, say: Callable[[str], None]) -> int:
    """`--diff` (the patch on stdout) and `--write` (the edits in place); the exit code (0, or
    PATCH_REFUSED with one line said)."""
    from ..errors import ExitCode

    try:
        edits, other = source_edits(report)
        if diff:
            for edit in edits:
                sys.stdout.write(edit.diff())
            sys.stdout.flush()
            roots = sorted({e.root for e in edits})
            if edits:
                say(f"--diff: {len(edits)} file(s); apply from {', '.join(roots)} with `git apply` or `patch -p1`")
        if write:
            for line in write_edits(report, edits):
                say(f"wrote {line}")
    except PatchError as exc:
        say(f"error: {exc}")
        return int(ExitCode.PATCH_REFUSED)
    if not edits:
        say("no verified source edit to " + ("write" if write else "print") + (": the applied fixes are not source edits" if other else ""))
    for s in other:
        say("not a source edit, add it by hand where you compile the model:\n" + snippet_text(s))
    return int(ExitCode.OK)
