#!/usr/bin/env bash
# Runs ON the lent GPU machine (device tool), from the repository root, after the two pieces of
# the mlx-cuda-13 wheel were copied to /tmp by earlier calls (the wheel is larger than one call
# may carry). Installs the carried wheels into /tmp/site (the machine has no registry) and builds
# the plugin against MLX's CUDA libmlx. Then: export PYTHONPATH=/tmp/site:$PWD/python and
# ONNXRUNTIME_EP_MLX_LIBRARY=$PWD/build-gpu/libonnxruntime_ep_mlx.so.
set -euo pipefail
source deps/pins.env
wheel=/tmp/mlx_cuda_13-$MLX_VERSION-py3-none-manylinux_2_35_x86_64.whl
[ -f "$wheel" ] || cat /tmp/mlxcuda.part* > "$wheel"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$wheel" .whl/mlx-"$MLX_VERSION"-*.whl .whl/onnxruntime-"$ONNXRUNTIME_VERSION"-*.whl
make -s MLX_DIR=/tmp/site/mlx BUILD=build-gpu OPENBLAS= build-gpu/libonnxruntime_ep_mlx.so
echo "device setup: built build-gpu/libonnxruntime_ep_mlx.so against $(ls /tmp/site/mlx/lib)"
