"""What the numerics judgement's float64 reference costs, relative to the benchmark it serves.

The benchmark judges every compiled arm against eager's own run, both against a float64 copy of the
model and inputs run once (`running.numerics.make_reference`). This script measures that one run on
a few models (wall time and the process's peak RSS growth) beside eager's own pass and the whole
`ctc-doctor bench` of the same model, and prints the ratios:

    reference / eager pass      the float64 run against one eager pass of the same calls
    reference / bench           its share of the benchmark's wall time
    memory                      the peak RSS growth the copy caused, against the model's size

    .venv/bin/python benchmarks/numerics_reference.py [--backend eager] [--iters 5] [--models gpt2,...]

`--train` measures training's float64 reference instead, each of its ways on the CPU (`whole`, the model
cast in place; `checkpointed`, its blocks' activations recomputed in the backward; `streamed`, one
module's parameters at float64 at a time; `streamed_checkpointed`, both) in a fresh process on a GPT-2 whose activations outweigh its
weights: the peak RSS growth past eager's own training pass (the activations a backward needs), its wall
time, and whether its differences from eager are the same:

    .venv/bin/python benchmarks/numerics_reference.py --train [--layers 6] [--ways whole,checkpointed,streamed,streamed_checkpointed]

`--train --model llama1b --ways streamed`: the same on `big_models.py:llama_1b_train` (Llama-3.2-1B's
shape in bf16, a step of SGD as the benchmark runs it: its calls as whole steps), where the whole cast
model's parameters and gradients at float64 (16 GB) do not fit this machine; the reference's own peak is
then put against eager's own training pass (the workload's parameters, gradients and activations):
`own MB` is the highest resident memory seen while the reference ran (sampled every 5 ms) above what
the process held when it started, `own/workload` that against the parameters plus eager's pass's growth.
`--device cuda`: on the GPU, `eager +MB` is the allocator's peak in eager's pass above the parameters and
`own MB` its peak in the reference above what was allocated when it started.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from ctc_doctor import AnalyzeOptions, BenchOptions, Workload, analyze
from ctc_doctor.analyzer.running.calls import run_pass
from ctc_doctor.analyzer.running.reference.precision import make_reference
from ctc_doctor.fixtures import zoo


def gpt2(layers: int, width: int, dtype: torch.dtype) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_head=4, n_embd=width, vocab_size=4096, n_positions=256, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval().to(dtype)
    ids = torch.randint(0, 4096, (4, 128))
    return Workload(model, kwargs={"input_ids": ids}, name=f"gpt2-{layers}x{width}-{str(dtype).removeprefix('torch.')}")


MODELS = {
    "repeated_blocks": lambda: zoo.repeated_blocks(),
    "gpt2-4x256-bf16": lambda: gpt2(4, 256, torch.bfloat16),
    "gpt2-4x256-fp32": lambda: gpt2(4, 256, torch.float32),
    "gpt2-8x512-bf16": lambda: gpt2(8, 512, torch.bfloat16),
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gpt2_train(layers: int, attn_pdrop: float = 0.1) -> Workload:
    """Width 256, vocabulary 4096, batch 8 x 512 then 8 x 384, with labels: activations outweigh the weights.
    GPT-2's dropout (0.1) everywhere; on CUDA none in the attention (`attn_pdrop=0`): SDPA's own dropout is
    drawn inside flash attention's kernel, which the host way cannot replay."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=layers, n_head=4, n_embd=256, vocab_size=4096, n_positions=512, bos_token_id=0, eos_token_id=0, attn_pdrop=attn_pdrop
    )
    model = GPT2LMHeadModel(config).train()
    batches = [torch.randint(0, 4096, (8, n)) for n in (512, 384)]
    first, second = ({"input_ids": b, "labels": b} for b in batches)
    return Workload(model, kwargs=first, variants=[second])


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


class Sampler:
    """The highest resident memory seen every 5 ms while the block runs (`peak`)."""

    def __enter__(self) -> Sampler:
        import threading

        self.peak, self.done = rss_mb(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, rss_mb())


def train_child(placement: str, layers: int, model_name: str = "gpt2", device: str = "cpu") -> None:
    """One training reference in this process: what it adds past eager's own training pass (on CUDA, in
    the allocator's figures: the workload's own peak, and the reference's peak above its start)."""
    from ctc_doctor.analyzer.running.calls import calls_on
    from ctc_doctor.analyzer.running.numerics import KeptResults, record_draws

    torch.manual_seed(0)
    steps = model_name == "llama1b"
    if steps:
        import big_models

        workload = big_models.llama_1b_train()
    else:
        workload = gpt2_train(layers, 0.0 if device.startswith("cuda") else 0.1)
    cuda = device.startswith("cuda")
    model = workload.model.to(device)
    calls = calls_on(workload, device)
    start = peak_rss_mb()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    kept = KeptResults()
    t0 = time.perf_counter()
    optimizer = workload.optimizer(model.parameters()) if steps and workload.optimizer is not None else None
    run_pass(model, workload, calls, seed=0, train=True, sink=kept, optimizer=optimizer)
    del optimizer
    eager_s, eager_mb = time.perf_counter() - t0, peak_rss_mb() - start
    if not steps:  # its dropout masks, recorded by eager's pass once more as the doctor records them
        record_draws(kept, lambda sink, draws: run_pass(model, workload, calls, seed=0, train=True, sink=sink, draws=draws))
    if cuda:
        eager_mb = (torch.cuda.max_memory_allocated() - sum(p.numel() * p.element_size() for p in model.parameters())) / 2**20
        gpu_start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    before, at_start = peak_rss_mb(), rss_mb()
    with Sampler() as sampled:
        reference = make_reference(
            model,
            workload,
            calls,
            kept,
            seed=0,
            train=True,
            device=device,
            loose=True,
            placements=(placement,),
            steps=steps,
            disposable=steps,
        )
    sums = {n: float(d.chunk(0, d.numel, "cpu").double().abs().sum()) for n, d in (reference.deltas or {}).items()}
    params_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    out = {"placement": reference.placement, "eager_s": eager_s, "eager_mb": eager_mb, "params_mb": params_mb}
    own = sampled.peak - at_start  # what the reference itself held at its highest, above its start
    if cuda:
        own = (torch.cuda.max_memory_allocated() - gpu_start) / 2**20
    replayed = reference.run.replayed_draws if reference.run is not None else None
    out.update(ref_s=reference.duration_s, ref_mb=peak_rss_mb() - before, own_mb=own, sums=sums, replayed=replayed)
    print(json.dumps(out))


def train_main(layers: int, ways: list[str], model_name: str, device: str = "cpu") -> None:
    what = (
        "Llama-3.2-1B's shape, bf16, SGD, 1 x 32"
        if model_name == "llama1b"
        else f"GPT-2 {layers} x 256, vocab 4096, batch 8 x 512 and 8 x 384"
    )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {what}")
    head = f"{'way':<22} {'eager s':>8} {'eager +MB':>10} {'ref s':>7} {'ref +MB':>8} {'ref/eager mem':>14}"
    print(f"{head} {'own MB':>7} {'own/workload':>13} {'replayed':>8}  same differences")
    first: dict[str, float] | None = None
    for placement in ways:
        here = str(Path(__file__).resolve().parent)
        child = f"n.train_child({placement!r}, {layers}, {model_name!r}, {device!r})"
        code = f"import sys; sys.path.insert(0, {here!r}); import numerics_reference as n; {child}"
        line = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        r = json.loads(line)
        first = first or r["sums"]
        keys = first.keys() == r["sums"].keys()
        same = "yes" if keys and all(first[k] == v for k, v in r["sums"].items()) else "NO"
        if same == "NO" and keys and all(abs(first[k] - v) <= 1e-6 * max(abs(v), 1e-30) for k, v in r["sums"].items()):
            same = "within 1e-6 (another device's rounding)"
        print(
            f"{r['placement']:<22} {r['eager_s']:>8.2f} {r['eager_mb']:>10.0f} {r['ref_s']:>7.2f} {r['ref_mb']:>8.0f} "
            f"{r['ref_mb'] / max(1.0, r['eager_mb']):>13.2f}x {r['own_mb']:>7.0f} "
            f"{r['own_mb'] / (r['params_mb'] + r['eager_mb']):>12.2f}x {r['replayed'] or '-':>8}  {same}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager", help="benchmark backend (inductor for the real thing)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--train", action="store_true", help="training's reference, each way in a fresh process")
    parser.add_argument("--layers", type=int, default=6, help="--train: the GPT-2's layers")
    parser.add_argument(
        "--ways", default="whole,checkpointed,streamed,streamed_checkpointed", help="--train: the reference's ways, each in a fresh process"
    )
    parser.add_argument("--model", default="gpt2", choices=["gpt2", "llama1b"], help="--train: the model")
    parser.add_argument("--device", default="cpu", help="--train: where the model runs (cuda: the allocator's figures)")
    args = parser.parse_args()
    if args.train:
        train_main(args.layers, args.ways.split(","), args.model, args.device)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, benchmark backend {args.backend}")
    head = ("model", "params", "eager s", "ref s", "ref/eager", "bench s", "ref/bench", "rss +MB", "model MB")
    print(f"{head[0]:<18} " + " ".join(f"{h:>9}" for h in head[1:]))
    for name in args.models.split(","):
        torch.manual_seed(0)
        workload = MODELS[name]()
        model = workload.model
        params = sum(p.numel() for p in model.parameters())
        size_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        calls = workload.calls()
        with torch.no_grad():
            run_pass(model, workload, calls, seed=0, train=False, collect=True)  # warm
            t0 = time.perf_counter()
            eager = run_pass(model, workload, calls, seed=0, train=False, collect=True)
            eager_s = time.perf_counter() - t0
        before = peak_rss_mb()
        reference = make_reference(model, workload, calls, eager, seed=0, train=False, device="cpu", loose=False)
        grown = peak_rss_mb() - before
        report = analyze(
            MODELS[name](), AnalyzeOptions(explain=False, bench=BenchOptions(backend=args.backend, iters=args.iters, warmup=1))
        )
        bench_s = report.benchmark.duration_s
        ref_s = reference.duration_s
        print(
            f"{name:<18} {params:>9,} {eager_s:>9.3f} {ref_s:>9.3f} {ref_s / eager_s:>8.1f}x {bench_s:>9.1f} "
            f"{ref_s / bench_s:>9.1%} {grown:>9.0f} {size_mb:>9.0f}  ({reference.method})"
        )


if __name__ == "__main__":
    main()
