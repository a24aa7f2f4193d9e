"""Is the machine busy? pyperf's rule, and then some: a timing taken while other processes compete for
the cores (or the GPU) is not a figure to decide by.

Per timed window, the CPU the whole machine spent (`/proc/stat`) less what this process spent is what
other processes took, in cores. On CPU, torch's OpenMP threads spin-wait: with others on the cores a
small kernel slows down a hundredfold, and bimodally (2.5 ms alone, 14.5 ms +- 16.5 ms under load). The
window is busy when others used a quarter of a core or more and there were not enough cores left for
torch's threads. On a GPU, other processes holding the device are named.
"""

from __future__ import annotations

import contextlib
import os

import torch

from ...reports import models as rm
from .cpu import BUSY_CORES, CpuWindow, busy, cores, wait_for_quiet

__all__ = ["BUSY_CORES", "CpuWindow", "busy", "conclude", "cores", "gpu_processes", "machine_at_start", "wait_for_quiet"]


def gpu_processes(device: str) -> list[str]:
    """Other processes holding the GPU (`pid name memory`), through NVML where torch can reach it."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return []
    try:
        text = torch.cuda.list_gpu_processes(torch.device(device))
    except Exception:  # noqa: BLE001 - pynvml missing or NVML unavailable: nothing to say
        return []
    own = {os.getpid(), os.getppid()}
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "process" and parts[1].isdigit() and int(parts[1]) not in own:
            out.append(" ".join(parts[1:]))
    return out


def machine_at_start(device: str) -> rm.MachineLoad:
    """The machine as the benchmark starts: cores, torch's threads, the load average, other GPU processes."""
    load: float | None = None
    with contextlib.suppress(OSError, AttributeError):
        load = round(os.getloadavg()[0], 2)
    return rm.MachineLoad(cores=cores(), threads=torch.get_num_threads(), load_average=load, gpu_processes=gpu_processes(device))


def conclude(machine: rm.MachineLoad, arms: list[rm.BenchmarkArm]) -> None:
    """The benchmark's load record from its arms' windows: the busiest, and one line when it was busy."""
    seen = [a.busy for a in arms if a.busy is not None]
    machine.other_cpu = max(seen) if seen else None
    busy_arms = [a.name for a in arms if busy(a.busy, machine.threads)]
    machine.busy = bool(busy_arms or machine.gpu_processes)
    parts = []
    if busy_arms:
        parts.append(
            f"other processes used up to {machine.other_cpu:.1f} of {machine.cores} cores while {', '.join(busy_arms)} "
            f"{'was' if len(busy_arms) == 1 else 'were'} timed (torch computes with {machine.threads} threads)"
        )
    if machine.gpu_processes:
        parts.append(f"other processes hold the GPU ({'; '.join(machine.gpu_processes[:3])})")
    machine.note = f"busy machine: {'; '.join(parts)}: these timings may be off" if parts else None
