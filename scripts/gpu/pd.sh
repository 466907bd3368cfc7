#!/usr/bin/env bash
# Issue 41's 1P1D pair on a four-GPU host: the 8B-shaped vLLM 0.26.0 of scripts/gpu/ as a prefill engine
# on GPU 0 (:8100) and a decode engine on GPU 1 (:8200), joined by NixlConnector (kv_role kv_both on
# both, a NIXL side channel each), the chart's proxy helm/files/pd-proxy/pd_proxy.py on :8000 in front;
# and the same engine aggregated on GPU 2 (:8300), the baseline measured the same way at the same time.
# From the checkout's root with the pack and the NIXL parts collected (scripts/gpu/README.md;
# `build-pd-pack.sh` writes the NIXL parts):
#   pd.sh start       unpack, install NIXL, start the three engines and the proxy (they outlive the call),
#                     wait for /health, send one request through the proxy, show the KV hand-over series
#   pd.sh run         detached, two sequences side by side:
#                     the pair: its profile (`profile --pd`), then an open-loop sweep through the proxy at
#                     0.4, 0.7 and 1.0 of the rate its profile says it sustains (bench/sweep_steps.py; the
#                     twin of the pair is checked against it), with bench/pd_exactness.py reading both
#                     engines through the adapter during the sweep;
#                     the aggregated engine: its profile (the twin's parameters), then `profile --pd` with
#                     all three URLs on it (its prefill throughput measured as the pair's is)
#   pd.sh wait S      wait up to S seconds for both, then pack them and the logs into $OUT/pd.tgz
#   pd.sh check T R   the adapter's exactness again (prefill throughput T) under one sweep step at R req/s,
#                     each engine's /metrics kept idle, under load and after, into $OUT/pd-check.tgz
# Engines are found by their port, never by a pid file (setsid under job control forks).
set -u
R=/tmp/real-vllm; W=/tmp/pd; mkdir -p $W
U=http://127.0.0.1; M=${MODEL:-llama-8b-dummy}
# Ports (a dry run here puts `emulate --pd 1:1` and `emulate` in the engines' places:
# PD_PREFILL=8100 PD_DECODE=8101 PD_ENTRY=8101 MODEL=m PAIR_BUDGET=2m PAIR_FLAGS="--pd-window 3" SWEEP_STEP=5s
# CHECK_SECONDS=20 bash scripts/gpu/pd.sh pair)
P=${PD_PREFILL:-8100}; D=${PD_DECODE:-8200}; E=${PD_ENTRY:-8000}; A=${PD_AGGREGATED:-8300}
source scripts/gpu/engine8b.sh
KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
WORKLOAD="--model $M --prompt-tokens 1024 --output-tokens 128 --slo-ttft 800ms --slo-tpot 50ms"
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
    CUDA_VISIBLE_DEVICES=$gpu VLLM_NIXL_SIDE_CHANNEL_PORT=$side setsid \
      $(engine8b 4096 $port) --kv-transfer-config "$KV" \
      > $W/engine-$port.log 2>&1 < /dev/null &
  done
  CUDA_VISIBLE_DEVICES=2 setsid $(engine8b 4096 8300) \
    > $W/engine-8300.log 2>&1 < /dev/null &
  engine_up 8100 && engine_up 8200 && engine_up 8300 || exit 3
  setsid python3 helm/files/pd-proxy/pd_proxy.py --port 8000 --prefill $U:$P --decode $U:$D \
    > $W/proxy.log 2>&1 < /dev/null &
  sleep 2
  curl -s -m 60 $U:$E/v1/completions -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"hello world\",\"max_tokens\":8}" | head -c 600; echo
  for port in 8100 8200 8300; do
    echo "== :$port"; curl -s $U:$port/metrics | grep -v "^#" | grep -iE "nixl|kv_transfer|external|prompt_tokens_by_source|cache_config_info" | head -12
  done
  tail -5 $W/proxy.log ;;
run)
  setsid bash scripts/gpu/pd.sh pair < /dev/null > $W/pair.log 2>&1 &
  setsid bash scripts/gpu/pd.sh aggregated < /dev/null > $W/aggregated.log 2>&1 &
  sleep 3; ls $W ;;
pair)
  [ -d $R/site ] && eval "$(bash scripts/gpu/gpu.sh env)"; export PYTHONUNBUFFERED=1
  timeout 600 python3 -m adapter profile --pd --url $U:$E --prefill-url $U:$P --decode-url $U:$D \
    $WORKLOAD ${PAIR_FLAGS:-} --budget ${PAIR_BUDGET:-8m} --plain --out $W/pair > $W/pair-profile.log 2>&1
  # The rate the pair sustains: the lower of its prefill engine's and its decode engine's knee.
  read -r RATES THROUGHPUT < <(python3 -c "import json; p = json.load(open('$W/pair/profile.json'))['pd']
d = p['decode']; top = min(p['prefill']['throughput_tokens_per_second'] / p['prompt_tokens'],
  d['knee_running'] / (p['output_tokens'] * d['knee_tpot_seconds']))
print(','.join(f'{top * f:.2f}' for f in (0.4, 0.7, 1.0)), p['prefill']['throughput_tokens_per_second'])")
  echo "sweep rates $RATES, prefill throughput $THROUGHPUT"
  timeout 400 python3 bench/pd_exactness.py --prefill $U:$P --decode $U:$D --model $M \
    --prefill-throughput "$THROUGHPUT" --duration ${CHECK_SECONDS:-300} --out $W/exactness.json > $W/exactness.log 2>&1 &
  timeout 420 python3 bench/sweep_steps.py --url $U:$E --model $M --rates "$RATES" --step ${SWEEP_STEP:-60s} --gap 5s \
    --prompt-tokens 1024 --output-tokens 128 --processes 4 --slo-ttft 800ms --slo-tpot 50ms \
    --out $W/sweep.jsonl > $W/sweep.log 2>&1
  wait; echo done > $W/pair.done ;;
aggregated)
  [ -d $R/site ] && eval "$(bash scripts/gpu/gpu.sh env)"; export PYTHONUNBUFFERED=1
  timeout 480 python3 -m adapter profile --url $U:$A $WORKLOAD --budget ${AGG_BUDGET:-7m} --plain --out $W/aggregated \
    > $W/aggregated-profile.log 2>&1
  timeout 360 python3 -m adapter profile --pd --url $U:$A --prefill-url $U:$A --decode-url $U:$A \
    $WORKLOAD ${PAIR_FLAGS:-} --budget ${AGG_PD_BUDGET:-5m} --plain --out $W/aggregated-pd > $W/aggregated-pd.log 2>&1
  echo done > $W/aggregated.done ;;
check)
  # The exactness check again under one sweep step at the rate given (after a fix to the check), with
  # both engines' /metrics pages kept: idle before, in the middle of the step, idle after.
  [ -d $R/site ] && eval "$(bash scripts/gpu/gpu.sh env)"; export PYTHONUNBUFFERED=1
  C=$W/check; mkdir -p $C
  for port in $P $D; do curl -s $U:$port/metrics > $C/metrics-$port-idle.txt; done
  timeout 200 python3 bench/pd_exactness.py --prefill $U:$P --decode $U:$D --model $M \
    --prefill-throughput "$2" --duration 110 --out $C/exactness.json > $C/exactness.log 2>&1 &
  timeout 200 python3 bench/sweep_steps.py --url $U:$E --model $M --rates "$3" --step 90s \
    --prompt-tokens 1024 --output-tokens 128 --processes 4 --out $C/sweep.jsonl > $C/sweep.log 2>&1 &
  sleep 60; for port in $P $D; do curl -s $U:$port/metrics > $C/metrics-$port-load.txt; done
  wait
  for port in $P $D; do curl -s $U:$port/metrics > $C/metrics-$port-after.txt; done
  cat $C/exactness.log; tail -n 2 $C/sweep.log; tail -n 3 $W/proxy.log
  tar czf $OUT/pd-check.tgz -C $W check proxy.log ;;
wait)
  for i in $(seq "$2"); do [ -f $W/pair.done ] && [ -f $W/aggregated.done ] && break; sleep 1; done
  tail -n 12 $W/pair-profile.log $W/aggregated-profile.log $W/aggregated-pd.log $W/pair.log
  cat $W/exactness.log; tail -n 4 $W/sweep.log
  tar czf $OUT/pd.tgz -C $W . ;;
esac
