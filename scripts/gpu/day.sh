#!/usr/bin/env bash
# Issue 38's rehearsal of a designed day on a two-GPU host (traces/drop-jump-day.csv: 8 min
# of load on the KV-bound 8B engine of examples/kv-s0-profile.json: low load, a ramp to 80 % of
# two replicas' knee, a drop that lets the fleet scale down, then a jump to 95 % of one replica's
# saturated throughput), replicas 1-2 on the profile's in-flight target, 120 s scale-down window,
# the backtest's band of 119 seeds beside it. From the checkout's root with the pack collected:
#   day.sh start [TRACE]   write the model, start the rehearsal detached (it outlives the call)
#   day.sh wait S          wait up to S seconds for it, then pack what it wrote into $OUT/day.tgz
set -u
W=/tmp/day; mkdir -p $W; R=/tmp/real-vllm
case "$1" in
start)
  bash scripts/gpu/prepare8b.sh > $W/prepare.log 2>&1 || { tail -20 $W/prepare.log; exit 2; }
  eval "$(bash scripts/gpu/gpu.sh env)"
  export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
  TRACE=${2:-traces/drop-jump-day.csv}
  setsid bash -c "timeout 1000 python3 -m adapter rehearse \
  --engine 'env -C /tmp python3 -m vllm.entrypoints.openai.api_server --model $R/model8b --served-model-name llama-8b-dummy \
--load-format dummy --dtype bfloat16 --max-model-len 4096 --max-num-seqs 32 --num-gpu-blocks-override 768 \
--gpu-memory-utilization 0.5 --disable-uvicorn-access-log --seed 0 --host 127.0.0.1 --port {port}' \
  --gpus 0,1 --profile examples/kv-s0-profile.json --trace $TRACE \
  --downscale-stabilization 120 --ready-within 600 --plain --out $W/rehearsal > $W/rehearsal.log 2>&1; echo \$? > $W/rehearsal.done" \
    < /dev/null > /dev/null 2>&1 &
  sleep 3; ls $W; nvidia-smi --query-gpu=index,name,memory.used --format=csv ;;
wait)
  for i in $(seq "$2"); do [ -f $W/rehearsal.done ] && break; sleep 1; done
  tail -25 $W/rehearsal.log; ls $W; cat $W/rehearsal.done 2>/dev/null
  tar czf $OUT/day.tgz -C $W . ;;
esac
