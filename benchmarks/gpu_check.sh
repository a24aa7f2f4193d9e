#!/usr/bin/env bash
# One call on a lent GPU machine (the device tool): ctc-doctor's CUDA-only tests, then the doctor's own
# GPU memory and time against the workload's (benchmarks/doctor_cost.py, NVML per process). Prepare here
# with `bash benchmarks/gpu_wheels.sh`, then run there, from the repository root, naming `.whl` in `carry`:
#
#   bash benchmarks/gpu_check.sh                 # env, tests, gpt2 (GPT-2 small bf16 `bench`): about 5 min
#   bash benchmarks/gpu_check.sh env,llama1b     # the 1.1B Llama `bench`
#   STEPS: env tests gpt2 train llama1b llama7b limit train1b train7b trainref meta70b cgplan (comma-separated; each under its own `timeout`)
#
# Everything goes to $OUT (the device tool's folder that comes back; /tmp/gpu-check elsewhere):
# summary.txt holds the lines to read, one log per step beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
steps=",${1:-env,tests,gpt2},"
summary="$OUT/summary.txt"

step() {  # step NAME LIMIT_S COMMAND...: the command under `timeout`, its log, its last lines in the summary
  local name=$1 limit=$2
  shift 2
  [[ $steps == *",$name,"* ]] || return 0
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s" >>"$summary"
  tail -n 12 "$OUT/$name.log" >>"$summary"
}

step env 60 bash -c 'python3 -c "import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(), transformers.__version__)"; nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv; python3 -m ctc_doctor --version'
step tests 300 python3 -m pytest -q -p no:cacheprovider tests/test_bisect.py tests/test_device_paths.py tests/test_draws.py -k "cuda or kept_on_the_host or host_reference or target_put_on_cuda"
step gpt2 420 python3 benchmarks/doctor_cost.py --device cuda --targets gpu_targets:gpt2_small_bf16
step train 540 python3 benchmarks/doctor_cost.py --device cuda --train --targets gpu_targets:gpt2_small_bf16
step llama1b 560 python3 benchmarks/doctor_cost.py --device cuda --targets gpu_targets:llama_1b_bf16
step llama7b 580 python3 benchmarks/doctor_cost.py --device cuda --targets gpu_targets:llama_7b_bf16 --extra "--timeout 420"
step limit 560 python3 benchmarks/doctor_cost.py --device cuda --limit-share 0.3 --targets gpu_targets:llama_1b_bf16
# issue 63: a 1.2B bf16 training step on the GPU (the CPU figure: 2.2x memory, 3.2x time, a float64 reference
# one module's parameters at a time), a 7B one (its float64 parameters and gradients, 108 GB, fit no 80 GB
# card: the reference goes `streamed`), the training reference's four ways on CUDA (each the same differences
# to the bit; own peak against the workload's), and the 70B's compile without its weights (meta: no GPU
# memory; the CPU figure: 12.3 s, 540 MB)
step train1b 560 python3 -m ctc_doctor bench benchmarks/big_models.py:llama_1b_train --train --device cuda --no-fix --json "$OUT/train1b.json"
step train7b 580 python3 -m ctc_doctor bench benchmarks/gpu_targets.py:llama_7b_train --train --device cuda --no-fix --timeout 540 --json "$OUT/train7b.json"
step trainref 420 bash -c "python3 benchmarks/numerics_reference.py --train --device cuda --ways whole,offloaded,checkpointed,streamed,streamed_checkpointed,host; python3 benchmarks/numerics_reference.py --train --device cuda --model llama1b --ways whole,streamed"
step meta70b 300 bash -c "python3 benchmarks/meta_vs_real.py --llama70b; python3 benchmarks/meta_vs_real.py --llama70b-twin"
# issue 63: --memory-limit gives up in advance the CUDA-graph mode's arm (its pool, about one set of
# activations, an estimate): its note in the benchmark's notes, no out-of-memory row
step cgplan 420 bash -c 'python3 -m ctc_doctor bench benchmarks/gpu_targets.py:gpt2_small_bf16 --device cuda --no-fix --modes reduce-overhead --memory-limit 64 --json "$OUT/cgplan.json" -q; python3 -c "import json,sys; b=json.load(open(sys.argv[1]))[\"benchmark\"]; print([n for n in b[\"notes\"] if \"before it ran\" in n]); print([(a[\"name\"], a.get(\"out_of_memory\")) for a in b[\"arms\"]])" "$OUT/cgplan.json"'
cat "$summary"
