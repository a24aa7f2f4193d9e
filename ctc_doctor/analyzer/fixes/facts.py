"""What the suggestion rules, `fix`, the probe and the benchmark need to know about the model
beyond the report: forward's arguments and their kinds, groups of identical blocks, and which of
the Dynamo options the rules name exist in this torch. Offline reports have no facts (None).

Torch-free: the rules, which run offline too, use these types; `model_facts` gathers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONFIG_OPTIONS_USED = (
    "reorderable_logging_functions",
    "ignore_logger_methods",
    "ignore_logging_functions",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "recompile_limit",
)
"""`torch._dynamo.config` options the suggestion rules name (the facts say which exist)."""


@dataclass
class RepeatedGroup:
    """Sibling modules of one class and structure in a container (`layers.0` ... `layers.N`)."""

    container: str
    class_name: str
    paths: list[str]


@dataclass
class ModelFacts:
    """What the live analyzer knows about the model beyond the report."""

    arg_names: list[str] = field(default_factory=list)
    """forward's parameter names, in order."""
    arg_kinds: dict[str, str] = field(default_factory=dict)
    """Kind of each argument in the first call: tensor, float, int, bool, other."""
    repeated: list[RepeatedGroup] = field(default_factory=list)
    """Groups of identical blocks."""
    config_options: frozenset[str] = frozenset()
    """Those of CONFIG_OPTIONS_USED this torch has (to check torch's own hints against)."""
