"""Python warnings raised while ctc-doctor runs a model (torch's TF32 advice, "Online softmax is
disabled", a library's deprecation notes): counted into the report's notes instead of interleaved
with the summary. The filters in force decide what counts, as they decide what would be shown, so
`-W error` and `warnings.filterwarnings("error", ...)` keep working."""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Iterator

from ...reports.labels import WARNING_NOTE as NOTE_PREFIX
from ..readers.notes import counted_notes


@contextlib.contextmanager
def collected_warnings() -> Iterator[Counter[tuple[str, str]]]:
    """Warnings shown in the block are kept, not printed; yields their counts by (category, first line)."""
    seen: Counter[tuple[str, str]] = Counter()
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield seen
        finally:
            for w in caught:
                text = str(w.message).strip().splitlines()
                seen[(w.category.__name__, text[0] if text else "")] += 1


def warning_notes(seen: Counter[tuple[str, str]], limit: int = 10) -> list[str]:
    """One note per distinct warning, most frequent first: `warning during the run (3×): UserWarning: ...`."""
    return counted_notes(seen, NOTE_PREFIX, lambda key: f"{key[0]}: {key[1]}", limit)
