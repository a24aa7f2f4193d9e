"""The paths a model on an accelerator takes (each with a CPU case where one can show it, and a CUDA case
that runs where CUDA is): the host float64 reference, a training copy made straight on the host, the
device taken from where the target put the model, no host reference for a model that draws random
numbers. Checked on a GPU by `benchmarks/gpu_check.sh` (its `tests` step)."""

from __future__ import annotations

import pytest
import torch

from ctc_doctor import Workload
from ctc_doctor.analyzer.running.calls import run_pass
from ctc_doctor.analyzer.running.numerics import KeptResults
from ctc_doctor.analyzer.running.reference.precision import make_reference


class _WithIds(torch.nn.Module):
    """A float weight tied twice and an integer buffer (BERT's position ids)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(6, 4)
        self.head = torch.nn.Linear(4, 6, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("ids", torch.arange(3))

    def forward(self, x):
        return self.head(self.embed(self.ids) + x)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))])
def test_the_host_reference_takes_every_tensor_there_and_a_training_copy_goes_straight_to_the_host(device):
    """The float64 reference on the host moves the integer buffers too (they stayed on the device, and the
    host run failed), and comes back bit for bit; a training pristine copy is made on the host (it was made
    on the device, then moved: two models there at once), tied weights still tied."""
    from ctc_doctor.analyzer.running.copying import copy_model
    from ctc_doctor.analyzer.running.reference.precision import cast_in_place

    torch.manual_seed(0)
    model = _WithIds().to(device)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(3, 4, device=device)
    with cast_in_place(model, torch.float64, "cpu"):
        assert {t.device.type for t in [*model.parameters(), *model.buffers()]} == {"cpu"}
        assert model.embed.weight.dtype == torch.float64 and model.ids.dtype == torch.int64
        model(x.double().cpu())  # runs on the host
    assert all(torch.equal(model.state_dict()[k], v) and v.device == model.state_dict()[k].device for k, v in before.items())

    copied = copy_model(model, to="cpu")
    assert all(t.device.type == "cpu" for t in [*copied.parameters(), *copied.buffers()])
    assert copied.head.weight is copied.embed.weight and copied.embed.weight is not model.embed.weight
    assert copied.embed.weight.requires_grad and torch.equal(copied.embed.weight, model.embed.weight.detach().cpu())
    with torch.no_grad():
        copied.embed.weight.add_(1)
    assert torch.equal(model.embed.weight, before["embed.weight"])  # its own values


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_a_model_its_target_put_on_cuda_is_measured_there_and_a_random_one_never_gets_a_host_reference():
    """Without --device, a model and inputs the target put on CUDA are measured there (the report's device,
    a note); a model that draws random numbers is not judged against a host float64 run (the host's
    generator draws other numbers)."""
    from ctc_doctor import AnalyzeOptions, analyze

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 4)).cuda().train()
    workload = Workload(model, (torch.randn(2, 8, device="cuda"),))
    report = analyze(workload, AnalyzeOptions(explain=False))
    assert report.environment.device.startswith("cuda"), report.environment
    assert any(n.startswith("Measured on cuda") for n in report.notes), report.notes
    calls = workload.calls()
    eager = KeptResults()
    run_pass(model, workload, calls, seed=0, train=False, sink=eager)
    reference = make_reference(
        model, workload, calls, eager, seed=0, train=False, device="cuda", loose=False, placements=("host",), random=True
    )
    assert reference.method == "elementwise" and "not on the host: the model draws random numbers" in reference.note, reference.note
