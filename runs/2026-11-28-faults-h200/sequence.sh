set -u
W=/tmp/faults; R=/tmp/real-vllm
date +%s > $W/t0
timeout 1200 python3 -m adapter experiment docs/experiments/faults-8b.yaml --gpus 0 --out $W/experiment \
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
  --engine "env -C /tmp python3 -m vllm.entrypoints.openai.api_server --model $R/model8b --served-model-name llama-8b-dummy \
--load-format dummy --dtype bfloat16 --max-model-len 4096 --max-num-seqs 32 --num-gpu-blocks-override 768 \
--gpu-memory-utilization 0.5 --disable-uvicorn-access-log --seed 0 --host 127.0.0.1 --port {port}" \
  --gpus 0 --profile docs/rehearsal/kv-s0-profile.json --trace docs/rehearsal/faults-day.csv \
  --downscale-stabilization 120 --ready-within 600 --plain --out $W/rehearsal > $W/rehearsal.log 2>&1
echo $? > $W/rehearsal.done
