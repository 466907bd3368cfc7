#!/usr/bin/env bash
# Issue 38's rehearsals of designed days on real engines, one day per pair of GPUs (a four-GPU host
# rehearses two side by side). Each day: the 8B-shaped vLLM 0.26.0 of scripts/gpu/, one engine per
# GPU, replicas 1-2, 120 s scale-down window, the backtest's band of 119 seeds beside it.
#   drop-jump  traces/drop-jump-day.csv on the KV-bound engine (examples/kv-s0-profile.json, 768
#              blocks): low load, a ramp to 80 % of two replicas' knee, a drop that lets the fleet
#              scale down, a jump to 95 % of one replica's saturated throughput; its in-flight 6.2
#   ramp       traces/ramp-day.csv on the same engine and target: a ramp from 1 req/s
#   long-step  traces/long-step-day.csv on the 2,048-token-output engine (examples/long-2048-profile.json,
#              4,096 blocks): steps with no ramp; in-flight AverageValue 15 (its profile has no knee, so
#              no recommended target: 85 % of the model knee's ~1.5 req/s at ~12 s a request)
# bench/reference_traces.py writes the traces. From the checkout's root with the pack collected:
#   day.sh start [NAME[:GPUS[:SEED]]...]  write the model once, start each day detached (they outlive
#       the call); NAME defaults to drop-jump, GPUS to 0,1, SEED (the load's) to 0; a day with a SEED
#       is labelled NAME-sSEED (e.g. `day.sh start ramp:0,1 long-step:2,3`, `day.sh start drop-jump:0,1:1`)
#   day.sh wait S [LABEL...]      wait up to S seconds for them all, then pack each into $OUT/LABEL.tgz
set -u
R=/tmp/real-vllm
source scripts/gpu/engine8b.sh
engine() { engine8b "$1"; }  # engine BLOCKS: the engine's command template
day() {  # day NAME: blocks, profile, trace and extra flags of a designed day
  case "$1" in
  drop-jump) echo "768 examples/kv-s0-profile.json traces/drop-jump-day.csv" ;;
  ramp) echo "768 examples/kv-s0-profile.json traces/ramp-day.csv" ;;
  long-step) echo "4096 examples/long-2048-profile.json traces/long-step-day.csv --target 15 --target-type AverageValue" ;;
  *) echo "unknown day $1 (drop-jump, ramp, long-step)" >&2; return 2 ;;
  esac
}
case "$1" in
start)
  shift; [ $# = 0 ] && set -- drop-jump
  for spec in "$@"; do day "${spec%%:*}" > /dev/null || exit 2; done
  bash scripts/gpu/prepare8b.sh > /tmp/prepare.log 2>&1 || { tail -20 /tmp/prepare.log; exit 2; }
  eval "$(bash scripts/gpu/gpu.sh env)"
  export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
  for spec in "$@"; do
    IFS=: read -r name gpus seed <<< "$spec"; gpus=${gpus:-0,1}
    label=$name${seed:+-s$seed}; W=/tmp/day-$label; mkdir -p $W
    set -- $(day "$name"); blocks=$1 profile=$2 trace=$3; shift 3
    setsid bash -c "timeout 1500 python3 -m adapter rehearse --engine '$(engine "$blocks")' \
      --gpus $gpus --profile $profile --trace $trace --seed ${seed:-0} $* \
      --downscale-stabilization 120 --ready-within 600 --plain --out $W/rehearsal > $W/rehearsal.log 2>&1; \
      echo \$? > $W/rehearsal.done" < /dev/null > /dev/null 2>&1 &
  done
  sleep 5; ls /tmp/day-*; nvidia-smi --query-gpu=index,name,memory.used --format=csv ;;
wait)
  S=$2; shift 2; [ $# = 0 ] && set -- drop-jump
  for i in $(seq "$S"); do
    left=0; for name in "$@"; do [ -f /tmp/day-$name/rehearsal.done ] || left=1; done
    [ $left = 0 ] && break; sleep 1
  done
  for name in "$@"; do
    W=/tmp/day-$name; echo "== $name: $(cat $W/rehearsal.done 2>/dev/null || echo running)"
    tail -12 $W/rehearsal.log; tar czf $OUT/$name.tgz -C $W .
  done ;;
esac
