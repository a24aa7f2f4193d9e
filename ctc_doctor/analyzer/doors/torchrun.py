"""`python -m ctc_doctor.analyzer.doors.torchrun ARGS`: torch.distributed.run as it is, quiet when stopped.

`ctc-doctor run --nproc N` launches the ranks through the real launcher. When `--timeout` or Ctrl-C
stops the run, the launcher gets the signal with its workers and ends with a SignalException
traceback that says nothing the summary does not; here it ends with the signal's exit code instead.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as exc:
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
