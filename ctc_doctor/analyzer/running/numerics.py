"""The one numerics judgement: a run's results against eager's own, both against a higher-precision reference.

Every comparison of two runs goes through `Reference.judge`: the benchmark's arms (AOT included),
each fix check alone and combined, and, training, the loss and every parameter's gradient.

An elementwise tolerance cannot judge a compiled model in low precision: of 10^7 results, the largest
rounding difference always exceeds any fixed bound (GPT-2 in bf16: max abs 4e-2 while the compiled
logits are *closer* to float64 than eager's), and a loose bound lets a real 5 % error through. So, as
PyTorch's own inductor accuracy check does (`torch._dynamo.utils.same` with `fp64_ref`), a float64 copy
of the model and inputs runs the same calls; each floating-point tensor's RMSE against it is compared
with eager's own RMSE:

    candidate_rmse <= multiplier * max(eager_rmse, typical * scale) + eps(dtype) * scale

- `multiplier`: 2 for float32/float64, 3 for float16/bfloat16 (torch's constants), 5 for tensors of at
  most 500 elements and 10 for at most 10 (torch's `use_larger_multiplier_for_smaller_tensor`: an RMSE
  over a few numbers is itself noisy).
- `typical * scale`: eager's median relative error over the run's larger tensors times this tensor's
  RMS. A loss is one number: eager's error on it may be one lucky rounding, and the ratio of two such
  errors is heavy-tailed (about 6 % of independent pairs differ by 10x). The run's typical relative
  error bounds that noise from below; a real error (a branch taken only under compile) moves the large
  output tensors as well, which are judged by their own errors.
- `eps(dtype) * scale`: one rounding step of the tensor's dtype, so a tensor eager computes exactly
  (error 0) does not fail a candidate for one rounding.

Non-finite values must sit where eager has them; they are left out of the RMSEs. Tensors that are not
floating point must be equal. Without a float64 copy (an op without float64 support, or one that would
not fit), a bf16/fp16 model gets a float32 reference; a float32 one falls back to an elementwise check
against eager (assert_close-style, loosened for backends that reorder float math), and says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ...reports import models as rm
from ...workload import Call, Workload
from .calls import Sample, preserved_state, run_pass
from .copying import cast_copy, copy_model

# torch.testing.assert_close defaults (rtol, atol) per dtype, for the elementwise fallback; compiled
# backends that reorder floating point math (inductor) get `_LOOSE` instead.
_TOLERANCE = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_LOOSE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2), torch.float32: (1e-4, 1e-4), torch.float64: (1e-6, 1e-6)}
_LOW = (torch.float16, torch.bfloat16)
_LARGE = 500
"""Tensors of more elements than this set the run's typical relative error."""


def loose_backend(backend: str) -> bool:
    """Backends other than eager/aot_eager may reorder float math: the elementwise fallback is looser."""
    return backend not in ("eager", "aot_eager")


def tolerance(dtype: torch.dtype, loose: bool = False) -> tuple[float, float]:
    """(rtol, atol) of the elementwise fallback for outputs of `dtype`."""
    return (_LOOSE if loose else _TOLERANCE).get(dtype, (1e-5, 1e-8))


def multiplier(dtype: torch.dtype, numel: int) -> float:
    """How many times eager's own error a tensor may have (torch's constants, see the module doc)."""
    if numel <= 10:
        return 10.0
    if numel <= _LARGE:
        return 5.0
    return 3.0 if dtype in _LOW else 2.0


# ---------------------------------------------------------------------------------------------
# the reference run
# ---------------------------------------------------------------------------------------------


def _floating_dtypes(model: torch.nn.Module) -> set[torch.dtype]:
    return {t.dtype for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()}


def _bytes(model: torch.nn.Module, itemsize: int) -> int:
    return sum(t.numel() * itemsize for t in [*model.parameters(), *model.buffers()] if t.is_floating_point())


def _free_bytes(device: str) -> int | None:
    """Memory the reference copy may take: free CUDA memory, or the host's available memory."""
    if device.startswith("cuda") and torch.cuda.is_available():
        with contextlib.suppress(Exception):
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        return None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Tensors the model creates without a dtype (`torch.zeros(n)`, `torch.tensor(0.5)`) in `dtype` too."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


STEP_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 1e-2}
"""Relative error a loss after optimizer steps may always have (torch's own training accuracy check
allows 1e-4 in float32; 1e-2 in 16-bit floats)."""
STEP_NOTE = "results after an optimizer step may differ by 1e-4 of their scale (1e-2 in 16-bit), as torch's training accuracy check allows"


def _after_a_step(name: str) -> bool:
    """`call 2 output 0`, `loss call 1`: a result of a call after the first optimizer step."""
    found = re.search(r"call (\d+)", name)
    return found is not None and int(found.group(1)) >= 1


def _run_in(
    dtype: torch.dtype, model: torch.nn.Module, workload: Workload, calls: list[Call], *, seed: int | None, train: bool, steps: bool
) -> Sample:
    """The calls through a copy of `model` with its floating-point parameters, buffers and inputs in `dtype`."""
    copy = copy_model(model).to(dtype)

    def cast(t: torch.Tensor) -> torch.Tensor:
        out = t.detach().to(dtype) if t.is_floating_point() else t.detach().clone()
        return out.requires_grad_(True) if t.requires_grad and out.is_floating_point() else out

    memo: dict[int, object] = {}  # a cache that several calls share stays shared in the copy
    cast_calls = [Call(cast_copy(c.args, cast, memo), cast_copy(dict(c.kwargs), cast, memo)) for c in calls]
    high = dataclasses.replace(workload, model=copy)  # before_call and loss_fn act on the copy
    with preserved_state(copy), _default_dtype(torch.float64 if dtype == torch.float64 else torch.get_default_dtype()):
        if train:
            optimizer = workload.optimizer(copy.parameters()) if steps and workload.optimizer is not None else None
            return run_pass(copy, high, cast_calls, seed=seed, train=True, collect=True, optimizer=optimizer)
        with torch.no_grad():
            return run_pass(copy, high, cast_calls, seed=seed, train=False, collect=True)


@dataclass
class Reference:
    """What every candidate run is judged against: eager's own run and a higher-precision run of the same calls."""

    eager: Sample
    high: Sample | None = None
    method: str = "elementwise"
    """float64_reference, float32_reference or elementwise (`rm.NumericsCheck.method`)."""
    note: str | None = None
    """Why the method is not float64_reference."""
    loose: bool = False
    """The elementwise fallback's looser tolerances (a backend that reorders float math)."""
    duration_s: float = 0.0
    """Wall time of the reference run."""
    steps: bool = False
    """The calls were training steps with an optimizer: every result after the first step carries the step's
    amplified rounding (Adam's first update is about lr x the sign of each gradient, and a compiled
    optimizer orders its float math its own way), so it gets STEP_TOLERANCE."""

    random: str | None = None
    """How runs of a model that draws random numbers were made comparable (`rm.NumericsCheck.random`)."""

    def judge(self, candidate: Sample, outputs: bool = True) -> rm.NumericsCheck:
        """The candidate's results against eager's (see the module doc); `outputs=False`: its losses and
        gradients only (a run on padded inputs, whose outputs have other shapes)."""
        check = _judge(candidate, self, outputs)
        check.random = self.random
        return check


def differ(a: Sample, b: Sample) -> bool:
    """Whether two runs of the same calls gave other results (the model draws random numbers, when
    the two runs were seeded differently)."""
    pairs = [*zip(a.losses, b.losses, strict=False)]
    pairs += [(x, y) for xs, ys in zip(a.outputs, b.outputs, strict=False) for x, y in zip(xs, ys, strict=False)]
    return any(x.shape != y.shape or not torch.equal(x, y) for x, y in pairs)


def make_reference(
    model: torch.nn.Module,
    workload: Workload,
    calls: list[Call],
    eager: Sample,
    *,
    seed: int | None,
    train: bool,
    device: str,
    loose: bool,
    steps: bool = False,
) -> Reference:
    """Run the calls through a float64 copy of `model` (float32 for a bf16/fp16 model that cannot have one);
    `steps`: as whole training steps, the workload's optimizer built over the copy's parameters."""

    t0 = time.perf_counter()
    dtypes = _floating_dtypes(model)
    low = bool(dtypes & set(_LOW))
    free = _free_bytes(device)
    tries: list[tuple[torch.dtype, str]] = []
    problems: list[str] = []
    # the copy, its activations and gradients: about three times its parameters
    if free is not None and 3 * _bytes(model, 8) > free:
        problems.append(f"a float64 copy would not fit ({3 * _bytes(model, 8) / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free)")
    else:
        tries.append((torch.float64, "float64_reference"))
    if low:
        tries.append((torch.float32, "float32_reference"))
    for dtype, method in tries:
        try:
            high = _run_in(dtype, model, workload, calls, seed=seed, train=train, steps=steps)
        except Exception as exc:  # noqa: BLE001 - an op without this dtype: the next precision, said so
            first = str(exc).splitlines()[0][:160] if str(exc) else ""
            problems.append(f"the {str(dtype).removeprefix('torch.')} copy failed: {type(exc).__name__}: {first}")
            continue
        note = "; ".join(problems) or None
        if steps:
            note = "; ".join(filter(None, [note, STEP_NOTE]))
        return Reference(eager, high, method, note, loose, round(time.perf_counter() - t0, 3), steps)
    note = "; ".join(problems) or "no higher precision than the model's"
    return Reference(eager, None, "elementwise", note + ": elementwise check against eager", loose, round(time.perf_counter() - t0, 3))


# ---------------------------------------------------------------------------------------------
# the judgement
# ---------------------------------------------------------------------------------------------


@dataclass
class _Row:
    """One floating-point tensor: its errors against the reference."""

    name: str
    dtype: torch.dtype
    numel: int
    eager: float
    candidate: float
    scale: float
    sq_eager: float
    sq_candidate: float
    n: int


def _max_abs(c: torch.Tensor, e: torch.Tensor) -> float:
    """Largest |candidate - eager| (NaNs as 0), both already float64 on one device."""
    return float(torch.nan_to_num((c - e).abs(), nan=0.0).max()) if c.numel() else 0.0


def _float_row(name: str, cand: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor) -> tuple[_Row | None, str | None, float]:
    """The tensor's errors against the reference (or why it fails outright), and its largest difference from eager."""
    c, e, r = cand.double().to(ref.device), eager.double().to(ref.device), ref.double()
    max_abs = _max_abs(c, e)
    if torch.is_complex(r):
        c, e, r = torch.view_as_real(c), torch.view_as_real(e), torch.view_as_real(r)
    finite_c, finite_e = torch.isfinite(c), torch.isfinite(e)
    # non-finite values where eager has finite ones (and the reference too): a real difference
    if bool((~finite_c & finite_e & torch.isfinite(r)).any()):
        return None, f"{name}: non-finite values where eager has finite ones", max_abs
    both_inf = ~finite_c & ~finite_e & ~(torch.isnan(c) | torch.isnan(e))
    if bool((c[both_inf] != e[both_inf]).any()):
        return None, f"{name}: infinities of another sign than eager's", max_abs
    mask = finite_c & finite_e & torch.isfinite(r)
    n = int(mask.sum())
    if n == 0:
        return _Row(name, cand.dtype, cand.numel(), 0.0, 0.0, 0.0, 0.0, 0.0, 0), None, max_abs
    rd = r[mask]
    sq_e = float(((e[mask] - rd) ** 2).sum())
    sq_c = float(((c[mask] - rd) ** 2).sum())
    scale = float(rd.pow(2).mean().sqrt())
    return _Row(name, cand.dtype, cand.numel(), math.sqrt(sq_e / n), math.sqrt(sq_c / n), scale, sq_e, sq_c, n), None, max_abs


_Pair = tuple[str, torch.Tensor, torch.Tensor, "torch.Tensor | None"]
"""(name, candidate, eager, reference) of one compared tensor."""


def _pairs(candidate: Sample, reference: Reference, outputs: bool = True) -> tuple[list[_Pair], str | None, list[str]]:
    """(name, candidate, eager, reference) for each compared tensor; or a structural problem; and what was compared."""
    eager, high = reference.eager, reference.high
    out: list[_Pair] = []
    if not outputs:
        eager = Sample([], eager.losses, eager.grads)
        candidate = Sample([], candidate.losses, candidate.grads)
    if len(candidate.outputs) != len(eager.outputs):
        return [], f"{len(candidate.outputs)} calls ran, expected {len(eager.outputs)}", []
    tensors = 0
    for i, (c_call, e_call) in enumerate(zip(candidate.outputs, eager.outputs, strict=True)):
        h_call = high.outputs[i] if high is not None and i < len(high.outputs) else None
        if len(c_call) != len(e_call):
            return [], f"call {i}: {len(c_call)} output tensors, expected {len(e_call)}", []
        for j, (c, e) in enumerate(zip(c_call, e_call, strict=True)):
            h = h_call[j] if h_call is not None and j < len(h_call) else None
            out.append((f"call {i} output {j}", c, e, h))
            tensors += 1
    compared = [f"outputs ({len(eager.outputs)} call(s), {tensors} tensor(s))" if outputs else "outputs: not compared (other shapes)"]
    if eager.losses and candidate.losses:
        if len(candidate.losses) != len(eager.losses):
            return [], f"{len(candidate.losses)} losses, expected {len(eager.losses)}", compared
        for i, (c, e) in enumerate(zip(candidate.losses, eager.losses, strict=True)):
            h = high.losses[i] if high is not None and i < len(high.losses) else None
            out.append((f"loss call {i}", c, e, h))
        compared.append(f"loss ({len(eager.losses)} call(s))")
    if eager.grads:
        missing = sorted(set(eager.grads) - set(candidate.grads))
        if missing:
            return [], f"no gradient for {missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""), compared
        for name, e in eager.grads.items():
            h = high.grads.get(name) if high is not None else None
            out.append((f"grad {name}", candidate.grads[name], e, h))
        compared.append(f"gradients ({len(eager.grads)} parameter(s))")
    return out, None, compared


def _elementwise(name: str, c: torch.Tensor, e: torch.Tensor, loose: bool) -> str | None:
    rtol, atol = tolerance(e.dtype, loose)
    c, e = c.double().to(e.device), e.double()
    nan_mismatch = torch.isnan(c) != torch.isnan(e)
    diff = torch.nan_to_num((c - e).abs(), nan=0.0)
    if bool(nan_mismatch.any()) or bool((diff > atol + rtol * e.abs()).any()):
        return f"{name}: differs from eager beyond rtol={rtol:g}, atol={atol:g}"
    return None


def _judge(candidate: Sample, reference: Reference, outputs: bool = True) -> rm.NumericsCheck:
    method = reference.method
    check = rm.NumericsCheck(method=method, ok=True, note=reference.note)  # type: ignore[arg-type]
    pairs, problem, check.compared = _pairs(candidate, reference, outputs)
    if problem is not None:
        check.ok, check.problem = False, problem
        return check
    rows: list[_Row] = []
    max_abs = 0.0
    for name, c, e, h in pairs:
        if c.shape != e.shape:
            check.ok, check.problem = False, f"{name}: shape {list(c.shape)}, expected {list(e.shape)}"
            return check
        if not (e.is_floating_point() or e.is_complex()):
            if not torch.equal(c.to(e.device), e):
                check.ok = False
                check.problem = check.problem or f"{name}: integer/bool values differ from eager's"
            continue
        if h is None:
            max_abs = max(max_abs, _max_abs(c.double().to(e.device), e.double()))
            bad = _elementwise(name, c, e, reference.loose)
            if bad and check.ok:
                check.ok, check.problem = False, bad
            continue
        row, bad, tensor_max = _float_row(name, c, e, h)
        max_abs = max(max_abs, tensor_max)
        if bad is not None:
            if check.ok:
                check.ok, check.problem = False, bad
            continue
        assert row is not None
        rows.append(row)
    check.max_abs_vs_eager = max_abs
    if not rows:
        return check
    large = [r.eager / r.scale for r in rows if r.numel > _LARGE and r.scale > 0]
    typical = sorted(large)[len(large) // 2] if large else 0.0
    worst: tuple[float, _Row, float] | None = None
    for r in rows:
        m = multiplier(r.dtype, r.numel)
        eps = torch.finfo(r.dtype).eps if r.dtype.is_floating_point else torch.finfo(torch.float32).eps
        floor = STEP_TOLERANCE.get(r.dtype, 1e-4) if reference.steps and _after_a_step(r.name) else 0.0
        allowed = max(m * max(r.eager, typical * r.scale), floor * r.scale) + eps * r.scale
        share = r.candidate / allowed if allowed > 0 else (0.0 if r.candidate == 0 else math.inf)
        if worst is None or share > worst[0]:
            worst = (share, r, m)
    assert worst is not None
    share, r, m = worst
    check.worst = f"{r.name} (error {r.candidate:.3g}, eager's {r.eager:.3g}, scale {r.scale:.3g})"
    check.worst_ratio = round(share, 4) if math.isfinite(share) else None
    if share > 1 and check.ok:
        check.ok = False
        times = f"{r.candidate / r.eager:.3g}x" if r.eager else "above"
        check.problem = f"{r.name}: error {r.candidate:.3g} against the reference, {times} eager's own ({r.eager:.3g}); allowed {m:g}x"
    summed = [x for x in rows if x.name.startswith("call ")] or rows
    n = sum(x.n for x in summed)
    if n:
        check.eager_error = math.sqrt(sum(x.sq_eager for x in summed) / n)
        check.candidate_error = math.sqrt(sum(x.sq_candidate for x in summed) / n)
        if check.eager_error > 0:
            check.ratio = round(check.candidate_error / check.eager_error, 4)
        elif check.candidate_error == 0:
            check.ratio = 1.0
    check.multiplier = multiplier(summed[0].dtype, max(x.numel for x in summed))
    return check
