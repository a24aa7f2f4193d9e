"""Reading and writing report files, and the JSON Schema of the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ReportError
from .models import SCHEMA_VERSION, Report


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of the report, as committed in `report.schema.json`."""
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ctc-doctor/report/{SCHEMA_VERSION}"
    return schema


def schema_text() -> str:
    return json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n"


def dump_report(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"


def read_json_object(p: Path, noun: str) -> dict[str, Any]:
    """A JSON file whose top level is an object; any problem is a ReportError naming the `noun`."""
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ReportError(f"{noun} not found: {p}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"cannot read {noun} {p}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{p} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{p} is not a ctc-doctor {noun} (top level is {type(data).__name__})")
    return data


def load_report(path: str | Path) -> Report:
    """Load and validate a report file; any problem is a ReportError with a one-line message."""
    p = Path(path)
    data = read_json_object(p, "report")
    version = data.get("schema_version")
    if version is None:
        raise ReportError(f"{p} is not a ctc-doctor report (no schema_version)")
    major = str(version).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise ReportError(f"{p} has schema_version {version}; this ctc-doctor reads {SCHEMA_VERSION.split('.')[0]}.x")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise ReportError(f"{p} is not a valid report: {where}: {first.get('msg')} ({exc.error_count()} problem(s))") from exc
