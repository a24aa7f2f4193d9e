"""The one numerics judgement: a run's results against eager's own, both against a higher-precision reference.

Every comparison of two runs goes through a `Reference` (`judgement()` as a run goes, `judge()` of a
kept sample): the benchmark's arms (AOT included),
each fix check alone and combined, and, training, the loss and every parameter's gradient.

An elementwise tolerance cannot judge a compiled model in low precision: of 10^7 results, the largest
rounding difference always exceeds any fixed bound (GPT-2 in bf16: max abs 4e-2 while the compiled
logits are *closer* to float64 than eager's), and a loose bound lets a real 5 % error through. So, as
PyTorch's own inductor accuracy check does (`torch._dynamo.utils.same` with `fp64_ref`), a float64 copy
of the model and inputs runs the same calls; each floating-point tensor's RMSE against it is compared
with eager's own RMSE:

    candidate_rmse <= multiplier * max(eager_rmse, typical * scale) + eps(dtype) * scale

- `multiplier`: 2 for float32/float64, 3 for float16/bfloat16 (torch's constants), 5 for tensors of at
  most 500 elements and 10 for at most 10 (torch's `use_larger_multiplier_for_smaller_tensor`: an RMSE
  over a few numbers is itself noisy).
- `typical * scale`: eager's median relative error over the run's larger tensors times this tensor's
  RMS. A loss is one number: eager's error on it may be one lucky rounding, and the ratio of two such
  errors is heavy-tailed (about 6 % of independent pairs differ by 10x). The run's typical relative
  error bounds that noise from below; a real error (a branch taken only under compile) moves the large
  output tensors as well, which are judged by their own errors.
- `eps(dtype) * scale`: one rounding step of the tensor's dtype, so a tensor eager computes exactly
  (error 0) does not fail a candidate for one rounding.

Non-finite values must sit where eager has them; they are left out of the RMSEs. Tensors that are not
floating point must be equal. Without a float64 run (an op without float64 support, or one that would
not fit anywhere: `precision`), a bf16/fp16 model gets a float32 reference; a float32 one falls back to
an elementwise check against eager (assert_close-style, loosened for backends that reorder float math),
and says so.

What it costs in memory: eager's results are kept (`KeptResults`, in a temporary file when large:
`store`), the reference only as its difference from them; a candidate is judged as it runs
(`Judgement`, a sink of `run_pass`): each result compared chunk by chunk when its call returns, then
dropped. No run's whole output is held twice, and no float64 copy of an output exists at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from ...reports import models as rm
from .calls import PerCall, Sample
from .draws import Draws
from .store import Kept, TensorStore, describe, flat, kept_from
from .tensors import iter_tensors

# torch.testing.assert_close defaults (rtol, atol) per dtype, for the elementwise fallback; compiled
# backends that reorder floating point math (inductor) get `_LOOSE` instead.
_TOLERANCE = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_LOOSE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2), torch.float32: (1e-4, 1e-4), torch.float64: (1e-6, 1e-6)}
_LOW = (torch.float16, torch.bfloat16)
_LARGE = 500
"""Tensors of more elements than this set the run's typical relative error."""


def loose_backend(backend: str) -> bool:
    """Backends other than eager/aot_eager may reorder float math: the elementwise fallback is looser."""
    return backend not in ("eager", "aot_eager")


def tolerance(dtype: torch.dtype, loose: bool = False) -> tuple[float, float]:
    """(rtol, atol) of the elementwise fallback for outputs of `dtype`."""
    return (_LOOSE if loose else _TOLERANCE).get(dtype, (1e-5, 1e-8))


def multiplier(dtype: torch.dtype, numel: int) -> float:
    """How many times eager's own error a tensor may have (torch's constants, see the module doc)."""
    if numel <= 10:
        return 10.0
    if numel <= _LARGE:
        return 5.0
    return 3.0 if dtype in _LOW else 2.0


STEP_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 1e-2}
"""Relative error a loss after optimizer steps may always have (torch's own training accuracy check
allows 1e-4 in float32; 1e-2 in 16-bit floats)."""
STEP_NOTE = "results after an optimizer step may differ by 1e-4 of their scale (1e-2 in 16-bit), as torch's training accuracy check allows"


def _after_a_step(name: str) -> bool:
    """`call 2 output 0`, `loss call 1`: a result of a call after the first optimizer step."""
    found = re.search(r"call (\d+)", name)
    return found is not None and int(found.group(1)) >= 1


@dataclass
class KeptResults:
    """Eager's results, kept (`store.TensorStore`: in memory while small, else in a temporary file): what
    every candidate is compared with, by name. It is a run's sink too, so eager's run keeps each call's
    results as they come, never the whole run's in memory at once."""

    store: TensorStore = field(default_factory=TensorStore)
    outputs: list[list[Kept]] = field(default_factory=list)
    losses: list[Kept] = field(default_factory=list)
    grads: dict[str, Kept] = field(default_factory=dict)
    draws: Draws = field(default_factory=Draws)
    """The random numbers eager drew, when a pass recorded them (`record_draws`): the reference replays them."""

    @classmethod
    def of(cls, sample: Sample, store: TensorStore | None = None) -> KeptResults:
        """`sample`'s results moved into a store (the sample is emptied: its tensors may be freed)."""
        kept = cls(store if store is not None else TensorStore())
        kept.outputs = [[kept.store.keep(t, copy=False) for t in call] for call in sample.outputs]
        kept.losses = [kept.store.keep(t, copy=False) for t in sample.losses]
        kept.grads = {name: kept.store.keep(t, copy=False) for name, t in sample.grads.items()}
        sample.outputs, sample.losses, sample.grads = [], [], {}
        return kept

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        self.outputs.append([self.store.keep(t) for t in iter_tensors(out)])
        if loss is not None:
            self.losses.append(self.store.keep(loss))

    def take_grads(self, model: Any) -> None:
        if isinstance(model, torch.nn.Module):
            self.grads = {name: self.store.keep(p.grad) for name, p in model.named_parameters() if p.grad is not None}

    def named(self) -> Iterator[tuple[str, Kept]]:
        """Each result with its name, in the judgement's order."""
        for i, call in enumerate(self.outputs):
            for j, t in enumerate(call):
                yield f"call {i} output {j}", t
        for i, t in enumerate(self.losses):
            yield f"loss call {i}", t
        yield from ((f"grad {name}", t) for name, t in self.grads.items())

    def close(self) -> None:
        """Let go of the store's file."""
        self.store.close()
        self.draws.close()


@dataclass
class Reference:
    """What every candidate run is judged against: eager's own results, kept, and how far a
    higher-precision run of the same calls is from each of them.

    The higher-precision results are not kept: per tensor, `deltas` holds reference minus eager in
    float32 (float64 for a float64 tensor; NaN where the reference is not finite). That is exact enough
    (a rounding of 6e-8 of a difference that is itself eager's error) and costs 4 bytes an element
    instead of 8; the judgement rebuilds the reference chunk by chunk as eager + delta. Both live in
    `store`: in memory while small, else in a temporary file read back chunk by chunk."""

    eager: KeptResults
    deltas: dict[str, Kept] | None = None
    """Result name (`call 0 output 1`, `loss call 2`, `grad NAME`) -> reference minus eager; None: no
    higher-precision run (elementwise)."""
    method: str = "elementwise"
    """float64_reference, float32_reference or elementwise (`rm.NumericsCheck.method`)."""
    note: str | None = None
    """Why the method is not float64_reference."""
    loose: bool = False
    """The elementwise fallback's looser tolerances (a backend that reorders float math)."""
    duration_s: float = 0.0
    """Wall time of the reference run."""
    steps: bool = False
    """The calls were training steps with an optimizer: every result after the first step carries the step's
    amplified rounding (Adam's first update is about lr x the sign of each gradient, and a compiled
    optimizer orders its float math its own way), so it gets STEP_TOLERANCE."""
    random: str | None = None
    """How runs of a model that draws random numbers were made comparable (`rm.NumericsCheck.random`)."""
    placement: str | None = None
    """Where the higher-precision run ran (`precision.PLACEMENT_TEXT`)."""
    store: TensorStore | None = None
    """Where eager's results and the deltas live."""
    run: rm.ReferenceRun | None = None
    """Where the higher-precision run went and what it cost (`precision.make_reference`)."""

    @property
    def high(self) -> dict[str, Kept] | None:
        """The higher-precision run's traces (its differences from eager), None without one."""
        return self.deltas

    def judgement(self, outputs: bool = True, from_call: int = 0) -> Judgement:
        """A sink for a candidate run: each result compared as it comes (`run_pass(sink=...)`); the calls
        before `from_call` are counted, not compared (a change made earlier on purpose alters them)."""
        return Judgement(self, outputs, from_call)

    def judge(self, candidate: Sample, outputs: bool = True) -> rm.NumericsCheck:
        """The candidate's results against eager's (see the module doc); `outputs=False`: its losses and
        gradients only (a run on padded inputs, whose outputs have other shapes)."""
        judgement = self.judgement(outputs)
        judgement.feed(candidate)
        return judgement.result()

    def kept_bytes(self) -> tuple[int, int]:
        """Bytes kept (eager's results and the deltas): in memory, and in the store's file."""
        return (self.store.in_memory, self.store.on_disk) if self.store is not None else (0, 0)

    def close(self) -> None:
        """Let go of what it keeps (the store's file)."""
        if self.store is not None:
            self.store.close()

    def share(self) -> tuple[int, dict[str, Any]]:
        """Everything it keeps moved into its store's file, and (the file's descriptor, a JSON layout):
        a child process that inherits the descriptor judges by the same reference (`attached`), so the
        benchmark's arms need no reference run of their own."""
        store = self.store if self.store is not None else self.eager.store
        named = dict(self.eager.named())
        for kept in [*named.values(), *(self.deltas or {}).values()]:
            store.spill(kept)
        layout = {
            "eager": {
                "outputs": [[describe(k) for k in call] for call in self.eager.outputs],
                "losses": [describe(k) for k in self.eager.losses],
                "grads": {n: describe(k) for n, k in self.eager.grads.items()},
            },
            "deltas": {n: describe(k) for n, k in self.deltas.items()} if self.deltas is not None else None,
            "run": self.run.model_dump(mode="json") if self.run is not None else None,
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("eager", "deltas", "store", "run")},
        }
        return store.fileno(), layout

    @classmethod
    def attached(cls, fd: int, layout: dict[str, Any]) -> Reference:
        """The reference `share` described, read through the inherited descriptor `fd`."""
        store = TensorStore.attached(fd)
        e = layout["eager"]
        eager = KeptResults(
            store,
            [[kept_from(k, store) for k in call] for call in e["outputs"]],
            [kept_from(k, store) for k in e["losses"]],
            {n: kept_from(k, store) for n, k in e["grads"].items()},
        )
        deltas = {n: kept_from(k, store) for n, k in layout["deltas"].items()} if layout["deltas"] is not None else None
        rest = {k: v for k, v in layout.items() if k not in ("eager", "deltas", "run")}
        run = rm.ReferenceRun.model_validate(layout["run"]) if layout.get("run") else None
        return cls(eager, deltas, store=store, run=run, **rest)


CHUNK = 1 << 18
"""Elements per chunk when two results are compared: a chunk's float64 temporaries are 2 MB each,
whatever the tensor's size (a GPT-2's logits are 10^8 elements). Judging 4 x 320 x 50,257 logits held
about 15 such temporaries at once: 250 MB at 2 M elements a chunk, 30 MB at 256 K, and took 0.5 s
instead of 1.1 s (the chunks stay in the CPU's caches)."""


def differ(a: Sample, b: Sample) -> bool:
    """Whether two runs of the same calls gave other results (the model draws random numbers, when
    the two runs were seeded differently)."""
    check = SameAs(KeptResults.of(Sample(a.outputs, a.losses)))
    for i, call in enumerate(b.outputs):
        check.add(call, b.losses[i] if i < len(b.losses) else None)
    return check.differs


def record_draws(kept: KeptResults, run: Callable[[SameAs, PerCall], Any]) -> None:
    """Eager's random draws recorded into `kept.draws` (`draws.Draws`) by `run`: eager's pass once more from
    the kept pass's seed and state, given a sink and what each call runs under. A pass that does not give the
    kept results to the bit (a compiled submodule, which Dynamo skips under the recording) records nothing."""
    same = SameAs(kept)
    run(same, kept.draws.recording())
    if same.differs:
        kept.draws.disown("eager's pass recording its draws gave other results than its kept pass")


class SameAs:
    """A sink that tells whether a run's results differ from kept ones, chunk by chunk, keeping nothing."""

    def __init__(self, kept: KeptResults) -> None:
        self.kept = kept
        self.calls = 0
        self.differs = False

    def _same(self, a: torch.Tensor, b: Kept) -> None:
        if self.differs:
            return
        if tuple(a.shape) != b.shape or a.dtype != b.dtype:
            self.differs = True
            return
        af = flat(a)
        for s in range(0, af.numel(), CHUNK):
            if not torch.equal(af[s : s + CHUNK], b.chunk(s, CHUNK, af.device)):
                self.differs = True
                return

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        i = self.calls
        self.calls += 1
        if i >= len(self.kept.outputs):
            return
        for a, b in zip(iter_tensors(out), self.kept.outputs[i], strict=False):
            self._same(a, b)
        if loss is not None and i < len(self.kept.losses):
            self._same(loss, self.kept.losses[i])

    def take_grads(self, model: Any) -> None:
        return  # the outputs and losses tell


# ---------------------------------------------------------------------------------------------
# the judgement
# ---------------------------------------------------------------------------------------------


@dataclass
class _Row:
    """One floating-point tensor: its errors against the reference."""

    name: str
    dtype: torch.dtype
    numel: int
    eager: float
    candidate: float
    scale: float
    sq_eager: float
    sq_candidate: float
    n: int


def _compare(name: str, cand: torch.Tensor, eager: Kept, delta: Kept) -> tuple[_Row | None, str | None, float]:
    """The tensor's errors against the reference (eager + delta), chunk by chunk on the candidate's device,
    or why it fails outright; and its largest difference from eager. Most tensors are finite throughout:
    their sums come from a few fused operations a chunk (`_finite_sums`, about 6x faster); a tensor with a
    non-finite value anywhere (its sums are not finite then) is judged value by value (`_masked_compare`)."""
    cf = flat(cand)
    sums = _finite_sums(cf, eager, delta)
    if sums is None:
        return _masked_compare(name, cand, eager, delta)
    top, se, sc, sr = sums
    count = cf.numel()  # values summed: a complex tensor's real view has two per element
    if count == 0:
        return _Row(name, cand.dtype, cand.numel(), 0.0, 0.0, 0.0, 0.0, 0.0, 0), None, top
    errors = (math.sqrt(se / count), math.sqrt(sc / count), math.sqrt(sr / count))
    return _Row(name, cand.dtype, cand.numel(), *errors, se, sc, count), None, top


def _finite_sums(cf: torch.Tensor, eager: Kept, delta: Kept) -> tuple[float, float, float, float] | None:
    """(largest |candidate - eager|, sum of delta², of (candidate - eager - delta)², of (eager + delta)²) in
    float64, or None when one is not finite: a non-finite value in the candidate, eager or the delta makes
    one of them so (as would an overflow, which float64 sums of float32 values never reach)."""
    where = cf.device
    zero = torch.zeros((), dtype=torch.float64, device=where)
    top, sq_e, sq_c, sq_r = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    for s in range(0, cf.numel(), CHUNK):
        c = cf[s : s + CHUNK].double()
        e = eager.chunk(s, CHUNK, where).double()
        d = delta.chunk(s, CHUNK, where).double()
        diff = c - e  # new tensors only: `double()` of a float64 tensor is the tensor itself (eager's kept one)
        top = torch.maximum(top, torch.linalg.vector_norm(diff, ord=math.inf))
        sq_e += torch.dot(d, d)
        r = e + d
        sq_r += torch.dot(r, r)
        diff.sub_(d)
        sq_c += torch.dot(diff, diff)
    out = (float(top), float(sq_e), float(sq_c), float(sq_r))
    return out if all(math.isfinite(v) for v in out) else None


def _masked_compare(name: str, cand: torch.Tensor, eager: Kept, delta: Kept) -> tuple[_Row | None, str | None, float]:
    """`_compare` value by value: non-finite values where eager and the reference are finite fail, the
    other non-finite ones are left out of the sums."""
    cf = flat(cand)
    where = cf.device
    zero = torch.zeros((), dtype=torch.float64, device=where)
    max_abs, sq_e, sq_c, sq_r = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    n = torch.zeros((), dtype=torch.int64, device=where)
    lost = torch.zeros((), dtype=torch.bool, device=where)  # non-finite where eager and the reference are finite
    flipped = torch.zeros((), dtype=torch.bool, device=where)  # an infinity of the other sign
    for s in range(0, cf.numel(), CHUNK):
        c = cf[s : s + CHUNK].double()
        e = eager.chunk(s, CHUNK, where).double()
        d = delta.chunk(s, CHUNK, where).double()
        diff = c - e
        max_abs = torch.maximum(max_abs, torch.nan_to_num(diff.abs(), nan=0.0).max())
        fc, fe, fr = torch.isfinite(c), torch.isfinite(e), torch.isfinite(d)
        lost |= (~fc & fe & fr).any()
        both_inf = ~fc & ~fe & ~(torch.isnan(c) | torch.isnan(e))
        flipped |= (both_inf & (c != e)).any()
        mask = fc & fe & fr
        d, diff, e = d.where(mask, 0.0), diff.where(mask, 0.0), e.where(mask, 0.0)
        sq_e += (d * d).sum()
        sq_c += ((diff - d) ** 2).sum()
        sq_r += ((e + d) ** 2).sum()
        n += mask.sum()
    top = float(max_abs) if cf.numel() else 0.0
    if bool(lost):
        return None, f"{name}: non-finite values where eager has finite ones", top
    if bool(flipped):
        return None, f"{name}: infinities of another sign than eager's", top
    count = int(n)
    if count == 0:
        return _Row(name, cand.dtype, cand.numel(), 0.0, 0.0, 0.0, 0.0, 0.0, 0), None, top
    se, sc, sr = float(sq_e), float(sq_c), float(sq_r)
    errors = (math.sqrt(se / count), math.sqrt(sc / count), math.sqrt(sr / count))
    return _Row(name, cand.dtype, cand.numel(), *errors, se, sc, count), None, top


def _elementwise(name: str, cand: torch.Tensor, eager: Kept, loose: bool) -> tuple[str | None, float]:
    """assert_close-style tolerances against eager, chunk by chunk; and the largest difference."""
    rtol, atol = tolerance(eager.dtype, loose)
    cf = flat(cand)
    bad, top = False, 0.0
    for s in range(0, cf.numel(), CHUNK):
        c = cf[s : s + CHUNK].double()
        e = eager.chunk(s, CHUNK, c.device).double()
        diff = torch.nan_to_num((c - e).abs(), nan=0.0)
        top = max(top, float(diff.max()))
        bad = bad or bool((torch.isnan(c) != torch.isnan(e)).any()) or bool((diff > atol + rtol * e.abs()).any())
    return (f"{name}: differs from eager beyond rtol={rtol:g}, atol={atol:g}" if bad else None), top


class Judgement:
    """A candidate run judged as it goes: each result compared with eager's and the reference's when it
    comes, then dropped (`run_pass(sink=...)`); `result()` gives the check. Its memory is one chunk's
    temporaries, not the run's results."""

    def __init__(self, reference: Reference, outputs: bool = True, from_call: int = 0) -> None:
        self.reference = reference
        self.outputs = outputs
        self.from_call = from_call
        self.calls = 0
        self.losses = 0
        self.grads = 0
        self.rows: list[_Row] = []
        self.max_abs = 0.0
        self.problem: str | None = None
        self.structure: str | None = None
        """A result that cannot be compared at all (a missing call, another number of outputs)."""
        self.eager = dict(reference.eager.named())

    def _judge(self, name: str, c: torch.Tensor) -> None:
        e = self.eager.get(name)
        if e is None:
            return
        if tuple(c.shape) != e.shape:
            self.structure = self.structure or f"{name}: shape {list(c.shape)}, expected {list(e.shape)}"
            return
        if not e.is_floating_point():
            if not torch.equal(c.detach(), e.whole(c.device)):
                self.problem = self.problem or f"{name}: integer/bool values differ from eager's"
            return
        delta = self.reference.deltas.get(name) if self.reference.deltas is not None else None
        if delta is None:
            bad, top = _elementwise(name, c, e, self.reference.loose)
            self.max_abs = max(self.max_abs, top)
            self.problem = self.problem or bad
            return
        row, bad, top = _compare(name, c, e, delta)
        self.max_abs = max(self.max_abs, top)
        if bad is not None:
            self.problem = self.problem or bad
        elif row is not None:
            self.rows.append(row)

    def add(self, out: Any, loss: torch.Tensor | None) -> None:
        i = self.calls
        self.calls += 1
        if i < self.from_call:
            if loss is not None and self.reference.eager.losses:
                self.losses += 1
            return
        expected = self.reference.eager.outputs
        if self.outputs and i < len(expected):
            got = list(iter_tensors(out))
            if len(got) != len(expected[i]):
                self.structure = self.structure or f"call {i}: {len(got)} output tensors, expected {len(expected[i])}"
            else:
                for j, t in enumerate(got):
                    self._judge(f"call {i} output {j}", t)
        if loss is not None and self.reference.eager.losses:
            self.losses += 1
            self._judge(f"loss call {i}", loss)

    def take_grads(self, model: Any) -> None:
        """The gradients the run left (not after a change made on purpose: its parameters may be others)."""
        if self.reference.eager.grads and isinstance(model, torch.nn.Module) and not self.from_call:
            self.grads_from({name: p.grad for name, p in model.named_parameters() if p.grad is not None})

    def grads_from(self, grads: dict[str, torch.Tensor]) -> None:
        expected = self.reference.eager.grads
        missing = sorted(set(expected) - set(grads))
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            self.structure = self.structure or f"no gradient for {missing[0]}{more}"
            return
        self.grads = len(expected)
        for name in expected:
            self._judge(f"grad {name}", grads[name])

    def feed(self, sample: Sample) -> None:
        """A kept run's results, as if they came call by call."""
        for i, call in enumerate(sample.outputs):
            self.add(call, sample.losses[i] if i < len(sample.losses) else None)
        for loss in sample.losses[len(sample.outputs) :]:  # losses without outputs
            self.add([], loss)
        if sample.grads:
            self.grads_from(sample.grads)

    def result(self) -> rm.NumericsCheck:
        reference = self.reference
        check = rm.NumericsCheck(method=reference.method, ok=True, note=reference.note, random=reference.random)  # type: ignore[arg-type]
        eager = reference.eager
        tensors = sum(len(c) for c in eager.outputs)
        outputs = f"outputs ({len(eager.outputs)} call(s), {tensors} tensor(s))"
        check.compared = [outputs if self.outputs else "outputs: not compared (other shapes)"]
        if eager.losses and self.losses:
            check.compared.append(f"loss ({len(eager.losses)} call(s))")
        if eager.grads and self.grads:
            check.compared.append(f"gradients ({len(eager.grads)} parameter(s))")
        structure = self.structure
        if structure is None and self.outputs and self.calls != len(eager.outputs):
            structure = f"{self.calls} calls ran, expected {len(eager.outputs)}"
        if structure is None and eager.losses and self.losses and self.losses != len(eager.losses):
            structure = f"{self.losses} losses, expected {len(eager.losses)}"
        if structure is not None:
            check.ok, check.problem = False, structure
            return check
        if self.problem is not None:
            check.ok, check.problem = False, self.problem
        check.max_abs_vs_eager = self.max_abs
        return _conclude(check, self.rows, reference.steps)


def _conclude(check: rm.NumericsCheck, rows: list[_Row], steps: bool) -> rm.NumericsCheck:
    """The verdict from the tensors' rows (see the module doc): the worst tensor against what it is allowed."""
    if not rows:
        return check
    large = [r.eager / r.scale for r in rows if r.numel > _LARGE and r.scale > 0]
    typical = sorted(large)[len(large) // 2] if large else 0.0
    worst: tuple[float, _Row, float] | None = None
    for r in rows:
        m = multiplier(r.dtype, r.numel)
        eps = torch.finfo(r.dtype).eps if r.dtype.is_floating_point else torch.finfo(torch.float32).eps
        floor = STEP_TOLERANCE.get(r.dtype, 1e-4) if steps and _after_a_step(r.name) else 0.0
        allowed = max(m * max(r.eager, typical * r.scale), floor * r.scale) + eps * r.scale
        share = r.candidate / allowed if allowed > 0 else (0.0 if r.candidate == 0 else math.inf)
        if worst is None or share > worst[0]:
            worst = (share, r, m)
    assert worst is not None
    share, r, m = worst
    check.worst = f"{r.name} (error {r.candidate:.3g}, eager's {r.eager:.3g}, scale {r.scale:.3g})"
    check.worst_ratio = round(share, 4) if math.isfinite(share) else None
    if share > 1 and check.ok:
        check.ok = False
        times = f"{r.candidate / r.eager:.3g}x" if r.eager else "above"
        check.problem = f"{r.name}: error {r.candidate:.3g} against the reference, {times} eager's own ({r.eager:.3g}); allowed {m:g}x"
    summed = [x for x in rows if x.name.startswith("call ")] or rows
    n = sum(x.n for x in summed)
    if n:
        check.eager_error = math.sqrt(sum(x.sq_eager for x in summed) / n)
        check.candidate_error = math.sqrt(sum(x.sq_candidate for x in summed) / n)
        if check.eager_error > 0:
            check.ratio = round(check.candidate_error / check.eager_error, 4)
        elif check.candidate_error == 0:
            check.ratio = 1.0
    check.multiplier = multiplier(summed[0].dtype, max(x.numel for x in summed))
    return check
