"""The device a run measures on: synchronisation and peak memory (CUDA allocator, or the process's
peak RSS on Linux CPUs)."""

from __future__ import annotations

import contextlib

import torch


def reset_peak_memory(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return
    with contextlib.suppress(OSError):  # Linux: "5" resets the process's peak RSS (VmHWM)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")


def peak_memory_mb(device: str) -> float | None:
    """CUDA: peak allocated since the reset. CPU: the process's peak RSS (Linux), else None."""
    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
