"""`CompileId`: the id of one Dynamo compile, as torch and tlparse write it.

`0/1` is frame 0, its second compile; `!2/0/1` is the same inside compiled-autograd graph 2; `!2` is the
compiled-autograd graph itself: `str(CompileId)` is torch's own rendering, the one TORCH_LOGS prints in
brackets (`[0/1]`, with `_N` for a restart attempt: `[0/1_1]`) and tlparse names its pages by. Offline
reports of several ranks qualify it with the rank (`rank1:0/1`), since every rank counts from `0/0`.
Reports store `str(CompileId)`; everything that makes, reads or sorts an id goes through this type.
No torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PATTERN = re.compile(r"^(?:rank(?P<rank>\d+):)?\[?(?:!(?P<ca>\d+))?(?:/?(?P<frame>\d+)/(?P<attempt>\d+))?(?:_(?P<restart>\d+))?\]?$")


@dataclass(frozen=True)
class CompileId:
    """One compile: frame, the frame's compile count, and where set its compiled-autograd graph and rank."""

    frame: int | None
    attempt: int | None
    autograd: int | None = None
    rank: int | None = None

    def __str__(self) -> str:
        if self.autograd is not None:
            body = f"!{self.autograd}" + (f"/{self.frame}/{self.attempt}" if self.frame is not None else "")
        else:
            body = f"{self.frame}/{self.attempt}"
        return f"rank{self.rank}:{body}" if self.rank is not None else body

    def with_rank(self, rank: int | None) -> CompileId:
        return CompileId(self.frame, self.attempt, self.autograd, rank)

    def sort_key(self) -> tuple[int, ...]:
        """Rank, compiled-autograd graph, frame, attempt: `0/0 < 0/1 < 1/0 < 10/0`."""
        return tuple(-1 if v is None else v for v in (self.rank, self.autograd, self.frame, self.attempt))

    @classmethod
    def from_metadata(cls, md: dict[str, Any]) -> CompileId | None:
        """From a structured-trace record's metadata (`frame_id`, `frame_compile_id`, `compiled_autograd_id`)."""
        frame, attempt, autograd = md.get("frame_id"), md.get("frame_compile_id"), md.get("compiled_autograd_id")
        if autograd is None and (frame is None or attempt is None):
            return None
        if (frame is None) != (attempt is None):
            return None
        return cls(_int(frame), _int(attempt), _int(autograd))

    @classmethod
    def parse(cls, text: str | None) -> CompileId | None:
        """`0/1`, `[0/1_2]` (the restart attempt is dropped), `!0/0/1`, `!0`, `rank1:0/1`; None otherwise."""
        if not text:
            return None
        m = _PATTERN.match(text.strip())
        if m is None or (m.group("ca") is None and m.group("frame") is None):
            return None
        return cls(_int(m.group("frame")), _int(m.group("attempt")), _int(m.group("ca")), _int(m.group("rank")))


def qualified(compile_id: str | None, rank: int | None) -> str | None:
    """The id as one rank's (`0/0` of rank 1 -> `rank1:0/0`): ids repeat on every rank. Without a rank,
    or for text that is no id, the text as it is."""
    cid = CompileId.parse(compile_id)
    if cid is None or rank is None:
        return compile_id
    return str(cid.with_rank(rank))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def compile_id_key(text: str) -> tuple[Any, ...]:
    """Sort key for compile-id strings of a report; text that is no id sorts last, by itself."""
    cid = CompileId.parse(text)
    return (0, cid.sort_key()) if cid is not None else (1, (text,))
