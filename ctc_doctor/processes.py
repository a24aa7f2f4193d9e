"""Child process groups: signalling a child started in a session of its own; the heap of a one-shot
process frozen before it compiles (a leaf module).

`ctc-doctor run` starts the user's script, and `ctc-doctor sweep` each target, with
`start_new_session=True`, so that one signal to the group reaches everything the child started
(torchrun's ranks, dataloader workers). Both stop them through `signal_group`. No torch import here:
the sweep's parent imports it.
"""

from __future__ import annotations

import atexit
import gc
import os
import subprocess
import sys


def signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    """Send `sig` to the process group `process` leads; a group already gone (or not ours) is no error."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
