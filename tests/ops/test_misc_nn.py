"""Miscellaneous neural-network rows (src/ops/misc_nn.c) against ORT's CPU provider over
float32/float16/bfloat16 (half types against the float32 model on CPU with the same rounded
values, since ORT's CPU kernels for these ops are float32-only): RotaryEmbedding (4-D and 3-D,
interleaved, partial rotary_embedding_dim, with and without position_ids);
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reductions, weight, ignore_index,
extra spatial axes, the optional log_prob output); MaxRoiPool (spatial_scale, clamped and
out-of-image ROIs); and a declined RotaryEmbedding with its reason."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS


def check(build, feeds, dtype, scale=1.0):
    """Like oc.check, but float16 too is checked against the float32 model on CPU."""
    dtype = np.dtype(dtype)
    if dtype != F16:
        return oc.check(build, feeds, dtype, scale=scale)
    rtol, atol = oc.tol(dtype, scale)
    model = build(TensorProto.FLOAT16)
    cast = {k: (v.astype(F16) if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    got, placed = harness.run_on_mlx(model, cast)
    for node in model.graph.node:
        assert placed.get(node.name) == harness.EP, f"{node.name!r} ran on {placed.get(node.name)}"
    ref_feeds = {k: (v.astype(F32) if v.dtype.kind == "f" else v) for k, v in cast.items()}
    ref = harness.cpu_session(build(TensorProto.FLOAT)).run(None, ref_feeds)
    for g, r in zip(got, ref):
        assert g.dtype == F16 and g.shape == r.shape
        np.testing.assert_allclose(g.astype(F32), r, rtol=rtol, atol=atol)
    return got


# --- RotaryEmbedding ---------------------------------------------------------------------------
B, S, H, D = 2, 5, 3, 8


def rope_model(elem, three_d=False, pos=True, rot=0, interleaved=0, num_heads=None):
    xs = (B, S, H * D) if three_d else (B, H, S, D)
    half = (rot or D) // 2
    cs = (16, half) if pos else (B, S, half)
    names = ["x", "cos", "sin"] + (["pos"] if pos else [])
    attrs = {"interleaved": interleaved}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if num_heads is not None:
        attrs["num_heads"] = num_heads
    elif three_d:
        attrs["num_heads"] = H
    node = helper.make_node("RotaryEmbedding", names, ["y"], name="n", **attrs)
    inputs = [("x", elem, xs), ("cos", elem, cs), ("sin", elem, cs)]
    if pos:
        inputs.append(("pos", TensorProto.INT64, (B, S)))
    return harness.make_model([node], inputs, [("y", elem, xs)], opset=23)


def rope_feeds(three_d=False, pos=True, rot=0):
    xs = (B, S, H * D) if three_d else (B, H, S, D)
    half = (rot or D) // 2
    cs = (16, half) if pos else (B, S, half)
    ang = harness.rand(cs, low=0, high=6, seed=2)
    f = {"x": harness.rand(xs, seed=1), "cos": np.cos(ang).astype(F32),
         "sin": np.sin(ang).astype(F32)}
    if pos:
        f["pos"] = np.random.default_rng(3).integers(0, 16, (B, S)).astype(np.int64)
    return f


@pytest.mark.parametrize("three_d", [False, True], ids=["4d", "3d"])
@pytest.mark.parametrize("pos", [True, False], ids=["pos", "nopos"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rotary_embedding(dtype, rot, interleaved, pos, three_d):
    check(lambda e: rope_model(e, three_d, pos, rot, interleaved),
          rope_feeds(three_d, pos, rot), dtype, scale=2)


def test_rotary_3d_without_num_heads_declined(tmp_path):
    model = rope_model(TensorProto.FLOAT, three_d=True, num_heads=0)
    oc.check_declined(model, None, "n", "needs a positive num_heads", tmp_path)


# --- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ---------------------------------------
N, C = 4, 5


def loss_model(elem, op, extra=(), reduction="mean", weight=False, ignore=None, log_prob=False,
               opset=13):
    xs, ts = (N, C) + tuple(extra), (N,) + tuple(extra)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    ins = ["x", "t"] + (["w"] if weight else [])
    outs = ["loss"] + (["lp"] if log_prob else [])
    node = helper.make_node(op, ins, outs, name="n", **attrs)
    inputs = [("x", elem, xs), ("t", TensorProto.INT64, ts)]
    if weight:
        inputs.append(("w", elem, (C,)))
    out_shape = ts if reduction == "none" else ()
    outputs = [("loss", elem, out_shape)] + ([("lp", elem, xs)] if log_prob else [])
    return harness.make_model([node], inputs, outputs, opset=opset)


def loss_feeds(extra=(), ignore=None, log_input=False):
    xs, ts = (N, C) + tuple(extra), (N,) + tuple(extra)
    x = harness.rand(xs, low=-3, high=0 if log_input else 3, seed=4)
    t = np.random.default_rng(5).integers(0, C, ts).astype(np.int64)
    if ignore is not None:
        t.flat[::3] = ignore
    return {"x": x, "t": t, "w": harness.rand((C,), low=0.2, high=2, seed=6)}


LOSS_CASES = [
    dict(reduction="none"), dict(reduction="sum"), dict(reduction="mean"),
    dict(reduction="mean", weight=True), dict(reduction="sum", weight=True),
    dict(reduction="mean", ignore=1), dict(reduction="mean", weight=True, ignore=2),
    dict(reduction="none", weight=True, ignore=2), dict(reduction="mean", extra=(2, 3)),
    dict(reduction="sum", weight=True, ignore=0, extra=(3,)),
]


def _feeds(case, **kw):
    f = loss_feeds(case.get("extra", ()), case.get("ignore"), **kw)
    if not case.get("weight"):
        del f["w"]
    return f


@pytest.mark.parametrize("case", LOSS_CASES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nll_loss(dtype, case):
    check(lambda e: loss_model(e, "NegativeLogLikelihoodLoss", opset=22, **case),
          _feeds(case, log_input=True), dtype, scale=2)


@pytest.mark.parametrize("log_prob", [False, True])
@pytest.mark.parametrize("case", LOSS_CASES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_cross_entropy(dtype, case, log_prob):
    check(lambda e: loss_model(e, "SoftmaxCrossEntropyLoss", log_prob=log_prob, **case),
          _feeds(case), dtype, scale=4)


# --- MaxRoiPool --------------------------------------------------------------------------------
def roi_model(elem, pooled=(2, 3), scale=None, n_rois=4):
    attrs = {"pooled_shape": list(pooled)}
    if scale is not None:
        attrs["spatial_scale"] = scale
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, (2, 3, 8, 10)), ("rois", elem, (n_rois, 5))],
                              [("y", elem, (n_rois, 3) + tuple(pooled))],
                              opset=22 if elem == TensorProto.BFLOAT16 else 21)  # ORT CPU: <= 21


ROIS = np.array([[0, 0, 0, 9, 7], [1, 2, 1, 6, 5], [0, 3.4, 2.6, 3.4, 2.6],
                 [1, -3, -2, 14, 12]], np.float32)


@pytest.mark.parametrize("pooled,scale", [((2, 3), None), ((3, 3), 0.5), ((4, 2), 1.5),
                                          ((1, 1), None)])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_max_roi_pool(dtype, pooled, scale):
    feeds = {"x": harness.rand((2, 3, 8, 10), seed=7), "rois": ROIS}
    check(lambda e: roi_model(e, pooled, scale), feeds, dtype)
