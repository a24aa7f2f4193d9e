"""torch's graph-break registry (`torch/_dynamo/graph_break_registry.json`), read without importing torch.

The live analysis and offline log ingestion both map a gb_type to its registry ids and hints. The
file is data shipped inside the installed torch package (2.8+; absent before), so it is found with
`importlib.util.find_spec` and read as JSON: offline ingestion stays torch-free and fast.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Any


@functools.lru_cache(maxsize=1)
def graph_break_registry() -> dict[str, list[dict[str, Any]]] | None:
    """{GBxxxx: [newest entry, older...]} of the installed torch, or None (no torch, or torch < 2.8).

    Read once per process; callers must not mutate it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "_dynamo", "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


@functools.lru_cache(maxsize=1)
def _ids_by_gb_type() -> dict[str, tuple[str, ...]]:
    by_type: dict[str, list[str]] = {}
    for gb_id, entries in (graph_break_registry() or {}).items():
        for entry in entries[:1]:
            by_type.setdefault(entry.get("Gb_type", ""), []).append(gb_id)
    return {k: tuple(v) for k, v in by_type.items()}


def registry_ids_for(gb_type: str) -> list[str]:
    """Registry ids whose newest entry has this gb_type (several ids can share one gb_type)."""
    return list(_ids_by_gb_type().get(gb_type, ()))


def registry_hints(gb_id: str) -> list[str]:
    entries = (graph_break_registry() or {}).get(gb_id) or []
    return list(entries[0].get("Hints", [])) if entries else []
