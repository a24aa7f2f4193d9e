"""Counted records folded into report notes: one line per kind, the rest in one line.

Torch-free: the Python warnings a run raises (`running.warning_notes`) and the records torch logs
(`torch_internals.loggers`) fold the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")


def counted_notes(seen: Counter[K], head: str, describe: Callable[[K], str], limit: int) -> list[str]:
    """One note per distinct record, most frequent first, `{head} ({n}×): {describe(record)}`; past
    `limit` kinds, one `{head}: {k} more kind(s), {n} in all` line (the report's renderer reads it back)."""
    notes = [f"{head} ({n}×): {describe(key)}" for key, n in seen.most_common(limit)]
    if len(seen) > limit:
        rest = sum(n for _, n in seen.most_common()[limit:])
        notes.append(f"{head}: {len(seen) - limit} more kind(s), {rest} in all")
    return notes
