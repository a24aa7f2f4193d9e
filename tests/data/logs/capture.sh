#!/usr/bin/env bash
# Regenerates the committed log captures in this folder (real runs, nothing edited by hand except the
# derived corrupt/ variants, which corrupt.py writes). Run from the repo root with the project venv:
#   bash tests/data/logs/capture.sh
# Each capture runs `python -m ctc_doctor.fixtures.capture FIXTURE` (the fixture's calls under plain
# torch.compile, backend eager, the live analysis's seeds); the exact commands are below and in
# README.md beside them. Traces over ~300 KB are gzip-compressed (ctc-doctor reads .log.gz).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
OUT=tests/data/logs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

one_trace() {  # name fixture
  TORCH_TRACE="$TMP/$1" $PY -m ctc_doctor.fixtures.capture "$2" >/dev/null 2>&1
  rm -rf "$OUT/$1" && mkdir -p "$OUT/$1"
  for f in "$TMP/$1"/*.log; do gzip -9 -n -c "$f" > "$OUT/$1/$(basename "$f").gz"; done
}

one_trace showcase_trace showcase
one_trace transformers_gpt2_trace transformers_gpt2
# inductor, forward and backward (compile phases, backward compiles, caches): ~60 s on a 2-core CPU
TORCH_TRACE="$TMP/train_step_inductor_trace" $PY -m ctc_doctor.fixtures.capture train_step --backend inductor --train >/dev/null 2>&1
rm -rf "$OUT/train_step_inductor_trace" && mkdir -p "$OUT/train_step_inductor_trace"
for f in "$TMP/train_step_inductor_trace"/*.log; do gzip -9 -n -c "$f" > "$OUT/train_step_inductor_trace/$(basename "$f").gz"; done

TORCH_LOGS="graph_breaks,recompiles,perf_hints" $PY -m ctc_doctor.fixtures.capture showcase 2> "$OUT/showcase_torch_logs.log" >/dev/null
TORCH_LOGS="graph_breaks,recompiles,perf_hints" TORCH_LOGS_FORMAT="%(message)s" \
  $PY -m ctc_doctor.fixtures.capture showcase 2> "$OUT/showcase_torch_logs_bare.log" >/dev/null
# inductor (for perf hints): ~35 s on a 2-core CPU
TORCH_LOGS="graph_breaks,recompiles,perf_hints" $PY -m ctc_doctor.fixtures.capture print_in_forward --backend inductor \
  2> "$OUT/print_in_forward_inductor_torch_logs.log" >/dev/null

rm -rf "$OUT/two_rank_trace"
TORCH_TRACE="$OUT/two_rank_trace" .venv/bin/torchrun --standalone --nproc-per-node 2 \
  -m ctc_doctor.fixtures.capture data_dependent_if --ranks >/dev/null 2>&1
chmod 644 "$OUT"/two_rank_trace/*.log

$PY "$OUT/corrupt.py"
$PY -c "import torch; print('captured with torch', torch.__version__)"
