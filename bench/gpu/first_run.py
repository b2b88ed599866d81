"""A model's first Run in a fresh process on the MLX EP (device=gpu): the time to create the
session and the time of the first Run, which on an empty kernel cache includes MLX compiling its
fused kernels (NVRTC). The kernel cache is MLX's own: MLX_PTX_CACHE_DIR, or /tmp/mlx/<version>/ptx.
Prints one JSON line: seconds for import, session creation, first and second Run, and how many files
the kernel cache folder gained. The caller empties the folder for a cold figure and reuses it for a
warm one (bench/gpu/device.sh does both).

    MLX_PTX_CACHE_DIR=/tmp/kc python3 bench/gpu/first_run.py --model "PP-OCRv4 det 1x3x640x640"
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def cache_files(folder: str | None) -> int:
    if not folder or not os.path.isdir(folder):
        return 0
    return sum(len(files) for _, _, files in os.walk(folder))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True)
    args = p.parse_args(argv)
    import onnxruntime as ort
    from models import GPU_CASES
    from onnxruntime_ep_mlx import compare
    folder = os.environ.get("MLX_PTX_CACHE_DIR")
    before = cache_files(folder)
    model, feeds = GPU_CASES[args.model]()
    t_import = time.perf_counter() - T0
    so = ort.SessionOptions()
    so.log_severity_level = 3
    t = time.perf_counter()
    s, _ = compare.mlx_session(model, {"device": "gpu"}, report=False, sess_options=so)
    t_create = time.perf_counter() - t
    t = time.perf_counter()
    s.run(None, feeds)
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    s.run(None, feeds)
    t_second = time.perf_counter() - t
    print(json.dumps({"name": args.model, "import_s": round(t_import, 3),
                      "create_s": round(t_create, 3), "first_run_s": round(t_first, 3),
                      "second_run_s": round(t_second, 3),
                      "kernel_files_added": cache_files(folder) - before}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
