#!/usr/bin/env bash
# On the GPU machine, from the checkout's root, with the pack's parts under .real-vllm/ (see
# scripts/gpu/README.md): unpack vLLM 0.26.0 once and write the Llama-3.1-8B-shaped
# random-weights model to /tmp/real-vllm/model8b, as runs/2026-11-26-real-vllm-0.26.0-h200/scripts/start8b.sh
# does, without starting a server: `vllm-autoscale experiment` starts one engine per GPU itself.
set -eu
R=/tmp/real-vllm
bash scripts/gpu/gpu.sh collect >/dev/null
sed -e 's/"hidden_size": 2048/"hidden_size": 4096/' -e 's/"intermediate_size": 8192/"intermediate_size": 14336/' \
    -e 's/"num_hidden_layers": 16/"num_hidden_layers": 32/' -e 's/"head_dim": 64/"head_dim": 128/' \
    -e 's/"tie_word_embeddings": True/"tie_word_embeddings": False/' scripts/gpu/make_model.py > /tmp/make_model_8b.py
if [ ! -f $R/site/.done ]; then
  (cd $R/chunks && sha256sum -c ../PARTSUMS)
  rm -rf $R/site && mkdir -p $R/site && cat $R/chunks/part0* | xz -d -T0 | tar xf - -C $R/site && touch $R/site/.done
fi
PYTHONPATH=$R/site python3 /tmp/make_model_8b.py $R/model8b
grep -E 'hidden_size|layers' $R/model8b/config.json
nvidia-smi --query-gpu=index,name,memory.used --format=csv
