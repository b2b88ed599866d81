"""A model's first Run in a fresh process on the MLX EP (device=gpu): the time to create the
session and the time of the first Run, which on an empty kernel cache includes MLX compiling its
fused kernels (NVRTC). The kernel cache is the folder given with --cache (the EP's kernel_cache_dir
option). Prints one JSON line: seconds for import, session creation, first and second Run, how many
files the folder gained, and the EP's own account of the first Run from its run record
(cold_start, kernel_cache). The caller empties the folder for a cold figure and reuses it for a warm
one (bench/gpu/device.sh does both).

    python3 bench/gpu/first_run.py --cache /tmp/kc --model "PP-OCRv4 det 1x3x640x640"
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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
    p.add_argument("--cache", required=True, help="the kernel cache folder (kernel_cache_dir)")
    args = p.parse_args(argv)
    import onnxruntime as ort
    from models import GPU_CASES
    from onnxruntime_ep_mlx import compare
    folder = args.cache
    before = cache_files(folder)
    model, feeds = GPU_CASES[args.model]()
    t_import = time.perf_counter() - T0
    so = ort.SessionOptions()
    so.log_severity_level = 3
    fd, record = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t = time.perf_counter()
    s, _ = compare.mlx_session(model, {"device": "gpu", "kernel_cache_dir": folder,
                                       "stats_file": record}, report=False, sess_options=so)
    t_create = time.perf_counter() - t
    t = time.perf_counter()
    s.run(None, feeds)
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    s.run(None, feeds)
    t_second = time.perf_counter() - t
    del s  # the EP writes its run record when the session ends
    stats = json.loads(Path(record).read_text() or "{}")
    os.unlink(record)
    print(json.dumps({"name": args.model, "import_s": round(t_import, 3),
                      "create_s": round(t_create, 3), "first_run_s": round(t_first, 3),
                      "second_run_s": round(t_second, 3),
                      "kernel_files_added": cache_files(folder) - before,
                      "cold_start": stats.get("cold_start"),
                      "kernel_cache": stats.get("kernel_cache")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
