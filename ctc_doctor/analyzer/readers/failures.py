"""What a known runtime failure of compiled code means, and what to do (an error row's `hint`).

Matched on the error's text, as a user would read it: torch's exception names and messages are
stable enough across versions for that, and a failure that matches nothing keeps its message alone.
Torch-free.
"""

from __future__ import annotations

_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("overwritten by a subsequent run",),
        'CUDA graphs (mode="reduce-overhead") reuse their output memory at the next replay, and a kept output '
        "was read after it: call `torch.compiler.cudagraph_mark_step_begin()` before each step, clone the "
        "outputs you keep (`out.clone()`), or remove a double compile (a CUDA-graphs compile wrapping another "
        "compile of the same forward)",
    ),
    (
        ("ConstraintViolationError", "Constraints violated"),
        "a dimension marked dynamic (`torch._dynamo.mark_dynamic`) had to take one value: the code needs "
        "it (a branch such as `if x.shape[0] == 4`), it is 0 or 1 (torch specializes those sizes), or it "
        "must equal another input's dimension; drop that mark, mark tied dimensions of every input "
        "together, or use `torch._dynamo.maybe_mark_dynamic`",
    ),
    (
        ("FailOnRecompileLimitHit", "recompile_limit", "cache_size_limit"),
        "a function hit the recompile limit (`torch._dynamo.config.recompile_limit`, 8 by default): remove "
        "the cause of its recompiles (the report's recompile causes) rather than raising the limit",
    ),
    (
        ("InternalTorchDynamoError",),
        "an internal error of torch's Dynamo, not of your code: try a newer torch, and compile less (one "
        "compile of the forward, not two nested) until it is fixed",
    ),
    (
        ("BackendCompilerFailed",),
        "the backend failed to compile a graph Dynamo captured: run with `--backend aot_eager` to tell a "
        "Dynamo problem from an inductor one, then report the failing graph upstream",
    ),
    (
        ("OutOfMemoryError", "CUDA out of memory"),
        'out of GPU memory: a smaller batch, `mode="max-autotune-no-cudagraphs"` instead of CUDA graphs '
        "(which keep their memory pools), or fewer recompiles (each keeps its own graphs)",
    ),
)


def failure_hint(message: str | None) -> str | None:
    """The hint for the first known failure the message shows, or None."""
    if not message:
        return None
    return next((hint for needles, hint in _HINTS if any(n in message for n in needles)), None)
