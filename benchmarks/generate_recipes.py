"""The generate recipes, measured: which way of compiling a model for `generate()` pays, and when.

Each recipe runs in its own process with an empty inductor cache, on a Llama built from a config
(random weights, nothing downloaded), generating `--new` tokens greedily from a `--prompt`-token
prompt, twice: the first generate includes the compiles, the second is the steady speed.

    eager          no compile
    dynamic        the default (dynamic) cache, `model.forward = torch.compile(model.forward)`
    static         `cache_implementation="static"` and transformers' own generate compile (on by
                   default on CUDA; forced on CPU through `CompileConfig`)

It prints, per recipe: the first generate (s), tokens/s of the second, the speed-up over eager and the
generates it takes for the compile to pay for itself. With `--doctor` each recipe also runs under
`ctc-doctor run` and the report's own pace (`compiled[].period_ms`, ms per token) is printed beside it,
with its verdict and expected recompiles.

    .venv/bin/python benchmarks/generate_recipes.py [--device cpu] [--layers 4] [--width 256] [--new 64] [--doctor]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RECIPE = """
import json, sys, time, torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.generation.configuration_utils import CompileConfig
recipe, device, dtype = sys.argv[1], sys.argv[2], sys.argv[7]
layers, width, prompt, new = (int(v) for v in sys.argv[3:7])
torch.manual_seed(0)
cfg = LlamaConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=4 * width, num_attention_heads=width // 64,
                  num_key_value_heads=max(1, width // 128), vocab_size=4096, max_position_embeddings=prompt + new + 8)
model = LlamaForCausalLM(cfg).eval().to(device=device, dtype=getattr(torch, dtype))
kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False)
if recipe == "dynamic":
    model.forward = torch.compile(model.forward)
elif recipe == "static":
    config = CompileConfig()
    config._compile_all_devices = True  # transformers compiles generate on CUDA only, unless told
    kw.update(cache_implementation="static", compile_config=config)
else:
    kw.update(disable_compile=True)
ids = torch.randint(0, 4096, (1, prompt), device=device)
times = []
with torch.no_grad():
    for _ in range(2):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(ids, **kw)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
print("RESULT", json.dumps({"first_s": times[0], "second_s": times[1], "tokens": out.shape[1] - prompt}))
"""


def run(script: Path, args: argparse.Namespace, recipe: str, doctor: bool) -> dict[str, object]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="ctc-gen-")}
    argv = [recipe, args.device, str(args.layers), str(args.width), str(args.prompt), str(args.new), args.dtype]
    if doctor:
        report = Path(tempfile.mkdtemp()) / "r.json"
        command = [
            sys.executable,
            "-m",
            "ctc_doctor",
            "run",
            "--no-bisect",
            "--no-fix",
            "-q",
            "--json",
            str(report),
            "--",
            str(script),
            *argv,
        ]
    else:
        command = [sys.executable, str(script), *argv]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{recipe}: no result ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    if doctor:
        data = json.loads(report.read_text())
        analyzed = next((o for o in data["compiled"] if o["analyzed"]), None)
        s = data["summary"]
        result.update(
            period_ms=analyzed and analyzed.get("period_ms"),
            verdict=s["verdict"],
            recompiles=f"{s['recompile_count']} ({s.get('expected_recompiles', 0)} expected)",
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--doctor", action="store_true", help="also run each compiled recipe under ctc-doctor run")
    args = parser.parse_args()
    script = Path(tempfile.mkdtemp()) / "recipe.py"
    script.write_text(RECIPE)
    rows = {recipe: run(script, args, recipe, False) for recipe in ("eager", "dynamic", "static")}
    eager_s = float(rows["eager"]["second_s"])  # type: ignore[arg-type]
    print(f"Llama {args.layers} x {args.width}, {args.dtype} on {args.device}: {args.prompt}-token prompt, {args.new} new tokens")
    print(f"{'recipe':8} {'first generate':>15} {'tokens/s':>9} {'vs eager':>9} {'pays off after':>15}")
    for recipe, r in rows.items():
        first, second = float(r["first_s"]), float(r["second_s"])  # type: ignore[arg-type]
        speedup = eager_s / second
        saved = eager_s - second
        pays = "-" if recipe == "eager" else (f"{(first - second) / saved:.1f} generates" if saved > 0 else "never")
        print(f"{recipe:8} {first:>13.2f} s {int(r['tokens']) / second:>9.1f} {speedup:>8.2f}x {pays:>15}")  # type: ignore[call-overload]
    if args.doctor:
        print("\nunder ctc-doctor run (the report's own pace: compiled[].period_ms)")
        for recipe in ("dynamic", "static"):
            d = run(script, args, recipe, True)
            plain_ms = float(rows[recipe]["second_s"]) / int(rows[recipe]["tokens"]) * 1e3  # type: ignore[arg-type, call-overload]
            print(
                f"{recipe:8} report: {d['period_ms']} ms/token (plain second generate: {plain_ms:.3g} ms/token), "
                f"verdict {d['verdict']}, recompiles {d['recompiles']}"
            )


if __name__ == "__main__":
    main()
