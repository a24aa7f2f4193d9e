"""A small real twin of a model whose run without the weights stopped (`--weights none`, issue 63).

A run on meta tensors stops where the code needs real values (`.item()`, a data-dependent branch) or where
Dynamo cannot fake a meta tensor the code makes (transformers' KV cache). For a model built from a config
with a layer count (transformers' `num_hidden_layers` and its kin), the same class is built again from a copy
of that config with 2 layers, on the CPU with random weights in the model's dtype, narrower when the 2 layers
at full width would not fit the room (hidden size, heads and feed-forward width shrunk in proportion), and
run on the builder's own inputs: the builder runs once more with only its parameters and buffers on meta,
so its inputs are real. Its findings are the twin's, said so in the report: the same code, the same inputs
and shapes, 2 of the model's layers (what happens in every layer shows here twice), random weights (a branch
on values may go another way).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...reports import models as rm
from ...workload import Workload
from ..running.device import free_bytes
from .session import AnalyzeOptions
from .target import load_workload

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
"""Config attributes that hold a model's layer count (transformers' names)."""
TWIN_LAYERS = 2
"""Layers of a twin: two, so that what a layer does after the first (a per-layer cache, a per-layer guard) shows."""
NARROW_HEAD_DIM = 32
"""A narrowed twin's head width."""


@dataclasses.dataclass
class Twin:
    """The twin's workload and what it is, in words for the report."""

    workload: Workload
    layers: int
    """The model's own layer count (the twin has TWIN_LAYERS)."""
    description: str


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Parameters and buffers a module registers land on meta (their storage freed as they are registered);
    every other tensor the builder makes, its inputs, stays real (accelerate's `init_empty_weights`)."""
    register_parameter, register_buffer = torch.nn.Module.register_parameter, torch.nn.Module.register_buffer

    def parameter(module: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> None:
        if param is not None and not param.is_meta:
            param = torch.nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)
        register_parameter(module, name, param)

    def buffer(module: torch.nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
        register_buffer(module, name, tensor.to("meta") if tensor is not None and not tensor.is_meta else tensor, persistent)

    torch.nn.Module.register_parameter = parameter  # type: ignore[method-assign,assignment]
    torch.nn.Module.register_buffer = buffer  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]
        torch.nn.Module.register_buffer = register_buffer  # type: ignore[method-assign]


def layer_key(config: Any) -> str | None:
    """The config attribute that holds the layer count, None where it has none."""
    return next((k for k in LAYER_KEYS if isinstance(getattr(config, k, None), int) and not isinstance(getattr(config, k), bool)), None)


def _layer_stack(model: torch.nn.Module, layers: int) -> torch.nn.ModuleList | None:
    """The model's list of `layers` blocks (the largest ModuleList of that length)."""
    stacks = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    return max(stacks, key=lambda m: sum(p.numel() for p in m.parameters()), default=None)


def twin_bytes(model: torch.nn.Module, layers: int) -> int:
    """What the twin's parameters would hold at the model's width: all but TWIN_LAYERS of its blocks removed."""
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    stack = _layer_stack(model, layers)
    if stack is not None and layers > TWIN_LAYERS:
        per_layer = sum(p.numel() * p.element_size() for p in stack.parameters()) / layers
        size -= int(per_layer * (layers - TWIN_LAYERS))
    return size


def _narrowed(config: Any) -> str | None:
    """Shrink `config`'s width in place (hidden size, heads, head width, feed-forward width, in proportion,
    the grouping of key/value heads kept); what changed, in words; None where it names no such width."""
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        return None
    kv = getattr(config, "num_key_value_heads", None)
    group = max(1, heads // kv) if isinstance(kv, int) and kv > 0 else 1
    new_heads = max(group, 4)
    new_hidden = new_heads * NARROW_HEAD_DIM
    if new_hidden >= hidden:
        return None
    said = [f"hidden {hidden} -> {new_hidden}", f"heads {heads} -> {new_heads}"]
    config.hidden_size, config.num_attention_heads = new_hidden, new_heads
    if isinstance(kv, int):
        config.num_key_value_heads = max(1, new_heads // group)
        said.append(f"key/value heads {kv} -> {config.num_key_value_heads}")
    if isinstance(getattr(config, "head_dim", None), int):
        config.head_dim = NARROW_HEAD_DIM
    ffn = getattr(config, "intermediate_size", None)
    if isinstance(ffn, int):
        config.intermediate_size = max(1, round(ffn * new_hidden / hidden))
        said.append(f"feed-forward {ffn} -> {config.intermediate_size}")
    return ", ".join(said)


def _shrunk(config: Any, key: str, layers: int) -> Any:
    """A copy of `config` with TWIN_LAYERS layers: the layer count, another count of layers equal to it
    (T5's `num_decoder_layers`), a per-layer list (`layer_types`) cut to match."""
    shrunk = copy.deepcopy(config)
    setattr(shrunk, key, TWIN_LAYERS)
    for name, value in list(vars(shrunk).items()):
        if isinstance(value, list) and len(value) == layers:
            setattr(shrunk, name, value[:TWIN_LAYERS])
        elif type(value) is int and value == layers and ("layers" in name or name.endswith("n_layer")):
            setattr(shrunk, name, TWIN_LAYERS)
    return shrunk


def build_twin(spec: str, seed: int | None, room_bytes: int | None) -> Twin | str:
    """The twin of TARGET `spec`'s model, or why there is none (one line). `room_bytes`: what its parameters
    may hold (None: no bound)."""
    try:
        with parameters_on_meta():
            workload = load_workload(spec, seed=seed)
    except Exception as exc:  # the builder built once already, on meta: this build's failure is said, not raised
        return f"the builder failed with real inputs and meta parameters ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    model = workload.model
    config = getattr(model, "config", None) if isinstance(model, torch.nn.Module) else None
    key = layer_key(config) if config is not None else None
    if key is None:
        return "its model names no layer count in a `config` (a transformers model's `num_hidden_layers`) to shrink"
    layers = getattr(config, key)
    if layers <= TWIN_LAYERS:
        return f"it has {layers} layer(s) already: no smaller twin of the same code"
    shrunk, narrowed = _shrunk(config, key, layers), None
    if room_bytes is not None and twin_bytes(model, layers) > room_bytes:
        narrowed = _narrowed(shrunk)
        if narrowed is None:
            size = twin_bytes(model, layers) / 2**20
            return f"2 of its {layers} layers at full width would not fit ({size:.0f} MB) and its config names no width to shrink"
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.get_default_dtype())
    if seed is not None:
        torch.manual_seed(seed)
    try:
        twin = type(model)(shrunk).to(dtype).train(model.training)
    except Exception as exc:
        return f"{type(model).__name__} could not be built from the shrunk config ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    described = (
        f"{type(model).__name__} built from your model's config with {TWIN_LAYERS} of its {layers} layers"
        + (f" and narrower ({narrowed})" if narrowed else "")
        + f", random weights in {str(dtype).removeprefix('torch.')}, on your builder's own inputs"
    )
    return Twin(dataclasses.replace(workload, model=twin), layers, described)


TWIN_ROOM = 1 << 30
"""A twin's parameters hold at most this (1 GiB), a quarter of the free memory or --memory-limit if less:
what Dynamo finds does not need a large twin, and a narrower one is built past it."""


def twin_room(memory_limit_mb: int | None) -> int:
    """What a twin's parameters may hold (`TWIN_ROOM`, bounded by free memory and --memory-limit)."""
    room = TWIN_ROOM
    free = free_bytes("cpu")
    if free is not None:
        room = min(room, free // 4)
    if memory_limit_mb is not None:
        room = min(room, memory_limit_mb << 20)
    return room


def twin_instead(report: rm.Report, options: AnalyzeOptions, analyze: Callable[[Workload, AnalyzeOptions], rm.Report]) -> rm.Report:
    """`report`, or where the run without the weights stopped (an error of phase `weights`) the report of a
    real twin's run (`analyze` with `weights="twin"`), labelled; a note says why there is no twin."""
    stop = next((e for e in report.errors if e.phase == "weights"), None)
    if stop is None or not options.twin or not options.rebuild_target():
        return report
    twin = build_twin(options.rebuild_target(), options.seed, twin_room(options.memory_limit_mb))
    if isinstance(twin, str):
        report.notes.append(f"No real twin to run instead: {twin}.")
        return report
    return twin_report(analyze(twin.workload, dataclasses.replace(options, weights="twin")), twin, stop.message)


def twin_report(report: rm.Report, twin: Twin, stop: str) -> rm.Report:
    """The twin's report, labelled: what the twin is, why it ran (the stop of the run without the weights)
    and how its counts scale to the model (`target.twin`, `target.weights` = `twin`)."""
    report.target.twin = twin.description
    report.notes[:0] = [
        f"{stop[0].upper()}{stop[1:]}. These findings are a real twin's: {twin.description}.",
        f"What happens in every layer shows here {TWIN_LAYERS} times and {twin.layers} times in your model: a break "
        f"site's count, or recompiles one per layer, scale by {twin.layers / TWIN_LAYERS:g}.",
    ]
    return report
