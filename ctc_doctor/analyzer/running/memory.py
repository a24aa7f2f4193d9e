"""The doctor's own memory: giving back what a phase made, letting go of a model the caller handed over,
and reading the resident memory of this process and of its children.

Freed tensors are not always memory given back: CPython and glibc keep freed small blocks for reuse,
and the CUDA caching allocator keeps freed blocks reserved. `release_memory` collects garbage, empties
the CUDA cache and asks glibc to return its free heap (`malloc_trim`), so the next phase, or a child
process, finds the memory free.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
from collections.abc import Iterator
from typing import Any

import torch

from .copying import SPILLED


def release_memory(device: str) -> None:
    """Give back what was freed: garbage collected, the CUDA cache emptied, glibc's free heap returned."""
    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    trim_heap()


def trim_heap() -> None:
    """glibc's `malloc_trim(0)`: free pages at the top of the heap and in its arenas go back to the
    system (a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        name = ctypes.util.find_library("c")
        if name:
            ctypes.CDLL(name).malloc_trim(0)


def free_tensors(*modules: Any, keep: Any = None) -> int:
    """Let go of the modules' parameters and buffers (each replaced by an empty tensor of its dtype and
    device): what a caller that handed its model over no longer needs, while something else still holds
    the module. Those `keep` (a module) holds too stay: a light copy's shared parameters. Returns the bytes
    released. The modules cannot run afterwards."""
    freed = 0
    seen: set[int] = set()
    if isinstance(keep, torch.nn.Module):
        seen.update(id(t) for t in [*keep.parameters(), *keep.buffers()])
    with torch.no_grad():
        for module in modules:
            if not isinstance(module, torch.nn.Module):
                continue
            for t in [*module.parameters(), *module.buffers()]:
                if id(t) in seen:
                    continue
                seen.add(id(t))
                freed += t.numel() * t.element_size()
                t.data = torch.empty(0, dtype=t.dtype, device=t.device)
    return freed


def let_go(model: Any) -> bool:
    """Whether `free_tensors` let go of `model` (every parameter and buffer empty): it cannot run, and a
    phase that needs it builds the workload again."""
    if not isinstance(model, torch.nn.Module) or getattr(model, SPILLED, None) is not None:
        return False  # a model kept in a file (`copying.spilled_copy`) is copied from it
    tensors = [*model.parameters(), *model.buffers()]
    return bool(tensors) and all(t.numel() == 0 for t in tensors)


def rss_bytes(pid: int | None = None) -> int | None:
    """Resident memory of a process (this one by default), from /proc; None where it cannot be read."""
    try:
        with open(f"/proc/{pid or os.getpid()}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int | None = None) -> list[int]:
    """The process ids below `pid` (this process by default), children of children included (Linux)."""
    root = pid or os.getpid()
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def tree_rss_bytes(pid: int | None = None) -> int | None:
    """Resident memory of a process and every process below it (its compile workers, a child that runs
    the benchmark's arms); None where /proc cannot be read."""
    own = rss_bytes(pid)
    if own is None:
        return None
    return own + sum(rss_bytes(p) or 0 for p in descendants(pid))


_OOM_WORDS = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory")


def out_of_memory(exc: BaseException) -> bool:
    """Whether an exception says the memory ran out (CUDA's OutOfMemoryError, the CPU allocator's
    `not enough memory`, Python's MemoryError)."""
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc).lower()
    return any(word in text for word in _OOM_WORDS)


def cap_memory(mb: int, device: str) -> str:
    """Cap this process's memory at `mb` (the arms' child, `--arm-memory-limit`): its heap (RLIMIT_DATA:
    every private writable mapping) on the host, its share of the device on CUDA. Returns what was capped."""
    limit = mb * 2**20
    if device.startswith("cuda") and torch.cuda.is_available():
        _device_share(limit, device)
        return f"{mb} MB of {device}"
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    return f"{mb} MB of heap (RLIMIT_DATA)"


def _device_share(limit: int, device: str) -> None:
    """The CUDA caching allocator of this process may hold `limit` bytes of `device`, and no more."""
    dev = torch.device(device)
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), dev)


def _status_kb(field: str) -> int | None:
    """A `/proc/self/status` figure in kB (Linux), else None."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    return None


@contextlib.contextmanager
def arm_cap(allowed_mb: float, device: str, why: str) -> Iterator[str | None]:
    """For the block, this process may hold `allowed_mb` and no more: past it, an allocation fails as out of
    memory. CUDA: the caching allocator's share of the device; the host (Linux): the heap's soft
    RLIMIT_DATA, set to what the heap maps now plus the room left (`allowed_mb` less what is resident now:
    the heap counts mappings, not resident pages). Yields what was capped, `why` included (None: nothing
    could be), and puts the previous cap back after."""
    allowed = int(allowed_mb * 2**20)
    if device.startswith("cuda") and torch.cuda.is_available():
        _device_share(allowed, device)
        try:
            yield f"{allowed_mb:.0f} MB of {device} ({why})"
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0, torch.device(device))
        return
    data, resident = _status_kb("VmData"), _status_kb("VmRSS")
    if data is None or resident is None:
        yield None
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = data * 1024 + max(0, allowed - resident * 1024)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)  # a cap already set stays the tighter one
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield f"{allowed_mb:.0f} MB resident ({why})"
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
