"""Preflight: what a phase will need in memory, from what the workload took on its first calls, against
what is free, before the phase starts; never an out-of-memory error in the middle of an arm.

The footprint is measured on the analysis's eager pass: the model's parameters and buffers, and the
pass's own peak above them (its activations and outputs): exact on CUDA (the caching allocator's peak),
estimated on the host from the modules' outputs (the process's resident memory does not move when
freed memory is reused). A phase then needs a copy of the model plus those activations on the device
(the fix checks' copies, each benchmark arm's copy: for inference they share the weights and cost
none), and on the host the pristine copy every copy is made from. A phase that does not fit is adapted
where it can be (the parent lets go of its model, the arms run in this process instead of a child that
would import torch again, the reference runs elsewhere: `precision.make_reference`), else left out and
said; only when the analysis itself went past `--memory-limit` does the run stop with one line
(`NotEnoughMemory`, exit code 14).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import CtcDoctorError, ExitCode
from ...reports import models as rm
from ..running.device import cuda_mark, cuda_peak_above, free_bytes
from ..running.tensors import iter_tensors


class NotEnoughMemory(CtcDoctorError):
    """A phase would not fit in the memory free: stopped before it (one line: phase, need, free)."""

    exit_code = ExitCode.NO_MEMORY


def model_bytes(model: Any) -> int:
    """Bytes of the model's parameters and buffers (each tensor once)."""
    if not isinstance(model, torch.nn.Module):
        return 0
    seen: dict[int, torch.Tensor] = {}
    for t in [*model.parameters(), *model.buffers()]:
        seen.setdefault(id(t), t)
    return sum(t.numel() * t.element_size() for t in seen.values())


def value_bytes(value: Any) -> int:
    """Bytes the tensors in `value` hold: each storage once (a broadcast view holds its storage, not its shape)."""
    storages: dict[tuple[str, int], int] = {}
    for t in iter_tensors(value):
        try:
            storage = t.untyped_storage()
            storages[(str(t.device), storage.data_ptr())] = storage.nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, a subclass)
            storages[(str(t.device), id(t))] = t.numel() * t.element_size()
    return sum(storages.values())


@contextlib.contextmanager
def measuring(model: Any, device: str, train: bool) -> Iterator[rm.Footprint]:
    """Measure the block's footprint (an eager pass of the workload's calls) into the yielded record."""
    footprint = rm.Footprint(model_mb=round(model_bytes(model) / 2**20, 1), activations_mb=0.0, output_mb=0.0, method="")
    largest = [0, 0]  # the largest module output, the sum of module outputs
    handles = []
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    if isinstance(model, torch.nn.Module):

        def seen(module: torch.nn.Module, args: Any, out: Any) -> None:
            size = value_bytes(out)
            largest[0] = max(largest[0], size)
            if not any(True for _ in module.children()):
                largest[1] += size

        handles = [m.register_forward_hook(seen) for m in model.modules()]
    base = cuda_mark(device) if cuda else 0
    try:
        yield footprint
    finally:
        for h in handles:
            h.remove()
        if cuda:
            footprint.activations_mb = round(cuda_peak_above(device, base) / 2**20, 1)
            footprint.method = "CUDA allocator peak above the model"
        else:
            # inference holds a few module outputs at a time; training keeps every leaf's for backward
            estimate = largest[1] if train else 2 * largest[0]
            footprint.activations_mb = round(estimate / 2**20, 1)
            footprint.method = "estimated from the module outputs" + (" (training keeps them all)" if train else "")


def record_outputs(footprint: rm.Footprint, out: Any) -> None:
    """A call's outputs: the largest call's go into `output_mb`."""
    footprint.output_mb = max(footprint.output_mb, round(value_bytes(out) / 2**20, 1))


@dataclass
class Need:
    """What a phase needs on one device: all it allocates there, and of that what goes beyond the workload's
    own footprint (its model and its activations), which is what `--memory-limit` bounds."""

    phase: str
    device: str
    total: int
    """Bytes it allocates on the device (free memory must hold them)."""
    beyond: int
    """Bytes beyond what the workload itself holds."""
    parts: str
    """`a copy of the model 172 MB + activations 390 MB`"""

    def problem(self, releasable: int = 0, limit: int | None = None) -> str | None:
        """None when it fits: `beyond` within `limit` (`--memory-limit`) and `total` within what is free
        (plus `releasable`: what this process lets go of first); else why not, one line."""
        if limit is not None and self.beyond > limit:
            return (
                f"{self.phase} needs about {_gib(self.beyond)} on {self.device} beyond the workload's own ({self.parts}); "
                f"--memory-limit allows {_gib(limit)}"
            )
        free = free_bytes(self.device)
        if free is not None and self.total > free + releasable:
            return f"{self.phase} needs about {_gib(self.total)} on {self.device} ({self.parts}); {_gib(free + releasable)} is free"
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def phase_need(phase: str, footprint: rm.Footprint, device: str, *, models: int = 1, extra: int = 0, extra_parts: str = "") -> Need:
    """The phase's need on `device`: `models` sets of weights resident while it runs (the workload holds
    one: a copy that shares its weights costs none), the activations of its calls, plus `extra` (a
    child's imports)."""
    model = int(footprint.model_mb * 2**20)
    work = int(footprint.activations_mb * 2**20)
    copies = max(0, models - 1)
    parts = f"{models} set(s) of weights of {_gib(model)}" if copies else "the activations of its calls (its copies share the weights)"
    parts += f" + activations {_gib(work)}" if copies else f" {_gib(work)}"
    parts += f" + {extra_parts}" if extra_parts else ""
    return Need(phase, device, total=copies * model + work + extra, beyond=copies * model + extra, parts=parts)


CHILD_IMPORTS = 512 * 2**20
"""What a child process takes before the workload: Python, torch, Dynamo and inductor imported (about
0.4 GB resident on Linux x86-64), rounded up."""
