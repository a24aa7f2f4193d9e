"""The ahead-of-time arms of the bench phase: `torch.export` + AOTInductor, whole or regional.

- `aot`: export the whole model on the first call (dims that vary between the workload's calls are
  `Dim.AUTO`), AOTInductor-compile it into a temporary `.pt2` package, load it, run the passes.
- `aot_regional` (the PyTorch recipe "Reducing AoT cold start compilation time with regional
  compilation"): each distinct repeated block class is exported once, on the inputs its first instance
  receives, compiled once without its weights (`aot_inductor.package_constants_in_so=False`), and the
  package is loaded for every instance with that instance's own parameters and buffers; the rest of
  the model runs eagerly.
- `aot_fixed`: `aot` on the copy with the verified fixes applied (export is fullgraph-only: a model
  that breaks its graph does not export until the break is fixed).

`compile_time_s` is export + compile + package, `load_time_s` loading every package. Inference only.
When export fails, the arm's error names the failure in the analysis' terms: the break site at the
same source line (B id, gb type, module paths) and the suggestion that fixes it.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from ....progress import ProgressEvent, ProgressFn, Step
from ....reports import models as rm
from ....workload import Call, Workload
from ... import torch_internals as ti
from ...readers.sources import innermost_own_frame
from ...readers.text import describe_error
from ...running import device as dev
from ...running.calls import preserved_state, run_call, run_pass
from ...running.memory import out_of_memory
from ...running.numerics import Reference

Timer = Callable[[Callable[..., Any]], rm.LatencyStats]


def _named(call: Call) -> dict[str, Any]:
    """A call's arguments by name: `args[i]` for positional ones, keywords as they are."""
    return {**{f"args[{i}]": a for i, a in enumerate(call.args)}, **dict(call.kwargs)}


def varying_dims(calls: list[Call]) -> dict[str, set[int]]:
    """Per argument (name, or `args[i]`), the dims whose size differs between the calls."""
    sizes: dict[str, list[tuple[int, ...]]] = {}
    for call in calls:
        for key, value in _named(call).items():
            if isinstance(value, torch.Tensor):
                sizes.setdefault(key, []).append(tuple(value.shape))
    out: dict[str, set[int]] = {}
    for key, shapes in sizes.items():
        if len({len(s) for s in shapes}) == 1 and len(shapes) > 1:
            dims = {d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1}
            if dims:
                out[key] = dims
    return out


def export_call(calls: list[Call], varying: dict[str, set[int]]) -> Call:
    """The call to export on: the first whose varying dims are all >= 2 (export specialises a dim of
    size 0 or 1 to that size, and the package would then refuse the other calls)."""

    def sized(call: Call) -> bool:
        named = _named(call)
        return all(named[k].shape[d] >= 2 for k, dims in varying.items() if isinstance(named.get(k), torch.Tensor) for d in dims)

    return next((c for c in calls if sized(c)), calls[0])


def export_failure(exc: BaseException, report: rm.Report | None) -> str:
    """The export error in the analysis' terms: the break site at the same line, and its fix."""
    text = f"torch.export failed: {type(exc).__name__}: {describe_error(exc)}"[:400]
    where = innermost_own_frame(exc)
    if where is None or report is None:
        return text
    file, _, line = where.rpartition(":")
    for site in report.graph_breaks:
        frame = site.own_frame or site.user_frame
        if os.path.abspath(frame.file) == os.path.abspath(file) and str(frame.line) == line:
            fixes = [s.id for s in report.suggestions if site.id in s.applies_to]
            paths = ", ".join(site.module_paths) or "(root)"
            gb = f"{site.registry_ids[0]} " if site.registry_ids else ""
            fix = f"; fix it ({', '.join(fixes)}) to export" if fixes else "; remove it to export"
            return (
                f"export fails at the graph break {site.id} ({gb}{site.gb_type}, {paths}) at "
                f"{os.path.basename(file)}:{line}: torch.export is fullgraph-only{fix}. {text}"
            )[:600]
    return f"{text} (at {os.path.basename(file)}:{line})"


def _block_inputs(model: torch.nn.Module, block: torch.nn.Module, workload: Workload, calls: list[Call]) -> list[Call]:
    """What `block` receives in each call of the workload (one eager pass, no grad)."""
    seen: list[Call] = []

    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append(Call(tuple(args), dict(kwargs)))

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for i, call in enumerate(calls):
            before = len(seen)
            run_call(model, workload, call, i, seed=None, train=False, model=model)
            del seen[before + 1 :]  # the first time per call is enough
    finally:
        handle.remove()
    return seen


def _weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers (non-persistent ones too: the exported program lifts them all)."""
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def run_aot_arm(
    arm: Any,
    workload: Workload,
    report: rm.Report | None,
    reference: Reference | None,
    timed: Timer,
    *,
    device: str,
    strict: bool,
    progress: ProgressFn,
) -> rm.BenchmarkArm:
    """Measure one AOT arm (`arm.aot` is `whole` or `regional`)."""
    out = rm.BenchmarkArm(name=arm.name, description=arm.description)
    out.settings = {"export": "strict" if strict else "non-strict"}
    missing = ti.aoti_missing()
    if missing:
        out.error = f"AOTInductor is not available: {missing}"
        return out
    patched: list[torch.nn.Module] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="ctc-doctor-aot-") as tmp,
            preserved_state(arm.model),
            torch.no_grad(),
            ti.fresh_inductor_cache(True),
        ):
            ti.fresh_dynamo_state()
            dev.reset_peak_memory(device)
            if arm.aot == "regional":
                fn = _regional(arm, workload, out, tmp, strict, progress, patched)
            else:
                fn = _whole(arm, out, tmp, strict, progress, report)
            if fn is None:
                return out
            judgement = reference.judgement() if reference is not None else None
            t0 = time.perf_counter()
            run_pass(fn, workload, arm.calls, seed=None, train=False, model=arm.model, sink=judgement)
            dev.synchronize(device)
            out.first_pass_s = round(time.perf_counter() - t0, 4)
            if judgement is not None:
                check = judgement.result()
                out.numerics, out.numerics_ok, out.max_abs_error = check, check.ok, check.max_abs_vs_eager
            out.latency_ms = timed(fn)
            out.peak_memory_mb = dev.peak_memory_mb(device)
    except Exception as exc:  # noqa: BLE001 - one failing arm is a row, not the benchmark
        out.error = out.error or f"{type(exc).__name__}: {describe_error(exc)}"[:500]
        out.error_type = out.error_type or type(exc).__name__
        out.out_of_memory = out_of_memory(exc)
        out.peak_memory_mb = dev.peak_memory_mb(device)
    finally:
        for block in patched:
            block.__dict__.pop("forward", None)
        ti.fresh_dynamo_state()
    return out


def _whole(arm: Any, out: rm.BenchmarkArm, tmp: str, strict: bool, progress: ProgressFn, report: rm.Report | None) -> Any:
    varying = varying_dims(arm.calls)
    first = export_call(arm.calls, varying)
    out.settings["dynamic_dims"] = {k: sorted(v) for k, v in varying.items()}
    progress(ProgressEvent(Step.ARM, subject=arm.name, activity="torch.export"))
    t0 = time.perf_counter()
    try:
        program = ti.export_program(arm.model, tuple(first.args), dict(first.kwargs), varying, strict)
    except Exception as exc:  # noqa: BLE001 - the reason it does not export is the finding
        out.error, out.error_type = export_failure(exc, report), type(exc).__name__
        return None
    out.settings["export_s"] = round(time.perf_counter() - t0, 4)
    progress(ProgressEvent(Step.ARM, subject=arm.name, activity="AOTInductor compile"))
    path = ti.aoti_package(program, os.path.join(tmp, "model.pt2"))
    out.compile_time_s = round(time.perf_counter() - t0, 4)
    out.settings["package_mb"] = round(os.path.getsize(path) / 2**20, 3)
    t1 = time.perf_counter()
    runner = ti.aoti_load(path)
    out.load_time_s = round(time.perf_counter() - t1, 4)
    out.graph_count, out.graph_break_count, out.recompile_count = 1, 0, 0
    return runner


def _regional(
    arm: Any,
    workload: Workload,
    out: rm.BenchmarkArm,
    tmp: str,
    strict: bool,
    progress: ProgressFn,
    patched: list[torch.nn.Module],
) -> Any:
    model = arm.model
    compile_s = load_s = 0.0
    packages = []
    for n, paths in enumerate(arm.aot_groups):
        block = model.get_submodule(paths[0])
        inputs = _block_inputs(model, block, workload, arm.calls)
        if not inputs:
            out.error = f"{paths[0]} is never called: nothing to export"
            return None
        varying = varying_dims(inputs)
        progress(ProgressEvent(Step.ARM, n, len(arm.aot_groups), subject=arm.name, activity=f"torch.export of {paths[0]}"))
        t0 = time.perf_counter()
        try:
            chosen = export_call(inputs, varying)
            program = ti.export_program(block, tuple(chosen.args), dict(chosen.kwargs), varying, strict)
        except Exception as exc:  # noqa: BLE001 - the reason it does not export is the finding
            out.error = f"{paths[0]} ({type(block).__name__}): " + export_failure(exc, None)
            out.error_type = type(exc).__name__
            return None
        path = ti.aoti_package(program, os.path.join(tmp, f"block{n}.pt2"), constants_in_package=False)
        compile_s += time.perf_counter() - t0
        t1 = time.perf_counter()
        for p in paths:
            instance = model.get_submodule(p)
            instance.forward = ti.aoti_load(path, _weights(instance))  # type: ignore[method-assign]
            patched.append(instance)
        load_s += time.perf_counter() - t1
        packages.append(
            {
                "class": type(block).__name__,
                "exported": paths[0],
                "instances": len(paths),
                "dynamic_dims": {k: sorted(v) for k, v in varying.items()},
            }
        )
    out.settings["packages"] = packages
    out.compile_time_s = round(compile_s, 4)
    out.load_time_s = round(load_s, 4)
    return model
