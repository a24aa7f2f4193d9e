"""Child process for isolated bisection trials: `python -m ctc_doctor.analyzer.trial_worker REQUEST.json`.

The request (written by `phases.bisect.trials.run_trial_isolated`) names the target, seed, module path, backend and
an inputs file saved by the parent (or none: the inputs are then recaptured with one eager call).
The outcome is written as JSON to `result_path`; a child that dies writes nothing, and the parent
records a `crashed` row from its exit signal.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from ..errors import CtcDoctorError


def _trial(request: dict[str, Any]) -> Any:
    import torch

    from ..workload import Call
    from .capture.inputs import CapturedCall, ModuleInputs
    from .common.calls import run_call, to_device
    from .phases.bisect.trials import TrialOutcome, run_trial
    from .target import load_workload

    workload = load_workload(request["target"], seed=request["seed"])
    model = workload.model
    device = request.get("device")
    if device:
        model.to(device)
    path = request["module_path"]
    try:
        module = model.get_submodule(path)
    except AttributeError:
        return TrialOutcome("crashed", 0.0, reason=f"the rebuilt model has no submodule {path!r}")
    if request.get("inputs_file"):
        data = torch.load(request["inputs_file"], weights_only=True)
        captured = CapturedCall(tuple(data["args"]), dict(data["kwargs"]), bool(data["grad_enabled"]), "")
    else:
        inputs = ModuleInputs(model)
        first = workload.calls()[0]
        with inputs.record():
            run_call(model, workload, Call(to_device(first.args, device), to_device(dict(first.kwargs), device)), 0, seed=request["seed"], train=False)
        if path not in inputs.inputs:
            return TrialOutcome("skipped", 0.0, reason="not exercised when the workload was rebuilt")
        captured = inputs.inputs[path]
    return run_trial(
        module,
        captured,
        backend=request["backend"],
        train=bool(request["train"]),
        seed=request["seed"],
        timeout_s=request.get("timeout_s"),
    )


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    sys.path[:0] = [p for p in request.get("sys_path", []) if p not in sys.path]
    from .phases.bisect.trials import TrialOutcome

    try:
        outcome = _trial(request)
    except CtcDoctorError as exc:
        outcome = TrialOutcome("crashed", 0.0, reason=f"rebuilding the workload failed: {exc.one_line()}")
    except Exception as exc:  # noqa: BLE001 - reported as the row's reason
        outcome = TrialOutcome("crashed", 0.0, reason=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
    with open(request["result_path"], "w", encoding="utf-8") as fh:
        json.dump(asdict(outcome), fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
