"""Analysis overhead: `ctc_doctor.analyze` vs bare `torch._dynamo.explain` + one plain compiled run.

For every fixture of the zoo (rebuilt fresh per measurement, same seed), time
  baseline = explain(model)(first call) + torch.compile(model, backend="eager") over every call
  ours     = analyze(workload) (eager pass with hooks, explain, compile under capture, report)
and print per-fixture times and the overall ratio ours/baseline (target <= 1.3x). Median of --repeat.

    .venv/bin/python benchmarks/analysis_overhead.py [--repeat 3] [--skip-transformers]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ctc_doctor import AnalyzeOptions, analyze
from ctc_doctor.analyzer.common import torch_internals as ti
from ctc_doctor.fixtures.registry import all_fixtures


def _baseline(workload) -> None:
    calls = workload.calls()
    if workload.before_call:
        workload.before_call(workload.model, 0)
    torch._dynamo.explain(workload.model)(*calls[0].args, **dict(calls[0].kwargs))
    ti.fresh_dynamo_state()
    compiled = torch.compile(workload.model, backend="eager")
    for i, call in enumerate(calls):
        if workload.before_call:
            workload.before_call(workload.model, i)
        compiled(*call.args, **dict(call.kwargs))
    ti.fresh_dynamo_state()


def _ours(workload) -> None:
    analyze(workload, AnalyzeOptions(progress=None))


def _time(fn, build) -> float:
    torch.manual_seed(0)
    workload = build()
    t0 = time.perf_counter()
    fn(workload)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args()

    import contextlib
    import io

    fixtures = {
        n: s for n, s in all_fixtures().items() if not (args.skip_transformers and "transformers" in s.tags)
    }
    totals = {"baseline": 0.0, "ours": 0.0}
    print(f"{'fixture':30s} {'baseline s':>10s} {'ours s':>8s} {'ratio':>6s}")
    with contextlib.redirect_stdout(io.StringIO()) as sink:  # the fixtures print; keep the table clean
        _time(_ours, fixtures["clean"].builder())  # warm-up: imports and first-compile costs
        _time(_baseline, fixtures["clean"].builder())
    rows = []
    for name, spec in fixtures.items():
        build = spec.builder()
        base, ours = [], []
        with contextlib.redirect_stdout(sink):
            for _ in range(args.repeat):
                base.append(_time(_baseline, build))
                ours.append(_time(_ours, build))
        b, o = statistics.median(base), statistics.median(ours)
        totals["baseline"] += b
        totals["ours"] += o
        rows.append((name, b, o))
        print(f"{name:30s} {b:10.3f} {o:8.3f} {o / b:6.2f}", flush=True)
    ratio = totals["ours"] / totals["baseline"]
    print(f"{'TOTAL':30s} {totals['baseline']:10.3f} {totals['ours']:8.3f} {ratio:6.2f}")
    per = sorted(o / b for _, b, o in rows)
    print(f"analysis overhead ratio (ours / explain+compile): {ratio:.2f}x overall, "
          f"{statistics.median(per):.2f}x median per fixture, {per[-1]:.2f}x worst (target <= 1.3x)")


if __name__ == "__main__":
    main()
