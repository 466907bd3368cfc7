#!/usr/bin/env bash
# Issue 34's last GPU runs on a four-GPU host, all side by side (one engine per GPU, the batch-bound
# 8B configuration of shared/data/vllm-0.26.0-h200-8b/: 32 slots, 4,096 KV blocks, bf16):
#   GPU 0  profile, 1,024/128 tokens, seed 4, default 10-minute budget  (the batch-bound run)
#   GPU 1  profile, 1,024/2,048 tokens, seed 0, default budget           (the long-lived workload)
#   GPU 2  bench/sweep_steps.py, 1,024/2,048, rates $RATES_A, $STEP steps (the long-step sweep)
#   GPU 3  the same at rates $RATES_B
# From the checkout's root with the pack's parts collected (shared/tools/real-vllm/README.md):
#   four.sh start     write the 8B model, start the four engines, wait for /health, start the runs detached
#   four.sh wait S    wait up to S seconds for the runs, then pack what they wrote into $OUT/runs.tgz
# Engines are found by their port, never by a pid file (setsid under job control forks).
set -u
R=/tmp/real-vllm; W=/tmp/runs; mkdir -p $W
U=http://127.0.0.1; M=llama-8b-dummy
SLO="--slo-ttft 500ms --slo-tpot 50ms"
case "$1" in
start)
  bash docs/experiments/prepare8b.sh || exit 2
  eval "$(bash .real-vllm/tools/gpu.sh env)"
  export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
  for g in 0 1 2 3; do
    CUDA_VISIBLE_DEVICES=$g setsid env -C /tmp python3 -m vllm.entrypoints.openai.api_server \
      --model $R/model8b --served-model-name $M --load-format dummy --dtype bfloat16 --max-model-len 4096 \
      --max-num-seqs 32 --num-gpu-blocks-override 4096 --gpu-memory-utilization 0.5 \
      --disable-uvicorn-access-log --seed 0 --host 127.0.0.1 --port 810$g > $W/server-gpu$g.log 2>&1 < /dev/null &
  done
  t0=$(date +%s)
  for g in 0 1 2 3; do
    until curl -sf -o /dev/null $U:810$g/health; do
      pgrep -f "[v]llm.entrypoints.openai.api_server.*--port 810$g" > /dev/null || { echo "engine $g exited"; tail -30 $W/server-gpu$g.log; exit 3; }
      [ $(( $(date +%s) - t0 )) -gt 420 ] && { echo "engine $g not healthy after 420 s"; tail -30 $W/server-gpu$g.log; exit 4; }
      sleep 1
    done
    echo "engine $g healthy after $(( $(date +%s) - t0 )) s: $(curl -s $U:810$g/metrics | grep -o 'num_gpu_blocks="[0-9]*"')"
  done
  run() {  # run NAME COMMAND...: detached, outlives the call; NAME.done when it ends
    setsid bash -c "$2 > $W/$1.log 2>&1; echo \$? > $W/$1.done" < /dev/null > /dev/null 2>&1 &
  }
  P="timeout 1500 python3 -m adapter profile --model $M --prompt-tokens 1024 $SLO --max-num-seqs 32 --budget 10m --plain"
  run bb-s4 "$P --url $U:8100 --output-tokens 128 --seed 4 --out $W/bb-s4"
  run long-s0 "$P --url $U:8101 --output-tokens 2048 --seed 0 --out $W/long-s0"
  S="timeout 1500 python3 bench/sweep_steps.py --model $M --step ${STEP:-240s} --gap 5s --prompt-tokens 1024 --output-tokens 2048 --processes 4 $SLO --seed 0"
  run sweep-a "$S --url $U:8102 --rates ${RATES_A:-1.6,2.0} --out $W/sweep-a.jsonl"
  run sweep-b "$S --url $U:8103 --rates ${RATES_B:-1.8,2.2} --out $W/sweep-b.jsonl"
  sleep 5; ls $W; nvidia-smi --query-gpu=index,name,memory.used,utilization.gpu --format=csv ;;
wait)
  for i in $(seq "$2"); do [ "$(ls $W/*.done 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 1; done
  for f in $W/*.log; do echo "== $f"; tail -4 "$f"; done
  ls $W/*.done 2>/dev/null; nvidia-smi --query-gpu=index,utilization.gpu --format=csv
  tar czf $OUT/runs.tgz -C $W . ;;
esac
