"""A sweep's manifest: one target per line, `#` comments, and a deterministic split into shards.

    mypkg.models:build                     a `build` TARGET, analyzed like `ctc-doctor TARGET`
    path/to/file.py:build --train          ... with options of its own (they win over the sweep's)
    run -- train.py --epochs 1             a script, like `ctc-doctor run -- train.py --epochs 1`
    run --nproc 2 -- train.py              ... on 2 torchrun ranks
    [vision]                               a group: the targets below it, up to the next group,
                                           get the fleet's numbers of their own in the summary

Paths are relative to the directory the sweep runs in, as they would be on the command line. The
built-in manifest `transformers` lists transformers' base model classes (`fixtures/hf_sweep.py`),
read from a child process so this one never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ManifestInvalid

_SWEEP_OWNS = {"--json", "--tui", "--check", "--progress-fd", "--quiet", "-q"}
"""Options a manifest line may not set: the sweep writes each report and reads each exit code."""

BUILTIN = {"transformers": "ctc_doctor.fixtures.hf_sweep"}
"""Built-in manifests by name: the module that lists them (`python -m MODULE --limit N`)."""


@dataclass(frozen=True)
class Entry:
    """One target of a manifest."""

    index: int
    """Position in the whole manifest (shards keep it; a merge orders by it)."""
    line: str
    """The normalized line: the target's name in the summary and the key of `sweep diff`."""
    tokens: tuple[str, ...]
    skip: str | None = None
    """Why the target is not run (built-in manifests only)."""
    group: str | None = None
    """The `[group]` line it is listed under."""

    @property
    def kind(self) -> str:
        return "run" if self.tokens[0] == "run" else "build"

    @property
    def timeout_s(self) -> float | None:
        """The line's own `--timeout` (options before a run line's `--`), which wins over the sweep's."""
        options = self.tokens[1 : self.tokens.index("--")] if "--" in self.tokens else self.tokens[1:]
        for i, token in enumerate(options):
            value = (
                options[i + 1]
                if token == "--timeout" and i + 1 < len(options)
                else token.partition("=")[2]
                if token.startswith("--timeout=")
                else None
            )
            if value:
                try:
                    return float(value)
                except ValueError:
                    return None
        return None

    @property
    def slug(self) -> str:
        """A file name for the target's report and log: readable, unique per line."""
        readable = re.sub(r"[^A-Za-z0-9._-]+", "_", self.line).strip("_.")[:60]
        return f"{readable}-{hashlib.sha1(self.line.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Manifest:
    name: str
    entries: list[Entry]
    notes: list[str]

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(e.line for e in self.entries).encode()).hexdigest()


_GROUP = re.compile(r"^\s*\[([^\]\s][^\]]*)\]\s*(#.*)?$")
"""`[name]` on a line of its own: the targets below it belong to that group."""


def _entry(index: int, tokens: list[str], where: str, skip: str | None = None, group: str | None = None) -> Entry:
    first = tokens[0]
    ours = tokens[1 : tokens.index("--")] if "--" in tokens else tokens[1:]
    owned = sorted({t.split("=")[0] for t in ours} & _SWEEP_OWNS)
    if owned:
        raise ManifestInvalid(f"{where}: {', '.join(owned)} on a line: the sweep decides where reports go and how targets run")
    if first == "run":
        if "--" not in tokens[1:] or tokens[-1] == "--":
            raise ManifestInvalid(f"{where}: a run line needs `-- SCRIPT` (e.g. `run -- train.py`)")
    elif first.startswith("-"):
        raise ManifestInvalid(f"{where}: a line starts with a TARGET or `run`, not the option {first!r}")
    return Entry(index, shlex.join(tokens), tuple(tokens), skip, group)


def read_manifest(path: str, limit: int | None = None) -> Manifest:
    """A manifest file, or a built-in manifest by name; `limit` keeps its first targets."""
    if path in BUILTIN and not Path(path).exists():
        return _builtin(path, limit)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        names = ", ".join(BUILTIN)
        raise ManifestInvalid(f"manifest not found: {path}", hint=f"a file with one target per line, or a built-in one: {names}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestInvalid(f"cannot read manifest {path}: {exc}") from exc
    entries: list[Entry] = []
    notes: list[str] = []
    seen: dict[str, int] = {}
    group: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        header = _GROUP.match(raw)
        if header:
            group = header[1].strip()
            continue
        try:
            tokens = shlex.split(raw, comments=True)
        except ValueError as exc:
            raise ManifestInvalid(f"{path}:{number}: {exc}") from exc
        if not tokens:
            continue
        entry = _entry(len(entries), tokens, f"{path}:{number}", group=group)
        if entry.line in seen:
            notes.append(f"{path}:{number} repeats line {seen[entry.line]} ({entry.line}): run once")
            continue
        seen[entry.line] = number
        entries.append(entry)
    if not entries:
        raise ManifestInvalid(f"manifest {path} has no targets", hint="one TARGET or `run -- SCRIPT` per line")
    if limit is not None and len(entries) > limit:
        notes.append(f"--limit {limit}: {len(entries) - limit} later target(s) of the manifest not run")
        entries = entries[:limit]
    return Manifest(path, entries, notes)


def _builtin(name: str, limit: int | None) -> Manifest:
    command = [sys.executable, "-m", BUILTIN[name]] + (["--limit", str(limit)] if limit is not None else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        if "No module named 'transformers'" in done.stderr:
            raise ManifestInvalid("the built-in transformers manifest needs transformers", hint="pip install 'ctc-doctor[transformers]'")
        raise ManifestInvalid(f"cannot list the built-in {name} manifest: {last}")
    entries: list[Entry] = []
    for line in done.stdout.splitlines():
        try:
            row = json.loads(line)
            target = row["target"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # something the libraries printed
        entries.append(_entry(len(entries), [target], name, row.get("skip")))
    if not entries:
        raise ManifestInvalid(f"the built-in {name} manifest listed no targets")
    skipped = sum(e.skip is not None for e in entries)
    notes = [f"built-in {name} manifest: {len(entries) - skipped} model class(es) to run, {skipped} skipped"]
    return Manifest(name, entries, notes)


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` -> (I, N), 1 <= I <= N."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ManifestInvalid(f"bad --shard {text!r}", hint="I/N with 1 <= I <= N, e.g. 2/8")
    return int(match[1]), int(match[2])


def shard(entries: list[Entry], index: int, count: int) -> list[Entry]:
    """Shard `index` of `count` (1-based): every count-th entry, so shards are balanced and disjoint,
    and their union is the manifest."""
    return [e for e in entries if e.index % count == index - 1]
