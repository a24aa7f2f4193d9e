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
    "allow_unspec_int_on_nn_module",
    "allow_rnn",
)
"""`torch._dynamo.config` options the suggestion rules name (the facts say which exist)."""


@dataclass
class RepeatedGroup:
    """Modules of one class and structure worth compiling one by one: siblings in a container
    (`layers.0` ... `layers.N`), or the blocks the model itself declares, wherever they sit."""

    container: str
    """Their common parent (`""`: the root, or blocks spread over the tree)."""
    class_name: str
    paths: list[str]
    declared: str | None = None
    """The model's own attribute that names the class (`_repeated_blocks`: diffusers; `_no_split_modules`:
    transformers); None: found by structure."""
    parameters: int = 0
    """Their parameters together."""


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
    arg_shapes: dict[str, list[tuple[int, ...] | None]] = field(default_factory=dict)
    """Each tensor argument's shape in each call, in order (None: not a tensor, or absent, in that call)."""
    compile_repeated_blocks: bool = False
    """The model has diffusers' `compile_repeated_blocks()`, which compiles its declared blocks."""
    shares: dict[str, float] = field(default_factory=dict)
    """Module path -> its share of the model: of the parameters, or of the modules when it has none.
    Leaving a module that is nearly all of the model eager is turning compilation off, not a workaround."""

    def tied_dims(self, argument: str, dim: int) -> dict[str, list[int]]:
        """Tensor arguments whose dimension takes the same sizes as `argument`'s `dim`, call after call,
        when those sizes change (`input_ids`, `labels`, `attention_mask` dim 1): argument -> dims, the
        given one first. One changing length, one recompile cause: marked dynamic together, or the
        ones left static specialize the marked one (`ConstraintViolationError`)."""
        shapes = self.arg_shapes.get(argument, [])
        if not shapes or any(s is None or dim >= len(s) for s in shapes):
            return {argument: [dim]}
        sizes = [s[dim] for s in shapes if s is not None]
        tied: dict[str, list[int]] = {argument: [dim]}
        if len(set(sizes)) < 2:
            return tied
        for other, other_shapes in self.arg_shapes.items():
            if other == argument or len(other_shapes) != len(shapes) or any(s is None for s in other_shapes):
                continue
            dims = [d for d in range(min(len(s) for s in other_shapes if s is not None)) if [s[d] for s in other_shapes if s] == sizes]
            if dims:
                tied[other] = dims
        return tied

    def varying_dims(self) -> dict[str, list[int]]:
        """Tensor arguments and the dims whose size changes from call to call, never taking 0 or 1 (torch
        specializes those): what `mark_dynamic` can hold, all of them marked together."""
        out: dict[str, list[int]] = {}
        for argument, shapes in self.arg_shapes.items():
            if len(shapes) < 2 or any(s is None for s in shapes) or len({len(s) for s in shapes if s is not None}) != 1:
                continue
            known = [s for s in shapes if s is not None]
            dims = [d for d in range(len(known[0])) if len({s[d] for s in known}) > 1 and min(s[d] for s in known) > 1]
            if dims:
                out[argument] = dims
        return out
