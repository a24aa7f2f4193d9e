"""A backend that computes a right graph wrong, ready to file (`report.torch_bugs[]`, kind `wrong_result`).

When the accuracy bisection's operation is of kind `backend` (`operation.py`: the graph, run as plain
PyTorch at float64, is its own reference, and the backend's compiled form departs from it), the fault is
the compiler's, not the user's code. As for a crash (`triage`):

- **which stage**: the graph cut after the operation is compiled again through `aot_eager` (Dynamo's
  graph through AOTAutograd's decompositions, no code generation). If it departs too, AOTAutograd;
  otherwise the backend.
- **the repro**: that cut graph as a module, random inputs of the recorded shapes, compiled with the
  backend and compared with the same graph at float64 (every floating dtype the graph names made
  float64). It exits with `WrongResult` while the compiled error is beyond 3x the graph's own, and is run
  once under plain `python` to say whether it does (random inputs may not trigger a value-dependent bug).
  A backend registered outside PyTorch is imported by the repro from the module that registered it
  (`triage.backend_owner`).
- **the issue text** (title, what departs and where, the repro, what was tried, versions), into
  `--repro-dir` beside the accuracy repro.
- **a way around it**, judged on the user's model by the accuracy bisection's rule (`judge`): the
  diverging module kept eager (`torch.compiler.disable` on its forward), else, when the backend is the
  stage, the model compiled through `aot_eager`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ....reports import models as rm
from ...triage import (
    REDUCE_BUDGET_S,
    REPRO_TIMEOUT_S,
    backend_owner,
    check_repro,
    compute_nodes,
    issue_text,
    issue_title,
    repro_text,
    smallest_repro,
    stage_of,
    write_bug,
)
from .operation import Located, departs

ERROR_TYPE = "WrongResult"
"""What the repro exits with while the backend computes the graph wrong."""

_CHECK = '''
ALLOWED = 3.0


class WrongResult(AssertionError):
    pass


def _float64(module):
    """The same graph at float64: its parameters, and every floating dtype its code names."""
    import copy

    graph_module = torch.fx.symbolic_trace(copy.deepcopy(module)).double()

    def high(value):
        if isinstance(value, torch.dtype) and value in (torch.float32, torch.float16, torch.bfloat16):
            return torch.float64
        if isinstance(value, (tuple, list)):
            return type(value)(high(v) for v in value)
        if isinstance(value, dict):
            return {k: high(v) for k, v in value.items()}
        return value

    for node in graph_module.graph.nodes:
        node.args, node.kwargs = high(node.args), high(node.kwargs)
    graph_module.recompile()
    return graph_module


def _floats(value):
    if isinstance(value, torch.Tensor):
        return [value.detach()] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _floats(v)]
    return []


def _run(module, args):
    torch.manual_seed(0)  # a graph that draws random numbers draws the same ones in each run
    with torch.no_grad():
        return _floats(module(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))


def _error(mine, reference):
    return max(float((a.double() - b.double()).abs().max()) for a, b in zip(mine, reference))


own = _run(Repro(), args)
reference = _run(_float64(Repro()), [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
compiled = _run(torch.compile(Repro(), backend=BACKEND), args)
own_error, compiled_error = _error(own, reference), _error(compiled, reference)
print(f"error against float64: eager {own_error:.3g}, compiled {compiled_error:.3g}")
if compiled_error > ALLOWED * max(own_error, 1e-30):
    raise WrongResult(f"compiled departs from float64 {compiled_error / max(own_error, 1e-30):.3g}x eager's own error")
print("agrees: no departure on this torch")
'''


def numerics_bug(
    located: Located,
    result: rm.AccuracyBisect,
    *,
    judge: Callable[[str, str | None], bool],
    repro_dir: str | None,
    repro_timeout_s: float = REPRO_TIMEOUT_S,
) -> rm.TorchBug | None:
    """The backend's wrong result as a bug to file, with a way around it `judge(backend, eager_path)`
    verified on the user's model (True: the model compiled so agrees with float64); the repro's run within
    `repro_timeout_s`."""
    op, backend = located.operation, result.backend
    if located.cut is None or op.kind != "backend":
        return None
    registered_by, importing = backend_owner(backend)
    owner = registered_by
    stage = stage_of(backend)
    tried = ["eager (Dynamo only): the graph run as plain PyTorch, the reference (at float64)"]
    if backend not in ("eager", "aot_eager"):
        aot = departs(located.cut, located.args, "aot_eager")
        if aot is None:
            tried.append("aot_eager (AOTAutograd): agrees with float64")
        else:
            stage = stage_of("aot_eager")
            owner = None  # AOTAutograd's decompositions, before the backend: PyTorch's (the repro still imports it)
            tried.append(f"aot_eager (AOTAutograd): departs too ({aot:.3g}x the graph's own error)")
    ratio = f"{op.ratio:.3g}x" if op.ratio is not None else "beyond"
    tried.append(f"{backend}: departs {ratio} the graph's own error")
    error = f"{ERROR_TYPE}: compiled, it departs from float64 {ratio} the graph's own error at its precision"
    module = f"`{result.module_path}` ({result.module_class})" if result.module_path else f"the model ({result.module_class})"
    bug = rm.TorchBug(
        where=f"{module} compiled with {backend}",
        kind="wrong_result",
        owner=owner,
        error=error,
        error_type=ERROR_TYPE,
        stage=stage,
        tried=tried,
        user_line=op.user_line,
        user_code=op.user_code,
        operation=op.operation,
        graph_nodes=located.graph_nodes,
        repro_nodes=len(compute_nodes(located.cut)),
        issue_title="",
    )
    # torch's own minifier with the same test (the compiled graph departs from its float64 run), the cut's
    # repro its fallback; the backend is still the one registered outside PyTorch when the stage is AOTAutograd's
    smallest_repro(
        bug, (located.cut, located.args), (located.cut, located.args),
        lambda g, a: departs(g, a, backend) is not None,
        lambda g, a: _repro(Located(op, g, a, located.graph_nodes), backend, importing, where=bug.where, stage=stage, error=error),
        lambda: check_repro(bug, ERROR_TYPE, registered_by, importing, timeout_s=max(1.0, repro_timeout_s)),
        time.monotonic() + REDUCE_BUDGET_S,
    )  # fmt: skip
    bug.issue_title = issue_title(stage, error.split(": ", 1)[1], op.operation, wrong=True)
    bug.issue_text = issue_text(bug)
    _way_around(bug, result, judge)
    if repro_dir:
        write_bug(bug, repro_dir, "wrong_" + (result.module_path or "root").replace(".", "_"))
    return bug


def _repro(located: Located, backend: str, importing: str | None, *, where: str, stage: str, error: str) -> str | None:
    """The crash repro's frame (the cut graph as `Repro`, its inputs), ending in the float64 comparison."""
    assert located.cut is not None
    text = repro_text(located.cut, located.args, backend, {}, None, where=where, stage=stage, error=error, importing=importing)
    if text is None:
        return None
    head, _, _ = text.partition("compiled = torch.compile(Repro()")
    head = (
        head.replace("A crash inside torch.compile", "Wrong results from torch.compile")
        .replace(f"{stage} fails on this graph", f"{stage} computes this graph wrong")
        .replace(
            'it exits with that error while the bug is there, and prints "ran" once fixed',
            f'it exits with {ERROR_TYPE} while the bug is there, and prints "agrees" once fixed',
        )
    )
    head = head.replace("\nargs = [", "\ntorch.manual_seed(0)\nargs = [", 1)
    return head.rstrip() + f"\n\nBACKEND = {backend!r}\n" + _CHECK


def _way_around(bug: rm.TorchBug, result: rm.AccuracyBisect, judge: Callable[[str, str | None], bool]) -> None:
    """The first way around it that the model, compiled so, passes the float64 judgement with."""
    path = result.module_path
    if path:
        keep = f"model.get_submodule({path!r}).forward = torch.compiler.disable(model.get_submodule({path!r}).forward)"
        if judge(result.backend, path):
            bug.workaround, bug.workaround_verified = f"keep `{path}` eager: `{keep}`", True
            return
        bug.workaround = f"keep `{path}` eager: `{keep}`"
    if bug.stage == stage_of(result.backend) and result.backend not in ("eager", "aot_eager"):
        if judge("aot_eager", None):
            bug.workaround = 'compile with `backend="aot_eager"` (Dynamo and AOTAutograd, without the backend\'s code generation)'
            bug.workaround_verified = True
