"""Helpers shared by the state-space / KV-cache operator tests (test_ops_ssm_*.py): the EP's
decline reasons from its JSON partition report, runs that must stay entirely on MLX, and
bfloat16 feeds and results (numpy has no bfloat16; ml_dtypes supplies it, ORT's Python API takes
it only as raw OrtValues)."""
from __future__ import annotations

import ctypes
import json
import os
import tempfile

import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import TensorProto

import onnxruntime_ep_mlx as mlx
from mlx_harness import EP, Recorded, assignment, mlx_session

BF16 = np.dtype(ml_dtypes.bfloat16)
MS = {"com.microsoft": 1}


def report(model):
    """The EP's partition report for `model`. The session may fail to build afterwards (ORT's CPU
    provider lacks kernels for some declined forms): the report is written before that."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="mlx-ssm-report-")
    os.close(fd)
    try:
        so = mlx.session_options({"report_file": path})
        error = None
        try:
            ort.InferenceSession(model.SerializeToString(), so)
        except Exception as e:
            error = e
        if not os.path.getsize(path):  # ORT refused the model before asking the EP
            raise AssertionError(f"no partition report: {error}")
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def ort_refuses(model):
    """ORT's own load-time error for a model its schema checks reject (so the EP is never asked),
    or None when the model loads."""
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:
        return str(e)
    return None


def declines(model):
    """{node name: reason} for every node the EP declined."""
    return {d["name"]: d["reason"] for d in report(model)["declined"]}


def assert_claimed(model):
    rep = report(model)
    assert not rep["declined"], rep["declined"]
    assert rep["claimed"] == rep["nodes"]


def _ortvalue(a):
    a = np.ascontiguousarray(a)
    if a.dtype == BF16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16),
                                                              TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def _numpy(v):
    if v.data_type() == "tensor(bfloat16)":
        shape = v.shape()
        n = int(np.prod(shape))
        if n == 0:
            return np.zeros(shape, BF16)
        raw = (ctypes.c_uint16 * n).from_address(v.data_ptr())
        return np.frombuffer(raw, dtype=np.uint16).copy().view(BF16).reshape(shape)
    return v.numpy()


def run(session, feeds):
    """session.run that also takes and returns bfloat16 arrays."""
    if not any(np.asarray(a).dtype == BF16 for a in feeds.values()):
        return session.run(None, feeds)
    names = [o.name for o in session.get_outputs()]
    outs = session.run_with_ort_values(names, {k: _ortvalue(a) for k, a in feeds.items()})
    return [_numpy(o) for o in outs]


def run_mlx(model, feeds, provider_options=None):
    """Runs on the MLX EP with CPU fallback disabled and proves every node ran there."""
    s = mlx_session(model, allow_cpu=False, provider_options=provider_options)
    placed = assignment(s)
    for n in model.graph.node:
        assert placed.get(n.name) == EP, f"node {n.name!r} ran on {placed.get(n.name)}"
    return run(s, feeds)


def mlx_session_checked(model):
    """An all-MLX session (fallback disabled, placement proven) for repeated runs."""
    s = mlx_session(model, allow_cpu=False)
    placed = assignment(s)
    for n in model.graph.node:
        assert placed.get(n.name) == EP, f"node {n.name!r} ran on {placed.get(n.name)}"
    return s


def f32(a):
    return np.asarray(a).astype(np.float32)


def group_records(model, feed_list):
    """Runs every feed dict through one all-MLX session and returns (outputs per run, the fused
    groups of the EP's run record): each says which compile path the group took, its traces,
    cache hits and misses, and its fallbacks to eager."""
    rec = Recorded(model)
    placed = assignment(rec.session)
    for n in model.graph.node:
        assert placed.get(n.name) == EP, f"node {n.name!r} ran on {placed.get(n.name)}"
    outs = [run(rec.session, f) for f in feed_list]
    return outs, rec.close()["groups"]
