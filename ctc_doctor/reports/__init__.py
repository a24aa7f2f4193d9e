"""The report models, their JSON Schema, loading/saving and rendering. Imports neither torch nor textual."""

from .io import dump_report, load_report, report_json_schema
from .models import SCHEMA_VERSION, Report

__all__ = ["SCHEMA_VERSION", "Report", "dump_report", "load_report", "report_json_schema"]
