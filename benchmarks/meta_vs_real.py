"""Meta against real: does a run without the weights (`--weights none`, the model built on the meta
device) give exactly the real run's findings, or stop and name the line?

For every fixture of the zoo and a few transformers models built from tiny configs, the analysis runs
twice on `eager` (no bisection, fixes or benchmark): once on the builder's real tensors, once with
`weights="none"`. Each row says `same` (break sites with their lines, types and occurrences, graphs and
recompiles, recompile causes all equal), `stop` (the meta run stopped where the code needs real values:
the line and why), or `DIFFERS` (an answer that is not the real one: the rule says there must be none).

    .venv/bin/python benchmarks/meta_vs_real.py              # the table (about a minute)
    .venv/bin/python benchmarks/meta_vs_real.py --llama70b   # Llama-2-70B's shape without weights: time, peak RSS

The 70B run builds `LlamaForCausalLM` with Llama-2-70B's config (80 layers, hidden 8192, GQA 64/8) on
meta, analyses one prefill of 1 x 32 tokens (`use_cache=False`), and compares its break sites and graph
count with a 2-layer real twin built from the same code (same config, 2 layers, hidden 256).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ctc_doctor import AnalyzeOptions, Workload, analyze  # noqa: E402
from ctc_doctor.analyzer.resources.weights import meta_build, on_meta  # noqa: E402
from ctc_doctor.analyzer.services.target import load_workload  # noqa: E402
from ctc_doctor.fixtures.registry import all_fixtures  # noqa: E402


def llama(layers: int = 2, hidden: int = 64, heads: int = 4, kv: int = 2, ffn: int = 128, vocab: int = 256, cache: bool = True) -> Workload:
    from big_models import llama_config
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(llama_config(layers, hidden, heads, kv, ffn, vocab)).eval()
    ids = torch.randint(0, vocab, (1, 32))
    return Workload(model, kwargs={"input_ids": ids, "use_cache": cache}, name=f"llama_{layers}l")


def bert() -> Workload:
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=256)
    ids = torch.randint(0, 256, (2, 16))
    return Workload(
        BertModel(config).eval(), kwargs={"input_ids": ids}, variants=[{"input_ids": torch.randint(0, 256, (2, 24))}], name="bert"
    )


def t5() -> Workload:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(d_model=64, d_ff=128, num_layers=2, num_heads=4, vocab_size=256, d_kv=16)
    ids = torch.randint(0, 256, (2, 16))
    return Workload(T5ForConditionalGeneration(config).eval(), kwargs={"input_ids": ids, "decoder_input_ids": ids[:, :8]}, name="t5")


def builders() -> dict[str, Any]:
    out: dict[str, Any] = {name: spec.builder() for name, spec in all_fixtures().items()}
    out["llama (use_cache)"] = llama
    out["llama (no cache)"] = lambda: llama(cache=False)
    out["bert"] = bert
    out["t5"] = t5
    return out


def key(report: Any) -> Any:
    sites = sorted(
        (
            os.path.basename(b.user_frame.file) if b.user_frame else None,
            b.user_frame.line if b.user_frame else None,
            b.gb_type,
            b.occurrences,
        )
        for b in report.graph_breaks
    )
    causes = sorted(str(c.title if hasattr(c, "title") else c.id) for c in report.recompile_causes)
    return sites, report.summary.graph_count, report.summary.recompile_count, causes


OPTIONS = {"backend": "eager", "explain": False, "bisect": None, "fix": None, "bench": None, "accuracy": None, "suggest": False}


def one(name: str, build: Any) -> tuple[str, str]:
    torch.manual_seed(0)
    real = analyze(build(), AnalyzeOptions(**OPTIONS))
    torch.manual_seed(0)
    with meta_build():
        workload = on_meta(build())
    meta = analyze(workload, AnalyzeOptions(**OPTIONS, weights="none"))
    stop = next((e for e in meta.errors if e.phase == "weights"), None)
    if stop is not None:
        return "stop", stop.message.replace("without the weights the run stopped ", "").replace(os.getcwd() + os.sep, "")
    if meta.errors:
        return "DIFFERS", f"meta error: {meta.errors[0].message[:160]}"
    if real.errors:
        return "DIFFERS", f"real error only: {real.errors[0].message[:160]}"
    if key(real) != key(meta):
        return "DIFFERS", f"real {key(real)} / meta {key(meta)}"
    sites, graphs, recompiles, _ = key(real)
    return "same", f"{len(sites)} site(s), {graphs} graph(s), {recompiles} recompile(s)"


def table() -> None:
    counts: dict[str, int] = {}
    print(f"{'model':32s} {'meta run':8s} detail")
    for name, build in builders().items():
        try:
            verdict, detail = one(name, build)
        except Exception as exc:  # noqa: BLE001 - a row, not the end of the table
            verdict, detail = "DIFFERS", f"raised {type(exc).__name__}: {str(exc)[:120]}"
        counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{name:32s} {verdict:8s} {detail}", flush=True)
    print("\n" + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())))


def llama70b() -> None:
    shape = {"hidden": 8192, "heads": 64, "kv": 8, "ffn": 28672, "vocab": 32000, "cache": False}
    t0 = time.perf_counter()
    torch.manual_seed(0)
    with meta_build():
        workload = on_meta(llama(layers=80, **shape))
    params = sum(p.numel() for p in workload.model.parameters())
    big = analyze(workload, AnalyzeOptions(**OPTIONS, weights="none"))
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    twin = analyze(llama(layers=2, hidden=256, heads=8, kv=2, ffn=512, vocab=512, cache=False), AnalyzeOptions(**OPTIONS))
    print(f"Llama-2-70B shape, {params / 1e9:.1f}B parameters, without weights: {wall:.1f} s, peak RSS {peak_mb:.0f} MB")
    print(f"  errors: {[e.message[:120] for e in big.errors]}")
    print(f"  70B (meta): sites {key(big)[0]}, graphs {big.summary.graph_count}, recompiles {big.summary.recompile_count}")
    print(f"  2-layer real twin: sites {key(twin)[0]}, graphs {twin.summary.graph_count}, recompiles {twin.summary.recompile_count}")
    print(f"  same break sites and graph count: {key(big)[:2] == key(twin)[:2]}")


def gpt2_cached() -> Workload:
    """GPT-2, 6 layers, prefilling with its KV cache at two prompt lengths (a TARGET: `--twins`)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=128, n_head=4, vocab_size=512, n_positions=128)).eval()
    longer = {"input_ids": torch.randint(0, 512, (2, 24)), "use_cache": True}
    return Workload(model, kwargs={"input_ids": torch.randint(0, 512, (2, 16)), "use_cache": True}, variants=[longer], name="gpt2")


def llama_cached() -> Workload:
    """Llama, 6 layers, with its KV cache, two prompt lengths (a TARGET: `--twins`)."""
    torch.manual_seed(0)
    workload = llama(layers=6, cache=True)
    workload.variants = [{"input_ids": torch.randint(0, 256, (1, 48)), "use_cache": True}]
    return workload


def t5_deep() -> Workload:
    """T5, 6 encoder and 6 decoder layers, two source lengths (a TARGET: `--twins`)."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(d_model=64, d_ff=128, num_layers=6, num_heads=4, vocab_size=256, d_kv=16)
    ids = torch.randint(0, 256, (2, 16))
    longer = {"input_ids": torch.randint(0, 256, (2, 20)), "decoder_input_ids": ids[:, :8]}
    model = T5ForConditionalGeneration(config).eval()
    return Workload(model, kwargs={"input_ids": ids, "decoder_input_ids": ids[:, :8]}, variants=[longer], name="t5")


def twins() -> None:
    """Models whose run without the weights stops (a KV cache Dynamo cannot fake on meta, T5's): the real
    6-layer model's findings against its 2-layer twin's (`--weights none` after the stop)."""
    for name in ("gpt2_cached", "llama_cached", "t5_deep"):
        spec = f"{os.path.abspath(__file__)}:{name}"
        real = analyze(load_workload(spec), AnalyzeOptions(**OPTIONS))
        t0 = time.perf_counter()
        twin = analyze(load_workload(spec, weights="none"), AnalyzeOptions(**OPTIONS, weights="none", spec=spec))
        same = "same" if key(twin) == key(real) and not twin.errors else "DIFFERS"
        sites, graphs, recompiles, _ = key(real)
        print(
            f"{name:14s} {twin.target.weights:5s} {same:8s} {len(sites)} site(s), {graphs} graph(s), {recompiles} recompile(s); "
            f"twin {time.perf_counter() - t0:.1f} s: {twin.target.twin}"
        )


LLAMA70B = {"hidden": 8192, "heads": 64, "kv": 8, "ffn": 28672, "vocab": 32000}


def llama70b_cached() -> Workload:
    """Llama-2-70B's shape prefilling with its KV cache, two prompt lengths (a TARGET for the CLI)."""
    torch.manual_seed(0)
    workload = llama(layers=80, **LLAMA70B, cache=True)
    workload.variants = [{"input_ids": torch.randint(0, LLAMA70B["vocab"], (1, 48)), "use_cache": True}]
    return workload


def llama70b_twin() -> None:
    """`ctc-doctor analyze meta_vs_real:llama70b_cached --weights none`: on meta the KV cache stops the run,
    and a 2-layer real twin, narrower, gives the findings; the CLI's wall time and peak RSS."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(tempfile.mkdtemp(prefix="ctc-70b-"), "llama70b_twin.json")
    argv = [sys.executable, "-m", "ctc_doctor", "analyze", "meta_vs_real:llama70b_cached", "--weights", "none", "--no-bisect", "-q"]
    t0 = time.perf_counter()
    done = subprocess.run([*argv, "--json", out], cwd=here, env={**os.environ, "PYTHONPATH": here}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"Llama-2-70B shape with its KV cache, without weights: exit {done.returncode}, {wall:.1f} s, peak RSS {peak_mb:.0f} MB")
    if done.returncode == 0:
        report = json.load(open(out))
        target, summary = report["target"], report["summary"]
        print(f"  weights: {target['weights']}; twin: {target.get('twin')}")
        print(f"  graphs {summary['graph_count']}, break sites {summary['unique_break_sites']}, recompiles {summary['recompile_count']}")
        print("  " + "\n  ".join(report["notes"][:2]))
    else:
        print(done.stderr[-1500:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama70b", action="store_true", help="Llama-2-70B's shape without weights: wall time and peak RSS")
    parser.add_argument("--llama70b-twin", action="store_true", help="the same with its KV cache: the meta run stops, a real twin answers")
    parser.add_argument("--twins", action="store_true", help="6-layer models that stop on meta: their 2-layer twins against the real run")
    parsed = parser.parse_args()
    if parsed.llama70b:
        llama70b()
    elif parsed.twins:
        twins()
    elif parsed.llama70b_twin:
        llama70b_twin()
    else:
        table()
