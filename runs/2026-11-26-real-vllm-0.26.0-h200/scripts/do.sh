#!/usr/bin/env bash
# Session driver on the GPU machine (from the checkout's root). Results go to $OUT.
#   do.sh profile NAME SEED BUDGET     vllm-autoscale profile of the running server
#   do.sh sweep NAME RATES STEP        bench/sweep_steps.py, long open-loop steps
#   do.sh restart [ENGINE ARGS...]     stop the server, start it again with these engine flags
#   do.sh capture NAME                 the server's /metrics page and the tail of its log
set -u
eval "$(bash .real-vllm/tools/gpu.sh env)"
export PYTHONUNBUFFERED=1
# MODEL and PROMPT pick the engine and workload (default: the 1B engine, 256-token prompts)
M=${MODEL:-llama-1b-dummy}; P=${PROMPT:-256}; U=http://127.0.0.1:8000
case "$1" in
profile)
  timeout ${TMO:-580} python3 -m adapter profile --url $U --model $M --prompt-tokens $P --output-tokens 128 \
    --slo-ttft 500ms --slo-tpot 50ms --max-num-seqs 32 --seed "$3" --budget "$4" --out "$OUT/$2" --plain 2>&1 | tail -60 ;;
sweep)
  timeout 580 python3 bench/sweep_steps.py --url $U --model $M --rates "$3" --step "$4" --gap 5s \
    --prompt-tokens $P --output-tokens 128 --processes 4 --slo-ttft 500ms --slo-tpot 50ms --seed 0 --out "$OUT/$2.jsonl" 2>&1 | tail -40 ;;
restart)
  # '[v]llm' so that the pattern does not match this shell's own command line
  shift; pkill -f '[v]llm.entrypoints.openai.api_server'
  for i in $(seq 40); do pgrep -f '[v]llm.entrypoints.openai.api_server' >/dev/null || break; sleep 1; done
  pkill -9 -f '[v]llm.entrypoints.openai.api_server'; pkill -9 -f '[E]ngineCore'; sleep 3
  bash .real-vllm/tools/gpu.sh start "$@" ;;
fidelity)
  # do.sh fidelity NAME PROFILE [STEP]: the server's side of the twin check (open-loop steps at
  # 0.3-1.2 of PROFILE's knee), recorded with --server-only; the twin is swept and compared elsewhere.
  timeout 590 python3 -m adapter fidelity --url $U --profile "$3" --server-only --step "${4:-45s}" --settle 5s \
    --out "$OUT/$2-server.json" 2>&1 | tail -14 ;;
capture)
  curl -s $U/metrics > "$OUT/$2-metrics.prom"; tail -200 /tmp/real-vllm/server.log > "$OUT/$2-server.log" ;;
esac
