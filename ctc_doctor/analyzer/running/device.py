"""The device a run measures on: synchronisation and peak memory (CUDA allocator, or the process's
peak RSS on Linux CPUs)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

_BEFORE_RESET: list[Callable[[], None]] = []
"""Called before the CUDA allocator's peak is reset (`watching_resets`): the cost meter folds the peak so
far into its phase, so a reset inside a phase (a reference way's mark, an arm's) does not lose it."""


@contextlib.contextmanager
def watching_resets(fold: Callable[[], None]) -> Iterator[None]:
    """`fold` called before every peak reset of `reset_peak_memory` and `cuda_mark` while the block runs."""
    _BEFORE_RESET.append(fold)
    try:
        yield
    finally:
        _BEFORE_RESET.remove(fold)


def _reset_cuda_peak(device: str) -> None:
    torch.cuda.synchronize(device)
    for fold in list(_BEFORE_RESET):
        fold()
    torch.cuda.reset_peak_memory_stats(device)


def cuda_mark(device: str) -> int:
    """The CUDA allocator's peak reset (what it was folded first) and the bytes allocated now: the base
    `cuda_peak_above` measures from."""
    _reset_cuda_peak(device)
    return int(torch.cuda.memory_allocated(device))


def cuda_peak_above(device: str, base: int) -> int:
    """The CUDA allocator's peak since `cuda_mark`, above its base."""
    torch.cuda.synchronize(device)
    return max(0, int(torch.cuda.max_memory_allocated(device)) - base)


def reset_peak_memory(device: str) -> None:
    if device.startswith("cuda"):
        _reset_cuda_peak(device)
        return
    with contextlib.suppress(OSError):  # Linux: "5" resets the process's peak RSS (VmHWM)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")


def peak_memory_mb(device: str) -> float | None:
    """CUDA: peak allocated since the reset. CPU: the process's peak RSS (Linux), else None."""
    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def peak_reserved_mb(device: str) -> float | None:
    """CUDA: the caching allocator's peak reserved since the reset (allocated plus cached); None elsewhere."""
    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_reserved(device) / 2**20, 1)
    return None


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def device_problem(name: str) -> str | None:
    """Why `--device NAME` cannot be used here (None: it can): not a device, or CUDA/MPS absent."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        return f"--device {name!r} is not a torch device (e.g. cpu, cuda, cuda:1, mps)"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return f"--device {name}: CUDA is not available (this torch {torch.__version__}, or no GPU)"
        if device.index is not None and device.index >= torch.cuda.device_count():
            return f"--device {name}: only {torch.cuda.device_count()} CUDA device(s)"
    if device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return f"--device {name}: MPS is not available"
    return None


def free_bytes(device: str) -> int | None:
    """What a new allocation may take on `device`: free CUDA memory (the caching allocator's reserve
    counted as free), or the host's available memory; None when it cannot be read."""
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return None
        with contextlib.suppress(Exception):
            dev = torch.device(device)
            free = int(torch.cuda.mem_get_info(dev)[0])
            cached = int(torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev))
            return free + max(0, cached)
        return None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


_WARMED: dict[tuple[str, str, str], float] = {}
"""The seconds each (backend, device, mode)'s one-time costs took in this process (`warm_compiler`)."""


def warm_compiler(device: str, backend: str, mode: str | None = None) -> float:
    """Pay `backend`'s one-time costs in this process (its imports, the C++ compiler's checks) with a one-op
    compile on `device`; the seconds that took. Only the first call for a backend and device compiles: a
    later one (the benchmark's, after the fix phase compiled on the user's backend) returns the same figure,
    what a fresh process of the user's pays once in its first compile. The caller resets Dynamo after."""
    key = (backend, device, mode or "default")
    if key not in _WARMED:
        kw: dict[str, Any] = {"backend": backend, **({"mode": mode} if mode and mode != "default" else {})}
        t0 = time.perf_counter()
        with contextlib.suppress(Exception), torch.no_grad():
            x = torch.ones(4, device=device)
            torch.compile(lambda t: torch.relu(t) + 1, **kw)(x)
            synchronize(device)
        _WARMED[key] = round(time.perf_counter() - t0, 3)
    return _WARMED[key]
