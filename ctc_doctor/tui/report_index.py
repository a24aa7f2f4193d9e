"""ReportIndex: the lookups the screens need, computed once per report (no Textual, no torch).

A report is data from somewhere else: every string in it is shown as plain text (never parsed as
markup, never evaluated). Source files are read only to display them, and only when they exist.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..reports.compile_id import compile_id_key
from ..reports.labels import module_label, short_path, suggestion_status
from ..reports.models import Frame, GraphBreakSite, Recompile, Report, Suggestion


def location(frame: Frame, width: int = 40) -> str:
    return f"{short_path(frame.file, width)}:{frame.line}"


@lru_cache(maxsize=256)
def _read_lines(path: str, mtime: float) -> tuple[str, ...] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return tuple(fh.read().splitlines())
    except OSError:
        return None


@dataclass(frozen=True)
class SourceContext:
    """Lines around a frame's line, read from the file on this machine."""

    path: str
    start: int
    """1-based number of the first line in `text`."""
    text: str
    mismatch: bool
    """The line differs from the code the report recorded: the file changed since the report."""


@dataclass
class ReportIndex:
    """A report with the cross-references the screens use."""

    report: Report
    source_path: str | None = None
    """The report file, when it was loaded from one."""
    source_roots: tuple[str, ...] = ()
    """Where to look for relative (redacted) source paths; the report's folder and cwd are added."""
    suggestions_for: dict[str, list[Suggestion]] = field(default_factory=dict)
    sites_by_module: dict[str, list[GraphBreakSite]] = field(default_factory=dict)
    recompiles_by_module: dict[str, list[Recompile]] = field(default_factory=dict)
    haystack: dict[str, str] = field(default_factory=dict)
    """Site id -> lowercase text a search matches against."""

    def __post_init__(self) -> None:
        r = self.report
        by_target: dict[str, list[Suggestion]] = defaultdict(list)
        for s in r.suggestions:
            for target in s.applies_to:
                by_target[target].append(s)
        for cause in r.recompile_causes:
            by_target[cause.id] = [s for s in r.suggestions if s.id in cause.suggestion_ids]
        self.suggestions_for = dict(by_target)
        sites: dict[str, list[GraphBreakSite]] = defaultdict(list)
        for site in r.graph_breaks:
            for path in site.module_paths:
                sites[path].append(site)
            frame = site.place()
            self.haystack[site.id] = " ".join(
                [
                    site.id,
                    site.gb_type,
                    site.reason,
                    frame.file,
                    f":{frame.line}",
                    frame.function,
                    *site.registry_ids,
                    *site.module_paths,
                    site.module_class or "",
                ]
            ).lower()
        self.sites_by_module = dict(sites)
        recompiles: dict[str, list[Recompile]] = defaultdict(list)
        for rc in r.recompiles:
            for path in rc.module_paths:
                recompiles[path].append(rc)
        self.recompiles_by_module = dict(recompiles)
        roots = list(self.source_roots)
        if self.source_path:
            roots.append(str(Path(self.source_path).resolve().parent))
        roots.append(os.getcwd())
        self.source_roots = tuple(dict.fromkeys(roots))

    # --- lookups ---------------------------------------------------------------------------------

    def suggestions(self, item_id: str) -> list[Suggestion]:
        return self.suggestions_for.get(item_id, [])

    def status(self, s: Suggestion) -> str:
        return suggestion_status(s, self.report.fix)

    def module_text(self, paths: list[str], width: int | None = 40) -> str:
        return module_label(paths, width)

    def compile_ids(self) -> list[str]:
        """Every compile id the report mentions, in natural order (`0/0, 0/1, 1/0, 10/0`)."""
        r = self.report
        ids = {m.compile_id for m in r.compile_metrics} | {g.compile_id for g in r.guards} | {g.compile_id for g in r.graphs}
        ids |= {h.compile_id for h in r.perf_hints if h.compile_id}
        return sorted(ids, key=compile_id_key)

    def resolve(self, file: str) -> str | None:
        """The file on this machine, or None: absolute paths as they are, relative ones under the roots."""
        if not file or file.startswith("<"):
            return None
        candidates = [file] if os.path.isabs(file) else [os.path.join(root, file) for root in self.source_roots]
        if file.startswith("~"):
            candidates = [os.path.expanduser(file)]
        return next((c for c in candidates if os.path.isfile(c)), None)

    def source(self, frame: Frame, context: int = 6) -> SourceContext | str:
        """The lines around `frame`, or a one-line reason why they cannot be shown."""
        path = self.resolve(frame.file)
        if path is None:
            if frame.file.startswith("<"):
                return f"no source file: {frame.file} is generated code"
            return f"source not available: {frame.file} does not exist on this machine"
        try:
            lines = _read_lines(path, os.path.getmtime(path))
        except OSError:
            lines = None
        if lines is None:
            return f"source not available: cannot read {path}"
        if not 1 <= frame.line <= len(lines):
            return f"source not available: {path} has {len(lines)} line(s), the report points at line {frame.line}"
        start = max(1, frame.line - context)
        end = min(len(lines), frame.line + context)
        recorded = (frame.code or "").strip()
        mismatch = bool(recorded) and lines[frame.line - 1].strip() != recorded
        return SourceContext(path=path, start=start, text="\n".join(lines[start - 1 : end]), mismatch=mismatch)

    def site_filters(self) -> list[tuple[str, str]]:
        """(label, filter value) choices for the break table: modules, categories and GB ids, by count."""
        by_module: dict[str, int] = defaultdict(int)
        by_type: dict[str, int] = defaultdict(int)
        by_gb: dict[str, int] = defaultdict(int)
        for site in self.report.graph_breaks:
            for path in site.module_paths or [""]:
                by_module[path] += 1
            by_type[site.gb_type] += 1
            for gb in site.registry_ids:
                by_gb[gb] += 1
        choices = [("all break sites", "")]
        choices += [(f"category: {k} ({n})", f"type:{k}") for k, n in sorted(by_type.items(), key=lambda kv: -kv[1])]
        choices += [(f"GB id: {k} ({n})", f"gb:{k}") for k, n in sorted(by_gb.items(), key=lambda kv: -kv[1])]
        choices += [(f"module: {k or '(root)'} ({n})", f"module:{k}") for k, n in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0]))]
        return choices


def site_matches(site: GraphBreakSite, value: str) -> bool:
    """Whether a site passes a filter value from `ReportIndex.site_filters` (`""` passes all)."""
    if not value:
        return True
    kind, _, arg = value.partition(":")
    if kind == "type":
        return site.gb_type == arg
    if kind == "gb":
        return arg in site.registry_ids
    if kind == "module":
        # a module filter also keeps the sites of its submodules; sites without a module count as the root
        return any(p == arg or (arg and p.startswith(arg + ".")) for p in site.module_paths or [""])
    return True
