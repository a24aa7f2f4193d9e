"""Exit codes and the exception tree of ctc-doctor.

Every failure a user can cause before an analysis starts (or on a file it reads) ends as one of
these exceptions, which the CLI turns into a one-line message and the exit code the exception names.
Failures during an analysis are report data, not exceptions: an `ErrorRecord` whose phase the CLI maps
to EAGER_FAILED, COMPILE_FAILED or TIMEOUT once the (partial) report is written. No torch import here.

    CtcDoctorError                      (exit_code = INTERNAL_ERROR unless overridden)
    ├── TargetError                     a TARGET spec cannot be turned into a Workload
    │   ├── TargetNotFound              module/file/attribute missing           -> TARGET_NOT_FOUND
    │   ├── TargetInvalid               not callable, wrong return type          -> TARGET_INVALID
    │   └── BuilderFailed               the user's build() raised               -> BUILDER_FAILED
    ├── ReportError                     a report file is unreadable/corrupt     -> REPORT_INVALID
    ├── ManifestInvalid                 `sweep`: a manifest that cannot be read  -> USAGE
    └── LogsInvalid                     no torch logs in the paths / --strict    -> LOGS_INVALID
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of the `ctc-doctor` command (documented in docs/exit-codes.md)."""

    OK = 0
    """The command did its job. For an analysis: it ran to the end, whatever the verdict."""
    CHECK_FAILED = 1
    """A policy gate (e.g. `check` thresholds) was exceeded."""
    USAGE = 2
    """Bad command-line usage (unknown option, missing argument)."""
    TARGET_NOT_FOUND = 3
    """The TARGET's module, file or attribute does not exist."""
    TARGET_INVALID = 4
    """The TARGET exists but is not a usable builder (not callable, wrong return type, bad spec)."""
    BUILDER_FAILED = 5
    """The user's builder raised an exception."""
    EAGER_FAILED = 6
    """The model fails in plain eager mode on its own inputs: fix eager first."""
    COMPILE_FAILED = 7
    """torch.compile crashed with an internal error; a partial report was still written."""
    TIMEOUT = 8
    """The analysis ran past --timeout; a partial report was still written."""
    REPORT_INVALID = 9
    """A report file is missing, corrupt, or of an unsupported schema version."""
    LOGS_INVALID = 10
    """`logs`: the paths hold no readable torch logs, or (with --strict) some records were unreadable or unknown."""
    SCRIPT_FAILED = 11
    """`run`: the script raised or exited non-zero (a rank did, with several); its report was still written."""
    NOTHING_COMPILED = 12
    """`run`: the script ended without calling torch.compile: there was nothing to diagnose."""
    PATCH_REFUSED = 13
    """`--write`/`--diff`: a file changed since the analysis, is not the user's, or no longer holds the
    edited lines: nothing was written."""
    NO_MEMORY = 14
    """The analysis itself held more beyond the workload's own than --memory-limit allows (the preflight
    check): the run stopped after it with one line; a partial report was still written."""
    NEEDS_WEIGHTS = 15
    """`--weights none`: the model's code needs real values at a line (`.item()`, a data-dependent `if`, an op
    with no meta kernel): the run without the weights stopped there, its findings dropped; the report was
    still written."""
    INTERNAL_ERROR = 70
    """A bug in ctc-doctor itself. Re-run with --debug and report it."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM: the run stopped where it was; the report of what it found was still written."""


class CtcDoctorError(Exception):
    """Base of every error ctc-doctor raises on purpose. A subclass names its exit code in its header,
    `class TargetNotFound(TargetError, exit_code=ExitCode.TARGET_NOT_FOUND)`, or keeps its base's."""

    exit_code: ExitCode = ExitCode.INTERNAL_ERROR

    def __init_subclass__(cls, *, exit_code: ExitCode | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = " ".join(self.message.split())
        return f"{text} ({self.hint})" if self.hint else text


class TargetError(CtcDoctorError, exit_code=ExitCode.TARGET_INVALID):
    """A TARGET spec could not be turned into a Workload."""


class TargetNotFound(TargetError, exit_code=ExitCode.TARGET_NOT_FOUND):
    """The module, file or attribute a TARGET names does not exist."""


class TargetInvalid(TargetError, exit_code=ExitCode.TARGET_INVALID):
    """The TARGET is not a zero-argument builder returning a supported shape."""


class BuilderFailed(TargetError, exit_code=ExitCode.BUILDER_FAILED):
    """The user's builder raised; the message names the innermost frame in the user's file."""


class ReportError(CtcDoctorError, exit_code=ExitCode.REPORT_INVALID):
    """A report file cannot be read: missing, not JSON, wrong shape or unsupported version."""


class ManifestInvalid(CtcDoctorError, exit_code=ExitCode.USAGE):
    """`ctc-doctor sweep`: the manifest is missing, empty or has a line that is not a target."""


class LogsInvalid(CtcDoctorError, exit_code=ExitCode.LOGS_INVALID):
    """`ctc-doctor logs`: nothing readable as torch logs, or unreadable records under --strict."""
