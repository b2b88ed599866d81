"""Soak: resident memory over many Runs of one session and over many session create/destroy
cycles (a measurement for docs/BENCHMARKS.md, not a test). Prints RSS (MiB) at checkpoints.

    python tools/soak.py --runs 10000 --cycles 200 [--case minilm]"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import onnxruntime as ort

import onnxruntime_ep_mlx as mlx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import models  # noqa: E402


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="MiniLM-L6-v2 b1")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--cycles", type=int, default=200)
    args = ap.parse_args()
    name = next(k for k in models.CASES if args.case.lower() in k.lower())
    model, feeds = models.CASES[name]()
    print(f"{name}: start {rss_mib():.0f} MiB", flush=True)
    s = ort.InferenceSession(model, mlx.session_options())
    checkpoints = {1, 10, 100, 1000, 2000, 5000, args.runs}
    t0 = time.time()
    for i in range(1, args.runs + 1):
        s.run(None, feeds)
        if i in checkpoints:
            print(f"run {i}: {rss_mib():.0f} MiB ({time.time() - t0:.0f} s)", flush=True)
    del s
    gc.collect()
    checkpoints = {1, 10, 50, 100, 150, args.cycles}
    for i in range(1, args.cycles + 1):
        s = ort.InferenceSession(model, mlx.session_options())
        s.run(None, feeds)
        del s
        gc.collect()
        if i in checkpoints:
            print(f"cycle {i}: {rss_mib():.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
