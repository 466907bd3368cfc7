#!/usr/bin/env bash
# The NIXL add-on to the pack, for issue 41's P/D pair (NixlConnector, kv_role kv_both on both engines,
# the chart's proxy helm/files/pd-proxy/pd_proxy.py between them): NIXL's Python API (`nixl`, which
# picks the CUDA variant) and its CUDA 13 build (`nixl-cu13`, UCX bundled; vLLM 0.26.0 here runs on
# PyTorch 2.11/CUDA 13). Runs here (needs pip's registry); writes two parts of < 32 MB to
# DEST/pd1 and DEST/pd2 (default .real-vllm/) and PDSUMS. On the GPU host, after the pack:
#   bash scripts/gpu/build-pd-pack.sh install     # from the checkout's root, parts under .real-vllm/
# joins the parts and installs the wheels beside the pack's site (/tmp/real-vllm/site).
#   usage: build-pd-pack.sh [DEST] | install
set -euo pipefail
VERSION=1.5.1
R=/tmp/real-vllm
if [ "${1:-}" = install ]; then
  mkdir -p $R/pd && cp -f .real-vllm/pd*/pdpart* $R/pd/ && cp -f .real-vllm/PDSUMS $R/pd/
  (cd $R/pd && sha256sum -c PDSUMS) || { echo "missing or broken NIXL parts"; exit 2; }
  cat $R/pd/pdpart* > $R/pd/wheels.tar && tar -xf $R/pd/wheels.tar -C $R/pd
  python3 -m pip install -q --no-index --no-deps --no-compile --target $R/site --python-version 3.12 \
    --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64 --platform any $R/pd/*.whl
  PYTHONPATH=$R/site python3 -c "import nixl._api; print('nixl', nixl.__file__)"
  exit 0
fi
DEST="${1:-.real-vllm}"
WORK="$(mktemp -d)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  -d "$WORK" "nixl==$VERSION" "nixl-cu13==$VERSION"
tar -C "$WORK" -cf "$WORK/wheels.tar" "nixl-$VERSION-py3-none-any.whl" \
  "nixl_cu13-$VERSION-cp312-cp312-manylinux_2_28_x86_64.whl"
mkdir -p "$DEST/pd1" "$DEST/pd2"
split -n 2 -d "$WORK/wheels.tar" "$WORK/pdpart"
mv "$WORK/pdpart00" "$DEST/pd1/"; mv "$WORK/pdpart01" "$DEST/pd2/"
(cd "$DEST" && sha256sum pd1/pdpart00 pd2/pdpart01 | sed 's# pd./# #' > PDSUMS)
ls -l "$DEST"/pd*/pdpart*; rm -rf "$WORK"
