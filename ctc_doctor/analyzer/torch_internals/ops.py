"""Every op of a block through Python, and what an op is: the random draws a run makes, recorded and
replayed (`running.draws`).

- `DispatchMode`: torch's `torch.utils._python_dispatch.TorchDispatchMode` (private), the base of a mode
  that sees each op below autograd; `DISPATCH_MODE` is False where this torch lacks it (the draws are then
  not recorded, and the reference draws from the seed, said).
- `op_name`, `op_argument`: an op's overload packet and its schema's arguments (private attributes of an
  `OpOverload`); None where an op has neither.
"""

from __future__ import annotations

from typing import Any

try:
    from torch.utils._python_dispatch import TorchDispatchMode as _Base
except ImportError:  # pragma: no cover - torch 2.6 and later have it
    _Base = None  # type: ignore[assignment, misc]

DISPATCH_MODE = _Base is not None
DispatchMode: Any = _Base if _Base is not None else object


def op_name(func: Any) -> str:
    """The op's name without its overload (`bernoulli_`, `native_dropout`)."""
    packet = getattr(func, "_overloadpacket", None)
    return str(getattr(packet, "__name__", None) or getattr(func, "__name__", func))


def op_argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...]) -> Any:
    """The value of the op's argument called one of `names` (its default when not given); None: no such argument."""
    schema = getattr(func, "_schema", None)
    for i, a in enumerate(getattr(schema, "arguments", ())):
        if a.name in names:
            if i < len(args):
                return args[i]
            return kwargs.get(a.name, a.default_value if a.has_default_value() else None)
    return None
