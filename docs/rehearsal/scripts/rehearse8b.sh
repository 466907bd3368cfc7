#!/usr/bin/env bash
# The rehearsal on the GPU machine (two GPUs): the 8B-shaped vLLM 0.26.0 of shared/tools/real-vllm/,
# KV-bound as profiled in docs/rehearsal/kv-s0-profile.json (= shared/data/vllm-0.26.0-h200-8b/kv-s0/,
# `--max-num-seqs 32 --num-gpu-blocks-override 768`), one engine per GPU, replicas 1-2 on that
# profile's recommended target (vllm_requests_inflight AverageValue 6.2) with a 120 s scale-down window,
# the 10.3-minute trace docs/rehearsal/two-gpu-day.csv (5 -> 12 -> 4 req/s). About 14 minutes of
# machine time: ~1 to unpack and write the model, ~2 for the first replica, 10.3 of load, the drain.
# Run from the checkout's root with the pack under .real-vllm/ (shared/tools/real-vllm/README.md).
set -u
R=/tmp/real-vllm
OUT=${OUT:-rehearsal-8b}
bash .real-vllm/tools/gpu.sh collect >/dev/null
if [ ! -f $R/site/.done ]; then
  (cd $R/chunks && sha256sum -c ../PARTSUMS) || exit 2
  rm -rf $R/site && mkdir -p $R/site && cat $R/chunks/part0* | xz -d -T0 | tar xf - -C $R/site && touch $R/site/.done
fi
# The 8B shape, as docs/profile/real-vllm-0.26.0-h200/scripts/start8b.sh writes it.
sed -e 's/"hidden_size": 2048/"hidden_size": 4096/' -e 's/"intermediate_size": 8192/"intermediate_size": 14336/' \
    -e 's/"num_hidden_layers": 16/"num_hidden_layers": 32/' -e 's/"head_dim": 64/"head_dim": 128/' \
    -e 's/"tie_word_embeddings": True/"tie_word_embeddings": False/' .real-vllm/tools/make_model.py > /tmp/make_model_8b.py
PYTHONPATH=$R/site python3 /tmp/make_model_8b.py $R/model8b || exit 3
eval "$(bash .real-vllm/tools/gpu.sh env)"
export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
python3 -m adapter rehearse \
  --engine "python3 -m vllm.entrypoints.openai.api_server --model $R/model8b --served-model-name llama-8b-dummy \
--load-format dummy --dtype bfloat16 --max-model-len 4096 --max-num-seqs 32 --num-gpu-blocks-override 768 \
--gpu-memory-utilization 0.5 --disable-uvicorn-access-log --seed 0 --host 127.0.0.1 --port {port}" \
  --gpus 0,1 \
  --profile docs/rehearsal/kv-s0-profile.json \
  --trace docs/rehearsal/two-gpu-day.csv \
  --downscale-stabilization 120 \
  --ready-within 600 \
  --plain --out "$OUT" 2>&1 | tee "$OUT.log"
