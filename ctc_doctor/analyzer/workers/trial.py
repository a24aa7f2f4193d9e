"""The child process of isolated bisection trials: `python -m ctc_doctor.analyzer.workers.trial SETUP.json`.

One worker serves many trials. It starts in two steps, so that an early start costs no second model:
first it imports torch and the target's module and says `ready` on its protocol stream (the pipeline
starts it before the analysis, which these imports then overlap); the model is built only when the
parent asks, `{"build": true}`, once its preflight said a second model fits: the workload rebuilt from
the target named in the setup (seed, backend, device, sys.path as the parent had them) and its first
call run eagerly (recording each module's inputs; the model's first-call set-up is then done, as for
in-process trials), answered `{"built": true}`. Then it reads one JSON request per line from stdin
(`{"module_path", "inputs_file", "timeout_s"}`) and answers each with one JSON line: the `TrialOutcome`.
Inputs come from a file the parent saved, else from that eager first call. Each trial leaves the model's
grads and buffers as it found them, as in-process trials do.

The protocol stream is the original stdout; the model's own prints (Python or C level) go to stderr.
A worker that cannot rebuild the workload answers `{"error": ...}` instead of `ready` and exits; one
that dies or hangs is the parent's to restart (`phases.bisect.trials.TrialWorker`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from ...errors import CtcDoctorError
from ..running.worker import answer, serve_protocol


class _Worker:
    def __init__(self, setup: dict[str, Any]) -> None:
        import torch  # noqa: F401 - the slow imports first, while the parent's analysis runs

        from ..phases.bisect import trials  # noqa: F401
        from ..services.target import resolve_builder

        self.setup = setup
        self.device = setup.get("device")
        self.workload: Any = None
        self.recorded: Any = None  # ModuleInputs of one eager first call
        resolve_builder(setup["target"])  # the target's module imported (transformers...), nothing built

    def build(self) -> None:
        """The workload rebuilt and its first call run (in-process trials find the model after the analysis
        ran it: its first-call set-up done)."""
        if self.workload is not None:
            return
        from ..services.target import load_workload

        self.workload = load_workload(self.setup["target"], seed=self.setup["seed"])
        if self.device:
            self.workload.model.to(self.device)
        self._recorded_inputs()

    def _recorded_inputs(self) -> Any:
        if self.recorded is None:
            import torch

            from ..capture.inputs import ModuleInputs
            from ..running.calls import calls_on, preserved_state, run_call

            model = self.workload.model
            self.recorded = ModuleInputs(model)
            call = calls_on(self.workload, self.device)[0]
            # gradients on only to train, as the analysis ran its calls (`RunSettings.grad`)
            grad = bool(self.setup["train"]) or bool(self.workload.grad)
            with preserved_state(model), self.recorded.record(), torch.set_grad_enabled(grad):
                run_call(model, self.workload, call, 0, seed=self.setup["seed"], train=False)
        return self.recorded

    def trial(self, request: dict[str, Any]) -> Any:
        import torch

        from ..capture.inputs import CapturedCall
        from ..phases.bisect.trials import TrialOutcome, run_trial
        from ..running.calls import preserved_state

        self.build()
        model, path = self.workload.model, request["module_path"]
        try:
            module = model.get_submodule(path)
        except AttributeError:
            return TrialOutcome("crashed", 0.0, reason=f"the rebuilt model has no submodule {path!r}")
        if request.get("inputs_file"):
            data = torch.load(request["inputs_file"], weights_only=True)
            captured = CapturedCall(tuple(data["args"]), dict(data["kwargs"]), bool(data["grad_enabled"]), "", device=data.get("device"))
        else:
            recorded = self._recorded_inputs()
            if path not in recorded.inputs:
                return TrialOutcome("skipped", 0.0, reason="not exercised when the workload was rebuilt")
            captured = recorded.inputs[path]
        with preserved_state(model):
            return run_trial(
                module,
                captured,
                backend=self.setup["backend"],
                train=bool(self.setup["train"]),
                seed=self.setup["seed"],
                timeout_s=request.get("timeout_s"),
            )


def main(argv: list[str]) -> int:
    protocol = serve_protocol()  # the model's prints, Python or C level, must not corrupt the protocol
    with open(argv[1], encoding="utf-8") as fh:
        setup = json.load(fh)
    sys.path[:0] = [p for p in setup.get("sys_path", []) if p not in sys.path]
    try:
        worker = _Worker(setup)
    except CtcDoctorError as exc:
        answer(protocol, {"error": f"importing the target failed: {exc.one_line()}"})
        return 1
    except Exception as exc:  # noqa: BLE001 - the parent reports it on every trial's row
        answer(protocol, {"error": f"importing the target failed: {type(exc).__name__}: {str(exc).strip()[:300]}"})
        return 1
    answer(protocol, {"ready": True})
    from ..phases.bisect.trials import TrialOutcome

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("build"):
            try:
                worker.build()
                answer(protocol, {"built": True})
            except CtcDoctorError as exc:
                answer(protocol, {"error": f"rebuilding the workload failed: {exc.one_line()}"})
            except Exception as exc:  # noqa: BLE001 - the parent reports it on every trial's row
                answer(protocol, {"error": f"rebuilding the workload failed: {type(exc).__name__}: {str(exc).strip()[:300]}"})
            continue
        try:
            outcome = worker.trial(request)
        except Exception as exc:  # noqa: BLE001 - reported as the row's reason
            outcome = TrialOutcome("crashed", 0.0, reason=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        answer(protocol, asdict(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
