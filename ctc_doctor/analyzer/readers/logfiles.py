"""Streaming readers for what torch.compile leaves on disk: TORCH_TRACE files and TORCH_LOGS text.

Torch-free and lenient. Files are read line by line (gzip too), so memory stays bounded whatever the
size: only the records a report needs are kept, their payloads capped, everything else is counted.
What cannot be read is counted by cause in `ParseCounter` (the report's `parse_stats`), never raised.

Formats (as torch 2.13 writes them):
- TORCH_TRACE: `dedicated_log_torch_trace_[rank_N_]XXXX.log`, one record per line:
  `V1122 04:35:02.411000 29071 torch/_dynamo/x.py:5098] {"<event>": {...}, "frame_id": 0, ...}`,
  the payload (if `has_payload`, its md5) on the following lines, each prefixed with a tab.
- TORCH_LOGS: every line of a message carries the same glog prefix
  `[rank1]:V1122 04:36:57.604000 29308 torch/_dynamo/x.py:5124] [0/0] [__graph_breaks] text`;
  with TORCH_LOGS_FORMAT="%(message)s" there is no prefix, with "short" it is `DEBUG:<logger>:`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from ...errors import LogsInvalid
from ...reports import models as rm
from ...reports.compile_id import CompileId
from .compile_time import METRIC_KEYS as COST_KEYS

TRACE_PREFIX = "dedicated_log_torch_trace_"
MAX_PAYLOAD_CHARS = 2_000_000
"""A kept payload longer than this is cut (and counted); the record itself still counts."""
MAX_EXAMPLES = 10

# Envelope keys torch puts beside the event name (torch/_logging/_internal.py `reserved_names`).
_ENVELOPE = frozenset(
    {
        "rank",
        "compiled_autograd_id",
        "frame_id",
        "frame_compile_id",
        "attempt",
        "severity",
        "timestamp",
        "pathname",
        "thread",
        "subgraph_name",
        "has_payload",
        "stack",
    }
)
# Every event name torch 2.13 writes (found by scanning its trace_structured calls), plus names
# tlparse knows from other versions. Others are counted as unknown (`--strict` fails on them).
KNOWN_EVENTS = frozenset(
    {
        "aot_autograd_backward_compilation_metrics",
        "aot_backward_graph",
        "aot_forward_graph",
        "aot_inference_graph",
        "aot_joint_graph",
        "artifact",
        "bwd_compilation_metrics",
        "cache_hit",
        "cache_miss",
        "chromium_event",
        "compilation_metrics",
        "compiled_autograd_graph",
        "create_symbol",
        "create_unbacked_symbol",
        "describe_source",
        "describe_storage",
        "describe_tensor",
        "dump_file",
        "dynamo_cpp_guards_str",
        "dynamo_error",
        "dynamo_guards",
        "dynamo_output_graph",
        "dynamo_start",
        "exported_program",
        "expression_created",
        "graph_dump",
        "guard_added",
        "guard_added_fast",
        "guard_on_data_dependent_error",
        "inductor_input_graph",
        "inductor_output_code",
        "inductor_post_grad_graph",
        "inductor_pre_grad_graph",
        "link",
        "mismatched_fake_kernel",
        "missing_fake_kernel",
        "optimize_ddp_split_child",
        "optimize_ddp_split_graph",
        "propagate_real_tensors",
        "propagate_real_tensors_provenance",
        "str",
        "symbolic_shape_specialization",
    }
)
# What a report uses. The rest is counted and skipped without parsing its JSON or keeping its payload.
USED_EVENTS = frozenset(
    {"compilation_metrics", "bwd_compilation_metrics", "dynamo_cpp_guards_str", "dynamo_output_graph", "optimize_ddp_split_child"}
)
_NO_PAYLOAD = ("dynamo_output_graph", "optimize_ddp_split_child")
"""Used without their payload (a graph's code): that they happened is what counts."""
USED_ARTIFACTS = frozenset({"dynamo_graph_break_reason", "recompile_reasons", "torch_version"})
# compilation_metrics has ~100 keys, some of them big JSON strings (configs): keep these only.
METRIC_KEYS = frozenset(
    {
        "co_name",
        "co_filename",
        "co_firstlineno",
        "cache_size",
        "guard_count",
        "shape_env_guard_count",
        "graph_op_count",
        "graph_node_count",
        "graph_input_count",
        "entire_frame_compile_time_s",
        "backend_compile_time_s",
        "inductor_compile_time_s",
        "fail_type",
        "fail_reason",
        "fail_user_frame_filename",
        "fail_user_frame_lineno",
        "restart_reasons",
        "recompile_reason",
        "pytorch_version",
        "python_version",
        "cuda_version",
    }
)

_GLOG = re.compile(
    r"^(?:\[rank(?P<rank>\d+)\]:)?(?P<level>[VIWEC])\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<pid>\d+) (?P<path>[^\]\s]+):(?P<lineno>\d+)\]"
)
_TEXT_TAIL = re.compile(r"^(?: \[(?P<trace>[!\d][^\]]*)\])?(?: \[__(?P<artifact>\w+)\])? ?")
_BASIC = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>torch[\w.]*):(?P<text>.*)$")
_RANK_FILE = re.compile(r"rank_(\d+)_")
_ARTIFACT_NAME = re.compile(r'\{"artifact": \{"name": "([^"]*)"')
_MESSAGE_START = re.compile(r"^(?:Graph break(?: \(.*?\))? in user code at |Recompiling function )")

Kind = Literal["torch_trace", "torch_logs"]


class ParseCounter:
    """Accumulates the parse statistics of one ingest (the report's `parse_stats`)."""

    def __init__(self) -> None:
        self.lines = 0
        self.records = 0
        self.used = 0
        self.ignored = 0
        self.unknown: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.examples: list[str] = []
        self.foreign_lines = 0
        self.payloads_truncated = 0
        self.truncated_files: list[str] = []

    def problem(self, path: str, line: int, cause: str) -> None:
        self.problems[cause] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{path}:{line}: {cause}")

    def unknown_kind(self, path: str, line: int, kind: str) -> None:
        self.unknown[kind] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{path}:{line}: unknown record kind {kind!r}")

    @property
    def errors(self) -> int:
        """Unreadable plus unknown records: what `--strict` refuses."""
        return sum(self.problems.values()) + sum(self.unknown.values())

    def stats(self) -> rm.ParseStats:
        return rm.ParseStats(
            lines=self.lines,
            records=self.records,
            used=self.used,
            ignored=self.ignored,
            unknown=sum(self.unknown.values()),
            unknown_kinds=dict(self.unknown.most_common()),
            unreadable=sum(self.problems.values()),
            problems=dict(self.problems.most_common()),
            examples=list(self.examples),
            foreign_lines=self.foreign_lines,
            payloads_truncated=self.payloads_truncated,
            truncated_files=list(self.truncated_files),
        )


# ---------------------------------------------------------------------------------------------
# files and detection
# ---------------------------------------------------------------------------------------------


def open_text(path: str) -> IO[str]:
    """Text (or gzip-compressed text) for line-by-line reading; undecodable bytes are replaced."""
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    raw: IO[bytes] = gzip.open(path, "rb") if gzipped else open(path, "rb")  # type: ignore[assignment]  # noqa: SIM115 - wrapped and returned
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")


def _numbered_lines(path: str, counter: ParseCounter) -> Iterator[tuple[int, str]]:
    """(line number, line) of a file; a damaged gzip stream ends the file with a counted problem."""
    lineno = 0
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line
    except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        counter.problem(path, lineno + 1, f"compressed file cut off or damaged ({type(exc).__name__})")
        counter.truncated_files.append(path)


def sniff(path: str, lines: int = 2000) -> Kind | None:
    """torch_trace when a trace record appears in the first lines, torch_logs when a torch log line does."""
    text_hint = False
    try:
        with open_text(path) as fh:
            for _, line in zip(range(lines), fh, strict=False):
                m = _GLOG.match(line)
                if m and line[m.end() :].startswith(" {"):
                    return "torch_trace"
                if m or _BASIC.match(line) or _MESSAGE_START.match(line):
                    text_hint = True
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise LogsInvalid(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    return "torch_logs" if text_hint else None


def trace_files_in(directory: str) -> list[str]:
    """The TORCH_TRACE files of a directory (every rank), in rank then name order."""
    names = [n for n in os.listdir(directory) if n.startswith(TRACE_PREFIX) and (n.endswith(".log") or n.endswith(".log.gz"))]

    def key(name: str) -> tuple[int, str]:
        rank = rank_of_file(name)
        return (-1 if rank is None else rank, name)

    return [os.path.join(directory, n) for n in sorted(names, key=key)]


@dataclass
class Inputs:
    """What the given paths turned out to be."""

    trace_files: list[str] = field(default_factory=list)
    text_files: list[str] = field(default_factory=list)


def classify_paths(paths: list[str]) -> Inputs:
    """Sort the paths into trace files and text logs; a directory contributes its trace files."""
    found = Inputs()
    for path in paths:
        if os.path.isdir(path):
            files = trace_files_in(path)
            if not files:
                raise LogsInvalid(f"{path}: no TORCH_TRACE files ({TRACE_PREFIX}*.log) in this directory")
            found.trace_files.extend(files)
        elif os.path.isfile(path):
            kind = sniff(path)
            if kind == "torch_trace":
                found.trace_files.append(path)
            elif kind == "torch_logs":
                found.text_files.append(path)
            else:
                raise LogsInvalid(f"{path}: neither a TORCH_TRACE file nor TORCH_LOGS output (no torch log line in its first 2000 lines)")
        else:
            raise LogsInvalid(f"{path}: no such file or directory")
    return found


def rank_of_file(path: str) -> int | None:
    m = _RANK_FILE.search(os.path.basename(path))
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------
# TORCH_TRACE
# ---------------------------------------------------------------------------------------------


@dataclass
class TraceRecord:
    """One kept structured-trace record."""

    kind: str
    """The event name; artifacts are `artifact:<name>`."""
    compile_id: str | None
    rank: int | None
    data: dict[str, Any]
    payload: str | None
    file: str
    line: int


def compile_id_of(md: dict[str, Any]) -> str | None:
    """`frame/attempt` as torch prints it; compiled-autograd ids as `!ca/frame/attempt`."""
    cid = CompileId.from_metadata(md)
    return str(cid) if cid is not None else None


def _event_name(text: str) -> str | None:
    """The first key of a record's JSON without parsing it (torch writes the event name first)."""
    if not text.startswith('{"'):
        return None
    end = text.find('"', 2)
    return text[2:end] if end > 2 else None


class _Pending:
    """A kept record waiting for its payload lines."""

    __slots__ = ("record", "parts", "size", "count_only", "lines", "cut", "md5")

    def __init__(self, record: TraceRecord, md5: str | None, count_only: bool) -> None:
        # count_only (guard trees without --guards): `size` counts the non-blank lines, nothing is kept
        self.record = record
        self.parts: list[str] = []
        self.size = 0
        self.count_only = count_only
        self.lines = 0
        self.cut = False
        self.md5 = md5

    def add(self, text: str) -> None:
        self.lines += 1
        if self.count_only:
            if text.strip():
                self.size += 1
            return
        if self.size + len(text) > MAX_PAYLOAD_CHARS:
            self.cut = True
            return
        self.parts.append(text)
        self.size += len(text) + 1


def read_trace(path: str, counter: ParseCounter, *, keep_guard_text: bool = False) -> Iterator[TraceRecord]:
    """The records of one TORCH_TRACE file a report uses, in file order, payloads attached.

    The caller counts `used`; this counts everything else (ignored, unknown, unreadable, foreign)."""
    file_rank = rank_of_file(path)
    pending: _Pending | None = None
    skipping = False  # inside the payload of a record we do not keep
    orphan = False
    last = ""
    lineno = 0

    def finish(p: _Pending, cut_off: bool) -> TraceRecord | None:
        rec = p.record
        if p.count_only:
            rec.payload = str(p.size)
        else:
            rec.payload = "\n".join(p.parts)
            if p.cut:
                counter.payloads_truncated += 1
            elif p.md5 and hashlib.md5(rec.payload.encode("utf-8"), usedforsecurity=False).hexdigest() != p.md5:
                counter.problem(path, rec.line, "file cut off mid-record" if cut_off else "payload checksum mismatch")
                return None
        if p.md5 and p.lines == 0:
            counter.problem(path, rec.line, "file cut off mid-record" if cut_off else "payload missing")
            return None
        return rec

    for lineno, line in _numbered_lines(path, counter):
        last = line
        counter.lines += 1
        if line.startswith("\t"):
            if pending is not None:
                pending.add(line[1:].rstrip("\n"))
            elif not skipping and not orphan:
                counter.problem(path, lineno, "payload without a record")
                orphan = True
            continue
        if pending is not None:
            done = finish(pending, False)
            pending = None
            if done is not None:
                yield done
        skipping = orphan = False
        m = _GLOG.match(line)
        body = line[m.end() :].strip() if m else ""
        if not m or not body.startswith("{"):
            if line.strip():
                counter.foreign_lines += 1
            continue
        counter.records += 1
        name = _event_name(body)
        if not body.endswith("}") or name is None:
            cut = not line.endswith("\n")
            counter.problem(path, lineno, "file cut off mid-record" if cut else "bad JSON")
            skipping = True
            continue
        artifact = None
        if name == "artifact":
            am = _ARTIFACT_NAME.match(body)
            artifact = am.group(1) if am else None
        elif name not in KNOWN_EVENTS:
            counter.unknown_kind(path, lineno, name)
            skipping = True
            continue
        if not (name in USED_EVENTS or artifact in USED_ARTIFACTS):
            counter.ignored += 1
            skipping = True
            continue
        try:
            md = json.loads(body)
        except json.JSONDecodeError:
            counter.problem(path, lineno, "bad JSON")
            skipping = True
            continue
        if not isinstance(md, dict):
            counter.problem(path, lineno, "bad JSON")
            skipping = True
            continue
        kind = f"artifact:{artifact}" if artifact else name
        payload = md.get(name)
        data: dict[str, Any] = payload if isinstance(payload, dict) else {}
        if name in ("compilation_metrics", "bwd_compilation_metrics"):
            data = {k: v for k, v in data.items() if k in METRIC_KEYS or k in COST_KEYS}
        rank = md.get("rank") if isinstance(md.get("rank"), int) else file_rank
        record = TraceRecord(kind, compile_id_of(md), rank, data, None, path, lineno)
        md5 = md.get("has_payload") if isinstance(md.get("has_payload"), str) else None
        if md5 is None or name in _NO_PAYLOAD:
            skipping = md5 is not None
            yield record
            continue
        pending = _Pending(record, md5, count_only=name == "dynamo_cpp_guards_str" and not keep_guard_text)
    cut_off = bool(last) and not last.endswith("\n")
    if cut_off:
        counter.truncated_files.append(path)
    if pending is not None:
        done = finish(pending, cut_off)
        if done is not None:
            yield done


# ---------------------------------------------------------------------------------------------
# TORCH_LOGS text
# ---------------------------------------------------------------------------------------------


@dataclass
class TextMessage:
    """One torch log message (all its lines) from a TORCH_LOGS text log."""

    artifact: str | None
    """graph_breaks, recompiles, recompiles_verbose, perf_hints... (None: a plain torch log line)."""
    compile_id: str | None
    rank: int | None
    logger: str
    text: str
    file: str
    line: int


def _logger_of(path: str) -> str:
    """`torch/_inductor/graph.py` -> `torch._inductor.graph`."""
    stem = path[:-3] if path.endswith(".py") else path
    return stem.replace("/", ".")


def read_text_log(path: str, counter: ParseCounter) -> Iterator[TextMessage]:
    """The torch messages of a TORCH_LOGS capture, in order; other lines are counted as foreign.

    Lines of one message share one prefix; messages of different ranks may interleave line by line.
    Without prefixes a message runs from its header (`Graph break in user code at`, `Recompiling
    function`) to the next header or torch line.
    """
    open_by_stream: dict[tuple[Any, ...], tuple[str, TextMessage, list[str]]] = {}
    bare: tuple[TextMessage, list[str]] | None = None
    lineno = 0

    def close(msg: TextMessage, lines: list[str]) -> TextMessage:
        msg.text = "\n".join(lines)
        counter.records += 1
        return msg

    for lineno, raw in _numbered_lines(path, counter):
        line = raw.rstrip("\n")
        counter.lines += 1
        m = _GLOG.match(line)
        if m:
            rest = line[m.end() :]
            tail = _TEXT_TAIL.match(rest)
            assert tail is not None  # every part of the pattern is optional
            text = rest[tail.end() :]
            prefix = line[: m.end()] + rest[: tail.end()]
            rank = int(m.group("rank")) if m.group("rank") else None
            stream = (rank, m.group("pid"))
            trace = tail.group("trace")
            current = open_by_stream.get(stream)
            if current is not None and (current[0] != prefix or _MESSAGE_START.match(text)):
                yield close(current[1], current[2])
                current = None
            if current is None:
                parsed = CompileId.parse(trace)  # `[0/1_2]`: the restart attempt is dropped
                cid = str(parsed) if parsed is not None else None
                msg = TextMessage(tail.group("artifact"), cid, rank, _logger_of(m.group("path")), "", path, lineno)
                open_by_stream[stream] = (prefix, msg, [text])
            else:
                current[2].append(text)
            continue
        b = _BASIC.match(line)
        if b or _MESSAGE_START.match(line):
            if bare is not None:
                yield close(*bare)
            logger = b.group("logger") if b else ""
            text = b.group("text") if b else line
            artifact = logger.rsplit(".__", 1)[1] if ".__" in logger else None
            if artifact is None and not b:
                artifact = "recompiles" if text.startswith("Recompiling") else "graph_breaks"
            bare = (TextMessage(artifact, None, None, logger.split(".__")[0], "", path, lineno), [text])
            continue
        if bare is not None:
            bare[1].append(line)
            continue
        if line.strip():
            counter.foreign_lines += 1
    for _, msg, lines in open_by_stream.values():
        yield close(msg, lines)
    if bare is not None:
        yield close(*bare)
