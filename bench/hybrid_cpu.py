"""The hybrid decoder (bench/hybrid_decoder.py, realistic size with a 512-token KV cache, as on the
H200) on this machine: the MLX EP against ORT's CPU provider at T = 1, 128 and 512, in one
process with identical inputs, interleaved runs after a warm-up; prints a markdown table."""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hybrid_decoder as hd  # noqa: E402

from onnxruntime_ep_mlx import compare  # noqa: E402


def main(runs: int = 3) -> None:
    cfg = replace(hd.SIZES["realistic"], cache=512)
    data = hd.build(cfg).SerializeToString()
    quiet = ort.SessionOptions()
    quiet.log_severity_level = 3
    cpu = ort.InferenceSession(data, quiet, providers=["CPUExecutionProvider"])
    mlx_s, _ = compare.mlx_session(data, report=False, sess_options=quiet)
    on, total = compare.coverage(mlx_s)
    print(f"hybrid decoder realistic (hidden {cfg.hidden}, dk=dv={cfg.dk}, {cfg.layers} layers, "
          f"cache {cfg.cache}), batch 1, {on}/{total} nodes on MLX; median of {runs} interleaved "
          f"runs after 1 warm-up\n")
    print("| T | ORT CPU ms | MLX EP ms | CPU/MLX | max abs diff |\n|---:|---:|---:|---:|---:|")
    for tokens in (1, 128, 512):
        feeds = hd.feeds(cfg, 1, tokens, 0)
        cpu.run(None, feeds)
        mlx_s.run(None, feeds)
        tc, tm = [], []
        for _ in range(runs):
            t0 = time.perf_counter(); ref = cpu.run(None, feeds); tc.append(time.perf_counter() - t0)
            t0 = time.perf_counter(); got = mlx_s.run(None, feeds); tm.append(time.perf_counter() - t0)
        c, m = statistics.median(tc) * 1e3, statistics.median(tm) * 1e3
        print(f"| {tokens} | {c:.1f} | {m:.1f} | {c / m:.2f}x | "
              f"{compare.max_abs_diff(got, ref):.2g} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
