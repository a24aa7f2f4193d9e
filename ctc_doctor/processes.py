"""Child process groups: signalling a child started in a session of its own (a leaf module).

`ctc-doctor run` starts the user's script, and `ctc-doctor sweep` each target, with
`start_new_session=True`, so that one signal to the group reaches everything the child started
(torchrun's ranks, dataloader workers). Both stop them through `signal_group`. No torch import here:
the sweep's parent imports it.
"""

from __future__ import annotations

import os
import subprocess


def signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    """Send `sig` to the process group `process` leads; a group already gone (or not ours) is no error."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
