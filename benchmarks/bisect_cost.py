"""Bisection cost: fullgraph trials run vs the exhaustive count, and wall time, per strategy.

For every zoo fixture with graph breaks, and for transformers models built from a config (a clean
GPT-2, and a GPT-2 whose blocks carry a NaN-check forward hook, the kind of debug hook users add),
run bisection only (`ctc-doctor bisect`) with each strategy and print

    trials / exhaustive (one trial per exercised module), the ratio, wall seconds, the answer.

Target: <= 25 % of exhaustive on repeated-block models (repeated_blocks, gpt2 with hooks).

    .venv/bin/python benchmarks/bisect_cost.py [--skip-transformers] [--fixture NAME ...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from ctc_doctor import AnalyzeOptions, BisectOptions, Workload, analyze
from ctc_doctor.fixtures.registry import all_fixtures

STRATEGIES = ("top-down", "bottom-up", "both")


def _gpt2(layers: int, nan_hooks: bool) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=layers, n_head=2, n_embd=32, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0
    )
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
        (name, spec.builder())
        for name, spec in fixtures.items()
        if spec.expected.breaks and (not names or name in names)
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
    args = parser.parse_args()

    print(f"{'model':28s} {'strategy':17s} {'trials':>6s} {'exhaust':>7s} {'ratio':>6s} {'wall s':>7s}  smallest failing")
    worst_repeated = 0.0
    for name, build in _cases(args.fixture, not args.skip_transformers):
        runs = [(s, True) for s in STRATEGIES] + ([("top-down", False)] if args.no_memo else [])
        for strategy, memo in runs:
            torch.manual_seed(0)
            workload = build()
            options = AnalyzeOptions(
                explain=False, compile=False, bisect=BisectOptions(strategy=strategy, memoize=memo)  # type: ignore[arg-type]
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


if __name__ == "__main__":
    main()
