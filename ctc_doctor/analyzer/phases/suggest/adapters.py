"""The adapter rule: recompiles whose guards sit on a LoRA structure (PEFT's, which diffusers and
transformers use), answered with the recipes that hold: load every adapter before compiling, or prepare the
model for hotswapping before the first load and swap adapters in place after it (no recompile)."""

from __future__ import annotations

from ....reports.advice.guard_kinds import adapter_change
from ....reports.links import DOCS
from .base import Failures, RuleContext


def adapter_rule(ctx: RuleContext, failures: Failures) -> None:
    """One suggestion per recipe for the adapter changes the failed guards show."""
    applies = failures.ids()
    changes = list(dict.fromkeys(adapter_change(g.reason) for _, g in failures.items))
    shown = " / ".join(changes)
    structure = any(c in ("added or removed", "switched", "changed") for c in changes)
    if structure:
        ctx.add(
            "adapters-before-compile",
            "Load every LoRA adapter before compiling the model",
            f"An adapter was {shown} after the model was compiled. The compiled code guards on the adapter structure "
            "(how many adapters each LoRA layer holds, which one is active), so each change recompiles every frame "
            "that reads it, and switching back and forth reaches the recompile limit. Loaded before the compile, the "
            "adapters are part of what was compiled.",
            "source_edit",
            applies,
            snippet="pipe.load_lora_weights(path_a, adapter_name='a')\npipe.load_lora_weights(path_b, adapter_name='b')\n"
            "pipe.unet.compile()  # or pipe.transformer: compile once every adapter is in",
            references=[DOCS["troubleshooting"]],
        )
    if structure or "rescaled" in changes:
        _hotswap(ctx, applies)
    if "made trainable (or frozen)" in changes and not structure:  # a new adapter's weights: part of adding it
        ctx.add(
            "adapter-requires-grad",
            "Set the adapters' requires_grad before compiling (an adapter added trainable changes it)",
            "A LoRA weight whose requires_grad changes between calls recompiles every frame that reads it: an adapter "
            "added trainable after compile, or frozen by the training loop. Freeze or unfreeze them before the first "
            "compiled call.",
            "source_edit",
            applies,
            snippet="for name, p in model.named_parameters():\n    if 'lora_' in name:\n"
            "        p.requires_grad_(False)  # or True, before compiling",
            references=[DOCS["troubleshooting"]],
        )


def _hotswap(ctx: RuleContext, applies: list[str]) -> None:
    """The hotswap recipe (diffusers' and PEFT's spelling): what holds for adding, switching and rescaling
    (tests/targets/adapter_targets.py:hotswapped compiles once for all three). The rank is the largest the
    script loaded when `run` saw it."""
    seen = ctx.report.lora_rank
    rank, why = (seen, "the largest rank your script loaded") if seen else (64, "the largest rank of your adapters")
    ctx.add(
        "lora-hotswap",
        "Prepare the model for hotswapping before the first adapter, then swap adapters in place",
        "Hotswapping replaces an adapter's weights in the layers the compiled code already has: nothing it guards on "
        "changes, so nothing recompiles. Prepare before the first load with the largest rank of your adapters (smaller "
        "ones are padded); the preparation also turns the scales into tensors, so a scale changed in place recompiles "
        "nothing either (`set_adapters(..., weights)` assigns a plain float, which does). `ctc-doctor run --compare "
        "default,hotswap` replays your script with the recipe applied to diffusers' loaders and measures it.",
        "source_edit",
        applies,
        snippet=f"# diffusers\npipe.enable_lora_hotswap(target_rank={rank})  # {why}\n"
        "pipe.load_lora_weights(path_a, adapter_name='default')\npipe.unet.compile()\n"
        "pipe.load_lora_weights(path_b, adapter_name='default', hotswap=True)\n"
        "scaled = [m for m in pipe.unet.modules() if 'default' in getattr(m, 'scaling', {})]\n"
        "base = [m.scaling['default'].item() for m in scaled]  # after each swap: the adapter's own scale\n"
        "for m, scale in zip(scaled, base):\n    m.scaling['default'].fill_(scale * 0.5)  # a new weight, in place\n"
        "# PEFT\nfrom peft.utils.hotswap import hotswap_adapter, prepare_model_for_compiled_hotswap\n"
        f"prepare_model_for_compiled_hotswap(model, target_rank={rank})\nmodel = torch.compile(model)\n"
        "hotswap_adapter(model, path_b, adapter_name='default')",
        references=[DOCS["troubleshooting"]],
    )
