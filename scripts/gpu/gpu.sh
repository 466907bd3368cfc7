#!/usr/bin/env bash
# scripts/gpu/gpu.sh: on the GPU machine, from the checkout's root, with the pack's parts (scripts/gpu/build-pack.sh)
# under .real-vllm/ (one part per
# call is fine: parts are collected in /tmp/real-vllm/chunks and kept while the machine stays up).
#   gpu.sh collect            copy whatever parts are here; print the GPU and Python
#   gpu.sh start [ARGS...]    unpack (once), write the random-weights 1B model, start vLLM 0.26.0 in its
#                             own session on 127.0.0.1:8000 (extra ARGS go to the server), wait for /health
#   gpu.sh env                print the exports that make the pack and this checkout importable
# The server keeps running after the command returns, until the machine goes away.
set -u
R=/tmp/real-vllm; mkdir -p $R/chunks
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
cp -f .real-vllm/p*/part0* $R/chunks/ 2>/dev/null; cp -f .real-vllm/PARTSUMS $R/ 2>/dev/null
case "${1:-collect}" in
collect) ls -l $R/chunks; nvidia-smi -L; python3 --version ;;
env) echo "export PYTHONPATH=$R/site:$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1" ;;
start)
  shift
  if [ ! -f $R/site/.done ]; then
    (cd $R/chunks && sha256sum -c ../PARTSUMS) || { echo "missing or broken parts"; exit 2; }
    rm -rf $R/site && mkdir -p $R/site && cat $R/chunks/part0* | xz -d -T0 | tar xf - -C $R/site && touch $R/site/.done
  fi
  export PYTHONPATH=$R/site
  python3 $R/site/make_model.py $R/model >/dev/null
  if curl -sf -o /dev/null http://127.0.0.1:8000/health; then echo "already serving"; exit 0; fi
  ARGS="--model $R/model --served-model-name llama-1b-dummy --load-format dummy --dtype bfloat16 --max-model-len 4096
        --max-num-seqs 32 --num-gpu-blocks-override 2048 --gpu-memory-utilization 0.5 --disable-uvicorn-access-log
        --seed 0 --host 127.0.0.1 --port 8000 $*"
  (cd /tmp && setsid python3 -m vllm.entrypoints.openai.api_server $ARGS > $R/server.log 2>&1 < /dev/null & echo $! > $R/server.pid)
  t0=$(date +%s)
  until curl -sf -o /dev/null http://127.0.0.1:8000/health; do
    kill -0 "$(cat $R/server.pid)" 2>/dev/null || { echo "server exited"; tail -40 $R/server.log; exit 3; }
    [ $(( $(date +%s) - t0 )) -gt 400 ] && { echo "not healthy after 400 s"; tail -40 $R/server.log; exit 4; }
    sleep 1
  done
  echo "healthy after $(( $(date +%s) - t0 )) s (log: $R/server.log)" ;;
esac
