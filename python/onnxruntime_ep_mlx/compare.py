"""Side-by-side runs: one model on the MLX EP and on ORT's CPU provider with identical inputs.

Owns what the CLI and the benchmarks share: synthesising inputs for a model's declared inputs,
creating both sessions, timing runs (warm-up, then the median of several), node coverage taken
from ORT's own graph-assignment record, and the partition report written by the EP at session
creation.
"""
from __future__ import annotations

import gc
import json
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

from . import EP_NAME, session_options

_ONNX_TO_NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
               "tensor(double)": np.float64, "tensor(int64)": np.int64,
               "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
               "tensor(bool)": np.bool_}


def synth_inputs(session: ort.InferenceSession, dims: dict | None = None, seed: int = 0):
    """Random feeds for every input; symbolic dims take `dims[name]` or 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d >= 0 else (dims or {}).get(d, 1) for d in i.shape]
        dtype = _ONNX_TO_NP.get(i.type)
        if dtype is None:
            raise ValueError(f"input {i.name!r} has type {i.type}, which `run` cannot synthesise")
        if dtype == np.bool_:
            feeds[i.name] = rng.random(shape) > 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def mlx_session(model, provider_options=None, report=True, sess_options=None):
    """An MLX-EP session plus the EP's partition report (a dict) when report=True."""
    opts = dict(provider_options or {})
    path = None
    if report:
        fd, path = tempfile.mkstemp(suffix=".json", prefix="mlx-report-")
        os.close(fd)
        opts["report_file"] = path
    so = session_options(opts, sess_options)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    try:
        s = ort.InferenceSession(model if isinstance(model, (str, bytes)) else
                                 model.SerializeToString(), so)
        rep = None
        if path and os.path.getsize(path):
            with open(path) as f:
                rep = json.load(f)
        return s, rep
    finally:
        if path:
            os.unlink(path)


def partition_report(model, provider_options=None, sess_options=None):
    """The EP's partition report (a dict) without needing a working session: the EP writes it
    at GetCapability, before ORT makes any kernel, so it is read even when session creation fails
    later (a CPU-side kernel that cannot be made, say). The failure, if any, is added to the
    report as "session_error". None when the EP wrote no report."""
    opts = dict(provider_options or {})
    fd, path = tempfile.mkstemp(suffix=".json", prefix="mlx-report-")
    os.close(fd)
    opts["report_file"] = path
    error = None
    try:
        try:
            ort.InferenceSession(model if isinstance(model, (str, bytes)) else
                                 model.SerializeToString(), session_options(opts, sess_options))
        except Exception as e:  # reported beside the partition, not raised
            error = str(e)
        if not os.path.getsize(path):
            return None if error is None else {"session_error": error}
        with open(path) as f:
            rep = json.load(f)
        if error is not None:
            rep["session_error"] = error
        return rep
    finally:
        os.unlink(path)


def coverage(session) -> tuple[int, int]:
    """(nodes on the MLX EP, all nodes) as ORT placed them."""
    on_mlx = total = 0
    for sub in session.get_provider_graph_assignment_info():
        count = len(sub.get_nodes())
        total += count
        if sub.ep_name == EP_NAME:
            on_mlx += count
    return on_mlx, total


def time_runs(session, feeds, warmup=2, runs=10):
    """Median and all wall times (ms) of session.run after warm-up, and the last outputs."""
    out = None
    for _ in range(warmup):
        out = session.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = session.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times, out


def max_abs_diff(a_list, b_list) -> float:
    worst = 0.0
    for a, b in zip(a_list, b_list):
        a = np.asarray(a)
        b = np.asarray(b)
        if a.size:
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
    return worst


_GROUP_LINE = re.compile(
    r"(?P<name>\S+): (?P<nodes>\d+) nodes, path (?P<path>\S+) \((?P<why>.*?)\), runs (?P<runs>\d+) "
    r"\(failed (?P<failed>\d+), compiled (?P<compiled>\d+), eager (?P<eager>\d+)\), cache hits "
    r"(?P<hits>\d+) misses (?P<misses>\d+), traces (?P<traces>\d+), fallbacks (?P<fallbacks>\d+)")


def close_and_summarise(holder: list) -> list[dict]:
    """Releases the session in `holder` (a one-element list: the caller must hold no other
    reference) created with verbose=1, and returns the EP's per-group summary (path, runs,
    compiled/eager runs, cache hits/misses, traces, fallbacks) parsed from what it prints."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            holder.clear()
            gc.collect()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    groups = []
    for m in _GROUP_LINE.finditer(text):
        g = m.groupdict()
        groups.append({k: (int(v) if v.isdigit() else v) for k, v in g.items()})
    return groups


def load_model_bytes(path) -> bytes:
    import onnx  # here only: the report CLI and sessions need no onnx package
    return onnx.load(str(path)).SerializeToString()
