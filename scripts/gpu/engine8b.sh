# The 8B-shaped vLLM 0.26.0 engine that every GPU script of the lab runs, defined once (sourced, not run):
#   engine8b BLOCKS [PORT]   prints the engine's command line with --num-gpu-blocks-override BLOCKS,
#                            listening on PORT, or on `{port}` for the lab's --engine templates.
# The model is prepare8b.sh's (random weights in /tmp/real-vllm/model8b); engines are found by their
# port (`pgrep -f "[v]llm.entrypoints.openai.api_server.*--port N"`), never by a pid file.
engine8b() {
  local port="${2:-}"
  [ -n "$port" ] || port='{port}'
  echo "env -C /tmp python3 -m vllm.entrypoints.openai.api_server --model /tmp/real-vllm/model8b \
--served-model-name llama-8b-dummy --load-format dummy --dtype bfloat16 --max-model-len 4096 --max-num-seqs 32 \
--num-gpu-blocks-override $1 --gpu-memory-utilization 0.5 --disable-uvicorn-access-log --seed 0 \
--host 127.0.0.1 --port $port"
}
