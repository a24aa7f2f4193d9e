"""Module bisection: the smallest submodules that fail `torch.compile(fullgraph=True)`.

- Input capture: forward pre-hooks (args and kwargs) record each submodule's inputs on its first call
  during the eager pass of the first workload call; tensors are detached clones, their requires_grad
  and the grad mode of the call are kept.
- Module tree: a networkx DiGraph of `named_modules()` paths with class, parameters, call count, input
  signature, a memo key and the trial result. Containers that are never called (ModuleList) are
  walked through: a node's bisection children are its nearest exercised descendants.
- Trial: fresh Dynamo state, `torch.compile(module, fullgraph=True, backend=...)` on a fresh copy of
  the captured inputs (and backward under --train). In-process with a SIGALRM deadline, or in a child
  process (`isolate`) that rebuilds the workload from the target, so a segfault costs one row.
- Strategies: top-down (descend into failing children) and bottom-up (leaves first, parents whose
  children all pass). Trials are shared between strategies and memoized on (class, input signature,
  submodule structure, flag attributes): 64 identical blocks cost one trial.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import torch

from ..reports import models as rm
from . import torch_internals as ti
from .attribution import ModuleIndex, describe_inputs, forward_arg_names, path_key
from .deadline import DeadlineExceeded, deadline, enforceable
from .findings import frame as _frame
from .parsing import RawFrame, first_sentence, parse_traceback_frames, split_unsupported
from .run import _first, _one_line, loss_of, preserved_state
from .sources import classify_file

ProgressFn = Callable[[str, int, int], None]
_PROBLEM = ("failed", "timeout", "crashed")
_WORKER_STARTUP_S = 120.0  # a child imports torch and rebuilds the model before its own deadline starts


@dataclass(frozen=True)
class BisectOptions:
    """How to bisect. Backend, train, device and seed come from the AnalyzeOptions of the run."""

    strategy: rm.Strategy = "both"
    """top-down, bottom-up, or both (trials are shared; the report says whether they agree)."""
    max_trials: int | None = None
    """Stop starting trials after this many; what was left is listed in `untried`."""
    trial_timeout_s: float | None = 60.0
    """Per-trial limit; a trial over it becomes a `timeout` row and the bisection goes on."""
    isolate: bool = False
    """Run each trial in a child process that rebuilds the workload from `target`."""
    memoize: bool = True
    """Try modules with the same class, input signature and structure once."""
    repro_dir: str | None = None
    """Write a standalone repro script per distinct failing module here (None: none written)."""
    target: str | None = None
    """Importable TARGET to rebuild the workload (child processes, repro scripts); default: the run's spec."""
    always: bool = False
    """Bisect even when the analysis found no graph break (the bisect command)."""


# ---------------------------------------------------------------------------------------------
# input capture
# ---------------------------------------------------------------------------------------------

_PLAIN = (int, float, bool, complex, str, bytes, type(None), torch.dtype, torch.device, torch.Size)


def _fresh(value: Any, shared: list[str] | None = None, memo: dict[int, Any] | None = None, depth: int = 0) -> Any:
    """A copy of a call's inputs that a trial can consume: detached leaf tensors, copied objects.

    Objects that `copy.deepcopy` refuses (a KV cache holding non-leaf tensors) are copied attribute by
    attribute, a few levels deep; what still cannot be copied is shared and its type noted.
    """
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        out = value.detach().clone()
        if value.requires_grad and (out.is_floating_point() or out.is_complex()):
            out.requires_grad_(True)
        memo[id(value)] = out
        return out
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(_fresh(v, shared, memo, depth) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_fresh(v, shared, memo, depth) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v, shared, memo, depth) for k, v in value.items()}
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - fall back to an attribute-wise copy below
        pass
    if depth < 4 and hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
        try:
            clone = copy.copy(value)
            memo[id(value)] = clone
            for key, item in vars(value).items():
                clone.__dict__[key] = _fresh(item, shared, memo, depth + 1)
            return clone
        except Exception:  # noqa: BLE001 - share it instead
            memo.pop(id(value), None)
    if shared is not None:
        shared.append(type(value).__name__)
    return value


def _signature(value: Any) -> str:
    """Memo-key signature of an input: dtype/shape/requires_grad for tensors, values for flags."""
    if isinstance(value, torch.Tensor):
        grad = "+g" if value.requires_grad else ""
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}@{value.device.type}{grad}"
    if isinstance(value, (bool, str, type(None))):
        return repr(value)
    if isinstance(value, (int, float)):
        return type(value).__name__
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ",".join(_signature(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_signature(v)}" for k, v in value.items()) + "}"
    return type(value).__qualname__


@dataclass
class CapturedCall:
    """The inputs of a module's first call."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool
    signature: str
    shared: list[str] = field(default_factory=list)
    """Types of input objects that could not be copied (the trial shares them with the model)."""

    def fresh(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return _fresh(self.args), _fresh(self.kwargs)


class InputRecorder:
    """Forward pre-hooks that record every module's first-call inputs and its call count."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.modules: dict[str, torch.nn.Module] = (
            dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
        )
        self.inputs: dict[str, CapturedCall] = {}
        self.calls: Counter[str] = Counter()

    @contextlib.contextmanager
    def record(self) -> Iterator[None]:
        handles = [m.register_forward_pre_hook(self._hook(p), with_kwargs=True) for p, m in self.modules.items()]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    def _hook(self, path: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            self.calls[path] += 1
            if path not in self.inputs:
                shared: list[str] = []
                a, k = _fresh(tuple(args), shared), _fresh(dict(kwargs), shared)
                self.inputs[path] = CapturedCall(
                    a, k, torch.is_grad_enabled(), _signature((a, k)), sorted(set(shared))
                )

        return hook


# ---------------------------------------------------------------------------------------------
# the module tree
# ---------------------------------------------------------------------------------------------


def _flags(module: torch.nn.Module) -> tuple[Any, ...]:
    """Attributes that usually steer control flow: bools, strings and Nones (not ints like layer_idx)."""
    return tuple(
        sorted(
            (k, v)
            for k, v in vars(module).items()
            if not k.startswith("_") and (isinstance(v, (bool, str)) or v is None)
        )
    )


def _structure(module: torch.nn.Module) -> tuple[Any, ...]:
    return tuple(
        (
            name,
            type(m).__module__,
            type(m).__qualname__,
            tuple(tuple(p.shape) for p in m.parameters(recurse=False)),
            _flags(m),
        )
        for name, m in module.named_modules()
    )


def build_tree(recorder: InputRecorder) -> nx.DiGraph:
    """Module paths as a tree with class, parameters, calls, input signature and memo key per node."""
    tree = nx.DiGraph()
    structures: dict[int, tuple[Any, ...]] = {}
    for path, module in recorder.modules.items():
        captured = recorder.inputs.get(path)
        exercised = captured is not None
        key = None
        if exercised:
            sid = id(module)
            if sid not in structures:
                structures[sid] = _structure(module)
            key = (type(module).__module__, type(module).__qualname__, captured.signature, captured.grad_enabled, structures[sid])
        tree.add_node(
            path,
            cls=type(module).__name__,
            parameters=sum(p.numel() for p in module.parameters()),
            calls=recorder.calls.get(path, 0),
            exercised=exercised,
            key=key,
            inputs=captured,
            arg_names=forward_arg_names(module) if exercised else None,
        )
        if path:
            parent = path.rpartition(".")[0]
            if parent in tree:
                tree.add_edge(parent, path)
    return tree


def bisect_children(tree: nx.DiGraph, path: str) -> list[str]:
    """Nearest exercised descendants of `path`, in module order."""
    out: list[str] = []
    for child in tree.successors(path):
        if tree.nodes[child]["exercised"]:
            out.append(child)
        else:
            out.extend(bisect_children(tree, child))
    return out


def bisect_parent(tree: nx.DiGraph, path: str) -> str | None:
    node = path
    while True:
        preds = list(tree.predecessors(node))
        if not preds:
            return None
        node = preds[0]
        if tree.nodes[node]["exercised"]:
            return node  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------


@dataclass
class TrialOutcome:
    """A trial's result, as it crosses the process boundary (plain data)."""

    status: str
    duration_s: float
    gb_type: str | None = None
    registry_ids: list[str] = field(default_factory=list)
    reason: str | None = None
    stack: list[RawFrame] = field(default_factory=list)
    """Frames Dynamo was tracing at the failure, outermost first."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _unsupported_outcome(exc: BaseException, duration: float) -> TrialOutcome:
    text = split_unsupported(str(exc))
    gb_type = str(getattr(exc, "gb_type", None) or text.gb_type or "graph break")
    ids = text.registry_ids or ti.registry_ids_for(gb_type)
    stack: list[RawFrame] = [
        (f.filename, f.lineno or 0, f.name, f.line) for f in (getattr(exc, "real_stack", None) or [])
    ]
    if not stack:
        inner = getattr(exc, "innermost_user_frame_summary", None)
        if inner is not None:
            stack = [(inner.filename, inner.lineno or 0, inner.name, inner.line)]
        else:
            stack = parse_traceback_frames(str(exc).partition("from user code:")[2])
    reason = f"{gb_type}: {first_sentence(text.explanation)}" if text.explanation else gb_type
    return TrialOutcome("failed", duration, gb_type, ids, reason, stack)


def run_trial(
    module: torch.nn.Module,
    captured: CapturedCall,
    *,
    backend: str,
    train: bool,
    seed: int | None,
    timeout_s: float | None,
) -> TrialOutcome:
    """`torch.compile(module, fullgraph=True)` on a fresh copy of its captured inputs, in this process."""
    ti.fresh_dynamo_state()
    args, kwargs = captured.fresh()
    if seed is not None:
        torch.manual_seed(seed)
    t0 = time.perf_counter()
    try:
        with deadline(timeout_s), ti.quiet_torch_stderr(True), torch.set_grad_enabled(captured.grad_enabled):
            compiled = torch.compile(module, fullgraph=True, backend=backend)
            out = compiled(*args, **kwargs)
            if train and captured.grad_enabled:
                loss = loss_of(out)
                if loss is not None and loss.requires_grad:
                    loss.backward()
        return TrialOutcome("passed", time.perf_counter() - t0)
    except DeadlineExceeded:
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"no result within {timeout_s:g} s")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        duration = time.perf_counter() - t0
        if ti.is_unsupported(exc):
            return _unsupported_outcome(exc, duration)
        return _crashed_or_unrunnable(module, captured, exc, duration)
    finally:
        with contextlib.suppress(Exception):
            ti.fresh_dynamo_state()


def _crashed_or_unrunnable(module: torch.nn.Module, captured: CapturedCall, exc: BaseException, duration: float) -> TrialOutcome:
    """A non-graph-break error: does the module even run eagerly on its own with these inputs?"""
    args, kwargs = captured.fresh()
    try:
        with torch.no_grad():
            module(*args, **kwargs)
    except Exception as eager_exc:  # noqa: BLE001 - the module cannot be called on its own
        return TrialOutcome(
            "skipped", duration, reason=f"cannot run on its own with its captured inputs: {type(eager_exc).__name__}: {_one_line(eager_exc)}"
        )
    return TrialOutcome("crashed", duration, reason=f"torch.compile raised {type(exc).__name__}: {_first(exc)}"[:500])


# ---------------------------------------------------------------------------------------------
# isolated trials: one child process each
# ---------------------------------------------------------------------------------------------


def _saveable(captured: CapturedCall, path: str) -> bool:
    """Save the inputs where `torch.load(weights_only=True)` can read them back; False if it cannot."""
    try:
        torch.save({"args": captured.args, "kwargs": captured.kwargs, "grad_enabled": captured.grad_enabled}, path)
        torch.load(path, weights_only=True)
        return True
    except Exception:  # noqa: BLE001 - custom objects (caches...): the child recaptures instead
        with contextlib.suppress(OSError):
            os.remove(path)
        return False


def run_trial_isolated(
    request: dict[str, Any], timeout_s: float | None, workdir: str
) -> TrialOutcome:
    """Run one trial in `python -m ctc_doctor.analyzer.trial_worker`; a dead child is a `crashed` row."""
    name = request["module_path"].replace(".", "_") or "root"
    req_path = os.path.join(workdir, f"trial_{name}.json")
    result_path = os.path.join(workdir, f"trial_{name}.result.json")
    request = {**request, "result_path": result_path, "timeout_s": timeout_s}
    with open(req_path, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    limit = (timeout_s + _WORKER_STARTUP_S) if timeout_s else None
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ctc_doctor.analyzer.trial_worker", req_path],
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=os.getcwd(),
        )
    except subprocess.TimeoutExpired:
        return TrialOutcome("timeout", time.perf_counter() - t0, reason=f"child process killed after {limit:g} s")
    duration = time.perf_counter() - t0
    if os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as fh:
            data = json.load(fh)
        data["stack"] = [tuple(f) for f in data.get("stack", [])]
        return TrialOutcome(**data)
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        return TrialOutcome("crashed", duration, reason=f"the child process died ({sig})")
    tail = [ln for ln in (proc.stderr or "").strip().splitlines() if ln.strip()]
    last = tail[-1][:300] if tail else f"exit status {proc.returncode}"
    return TrialOutcome("crashed", duration, reason=f"the child process failed: {last}")


# ---------------------------------------------------------------------------------------------
# the strategies
# ---------------------------------------------------------------------------------------------


class _Search:
    """Trial results by module path, memoized by key, with the trial budget."""

    def __init__(
        self,
        tree: nx.DiGraph,
        run: Callable[[str], TrialOutcome],
        options: BisectOptions,
        progress: ProgressFn,
        deadline: float | None,
    ) -> None:
        self.tree = tree
        self.run = run
        self.options = options
        self.progress = progress
        self.deadline = deadline
        self.outcomes: dict[str, TrialOutcome] = {}
        self.inferred_from: dict[str, str] = {}
        self.representative: dict[Any, str] = {}
        self.untried: list[str] = []
        self.trials_run = 0
        self.consulted: set[Any] = set()  # memo keys the current strategy needed

    def outcome(self, path: str) -> TrialOutcome | None:
        node = self.tree.nodes[path]
        key = node["key"] if self.options.memoize else path
        self.consulted.add(key)
        if path in self.outcomes:
            return self.outcomes[path]
        rep = self.representative.get(key)
        if rep is not None:
            self.inferred_from[path] = rep
            self.outcomes[path] = self.outcomes[rep]
            return self.outcomes[path]
        out_of_time = self.deadline is not None and time.monotonic() >= self.deadline
        if (self.options.max_trials is not None and self.trials_run >= self.options.max_trials) or out_of_time:
            if path not in self.untried:
                self.untried.append(path)
            return None
        self.progress(f"bisect {path}", self.trials_run, 0)
        result = self.run(path)
        self.trials_run += 1
        self.outcomes[path] = result
        self.representative[key] = path
        return result

    def own_break(self, path: str, index: ModuleIndex | None) -> bool:
        """The failure stops in `path`'s own code: no frame of it is a call into a submodule."""
        result = self.outcomes.get(path)
        if result is None or result.status != "failed" or not result.stack:
            return False
        rep = self.inferred_from.get(path, path)
        if index is None:
            return False
        for file, line, _, _ in result.stack[:-1]:
            callees = index.call_sites.get((file, line), ())
            if any(c.startswith(rep + ".") or (rep == "" and c) for c in callees):
                return False
        return True


def _top_down(search: _Search, root: str, index: ModuleIndex | None) -> tuple[list[str], bool]:
    smallest: list[str] = []
    complete = True
    queue = [root]
    while queue:
        path = queue.pop(0)
        result = search.outcome(path)
        if result is None:
            complete = False
            continue
        if result.passed or result.status == "skipped":
            continue
        kids = bisect_children(search.tree, path)
        failing, unknown = [], False
        for kid in kids:
            kid_result = search.outcome(kid)
            if kid_result is None:
                unknown = True
            elif kid_result.status in _PROBLEM:
                failing.append(kid)
        if unknown:
            complete = False
        if (not failing and not unknown) or search.own_break(path, index):
            smallest.append(path)
        queue.extend(failing)
    return smallest, complete


def _bottom_up(search: _Search, root: str) -> tuple[list[str], bool]:
    state: dict[str, str] = {}
    smallest: list[str] = []
    for path in nx.dfs_postorder_nodes(search.tree, root):
        if not search.tree.nodes[path]["exercised"]:
            continue
        kids = [state[k] for k in bisect_children(search.tree, path)]
        if any(k in ("failing", "blocked") for k in kids):
            state[path] = "blocked"
            continue
        if "unknown" in kids:
            state[path] = "unknown"
            continue
        result = search.outcome(path)
        if result is None:
            state[path] = "unknown"
        elif result.status in _PROBLEM:
            state[path] = "failing"
            smallest.append(path)
        else:
            state[path] = "passing"  # passed, or skipped (cannot run alone): no evidence against parents
    return smallest, "unknown" not in state.values()


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------


@dataclass
class BisectContext:
    """What the analysis hands the bisection: the recorded inputs and call sites of its eager pass."""

    recorder: InputRecorder
    index: ModuleIndex | None
    backend: str
    train: bool
    seed: int | None
    device: str | None
    spec: str
    command: str


def run_bisect(
    ctx: BisectContext,
    options: BisectOptions,
    progress: ProgressFn | None = None,
    budget_s: float | None = None,
) -> rm.Bisect:
    """Bisect the model whose inputs `ctx.recorder` captured. Leaves the model's grads and buffers as found."""
    t0 = time.perf_counter()
    progress = progress or (lambda phase, done, total: None)
    model = ctx.recorder.model
    tree = build_tree(ctx.recorder)
    notes: list[str] = []
    result = rm.Bisect(
        strategy=options.strategy,
        backend=ctx.backend,
        train=ctx.train,
        isolated=options.isolate,
        memoized=options.memoize,
        trial_timeout_s=options.trial_timeout_s,
    )
    if "" not in tree or not tree.nodes[""]["exercised"]:
        result.notes.append("The target is not an nn.Module (or its forward never ran): nothing to bisect.")
        return result
    target = options.target or ctx.spec
    if options.isolate and ":" not in target and not target.endswith(".py"):
        notes.append(f"--isolate needs an importable target; {target!r} is not one, so trials ran in-process.")
        options = BisectOptions(**{**asdict(options), "isolate": False})
        result.isolated = False
    enforced = options.trial_timeout_s is None or options.isolate or enforceable()
    if not enforced:
        notes.append("The per-trial timeout is not enforced off the main thread; use isolate to enforce it.")

    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctc-bisect-")) if options.isolate else ""
        stack.enter_context(preserved_state(model))

        def run(path: str) -> TrialOutcome:
            captured = tree.nodes[path]["inputs"]
            if options.isolate:
                inputs_file = os.path.join(workdir, f"inputs_{path.replace('.', '_') or 'root'}.pt")
                request = {
                    "target": target,
                    "seed": ctx.seed,
                    "module_path": path,
                    "inputs_file": inputs_file if _saveable(captured, inputs_file) else None,
                    "backend": ctx.backend,
                    "train": ctx.train,
                    "device": ctx.device,
                    "sys_path": [p for p in sys.path if p],  # the target may sit on a path added at runtime
                }
                return run_trial_isolated(request, options.trial_timeout_s, workdir)
            timeout = options.trial_timeout_s
            if deadline is not None:
                left = max(0.5, deadline - time.monotonic())
                timeout = min(timeout, left) if timeout else left
            return run_trial(
                model.get_submodule(path), captured, backend=ctx.backend, train=ctx.train, seed=ctx.seed, timeout_s=timeout
            )

        deadline = time.monotonic() + budget_s if budget_s is not None else None
        search = _Search(tree, run, options, progress, deadline)
        answers: dict[str, tuple[list[str], bool, int]] = {}
        for name in ("top-down", "bottom-up") if options.strategy == "both" else (options.strategy,):
            search.consulted = set()
            if name == "top-down":
                found, complete = _top_down(search, "", ctx.index)
            else:
                found, complete = _bottom_up(search, "")
            answers[name] = (sorted(found, key=path_key), complete, len(search.consulted))

    result.by_strategy = {
        name: rm.BisectStrategyResult(smallest_failing=found, trial_count=count, complete=complete)
        for name, (found, complete, count) in answers.items()
    }
    union = sorted({p for found, _, _ in answers.values() for p in found}, key=path_key)
    result.smallest_failing = union
    if options.strategy == "both":
        td, bu = answers["top-down"][0], answers["bottom-up"][0]
        result.agreement = td == bu
        if not result.agreement:
            only_td = [p or "(root)" for p in td if p not in bu]
            only_bu = [p or "(root)" for p in bu if p not in td]
            if only_td:
                notes.append(
                    f"Only top-down reports {', '.join(only_td)}: its own code breaks before any failing submodule "
                    "is reached, and bottom-up never tries a parent of a failing module."
                )
            if only_bu:
                notes.append(f"Only bottom-up reports {', '.join(only_bu)} (top-down stopped above it).")
    result.trial_count = search.trials_run
    result.exhaustive_count = sum(1 for _, d in tree.nodes(data=True) if d["exercised"])
    result.untried = sorted(search.untried, key=path_key)
    if result.untried:
        why = "--max-trials" if options.max_trials is not None and search.trials_run >= options.max_trials else "the time limit"
        notes.append(f"{why} stopped the bisection: {len(result.untried)} module(s) left untried; the answer may be incomplete.")
    shared = sorted({t for _, d in tree.nodes(data=True) if d["inputs"] for t in d["inputs"].shared})
    if shared:
        notes.append(f"Inputs of type {', '.join(shared)} could not be copied; trials reused the model's objects.")
    result.trials = _rows(tree, search, ctx.index)
    result.notes = notes
    if options.repro_dir:
        from .repro import write_repros

        result.repro_paths = write_repros(result, tree, ctx, options, target)
    result.duration_s = round(time.perf_counter() - t0, 3)
    return result


def _rows(tree: nx.DiGraph, search: _Search, index: ModuleIndex | None) -> list[rm.BisectTrial]:
    rows = []
    for path, node in tree.nodes(data=True):
        captured: CapturedCall | None = node["inputs"]
        row = rm.BisectTrial(
            module_path=path,
            module_class=node["cls"],
            status="skipped",
            parent=bisect_parent(tree, path) if path else None,
            parameters=node["parameters"],
            calls=node["calls"],
            inputs=describe_inputs(captured.args, captured.kwargs, node["arg_names"]) if captured else None,
        )
        outcome = search.outcomes.get(path)
        if not node["exercised"]:
            row.reason = "not exercised: never called during the first call"
        elif outcome is None:
            row.reason = "untried: over the trial budget" if path in search.untried else "not needed by the strategy"
        else:
            rep = search.inferred_from.get(path)
            row.status = "inferred" if rep is not None else outcome.status  # type: ignore[assignment]
            row.inferred_from = rep
            row.passed = None if outcome.status == "skipped" else outcome.passed
            row.duration_s = None if rep is not None else round(outcome.duration_s, 4)
            row.gb_type = outcome.gb_type
            row.registry_ids = list(outcome.registry_ids)
            row.reason = outcome.reason
            if outcome.stack:
                inner = outcome.stack[-1]
                row.user_frame = _frame(*inner)
                own = [f for f in outcome.stack if classify_file(f[0])[0]]
                if own and own[-1] is not inner:
                    row.own_frame = _frame(*own[-1])
            row.own_break = search.own_break(path, index)
        rows.append(row)
    return rows
