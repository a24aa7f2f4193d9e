"""The project's vocabulary, each concept defined once: torch.compile's modes, the benchmark's optional
arms, `run --compare`'s strategies. The CLI's choices, checks and help texts, the analyzer and the
report read them from here, and a test keeps the docs' tables true to them (torch-free: `--help` reads
it). Each entry maps a name to what the help says of it (empty: the name says it all).
"""

from __future__ import annotations

MODES: dict[str, str] = {
    "default": "",
    "reduce-overhead": "",
    "max-autotune": "",
    "max-autotune-no-cudagraphs": "",
}
"""torch.compile's modes (inductor)."""

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
"""The modes whose compiled code runs under CUDA graph trees."""

BENCH_MODES = ("default", "reduce-overhead", "max-autotune")
"""What `--mode` takes: the benchmark's own mode (each other mode is an arm of its own with `--modes`)."""

ARMS: dict[str, str] = {
    "compiled_optimizer": "",
    "compiled_fixed": "",
    "fixed": "each fix alone",
    "regional": "",
    "regional_fixed": "",
    "modular": "",
    "submodules": "the clean submodules compiled alone (a compile-submodules suggestion)",
    "dynamic": "",
    "marked": "",
    "padded": "",
    "aot": "",
    "aot_regional": "",
    "aot_fixed": "",
}
"""The benchmark's optional arms, as `--arms` names them (`fixed`: every per-fix arm); `eager`, `compiled`
and the `--modes` arms always run when they apply."""

TRAINING_OPT_IN = ("compiled_optimizer", "fixed", "modular")
"""Training-step arms measured only when asked for (`--arms`): each is one more cold compile of the whole
training step (forward, backward and the optimizer's step)."""

STRATEGIES: dict[str, str] = {
    "eager": "",
    "default": "the script's own",
    "optimizer": "its own, and each optimizer's step compiled",
    "dynamic": "",
    "mark-dynamic": "the dims its own run saw vary",
    "static": "",
    "inner": "the module inside a compiled DDP wrapper compiled instead: DDP(torch.compile(model))",
    "submodules": "the compiled module's own submodules compiled instead of it (self.net = torch.compile(self.net))",
    "hotswap": "its own, with diffusers' LoRA hotswap: later adapters swapped into the first one's place",
    **{mode: "" for mode in MODES if mode != "default"},
}
"""`run --compare`'s ways of compiling the script: not at all (its compiled objects are still watched,
for their pace), its own options, its own plus `opt.step = torch.compile(opt.step)` for every optimizer
it creates, `dynamic=True`, the dims its own run saw vary marked dynamic before each call,
`dynamic=False`, the module inside a compiled DDP wrapper compiled instead of the wrapper (`inner`:
`DDP(torch.compile(model))` for `torch.compile(DDP(model))`), its direct submodules with parameters
compiled in its place, its own code eager (`submodules`: a LightningModule's `self.net =
torch.compile(self.net)`), diffusers' LoRA hotswap recipe applied to its
adapter loads (`hotswap`), or a mode for every torch.compile."""


def listed(entries: dict[str, str]) -> str:
    """`eager, default (the script's own), optimizer (...)`: the names, each with what it means when it says."""
    return ", ".join(f"{name} ({meaning})" if meaning else name for name, meaning in entries.items())
