#!/usr/bin/env bash
# Start vLLM 0.26.0 with a Llama-3.1-8B-shaped random-weights model (GPU-bound steps), KV-bound by
# --num-gpu-blocks-override 384 unless other flags are given, then warm it up for 40 s.
set -u
R=/tmp/real-vllm
# unpack once and write the 8B-shaped model (the 1B server gpu.sh would start is replaced below)
bash docs/experiments/prepare8b.sh || exit 2
bash .real-vllm/tools/gpu.sh start --model $R/model8b --served-model-name llama-8b-dummy "${@:---num-gpu-blocks-override 384}" || exit 3
grep -iE "num_gpu_blocks|KV cache|graph" $R/server.log | tail -5
eval "$(bash .real-vllm/tools/gpu.sh env)"
# what bounds the engine under load: the engine core's CPU against the GPU's busy time
(sleep 25; top -b -n1 -w 160 | head -16; nvidia-smi --query-gpu=utilization.gpu,clocks.sm --format=csv) > $OUT/under-load.txt 2>&1 &
timeout 120 python3 bench/sweep_steps.py --url http://127.0.0.1:8000 --model llama-8b-dummy --rates ${WARM_RATE:-12} --step 40s --gap 2s \
  --prompt-tokens ${PROMPT:-256} --output-tokens 128 --processes 2 --seed 9 --out $OUT/warmup.jsonl 2>&1 | tail -3
wait; cat $OUT/under-load.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,utilization.gpu,memory.used --format=csv
grep -oE "async_scheduling=[A-Za-z]+|enable_chunked_prefill=[A-Za-z]+|max_num_batched_tokens=[0-9]+" $R/server.log | sort -u
