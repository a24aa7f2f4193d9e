"""`run --compare hotswap`: the script replayed with diffusers' LoRA hotswap recipe applied, unmodified.

The recipe (diffusers' and PEFT's): prepare the model for hotswapping before its first adapter
(`enable_lora_hotswap(target_rank=the largest rank)`), then load every later adapter into the first one's
place (`load_lora_adapter(..., adapter_name=first, hotswap=True)`): the compiled code keeps its layers and
its guards hold. In the script's process, diffusers' `PeftAdapterMixin` (which its pipelines' loaders call
for each model) is patched for the run:

- the first adapter a model loads is loaded as written, prepared for `target_rank` (the largest rank the
  script's own run loaded), and becomes the slot;
- a later adapter is swapped into the slot when it is loaded, as loading activates it; its source is kept,
  so that `set_adapters(name)` swaps back whichever adapter the script activates;
- `set_adapters(name, weights)` sets the slot's scales in place (the preparation made them tensors;
  diffusers' own `set_scale` would assign a float, which recompiles).

A PEFT model (`PeftModel`, what transformers' LoRA users hold) is prepared when it is compiled
(`prepare_model_for_compiled_hotswap`, its active adapter the slot, its weights kept); an adapter it loads
after that is kept aside (PEFT's `load_adapter` does not activate it) and swapped into the slot when
`set_adapter` activates it (`hotswap_adapter`), as the recipe does: the slot keeps its `requires_grad`
(PEFT's `set_adapter` would make the adapter trainable).

What the recipe cannot express stops the replay with `CannotReplay` (its compare row says why): several
adapters active at once, per-block weights. An adapter deleted while it is in the slot, and adapters added
in memory (`inject_adapter_in_model`), run as written.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch


@dataclass
class _Slot:
    """One model's hotswap slot: the adapter name its layers hold, what is in it now, each adapter's source."""

    name: str
    shown: str
    sources: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    base: dict[int, float] = field(default_factory=dict)
    """Each LoRA layer's scale of the adapter in the slot, at weight 1 (id of the layer -> scale)."""


def _lora_layers(model: torch.nn.Module, name: str) -> list[Any]:
    return [m for m in model.modules() if isinstance(getattr(m, "scaling", None), dict) and name in m.scaling]


def _remember_scales(model: torch.nn.Module, slot: _Slot) -> None:
    slot.base = {id(m): float(m.scaling[slot.name]) for m in _lora_layers(model, slot.name)}


def _single(names: Any) -> str | None:
    if isinstance(names, str):
        return names
    if isinstance(names, (list, tuple)) and len(names) == 1 and isinstance(names[0], str):
        return names[0]
    return None


def _weight(weights: Any) -> float | None:
    """One adapter's weight as a number (none given: 1, as diffusers takes it; a pipeline passes `[None]`);
    None for a per-block dict, which the recipe cannot replay."""
    if isinstance(weights, (list, tuple)) and len(weights) == 1:
        weights = weights[0]
    if weights is None:
        return 1.0
    return float(weights) if isinstance(weights, (int, float)) and not isinstance(weights, bool) else None


DEFAULT_RANK = 128
"""The rank prepared for when the script's own run saw no LoRA layer (diffusers' default)."""


class CannotReplay(RuntimeError):
    """A call the recipe cannot express: the replay stops there, and its compare row says why."""


def prepare_peft_model(model: Any, target_rank: int | None, note: Callable[[str], None], prepared: dict[int, _Slot]) -> None:
    """A `PeftModel` about to be compiled: prepared for hotswapping, its active adapter the slot (its
    weights and config kept, to swap it back)."""
    try:
        from peft import PeftModel
        from peft.utils.hotswap import prepare_model_for_compiled_hotswap
    except ImportError:
        return
    if not isinstance(model, PeftModel) or id(model) in prepared:
        return
    name = model.active_adapter
    weights = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k and f".{name}." in k}  # as swaps name them
    kept = {"weights": weights, "config": copy.deepcopy(model.peft_config[name])}
    rank = target_rank or DEFAULT_RANK
    prepare_model_for_compiled_hotswap(model, target_rank=rank, check_compiled="ignore")
    prepared[id(model)] = _Slot(name=name, shown=name, sources={name: (kept, {})})
    note(f"--compare hotswap: {type(model.get_base_model()).__name__} prepared for LoRA rank {rank}; adapters swap into '{name}'.")


@contextlib.contextmanager
def _peft_models(prepared: dict[int, _Slot]) -> Iterator[None]:
    """`PeftModel.load_adapter` after the compile keeps the adapter aside; `set_adapter` swaps it in."""
    try:
        from peft import PeftModel
        from peft.utils.hotswap import hotswap_adapter, hotswap_adapter_from_state_dict
    except ImportError:
        yield
        return
    load, activate = PeftModel.load_adapter, PeftModel.set_adapter

    @functools.wraps(load)
    def load_adapter(model: Any, model_id: Any, adapter_name: str, *args: Any, **kwargs: Any) -> Any:
        slot = prepared.get(id(model))
        if slot is None or args or adapter_name in model.peft_config:
            return load(model, model_id, adapter_name, *args, **kwargs)
        slot.sources[adapter_name] = (model_id, kwargs)  # PEFT does not activate a loaded adapter: swapped in by set_adapter
        return None

    @functools.wraps(activate)
    def set_adapter(model: Any, adapter_name: str, *args: Any, **kwargs: Any) -> Any:
        slot = prepared.get(id(model))
        if slot is None or adapter_name not in slot.sources:
            return activate(model, adapter_name, *args, **kwargs)
        if slot.shown != adapter_name:
            source, options = slot.sources[adapter_name]
            if isinstance(source, dict):  # the first adapter, kept at the compile
                hotswap_adapter_from_state_dict(model, source["weights"], adapter_name=slot.name, config=source["config"])
            else:
                options = dict(options)
                device = options.pop("torch_device", None) or next((str(p.device) for p in model.parameters()), None)
                hotswap_adapter(model, source, adapter_name=slot.name, torch_device=device, **options)
            slot.shown = adapter_name
        return None  # the recipe's own call is the swap: the slot keeps its requires_grad (no set_adapter flips it)

    with mock.patch.object(PeftModel, "load_adapter", load_adapter), mock.patch.object(PeftModel, "set_adapter", set_adapter):
        yield


@contextlib.contextmanager
def lora_hotswap(on: bool, target_rank: int | None, note: Callable[[str], None], prepared: dict[int, _Slot]) -> Iterator[None]:
    """Apply the hotswap recipe to every diffusers model and every compiled PEFT model for the block (see
    the module docstring); `prepared` is where the compile hook (`prepare_peft_model`) leaves its slots."""
    if not on:
        yield
        return
    with _peft_models(prepared), _diffusers_models(target_rank, note):
        yield


@contextlib.contextmanager
def _diffusers_models(target_rank: int | None, note: Callable[[str], None]) -> Iterator[None]:
    """diffusers' `PeftAdapterMixin`: the first adapter prepared and kept as the slot, later ones swapped in;
    a pipeline lists the adapters kept aside as its models' (its `set_adapters` checks the names)."""
    try:
        from diffusers.loaders.lora_base import LoraBaseMixin
        from diffusers.loaders.peft import PeftAdapterMixin
    except ImportError:
        yield
        return
    rank = target_rank or DEFAULT_RANK
    load, activate, listed = PeftAdapterMixin.load_lora_adapter, PeftAdapterMixin.set_adapters, LoraBaseMixin.get_list_adapters
    slots: dict[int, _Slot] = {}

    def swap_in(model: Any, slot: _Slot, name: str) -> None:
        source, kwargs = slot.sources[name]
        load(model, source, **{**kwargs, "adapter_name": slot.name, "hotswap": True})
        slot.shown = name
        _remember_scales(model, slot)

    @functools.wraps(load)
    def load_lora_adapter(model: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs.get("hotswap"):
            return load(model, source, *args, **kwargs)  # positional options, or the script swaps already
        slot = slots.get(id(model))
        name = kwargs.get("adapter_name") or f"default_{len(slot.sources) if slot else 0}"  # diffusers' naming
        if slot is None:
            if getattr(model, "_prepare_lora_hotswap_kwargs", None) is None and not getattr(model, "peft_config", None):
                model.enable_lora_hotswap(target_rank=rank, check_compiled="ignore")
            out = load(model, source, **{**kwargs, "adapter_name": name})
            slot = slots[id(model)] = _Slot(name=name, shown=name, sources={name: (source, kwargs)})
            _remember_scales(model, slot)
            note(f"--compare hotswap: {type(model).__name__} prepared for LoRA rank {rank}; later adapters swap into '{name}'.")
            return out
        slot.sources[name] = (source, {k: v for k, v in kwargs.items() if k != "adapter_name"})
        swap_in(model, slot, name)  # loading makes the new adapter the active one, as diffusers does
        return None

    @functools.wraps(activate)
    def set_adapters(model: Any, adapter_names: Any, weights: Any = None) -> Any:
        slot = slots.get(id(model))
        if slot is None:
            return activate(model, adapter_names, weights)
        name = _single(adapter_names)
        weight = _weight(weights)
        if name is None or weight is None:
            raise CannotReplay("--compare hotswap cannot replay set_adapters with several adapters or per-block weights")
        if name not in slot.sources:
            return activate(model, adapter_names, weights)  # not loaded: diffusers' own error
        if slot.shown != name:
            swap_in(model, slot, name)
        with torch.no_grad():
            for layer in _lora_layers(model, slot.name):
                scale = slot.base.get(id(layer), 1.0) * weight
                if isinstance(layer.scaling[slot.name], torch.Tensor):
                    layer.scaling[slot.name].fill_(scale)  # in place: no guard changes
                else:
                    layer.scaling[slot.name] = scale  # a model prepared elsewhere, with float scales
        return None

    def get_list_adapters(pipe: Any) -> dict[str, list[str]]:
        out = listed(pipe)
        for component, names in out.items():
            slot = slots.get(id(getattr(pipe, component, None)))
            names.extend(n for n in (slot.sources if slot else {}) if n not in names)
        return out

    with (
        mock.patch.object(PeftAdapterMixin, "load_lora_adapter", load_lora_adapter),
        mock.patch.object(PeftAdapterMixin, "set_adapters", set_adapters),
        mock.patch.object(LoraBaseMixin, "get_list_adapters", get_list_adapters),
    ):
        yield


def lora_rank(module: Any) -> int | None:
    """The largest LoRA rank among the adapters a module's PEFT layers hold (None: no LoRA layer)."""
    ranks = [
        int(r)
        for m in (module.modules() if isinstance(module, torch.nn.Module) else [])
        if hasattr(m, "lora_A") and isinstance(getattr(m, "r", None), dict)
        for r in m.r.values()
    ]
    return max(ranks) if ranks else None
