"""The report's derived sections, assembled in one place and one order.

Every producer of a report (an analysis, a script's, a log's, several ranks merged) fills in what it
observed, recompiles and suggestions included, and then calls `derive` once. Its steps, in order:
  1. the recompile causes, from the recompiles, the suggestions that address them and the call's
     argument names (`causes.recompile_causes`);
  2. what each cause cost and how it recurs; a cause that recurs once by nature (grad mode on and off)
     marks its recompiles expected (`compile_time.price_causes`);
  3. the recompile-limit cliffs: frames that ran eagerly from some call on (`compile_time.recompile_cliffs`);
  4. the verdict and the expected counts, recounted from the recompiles as now marked;
  5. the compile profile: by phase, compile, cause and module (`compile_time.compile_profile`);
  6. the note that says how many recompiles are one-offs paid once by design (`expected.one_off_note`).
Nothing else changes the report behind the caller's back. Torch-free.
"""

from __future__ import annotations

from ...reports import models as rm
from .causes import input_names, recompile_causes
from .compile_time import compile_profile, price_causes, recompile_cliffs
from .expected import one_off_note


def derive(report: rm.Report) -> rm.Report:
    """Set the report's causes, their costs, its cliffs, its verdict and its compile profile (see the module's
    docstring); call once its recompiles and suggestions are final. Returns the report."""
    report.recompile_causes = recompile_causes(report.recompiles, report.suggestions, input_names(report))
    price_causes(report)
    report.recompile_cliffs = recompile_cliffs(report)
    rm.refresh_verdict(report)
    report.compile_profile = compile_profile(report)
    note = one_off_note(report)
    if note is not None and note not in report.notes:
        report.notes.append(note)
    return report
