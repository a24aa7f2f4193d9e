"""Eager's random numbers replayed in the higher-precision reference (`running.draws`).

From the same seed, the CPU's `randn` at float64 draws other numbers than at float32: without the replay,
a VAE's float64 reference was 0.28 (relative) from eager, and every compiled arm passed beside it. With it,
the reference draws eager's own numbers: in the forward, in a forward recomputed in the backward (the
model's own checkpointing, the reference's checkpointed ways), over slices of the batch, and whatever
kernel draws a dropout's mask. What it cannot replay it says, and the reference draws from the seed."""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from ctc_doctor import Workload
from ctc_doctor.analyzer.running.calls import Sample, preserved_state, run_pass
from ctc_doctor.analyzer.running.draws import Draws, replayed_text
from ctc_doctor.analyzer.running.numerics import KeptResults, record_draws
from ctc_doctor.analyzer.running.reference.precision import Room, make_reference

pytestmark = pytest.mark.fast


class _Vae(torch.nn.Module):
    """A VAE's reparameterisation: noise from `randn_like`, optionally in a checkpointed block."""

    def __init__(self, checkpointing: bool = False) -> None:
        super().__init__()
        self.enc, self.dec = torch.nn.Linear(16, 16), torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
        self.checkpointing = checkpointing

    def sample(self, x: torch.Tensor) -> torch.Tensor:
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        return self.dec(mu + torch.randn_like(mu) * (0.5 * logvar).exp())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.sample, x, use_reentrant=False) if self.checkpointing else self.sample(x)


def _reference(model: torch.nn.Module, *, train: bool = False, record: bool = True, seed: int = 0, **kwargs):
    """Eager's kept pass, its draws recorded by a pass once more (as the fix phase and the benchmark do), the
    reference against it, and eager's own error against it."""
    w = Workload(model.train(train), args=(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)),))
    kept = KeptResults()
    with preserved_state(model, parameters=True), torch.set_grad_enabled(train):
        run_pass(model, w, w.calls(), seed=0, train=train, sink=kept)
    if record:
        with preserved_state(model, parameters=True), torch.set_grad_enabled(train):
            record_draws(kept, lambda sink, draws: run_pass(model, w, w.calls(), seed=0, train=train, sink=sink, draws=draws))
    eager = Sample()
    with preserved_state(model, parameters=True), torch.set_grad_enabled(train):
        run_pass(model, w, w.calls(), seed=0, train=train, collect=True)
        eager = run_pass(model, w, w.calls(), seed=0, train=train, collect=True)
    reference = make_reference(model, w, w.calls(), kept, seed=seed, train=train, device="cpu", loose=False, **kwargs)
    return reference, reference.judge(eager)


def test_randn_like_is_replayed_in_the_float64_reference() -> None:
    """The bug it fixes: from the same seed, float64's `randn_like` is other noise; eager was 0.28 from its
    reference. Replayed, eager's error is rounding's, and any seed gives the same reference."""
    torch.manual_seed(0)
    unreplayed, check = _reference(_Vae(), record=False)
    assert unreplayed.run is not None and unreplayed.run.replayed_draws is None
    assert check.eager_error is not None and check.eager_error > 0.05  # the reference drew other noise
    for seed in (0, 5):
        torch.manual_seed(0)
        reference, check = _reference(_Vae(), seed=seed)
        assert reference.run is not None and reference.run.replayed_draws == 1
        assert check.eager_error is not None and check.eager_error < 1e-6, check
        assert "drew eager's own numbers (1 draw(s) replayed)" in replayed_text(reference.run)


def test_a_recomputed_draw_in_the_backward_gets_its_forward_draw() -> None:
    """Training, the noise drawn in a checkpointed function: the backward's recomputation draws again from
    the restored generator state, and gets eager's draw, not the seed's (the gradients too are rounding's)."""
    torch.manual_seed(0)
    reference, check = _reference(_Vae(checkpointing=True), train=True)
    assert reference.run is not None and reference.run.replayed_draws == 1, reference.run  # given twice: forward, recomputation
    assert check.eager_error is not None and check.eager_error < 1e-5, check
    grads = {name: kept.whole("cpu") for name, kept in (reference.deltas or {}).items() if name.startswith("grad ")}
    assert len(grads) == 6 and all(d.abs().max() < 1e-5 for d in grads.values()), {n: float(d.abs().max()) for n, d in grads.items()}


@pytest.mark.parametrize("placement", ["checkpointed", "streamed", "streamed_checkpointed"])
def test_the_training_ways_replay_alike(placement: str) -> None:
    """The reference's own ways (its checkpointing recomputes the blocks, drawing again) give the whole
    way's differences, to the bit, with dropout in every block."""

    class Blocks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            nn = torch.nn
            self.layers = nn.ModuleList([nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.GELU(), nn.Linear(32, 16)) for _ in range(3)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = x + layer(x) + 0.01 * torch.randn_like(x)
            return x

    deltas = {}
    for way in ("whole", placement):
        torch.manual_seed(0)
        reference, _ = _reference(Blocks(), train=True, placements=(way,))
        assert reference.run is not None and reference.run.placement == way and reference.run.replayed_draws == 6, reference.run
        deltas[way] = {name: kept.whole("cpu") for name, kept in (reference.deltas or {}).items()}
    assert deltas["whole"].keys() == deltas[placement].keys() and deltas["whole"]
    for name, delta in deltas["whole"].items():
        assert torch.equal(delta, deltas[placement][name]), name


def test_slices_of_the_batch_get_their_rows_of_each_draw() -> None:
    """Over slices, a draw shaped like the batch gives each slice its rows: the same differences as the
    whole batch's run."""
    deltas = []
    for slices, room in ((1, None), (2, Room(60 * 2**20, 100 * 2**20))):  # only half the batch's activations fit
        torch.manual_seed(0)
        reference, check = _reference(_Vae(), room=room, placements=("whole",))
        assert reference.run is not None and reference.run.slices == slices and reference.run.replayed_draws == 1, reference.run
        deltas.append({name: kept.whole("cpu") for name, kept in (reference.deltas or {}).items()})
        assert check.eager_error is not None and check.eager_error < 1e-6
    for name, delta in deltas[0].items():
        assert torch.allclose(delta, deltas[1][name], atol=1e-12), name


class _Kernels(torch.nn.Module):
    """Dropout drawn by another kernel at float64 (CUDA's `native_dropout` against the host's `bernoulli_`
    into an empty tensor: the same mask, its shape and keep probability)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            return torch.nn.functional.dropout(x, 0.25, True) * 3
        return torch.ops.aten.native_dropout(x, 0.25, True)[0] * 3


def test_a_dropout_mask_is_the_same_draw_from_another_kernel() -> None:
    x = torch.randn(64, 16)
    draws = Draws()
    torch.manual_seed(1)
    with draws.recording().call(0):
        eager = _Kernels()(x)
    torch.manual_seed(2)  # another seed: the mask can only come from eager's
    replay = draws.replaying()
    with replay.call(0):
        high = _Kernels()(x.double())
    assert len(replay.used) == 1
    assert torch.equal(high != 0, eager != 0) and torch.allclose(high, eager.double(), atol=1e-6)


def test_a_draw_eager_did_not_make_falls_back_to_the_seed_and_says_so() -> None:
    class Other(_Vae):
        def sample(self, x: torch.Tensor) -> torch.Tensor:
            noise = torch.randn(3) if x.dtype == torch.float64 else torch.randn(4)
            return super().sample(x) + noise.sum()

    torch.manual_seed(0)
    reference, _ = _reference(Other())
    assert reference.run is not None and reference.run.replayed_draws is None and reference.method == "float64_reference"
    assert any("not replayed (randn [3] drawn, where eager drew randn [4])" in p for p in reference.run.not_taken), reference.run
    assert "drew from the seed (randn [3] drawn" in replayed_text(reference.run)


def test_a_draw_eager_did_not_make_on_a_disposable_copy_ends_the_reference_and_says_why() -> None:
    """The benchmark's eager copy is cast for the run and not put back: once a way's replay fails, its
    buffers and parameters have moved (a forward that updates a buffer, an optimizer's step), so no way can
    start again from eager's values: the judgement is elementwise, and says why."""

    class Other(_Vae):
        def sample(self, x: torch.Tensor) -> torch.Tensor:
            noise = torch.randn(3) if x.dtype == torch.float64 else torch.randn(4)
            return super().sample(x) + noise.sum()

    torch.manual_seed(0)
    reference, _ = _reference(Other(), train=True, disposable=True)
    assert reference.method == "elementwise" and reference.run is not None and reference.run.replayed_draws is None
    assert replayed_text(reference.run) == "; eager's random numbers not replayed (randn [3] drawn, where eager drew randn [4])"


def test_a_model_whose_draws_are_not_replayed_is_not_cut_into_slices() -> None:
    """Without eager's draws, each slice would draw the seed's first numbers (the first slice's rows agree
    with eager's, the others do not): a random model's batch is not sliced, and the note says why."""

    class Extra(_Vae):
        def sample(self, x: torch.Tensor) -> torch.Tensor:
            h = super().sample(x)
            return h + 0 * torch.randn_like(h) if x.dtype == torch.float64 else h

    torch.manual_seed(0)
    reference, _ = _reference(Extra(), room=Room(60 * 2**20, 100 * 2**20), placements=("whole",))
    assert reference.run is not None and reference.run.slices == 1 and reference.run.replayed_draws is None, reference.run
    assert any("each slice would draw the seed's first" in p for p in reference.run.not_taken), reference.run.not_taken


def test_draws_a_backward_makes_or_two_alike_from_one_state_are_not_replayed() -> None:
    """A hook drawing gradient noise in the backward recomputes no forward draw; two forward draws alike from
    one generator state (a `fork_rng` around each) leave that state's recomputation ambiguous. Either way
    the recording gives up, says why, and the reference draws from the seed (never another draw's values).
    Two draws from one state with other arguments are told apart: the recomputation gets its own (it got
    the other's before, 6.4 off in the gradients)."""

    class Hooked(_Vae):
        def sample(self, x: torch.Tensor) -> torch.Tensor:
            h = super().sample(x)
            if h.requires_grad:
                h.register_hook(lambda g: g + 1e-3 * torch.randn_like(g))
            return h

    class Forked(torch.nn.Module):
        def __init__(self, shift: float) -> None:
            super().__init__()
            self.a, self.shift = torch.nn.Linear(16, 16), shift

        def noisy(self, h: torch.Tensor) -> torch.Tensor:
            with torch.random.fork_rng():
                scale = torch.empty_like(h).uniform_(0.5, 1.5)
            with torch.random.fork_rng():
                shift = torch.empty_like(h).uniform_(0.5 - self.shift, 1.5 - self.shift)
            return torch.tanh(h * scale + shift)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return checkpoint(self.noisy, self.a(x), use_reentrant=False)

    for model, why in ((Hooked(), "not a forward's draw recomputed"), (Forked(0.0), "from a state two forward draws started from")):
        torch.manual_seed(0)
        reference, _ = _reference(model, train=True, disposable=True)
        assert reference.method == "float64_reference" and reference.run is not None and reference.run.replayed_draws is None
        assert why in replayed_text(reference.run), replayed_text(reference.run)
    torch.manual_seed(0)
    reference, _ = _reference(Forked(1.0), train=True)
    assert reference.run is not None and reference.run.replayed_draws == 2, reference.run
    grads = {name: float(kept.whole("cpu").abs().max()) for name, kept in (reference.deltas or {}).items() if name.startswith("grad ")}
    assert grads and max(grads.values()) < 1e-5, grads


def test_the_recording_gives_up_on_a_draw_it_cannot_keep_and_eager_runs_on() -> None:
    """A nested tensor's dropout mask cannot be flattened into the store: the recording says so, eager's pass
    is untouched."""
    x = torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], layout=torch.jagged)
    draws = Draws()
    with draws.recording().call(0):
        out = torch.nn.functional.dropout(x, 0.5, True)
    assert out.is_nested and draws.opaque is not None and not draws.replayable(), draws.opaque


def test_a_draw_inside_a_kernel_is_not_replayed_and_says_so() -> None:
    """`rrelu`'s training noise is drawn inside its kernel (as flash attention's dropout on CUDA): nothing is
    replayed, and the reference says it drew from the seed and why."""

    class Noisy(_Vae):
        def sample(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.rrelu(super().sample(x), training=True)

    torch.manual_seed(0)
    reference, _ = _reference(Noisy())
    assert reference.run is not None and reference.run.replayed_draws is None and reference.method == "float64_reference"
    assert "drew from the seed (rrelu_with_noise draws inside its kernel)" in replayed_text(reference.run)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
@pytest.mark.parametrize("placement", ["whole", "host"])
def test_a_model_with_dropout_on_cuda_is_judged_against_its_own_masks(placement: str) -> None:
    """On an accelerator, the host's generator draws other masks from the same seed: the host way was ruled
    out for any model with dropout. With eager's masks replayed (CUDA's `native_dropout`, the host's
    `bernoulli_`), it runs there, and eager's error against it is rounding's; on the device too (CUDA's
    dropout kernel reads its random numbers by vectors of a dtype's width)."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(16, 64), nn.Dropout(0.3), nn.GELU(), nn.Linear(64, 16), nn.Dropout(0.1)).cuda().train()
    w = Workload(model, args=(torch.randn(32, 16, device="cuda"),))
    kept = KeptResults()
    with preserved_state(model, parameters=True):
        run_pass(model, w, w.calls(), seed=0, train=True, sink=kept)
        record_draws(kept, lambda sink, draws: run_pass(model, w, w.calls(), seed=0, train=True, sink=sink, draws=draws))
        eager = run_pass(model, w, w.calls(), seed=0, train=True, collect=True)
    reference = make_reference(
        model, w, w.calls(), kept, seed=0, train=True, device="cuda", loose=False, random=True, placements=(placement,)
    )
    assert reference.run is not None and reference.run.placement == placement and reference.run.replayed_draws == 2, reference.run
    check = reference.judge(eager)
    assert check.eager_error is not None and check.eager_error < 1e-5, check


def test_an_optimizer_drawing_in_the_step_the_reference_skips_leaves_its_draws_unasked() -> None:
    """One training step: the reference takes its loss and skips the backward and the step (nothing after
    them is compared), so the noise the optimizer drew in eager's step is never asked for. The forward's
    draw is still replayed."""

    class NoisySGD(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[no-untyped-def, override]
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.add_(torch.randn_like(p.grad), alpha=1e-3)
            return super().step(closure)

    class Extra(_Vae):
        extra = False

        def sample(self, x: torch.Tensor) -> torch.Tensor:
            h = super().sample(x)
            return h + 0 * torch.randn_like(h) if self.extra and x.dtype == torch.float32 else h

    torch.manual_seed(0)
    model = Extra().train()
    w = Workload(model, args=(torch.randn(8, 16),), optimizer=lambda ps: NoisySGD(ps, lr=0.1))
    kept = KeptResults()

    def run(sink, draws=None):  # type: ignore[no-untyped-def]
        run_pass(model, w, w.calls(), seed=0, train=True, sink=sink, optimizer=w.optimizer(model.parameters()), draws=draws)

    with preserved_state(model, parameters=True):
        run(kept)
    with preserved_state(model, parameters=True):
        record_draws(kept, run)
    assert kept.draws.count == 1 + 6  # the forward's noise, the step's for each of the 6 parameters
    reference = make_reference(model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=False, steps=True)
    assert reference.method == "float64_reference" and reference.run is not None and reference.run.replayed_draws == 1, reference.run
    # a forward draw the call leaves unasked is not the step's: the replay fails, and says so
    model.extra = True  # eager (float32) draws once more in the forward
    kept = KeptResults()
    with preserved_state(model, parameters=True):
        run(kept)
    with preserved_state(model, parameters=True):
        record_draws(kept, run)
    reference = make_reference(model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=False, steps=True)
    assert reference.run is not None and reference.run.replayed_draws is None
    assert "eager drew 7 more time(s) in call 0" in replayed_text(reference.run), replayed_text(reference.run)
