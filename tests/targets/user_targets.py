"""Builders used by the CLI tests as TARGETs (`user_targets:NAME`, with tests/targets on PYTHONPATH)."""

import sys
import time

import torch
from torch import nn

from ctc_doctor import Workload

NOT_CALLABLE = 42


class Printer(nn.Module):
    def forward(self, x):
        print("the model talks on stdout", x.shape)
        return x * 2


def printing_model():
    return Printer(), (torch.randn(2, 3),)


def with_variants():
    return nn.Linear(4, 4), (torch.randn(2, 4),), [(torch.randn(5, 4),)]


def wrong_return():
    return nn.Linear(4, 4)


def needs_argument(size):
    return nn.Linear(size, size), (torch.randn(2, size),)


def raises():
    config = {"hidden": 8}
    return nn.Linear(config["hiddn"], 8), ()  # a typo in the user's builder


def _backend(name):
    """`torch._dynamo.register_backend`, once per process: this file may be imported twice in one (by module
    name, `user_targets:...`, and by path, `.../user_targets.py:...`), and torch refuses a name twice."""

    def register(fn):
        if name not in torch._dynamo.list_backends(exclude_tags=()):
            torch._dynamo.register_backend(fn, name=name)
        return fn

    return register


class BrokenInEager(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


def fails_in_eager():
    return BrokenInEager(), (torch.randn(2, 5),)  # wrong feature size


@_backend("ctc_test_crashing")
def crashing_backend(gm, example_inputs):
    raise RuntimeError("backend exploded on purpose")


@_backend("ctc_test_hanging")
def hanging_backend(gm, example_inputs):
    time.sleep(600)
    return gm


def small():
    return Workload(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(2, 4),), name="small")


class SlowToTrace(nn.Module):
    """Cheap in eager (a pure-Python loop, ~20 ms); Dynamo unrolls it one bytecode at a time (minutes)."""

    def forward(self, x):
        n = 0
        for i in range(400_000):
            n += i & 1
        return x + n


class HangsWhileTracing(nn.Module):
    def __init__(self):
        super().__init__()
        self.before = nn.Linear(4, 4)
        self.slow = SlowToTrace()
        self.after = nn.Linear(4, 4)

    def forward(self, x):
        return self.after(self.slow(self.before(x)))


def hangs_while_tracing():
    return HangsWhileTracing(), (torch.randn(2, 4),)


@_backend("ctc_test_segfault")
def segfault_backend(gm, example_inputs):
    import ctypes

    print("ctc_test: compiling, segfaulting", file=sys.stderr, flush=True)
    ctypes.string_at(0)  # SIGSEGV: only an isolated trial survives this
    return gm


def _placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


@_backend("ctc_test_regional_segfault")
def regional_segfault_backend(gm, example_inputs):
    """SIGSEGV on the graph of one `CrashBlock` compiled on its own (regional compilation, where the
    block is `self`); every other graph runs eagerly."""
    import ctypes

    if any(name.lower().startswith("l_self_modules_crashy") for name in _placeholders(gm)):
        print("ctc_test: one block compiled alone, segfaulting", file=sys.stderr, flush=True)
        ctypes.string_at(0)
    return gm


@_backend("ctc_test_regional_allocates")
def regional_allocates_backend(gm, example_inputs):
    """Each `CrashBlock` compiled on its own (regional compilation) runs with a 2 GB scratch buffer, written
    (resident); every other graph runs as traced: the arm that needs more than the workload's own."""
    if not any(name.lower().startswith("l_self_modules_crashy") for name in _placeholders(gm)):
        return gm

    def run(*args):
        scratch = torch.ones(2**29)  # 2 GB of float32, every page written
        return gm(*args) if scratch[-1] == 1 else None

    return run


@_backend("ctc_test_arm_crashes")
def arm_crashes_backend(gm, example_inputs):
    """SIGABRT on the whole `CrashesByArm` model's graph (the compiled arm), SIGSEGV on one block's (regional)."""
    import os

    names = _placeholders(gm)
    if any("modules_head" in name for name in names):
        print("ctc_test: the whole model compiled, aborting", file=sys.stderr, flush=True)
        os.abort()
    return regional_segfault_backend(gm, example_inputs)


class CrashBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.crashy = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.crashy(x)) + x


class CrashesByArm(nn.Module):
    """Three repeated blocks and a head: fine eagerly and compiled whole with `ctc_test_regional_segfault`,
    a segfault when the blocks are compiled one by one."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(CrashBlock() for _ in range(3))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def crashes_by_arm():
    return CrashesByArm(), (torch.randn(2, 8),)


def one_linear():
    return nn.Linear(4, 4), (torch.randn(2, 4),)


def plain_function():
    def double(x):
        return x * 2

    return double, (torch.randn(2),)



def fails_when_rebuilt():
    """Builds in the analysing process, raises in the child of isolated trials or arms (data only the parent has)."""
    if sys.argv[0].endswith(("/workers/trial.py", "/workers/bench.py")):
        raise RuntimeError("the dataset is only mounted in the parent")
    return printing_model()


def sleeps_in_build():
    """A builder that never returns: only the sweep's hard stop ends it (the analysis' --timeout starts later)."""
    import time

    time.sleep(3600)



@_backend("ctc_test_no_tanh")
def no_tanh_backend(gm, example_inputs):
    """A backend whose code generation fails on one operation, as an inductor lowering bug does: a graph
    with `tanh` raises, every other graph runs as it is."""
    if any(node.op == "call_function" and node.target is torch.tanh for node in gm.graph.nodes):
        raise NotImplementedError("no lowering for tanh (on purpose)")
    return gm.forward


class TanhAct(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2  # the backend's failing operation


class WithTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = TanhAct()
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        return self.out(self.act(self.fc(x)))


def with_tanh():
    """One submodule whose operation `ctc_test_no_tanh` cannot compile; each build appended to the file
    $CTC_TEST_BUILDS names, when set (the building process's pid)."""
    import os

    if os.environ.get("CTC_TEST_BUILDS"):
        with open(os.environ["CTC_TEST_BUILDS"], "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    return WithTanh(), (torch.randn(2, 8),)


class _LongTrace(nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k

    def forward(self, x):
        for _ in range(1500):  # compiles whole, but tracing it takes a while: a slow trial
            x = x + self.k
        return x


def slow_trials():
    """Six blocks (each its own constant: no two judged alike) whose fullgraph trials pass after a long
    trace: a bisection that runs for seconds, to be stopped in the middle."""
    return nn.Sequential(*[_LongTrace(float(i)) for i in range(6)]), (torch.randn(2, 4),)


@_backend("ctc_test_no_where")
def no_where_backend(gm, example_inputs):
    """aot_eager, except on a graph that holds `torch.where`: a backend that fails on one operation (as
    inductor fails on some with dynamic shapes), which Dynamo and AOTAutograd alone compile fine."""
    if any(n.target in (torch.where, torch.ops.aten.where.self) for n in gm.graph.nodes):
        raise RuntimeError("ctc_test_no_where: torch.where is not supported by this backend")
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


class FourProblems(nn.Module):
    """A print, a data-dependent `if`, an `.item()`, a Python int that changes and a batch size that changes:
    four fixes applied together, of which the `torch.where` one breaks the compile on `ctc_test_no_where`."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, scale):
        print("input", tuple(x.shape))
        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        peak = h.abs().max().item()
        return h * scale / (1.0 + peak)


def four_problems():
    torch.manual_seed(0)
    calls = [(torch.randn(b, 8), s) for b, s in ((4, 1), (4, 2), (4, 3), (5, 3), (6, 3), (7, 3))]
    return Workload(FourProblems(), calls[0], variants=calls[1:], name="four_problems")


class AsksSignature(nn.Module):
    """Reads the signature of one of its own methods that was compiled on its own, as Lightning's `self.log`
    does of a compiled `training_step` (`is_param_in_hook_signature`). torch 2.13's Dynamo crashes tracing it
    (InternalTorchDynamoError: 'method' object has no attribute '__dict__'): a crash in Dynamo, before any graph."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.step = torch.compile(self.step, backend="eager")

    def step(self, x, batch_idx):
        return x

    def forward(self, x):
        import inspect

        if "dataloader_iter" in inspect.getfullargspec(self.step).args:  # BREAK:signature
            x = x * 2
        return self.proj(x)


class SignatureModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), nn.Sequential(AsksSignature(), nn.ReLU()))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def asks_signature():
    torch.manual_seed(0)
    return Workload(SignatureModel(), (torch.randn(4, 8),), name="asks_signature")


class EagerOnlyCheck(nn.Module):
    """Checks its input's values, but only outside torch.compile (as transformers' mask code does): the
    compiled run never reads a value, the eager pass does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if not torch.compiler.is_compiling() and bool(torch.isnan(x).any()):  # BREAK:eager_only
            raise ValueError("NaN in the input")
        print("forward")
        return self.fc(x)


def eager_only_check():
    torch.manual_seed(0)
    return Workload(EagerOnlyCheck(), (torch.randn(4, 8),), variants=[(torch.randn(6, 8),)], name="eager_only_check")


def too_big_for_this_machine():
    """A 2 x 50k x 50k linear stack: 20 GB of float32 weights, built only on meta (`--weights none`)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(50_000, 50_000, bias=False), nn.Linear(50_000, 50_000, bias=False))
    return Workload(model, (torch.randn(2, 50_000),), variants=[(torch.randn(3, 50_000),)], name="too_big")


def llama_kv_cache(layers=6, hidden=256):
    """A transformers Llama that prefills with its KV cache (random weights, nothing downloaded): on meta
    tensors Dynamo cannot fake the empty tensor `DynamicCache` makes, so `--weights none` stops and runs a
    2-layer real twin instead. Two prompt lengths: a recompile on dim 1."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
    )
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 512, (1, 16))
    longer = {"input_ids": torch.randint(0, 512, (1, 24)), "use_cache": True}
    return Workload(model, kwargs={"input_ids": ids, "use_cache": True}, variants=[longer], name="llama_kv")


def llama_kv_cache_twin():
    """`llama_kv_cache`'s 2-layer twin, built directly (what `--weights none` runs after its stop)."""
    return llama_kv_cache(layers=2)
