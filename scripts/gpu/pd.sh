#!/usr/bin/env bash
# Issue 41's 1P1D pair on two GPUs of one host (not yet run): the 8B-shaped vLLM 0.26.0 of scripts/gpu/
# as a prefill engine on GPU 0 (:8100) and a decode engine on GPU 1 (:8200), joined by NixlConnector
# (kv_role kv_both on both, a NIXL side channel each), the chart's proxy helm/files/pd-proxy/pd_proxy.py
# on :8000 in front. From the checkout's root with the pack and the NIXL parts collected
# (scripts/gpu/README.md; `build-pd-pack.sh` writes the NIXL parts):
#   pd.sh start       unpack, install NIXL, start both engines and the proxy (they outlive the call),
#                     wait for /health, send one request through the proxy, show the KV hand-over series
#   pd.sh run         detached: the pair's profile (`profile --pd`), then an open-loop sweep through the
#                     proxy (bench/sweep_steps.py) for the twin of the pair to be checked against
#   pd.sh wait S      wait up to S seconds for the runs, then pack them and the logs into $OUT/pd.tgz
# Engines are found by their port, never by a pid file (setsid under job control forks).
set -u
R=/tmp/real-vllm; W=/tmp/pd; mkdir -p $W
U=http://127.0.0.1; M=llama-8b-dummy
ENGINE="--model $R/model8b --served-model-name $M --load-format dummy --dtype bfloat16 --max-model-len 4096 \
--max-num-seqs 32 --num-gpu-blocks-override 4096 --gpu-memory-utilization 0.5 --disable-uvicorn-access-log \
--seed 0 --host 127.0.0.1"
KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
engine_up() {  # engine_up PORT: wait for its /health, or say why not
  t0=$(date +%s)
  until curl -sf -o /dev/null $U:$1/health; do
    pgrep -f "[v]llm.entrypoints.openai.api_server.*--port $1" > /dev/null || { echo "engine :$1 exited"; tail -30 $W/engine-$1.log; return 3; }
    [ $(( $(date +%s) - t0 )) -gt 420 ] && { echo "engine :$1 not healthy after 420 s"; tail -30 $W/engine-$1.log; return 4; }
    sleep 1
  done
  echo "engine :$1 healthy after $(( $(date +%s) - t0 )) s"
}
case "$1" in
start)
  bash scripts/gpu/prepare8b.sh > $W/prepare.log 2>&1 || { tail -20 $W/prepare.log; exit 2; }
  bash scripts/gpu/build-pd-pack.sh install || exit 2
  eval "$(bash scripts/gpu/gpu.sh env)"
  export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TRANSFORMERS_OFFLINE=1 UCX_NET_DEVICES=all
  for role in 0:8100:5600 1:8200:5601; do
    IFS=: read -r gpu port side <<< "$role"
    CUDA_VISIBLE_DEVICES=$gpu VLLM_NIXL_SIDE_CHANNEL_PORT=$side setsid env -C /tmp \
      python3 -m vllm.entrypoints.openai.api_server $ENGINE --port $port --kv-transfer-config "$KV" \
      > $W/engine-$port.log 2>&1 < /dev/null &
  done
  engine_up 8100 && engine_up 8200 || exit 3
  setsid python3 helm/files/pd-proxy/pd_proxy.py --port 8000 --prefill $U:8100 --decode $U:8200 \
    > $W/proxy.log 2>&1 < /dev/null &
  sleep 2
  curl -s -m 60 $U:8000/v1/completions -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"hello world\",\"max_tokens\":8}" | head -c 600; echo
  for port in 8100 8200; do
    echo "== :$port"; curl -s $U:$port/metrics | grep -v "^#" | grep -iE "nixl|kv_transfer|external|prompt_tokens_by_source|cache_config_info" | head -12
  done
  tail -5 $W/proxy.log ;;
run)
  eval "$(bash scripts/gpu/gpu.sh env)"
  export PYTHONUNBUFFERED=1
  setsid bash -c "timeout 900 python3 -m adapter profile --pd --url $U:8000 --prefill-url $U:8100 \
    --decode-url $U:8200 --model $M --prompt-tokens 1024 --output-tokens 128 --slo-ttft 800ms \
    --slo-tpot 50ms --budget 10m --plain --out $W/profile > $W/profile.log 2>&1; \
    timeout 600 python3 bench/sweep_steps.py --url $U:8000 --model $M --rates ${RATES:-4,8,12} --step 90s \
    --prompt-tokens 1024 --output-tokens 128 --processes 4 --out $W/sweep.jsonl > $W/sweep.log 2>&1; echo \$? > $W/run.done" \
    < /dev/null > /dev/null 2>&1 &
  sleep 3; ls $W ;;
wait)
  for i in $(seq "$2"); do [ -f $W/run.done ] && break; sleep 1; done
  tail -15 $W/profile.log; tail -5 $W/sweep.log 2>/dev/null; cat $W/run.done 2>/dev/null
  tar czf $OUT/pd.tgz -C $W . ;;
esac
