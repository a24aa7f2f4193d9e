"""Reading and writing report files, and the JSON Schema of the report."""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ReportError
from .models import SCHEMA_VERSION, Report


def attribute_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the docstring under its annotation in `cls`'s own body, cleaned as pydantic's
    `use_attribute_docstrings` would: read here, when a schema is made, rather than for every model
    class at import (about 45 ms of each run's start-up)."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    except (OSError, TypeError, SyntaxError):
        return {}
    assert isinstance(body, ast.ClassDef)
    out = {}
    for node, after in itertools.pairwise(body.body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr):
            if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                out[node.target.id] = inspect.cleandoc(after.value.value)
    return out


def described_schema(model: type[BaseModel], kind: str, version: str) -> dict[str, Any]:
    """`model`'s JSON Schema as committed (`report.schema.json`, `summary.schema.json`): each field's
    attribute docstring as its description, for the model and every model it holds, and its `$id`."""
    schema = model.model_json_schema()
    classes = _model_classes(model)
    for name, section in [(model.__name__, schema), *schema.get("$defs", {}).items()]:
        docs = attribute_docstrings(classes[name]) if name in classes else {}
        for field, prop in section.get("properties", {}).items():
            if field in docs and "description" not in prop:
                prop["description"] = docs[field]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ctc-doctor/{kind}/{version}"
    return schema


def _model_classes(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """ctc-doctor's pydantic model classes by name, as `$defs` names them (`model`'s own package's win a clash)."""
    found: dict[str, type[BaseModel]] = {}
    home = model.__module__.rpartition(".")[0]
    todo = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("ctc_doctor.") and (sub.__name__ not in found or sub.__module__.rpartition(".")[0] == home):
                found[sub.__name__] = sub
    return found


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of the report, as committed in `report.schema.json`."""
    return described_schema(Report, "report", SCHEMA_VERSION)


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
