"""Training's float64 reference one module at a time (`streamed`): the parameters at float64 only while
their module's forward, or an operation of the backward, needs them; each gradient taken as it comes;
an elementwise optimizer stepping each parameter on its own, its values and state kept in a file. It must
give what the whole cast model gives, to the bit, on real models (tied weights, dropout, the model's own
activation checkpointing, frozen parameters, transformers' Llama), and fail loudly, never read freed
memory, where a module's code reads another module's parameter."""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from ctc_doctor import Workload
from ctc_doctor.analyzer.running.calls import preserved_state, run_pass
from ctc_doctor.analyzer.running.numerics import KeptResults
from ctc_doctor.analyzer.running.reference.precision import Plan, Room, _ways, make_reference

pytestmark = pytest.mark.fast


class _Positions(torch.nn.Module):
    """Learned positions whose output is a view of its own parameter (it must stay filled)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(16, 32))

    def forward(self, n: int) -> torch.Tensor:
        return self.weight[:n]


class _Tied(torch.nn.Module):
    """An embedding tied to the head, blocks with dropout, optionally under the model's own activation
    checkpointing and with a frozen weight in each block."""

    def __init__(self, checkpointing: bool | None = None, frozen: bool = False) -> None:
        super().__init__()
        nn = torch.nn
        self.emb, self.pos = nn.Embedding(50, 32), _Positions()
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Dropout(0.2), nn.Linear(64, 32), nn.LayerNorm(32)) for _ in range(3)]
        )
        self.head = nn.Linear(32, 50, bias=False)
        self.head.weight = self.emb.weight
        self.checkpointing = checkpointing
        for block in self.blocks if frozen else []:
            block[0].weight.requires_grad_(False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids) + self.pos(ids.shape[1])
        for block in self.blocks:
            h = h + (block(h) if self.checkpointing is None else checkpoint(block, h, use_reentrant=self.checkpointing))
        return self.head(h)


def _workload(model: torch.nn.Module, optimizer=None) -> Workload:
    ids = [torch.randint(0, 50, (4, n), generator=torch.Generator().manual_seed(n)) for n in (7, 9, 7)]
    return Workload(model.train(), args=(ids[0],), variants=[(ids[1],), (ids[2],)], optimizer=optimizer)


def _references(build, optimizer=None, placements=("whole", "streamed"), **kwargs):
    """Eager's results, then the reference each way: {placement: Reference}, the model checked as it was after each."""
    out = {}
    for placement in placements:
        torch.manual_seed(0)
        w = _workload(build(), optimizer)
        before = {k: (v.clone(), v.dtype) for k, v in w.model.state_dict().items()}
        kept = KeptResults()
        with preserved_state(w.model, parameters=True):
            run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept, optimizer=optimizer(w.model.parameters()) if optimizer else None)
        ref = make_reference(
            w.model,
            w,
            w.calls(),
            kept,
            seed=0,
            train=True,
            device="cpu",
            loose=True,
            steps=optimizer is not None,
            placements=(placement,),
            **kwargs,
        )
        assert all(torch.equal(before[k][0], v) and v.dtype == before[k][1] for k, v in w.model.state_dict().items())
        assert all(type(p) is torch.nn.Parameter and p.dtype == before[n][1] for n, p in w.model.named_parameters())
        out[placement] = ref
    return out


def _same(a, b) -> None:
    assert a.deltas is not None and b.deltas is not None and a.deltas.keys() == b.deltas.keys()
    for name, d in a.deltas.items():
        assert torch.equal(d.chunk(0, d.numel, "cpu"), b.deltas[name].chunk(0, d.numel, "cpu")), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_module_at_a_time_gives_the_whole_cast_models_results_and_gradients_to_the_bit(dtype):
    """Alone, and with the repeated blocks' activations recomputed in the backward (dropout drawing the
    same numbers again)."""
    refs = _references(lambda: _Tied().to(dtype), placements=("whole", "streamed", "streamed_checkpointed"))
    whole = refs["whole"]
    assert any(n.startswith("grad ") for n in whole.deltas) and any(n.startswith("loss ") for n in whole.deltas)
    for placement in ("streamed", "streamed_checkpointed"):
        streamed = refs[placement]
        assert streamed.method == "float64_reference" and streamed.placement == placement, streamed.note
        assert "one module's parameters at a time" in (streamed.note or "")
        _same(whole, streamed)


@pytest.mark.parametrize("make", [lambda ps: torch.optim.AdamW(ps, lr=1e-2), lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)])
def test_an_elementwise_optimizer_stepping_each_parameter_on_its_own_gives_the_same_steps(make):
    """Three calls, two steps between them: each parameter stepped as its gradient comes, its value and its
    optimizer's state kept in the file, read back for the next call: the outputs and losses of every call
    as the whole cast model's with the optimizer over all its parameters."""
    refs = _references(lambda: _Tied().to(torch.bfloat16), make)
    _same(refs["whole"], refs["streamed"])
    assert not any(n.startswith("grad ") for n in refs["streamed"].deltas)  # each step consumed them


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_models_own_checkpointing_and_frozen_weights_keep_the_same_results(checkpointing):
    """Blocks recomputed in the backward (non-reentrant and reentrant checkpointing) keep their stand-ins
    filled until their gradient comes; a frozen weight is never stepped nor given a gradient."""
    refs = _references(lambda: _Tied(checkpointing, frozen=True))
    _same(refs["whole"], refs["streamed"])
    assert not any(n.endswith("0.weight") and n.startswith("grad blocks") for n in refs["streamed"].deltas)


def test_a_transformers_llama_one_module_at_a_time():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=50,
        tie_word_embeddings=True,
    )
    refs = {}
    for placement in ("whole", "streamed"):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).to(torch.bfloat16).train()
        ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
        w = Workload(model, kwargs={"input_ids": ids, "labels": ids}, loss_fn=lambda out: out.loss)
        kept = KeptResults()
        run_pass(model, w, w.calls(), seed=0, train=True, sink=kept)
        refs[placement] = make_reference(model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, placements=(placement,))
    assert refs["streamed"].placement == "streamed", refs["streamed"].note
    _same(refs["whole"], refs["streamed"])


class _Reader(torch.nn.Module):
    """A parent that reads its child's weight in its own forward (outside the child's)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.out = torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.lin(x) * self.lin.weight[0])


def test_a_parameter_read_outside_its_modules_forward_fails_the_way_and_the_next_runs():
    """Its float64 stand-in is empty there: the operation raises (a torch-function check) rather than read
    freed memory, the way fails and says why, and the next way (the whole cast model) runs."""
    torch.manual_seed(0)
    w = Workload(_Reader().train(), args=(torch.randn(4, 32),))
    kept = KeptResults()
    run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept)
    only = make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, placements=("streamed",))
    assert only.method == "elementwise" and "reads a parameter outside its module's forward" in (only.note or ""), only.note
    fallback = make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, placements=("streamed", "whole"))
    assert fallback.method == "float64_reference" and fallback.placement == "whole", fallback.note


def test_it_is_the_way_taken_when_the_cast_model_and_its_checkpointed_blocks_would_not_fit():
    """A room that one module at float64 with its gradients fits, but not the whole cast model's
    parameters and gradients: the streamed way runs within it, the two ways before it named as not taken."""
    torch.manual_seed(0)
    w = _workload(_Tied())
    kept = KeptResults()
    run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept)
    work = 2**10
    plan = {way.placement: way.device for way in _ways(torch.float64, Plan(w.model, work, "cpu", True, summed=True))}
    assert plan["streamed"] < plan["checkpointed"] <= plan["whole"], plan
    room = Room(plan["streamed"] - work, activations=work, basis="a test's room")
    ref = make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, room=room)
    assert ref.placement == "streamed" and ref.method == "float64_reference" and ref.run is not None, ref.note
    assert [p.split(" would not fit")[0] for p in ref.run.not_taken] == [
        "a float64 run the model cast on its device",
        "a float64 run block by block (the model cast on its device, the backward recomputing one block's activations at a time)",
    ], ref.run.not_taken
    assert "no way fit" not in (ref.note or ""), ref.note


class _Attention(torch.nn.Module):
    """torch.nn's MultiheadAttention (its forward reads its child `out_proj`'s weight), then an old-style
    weight_norm Linear (its own pre-hook computes the weight from two parameters) and a complex parameter."""

    def __init__(self, complex_phase: bool = False) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 32)
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = torch.nn.utils.weight_norm(torch.nn.Linear(32, 32))
        self.phase = torch.nn.Parameter(torch.randn(32, dtype=torch.complex64 if complex_phase else torch.float32))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        h = self.attn(x, x, x, need_weights=False)[0]
        return self.norm(h) * (self.phase.abs() + 1)


def test_modules_that_read_their_parameters_otherwise_give_the_same_results():
    """MultiheadAttention fills its whole subtree; an old-style weight_norm's pre-hook runs after ours; a
    complex parameter is not cast (as the whole way leaves it), and its gradient summed over the calls
    fails the way (not done)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weight_norm's deprecation
        refs = _references(_Attention, lambda ps: torch.optim.AdamW(ps, lr=1e-2))
        complex_ = _references(lambda: _Attention(complex_phase=True), placements=("streamed",))["streamed"]
    assert refs["streamed"].placement == "streamed", refs["streamed"].note
    _same(refs["whole"], refs["streamed"])
    assert complex_.method == "elementwise" and "a complex parameter's value" in (complex_.note or ""), complex_.note


class _WritesItsWeight(torch.nn.Module):
    """An embedding with max_norm renormalises the rows it looks up, in place, in its forward."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 32, max_norm=1.0)
        self.head = torch.nn.Linear(32, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids))


class _SharedBlockTwice(torch.nn.Module):
    """One block applied twice, each use under a reentrant checkpoint (a backward of its own per use)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.block, self.head = torch.nn.Embedding(50, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        for _ in range(2):
            h = h + checkpoint(self.block, h, use_reentrant=True)
        return self.head(h)


@pytest.mark.parametrize("build", [_WritesItsWeight, _SharedBlockTwice])
def test_what_it_cannot_follow_fails_the_way_loudly_and_the_whole_model_runs(build):
    """A forward that writes to its weight in place (the float64 copy's change would be lost), a gradient
    that comes in parts (each reentrant checkpoint's own backward): never a result that differs from the
    whole cast model's; the way fails, says why, and the next runs."""
    refs = _references(build, placements=("streamed", "whole"))
    failed = refs["streamed"]
    assert failed.method == "elementwise" and "NotStreamable" in (failed.note or ""), failed.note
    assert "written in place" in failed.note or "comes in parts" in failed.note, failed.note
    torch.manual_seed(0)
    w = _workload(build())
    kept = KeptResults()
    run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept)
    fallback = make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, placements=("streamed", "whole"))
    assert fallback.placement == "whole" and fallback.method == "float64_reference", fallback.note
