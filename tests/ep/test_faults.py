"""Fault injection (ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL=N, tools/fault_walk.py): the Nth call into
the MLX bridge fails, walked over N through session creation and two Runs. Every failure must come
back as an ORT error naming the EP and the node, group or constant it hit (or be absorbed by a
fallback with the right answer), and a session whose Run failed must give the CPU provider's answer
on its next Run. The walk here strides over the calls to fit CI; `python tools/fault_walk.py MODEL`
walks every call of a benchmark model."""
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxruntime_ep_mlx as mlx
from mlx_harness import make_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import fault_walk  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))


def small_model():
    """Conv, an elementwise chain, a reduction and a Loop: constants, host kernels, compiled
    groups and control flow in a few nodes."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "half"], ["v_out"], name="body_mul"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="body_id")], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("c_in", TP.BOOL, []),
         helper.make_tensor_value_info("v_in", TP.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("c_out", TP.BOOL, []),
         helper.make_tensor_value_info("v_out", TP.FLOAT, [1, 4, 6, 6])])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Loop", ["m", "", "r"], ["l"], name="loop", body=body),
             helper.make_node("Sigmoid", ["l"], ["s"], name="sigmoid"),
             helper.make_node("ReduceMean", ["s", "axes"], ["y"], name="mean", keepdims=1)]
    rng = np.random.default_rng(0)
    inits = [("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             ("b", rng.standard_normal(4).astype(np.float32)),
             ("half", np.array(0.5, np.float32)), ("m", np.array(3, np.int64)),
             ("axes", np.array([2, 3], np.int64))]
    return make_model(nodes, [("x", TP.FLOAT, [1, 3, 6, 6])], [("y", TP.FLOAT, None)],
                      initializers=inits, opset=18)


def make_session(b):
    return ort.InferenceSession(b, mlx.session_options())


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}],
                         ids=["compiled", "eager"])
def test_every_bridge_call_of_a_small_model_fails_cleanly(env, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    model = small_model().SerializeToString()
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)}
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    summary = fault_walk.walk(model, feeds, make_session, ref, stride=1, quiet=30)
    assert not summary["problems"], summary["problems"][:5]
    # the walk reached both session creation and Runs, and every failed Run recovered
    assert summary["creation_errors"] > 0 and summary["run_errors"] > 0, summary
    assert summary["recovered"] == summary["run_errors"], summary


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}],
                         ids=["compiled", "eager"])
def test_bridge_failures_across_a_real_model_fail_cleanly(env, monkeypatch):
    """PP-OCR's classifier (a real model: BN-folded convolutions, squeeze-excitation, hardswish),
    every 13th bridge call."""
    import models
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path, feeds = models.ocr_case("cls")
    with open(path, "rb") as f:
        model = f.read()
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    summary = fault_walk.walk(model, feeds, make_session, ref, stride=13, quiet=12)
    assert not summary["problems"], summary["problems"][:5]
    assert summary["creation_errors"] > 0, summary


def test_failure_paths_and_teardown_leave_no_bridge_object_alive(tmp_path):
    """In a fresh process: a fault walk over the small model (every 3rd call failing), then one
    more session; when that session ends, its run record counts the bridge's array handles and
    arenas still alive in the process: none, so no failure path kept what it had made."""
    import subprocess
    import textwrap
    model = tmp_path / "small.onnx"
    model.write_bytes(small_model().SerializeToString())
    stats = tmp_path / "stats.json"
    code = textwrap.dedent(f"""
        import gc, sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")!r})
        import fault_walk, onnxruntime_ep_mlx as mlx
        model = open({str(model)!r}, "rb").read()
        feeds = {{"x": np.ones((1, 3, 6, 6), np.float32)}}
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
        make = lambda b: ort.InferenceSession(b, mlx.session_options())
        summary = fault_walk.walk(model, feeds, make, ref, stride=3, quiet=10)
        assert not summary["problems"], summary["problems"][:3]
        gc.collect()
        s = ort.InferenceSession(model, mlx.session_options({{"stats_file": {str(stats)!r}}}))
        s.run(None, feeds)
        del s
        gc.collect()
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    record = json.loads(stats.read_text())
    assert record["groups"] and record["groups"][0]["runs"] == 1
    assert record["live_arrays_after"] == 0 and record["live_arenas_after"] == 0, record
