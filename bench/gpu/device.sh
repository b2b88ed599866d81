#!/usr/bin/env bash
# The GPU work, run ON the lent machine from the repository root (the device tool copies the
# working tree there; the machine reaches no registry). Steps, one per call of the tool so each
# stays inside its time limit, back to back while the machine is warm:
#
#   bash bench/gpu/device.sh stash        # copy this call's carried pieces (.whl/pN/) to /tmp/pieces
#   bash bench/gpu/device.sh setup        # join the pieces, install into /tmp/site, build the plugin
#   bash bench/gpu/device.sh coldstart    # first Run in fresh processes: empty kernel cache, then warm
#   BENCH_COMMIT=<sha> bash bench/gpu/device.sh bench   # ORT CPU vs CUDA vs MLX EP, profile
#   bash bench/gpu/device.sh variants     # models again, one switch changed each (FILTER=b8)
#   bash bench/gpu/device.sh tests        # the test suite with the GPU as the default device
#
# The carried payload is one tar (made by bench/gpu/pack.sh here) cut into pieces of under 64 MiB:
# the wheels mlx, mlx-cuda-13, onnxruntime-genai, the models' packages (rapidocr_onnxruntime,
# silero-vad, magika, the MiniLM weights) and onnxruntime-gpu as an unpacked, xz-compressed tree.
# What each step writes for the caller goes under $OUT (the device tool brings it back). CUDA's libraries come from the
# machine's own Python packages (onnxruntime.preload_dlls() finds them; MLX links them).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SITE=/tmp/site
LIB=/tmp/build-gpu/libonnxruntime_ep_mlx.so
export CUDA_HOME=/usr/local/cuda PYTHONPATH=$SITE:$PWD/python:${PYTHONPATH:-}
export ONNXRUNTIME_EP_MLX_LIBRARY=$LIB PYTHONUNBUFFERED=1
PY=python3

case "${1:-}" in
stash)
  mkdir -p /tmp/pieces
  cp .whl/p*/* /tmp/pieces/
  ls -la /tmp/pieces
  ;;
setup)
  cat /tmp/pieces/all.tar.part* > /tmp/all.tar
  mkdir -p /tmp/wheels "$SITE"
  tar xf /tmp/all.tar -C /tmp/wheels
  tar xJf /tmp/wheels/ortgpu.tar.xz -C "$SITE"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" /tmp/wheels/*.whl
  make -s -j16 MLX_DIR=$SITE/mlx BUILD=/tmp/build-gpu OPENBLAS= "$LIB"
  $PY -c "import onnxruntime as o, mlx.core as mx; o.preload_dlls(); \
print('onnxruntime', o.__version__, o.get_available_providers()); \
print('mlx', mx.__version__, mx.default_device())"
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
  # kernels an earlier lease compiled (coldstart's kernels.tar.xz), when carried in .whl/kc/
  if [ -f .whl/kc/kernels.tar.xz ]; then tar xJf .whl/kc/kernels.tar.xz -C /tmp; fi
  ;;
coldstart)
  # The target model alone first (its figure must not share the machine), then the others.
  rm -rf /tmp/kc && mkdir -p /tmp/kc
  for m in "PP-OCRv4 det 1x3x640x640" "PP-OCRv4 rec 1x3x48x320" "PP-OCR cls 1x3x48x192" \
           "magika standard_v3_3 1x2048" "silero-vad 1x512" "all-MiniLM-L6-v2 b1 s128"; do
    timeout 300 $PY bench/gpu/first_run.py --cache /tmp/kc --model "$m" \
      | sed 's/^/cold /' | tee -a "$OUT/coldstart.txt" || echo "cold $m: failed" | tee -a "$OUT/coldstart.txt"
  done
  for m in "PP-OCRv4 det 1x3x640x640" "PP-OCRv4 rec 1x3x48x320"; do
    $PY bench/gpu/first_run.py --cache /tmp/kc --model "$m" | sed 's/^/warm /' \
      | tee -a "$OUT/coldstart.txt"
  done
  # the kernels, for a later lease's warm start (they are MLX's output for these models)
  tar cJf "$OUT/kernels.tar.xz" -C /tmp kc && ls -la "$OUT/kernels.tar.xz"
  ;;
bench)
  # MLX's kernels are compiled once per machine into /tmp/kc by `coldstart` (or here, slowly).
  mkdir -p "$OUT/prof"
  MLX_PTX_CACHE_DIR=/tmp/kc $PY bench/gpu/providers.py --all --write-doc --profile "$OUT/prof" \
    --json "$OUT/rows.jsonl" ${FILTER:+--filter "$FILTER"}
  cp docs/BENCHMARKS.md "$OUT/"
  ;;
variants)
  # The same models with one switch changed each: what compiling, shapeless tracing and TF32 buy
  for v in ONNXRUNTIME_EP_MLX_NO_COMPILE=1 ONNXRUNTIME_EP_MLX_NO_SHAPELESS=1 MLX_ENABLE_TF32=0; do
    env "$v" MLX_PTX_CACHE_DIR=/tmp/kc $PY bench/gpu/providers.py --all --no-cpu --runs 15 \
      --profile "$OUT/prof" --json "$OUT/variants.jsonl" --filter "${FILTER:-b8}" | tail -4
  done
  ;;
tests)
  # Correctness runs turn TF32 off (MLX's CUDA products otherwise round like TF32).
  MLX_PTX_CACHE_DIR=/tmp/kc MLX_ENABLE_TF32=0 $PY -m pytest -q -n 14 -p no:cacheprovider tests \
    --ignore tests/models/test_conformance.py --ignore tests/ops/test_docs_operators.py \
    2>&1 | tee "$OUT/tests.log" | tail -40
  ;;
*)
  sed -n '2,17p' "$0"
  exit 2
  ;;
esac
