#!/usr/bin/env bash
# The rehearsal on the GPU machine (two GPUs): the 8B-shaped vLLM 0.26.0 of scripts/gpu/,
# KV-bound as profiled in examples/kv-s0-profile.json (= shared/data/vllm-0.26.0-h200-8b/kv-s0/,
# `--max-num-seqs 32 --num-gpu-blocks-override 768`), one engine per GPU, replicas 1-2 on that
# profile's recommended target (vllm_requests_inflight AverageValue 6.2) with a 120 s scale-down window,
# the 10.3-minute trace traces/two-gpu-day.csv (5 -> 12 -> 4 req/s). About 14 minutes of
# machine time: ~1 to unpack and write the model, ~2 for the first replica, 10.3 of load, the drain.
# Run from the checkout's root with the pack under .real-vllm/ (scripts/gpu/README.md).
set -u
R=/tmp/real-vllm
source scripts/gpu/engine8b.sh
OUT=${OUT:-rehearsal-8b}
# unpack once and write the 8B-shaped model, as the live experiments do
bash scripts/gpu/prepare8b.sh || exit 2
eval "$(bash scripts/gpu/gpu.sh env)"
export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
python3 -m adapter rehearse \
  --engine "$(engine8b 768)" \
  --gpus 0,1 \
  --profile examples/kv-s0-profile.json \
  --trace traces/two-gpu-day.csv \
  --downscale-stabilization 120 \
  --ready-within 600 \
  --plain --out "$OUT" 2>&1 | tee "$OUT.log"
