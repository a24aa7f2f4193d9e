"""Outputs against a reference, assert_close-style, with per-dtype tolerances.

`fix` checks each variant against the original's eager outputs; the benchmark checks each arm.
Backends that may reorder floating-point math (anything but eager/aot_eager) get looser tolerances.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# torch.testing.assert_close defaults (rtol, atol) per dtype; compiled backends that reorder floating
# point math (inductor) get `_LOOSE` instead.
_TOLERANCE = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_LOOSE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2), torch.float32: (1e-4, 1e-4), torch.float64: (1e-6, 1e-6)}


def loose_backend(backend: str) -> bool:
    """Backends other than eager/aot_eager may reorder float math: compare with looser tolerances."""
    return backend not in ("eager", "aot_eager")


def tolerance(dtype: torch.dtype, loose: bool = False) -> tuple[float, float]:
    """(rtol, atol) for outputs of `dtype`."""
    return (_LOOSE if loose else _TOLERANCE).get(dtype, (1e-5, 1e-8))


@dataclass
class Numerics:
    ok: bool
    max_abs: float
    max_rel: float
    problem: str | None = None


def compare_outputs(got: list[list[torch.Tensor]], want: list[list[torch.Tensor]], loose: bool = False) -> Numerics:
    """Per-call output tensors against the reference, assert_close-style; max errors over everything."""
    max_abs = max_rel = 0.0
    ok = True
    problem = None
    if len(got) != len(want):
        return Numerics(False, float("inf"), float("inf"), f"{len(got)} outputs, expected {len(want)}")
    for i, (g_call, w_call) in enumerate(zip(got, want, strict=True)):
        if len(g_call) != len(w_call):
            return Numerics(False, float("inf"), float("inf"), f"call {i}: {len(g_call)} output tensors, expected {len(w_call)}")
        for g, w in zip(g_call, w_call, strict=True):
            if g.shape != w.shape:
                return Numerics(False, float("inf"), float("inf"), f"call {i}: shape {list(g.shape)}, expected {list(w.shape)}")
            g, w = g.to(w.device), w
            if not (w.is_floating_point() or w.is_complex()):
                if not torch.equal(g, w):
                    ok, problem = False, f"call {i}: integer/bool outputs differ"
                continue
            rtol, atol = tolerance(w.dtype, loose)
            diff = (g.double() - w.double()).abs()
            nan_mismatch = torch.isnan(g) != torch.isnan(w)
            diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                rel = diff / w.double().abs().clamp_min(1e-12)
                max_rel = max(max_rel, float(rel.max()))
            if bool(nan_mismatch.any()) or bool((diff > atol + rtol * w.double().abs()).any()):
                ok = False
                problem = problem or f"call {i}: outputs differ beyond rtol={rtol:g}, atol={atol:g}"
    return Numerics(ok, max_abs, max_rel, problem)
