"""The benchmark's compiled arm crashed inside torch: the crash triaged (`analyzer/triage`) on the
workload's calls, in this process."""

from __future__ import annotations

from typing import Any

import torch

from ....reports import models as rm
from ...running.calls import grad_mode, preserved_state, run_call
from ...triage.around import triage_calls
from ..context import PhaseContext
from .options import BenchOptions


def triage_compiled_arm(here: PhaseContext, model: torch.nn.Module, bench: BenchOptions) -> rm.TorchBug | None:
    """The compiled arm crashed inside torch: the stage, the user's line, a verified repro and the issue
    text, with a workaround checked on the workload's calls (`triage`), on `model` (a copy of the pristine
    model, or the model built again when this process let it go for the arms' child: the caller's)."""
    settings = here.settings

    def call_all(compiled: Any) -> None:
        with preserved_state(model), grad_mode(settings):
            for i, call in enumerate(here.calls):
                run_call(compiled, here.workload, call, i, seed=settings.seed, train=settings.train)

    return triage_calls(
        call_all,
        model,
        bench.backend,
        where=f"the benchmark's compiled arm ({bench.backend})",
        untried=None,
        repro_dir=bench.repro_dir,
        slug="compiled",
        compile_kwargs={"mode": bench.mode} if bench.mode and bench.mode != "default" else None,
    )
