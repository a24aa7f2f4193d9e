"""pytest plugin, registered through the `pytest11` entry point: the `ctc_doctor` fixture.

    def test_model_compiles_cleanly(ctc_doctor):
        ctc_doctor.assert_clean(model, (x,), max_graph_breaks=0, max_recompiles=0)

`assert_clean` analyzes the model (backend eager, no explain, no bisection) and fails the test with
the same violation list as `ctc-doctor check`. It leaves `torch._dynamo.config`, Dynamo's counters
and torch's logging as it found them; compiled caches are reset, as after any analysis.
This module imports nothing heavy at import time: it is loaded into every pytest run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest


class CompileDoctor:
    """What the `ctc_doctor` fixture returns."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def analyze(self, model: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None, **options: Any) -> Any:
        """The report of one analysis (no thresholds)."""
        from .analyzer import torch_internals as ti
        from .analyzer.doors.pipeline import AnalyzeOptions, analyze
        from .workload import Workload

        variants = options.pop("variants", ())
        options.setdefault("explain", False)
        options.setdefault("spec", f"pytest {self.nodeid}")
        positional = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        with ti.preserved_dynamo_state():
            return analyze(Workload(model, positional, dict(kwargs or {}), variants=variants), AnalyzeOptions(**options))

    def assert_clean(
        self,
        model: Any,
        args: Any = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        variants: Sequence[Any] = (),
        max_graph_breaks: int | None = 0,
        max_recompiles: int | None = 0,
        allow: Sequence[str] = (),
        allow_modules: Sequence[str] = (),
        own_code_only: bool = False,
        backend: str | None = None,
        train: bool = False,
    ) -> Any:
        """Fail the test when the model breaks or recompiles more than allowed; return the report."""
        from .reports.policy import Policy, violations

        report = self.analyze(model, args, kwargs, variants=variants, backend=backend, train=train)
        policy = Policy(max_graph_breaks, max_recompiles, tuple(allow), tuple(allow_modules), own_code_only)
        found = violations(report, policy)
        if found:
            pytest.fail("torch.compile is not clean (ctc-doctor):\n" + "\n".join(found), pytrace=False)
        return report


@pytest.fixture
def ctc_doctor(request: pytest.FixtureRequest) -> CompileDoctor:
    """Check that a model compiles to one graph without recompiles: `ctc_doctor.assert_clean(model, (x,))`."""
    return CompileDoctor(request.node.nodeid)
