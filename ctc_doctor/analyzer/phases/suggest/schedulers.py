"""A diffusion scheduler inside the compiled code: its breaks and recompiles have one answer.

diffusers' schedulers (`EulerDiscreteScheduler.step`, `scale_model_input`...) find their step index with
`nonzero()` and `.item()` (graph breaks) and count steps in a Python int, `_step_index` (a recompile per
step until the frame settles). They are plain Python objects, not modules: torch's option for a module's
integer attributes does not reach them, and their code is the library's. diffusers' own pipelines compile
the denoiser and run the scheduler eagerly; that is the advice, for every break and recompile whose frame
is a scheduler's.
"""

from __future__ import annotations

from ....reports import models as rm
from ....reports.links import DOCS
from .base import RuleContext

_SCHEDULERS = "diffusers/schedulers/"


def scheduler_frame(frames: list[rm.Frame]) -> rm.Frame | None:
    """The innermost frame in a diffusers scheduler's code, if any."""
    return next((f for f in reversed(frames) if _SCHEDULERS in f.file.replace("\\", "/")), None)


def in_scheduler(recompile: rm.Recompile) -> bool:
    """Whether the recompiled frame is a scheduler's method (or Dynamo's resume function in one)."""
    return _SCHEDULERS in recompile.file.replace("\\", "/")


def scheduler_suggestion(ctx: RuleContext, applies: list[str], frame: rm.Frame | None = None) -> None:
    """One suggestion for all of a scheduler's breaks and recompiles (`suggest` merges their `applies_to`)."""
    at = f" (`{frame.file.rsplit('/', 1)[-1]}:{frame.line}`, in `{frame.function}`)" if frame else ""
    ctx.add(
        "scheduler-eager",
        "Compile the denoiser, not the scheduler: call `scheduler.step` outside the compiled code",
        f"The scheduler's own code{at} runs inside the compiled function. diffusers' schedulers look up their step "
        "index with `nonzero()` and `.item()`, which break the graph, and count steps in a Python integer "
        "(`_step_index`), which Dynamo bakes into the graph: each new step recompiles until the frame settles or "
        "hits the recompile limit. A scheduler is a plain object, not a module, so no module option reaches it, "
        "and the code is the library's. diffusers' pipelines compile the denoiser (`unet`, `transformer`) and run "
        "the scheduler eagerly: its arithmetic costs little next to the denoiser's.",
        "source_edit",
        applies,
        snippet="unet = torch.compile(unet)  # or pipe.unet.compile(); pipe.transformer.compile_repeated_blocks()\n"
        "for t in scheduler.timesteps:\n"
        "    noise = unet(scheduler.scale_model_input(latents, t), t, encoder_hidden_states=text).sample\n"
        "    latents = scheduler.step(noise, t, latents).prev_sample  # eager",
        references=[DOCS["troubleshooting"]],
    )
