"""PyTorch's own failures, ready to file.

When a compile crashes inside torch (`BackendCompilerFailed`, `InternalTorchDynamoError`, an inductor
lowering error), the user's code is not what is wrong, and the user should not have to do torch's
triage. Given the module and one call that crash, this:

1. compiles it with the cheaper backends first (`eager`: Dynamo only; `aot_eager`: Dynamo and
   AOTAutograd; then the backend that crashed), so the report says which stage fails;
2. keeps the FX graph the failing backend was handed (a wrapper around it), cuts it after each operation
   in turn (a binary search over the prefixes) and finds the first whose graph fails: its stack trace names
   the user's line; a crash while Dynamo builds a guard names the guard, its object and the code that raised;
3. writes a standalone repro of that cut graph (torch only: the graph as a `Repro` module, torch's own
   minifier printer, random inputs of the same shapes, the same config and backend), runs it under
   plain `python` in a fresh process and keeps whether it failed the same way;
4. writes the text of an issue: title, what fails, the repro, the error, what was tried, versions.

A workaround is the caller's: the fix phase names the fix verified in place of the one that crashed;
`triage.around` checks, on the user's own calls and compile, the changes that step around the failing stage.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reports import models as rm
from .. import torch_internals as ti
from ..readers.sources import classify_file, is_dynamo_file

TORCH_FAILURES = (
    "BackendCompilerFailed",
    "InternalTorchDynamoError",
    "LoweringException",
    "InductorError",
    "torch._inductor.exc",
)
"""Error texts that say the compile crashed inside torch (not an `Unsupported` break, not the user's error)."""

STAGES = {"eager": "Dynamo", "aot_eager": "AOTAutograd"}
"""The stage a backend adds over the one before it."""
TRIAGE_MIN_S = 120.0
"""Seconds the triage of a crash inside torch needs at least (a few compiles, a repro run)."""
REPRO_TIMEOUT_S = 180.0
"""A repro that neither fails nor passes in this long is not verified."""
REDUCE_BUDGET_S = 60.0
"""The search for the triggering operation stops after this long (the whole graph is the repro then)."""


def is_torch_failure(message: str | None) -> bool:
    """Whether an error's text says the compile crashed inside torch."""
    return bool(message) and any(needle in message for needle in TORCH_FAILURES)  # type: ignore[operator]


def stage_of(backend: str) -> str:
    """`Dynamo`, `AOTAutograd`, or `the backend (inductor)`."""
    return STAGES.get(backend, f"the backend ({backend})")


def innermost(exc: BaseException) -> BaseException:
    """The error under torch's wrappers (`BackendCompilerFailed.inner_exception`, the cause chain)."""
    seen = {id(exc)}
    while True:
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def error_line(exc: BaseException) -> str:
    """`AttributeError: type object ... 'python_mod'`: the innermost error, first line."""
    inner = innermost(exc)
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0] if text else ''}".strip()[:400]


class CatchingBackend:
    """A backend that keeps the graph (and its inputs) its inner backend raised on."""

    def __init__(self, backend: str) -> None:
        self.name = backend
        self.inner = ti.lookup_backend(backend)
        self.tuning: dict[str, Any] = {}
        """The compile's `mode` and `options`, where they reach the backend (inductor's)."""
        self.failed: tuple[torch.fx.GraphModule, list[Any], BaseException] | None = None
        self.graphs = 0
        """Graphs Dynamo handed it (recompiled ones included)."""

    def __repr__(self) -> str:
        return self.name

    def compile(self, fn: Any, mode: str | None = None, options: dict[str, Any] | None = None, **kw: Any) -> Any:
        """`torch.compile(fn, mode=..., options=..., **kw)` through this backend: mode and options go to
        inductor as torch.compile would hand them (the other backends take none)."""
        if self.name == "inductor" and (mode or options):
            self.inner = ti.tuned_backend(self.name, mode, options, kw.get("dynamic"))
            self.tuning = {k: v for k, v in (("mode", mode), ("options", options)) if v}
        return torch.compile(fn, backend=self, **kw)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        self.graphs += 1
        try:
            return self.inner(gm, example_inputs, **kwargs)
        except Exception as exc:
            if self.failed is None:
                self.failed = (gm, list(example_inputs), exc)
            raise


@dataclass
class Attempt:
    """One backend tried on the module and its call."""

    backend: str
    error: BaseException | None = None
    graph: tuple[torch.fx.GraphModule, list[Any], BaseException] | None = None
    graphs: int = 0
    """Graphs compiled on the way (recompiled ones included)."""
    tuning: dict[str, Any] = field(default_factory=dict)
    """The inductor `mode`/`options` the compile passed (the failing graph's repro passes them too)."""

    def line(self) -> str:
        what = "Dynamo only" if self.backend == "eager" else stage_of(self.backend)
        return f"{self.backend} ({what}): " + ("compiles and runs" if self.error is None else error_line(self.error))


@contextlib.contextmanager
def _quiet_compile(config: dict[str, Any]) -> Iterator[None]:
    with ti.preserved_dynamo_state(), ti.dynamo_config(config), ti.quiet_torch_stderr(True):
        ti.fresh_dynamo_state()
        try:
            yield
        finally:
            ti.reset_dynamo_quietly()


def attempt(run: Callable[[Callable[..., Any]], Any], backend: str, config: dict[str, Any]) -> Attempt:
    """`run(compile)` with `compile` = `torch.compile` on `backend` behind a catching wrapper."""
    catcher = CatchingBackend(backend)
    out = Attempt(backend)
    try:
        with _quiet_compile(config):
            run(catcher.compile)
    except Exception as exc:  # noqa: BLE001 - the failure is what is being looked at
        out.error = exc
        out.graph = catcher.failed
    out.graphs, out.tuning = catcher.graphs, catcher.tuning
    return out


def stages(run: Callable[[Callable[..., Any]], Any], backend: str, config: dict[str, Any]) -> list[Attempt]:
    """The cheaper backends, then `backend`, up to the first that fails."""
    attempts = []
    for name in dict.fromkeys(("eager", "aot_eager", backend)):
        tried = attempt(run, name, config)
        attempts.append(tried)
        if tried.error is not None:
            break
    return attempts


# --- the failing graph, cut down -------------------------------------------------------------------


def concrete(value: Any) -> Any:
    """A graph input as a plain value for an eager-compiled repro: a SymInt's hint, a detached tensor."""
    hint = ti.symint_hint(value)
    if hint is not None:
        return hint
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value


def compute_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]


def cut_after(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.GraphModule:
    """The graph up to `node`, returning its value (every input kept, so the same inputs fit it)."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        if n.op == "output":
            break
        env[n] = graph.node_copy(n, lambda x: env[x])
        if n is node:
            break
    graph.output((env[node],))
    cut = torch.fx.GraphModule(gm, graph)
    cut.graph.eliminate_dead_code()
    cut.recompile()
    return cut


@dataclass
class Reduced:
    """The failing graph cut after the first operation that makes it fail."""

    graph: torch.fx.GraphModule
    node: torch.fx.Node | None
    """The triggering operation (None: the search did not narrow it down)."""
    tries: int = 0


def reduce_graph(gm: torch.fx.GraphModule, args: list[Any], fails: Callable[[torch.fx.GraphModule], bool], budget_s: float) -> Reduced:
    """The shortest prefix of the graph that still fails (`fails(prefix)`), by binary search over the
    operations: the last operation of that prefix is the one that triggers the failure (a failure that
    needs two operations apart is pinned at the later one)."""
    nodes = compute_nodes(gm)
    if not nodes:
        return Reduced(gm, None)
    lo, hi, tries = 0, len(nodes) - 1, 0  # nodes[hi] cuts a failing graph (the whole one: assumed)
    end = time.perf_counter() + budget_s
    found = False
    while lo < hi and time.perf_counter() < end:
        mid = (lo + hi) // 2
        tries += 1
        try:
            failing = fails(cut_after(gm, nodes[mid]))
        except Exception:  # noqa: BLE001 - a cut that cannot even be built: not a failure of torch's
            failing = False
        if failing:
            hi, found = mid, True
        else:
            lo = mid + 1
    if not found:  # the whole graph cut after its last operation: check it fails alone
        tries += 1
        with contextlib.suppress(Exception):
            found = fails(cut_after(gm, nodes[hi]))
    if not found:
        return Reduced(gm, None, tries)
    return Reduced(cut_after(gm, nodes[hi]), nodes[hi], tries)


def compile_graph(
    gm: torch.fx.GraphModule,
    args: list[Any],
    backend: str,
    config: dict[str, Any],
    dynamic: bool | None,
    tuning: dict[str, Any] | None = None,
) -> None:
    """What the repro does: the graph module compiled with `backend` (and inductor's `tuning`: mode,
    options) and called once."""
    with _quiet_compile(config), torch.no_grad():
        torch.compile(gm, backend=backend, dynamic=dynamic, **(tuning or {}))(*args)


# --- the repro and the issue ---------------------------------------------------------------------


def _arg_code(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype, shape, device = value.dtype, tuple(value.shape), str(value.device)
        if value.is_floating_point() or value.is_complex():
            return f"torch.randn({shape!r}, dtype={dtype}, device={device!r})"
        if dtype == torch.bool:
            return f"torch.zeros({shape!r}, dtype=torch.bool, device={device!r})"
        return f"torch.zeros({shape!r}, dtype={dtype}, device={device!r})"
    return repr(value)


_REPRO = '''\
"""A crash inside torch.compile, reduced by ctc-doctor {version} from {where}.

{stage} fails on this graph: {error}
Run with plain `python`: it exits with that error while the bug is there, and prints "ran" once fixed.
Its inputs are random tensors of the shapes the failing call had.
"""

import torch
from torch import device, tensor  # noqa: F401 - names the graph's code may use

{config}
{source}

args = [{args}]
compiled = torch.compile(Repro(), backend={backend!r}, dynamic={dynamic!r}{tuning})
with torch.no_grad():
    compiled(*args)
print("ran: no failure on this torch")
'''


def backend_owner(backend: str) -> tuple[str | None, str | None]:
    """(who registered `backend`, the repro's lines that import it) when it is not PyTorch's own; (None,
    None) for PyTorch's. A package's module (or package) is imported by name from its root's parent; a module
    loaded from a file (a TARGET file) is executed from that file; a backend defined in the script that runs
    (`run`) cannot be imported without running the script: (its file's name, None)."""
    try:
        fn = ti.lookup_backend(backend)
    except Exception:  # noqa: BLE001 - unknown to torch by name: nothing to import
        return None, None
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__module__", None) or ""
    if name == "torch" or name.startswith("torch."):
        return None, None
    if name in ("", "__main__"):
        code = getattr(fn, "__code__", None)
        return (os.path.basename(code.co_filename) if code is not None else "the script"), None
    file = getattr(sys.modules.get(name), "__file__", None)
    if file is None:
        return name, f"import {name}  # registers {backend!r}\n"
    file = os.path.abspath(file)
    package = os.path.basename(file) == "__init__.py"
    if "." in name or package:  # sys.path needs the folder that holds the top package
        root = os.path.dirname(file)
        for _ in range(name.count(".") + package):
            root = os.path.dirname(root)
        return name, f"import sys\n\nsys.path.insert(0, {root!r})\nimport {name}  # registers {backend!r}\n"
    stem = os.path.splitext(os.path.basename(file))[0]
    load = (
        f"import importlib.util  # {stem}.py registers {backend!r}\n\n"
        f"_spec = importlib.util.spec_from_file_location({stem!r}, {file!r})\n"
        "_spec.loader.exec_module(importlib.util.module_from_spec(_spec))\n"
    )
    return stem, load


UNIMPORTABLE = "the backend is defined in the script that ran ({owner}): paste its definition above `Repro` to run it"
"""The repro note when the backend cannot be imported by the repro."""


def check_repro(
    bug: rm.TorchBug,
    error_type: str,
    registered_by: str | None,
    importing: str | None,
    *,
    run: bool = True,
    timeout_s: float = REPRO_TIMEOUT_S,
) -> None:
    """`bug.repro` run under plain python (`run_repro`, with `run`) into `repro_verified` and `repro_note`;
    the note says why not when there is no repro (this torch cannot print the graph) or when its backend,
    registered by `registered_by` (`backend_owner`), is defined in the script and cannot be imported."""
    if bug.repro is None:
        bug.repro_note = "this torch cannot print the graph as a module (torch._dynamo.debug_utils.NNModuleToString)"
    elif registered_by is not None and importing is None:
        bug.repro_note = UNIMPORTABLE.format(owner=registered_by)
    elif run:
        bug.repro_verified, bug.repro_note = run_repro(bug.repro, error_type, timeout_s)


def repro_text(
    gm: torch.fx.GraphModule,
    args: list[Any],
    backend: str,
    config: dict[str, Any],
    dynamic: bool | None,
    *,
    where: str,
    stage: str,
    error: str,
    importing: str | None = None,
    tuning: dict[str, Any] | None = None,
) -> str | None:
    """The standalone repro script of a graph (None where this torch cannot print the graph); `importing`:
    the lines that register a backend that is not PyTorch's (`backend_owner`); `tuning`: inductor's mode
    and options the failing compile passed."""
    from ...version import __version__

    source = ti.graph_module_source(gm)
    if source is None:
        return None
    settings = "\n".join(f"torch._dynamo.config.{k} = {v!r}" for k, v in config.items() if isinstance(v, (bool, int, float, str)))
    text = _REPRO.format(
        version=__version__,
        where=where,
        stage=stage,
        error=error.replace('"""', "'''"),
        config=settings,
        source=source.strip(),
        args=", ".join(_arg_code(a) for a in args),
        backend=backend,
        dynamic=dynamic,
        tuning="".join(f", {k}={v!r}" for k, v in (tuning or {}).items()),
    )
    return text.replace("import torch\n", f"import torch\n\n{importing}", 1) if importing else text


def run_repro(text: str, error_type: str, timeout_s: float = REPRO_TIMEOUT_S) -> tuple[bool | None, str | None]:
    """Run the repro under plain `python` in a fresh process: (True, None) when it fails with
    `error_type`, else (False, what it did) or (None, why it was not run)."""
    with tempfile.TemporaryDirectory(prefix="ctc-repro-") as tmp:
        path = os.path.join(tmp, "repro.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_LOGS", "TORCHDYNAMO", "PYTHONPATH"))}
        try:
            proc = subprocess.run([sys.executable, path], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"the repro ran past {timeout_s:.0f} s"
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 and error_type in output:
        return True, None
    last = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
    return False, f"the repro exited {proc.returncode}: {last[:200]}" if proc.returncode else "the repro ran without the failure"


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)\n\s*(?P<code>[^\n]*)')


def smallest_repro(
    bug: rm.TorchBug,
    whole: tuple[torch.fx.GraphModule, list[Any]],
    cut: tuple[torch.fx.GraphModule, list[Any]],
    fails: Callable[[torch.fx.GraphModule, list[Any]], bool],
    write: Callable[[torch.fx.GraphModule, list[Any]], str | None],
    check: Callable[[], None],
    deadline: float,
) -> None:
    """`bug.repro` from the smallest failing graph: torch's own minifier on `whole` with the triage's own test
    `fails` (the failing operation alone, with its own inputs), until `deadline`; the `cut` graph (cut after
    the triggering operation, every input of the graph kept) when the minifier does no better, stops with
    nothing or its repro, `write(graph, inputs)`, does not fail the same way under `check` (which runs it).
    `repro_nodes` and `repro_reducer` say which."""
    smallest = ti.minified(*whole, fails, deadline)
    if smallest is not None and len(compute_nodes(smallest[0])) < len(compute_nodes(cut[0])):
        bug.repro, bug.repro_nodes, bug.repro_reducer = write(*smallest), len(compute_nodes(smallest[0])), "torch's minifier"
        check()
    if bug.repro is None or bug.repro_verified is False:
        bug.repro, bug.repro_nodes, bug.repro_reducer = write(*cut), len(compute_nodes(cut[0])), "prefix cut"
        bug.repro_verified = bug.repro_note = None
        check()


def own_frame(frames: list[tuple[str, int, str]]) -> int | None:
    """The index of the innermost of the user's own frames among (file, line, function) frames, outermost
    first (the frames Dynamo was tracing), or None."""
    return next((i for i in range(len(frames) - 1, -1, -1) if classify_file(frames[i][0])[0]), None)


def traced_user_line(exc: BaseException) -> tuple[str | None, str | None]:
    """(`file:line`, code) of the innermost user frame Dynamo was tracing when `exc` escaped (a crash in
    tracing, before any graph), (None, None) when none is the user's."""
    import linecache

    frames = ti.traced_frames(exc)
    mine = own_frame(frames)
    if mine is None:
        return None, None
    file, line, _ = frames[mine]
    return f"{file}:{line}", linecache.getline(file, line).strip() or None


def user_line(node: torch.fx.Node | None, gm: torch.fx.GraphModule) -> tuple[str | None, str | None]:
    """(`file:line`, code) of the innermost frame outside torch in the operation's stack trace (the last
    operation of the graph when none is named)."""
    candidates = [node] if node is not None else list(reversed(compute_nodes(gm)))
    for n in candidates:
        trace = n.meta.get("stack_trace") or ""
        frames = [
            m for m in _FRAME.finditer(trace) if not is_dynamo_file(m.group("file")) and f"{os.sep}torch{os.sep}" not in m.group("file")
        ]
        if frames:
            last = frames[-1]
            return f"{last.group('file')}:{last.group('line')}", last.group("code").strip()
    return None, None


def operation_text(node: torch.fx.Node | None) -> str | None:
    """`add % 1000`: the operation as the graph's code reads it (its Python form)."""
    if node is None:
        return None
    name = getattr(node.target, "__name__", None) or str(node.target)
    symbols = {"mod": "%", "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "pow": "**"}
    args = [a.name if isinstance(a, torch.fx.Node) else repr(a) for a in node.args]
    if node.op == "call_function" and name in symbols and len(args) == 2:
        return f"{args[0]} {symbols[name]} {args[1]}"
    if node.op == "call_method":
        return f"{args[0]}.{name}({', '.join(args[1:])})" if args else f".{name}()"
    return f"{name}({', '.join(args)})"


def versions() -> str:
    device = f", CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", CPU only"
    return f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}{device}"


def issue_title(stage: str, error: str, operation: str | None, wrong: bool = False) -> str:
    """`wrong`: no crash, the stage computes the operation wrong."""
    if wrong:
        return f"torch.compile: {stage} computes `{operation}` wrong: {error}"[:200]
    on = f" on `{operation}`" if operation else ""
    return f"torch.compile: {stage} crashes{on}: {error}"[:200]


def issue_text(bug: rm.TorchBug) -> str:
    """A PyTorch issue's text, as its bug template asks: what fails, the repro, the error, versions."""
    trigger = f"\n\nThe operation that triggers it: `{bug.operation}`" if bug.operation else ""
    if bug.user_line:
        trigger += f" (from `{bug.user_code}` at {os.path.basename(bug.user_line)})" if bug.user_code else f" ({bug.user_line})"
    cut = (
        f" The graph is the failing one ({bug.graph_nodes} operations) cut down by torch's minifier "
        f"(`torch._functorch.fx_minifier`) to {bug.repro_nodes}."
        if bug.repro_reducer == "torch's minifier"
        else f" The graph is the failing one ({bug.graph_nodes} operations) cut after that operation ({bug.repro_nodes})."
        if bug.graph_nodes and bug.repro_nodes and bug.repro_nodes < bug.graph_nodes
        else ""
    )
    verified = {True: "It fails the same way under plain `python`.", False: f"Note: {bug.repro_note}.", None: ""}[bug.repro_verified]
    tried = "\n".join(f"- {t}" for t in bug.tried)
    repro = f"```python\n{bug.repro}```" if bug.repro else "(no standalone repro: the failure is in Dynamo's tracing of the user's code)"
    what = "gives wrong results" if bug.kind == "wrong_result" else "crashes"
    return (
        f"### 🐛 Describe the bug\n\n`torch.compile` {what} in {bug.stage}: {bug.error}{trigger}.{cut}\n\n"
        f"Standalone repro ({'torch only' if bug.owner is None else 'torch, and ' + bug.owner + ' for its backend'})"
        f"{'' if not verified else ' — ' + verified}\n\n{repro}\n\n"
        f"### Error logs\n\n```\n{bug.error}\n```\n\nWhat was tried (cheapest backend first):\n{tried}\n\n"
        f"### Versions\n\n{versions()}\n\n(Found and reduced by ctc-doctor.)\n"
    )


@dataclass
class Triage:
    """What was found about one crash inside torch."""

    attempts: list[Attempt] = field(default_factory=list)
    bug: rm.TorchBug | None = None
    module_path: str | None = None
    """The module the triggering operation ran in (None: the root, or not found)."""
    guard: ti.GuardCrash | None = None
    """A crash while Dynamo built a guard (tracing had finished): the guard and the object it read."""
    strategy: str | None = None
    """The `run --compare` strategy that applies the workaround found to a whole script (`static`)."""


def triage(
    run: Callable[[Callable[..., Any]], Any],
    backend: str,
    config: dict[str, Any],
    *,
    where: str,
    known: list[Attempt] | None = None,
    verify: bool = True,
) -> Triage:
    """Which stage fails (`known`: attempts already made, cheapest first), the triggering operation and
    user line, a verified repro and the issue text. `run(compile)` runs the user's module and call
    through `compile` (a `torch.compile` stand-in)."""
    attempts = known if known is not None else stages(run, backend, config)
    out = Triage(attempts)
    failed = next((a for a in attempts if a.error is not None), None)
    if failed is None or failed.error is None:
        return out
    error, stage = error_line(failed.error), stage_of(failed.backend)
    error_type = error.split(":", 1)[0]
    owner, importing = backend_owner(failed.backend)
    bug = rm.TorchBug(
        where=where, error=error, error_type=error_type, stage=stage, tried=[a.line() for a in attempts], issue_title="", owner=owner
    )
    if failed.graph is not None:
        gm, inputs, _ = failed.graph
        args = [concrete(v) for v in inputs]
        dynamic = True if any(ti.symint_hint(v) is not None for v in inputs) else None

        def fails_on(graph: torch.fx.GraphModule, inputs: list[Any]) -> bool:
            try:
                compile_graph(graph, inputs, failed.backend, config, dynamic, failed.tuning)
            except Exception as exc:  # noqa: BLE001 - the failure looked for
                return error_line(exc).split(":", 1)[0] == error_type
            return False

        deadline = time.monotonic() + REDUCE_BUDGET_S
        reduced = reduce_graph(gm, args, lambda graph: fails_on(graph, args), REDUCE_BUDGET_S)
        bug.graph_nodes = len(compute_nodes(gm))
        bug.operation = operation_text(reduced.node)
        out.module_path = module_of(reduced.node)
        bug.user_line, bug.user_code = user_line(reduced.node, gm)

        def repro_of(graph: torch.fx.GraphModule, inputs: list[Any]) -> str | None:
            return repro_text(
                graph,
                inputs,
                failed.backend,
                config,
                dynamic,
                where=where,
                stage=stage,
                error=error,
                importing=importing,
                tuning=failed.tuning,
            )

        smallest_repro(
            bug, (gm, args), (reduced.graph, args), fails_on, repro_of,
            lambda: check_repro(bug, error_type, owner, importing, run=verify), deadline,
        )  # fmt: skip
    elif (guard := ti.guard_crash(failed.error)) is not None:
        out.guard = guard
        guard_bug(bug, guard, failed.backend, verify)
    else:
        bug.repro_note = f"the failure is in {stage}'s tracing, before any graph: no graph to reduce"
        bug.user_line, bug.user_code = traced_user_line(failed.error)
    bug.issue_title = issue_title(bug.stage, error, bug.operation)
    bug.issue_text = issue_text(bug)
    out.bug = bug
    return out


GUARD_REPRO = '''"""{title}: standalone repro (torch only). `Stand` stands for `{value_type}`, a {base} whose
`{method}` raises {error_type}: Dynamo traces the function, then calls it building the {builder} guard."""
import torch


class Stand({base}):
    def {method}(self):
        raise {error_type}("raised by the object's own {method}")


torch.compile(lambda x, obj: x * obj[0], backend={backend!r})(torch.ones(3), Stand((2, 1)))
'''  # a guard crash's repro, for an object that derives from `tuple` or `list` whose `__len__` raises


def guard_bug(bug: rm.TorchBug, guard: ti.GuardCrash, backend: str, verify: bool) -> None:
    """A crash while Dynamo built a guard: the stage, the object's code that raised as the user line, and a
    torch-only repro where the guard and the object are of a kind one can stand for (`GUARD_REPRO`)."""
    bug.stage = "Dynamo (building a guard)"
    bug.operation = f"the {guard.builder} guard on {guard.guard} ({guard.value_type})"
    file, line, method, code = guard.frame or ("", 0, None, None)
    if file:
        bug.user_line, bug.user_code = f"{file}:{line}", code
    base = next((b for b in guard.bases if b in ("tuple", "list")), None)
    builtin = isinstance(getattr(builtins, guard.error_type, None), type)  # a repro can raise it without the library
    if method == "__len__" and base is not None and builtin:
        title = issue_title(bug.stage, bug.error, bug.operation)
        bug.repro = GUARD_REPRO.format(
            title=title,
            value_type=guard.value_type,
            base=base,
            method=method,
            error_type=guard.error_type,
            builder=guard.builder,
            backend=backend,
        )
        check_repro(bug, guard.error_type, None, None, run=verify)
    else:
        bug.repro_note = (
            f"the object's own `{method or '?'}` raised while Dynamo built the {guard.builder} guard (tracing had finished): "
            "a repro needs that object, no graph stands for it"
        )


def write_bug(bug: rm.TorchBug, folder: str, slug: str) -> None:
    """The repro and the issue's text into `folder` (`ctc_torch_bug_<slug>.py` / `.md`)."""
    os.makedirs(folder, exist_ok=True)
    if bug.repro and not bug.repro_path:  # a module's repro is already written, its inputs beside it
        bug.repro_path = os.path.join(folder, f"ctc_torch_bug_{slug}.py")
        with open(bug.repro_path, "w", encoding="utf-8") as fh:
            fh.write(bug.repro)
    if bug.issue_text:
        bug.issue_path = os.path.join(folder, f"ctc_torch_bug_{slug}.md")
        with open(bug.issue_path, "w", encoding="utf-8") as fh:
            fh.write(f"# {bug.issue_title}\n\n{bug.issue_text}")


# --- a way around it, checked on the user's code ----------------------------------------------------


def module_of(node: torch.fx.Node | None) -> str | None:
    """The innermost module path (`blocks.3.attn`) the operation ran in, from its `nn_module_stack`."""
    stack = node.meta.get("nn_module_stack") if node is not None else None
    if not isinstance(stack, dict) or not stack:
        return None
    entry = list(stack.values())[-1]
    raw = entry[0] if isinstance(entry, tuple) and entry else None
    if not isinstance(raw, str):
        return None
    from ..readers.compile_time import stack_path

    return stack_path(raw) or None
