"""The GPU benchmark: each model in a process of its own, on ORT's CPU provider, ORT's CUDA provider
and the MLX EP (device=gpu), with the same host (NumPy) inputs; warm-up (covering the MLX EP's path
trial), then the median of --runs interleaved Runs of each. A benchmark, never a test.

    python3 bench/gpu/providers.py --all [--write-doc] [--profile DIR]   # every model, a table
    python3 bench/gpu/providers.py --model NAME [--profile DIR]          # one model, a JSON line

--profile DIR also records, after the timed runs, 5 Runs of the CUDA provider and 5 of the MLX EP
under PyTorch's profiler (CUPTI sees every kernel and copy in the process, MLX's included) and
prints, per provider and Run: kernels launched, summed kernel time, the time the GPU was busy
(union of kernel and copy intervals), host<->device copies and their time, and the heaviest
kernels; the traces are written to DIR. --write-doc puts the table into docs/BENCHMARKS.md between
the bench-gpu markers. Needs onnxruntime-gpu (onnxruntime.preload_dlls() finds CUDA's libraries),
ONNXRUNTIME_EP_MLX_LIBRARY pointing at a plugin built against mlx-cuda, and CUDA_HOME.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from models import GPU_CASES  # noqa: E402
from run import TRIAL_RUNS, write_doc, machine as cpu_machine  # noqa: E402

from onnxruntime_ep_mlx import compare  # noqa: E402

BEGIN, END = "<!-- bench-gpu:begin -->", "<!-- bench-gpu:end -->"


def quiet() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return so


def make_sessions(model, record, with_cpu=True):
    s = {}
    if with_cpu:
        s["cpu"] = ort.InferenceSession(model, quiet(), providers=["CPUExecutionProvider"])
    cuda = ort.InferenceSession(model, quiet(),
                                providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    if "CUDAExecutionProvider" not in cuda.get_providers():
        raise RuntimeError("ORT's CUDA provider did not load (onnxruntime-gpu, preload_dlls)")
    s["cuda"] = cuda
    s["mlx"], rep = compare.mlx_session(model, {"device": "gpu", "stats_file": record},
                                        sess_options=quiet())
    return s, rep


def timed(session, feeds):
    t0 = time.perf_counter()
    out = session.run(None, feeds)
    return (time.perf_counter() - t0) * 1e3, out


def profile(sessions, feeds, name, folder):
    """Kernels and copies per Run of the CUDA provider and the MLX EP, from PyTorch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile
    torch.cuda.init()
    result = {}
    for prov in ("cuda", "mlx"):
        runs = 5
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(runs):
                sessions[prov].run(None, feeds)
            wall = (time.perf_counter() - t0) * 1e3 / runs
        trace = Path(folder) / ("".join(c if c.isalnum() else "_" for c in name)[:40] + f"-{prov}.json")
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels + copies)
        busy, end = 0.0, -1e30
        for a, b in spans:  # union of intervals
            if b > end:
                busy += b - max(a, end)
                end = b
        heavy = {}
        for e in kernels:
            k = e["name"][:60]
            heavy[k] = heavy.get(k, 0.0) + e["dur"]
        top = sorted(heavy.items(), key=lambda kv: -kv[1])[:8]
        result[prov] = {
            "wall_ms": wall,
            "kernels": len(kernels) / runs,
            "kernel_ms": sum(e["dur"] for e in kernels) / runs / 1e3,
            "busy_ms": busy / runs / 1e3,
            "copies": len(copies) / runs,
            "copy_ms": sum(e["dur"] for e in copies) / runs / 1e3,
            "copy_mb": sum(e.get("args", {}).get("bytes", 0) for e in copies) / runs / 1e6,
            "top": [(k, round(v / runs / 1e3, 3)) for k, v in top]}
    return result


def bench_model(name, runs, warmup, profile_dir=None, with_cpu=True):
    model, feeds = GPU_CASES[name]()
    fd, record = tempfile.mkstemp(suffix=".json", prefix="mlx-record-")
    os.close(fd)
    sessions, rep = make_sessions(model, record, with_cpu)
    on_mlx, total = compare.coverage(sessions["mlx"])
    for i in range(max(warmup, TRIAL_RUNS)):
        for prov in sessions:  # (no loop variable may keep a session alive past its del)
            if prov == "mlx" or i < warmup:
                sessions[prov].run(None, feeds)
    times = {p: [] for p in sessions}
    outs = {}
    order = list(sessions)
    for r in range(runs):  # interleaved, the order rotated every round
        for prov in order[r % len(order):] + order[:r % len(order)]:
            t, outs[prov] = timed(sessions[prov], feeds)
            times[prov].append(t)
    ref = outs.get("cpu", outs["cuda"])
    row = {"name": name, "runs": runs, "coverage": f"{on_mlx}/{total}",
           "diff_mlx": compare.max_abs_diff(outs["mlx"], ref),
           "diff_cuda": compare.max_abs_diff(outs["cuda"], ref),
           "env": {k: v for k, v in os.environ.items()
                   if k.startswith(("ONNXRUNTIME_EP_MLX_", "MLX_")) and k != "MLX_PTX_CACHE_DIR"}}
    for p, ts in times.items():
        row[f"{p}_ms"] = statistics.median(ts)
        row[f"{p}_min_ms"] = min(ts)
    if profile_dir:
        try:
            row["profile"] = profile(sessions, feeds, name, profile_dir)
        except Exception as e:  # the timings stand without it
            row["profile_error"] = str(e).splitlines()[0][:160]
    del sessions["mlx"]  # the EP writes its run record (stats_file) when the session ends
    gc.collect()
    groups = json.loads(Path(record).read_text() or "{}").get("groups", [])
    os.unlink(record)
    paths = {}
    for g in groups:
        paths[g["path"]] = paths.get(g["path"], 0) + 1
    row["paths"] = ", ".join(f"{n} {p}" for p, n in sorted(paths.items()))
    row["groups"] = rep["groups"] if rep else 0
    row["traces"] = sum(g["traces"] for g in groups)
    row["fallbacks"] = sum(g["fallbacks"] for g in groups)
    return row


def machine() -> str:
    """The GPU and driver, bench/run.py's machine line (CPU, Python, onnxruntime, mlx), the commit."""
    gpu = "unknown GPU"
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    # the device machine's copy of the tree may carry a stale .git: the caller says the commit
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{gpu}; {cpu_machine()}; commit {commit}"


def table(rows) -> str:
    lines = ["| Model | ORT CPU EP ms | ORT CUDA EP ms | MLX EP ms | CUDA/MLX | CPU/MLX | nodes on MLX "
             "| group paths | MLX max abs diff | CUDA max abs diff |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | – | – | – | – | – | – | – | – | {r['error']} |")
            continue
        cpu = r.get("cpu_ms", float("nan"))
        lines.append(f"| {r['name']} | {cpu:.3f} | {r['cuda_ms']:.3f} | {r['mlx_ms']:.3f} | "
                     f"{r['cuda_ms'] / r['mlx_ms']:.2f}x | {cpu / r['mlx_ms']:.2f}x | "
                     f"{r['coverage']} | {r['paths']} | {r['diff_mlx']:.2g} | {r['diff_cuda']:.2g} |")
    return "\n".join(lines)


def profile_table(rows) -> str:
    lines = ["| Model | provider | wall ms | GPU busy ms | kernels | kernel ms | copies | copy ms | copy MB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        for prov, p in r.get("profile", {}).items():
            lines.append(f"| {r['name']} | {prov} | {p['wall_ms']:.2f} | {p['busy_ms']:.2f} | "
                         f"{p['kernels']:.0f} | {p['kernel_ms']:.2f} | {p['copies']:.0f} | "
                         f"{p['copy_ms']:.2f} | {p['copy_mb']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="one model (a name in bench/models.py's GPU_CASES)")
    p.add_argument("--all", action="store_true", help="every model, one process each")
    p.add_argument("--filter", default="", help="with --all: only names containing this")
    p.add_argument("--runs", type=int, default=25)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--profile", metavar="DIR", help="also profile kernels and copies; traces to DIR")
    p.add_argument("--write-doc", action="store_true", help="with --all: table into BENCHMARKS.md")
    p.add_argument("--json", metavar="FILE", help="append each model's row to FILE")
    p.add_argument("--no-cpu", action="store_true", help="leave ORT's CPU provider out")
    args = p.parse_args(argv)
    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()
    if args.model:
        try:
            row = bench_model(args.model, args.runs, args.warmup, args.profile, not args.no_cpu)
        except Exception as e:  # a model that cannot run is reported, not fatal
            row = {"name": args.model, "error": str(e).splitlines()[0][:160]}
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        return 0
    rows = []
    for name in GPU_CASES:
        if args.filter and args.filter.lower() not in name.lower():
            continue
        cmd = [sys.executable, __file__, "--model", name, "--runs", str(args.runs),
               "--warmup", str(args.warmup)] + (["--profile", args.profile] if args.profile else []) \
            + (["--no-cpu"] if args.no_cpu else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        row = json.loads(lines[-1]) if lines else {
            "name": name, "error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}"}
        rows.append(row)
        print(table([row]).splitlines()[2], flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    text = (f"Measured {time.strftime('%Y-%m-%d')} by `bench/gpu/providers.py --all` on {machine()}. "
            f"Host NumPy inputs for every provider; median of {args.runs} interleaved Runs after "
            f"warm-up; each model in a process of its own; MLX's TF32 at its default (on), ORT's "
            f"CUDA provider at its defaults.\n\n" + table(rows))
    if any("profile" in r for r in rows):
        text += "\n\nPer Run, from PyTorch's profiler (CUPTI), 5 Runs each:\n\n" + profile_table(rows)
    print()
    print(text)
    if args.write_doc:
        write_doc(text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
