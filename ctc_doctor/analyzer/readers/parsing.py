"""Text parsers for what torch.compile writes: graph-break messages and guard-failure reasons.

Torch carries no structured gb_type or guard kind in its logs, so parsing text is unavoidable. These
functions are pure (no torch import) so offline log ingestion can reuse them. Formats handled:
- torch >= 2.8-ish: "Graph Break Reason: <gb_type>\\n  Explanation: ...\\n  Hint: ..." with a link to
  `.../gb/gbNNNN.html`; nested breaks joined by "*** While handling this graph break, ...".
- torch 2.6/2.7: "Reason: <free text>" with no gb_type (a fallback table names the common ones).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...reports.advice.guard_kinds import CLAIMS, TENSOR_WORDS
from .sources import RawFrame

_HEADER = re.compile(r"^Graph break(?: \(.*?\))? in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.M)
_GB_LINK = re.compile(r"gb(\d{4})\.html")
_NESTED = "*** While handling this graph break, another graph break occurred: ***"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
# Wrapper sentences torch puts before the Unsupported message; the gb_type follows a blank line.
_PREFIXES = (
    "Encountered graph break when attempting to trace",
    "Failed to handle graph break gracefully",
    "Encountered graph break that we cannot resume from",
)
# torch 2.6/2.7 give free text only: map the common reasons to the modern gb_type names.
_LEGACY_GB_TYPES = (
    (re.compile(r"generic_jump|data.dependent", re.I), "Data-dependent branching"),
    (re.compile(r"BuiltinVariable\(print\)|builtin.*print", re.I), "Failed to trace builtin operator"),
    (re.compile(r"Tensor\.item|item\(\)", re.I), "Unsupported Tensor.item() call with capture_scalar_outputs=False"),
    (re.compile(r"skip|skipfiles|marked as skipped", re.I), "Attempted to call function marked as skipped"),
)


@dataclass
class UnsupportedText:
    """One Unsupported message split into its parts."""

    gb_type: str
    explanation: str | None = None
    hints: list[str] = field(default_factory=list)
    registry_ids: list[str] = field(default_factory=list)


@dataclass
class ParsedBreak:
    """A `dynamo_graph_break_reason` payload (or a TORCH_LOGS graph_breaks record) parsed."""

    file: str | None
    line: int | None
    gb_type: str
    reason: str
    explanation: str | None
    hints: list[str]
    registry_ids: list[str]
    frames: list[RawFrame]
    causes: list[str] = field(default_factory=list)
    """gb_types of earlier breaks this one happened while handling (innermost cause first)."""


def split_unsupported(message: str) -> UnsupportedText:
    """Split one modern Unsupported message into gb_type, explanation, hints and GB ids."""
    text = _strip_prefix(message.strip("\n"))
    lines = text.splitlines()
    gb_type = lines[0].strip() if lines else ""
    explanation: list[str] = []
    hints: list[str] = []
    mode = None
    for raw in lines[1:]:
        stripped = raw.strip()
        if stripped.startswith("Explanation:"):
            mode = "explanation"
            explanation.append(stripped[len("Explanation:") :].strip())
        elif stripped.startswith("Hint:"):
            mode = "hint"
            hints.append(stripped[len("Hint:") :].strip())
        elif stripped.startswith("Developer debug context:") or stripped.startswith("For more details"):
            mode = None
        elif mode == "explanation" and stripped:
            explanation.append(stripped)
        elif mode == "hint" and stripped and hints:
            hints[-1] = f"{hints[-1]} {stripped}"
    ids = [f"GB{m}" for m in _GB_LINK.findall(text)]
    return UnsupportedText(
        gb_type=gb_type,
        explanation=" ".join(explanation) or None,
        hints=hints,
        registry_ids=_unique(ids),
    )


def _strip_prefix(text: str) -> str:
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            head, sep, rest = text.partition("\n\n")
            if sep:
                return rest.lstrip("\n")
    return text


def parse_break_text(payload: str) -> ParsedBreak:
    """Parse a graph-break payload: header, reason block(s) and the user code traceback."""
    header = _HEADER.search(payload)
    file = header.group("file") if header else None
    line = int(header.group("line")) if header else None
    body = payload[header.end() :] if header else payload
    reason_text, _, traceback_text = body.partition("User code traceback:")
    reason_text = reason_text.strip("\n")
    for label in ("Graph Break Reason:", "Reason:"):
        if reason_text.startswith(label):
            reason_text = reason_text[len(label) :].strip()
            break
    reason_text = reason_text.split("\nStack variable source attribution:")[0]
    frames = parse_traceback_frames(traceback_text.split("\nTraceback (most recent call last):")[0])

    blocks = [b for b in reason_text.split(_NESTED) if b.strip()]
    parts = [split_unsupported(b) for b in blocks] or [UnsupportedText(gb_type="")]
    final = parts[-1]
    modern = "Explanation:" in reason_text or bool(final.registry_ids)
    if not modern:
        # torch 2.6/2.7: free-text reason, no gb_type
        one = " ".join(reason_text.split())
        gb_type = next((name for pat, name in _LEGACY_GB_TYPES if pat.search(one)), one[:120] or "unknown")
        return ParsedBreak(file, line, gb_type, one[:300], None, [], [], frames)
    causes = [p.gb_type for p in parts[:-1]]
    ids = _unique(final.registry_ids + [i for p in parts[:-1] for i in p.registry_ids])
    hints = _unique([h for p in parts[:-1] for h in p.hints] + final.hints)
    explanation = final.explanation
    reason = final.gb_type
    if causes:
        reason = f"{final.gb_type} (caused by: {'; '.join(causes)})"
        cause_expl = parts[0].explanation
        explanation = " ".join(e for e in (explanation, cause_expl) if e) or None
    if explanation:
        reason = f"{reason}: {first_sentence(explanation)}"
    return ParsedBreak(file, line, final.gb_type, reason, explanation, hints, ids, frames, causes)


def parse_traceback_frames(text: str) -> list[RawFrame]:
    """Frames of a `traceback.format_list`-style block: (file, line, function, source line)."""
    frames: list[RawFrame] = []
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        m = _FRAME.match(raw)
        if not m:
            continue
        code = None
        if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]):
            candidate = lines[i + 1].strip()
            if candidate and not set(candidate) <= set("^~ "):
                code = candidate
        frames.append((m.group("file"), int(m.group("line")), m.group("func").strip(), code))
    return frames


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(?=\s+[A-Z]|$)", text)
    sentence = m.group(1) if m else text
    if len(sentence) <= 400:
        return sentence
    return sentence[:400].rsplit(" ", 1)[0] + " …"  # a very long one: cut between words, never inside one


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------------------------------------
# Guard failures
# ---------------------------------------------------------------------------------------------

_ENTRY = re.compile(r"^\s*-?\s*(?P<entry>\d+/\d+): (?P<text>.*)$", re.S)
_TENSOR = re.compile(
    rf"^tensor '(?P<src>.+?)' (?P<what>{'|'.join(sorted(TENSOR_WORDS, key=len, reverse=True))})[\w ]*mismatch"
    r"(?: at index (?P<dim>\d+))?\.?\s*(?P<rest>.*)$"
)
_EXPECTED = re.compile(r"expected (?:requires_grad=)?(?P<exp>[^,]+?)(?:,\s*actual (?P<act>.+?))?\.?$")
_COMPARE = re.compile(r"^(?P<src>[^=<>!]+?)(?:\s*(?:==|!=)\s*|\s+(?:is not|is)\s+)(?P<val>.+)$")
_CALL_SRC = re.compile(r"___check_(?P<fn>type_id|obj_id)\((?P<src>.+?),\s*\d+\)")
_SYMBOLIC = re.compile(r"(?:size|stride)\(\)\[(?P<dim>\d+)\]|\bEq\(|\bs\d+\b|\bNe\(|<=|>=")


def split_recompile_reasons(payload: str | list[str]) -> list[str]:
    """The `recompile_reasons` artifact is one string or a JSON list of strings (one per entry)."""
    if isinstance(payload, list):
        return [str(p) for p in payload]
    text = payload.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return [str(v) for v in value]
    if text.startswith('"'):
        try:
            return [str(json.loads(text))]
        except json.JSONDecodeError:
            pass
    return [text] if text else []


_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def guard_user_stack(reason: str) -> list[dict[str, object]]:
    """The frames after `User stack trace:` in a guard-failure reason (torch >= 2.13), with their code lines."""
    _, found, rest = reason.partition("User stack trace:")
    if not found:
        return []
    frames: list[dict[str, object]] = []
    for line in rest.splitlines():
        m = _USER_FRAME.match(line)
        if m:
            frames.append({"file": m.group("file"), "line": int(m.group("line")), "function": m.group("function"), "code": None})
        elif frames and line.strip() and frames[-1]["code"] is None:
            frames[-1]["code"] = line.strip()
    return frames


def classify_guard(reason: str) -> dict[str, Any]:
    """Classify one guard-failure reason into the FailedGuard fields: by its shape (`_by_shape`), then a kind
    that claims the guard by its text (an adapter's, `guard_kinds.CLAIMS`) takes it over."""
    out = _by_shape(reason)
    text = f"{out['source'] or ''} {out['reason']}"
    claimed = next((kind for pattern, kind in CLAIMS if pattern.search(text)), None)
    if claimed is not None:
        out["kind"] = claimed
    return out


def _by_shape(reason: str) -> dict[str, Any]:
    """The FailedGuard fields from the guard text's shape: a tensor check, global state, a type or id check,
    a symbolic size, a comparison."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    entry = None
    m = _ENTRY.match(first)
    if m:
        entry, first = m.group("entry"), m.group("text")
    text = first.split("  #")[0].strip()
    out: dict[str, object] = {
        "reason": first.strip(),
        "kind": "other",
        "source": None,
        "expected": None,
        "actual": None,
        "dim": None,
        "cache_entry": entry,
        "user_stack": guard_user_stack(reason),
    }
    tm = _TENSOR.match(text)
    if tm:
        out["kind"] = TENSOR_WORDS[tm.group("what")]
        out["source"] = tm.group("src")
        out["dim"] = int(tm.group("dim")) if tm.group("dim") else None
        # torch 2.13 appends its own hint to a parameter's guard ("... actual 32. Guard failed on a parameter,
        # consider using ..."): the values stop before it (the reason keeps it whole)
        rest = (tm.group("rest") or "").split(". Guard failed on a parameter", 1)[0]
        em = _EXPECTED.search(rest)
        if em:
            out["expected"] = em.group("exp").strip()
            out["actual"] = em.group("act").strip() if em.group("act") else None
        return out
    if text.startswith("GLOBAL_STATE") or "___check_global_state" in text or "grad_mode" in text:
        out["kind"] = "global_state"
        gm = re.search(r"changed:\s*(.+)$", text)
        out["source"] = gm.group(1).strip() if gm else None
        return out
    cm = _CALL_SRC.search(text)
    if cm:
        out["kind"] = "type" if cm.group("fn") == "type_id" else "object_id"
        out["source"] = cm.group("src")
        tym = re.search(r"type=<class '([^']+)'>", text)
        out["expected"] = tym.group(1) if tym else None
        return out
    if _SYMBOLIC.search(text) and ("size()" in text or "stride()" in text or re.search(r"\bs\d+\b", text)):
        out["kind"] = "stride" if "stride()" in text else "size"
        dm = re.search(r"(?:size|stride)\(\)\[(\d+)\]", text)
        out["dim"] = int(dm.group(1)) if dm else None
        sm = re.search(r"(L\[[^\]]+\]|[A-Za-z_][\w.\[\]']*)\.(?:size|stride)\(\)", text)
        out["source"] = sm.group(1) if sm else None
        return out
    om = _COMPARE.match(text)
    if om:
        src = om.group("src").strip()
        out["source"] = src
        out["expected"] = om.group("val").strip()
        out["kind"] = "attribute" if _is_attribute_source(src) else "value"
        return out
    if "isinstance" in text or "type(" in text:
        out["kind"] = "type"
    elif "id(" in text:
        out["kind"] = "object_id"
    elif "len(" in text:
        out["kind"] = "value"
    return out


def _is_attribute_source(src: str) -> bool:
    """`self.flag`, `L['self'].flag`, `self._modules['d'].training` are attributes; `n`, `L['n']` are values."""
    if "." in src.replace("L['", "").split("[")[0] or re.search(r"\]\.\w", src) or re.search(r"^\w+\.\w", src):
        return True
    return False
