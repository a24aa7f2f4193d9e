"""The child process of isolated benchmark arms: `python -m ctc_doctor.analyzer.workers.bench SETUP.json`.

It rebuilds the workload as the analysing process did (the target, seed, device and sys.path from the
setup; the calls on the device; the rebuilt model, which nothing runs, is the pristine one every arm
copies, on the host when the device is an accelerator; the model facts), reads the report so far, the
bench options and the fix phase's numerics reference when the parent shares it (`reference`, read through
the inherited descriptor `reference_fd`), plans the arms exactly as `phases.bench` does in-process, and
answers `{"ready": true, "arms": [...], "notes": [...]}`. Then it reads one request per line
(`{"arm": NAME}`) and answers each with one line: the arm's row (`BenchmarkArm`, JSON), the settings the
eager arm adds (the numerics reference), and `replay_s`, the seconds it spent first re-running eager and
the reference when it was started after a crash and asked for a later arm (none with a shared
reference). `{"progress": {...}}` lines (a `progress.ProgressEvent`'s fields) may come before an answer. With
`bench.arm_memory_mb` it caps its own memory first (`--arm-memory-limit`), and it dies with its parent.

The protocol stream is the original stdout; the model's prints go to stderr, which the parent keeps in
a file and reads the tail of when this process dies (`running.worker.ChildWorker`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from ...errors import CtcDoctorError
from ..running.worker import answer, serve_protocol


class _Arms:
    """The rebuilt workload and the arms planned on it, measured on request."""

    def __init__(self, setup: dict[str, Any], progress: Any) -> None:
        import torch

        from ...reports import models as rm
        from ..fixes.model_facts import model_facts
        from ..phases.bench import ArmRunner, BenchOptions, plan_arms
        from ..phases.context import LentCompile, PhaseContext
        from ..running.calls import calls_on
        from ..running.numerics import Reference
        from ..running.reference.precision import Room
        from ..running.settings import RunSettings
        from ..services.target import load_workload

        seed, device = setup["seed"], setup.get("device")
        workload = load_workload(setup["target"], seed=seed)
        model = workload.model
        # the rebuilt model is the pristine one every arm copies: nothing runs it. Inference: on the device,
        # and every arm's copy shares its parameters (`copying.light_copy`), so the device holds one model;
        # training: on the host, and each arm's copy moves to the device, one at a time
        train = bool(setup["train"])
        if device is not None and device != "cpu" and isinstance(model, torch.nn.Module):
            model.to(device if not train else "cpu")
        calls = calls_on(workload, device)
        with open(setup["report_file"], encoding="utf-8") as fh:
            report = rm.Report.model_validate_json(fh.read())
        bench = setup["bench"]
        options = BenchOptions(
            **{
                **bench,
                "modes": tuple(bench.get("modes") or ()),
                "arms": tuple(bench.get("arms") or ()),
                "add_arms": tuple(bench.get("add_arms") or ()),
                "isolate": False,
            }
        )
        self.ctx = PhaseContext(
            workload=workload,
            calls=calls,
            settings=RunSettings(backend=setup["backend"], train=train, seed=seed, device=device, grad=train or bool(workload.grad)),
            spec=setup["target"],
            progress=progress,
            report=report,
            facts=model_facts(model, calls),
            owner="doctor",  # this child built it from the TARGET
            pristine=model if isinstance(model, torch.nn.Module) else None,
            reference=Reference.attached(setup["reference_fd"], setup["reference"]) if setup.get("reference") else None,
            room=Room(**setup["room"]) if setup.get("room") else None,
            # the fix phase's compile, lent through the setup (its tuple came back a list)
            fixed_compile=LentCompile(**{**lent, "applied": tuple(lent["applied"])}) if (lent := setup.get("fixed_compile")) else None,
        )
        self.runner = ArmRunner(self.ctx, options)
        self.notes: list[str] = []
        self.arms = {a.name: a for a in plan_arms(self.ctx, self.runner, self.notes)}
        self.primed = False

    def plan(self) -> list[dict[str, Any]]:
        return [{"name": a.name, "description": a.description, "code": a.code} for a in self.arms.values()]

    def measure(self, name: str) -> dict[str, Any]:
        from ..phases.bench import measure_arm
        from ..phases.bench.phase import WARMUP

        replay_s = 0.0
        eager = self.arms.get("eager")
        if name != "eager" and eager is not None and self.runner.reference is None:
            # a child started after a crash: eager's outputs and the reference judge this arm
            t0 = time.perf_counter()
            measure_arm(self.ctx, self.runner, eager)
            replay_s = time.perf_counter() - t0
        arm = self.arms[name]
        warmup: dict[str, float] = {}
        if arm.compiled and not self.primed:
            warmup[WARMUP] = self.runner.prime()  # the compiler's one-time costs, before the first compiled arm
            self.primed = True
        measured, settings = measure_arm(self.ctx, self.runner, arm)
        return {"arm": measured.model_dump(mode="json"), "settings": {**settings, **warmup}, "replay_s": round(replay_s, 3)}


def main(argv: list[str]) -> int:
    protocol = serve_protocol()  # the model's prints, Python or C level, must not corrupt the protocol
    with open(argv[1], encoding="utf-8") as fh:
        setup = json.load(fh)
    sys.path[:0] = [p for p in setup.get("sys_path", []) if p not in sys.path]

    def progress(event: Any, /) -> None:
        answer(protocol, {"progress": event.fields()})

    limit = (setup.get("bench") or {}).get("arm_memory_mb")
    if limit:
        from ..running.memory import cap_memory
        from ..running.settings import measured_on

        cap_memory(int(limit), measured_on(setup.get("device")))
    try:
        arms = _Arms(setup, progress)
    except CtcDoctorError as exc:
        answer(protocol, {"error": f"rebuilding the workload failed: {exc.one_line()}"})
        return 1
    except Exception as exc:  # noqa: BLE001 - the parent runs the arms in its own process and says why
        answer(protocol, {"error": f"rebuilding the workload failed: {type(exc).__name__}: {str(exc).strip()[:300]}"})
        return 1
    answer(protocol, {"ready": True, "arms": arms.plan(), "notes": arms.notes, "opt_in": arms.runner.opt_in_left})
    for line in sys.stdin:
        if not line.strip():
            continue
        name = json.loads(line)["arm"]
        try:
            result = arms.measure(name)
        except Exception as exc:  # noqa: BLE001 - one failing arm is a row, not the benchmark
            result = {"arm": {"name": name, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}}
        answer(protocol, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
