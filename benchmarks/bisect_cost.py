"""Bisection cost: fullgraph trials run vs the exhaustive count, and wall time, per strategy.

For every zoo fixture with graph breaks, and for transformers models built from a config (a clean
GPT-2, and a GPT-2 whose blocks carry a NaN-check forward hook, the kind of debug hook users add),
run bisection only (`ctc-doctor bisect`) with each strategy and print

    trials / exhaustive (one trial per exercised module), the ratio, wall seconds, the answer.

Target: <= 25 % of exhaustive on repeated-block models (repeated_blocks, gpt2 with hooks).

Then the cost of isolation, per trial, on the same modules of one fixture (`--isolation-fixture`,
default deep_break): in-process trials; isolated trials the old way (a new child process per trial,
which imports torch and rebuilds the model each time); isolated trials now (one child for them all,
its start-up paid once and shown apart).

With `--full-run NAME`, it also times a whole default run (`ctc-doctor demo --fixture NAME`: analysis,
bisection, fix, inductor benchmark) with `--isolate` and with `--no-isolate`: what isolation costs
where it is the default.

    .venv/bin/python benchmarks/bisect_cost.py [--skip-transformers] [--fixture NAME ...] [--isolation-fixture NAME]
                                               [--full-run NAME]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import torch

from ctc_doctor import AnalyzeOptions, BisectOptions, Workload, analyze
from ctc_doctor.fixtures.registry import all_fixtures

STRATEGIES = ("top-down", "bottom-up", "both")


def _gpt2(layers: int, nan_hooks: bool) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_head=2, n_embd=32, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    if nan_hooks:

        def check(module: torch.nn.Module, args: tuple) -> None:
            if torch.isnan(args[0]).any():  # a data-dependent branch in every block
                raise RuntimeError("NaN input")

        for block in model.transformer.h:
            block.mlp.register_forward_pre_hook(check)
    return Workload(model, kwargs={"input_ids": torch.randint(0, 128, (2, 8))}, name=f"gpt2-{layers}L{'+hooks' if nan_hooks else ''}")


def _cases(names: list[str] | None, transformers: bool) -> list[tuple[str, Callable[[], Workload]]]:
    fixtures = all_fixtures()
    cases: list[tuple[str, Callable[[], Workload]]] = [
        (name, spec.builder()) for name, spec in fixtures.items() if spec.expected.breaks and (not names or name in names)
    ]
    if transformers and not names:
        cases.append(("gpt2-4L (clean)", lambda: _gpt2(4, nan_hooks=False)))
        cases.append(("gpt2-12L + NaN hooks", lambda: _gpt2(12, nan_hooks=True)))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--fixture", action="append", help="only these fixtures")
    parser.add_argument("--no-memo", action="store_true", help="also run top-down without memoization")
    parser.add_argument("--isolation-fixture", default="deep_break", help="fixture for the isolation cost")
    parser.add_argument("--isolation-trials", type=int, default=8, help="modules to try in the isolation cost")
    parser.add_argument("--full-run", default=None, metavar="NAME", help="also time a whole default run of this fixture, isolated and not")
    args = parser.parse_args()

    print(f"{'model':28s} {'strategy':17s} {'trials':>6s} {'exhaust':>7s} {'ratio':>6s} {'wall s':>7s}  smallest failing")
    worst_repeated = 0.0
    for name, build in _cases(args.fixture, not args.skip_transformers):
        runs = [(s, True) for s in STRATEGIES] + ([("top-down", False)] if args.no_memo else [])
        for strategy, memo in runs:
            torch.manual_seed(0)
            workload = build()
            options = AnalyzeOptions(
                explain=False,
                compile=False,
                bisect=BisectOptions(strategy=strategy, memoize=memo),  # type: ignore[arg-type]
            )
            t0 = time.perf_counter()
            report = analyze(workload, options)
            wall = time.perf_counter() - t0
            b = report.bisect
            assert b is not None
            ratio = b.trial_count / b.exhaustive_count if b.exhaustive_count else 0.0
            if memo and ("repeated" in name or "hooks" in name):
                worst_repeated = max(worst_repeated, ratio)
            smallest = ", ".join(p or "(root)" for p in b.smallest_failing)
            if len(smallest) > 50:
                smallest = f"{b.smallest_failing[0]} … ({len(b.smallest_failing)} modules)"
            label = strategy + ("" if memo else " no-memo")
            print(f"{name:28s} {label:17s} {b.trial_count:6d} {b.exhaustive_count:7d} {ratio:6.0%} {wall:7.2f}  {smallest}")
    print(f"\nworst trials/exhaustive on repeated-block models: {worst_repeated:.0%} (target <= 25%)")
    _isolation_cost(args.isolation_fixture, args.isolation_trials)
    if args.full_run:
        _full_run(args.full_run)


def _full_run(name: str) -> None:
    """A whole default run (the benchmark included), with and without isolation, interleaved twice."""
    import os
    import subprocess
    import tempfile

    doctor = os.path.join(os.path.dirname(sys.executable), "ctc-doctor")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls: dict[str, list[float]] = {"--no-isolate": [], "--isolate": []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(2):
            for flag in walls:
                t0 = time.perf_counter()
                subprocess.run(
                    [doctor, "demo", "--fixture", name, flag, "-q", "--json", os.path.join(out, "r.json")],
                    env=env,
                    check=True,
                    capture_output=True,
                )
                walls[flag].append(time.perf_counter() - t0)
    base, iso = min(walls["--no-isolate"]), min(walls["--isolate"])
    print(f"\nwhole default run of {name} (best of 2): in-process {base:.1f} s, isolated {iso:.1f} s ({iso / base - 1:+.0%})")


def _isolation_cost(name: str, limit: int) -> None:
    """Per-trial wall: in-process, a child per trial (old), one child for all trials (now)."""
    import os
    import statistics
    import tempfile

    from ctc_doctor.analyzer import torch_internals as ti
    from ctc_doctor.analyzer.capture.inputs import ModuleInputs
    from ctc_doctor.analyzer.phases.bisect.trials import TrialWorker, run_trial

    spec = all_fixtures()[name]
    torch.manual_seed(0)
    workload = spec.builder()()
    inputs = ModuleInputs(workload.model)
    first = workload.calls()[0]
    torch.manual_seed(0)
    with inputs.record():
        workload.model(*first.args, **dict(first.kwargs))
    paths = list(inputs.inputs)[:limit]
    setup = {"target": spec.target, "seed": 0, "backend": "eager", "train": False, "device": None, "sys_path": [p for p in sys.path if p]}

    in_process = []
    for path in paths:
        t0 = time.perf_counter()
        run_trial(workload.model.get_submodule(path), inputs.inputs[path], backend="eager", train=False, seed=0, timeout_s=60)
        in_process.append(time.perf_counter() - t0)
    ti.fresh_dynamo_state()

    old = []
    with tempfile.TemporaryDirectory() as workdir:
        for path in paths:
            worker = TrialWorker(setup, workdir)
            t0 = time.perf_counter()
            worker.run({"module_path": path, "inputs_file": None}, 60)
            old.append(time.perf_counter() - t0)
            worker.close()
    new = []
    with tempfile.TemporaryDirectory() as workdir:
        worker = TrialWorker(setup, workdir)
        t0 = time.perf_counter()
        worker.run({"module_path": paths[0], "inputs_file": None}, 60)
        first_trial = time.perf_counter() - t0
        for path in paths[1:]:
            t0 = time.perf_counter()
            worker.run({"module_path": path, "inputs_file": None}, 60)
            new.append(time.perf_counter() - t0)
        starts = worker.starts
        worker.close()
    med = statistics.median
    print(f"\nisolation cost per trial, {name}, {len(paths)} modules (median wall; cpus {os.cpu_count()}):")
    print(f"  in-process                        {med(in_process) * 1000:8.0f} ms")
    print(f"  isolated, a child per trial (old) {med(old) * 1000:8.0f} ms")
    print(
        f"  isolated, one child (now)         {med(new) * 1000:8.0f} ms  "
        f"(+ {first_trial:.1f} s for the child's start and first trial; {starts} child)"
    )
    print(f"  now vs in-process: +{(med(new) - med(in_process)) * 1000:.0f} ms per trial; old vs now: {med(old) / med(new):.0f}x")


if __name__ == "__main__":
    main()
