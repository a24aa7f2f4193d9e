"""A zoo fixture driven by a plain script (`python zoo_script.py NAME`): the model compiled and called as
the fixture's workload calls it (its `before_call` too), for the parity of `run` with `build()`."""

import sys

import torch

from ctc_doctor.fixtures.registry import all_fixtures

torch.manual_seed(0)
w = all_fixtures()[sys.argv[1]].builder()()
model = torch.compile(w.model, backend="eager")
with torch.no_grad():
    for i, call in enumerate(w.calls()):
        if w.before_call is not None:
            w.before_call(w.model, i)
        model(*call.args, **call.kwargs)
