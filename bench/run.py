"""`make bench`: every model in bench/models.py on ORT's CPU provider and on the MLX EP, in one
process with identical inputs; warm-up, then the median of several runs each, interleaved so
both providers see the same machine state. Prints a table (both medians, CPU/MLX ratio, node
coverage, max abs difference, compile diagnostics) and writes it into docs/BENCHMARKS.md between
markers, with the machine and versions. A benchmark, never a test: nothing here asserts speed.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import CASES  # noqa: E402

from onnxruntime_ep_mlx import compare  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import mlx.core as mx  # only for its version and device
    return (f"{platform.machine()} {cpu}, {os.cpu_count()} cores; Python {platform.python_version()}"
            f", onnxruntime {ort.__version__}, mlx {mx.__version__} ({mx.default_device()})")


def mlx_floor_us() -> float | None:
    tool = ROOT / "build" / "mlx_floor"
    if not tool.exists():
        return None
    r = subprocess.run([str(tool), "5000"], capture_output=True, text=True)
    return float(r.stdout) if r.returncode == 0 else None


def quiet() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return so


# Settle after every timed run: ORT's CPU provider leaves its thread pool spinning for a while
# after a Run, which on this 2-core machine would take a core from whichever session runs next
# (measured: PP-OCR cls on MLX 50 ms right after a CPU-provider run, 20 ms otherwise). The wait
# is busy, not a sleep, so the next run does not pay for waking an idle core; runs under 0.25 ms
# (the one-node overhead case, no parallel work to spin after) skip it, since any pause
# between such runs shows up in them (measured 0.02 -> 0.3 ms). The bound was 1 ms, which let
# silero-vad's 0.7 ms CPU-provider run go unsettled: its MLX run right after took 4.1 ms, 2.4
# with the settle (MLX alone, no CPU provider in the process: 1.4-1.6 ms). 50 ms was not long
# enough: the MLX EP's PP-OCRv4 rec run after it took 39-46 ms, after 200 ms 36.3 ms, as with the
# CPU provider's spinning switched off (36.1 ms), while the CPU provider's own times did not
# move (28.8-33.6 ms after 50 ms, 29.2-29.3 after 200 and 500).
SETTLE_S = 0.25
SETTLE_AFTER_MS = 0.25


def settle():
    end = time.perf_counter() + SETTLE_S
    while time.perf_counter() < end:
        pass


def timed(session, feeds):
    t0 = time.perf_counter()
    out = session.run(None, feeds)
    elapsed = (time.perf_counter() - t0) * 1e3
    if elapsed >= SETTLE_AFTER_MS:
        settle()
    return elapsed, out


def eager_session(model, provider_options):
    """An MLX session with compilation switched off (the A/B kill switch is read at creation)."""
    os.environ["ONNXRUNTIME_EP_MLX_NO_COMPILE"] = "1"
    try:
        return compare.mlx_session(model, provider_options, report=False, sess_options=quiet())[0]
    finally:
        del os.environ["ONNXRUNTIME_EP_MLX_NO_COMPILE"]


def trial_runs() -> int:
    """Runs the EP's path trial takes (src/plan/run.c): the tracing run, then PLAN_TRIAL_RUNS
    eager and as many compiled runs. Read from src/plan/plan.h, the constant's one home."""
    text = (ROOT / "src" / "plan" / "plan.h").read_text()
    return 1 + 2 * int(re.search(r"PLAN_TRIAL_RUNS = (\d+)", text).group(1))


TRIAL_RUNS = trial_runs()


def bench_case(name, make, runs, warmup, provider_options, ab=False):
    model, feeds = make()
    cpu = ort.InferenceSession(model, quiet(), providers=["CPUExecutionProvider"])
    opts = dict(provider_options, verbose="1")
    mlx_s, rep = compare.mlx_session(model, opts, sess_options=quiet())
    eager = eager_session(model, provider_options) if ab else None
    on_mlx, total = compare.coverage(mlx_s)
    for i in range(max(warmup, TRIAL_RUNS)):
        if i < warmup:
            cpu.run(None, feeds)
            if eager:
                eager.run(None, feeds)
        mlx_s.run(None, feeds)  # also through the path trial, so timed runs see its choice
    cpu_t, mlx_t, eager_t = [], [], []
    cpu_out = mlx_out = None
    for _ in range(runs):  # interleaved: all see the same machine state
        t, cpu_out = timed(cpu, feeds)
        cpu_t.append(t)
        t, mlx_out = timed(mlx_s, feeds)
        mlx_t.append(t)
        if eager:
            eager_t.append(timed(eager, feeds)[0])
    cpu_ms, mlx_ms = statistics.median(cpu_t), statistics.median(mlx_t)
    holder = [mlx_s]
    del mlx_s
    groups = compare.close_and_summarise(holder)
    paths = {}
    for g in groups:
        paths[g["path"]] = paths.get(g["path"], 0) + 1
    return {"name": name, "cpu_ms": cpu_ms, "mlx_ms": mlx_ms, "ratio": cpu_ms / mlx_ms,
            "coverage": f"{on_mlx}/{total}", "groups": rep["groups"] if rep else 0,
            "diff": compare.max_abs_diff(mlx_out, cpu_out),
            "paths": ", ".join(f"{n} {p}" for p, n in sorted(paths.items())),
            # every group sees one input shape here: more traces than groups means a retrace
            "traces": sum(g["traces"] for g in groups),
            "fallbacks": sum(g["fallbacks"] for g in groups),
            "eager_ms": statistics.median(eager_t) if eager_t else None}


def table(rows, runs) -> str:
    lines = ["| Model | CPU EP median ms | MLX EP median ms | CPU/MLX | nodes on MLX | groups | "
             "group paths | traces | fallbacks | max abs diff |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | – | – | – | – | – | – | – | – | {r['error']} |")
            continue
        lines.append(f"| {r['name']} | {r['cpu_ms']:.3f} | {r['mlx_ms']:.3f} | "
                     f"{r['ratio']:.2f}x | {r['coverage']} | {r['groups']} | {r['paths']} | "
                     f"{r['traces']} | {r['fallbacks']} | {r['diff']:.2g} |")
    lines.append("")
    ab = [r for r in rows if r.get("eager_ms")]
    if ab:
        lines += ["", "A/B, same runs: the MLX EP with compilation off (ONNXRUNTIME_EP_MLX_NO_COMPILE=1)",
                  "", "| Model | MLX compiled ms | MLX eager ms | eager/compiled |", "|---|---:|---:|---:|"]
        lines += [f"| {r['name']} | {r['mlx_ms']:.3f} | {r['eager_ms']:.3f} | "
                  f"{r['eager_ms'] / r['mlx_ms']:.2f}x |" for r in ab]
        lines.append("")
    lines.append(f"Median of {runs} interleaved runs after warm-up (the MLX EP's warm-up covers its path trial: {TRIAL_RUNS} runs); CPU/MLX > 1 means the MLX EP "
                 f"is faster. traces: MLX compile traces over all runs (one input shape per model, "
                 f"so traces <= compiled groups means no retrace after the first run).")
    return "\n".join(lines)


def write_doc(text: str, begin: str = BEGIN, end: str = END) -> None:
    """Puts `text` into docs/BENCHMARKS.md between the markers, adding them where missing."""
    doc = ROOT / "docs" / "BENCHMARKS.md"
    body = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if begin not in body:
        body += f"\n{begin}\n{end}\n"
    head, rest = body.split(begin, 1)
    tail = rest.split(end, 1)[1]
    doc.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    # 20: this 2-core machine shares its host, and a 10-run median still moved a ratio by a
    # fifth between runs (MiniLM b1's CPU-provider time alone: 47 to 85 ms)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--filter", default="", help="only models whose name contains this")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--device", choices=["cpu", "gpu"])
    p.add_argument("--no-ab", action="store_true", help="skip the compile-off A/B column")
    args = p.parse_args(argv)
    opts = {"device": args.device} if args.device else {}
    rows = []
    for name, make in CASES.items():
        if args.filter and args.filter.lower() not in name.lower():
            continue
        try:
            rows.append(bench_case(name, make, args.runs, args.warmup, opts, ab=not args.no_ab))
        except Exception as e:  # a model that cannot run is reported, not fatal
            rows.append({"name": name, "error": str(e).splitlines()[0][:120]})
        print(table(rows[-1:], args.runs).splitlines()[2], flush=True)  # the model's row
    floor = mlx_floor_us()
    stamp = time.strftime("%Y-%m-%d")
    text = (f"Measured {stamp} by `make bench` on {machine()}; environment "
            f"{ {k: v for k, v in os.environ.items() if k.startswith('ONNXRUNTIME_EP_MLX')} }.\n\n"
            + table(rows, args.runs)
            + (f"\n\nMLX's own floor for one tiny evaluation (wrap two 1x1 inputs, add, eval, copy "
               f"out; build/mlx_floor, no ORT, no Python): median {floor:.1f} us." if floor else ""))
    print()
    print(text)
    if not args.no_write and not args.filter:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
