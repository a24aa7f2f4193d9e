"""Redaction: make a report safe to attach to a public ticket (no torch import).

Absolute paths become relative to the project root, site-packages paths become
`<site-packages>/...`, the home directory becomes `~`, and the user and host names disappear.
Source lines of the model stay: they are the point of the report (the README says so).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from typing import Any

from .models import Report

_SITE = re.compile(r"(?:[A-Za-z]:)?[^\s'\"()<>,]*?[\\/](?:site|dist)-packages[\\/]")
# Account names that identify nobody; replacing them would mangle words like "root" in messages.
_GENERIC_USERS = {"root", "user", "runner", "admin", "ubuntu", "ci", "jenkins", "builder", "nobody"}


def _identity() -> tuple[str, str, str]:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (containers): nothing to redact
        user = ""
    return os.path.expanduser("~"), user, socket.gethostname()


class Redactor:
    """Rewrites strings; built once per report."""

    def __init__(self, project_root: str | None = None, home: str | None = None, user: str | None = None, host: str | None = None) -> None:
        real_home, real_user, real_host = _identity()
        self.root = os.path.abspath(project_root or os.getcwd()).rstrip(os.sep)
        self.home = (home if home is not None else real_home).rstrip(os.sep)
        user = real_user if user is None else user
        host = real_host if host is None else host
        self.user = re.compile(rf"(?<![\w-]){re.escape(user)}(?![\w-])") if user and user not in _GENERIC_USERS and len(user) >= 2 else None
        names = {host, host.split(".")[0]} if host and len(host) >= 3 else set()
        self.hosts = [re.compile(rf"(?<![\w-]){re.escape(h)}(?![\w-])") for h in sorted(names, key=len, reverse=True) if len(h) >= 3]

    def __call__(self, text: str) -> str:
        text = _SITE.sub("<site-packages>/", text)
        if self.root and self.root != os.sep:
            text = text.replace(self.root + os.sep, "").replace(self.root, ".")
        if self.home and self.home != os.sep:
            text = text.replace(self.home + os.sep, "~/").replace(self.home, "~")
        if self.user is not None:
            text = self.user.sub("<user>", text)
        for host in self.hosts:
            text = host.sub("<host>", text)
        return text


def _walk(value: Any, scrub: Redactor) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_walk(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, scrub) for k, v in value.items()}
    return value


def redact(report: Report, *, project_root: str | None = None, home: str | None = None, user: str | None = None, host: str | None = None) -> Report:
    """A redacted copy of the report (`redacted` set); the original is not changed."""
    scrub = Redactor(project_root, home, user, host)
    data = _walk(report.model_dump(mode="json"), scrub)
    data["redacted"] = True
    return Report.model_validate(data)
