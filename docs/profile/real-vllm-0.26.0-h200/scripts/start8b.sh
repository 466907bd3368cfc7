#!/usr/bin/env bash
# Start vLLM 0.26.0 with a Llama-3.1-8B-shaped random-weights model (GPU-bound steps), KV-bound by
# --num-gpu-blocks-override 384 unless other flags are given, then warm it up for 40 s.
set -u
R=/tmp/real-vllm
bash .real-vllm/tools/gpu.sh collect >/dev/null
# unpack once (gpu.sh start does it; the 1B server it would start is replaced below)
sed -e 's/"hidden_size": 2048/"hidden_size": 4096/' -e 's/"intermediate_size": 8192/"intermediate_size": 14336/' \
    -e 's/"num_hidden_layers": 16/"num_hidden_layers": 32/' -e 's/"head_dim": 64/"head_dim": 128/' \
    -e 's/"tie_word_embeddings": True/"tie_word_embeddings": False/' .real-vllm/tools/make_model.py > /tmp/make_model_8b.py
if [ ! -f $R/site/.done ]; then
  (cd $R/chunks && sha256sum -c ../PARTSUMS) || exit 2
  rm -rf $R/site && mkdir -p $R/site && cat $R/chunks/part0* | xz -d -T0 | tar xf - -C $R/site && touch $R/site/.done
fi
PYTHONPATH=$R/site python3 /tmp/make_model_8b.py $R/model8b && grep -E 'hidden_size|layers' $R/model8b/config.json
bash .real-vllm/tools/gpu.sh start --model $R/model8b --served-model-name llama-8b-dummy "${@:---num-gpu-blocks-override 384}" || exit 3
grep -iE "num_gpu_blocks|KV cache|graph" $R/server.log | tail -5
eval "$(bash .real-vllm/tools/gpu.sh env)"
# what bounds the engine under load: the engine core's CPU against the GPU's busy time
(sleep 25; top -b -n1 -w 160 | head -16; nvidia-smi --query-gpu=utilization.gpu,clocks.sm --format=csv) > $OUT/under-load.txt 2>&1 &
timeout 120 python3 bench/sweep_steps.py --url http://127.0.0.1:8000 --model llama-8b-dummy --rates ${WARM_RATE:-12} --step 40s --gap 2s \
  --prompt-tokens ${PROMPT:-256} --output-tokens 128 --processes 2 --seed 9 --out $OUT/warmup.jsonl 2>&1 | tail -3
wait; cat $OUT/under-load.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,utilization.gpu,memory.used --format=csv
grep -oE "async_scheduling=[A-Za-z]+|enable_chunked_prefill=[A-Za-z]+|max_num_batched_tokens=[0-9]+" $R/server.log | sort -u
