"""Breaks that a framework wrapper around the user's model makes by design (torch-free).

DistributedDataParallel runs its pre- and post-forward eagerly: Dynamo skips `_inside_ddp_forward` on
purpose and cannot trace DDP's `Logger` bookkeeping, so a compiled DDP wrapper breaks there on every
call, whatever the user's model does. FSDP, accelerate's wrappers, the transformers `Trainer` and
Lightning wrap the model the same way. Such a site is the wrapper's: `owner` "wrapper", `wrapper` its
name, `expected` one sentence of why. A break whose innermost frame is the user's own code stays the
user's even inside a wrapped model.
"""

from __future__ import annotations

from ...reports import models as rm
from .sources import classify_file

_WRAPPERS = (
    ("DistributedDataParallel", ("torch/nn/parallel/distributed.py",), ("DistributedDataParallel",)),
    ("FSDP", ("torch/distributed/fsdp/",), ("FullyShardedDataParallel",)),
    ("accelerate", ("/accelerate/",), ()),
    ("the transformers Trainer", ("transformers/trainer.py",), ()),
    ("Lightning", ("/lightning/", "/pytorch_lightning/"), ()),
)
_WHY = {
    "DistributedDataParallel": (
        "DDP's pre- and post-forward (its `_inside_ddp_forward` context, which Dynamo skips on purpose, and "
        "its `Logger` bookkeeping) run eagerly by design, around your model's own graph"
    ),
}
_NOT_THE_WRAPPER = ("stdlib", "python")


def wrapper_of(site: rm.GraphBreakSite) -> str | None:
    """The framework wrapper whose by-design code breaks at this site, or None (the user's, a library's)."""
    if site.own_code:
        return None
    frames = [f.file for f in site.user_stack] or [site.user_frame.file]
    inner = next((f for f in reversed(frames) if classify_file(f)[1] not in _NOT_THE_WRAPPER and not classify_file(f)[0]), None)
    text = f"{site.reason} {site.explanation or ''}"
    for name, paths, classes in _WRAPPERS:
        if inner is not None and any(p in inner.replace("\\", "/") for p in paths):
            return name
        if inner is None or classify_file(inner)[1] == "torch":
            if any(c in text for c in classes):
                return name
    return None


def mark_wrapper_breaks(sites: list[rm.GraphBreakSite]) -> None:
    """Each site's owner; a wrapper's by-design site marked expected, with why."""
    for site in sites:
        wrapper = wrapper_of(site)
        site.owner = "user" if site.own_code else ("wrapper" if wrapper else "library")
        if wrapper:
            site.wrapper = wrapper
            site.expected = _WHY.get(wrapper, f"{wrapper} runs its own code around your model eagerly by design")


def ddp_splits(split_children: list[tuple[str | None, str]], buckets: list[tuple[str | None, int, int]]) -> list[rm.DdpSplit]:
    """The compiles DDPOptimizer split: `split_children` (compile id, submodule name) from its
    `optimize_ddp_split_child` trace events, `buckets` (compile id, bucket cap, buckets) from its log line."""
    names: dict[str, set[str]] = {}
    for cid, name in split_children:
        names.setdefault(cid or "?", set()).add(name)
    said = {cid or "?": (cap, n) for cid, cap, n in buckets}
    out = []
    for cid, children in names.items():
        cap, n = said.get(cid, (None, None))
        out.append(rm.DdpSplit(compile_id=cid, subgraphs=len(children), bucket_cap_bytes=cap, buckets=n))
    return out
