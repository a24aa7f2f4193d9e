"""Results kept for later comparison: eager's outputs and the reference's differences from them, which
every compiled arm and fix check is judged against.

Small results stay in memory as they are. Past `IN_MEMORY_BYTES` in all, they go to a temporary file,
written chunk by chunk and read back chunk by chunk by the judgement: a GPT-2's logits over a few calls
are gigabytes, more than the workload itself ever holds at once (it drops each call's output), and an
accelerator's memory is for the model. The file lives in the page cache, which the kernel may evict;
no process holds it as its own memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

import torch

IN_MEMORY_BYTES = 64 * 2**20
"""Results kept in memory up to this many bytes in all; the rest go to the store's file."""


@dataclass
class Kept:
    """One kept tensor, flattened (complex ones as their real view): read it whole or by chunks."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    """Its own dtype (complex for a complex tensor; `flat_dtype` is what is stored)."""
    flat_dtype: torch.dtype
    numel: int
    """Elements stored (twice a complex tensor's)."""
    tensor: torch.Tensor | None = None
    """In memory: the flattened tensor."""
    store: TensorStore | None = None
    offset: int = 0
    """In the store's file: where its bytes start."""

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point or self.dtype.is_complex

    @property
    def nbytes(self) -> int:
        return self.numel * self.flat_dtype.itemsize

    def chunk(self, start: int, count: int, device: torch.device | str) -> torch.Tensor:
        """Elements [start, start + count) of the flattened tensor, on `device`."""
        if self.tensor is not None:
            return self.tensor[start : start + count].to(device)
        assert self.store is not None
        count = max(0, min(count, self.numel - start))
        size = self.flat_dtype.itemsize
        return self.store.read(self.offset + start * size, count, self.flat_dtype).to(device)

    def whole(self, device: torch.device | str) -> torch.Tensor:
        """The tensor in its own shape and dtype."""
        flat = self.chunk(0, self.numel, device)
        if self.dtype.is_complex:
            return torch.view_as_complex(flat.reshape(*self.shape, 2))
        return flat.reshape(self.shape)


def disk_free(directory: str | None = None) -> int | None:
    """Bytes free where a store's temporary file goes; None when it cannot be read."""
    try:
        return shutil.disk_usage(directory or tempfile.gettempdir()).free
    except OSError:
        return None


def flat(t: torch.Tensor) -> torch.Tensor:
    """The tensor flattened, complex ones as their real view (what is stored and compared)."""
    t = t.detach()
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)


class TensorStore:
    """Where kept results live: memory up to `IN_MEMORY_BYTES`, then a temporary file. `close()` removes it."""

    def __init__(self, limit: int = IN_MEMORY_BYTES, directory: str | None = None) -> None:
        self.limit = limit
        self.directory = directory
        self.in_memory = 0
        self.on_disk = 0
        self._file: int | None = None
        self._path: str | None = None

    def _fd(self) -> int:
        if self._file is None:
            handle, self._path = tempfile.mkstemp(prefix="ctc-doctor-results-", dir=self.directory)
            self._file = handle
            os.unlink(self._path)  # gone with the descriptor, whatever happens to this process
        return self._file

    def room_on_disk(self, nbytes: int) -> bool:
        """Whether the temporary directory has room for `nbytes` (and as much again to spare)."""
        free = disk_free(self.directory)
        return free is not None and free > 2 * nbytes

    def keep(self, t: torch.Tensor, *, copy: bool = True) -> Kept:
        """Keep `t` (a copy when it stays in memory and `copy`; `t` itself may be freed after)."""
        f = flat(t)
        kept = Kept(tuple(t.shape), t.dtype, f.dtype, f.numel())
        if self.in_memory + kept.nbytes <= self.limit or not self.room_on_disk(kept.nbytes):
            kept.tensor = f.clone() if copy else f
            self.in_memory += kept.nbytes
            return kept
        kept.store, kept.offset = self, self.on_disk
        step = 1 << 22
        for s in range(0, f.numel(), step):
            self._write(f[s : s + step])
        return kept

    def writer(self, shape: tuple[int, ...], dtype: torch.dtype, numel: int, device: torch.device | str) -> tuple[Kept, _Writer]:
        """A flat tensor written chunk by chunk (the reference's differences, made as its run goes); in
        memory it lives on `device`."""
        kept = Kept(shape, dtype, dtype, numel)
        if self.in_memory + kept.nbytes <= self.limit or not self.room_on_disk(kept.nbytes):
            kept.tensor = torch.empty(numel, dtype=dtype, device=device)
            self.in_memory += kept.nbytes
        else:  # its place in the file is reserved: several writers may fill theirs at once, in any order
            kept.store, kept.offset = self, self.on_disk
            self.on_disk += kept.nbytes
        return kept, _Writer(self, kept)

    def rewrite(self, kept: Kept, t: torch.Tensor) -> None:
        """`t` (flattened, as many elements) over what `kept` holds (a value the run changes as it goes),
        a chunk at a time (what a write copies on the way stays a chunk's)."""
        f, writer, step = flat(t), _Writer(self, kept), 1 << 22
        for s in range(0, f.numel(), step):
            writer.write_at(s, f[s : s + step])

    def _write(self, chunk: torch.Tensor) -> None:
        self._write_at(self.on_disk, chunk)
        self.on_disk += chunk.numel() * chunk.element_size()

    def _write_at(self, offset: int, chunk: torch.Tensor) -> None:
        # a copy first: a tensor's own storage seen by numpy can never be resized again (a stand-in's is)
        data = chunk.detach().to("cpu", copy=True).contiguous().view(torch.uint8).numpy().tobytes()
        fd = self._fd()
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], offset + written)

    def read(self, offset: int, count: int, dtype: torch.dtype) -> torch.Tensor:
        size = count * dtype.itemsize
        buffer = bytearray(size)
        view = memoryview(buffer)
        done = 0
        while done < size:
            got = os.preadv(self._fd(), [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"the kept results' file ended early ({done} of {size} bytes)")
            done += got
        if not size:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(buffer, dtype=dtype)

    def spill(self, kept: Kept) -> None:
        """Move an in-memory kept tensor into the file (to share the store with a child process)."""
        if kept.tensor is None:
            return
        f, kept.tensor = kept.tensor, None
        kept.store, kept.offset = self, self.on_disk
        self.in_memory -= kept.nbytes
        step = 1 << 22
        for s in range(0, f.numel(), step):
            self._write(f[s : s + step])

    def fileno(self) -> int:
        """The file's descriptor (a child process inherits it to read the same results)."""
        return self._fd()

    @classmethod
    def attached(cls, fd: int) -> TensorStore:
        """A store over an inherited descriptor (the parent's results, read only)."""
        store = cls(limit=0)
        store._file = fd
        store.on_disk = os.fstat(fd).st_size
        return store

    def close(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._file = None


def describe(kept: Kept) -> dict[str, object]:
    """A file-backed kept tensor as JSON (`kept_from` reads it back)."""
    assert kept.tensor is None, "spill it first"
    return {
        "shape": list(kept.shape),
        "dtype": str(kept.dtype).removeprefix("torch."),
        "flat_dtype": str(kept.flat_dtype).removeprefix("torch."),
        "numel": kept.numel,
        "offset": kept.offset,
    }


def kept_from(data: dict[str, object], store: TensorStore) -> Kept:
    """The kept tensor `describe` wrote, read from `store`."""
    shape = tuple(int(x) for x in data["shape"])  # type: ignore[attr-defined]
    dtype = getattr(torch, str(data["dtype"]))
    flat_dtype = getattr(torch, str(data["flat_dtype"]))
    return Kept(shape, dtype, flat_dtype, int(data["numel"]), store=store, offset=int(data["offset"]))  # type: ignore[call-overload]


class _Writer:
    """Fills one kept tensor chunk by chunk: in order (`write`), or each chunk at its place (`write_at`: the
    slices of a batch, each at its rows)."""

    def __init__(self, store: TensorStore, kept: Kept) -> None:
        self.store, self.kept, self.done = store, kept, 0

    def write(self, chunk: torch.Tensor) -> None:
        self.write_at(self.done, chunk)
        self.done += chunk.numel()

    def write_at(self, start: int, chunk: torch.Tensor) -> None:
        """`chunk` as the flat tensor's elements from `start` on."""
        if self.kept.tensor is not None:
            self.kept.tensor[start : start + chunk.numel()] = chunk
        else:
            self.store._write_at(self.kept.offset + start * self.kept.flat_dtype.itemsize, chunk)
