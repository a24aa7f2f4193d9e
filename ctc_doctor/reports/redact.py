"""Redaction: make a report safe to attach to a public ticket (no torch import).

Absolute paths become relative to the project root, site-packages paths become
`<site-packages>/...`, the standard library `<stdlib>/...`, the home directory `~`, and any other
absolute path `<abs>/last/two` (a model under `/data/models/...` says `<abs>/models/m.py`); the user
and host names disappear. Diff headers keep `a/path`. Source lines of the model stay: they are the
point of the report (docs/report.md says so).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import sysconfig
from typing import Any

from .models import Report

_SITE = re.compile(r"(?:[A-Za-z]:)?[^\s'\"()<>,]*?[\\/](?:site|dist)-packages[\\/]")
# Account names that identify nobody; replacing them would mangle words like "root" in messages.
# an absolute path not inside a URL (`https://`), a relative path (`a/b`, `./x`), a marker (`<abs>/`,
# `~/`) or a compile id (`0/1`); it ends at whitespace, quotes, brackets, commas and the `:line` part
_ABS = re.compile(r"(?<![\w.~>/:<-])/(?=[\w.-])[^\s'\"()<>,;:]*")
_DIFF_HEAD = re.compile(r"(?m)^(---|\+\+\+) ([ab])/(/[^\s]+)")
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
        paths = sysconfig.get_paths()
        self.stdlib = sorted({p.rstrip(os.sep) for p in (paths.get("stdlib"), paths.get("platstdlib")) if p}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        # `--- a//abs/file.py` (a diff of an absolute path): the path alone, then `a/` again
        text = _DIFF_HEAD.sub(lambda m: f"{m.group(1)} {m.group(2)}/{self._paths(m.group(3)).lstrip('./') or '.'}", text)
        return self._names(self._paths(text))

    def _paths(self, text: str) -> str:
        text = _SITE.sub("<site-packages>/", text)
        for stdlib in self.stdlib:
            text = text.replace(stdlib + os.sep, "<stdlib>/")
        if self.root and self.root != os.sep:
            text = text.replace(self.root + os.sep, "").replace(self.root, ".")
        if self.home and self.home != os.sep:
            text = text.replace(self.home + os.sep, "~/").replace(self.home, "~")
        return _ABS.sub(_last_two, text)

    def _names(self, text: str) -> str:
        if self.user is not None:
            text = self.user.sub("<user>", text)
        for host in self.hosts:
            text = host.sub("<host>", text)
        return text


def _last_two(m: re.Match[str]) -> str:
    parts = [p for p in m.group(0).split("/") if p]
    return "<abs>/" + "/".join(parts[-2:]) if parts else m.group(0)


def _walk(value: Any, scrub: Redactor) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_walk(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, scrub) for k, v in value.items()}
    return value


def redact(
    report: Report, *, project_root: str | None = None, home: str | None = None, user: str | None = None, host: str | None = None
) -> Report:
    """A redacted copy of the report (`redacted` set); the original is not changed."""
    scrub = Redactor(project_root, home, user, host)
    data = _walk(report.model_dump(mode="json"), scrub)
    data["redacted"] = True
    return Report.model_validate(data)
