"""Child process groups: signalling a child started in a session of its own; the heap of a one-shot
process frozen before it compiles; how a dead process is described (its signal, its last lines of
stderr); the names and files a supervised run's command and its stage share (a leaf module).

`ctc-doctor run` starts the user's script, and `ctc-doctor sweep` each target, with
`start_new_session=True`, so that one signal to the group reaches everything the child started
(torchrun's ranks, dataloader workers). Both stop them through `signal_group`. No torch import here:
the sweep's parent imports it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any


def signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    """Send `sig` to the process group `process` leads; a group already gone (or not ours) is no error."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


STDERR_TAIL_LINES = 8
"""Lines of a dead process's stderr kept in the report."""


def stderr_tail(text: str) -> list[str]:
    """The last non-empty lines (at most STDERR_TAIL_LINES) of what a dead process wrote to stderr."""
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-STDERR_TAIL_LINES:]


def signal_name(number: int) -> str:
    """`SIGSEGV`, or `signal N` for a number Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def freeze_heap() -> None:
    """Every object alive now (torch, ctc-doctor's modules, a built model) out of the cyclic collector's
    reach for the rest of this one-shot process: the full collections that Dynamo's allocations set off
    then walk only what comes after. Called once the imports are done and before the first compile, by
    the analysis (after the model is built) and by `run`'s script runner (before the script starts).
    Without it the heap of ctc-doctor's own imports made each full collection during compile slower:
    a zoo fixture's compile took 0.13-0.2 s (about 40 %) longer than in a plain process; with it the
    whole analysis process is as fast as one plain compile run of the same model, or faster
    (benchmarks/analysis_overhead.py). Objects frozen are never collected: garbage made before the
    call is kept, which a process that ends after one analysis can afford. At exit, with triton loaded,
    the heap is unfrozen so that the interpreter's last collection reaches it: triton's nanobind objects
    in frozen cycles were otherwise alive as its module was torn down, and torch 2.15 (which imports
    triton with Dynamo) printed "nanobind: leaked 4 instances! ... triton._C.libtriton.ir.attribute" and
    500 lines more at the end of every run. That last collection costs about 0.25 s after the showcase's
    analysis; without triton there is nothing to unfreeze for."""
    gc.freeze()
    atexit.unregister(_unfreeze_for_triton)  # once, however often the heap is frozen
    atexit.register(_unfreeze_for_triton)


def _unfreeze_for_triton() -> None:
    if "triton" in sys.modules:
        gc.unfreeze()


# a supervised run (`cli.supervise`, the command's side; `analyzer.phases.bench.staged`, the stage's)
STAGE = "CTC_DOCTOR_STAGE"
"""The checkpoint folder of a supervised run, set in the stage's environment."""
RESUME = "CTC_DOCTOR_RESUME"
"""Set (to 1) when the stage goes on after a crash from the checkpoint in `STAGE`."""
STARTED = "CTC_DOCTOR_STARTED"
"""The command's start (`time.time()`): each stage's --timeout, --budget and cost account count from it."""
RUN_FILE = "run.json"
"""The stage's report before the benchmark and its cost account's phases."""
ARMS_FILE = "arms.json"
"""The stage's checkpoint: the arm it runs (`running`), the arms measured so far."""
ARM_LOG = "arm.log"
"""The stderr of the arm running (Python and C level), whose tail a crash row keeps."""
CRASH_FILE = "crash.json"
"""What the command knows of a stage's death during an arm (the stage that goes on reads it)."""


def write_json(path: str, data: Any) -> None:
    """`data` as JSON in `path`, whole or not at all (a death mid-write leaves the previous file)."""
    part = path + ".part"
    with open(part, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(part, path)


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


SPILL_PREFIX = "ctc-doctor-pristine-"
"""The files a model copy is kept in (`analyzer.running.copying.spilled_copy`): `PREFIX{run}-*.pt`."""


def spill_dirs() -> list[str]:
    """Where a model copy may be kept on disk, in order: the temporary directory, then /var/tmp; a folder
    in memory (tmpfs, ramfs) is no disk and is skipped."""
    memory = set()
    with contextlib.suppress(OSError):
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split()[1:3] for line in fh if len(line.split()) > 2]
        memory = {point for point, kind in mounts if kind in ("tmpfs", "ramfs")}
    out = []
    for folder in (tempfile.gettempdir(), "/var/tmp"):
        if not os.path.isdir(folder) or folder in out:
            continue
        real = os.path.realpath(folder)
        mount = max((m for m in [*memory, "/"] if real == m or real.startswith(m.rstrip("/") + "/")), key=len)
        if mount not in memory:
            out.append(folder)
    return out


def remove_spilled(run: str) -> None:
    """Remove what a run kept on disk under `run` (its stage folder's name), whatever ended it."""
    for folder in spill_dirs():
        for path in glob.glob(os.path.join(folder, f"{SPILL_PREFIX}{glob.escape(run)}-*.pt")):
            with contextlib.suppress(OSError):
                os.unlink(path)
