#!/usr/bin/env bash
# Issue 40's GPU run on a one-GPU host, from a checkout with the pack's parts collected (README.md):
#   1. an experiment of three variants and three seeds, one of which cannot start (an engine flag vLLM
#      refuses), on the 8B-shaped vLLM 0.26.0 (examples/faults-8b.yaml);
#   2. then a rehearsal on the KV-bound engine of examples/kv-s0-profile.json in which the only
#      engine is killed (SIGKILL) 100 s into the load: the HPA model sees no Ready replica, the
#      ReplicaSet starts another, the report counts the requests retried and failed.
# Both run detached, one after the other (one GPU: a second engine beside a measured one would share
# its compute), and outlive the call that starts them:
#   faults.sh start      write the model, start the sequence
#   faults.sh wait S     wait up to S seconds for it, then pack what it wrote into $OUT/faults.tgz
# The killed engine is found by its command line, anchored at its start (`pgrep -f "^python3 -m
# [v]llm..."`: the rehearsal's own command line names the engine's module too, and the bracket keeps
# pgrep from matching this shell's), never by a pid file.
set -u
W=/tmp/faults; mkdir -p $W
case "$1" in
start)
  bash scripts/gpu/prepare8b.sh > $W/prepare.log 2>&1 || { tail -20 $W/prepare.log; exit 2; }
  eval "$(bash scripts/gpu/gpu.sh env)"
  export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1
  cat > $W/sequence.sh <<'EOF'
set -u
source scripts/gpu/engine8b.sh
W=/tmp/faults; R=/tmp/real-vllm
date +%s > $W/t0
timeout 1200 python3 -m adapter experiment examples/faults-8b.yaml --gpus 0 --out $W/experiment \
  > $W/experiment.log 2>&1; echo $? > $W/experiment.done
# The killer: waits for the rehearsal's load to start, then 150 s, then kills the serving engine.
( for i in $(seq 600); do grep -q "  adapter: " $W/rehearsal.log 2>/dev/null && break; sleep 1; done
  sleep 100; date +%s > $W/killed.at
  pgrep -af "^python3 -m [v]llm.entrypoints.openai.api_server" > $W/killed.txt
  # The engine's whole process group (its API server and the EngineCore it spawned), as a node's
  # OOM kill or a crash takes the pod: a lone API server killed would leave the core holding the GPU.
  for pid in $(pgrep -f "^python3 -m [v]llm.entrypoints.openai.api_server"); do
    kill -9 -- -$(ps -o pgid= -p $pid | tr -d ' ') 2>/dev/null || kill -9 $pid
  done
  sleep 5; nvidia-smi --query-gpu=memory.used --format=csv >> $W/killed.txt ) &
timeout 1200 python3 -m adapter rehearse \
  --engine "$(engine8b 768)" \
  --gpus 0 --profile examples/kv-s0-profile.json --trace traces/faults-day.csv \
  --downscale-stabilization 120 --ready-within 600 --plain --out $W/rehearsal > $W/rehearsal.log 2>&1
echo $? > $W/rehearsal.done
EOF
  setsid bash $W/sequence.sh < /dev/null > $W/sequence.log 2>&1 &
  sleep 5; ls $W; nvidia-smi --query-gpu=index,name,memory.used --format=csv ;;
wait)
  for i in $(seq "$2"); do [ -f $W/rehearsal.done ] && break; sleep 1; done
  for f in $W/*.log; do echo "== $f"; tail -6 "$f"; done
  ls $W; cat $W/*.done 2>/dev/null
  tar czf $OUT/faults.tgz -C $W . ;;
esac
