"""Vision rows (src/ops/vision.c): GridSample (opset 16 and 20 modes, every padding mode,
align_corners, 2-D and 3-D, out-of-range grids; 1-D and 3-D cubic against onnx's reference),
AffineGrid (2-D, 3-D, align_corners), RoiAlign (avg/max, both coordinate modes, fixed and adaptive
sampling, ROIs leaving the image), MaxUnpool (with and without output_shape), Col2Im (strides,
pads, dilations, 3-D) and NonMaxSuppression (both box encodings, thresholds, classes, batches);
plus the declines."""
import json

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import mlx_harness as harness
import ops_common as oc
import ops_failures as of

F = TP.FLOAT


def model(op, inputs, attrs=None, opset=20, inits=(), out=F):
    node = helper.make_node(op, [i[0] for i in inputs] + [i[0] for i in inits], ["y"],
                            name="n", **(attrs or {}))
    return harness.make_model([node], inputs, [("y", out, None)], initializers=inits,
                              opset=opset)


# --- GridSample -------------------------------------------------------------------------------
def grid_feeds(x_shape, out_spatial, seed=0, spread=1.3):
    rng = np.random.default_rng(seed)
    nd = len(x_shape) - 2
    x = rng.uniform(-2, 2, x_shape).astype(np.float32)
    grid = rng.uniform(-spread, spread, (x_shape[0], *out_spatial, nd)).astype(np.float32)
    return {"X": x, "G": grid}


def gs_model(x_shape, grid_shape, attrs, opset, elem=F):
    return model("GridSample", [("X", elem, list(x_shape)), ("G", elem, list(grid_shape))],
                 attrs, opset=opset, out=elem)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_16(mode, padding, align):
    feeds = grid_feeds((2, 3, 5, 7), (4, 6), seed=1)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    m = gs_model((2, 3, 5, 7), (2, 4, 6, 2), attrs, 16)
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_20_2d(mode, padding):
    feeds = grid_feeds((1, 2, 4, 6), (3, 5), seed=2, spread=3.0)  # far outside: many folds
    m = gs_model((1, 2, 4, 6), (1, 3, 5, 2), {"mode": mode, "padding_mode": padding}, 20)
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_volumetric(mode, padding, align):
    feeds = grid_feeds((1, 2, 3, 4, 5), (2, 3, 2), seed=3)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    m = gs_model((1, 2, 3, 4, 5), (1, 2, 3, 2, 3), attrs, 22)
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("x_shape,out_spatial,mode", [
    ((2, 3, 9), (5,), "linear"), ((1, 2, 6), (4,), "cubic"), ((1, 1, 3, 4, 4), (2, 2, 3), "cubic")])
def test_grid_sample_against_reference(x_shape, out_spatial, mode):
    """Forms ONNX Runtime's CPU kernel lacks (1-D, 3-D cubic): onnx's reference evaluator."""
    feeds = grid_feeds(x_shape, out_spatial, seed=4)
    grid_shape = (x_shape[0], *out_spatial, len(x_shape) - 2)
    m = gs_model(x_shape, grid_shape, {"mode": mode, "padding_mode": "reflection"}, 20)
    want = ReferenceEvaluator(m).run(None, feeds)
    oc.check_ref(m, feeds, want, rtol=1e-4, atol=1e-5)


def test_grid_sample_half_types():
    """ORT's CPU kernel is float/double only: compare with its float32 result."""
    feeds = grid_feeds((1, 2, 4, 5), (3, 3), seed=5)
    oc.check(lambda e: gs_model((1, 2, 4, 5), (1, 3, 3, 2), {}, 22, elem=e), feeds, oc.BF16,
             scale=4)
    ref = harness.cpu_session(gs_model((1, 2, 4, 5), (1, 3, 3, 2), {}, 22)).run(None, feeds)
    m16 = gs_model((1, 2, 4, 5), (1, 3, 3, 2), {}, 22, elem=TP.FLOAT16)
    oc.check_ref(m16, {k: v.astype(np.float16) for k, v in feeds.items()},
                 [ref[0].astype(np.float16)], rtol=5e-3, atol=5e-3)


def test_grid_sample_declines(tmp_path):
    m = gs_model((1, 1, 4, 4), (1, 2, 2, 2), {"mode": "linear"}, 16)
    reasons = oc.declines_without_cpu_kernel(m, tmp_path, match="linear")
    assert "mode 'linear' is not one of bilinear" in reasons["n"]


# --- AffineGrid -------------------------------------------------------------------------------
@pytest.mark.parametrize("size,align", [
    ([2, 3, 5, 6], 0), ([2, 3, 5, 6], 1), ([2, 3, 1, 4], 0), ([1, 2, 3, 4, 5], 0),
    ([1, 2, 3, 4, 5], 1)])
def test_affine_grid(size, align):
    """A length-1 axis with align_corners is left out: ORT puts it at +1, onnx's reference at -1
    and PyTorch (and this EP) at 0."""
    nd = len(size) - 2
    theta = harness.rand((size[0], nd, nd + 1), seed=6)
    m = model("AffineGrid", [("theta", F, list(theta.shape)), ("size", TP.INT64, [len(size)])],
              {"align_corners": align})
    harness.check_against_cpu(m, {"theta": theta, "size": np.array(size, np.int64)},
                              rtol=1e-5, atol=1e-5)


# --- RoiAlign ---------------------------------------------------------------------------------
ROIS = np.array([[0, 0, 9, 9], [0, 5, 4, 9], [5, 5, 9, 9], [2.5, 1.2, 7.7, 3.3],
                 [-3, -2, 4, 12], [3, 3, 3.2, 3.1]], np.float32)


@pytest.mark.parametrize("opset,ctm", [(10, None), (16, "half_pixel"),
                                       (16, "output_half_pixel")])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align(opset, ctm, mode, ratio):
    x = harness.rand((2, 3, 10, 12), seed=7)
    attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": ratio,
             "spatial_scale": 0.9}
    if ctm is not None:
        attrs["coordinate_transformation_mode"] = ctm
    m = model("RoiAlign", [("X", F, [2, 3, 10, 12]), ("rois", F, [6, 4]),
                           ("idx", TP.INT64, [6])], attrs, opset=opset)
    feeds = {"X": x, "rois": ROIS, "idx": np.array([0, 1, 1, 0, 1, 0], np.int64)}
    harness.check_against_cpu(m, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_22_against_reference(mode):
    """ORT's CPU provider has no RoiAlign-22 kernel: onnx's reference evaluator."""
    x = harness.rand((2, 3, 10, 12), seed=7)
    m = model("RoiAlign", [("X", F, [2, 3, 10, 12]), ("rois", F, [6, 4]),
                           ("idx", TP.INT64, [6])],
              {"mode": mode, "output_height": 2, "output_width": 3, "sampling_ratio": 0},
              opset=22)
    feeds = {"X": x, "rois": ROIS, "idx": np.array([0, 1, 1, 0, 1, 0], np.int64)}
    oc.check_ref(m, feeds, ReferenceEvaluator(m).run(None, feeds), rtol=1e-5, atol=1e-5)


def test_roi_align_bad_batch_index_fails_the_run():
    m = model("RoiAlign", [("X", F, [1, 1, 4, 4]), ("rois", F, [1, 4]),
                           ("idx", TP.INT64, [1])], {}, opset=16)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="batch_indices"):
        s.run(None, {"X": harness.rand((1, 1, 4, 4)), "rois": ROIS[:1],
                     "idx": np.array([3], np.int64)})


# --- MaxUnpool --------------------------------------------------------------------------------
def pool_indices(x, kernel, strides, pads=None):
    """MaxPool's values and flat indices (via ORT's CPU provider)."""
    attrs = {"pads": pads} if pads else {}
    node = helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=kernel, strides=strides,
                            **attrs)
    m = harness.make_model([node], [("x", F, list(x.shape))],
                           [("v", F, None), ("i", TP.INT64, None)], opset=12)
    return harness.cpu_session(m).run(None, {"x": x})


@pytest.mark.parametrize("shape,kernel,strides,pads", [
    ((2, 3, 6, 8), [2, 2], [2, 2], None),
    ((1, 2, 7, 7), [3, 3], [2, 2], None),
    ((1, 2, 7), [3], [2], [1, 1]),
    ((1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], None),
])
def test_max_unpool(shape, kernel, strides, pads):
    x = harness.rand(shape, seed=8)
    v, i = pool_indices(x, kernel, strides, pads)
    attrs = {"kernel_shape": kernel, "strides": strides}
    if pads:
        attrs["pads"] = pads
    m = model("MaxUnpool", [("v", F, list(v.shape)), ("i", TP.INT64, list(i.shape))], attrs,
              opset=11)
    harness.check_against_cpu(m, {"v": v, "i": i})


def test_max_unpool_output_shape_follows_reference():
    """With output_shape the result is the inferred unpooling placed at the origin, as onnx's
    reference and conformance data have it (ORT's CPU kernel reads the indices differently)."""
    x = harness.rand((1, 2, 6, 6), seed=8)
    v, i = pool_indices(x, [2, 2], [2, 2])
    m = model("MaxUnpool", [("v", F, list(v.shape)), ("i", TP.INT64, list(i.shape)),
                            ("s", TP.INT64, [4])], {"kernel_shape": [2, 2], "strides": [2, 2]},
              opset=11)
    feeds = {"v": v, "i": i, "s": np.array([1, 2, 7, 8], np.int64)}
    oc.check_ref(m, feeds, ReferenceEvaluator(m).run(None, feeds))


def test_max_unpool_index_out_of_range_fails_the_run():
    m = model("MaxUnpool", [("v", F, [1, 1, 2, 2]), ("i", TP.INT64, [1, 1, 2, 2])],
              {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="outside the output"):
        s.run(None, {"v": harness.rand((1, 1, 2, 2)),
                     "i": np.array([0, 1, 2, 99], np.int64).reshape(1, 1, 2, 2)})


# --- Col2Im -----------------------------------------------------------------------------------
@pytest.mark.parametrize("image,block,attrs", [
    ([5, 5], [1, 5], {}),
    ([5, 5], [3, 3], {"strides": [2, 2]}),
    ([5, 5], [1, 5], {"pads": [0, 1, 0, 1]}),
    ([6, 6], [2, 2], {"dilations": [1, 5]}),
    ([7, 6], [3, 2], {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
    ([3, 4, 5], [1, 1, 5], {}),
])
@pytest.mark.parametrize("channels", [1, 3])
def test_col2im(image, block, attrs, channels):
    nd = len(image)
    pads = attrs.get("pads", [0] * 2 * nd)
    strides = attrs.get("strides", [1] * nd)
    dil = attrs.get("dilations", [1] * nd)
    blocks = 1
    for d in range(nd):
        span = image[d] + pads[d] + pads[nd + d] - dil[d] * (block[d] - 1) - 1
        blocks *= span // strides[d] + 1
    x = harness.rand((2, channels * int(np.prod(block)), blocks), seed=9)
    m = model("Col2Im", [("x", F, list(x.shape))], attrs, opset=18,
              inits=[("img", np.array(image, np.int64)), ("blk", np.array(block, np.int64))])
    harness.check_against_cpu(m, {"x": x})


def test_col2im_zero_size_input():
    """An empty batch gives an empty image (MLX's scatter would divide by the zero update size);
    zero channels is an error naming the node, as on ORT's CPU provider, and the session runs on."""
    img, blk = ("img", np.array([3, 3], np.int64)), ("blk", np.array([2, 2], np.int64))
    m = model("Col2Im", [("x", F, [None, 4, 4])], {}, opset=18, inits=[img, blk])
    y = of.mlx_outputs(m, {"x": np.zeros((0, 4, 4), np.float32)})[0]
    assert y.shape == (0, 1, 3, 3)
    m = model("Col2Im", [("x", F, [1, None, 4])], {}, opset=18, inits=[img, blk])
    of.rejects_then_runs(m, {"x": np.zeros((1, 0, 4), np.float32)},
                         {"x": harness.rand((1, 4, 4), seed=3)})


def test_max_unpool_zero_channels():
    m = model("MaxUnpool", [("v", F, [1, 0, 2, 2]), ("i", TP.INT64, [1, 0, 2, 2])],
              {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    y = of.mlx_outputs(m, {"v": np.zeros((1, 0, 2, 2), np.float32),
                               "i": np.zeros((1, 0, 2, 2), np.int64)})[0]
    assert y.shape == (1, 0, 4, 4)


# --- NonMaxSuppression ------------------------------------------------------------------------
def nms_model(n_in=5, cpb=0):
    names = ["boxes", "scores", "max", "iou", "score"][:n_in]
    types = [(F, [None, None, 4]), (F, [None, None, None]), (TP.INT64, [1]), (F, [1]), (F, [1])]
    inputs = [(nm, t, sh) for nm, (t, sh) in zip(names, types)]
    node = helper.make_node("NonMaxSuppression", names, ["y"], name="n", center_point_box=cpb)
    return harness.make_model([node], inputs, [("y", TP.INT64, None)], opset=11)


@pytest.mark.parametrize("cpb", [0, 1])
@pytest.mark.parametrize("max_out,iou,score", [(3, 0.5, 0.0), (10, 0.3, 0.4), (2, 0.0, 0.1),
                                               (0, 0.5, 0.0), (100, 1.0, 0.6)])
def test_nms(cpb, max_out, iou, score):
    rng = np.random.default_rng(10)
    xy = rng.uniform(0, 10, (2, 30, 2))
    wh = rng.uniform(0.5, 4, (2, 30, 2))
    boxes = (np.concatenate([xy, wh], -1) if cpb else
             np.concatenate([xy, xy + wh * rng.choice([-1, 1], (2, 30, 2))], -1))
    scores = rng.uniform(0, 1, (2, 3, 30)).astype(np.float32)
    scores[0, 0, 5:8] = scores[0, 0, 4]  # ties
    feeds = {"boxes": boxes.astype(np.float32), "scores": scores,
             "max": np.array([max_out], np.int64), "iou": np.array([iou], np.float32),
             "score": np.array([score], np.float32)}
    harness.check_against_cpu(nms_model(5, cpb), feeds)


@pytest.mark.parametrize("n_in", [2, 3, 4])
def test_nms_optional_inputs(n_in):
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 5, (1, 12, 2))
    boxes = np.concatenate([xy, xy + 1.5], -1).astype(np.float32)
    feeds = {"boxes": boxes, "scores": rng.uniform(0, 1, (1, 2, 12)).astype(np.float32),
             "max": np.array([4], np.int64), "iou": np.array([0.2], np.float32)}
    names = ["boxes", "scores", "max", "iou"][:n_in]
    harness.check_against_cpu(nms_model(n_in), {k: feeds[k] for k in names})


def test_nms_declines_bad_center_point_box(tmp_path):
    m = nms_model(2, cpb=2)
    report = tmp_path / "partition.json"
    try:
        s = harness.mlx_session(m, allow_cpu=True,
                                provider_options={"report_file": str(report)})
        assert harness.assignment(s).get("n") != harness.EP
    except Exception:  # noqa: BLE001 - ORT's own kernel may reject the attribute too
        pass
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert "center_point_box must be 0 or 1" in declined["n"]
