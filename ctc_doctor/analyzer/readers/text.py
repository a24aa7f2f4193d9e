"""One-line texts: an exception for a report row, the user's frame in it, and guard-tree counts.

Torch-free (offline log ingestion uses `guard_line_count`).
"""

from __future__ import annotations

from .sources import innermost_own_frame


def first_line(exc: BaseException) -> str:
    """The exception's first non-empty line, or its type name."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def one_line(exc: BaseException) -> str:
    """The first line (300 characters at most), followed by the inner cause torch wraps it around."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0][:300] if lines else type(exc).__name__
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    if inner is not None and inner is not exc:
        text = f"{text.rstrip(':')}: {type(inner).__name__}: {one_line(inner)}"
    return text


def describe_error(exc: BaseException) -> str:
    """`one_line(exc)` with the innermost frame of the user's own code, for error rows."""
    frame = innermost_own_frame(exc)
    text = one_line(exc)
    return f"{text} (at {frame})" if frame else text


def error_site(message: str) -> tuple[str, str | None]:
    """An error row's message split back into its text and the user's frame `describe_error` put after it
    (` (at file.py:12)`): (text, `file.py:12` or None)."""
    text, at, frame = message.rpartition(" (at ")
    if not at or not frame.endswith(")"):
        return message, None
    return text, frame[:-1]


def guard_line_count(tree: str) -> int:
    """Guards in a `dynamo_cpp_guards_str` tree: its non-blank lines."""
    return sum(1 for line in tree.splitlines() if line.strip())
