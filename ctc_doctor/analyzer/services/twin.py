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
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...reports import models as rm
from ...workload import Workload
from ..resources.preflight import model_bytes
from ..running.deadline import Stopped
from ..running.device import free_bytes
from ..running.tensors import iter_tensors
from .session import PLACEHOLDER_SPEC, AnalyzeOptions
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


def _narrowed(config: Any) -> str | None:
    """Shrink `config`'s width in place (hidden size, heads, head width, feed-forward width, in proportion,
    the grouping of key/value heads kept); what changed, in words; None where it names no such width."""
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        return None
    kv = getattr(config, "num_key_value_heads", None)
    group = heads // kv if isinstance(kv, int) and kv > 0 and heads % kv == 0 else 1
    new_kv = max(1, math.ceil(4 / group))  # four query heads at least, each key/value head serving `group`
    new_heads = new_kv * group
    new_hidden = new_heads * NARROW_HEAD_DIM
    if new_hidden >= hidden:
        return None
    said = [f"hidden {hidden} -> {new_hidden}", f"heads {heads} -> {new_heads}"]
    config.hidden_size, config.num_attention_heads = new_hidden, new_heads
    if isinstance(kv, int):
        config.num_key_value_heads = new_kv if group > 1 else new_heads
        said.append(f"key/value heads {kv} -> {config.num_key_value_heads}")
    if isinstance(getattr(config, "head_dim", None), int):
        config.head_dim = NARROW_HEAD_DIM
    ffn = getattr(config, "intermediate_size", None)
    if isinstance(ffn, int):
        config.intermediate_size = max(1, round(ffn * new_hidden / hidden))
        said.append(f"feed-forward {ffn} -> {config.intermediate_size}")
    return ", ".join(said)


def _shrunk(config: Any, key: str, layers: int) -> Any | str:
    """A copy of `config` with TWIN_LAYERS layers: the layer count, another count of layers equal to it
    (T5's `num_decoder_layers`), a per-layer list (`layer_types`) cut to match; why not, where the first
    TWIN_LAYERS entries of a per-layer list would leave out a kind of layer the model has."""
    shrunk = copy.deepcopy(config)
    setattr(shrunk, key, TWIN_LAYERS)
    for name, value in list(vars(shrunk).items()):
        if isinstance(value, list) and len(value) == layers:
            kinds = {repr(v) for v in value}
            if len(kinds) > len({repr(v) for v in value[:TWIN_LAYERS]}):
                return f"its layers are not all alike ({name}: {len(kinds)} kinds), and {TWIN_LAYERS} of them would leave some out"
            setattr(shrunk, name, value[:TWIN_LAYERS])
        elif type(value) is int and value == layers and ("layers" in name or name.endswith("n_layer")):
            setattr(shrunk, name, TWIN_LAYERS)
    return shrunk


def _unlike(model: torch.nn.Module, twin: torch.nn.Module, layers: int) -> str | None:
    """Why the twin is not the model's code at fewer layers, None when it is: blocks of more than one class,
    modules the builder added after building (an adapter, a patch)."""
    stack = _layer_stack(model, layers)
    kinds = {type(m).__name__ for m in stack} if stack is not None else set()
    if len(kinds) > 1:
        return f"its {layers} layers are of {len(kinds)} classes ({', '.join(sorted(kinds))})"
    added = {type(m).__name__ for m in model.modules()} - {type(m).__name__ for m in twin.modules()}
    if added:
        return f"your builder changed the model after building it: {', '.join(sorted(added)[:4])} modules its config does not build"
    return None


def _same_settings(model: torch.nn.Module, twin: torch.nn.Module) -> None:
    """What the builder set on its model, on the twin: gradient checkpointing, and on the tensors of the same
    name their dtype and requires_grad."""
    if getattr(model, "is_gradient_checkpointing", False) and hasattr(twin, "gradient_checkpointing_enable"):
        twin.gradient_checkpointing_enable()
    mine = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    with torch.no_grad():
        for name, tensor in [*twin.named_parameters(), *twin.named_buffers()]:
            other = mine.get(name)
            if other is None:
                continue
            if other.dtype != tensor.dtype and other.is_floating_point() and tensor.is_floating_point():
                tensor.data = tensor.data.to(other.dtype)
            if isinstance(tensor, torch.nn.Parameter):
                tensor.requires_grad_(other.requires_grad)


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
    if any(t.is_meta for call in workload.calls() for t in iter_tensors((tuple(call.args), dict(call.kwargs)))):
        return "your builder made its inputs on the model's device (meta here), so they have no values to run a twin on"
    shrunk = _shrunk(config, key, layers)
    if isinstance(shrunk, str):
        return shrunk
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.get_default_dtype())

    def plan() -> tuple[torch.nn.Module, float]:
        """The twin built on meta, and what its parameters and buffers would hold in the model's dtype (built at
        float32)."""
        with torch.device("meta"):
            planned = type(model)(shrunk)
        return planned, model_bytes(planned) * dtype.itemsize / 4

    try:
        planned, size = plan()  # its size measured before it is built for real
        narrowed = None
        if room_bytes is not None and size > room_bytes:
            narrowed = _narrowed(shrunk)
            planned, size = plan()
            if narrowed is None or size > room_bytes:
                return f"{TWIN_LAYERS} of its {layers} layers would hold {size / 2**20:.0f} MB, past the twin's {room_bytes / 2**20:.0f} MB"
        unlike = _unlike(model, planned, layers)
        if unlike is not None:
            return unlike
        if seed is not None:
            torch.manual_seed(seed)
        twin = type(model)(shrunk).train(model.training)
        _same_settings(model, twin)
    except Exception as exc:
        return f"{type(model).__name__} could not be built from the shrunk config ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    described = (
        f"{type(model).__name__} built from your model's config with {TWIN_LAYERS} of its {layers} layers"
        + (f" and narrower ({narrowed})" if narrowed else "")
        + f", random weights in {str(dtype).removeprefix('torch.')}, on the inputs your builder made"
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
    if stop is None or not options.twin or any(e.phase in ("timeout", "interrupted") for e in report.errors):
        return report
    if options.rebuild_target() == PLACEHOLDER_SPEC:
        report.notes.append("No real twin to run instead: it is built from the TARGET (`AnalyzeOptions.spec`), and none was given.")
        return report
    t0 = time.perf_counter()
    try:
        twin = build_twin(options.rebuild_target(), options.seed, twin_room(options.memory_limit_mb))
    except Stopped:  # --timeout or a signal while the builder ran again: the stop stands
        report.notes.append("No real twin to run instead: the run was stopped while it was being built.")
        return report
    if isinstance(twin, str):
        report.notes.append(f"No real twin to run instead: {twin}.")
        return report
    built_s = time.perf_counter() - t0
    answer = analyze(twin.workload, dataclasses.replace(options, weights="twin"))
    if answer.cost is not None:  # its phases are the twin's run: what came before it, said
        counted = "counted in wall_s, from the CLI's start" if options.started_s is not None else "not counted in wall_s"
        meta_s = f"{report.cost.wall_s:.1f} s" if report.cost is not None else "its time"
        answer.cost.notes.insert(
            0, f"before the twin's run: the run without the weights ({meta_s}) and the twin's build ({built_s:.1f} s), {counted}"
        )
    failed = next((e for e in answer.errors if e.phase in ("eager", "timeout", "interrupted", "weights")), None)
    if failed is not None:  # the twin could not answer: the stop stands, and why the twin did not
        report.notes.append(f"A real twin ran instead and did not finish ({failed.phase}: {failed.message[:200]}): the stop stands.")
        return report
    return twin_report(answer, twin, stop.message, report.target)


def twin_report(report: rm.Report, twin: Twin, stop: str, model: rm.Target) -> rm.Report:
    """The twin's report, labelled: what the twin is, why it ran (the stop of the run without the weights)
    and how its counts scale to the model (`target.twin`, `target.weights` = `twin`); the target's class,
    parameter and module counts stay the model's (`model`, the run without the weights)."""
    report.target.twin, report.target.twin_scale = twin.description, twin.layers / TWIN_LAYERS
    report.target.model_class, report.target.parameters, report.target.modules = model.model_class, model.parameters, model.modules
    report.notes[:0] = [
        f"{stop[0].upper()}{stop[1:]}. These findings are a real twin's: {twin.description}.",
        f"What happens in every layer shows here {TWIN_LAYERS} times and {twin.layers} times in your model: a break "
        f"site's count, or recompiles one per layer, scale by {twin.layers / TWIN_LAYERS:g} (recompiles up to the recompile limit). "
        "The cost section is the twin's run.",
    ]
    return report
