"""DeformConv (src/ops/deform_conv.c) against ORT's CPU provider: groups, offset groups, mask,
bias, padding, strides, dilations, offsets that leave the image, kernel_shape given or inferred,
float16, bfloat16 (against a float32 reference), float64 (CPU device), a constant weight, opsets
19 and 22; plus the declines (non-2-D, inconsistent channels) and a run-time shape error that
names the node."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import ops_common as oc


def out_size(n, k, pad_lo, pad_hi, stride, dil):
    return (n + pad_lo + pad_hi - ((k - 1) * dil + 1)) // stride + 1


def case(n=1, c=2, h=5, w=6, oc_=3, kh=3, kw=3, group=1, og=1, pads=(0, 0, 0, 0),
         strides=(1, 1), dils=(1, 1), mask=False, bias=False, seed=0, spread=2.0):
    """(feeds, attrs, input names) for one configuration; offsets up to `spread` pixels."""
    rng = np.random.default_rng(seed)
    oh = out_size(h, kh, pads[0], pads[2], strides[0], dils[0])
    ow = out_size(w, kw, pads[1], pads[3], strides[1], dils[1])
    feeds = {
        "X": rng.uniform(-2, 2, (n, c, h, w)).astype(np.float32),
        "W": rng.uniform(-1, 1, (oc_, c // group, kh, kw)).astype(np.float32),
        "O": rng.uniform(-spread, spread, (n, og * 2 * kh * kw, oh, ow)).astype(np.float32),
    }
    names = ["X", "W", "O"]
    if bias or mask:
        names.append("B" if bias else "")
        if bias:
            feeds["B"] = rng.uniform(-1, 1, (oc_,)).astype(np.float32)
    if mask:
        names.append("M")
        feeds["M"] = rng.uniform(0, 1, (n, og * kh * kw, oh, ow)).astype(np.float32)
    attrs = {"group": group, "offset_group": og, "pads": list(pads), "strides": list(strides),
             "dilations": list(dils)}
    return feeds, attrs, names


def dc_model(feeds, attrs, names, elem=TP.FLOAT, opset=22, kernel_shape=None, inits=()):
    a = dict(attrs)
    if kernel_shape:
        a["kernel_shape"] = list(kernel_shape)
    node = helper.make_node("DeformConv", names, ["Y"], name="dc", **a)
    inputs = [(k, elem, list(v.shape)) for k, v in feeds.items() if k not in dict(inits)]
    return harness.make_model([node], inputs, [("Y", elem, None)], initializers=inits,
                              opset=opset)


CASES = {
    "basic": {},
    "bias": {"bias": True},
    "mask": {"mask": True},
    "mask_bias": {"mask": True, "bias": True},
    "pads": {"pads": (1, 2, 2, 1)},
    "strides": {"strides": (2, 3), "h": 7, "w": 9},
    "dilations": {"dils": (2, 1), "h": 7},
    "group2": {"c": 4, "oc_": 6, "group": 2, "bias": True},
    "offset_groups": {"c": 4, "og": 2, "mask": True},
    "groups_and_offset_groups": {"c": 6, "oc_": 4, "group": 2, "og": 3, "mask": True,
                                 "bias": True, "pads": (1, 1, 1, 1)},
    "batch": {"n": 3, "mask": True, "strides": (2, 2), "pads": (1, 1, 1, 1)},
    "far_offsets": {"spread": 6.0, "mask": True},
    "rect_kernel": {"kh": 2, "kw": 3, "pads": (0, 1, 1, 0)},
    "1x1": {"kh": 1, "kw": 1, "oc_": 2},
    "one_row_image": {"h": 1, "kh": 1, "pads": (0, 1, 0, 1), "mask": True},
}


@pytest.mark.parametrize("name", list(CASES))
def test_deform_conv_matches_cpu(name):
    feeds, attrs, names = case(**CASES[name])
    harness.check_against_cpu(dc_model(feeds, attrs, names), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [19, 22])
def test_deform_conv_opsets_and_kernel_shape(opset):
    feeds, attrs, names = case(kh=2, kw=3, mask=True, bias=True, seed=3)
    m = dc_model(feeds, attrs, names, opset=opset, kernel_shape=(2, 3))
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-5)


def test_deform_conv_integer_offsets_equal_shifted_conv():
    """Zero offsets: DeformConv is a plain convolution (checked against ORT's Conv)."""
    feeds, attrs, names = case(c=4, oc_=4, group=2, pads=(1, 1, 1, 1), seed=4)
    feeds["O"][:] = 0
    got, _ = harness.run_on_mlx(dc_model(feeds, attrs, names), feeds)
    conv = helper.make_node("Conv", ["X", "W"], ["Y"], group=2, pads=[1, 1, 1, 1])
    cm = harness.make_model([conv], [(k, TP.FLOAT, list(v.shape)) for k, v in feeds.items()
                                     if k != "O"], [("Y", TP.FLOAT, None)])
    ref = harness.cpu_session(cm).run(None, {"X": feeds["X"], "W": feeds["W"]})
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)


def test_deform_conv_constant_weight():
    feeds, attrs, names = case(c=4, og=2, mask=True, bias=True, seed=5)
    w = feeds.pop("W")
    b = feeds.pop("B")
    m = dc_model({**feeds, "W": w, "B": b}, attrs, names, inits=[("W", w), ("B", b)])
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [oc.F16, oc.BF16], ids=["float16", "bfloat16"])
def test_deform_conv_half_types(dtype):
    feeds, attrs, names = case(c=4, oc_=4, group=2, og=2, mask=True, bias=True, seed=6,
                               pads=(1, 0, 0, 1))
    oc.check(lambda e: dc_model(feeds, attrs, names, elem=e), feeds, dtype, scale=5)


@pytest.mark.cpu_device
def test_deform_conv_float64():
    feeds, attrs, names = case(c=4, og=2, mask=True, bias=True, seed=7, strides=(2, 1))
    feeds = {k: v.astype(np.float64) for k, v in feeds.items()}
    got, _, _ = harness.check_against_cpu(dc_model(feeds, attrs, names, elem=TP.DOUBLE), feeds,
                                          rtol=1e-12, atol=1e-12)
    assert got[0].dtype == np.float64


# ORT's CPU kernel accepts these models at session creation and fails only when run, so the
# declines are checked without running them (feeds None).
def test_deform_conv_1d_declined(tmp_path):
    node = helper.make_node("DeformConv", ["X", "W", "O"], ["Y"], name="dc")
    m = harness.make_model([node], [("X", TP.FLOAT, [1, 2, 5]), ("W", TP.FLOAT, [3, 2, 3]),
                                    ("O", TP.FLOAT, [1, 6, 3])], [("Y", TP.FLOAT, None)],
                           opset=22)
    reason = oc.check_declined(m, None, "dc", "only 2-D DeformConv", tmp_path)
    assert "X has rank 3" in reason


def test_deform_conv_inconsistent_offset_channels_declined(tmp_path):
    feeds, attrs, names = case(seed=8)
    m = dc_model(feeds, attrs, names)
    m.graph.input[2].type.tensor_type.shape.dim[1].dim_value = 12  # 2*3*3 = 18 expected
    oc.check_declined(m, None, "dc", "offset has 12 channels; offset_group*2*kH*kW = 18",
                      tmp_path)


def test_deform_conv_group_mismatch_declined(tmp_path):
    feeds, attrs, names = case(c=4, oc_=3, group=2, seed=9)
    oc.check_declined(dc_model(feeds, attrs, names), None, "dc",
                      "oC = 3 is not divisible by group 2", tmp_path)


def test_deform_conv_run_time_shape_error_names_node():
    """Shapes unknown at claim time: a wrong offset shape fails the run with the node's name."""
    feeds, attrs, names = case(seed=10)
    node = helper.make_node("DeformConv", names, ["Y"], name="dc_dyn", **attrs)
    m = harness.make_model([node], [("X", TP.FLOAT, None), ("W", TP.FLOAT, None),
                                    ("O", TP.FLOAT, None)], [("Y", TP.FLOAT, None)], opset=22)
    s = harness.mlx_session(m)
    assert s.run(None, feeds)[0].shape == (1, 3, 3, 4)
    bad = dict(feeds, O=feeds["O"][:, :, :2])
    with pytest.raises(Exception, match="dc_dyn"):
        s.run(None, bad)


def test_deform_conv_compiles_keyed():
    """DeformConv + Relu in one fused group compile keyed on the input shapes (two sizes)."""
    dc = helper.make_node("DeformConv", ["X", "W", "O", "B", "M"], ["D"], name="dc", pads=[1] * 4)
    relu = helper.make_node("Relu", ["D"], ["Y"], name="relu")
    m = harness.make_model([dc, relu], [("X", TP.FLOAT, ["n", 2, "h", "w"]),
                                        ("W", TP.FLOAT, [3, 2, 3, 3]), ("B", TP.FLOAT, [3]),
                                        ("O", TP.FLOAT, ["n", 18, "h", "w"]),
                                        ("M", TP.FLOAT, ["n", 9, "h", "w"])],
                           [("Y", TP.FLOAT, None)], opset=22)
    sets = []
    for seed, (n, h, w) in enumerate([(1, 4, 5), (2, 6, 3)]):
        feeds, _, _ = case(n=n, h=h, w=w, pads=(1, 1, 1, 1), mask=True, bias=True, seed=seed)
        sets.append(feeds)
    oc.check_compiled(m, sets, path="keyed", rtol=1e-4, atol=1e-5)
