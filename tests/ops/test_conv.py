"""Convolution rows (src/ops/conv.c): Conv and ConvTranspose over 1-3 spatial dims with groups,
strides, dilations, explicit (asymmetric) pads, auto_pad, kernel_shape, an optional bias and, for
ConvTranspose, output_padding and output_shape; float32/float16 against ORT's CPU provider and
bfloat16 (no ORT CPU kernel) against the float32 model on CPU; weights as inputs and as
initializers; every opset row; and the declined forms (where ORT's CPU kernel rejects the node or
departs from the spec), which stay on CPU with their reasons."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
import ops_failures as of
from ops_common import BF16, F16, F32, FLOATS

# (id, X shape, W shape, attributes)
CONV_CASES = [
    ("1d", (2, 4, 11), (6, 4, 3), {}),
    ("1d-stride-asym-pads", (2, 4, 11), (6, 4, 3), dict(strides=[2], pads=[1, 2])),
    ("1d-dil-group", (2, 4, 11), (6, 2, 3), dict(dilations=[2], group=2, pads=[2, 0])),
    ("1d-same-upper", (1, 3, 10), (4, 3, 4), dict(auto_pad="SAME_UPPER", strides=[3])),
    ("1d-big-pads", (1, 2, 5), (3, 2, 2), dict(pads=[3, 4], strides=[2])),
    ("2d", (2, 3, 9, 8), (5, 3, 3, 3), {}),
    ("2d-stride-dil-pads", (2, 3, 9, 8), (4, 3, 3, 2),
     dict(strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])),
    ("2d-depthwise", (1, 6, 7, 7), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),
    ("2d-group3", (2, 6, 8, 8), (9, 2, 2, 3), dict(group=3, strides=[2, 2])),
    ("2d-same-upper", (1, 3, 7, 6), (4, 3, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("2d-same-lower", (1, 3, 7, 6), (4, 3, 4, 3), dict(auto_pad="SAME_LOWER", strides=[2, 1])),
    ("2d-valid", (1, 3, 7, 6), (4, 3, 3, 3), dict(auto_pad="VALID", strides=[2, 2])),
    ("2d-kernel-shape", (1, 2, 5, 5), (3, 2, 3, 3), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("2d-1x1-stride2", (2, 4, 7, 7), (8, 4, 1, 1), dict(strides=[2, 2])),
    ("3d", (1, 2, 5, 6, 4), (3, 2, 3, 2, 2), dict(pads=[1, 0, 1, 0, 1, 1])),
    ("3d-group-stride-dil", (2, 4, 6, 5, 7), (6, 2, 2, 3, 2),
     dict(group=2, strides=[1, 2, 2], dilations=[2, 1, 1])),
    ("3d-same-lower", (1, 2, 5, 5, 5), (2, 2, 3, 3, 3),
     dict(auto_pad="SAME_LOWER", strides=[2, 2, 2])),
]

# (id, X shape, W shape [C, M/group, k...], attributes)
CONVT_CASES = [
    ("1d", (2, 3, 5), (3, 4, 3), {}),
    ("1d-stride", (2, 3, 5), (3, 2, 3), dict(strides=[2])),
    ("1d-stride-pads-outpad", (1, 3, 5), (3, 2, 4),
     dict(strides=[3], pads=[1, 2], output_padding=[2])),
    ("1d-dil-stride", (1, 2, 6), (2, 3, 3), dict(dilations=[2], strides=[2], pads=[3, 1])),
    ("1d-pads-beyond-kernel", (1, 2, 8), (2, 2, 3), dict(pads=[4, 3])),
    ("1d-output-shape", (1, 2, 4), (2, 2, 3), dict(strides=[2], output_shape=[8])),
    ("1d-output-shape-longer", (1, 2, 4), (2, 2, 2), dict(strides=[2], output_shape=[9])),
    ("1d-output-shape-outpad", (1, 2, 4), (2, 2, 2),
     dict(strides=[2], output_shape=[6], output_padding=[1])),
    ("1d-same-upper", (1, 2, 4), (2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2])),
    ("1d-same-lower", (1, 2, 4), (2, 3, 3), dict(auto_pad="SAME_LOWER", strides=[2])),
    ("1d-valid", (1, 2, 4), (2, 3, 3), dict(auto_pad="VALID", strides=[2])),
    ("1d-group", (1, 4, 5), (4, 3, 3), dict(group=2, strides=[2])),
    ("2d", (2, 3, 4, 5), (3, 2, 3, 3), {}),
    ("2d-stride-asym-pads-outpad", (1, 3, 4, 5), (3, 2, 3, 2),
     dict(strides=[2, 3], pads=[1, 0, 0, 1], output_padding=[1, 2])),
    ("2d-depthwise-dil", (1, 4, 5, 4), (4, 1, 3, 3),
     dict(group=4, dilations=[2, 1], strides=[1, 2])),
    ("2d-group2", (2, 4, 3, 4), (4, 3, 2, 3), dict(group=2, strides=[2, 2], pads=[0, 1, 1, 0])),
    ("2d-output-shape-same-upper", (1, 2, 3, 4), (2, 2, 3, 3),
     dict(strides=[2, 2], output_shape=[6, 7], auto_pad="SAME_UPPER")),
    ("2d-same-lower-dil", (1, 2, 3, 4), (2, 2, 3, 2),
     dict(auto_pad="SAME_LOWER", strides=[2, 2], dilations=[2, 1])),
    ("3d", (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 0, 1, 0, 1])),
    ("3d-group", (1, 4, 3, 3, 3), (4, 2, 2, 2, 2),
     dict(group=2, strides=[2, 2, 2], output_padding=[1, 0, 1])),
]

ids = lambda cases: [c[0] for c in cases]  # noqa: E731


def case(op, name):
    return next(c for c in (CONV_CASES if op == "Conv" else CONVT_CASES) if c[0] == name)


def out_channels(op, w_shape, attrs):
    return w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1)


def conv_model(op, elem, x_shape, w_shape, attrs, bias=False, opset=22, consts=None):
    """W (and B) are graph inputs, or initializers when consts = {"w": array, "b": array}."""
    names, inputs, inits = ["x", "w"], [("x", elem, x_shape)], []
    if bias:
        names.append("b")
    for name, shape in (("w", w_shape), ("b", (out_channels(op, w_shape, attrs),))):
        if name not in names:
            continue
        if consts:
            inits.append((name, consts[name]))
        else:
            inputs.append((name, elem, shape))
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits, opset=opset)


def feeds(op, x_shape, w_shape, attrs, bias, seed=0):
    f = {"x": harness.rand(x_shape, low=-1, high=1, seed=seed),
         "w": harness.rand(w_shape, low=-1, high=1, seed=seed + 1)}
    if bias:
        f["b"] = harness.rand((out_channels(op, w_shape, attrs),), seed=seed + 2)
    return f


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("case_", CONV_CASES, ids=ids(CONV_CASES))
def test_conv(case_, bias):
    _, xs, ws, attrs = case_
    oc.check(lambda e: conv_model("Conv", e, xs, ws, attrs, bias),
             feeds("Conv", xs, ws, attrs, bias), F32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("case_", CONVT_CASES, ids=ids(CONVT_CASES))
def test_conv_transpose(case_, bias):
    _, xs, ws, attrs = case_
    oc.check(lambda e: conv_model("ConvTranspose", e, xs, ws, attrs, bias),
             feeds("ConvTranspose", xs, ws, attrs, bias), F32, rtol=1e-4, atol=1e-5)


DTYPE_CASES = {"Conv": [case("Conv", c) for c in ("1d-dil-group", "2d-stride-dil-pads",
                                                   "3d-group-stride-dil")],
               "ConvTranspose": [case("ConvTranspose", c) for c in (
                   "1d-stride-pads-outpad", "2d-stride-asym-pads-outpad", "3d-group")]}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op,case_", [(op, c) for op, cs in DTYPE_CASES.items() for c in cs],
                         ids=[f"{op}-{c[0]}" for op, cs in DTYPE_CASES.items() for c in cs])
def test_float_dtypes(op, case_, dtype):
    """float16 against ORT's float16 kernels; bfloat16 (opset 22, no ORT CPU kernel) against the
    float32 model on CPU with the same bfloat16-rounded values."""
    _, xs, ws, attrs = case_
    oc.check(lambda e: conv_model(op, e, xs, ws, attrs, True), feeds(op, xs, ws, attrs, True),
             dtype, scale=5)


@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
@pytest.mark.parametrize("op,name", [("Conv", "2d-depthwise"), ("ConvTranspose", "2d-group2")])
def test_constant_weight_and_bias(op, name, dtype):
    """The usual form: W and B are initializers (loaded once, transposed on every run)."""
    _, xs, ws, attrs = case(op, name)
    f = feeds(op, xs, ws, attrs, True, seed=5)
    consts = {"w": f.pop("w").astype(dtype), "b": f.pop("b").astype(dtype)}
    model = conv_model(op, oc.elem(dtype), xs, ws, attrs, True, consts=consts)
    rtol, atol = (1e-4, 1e-5) if dtype == F32 else oc.tol(dtype, 5)
    s = harness.mlx_session(model)
    ref = harness.cpu_session(model).run(None, {"x": f["x"].astype(dtype)})
    for _ in range(2):  # a second run reuses the plan's constants
        got = s.run(None, {"x": f["x"].astype(dtype)})
        np.testing.assert_allclose(got[0].astype(np.float32), ref[0].astype(np.float32),
                                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
@pytest.mark.parametrize("opset", [7, 10, 11, 22])
def test_opset_rows(op, opset):
    """Rows 1-10 and 11-22 (opset 7: the oldest ORT guarantees) translate alike."""
    _, xs, ws, attrs = case(op, "2d-same-upper" if op == "Conv" else "2d-output-shape-same-upper")
    oc.check(lambda e: conv_model(op, e, xs, ws, attrs, True, opset=opset),
             feeds(op, xs, ws, attrs, True), F32, rtol=1e-4, atol=1e-5)


def test_conv_inside_a_graph():
    """Conv then ConvTranspose with initializer weights, fused in one MLX group."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["h", "w2", "b2"], ["y"], name="c2", strides=[2, 2])]
    x = harness.rand((1, 3, 6, 6), seed=8)
    inits = [("w1", harness.rand((4, 3, 3, 3), low=-1, high=1, seed=9)),
             ("w2", harness.rand((4, 2, 2, 2), low=-1, high=1, seed=10)),
             ("b2", harness.rand((2,), seed=11))]
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, x.shape)],
                               [("y", TensorProto.FLOAT, None)], initializers=inits)
    harness.check_against_cpu(model, {"x": x}, rtol=1e-4, atol=1e-4)


# --- declined forms ---------------------------------------------------------------------------
def test_declines_same_with_dilations(tmp_path):
    """ORT's CPU Conv rejects dilations with SAME padding at run time: left to it, not run."""
    m = conv_model("Conv", TensorProto.FLOAT, (1, 2, 8), (2, 2, 3),
                   dict(auto_pad="SAME_UPPER", dilations=[2]))
    oc.check_declined(m, None, "n", "dilations", tmp_path)


def test_declines_same_with_kernel_below_stride(tmp_path):
    """SAME with a 1-wide kernel and stride 5: the padding would be negative, where ORT departs
    from the spec; declined, and the CPU result is what the session returns."""
    m = conv_model("Conv", TensorProto.FLOAT, (1, 2, 10), (3, 2, 1),
                   dict(auto_pad="SAME_LOWER", strides=[5]))
    f = feeds("Conv", (1, 2, 10), (3, 2, 1), {}, False)
    oc.check_declined(m, f, "n", "negative padding", tmp_path)


def test_declines_kernel_shape_mismatch(tmp_path):
    m = conv_model("Conv", TensorProto.FLOAT, (1, 2, 6, 6), (3, 2, 3, 3), dict(kernel_shape=[2, 2]))
    oc.check_declined(m, None, "n", "does not match W", tmp_path)


def test_declines_four_spatial_dims(tmp_path):
    xs, ws = (1, 2, 3, 3, 3, 3), (2, 2, 2, 2, 2, 2)
    m = conv_model("Conv", TensorProto.FLOAT, xs, ws, {})
    oc.check_declined(m, feeds("Conv", xs, ws, {}, False), "n", "MLX convolves 1 to 3", tmp_path,
                      rtol=1e-5, atol=1e-5)


def test_declines_output_padding_not_below_stride(tmp_path):
    m = conv_model("ConvTranspose", TensorProto.FLOAT, (1, 2, 4), (2, 2, 2),
                   dict(strides=[2], output_padding=[2]))
    oc.check_declined(m, None, "n", "output_padding 2", tmp_path)


def test_declines_transpose_same_shorter_than_spec(tmp_path):
    """ConvTranspose SAME with kernel 1, stride 2: ORT's output has 7 elements, the spec's 8."""
    xs, ws, attrs = (1, 2, 4), (2, 2, 1), dict(strides=[2], auto_pad="SAME_UPPER")
    m = conv_model("ConvTranspose", TensorProto.FLOAT, xs, ws, attrs)
    oc.check_declined(m, feeds("ConvTranspose", xs, ws, attrs, False), "n", "shorter", tmp_path)



# Forms that MLX's CPU backend would run through per-element loops or an im2col copy are recast
# on the CPU device (src/cpu/conv.c): depthwise convolutions as a host loop over channels
# (src/cpu/conv_depthwise.c, bias added inside), 1x1 convolutions as one matrix product (bias
# accumulated by BLAS; a constant weight packed once for the plugin's product, src/cpu/matmul.c), other stride-1 ungrouped convolutions as one product per tap,
# ConvTranspose with kernel == stride as one matrix product. Every form against ORT's CPU
# provider, and the node's path in the run record (src/plan/node_path.h) proves which one ran.
DEPTHWISE = "conv_depthwise"  # host kernel
SPLIT = "conv_by_group"  # MLX's convolutions, composed
POINTWISE = "conv_pointwise"  # MLX's product (conv_pointwise_packed: the packed host kernel)
TAPS = "conv_taps"  # MLX's products, composed
IM2COL = "conv_im2col"  # host kernels
UNFOLD = "conv_transpose_unfold"  # MLX's product, composed
HOST_FORMS = ("conv_depthwise", "conv_pointwise_packed", "conv_im2col")


def conv_path(kernel, bias=False):
    """A convolution's node path: the form's kind, its kernel id, the bias taken in."""
    return ("host_kernel" if kernel in HOST_FORMS else "composed", kernel,
            ("bias",) if bias else ())
CPU_FORM_CASES = [
    ("Conv", DEPTHWISE, "dw-1d", (2, 5, 13), (5, 1, 3), dict(group=5, pads=[1, 2])),
    ("Conv", DEPTHWISE, "dw-2d-stride2", (1, 8, 11, 9), (8, 1, 3, 3),
     dict(group=8, strides=[2, 2], pads=[1, 1, 1, 1])),
    ("Conv", DEPTHWISE, "dw-2d-dil-asym", (2, 4, 10, 12), (4, 1, 3, 2),
     dict(group=4, dilations=[2, 3], pads=[0, 2, 1, 0])),
    ("Conv", DEPTHWISE, "dw-2d-same-upper", (1, 6, 9, 7), (6, 1, 5, 5),
     dict(group=6, auto_pad="SAME_UPPER", strides=[2, 1])),
    ("Conv", DEPTHWISE, "dw-2d-7x7", (1, 3, 16, 16), (3, 1, 7, 7), dict(group=3, pads=[3, 3, 3, 3])),
    ("Conv", DEPTHWISE, "dw-3d", (1, 4, 5, 6, 7), (4, 1, 2, 3, 3), dict(group=4, strides=[1, 2, 1])),
    # channels past one 8-wide step and a remainder; batch 2; a 1x1 depthwise kernel
    ("Conv", DEPTHWISE, "dw-2d-c21", (2, 21, 9, 10), (21, 1, 3, 3),
     dict(group=21, pads=[1, 1, 1, 1])),
    ("Conv", DEPTHWISE, "dw-3d-c16-pads", (1, 16, 4, 5, 6), (16, 1, 3, 2, 3),
     dict(group=16, pads=[1, 0, 2, 1, 1, 0], dilations=[1, 2, 1])),
    ("Conv", DEPTHWISE, "dw-1x1", (1, 9, 4, 4), (9, 1, 1, 1), dict(group=9)),
    # enough products to split output rows over the cores (uneven rows per thread)
    ("Conv", DEPTHWISE, "dw-2d-threads", (3, 40, 23, 30), (40, 1, 3, 3),
     dict(group=40, pads=[1, 1, 1, 1])),
    # channels in whole 8-float vectors: outputs clear of the padding along w go 8 at a time
    # (blocks and edges in one row; stride 2 along w; more than 64 channels without a bias)
    ("Conv", DEPTHWISE, "dw-2d-blocks-5x5", (1, 32, 12, 40), (32, 1, 5, 5),
     dict(group=32, strides=[2, 1], pads=[2, 2, 2, 2])),
    ("Conv", DEPTHWISE, "dw-2d-blocks-c72-dil-s2", (2, 72, 7, 45), (72, 1, 3, 3),
     dict(group=72, strides=[1, 2], dilations=[1, 2], pads=[1, 2, 1, 3])),
    ("Conv", DEPTHWISE, "dw-3d-blocks", (1, 16, 3, 4, 21), (16, 1, 2, 3, 3),
     dict(group=16, pads=[1, 1, 1, 0, 1, 1])),
    # kernels 3 and 5 wide at stride 1 along w slide over the row (8 and 6 outputs a block):
    # a last block that overlaps the one before, a span exactly one block wide, and one too
    # narrow for a block (every output the general way)
    ("Conv", DEPTHWISE, "dw-2d-slide-3-tail", (1, 24, 5, 19), (24, 1, 3, 3),
     dict(group=24, pads=[1, 0, 1, 2])),
    ("Conv", DEPTHWISE, "dw-2d-slide-5-exact", (1, 8, 6, 10), (8, 1, 5, 5),
     dict(group=8, pads=[2, 2, 2, 2])),
    ("Conv", DEPTHWISE, "dw-2d-slide-5-narrow", (1, 16, 6, 9), (16, 1, 5, 5),
     dict(group=16, pads=[2, 2, 2, 2])),
    # per-tap products are taken from about a MiB of im2col columns up (positions x taps x C)
    ("Conv", TAPS, "taps-2d", (2, 16, 40, 24), (5, 16, 3, 3), dict(pads=[1, 1, 1, 1])),
    ("Conv", TAPS, "taps-2d-dil-asym", (1, 24, 40, 50), (3, 24, 2, 3),
     dict(dilations=[2, 1], pads=[0, 2, 1, 0])),
    ("Conv", TAPS, "taps-2d-same-nopad", (1, 20, 60, 40), (4, 20, 3, 2),
     dict(auto_pad="SAME_LOWER")),
    ("Conv", TAPS, "taps-1d", (3, 40, 600), (2, 40, 4), dict(pads=[2, 1])),
    ("Conv", TAPS, "taps-3d", (1, 8, 16, 16, 16), (3, 8, 2, 3, 2),
     dict(pads=[1, 0, 1, 0, 1, 1])),
    ("Conv", TAPS, "taps-exact-fit", (1, 40000, 3, 3), (2, 40000, 3, 3), dict()),
    # other ungrouped convolutions with a constant weight: an im2col copy (read from the
    # channels-first input's view, zeros for the padding) and one product over the packed weight
    ("Conv", IM2COL, "im2col-stem-stride2", (1, 3, 20, 32), (8, 3, 3, 3),
     dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("Conv", IM2COL, "im2col-1x3-small", (1, 48, 1, 10), (6, 48, 1, 3), dict(pads=[0, 1, 0, 1])),
    ("Conv", IM2COL, "im2col-dil-stride-asym", (2, 5, 9, 11), (4, 5, 3, 2),
     dict(dilations=[2, 1], strides=[1, 2], pads=[2, 0, 1, 1])),
    ("Conv", IM2COL, "im2col-1d", (2, 6, 17), (5, 6, 4), dict(strides=[3], pads=[1, 2])),
    ("Conv", IM2COL, "im2col-3d", (1, 3, 5, 6, 7), (4, 3, 2, 3, 2),
     dict(strides=[2, 1, 2], pads=[1, 0, 0, 1, 1, 1])),
    ("Conv", IM2COL, "im2col-threads", (2, 16, 64, 48), (12, 16, 3, 3),
     dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("Conv", SPLIT, "group2-2d", (2, 6, 7, 8), (4, 3, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    ("Conv", SPLIT, "group3-2d-stride-dil", (1, 6, 11, 9), (9, 2, 3, 2),
     dict(group=3, strides=[2, 1], dilations=[1, 2])),
    ("Conv", SPLIT, "group2-1d", (2, 4, 10), (6, 2, 3), dict(group=2)),
    ("Conv", SPLIT, "dw-multiplier2", (1, 3, 6, 6), (6, 1, 3, 3), dict(group=3)),
    ("ConvTranspose", SPLIT, "t-group2-2d", (1, 4, 3, 4), (4, 3, 3, 3),
     dict(group=2, strides=[2, 2])),
    ("Conv", POINTWISE, "1x1-2d", (2, 6, 5, 7), (4, 6, 1, 1), dict()),
    ("Conv", POINTWISE, "1x1-2d-stride", (1, 3, 9, 8), (5, 3, 1, 1), dict(strides=[2, 3])),
    ("Conv", POINTWISE, "1x1-1d", (2, 4, 9), (3, 4, 1), dict()),
    ("Conv", POINTWISE, "1x1-3d", (1, 2, 3, 4, 5), (6, 2, 1, 1, 1), dict(strides=[1, 2, 1])),
    ("ConvTranspose", UNFOLD, "k=s-2d", (1, 4, 5, 6), (4, 3, 2, 2), dict(strides=[2, 2])),
    ("ConvTranspose", UNFOLD, "k=s-2d-rect-pads", (2, 3, 4, 5), (3, 2, 3, 2),
     dict(strides=[3, 2], pads=[1, 0, 2, 1])),
    ("ConvTranspose", UNFOLD, "k=s-2d-outpad", (1, 2, 3, 3), (2, 4, 2, 2),
     dict(strides=[2, 2], output_padding=[1, 1])),
    ("ConvTranspose", UNFOLD, "k=s-2d-output-shape", (1, 2, 3, 4), (2, 2, 2, 2),
     dict(strides=[2, 2], output_shape=[7, 9])),
    ("ConvTranspose", UNFOLD, "k=s-2d-same-lower", (1, 2, 3, 4), (2, 3, 3, 3),
     dict(strides=[3, 3], auto_pad="SAME_LOWER")),
    ("ConvTranspose", UNFOLD, "k=s-1d", (2, 3, 7), (3, 5, 4), dict(strides=[4])),
    ("ConvTranspose", UNFOLD, "k=s-3d", (1, 2, 2, 3, 2), (2, 3, 2, 1, 2), dict(strides=[2, 1, 2])),
]


@pytest.mark.parametrize("weights", ["inputs", "initializers"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("op,path,name,xs,ws,attrs", CPU_FORM_CASES,
                         ids=[c[2] for c in CPU_FORM_CASES])
@pytest.mark.cpu_device
def test_cpu_recast_forms(op, path, name, xs, ws, attrs, bias, weights):
    """Weights as graph inputs (each form builds its weight operand per translation) and as
    initializers (operands prepared once at plan build: src/cpu/conv.c, cpu_conv_prepare)."""
    f = feeds(op, xs, ws, attrs, bias)
    consts = None
    if weights == "initializers":
        consts = {k: f.pop(k) for k in ("w", "b") if k in f}
    model = conv_model(op, oc.elem(F32), xs, ws, attrs, bias, consts=consts)
    got, ref, rec = harness.run_with_paths(model, f)
    assert got[0].shape == ref[0].shape
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    if path == POINTWISE and weights == "initializers":  # packed once for the plugin's product
        path = "conv_pointwise_packed"
    # these take a float32 bias in (the loop; addmm; the product)
    takes_bias = bias and path in (DEPTHWISE, POINTWISE, "conv_pointwise_packed", TAPS, IM2COL)
    assert harness.node_path(rec, "n") == conv_path(path, takes_bias), harness.node_paths(rec)


# Plain forms too: their constant weights are prepared contiguous in MLX's layout.
PREPARED_CASES = CPU_FORM_CASES + [
    ("Conv", None, "plain-2d", *case("Conv", "2d-stride-dil-pads")[1:]),
    ("Conv", None, "plain-3d", *case("Conv", "3d")[1:]),
    ("ConvTranspose", None, "t-plain-2d", *case("ConvTranspose", "2d-stride-asym-pads-outpad")[1:]),
]


@pytest.mark.parametrize("op,path,name,xs,ws,attrs", PREPARED_CASES,
                         ids=[c[2] for c in PREPARED_CASES])
@pytest.mark.cpu_device
def test_prepared_weights_match_per_run_weights(op, path, name, xs, ws, attrs):
    """The weight operands prepared once from initializers must be the ones a translation builds
    from a weight fed as an input: the two models give bit-identical outputs on every run (a Neg
    after the node makes a group of two, so the path trial runs it eager, then compiled), and
    both match ORT's CPU provider."""
    def model(consts=None):
        m = conv_model(op, oc.elem(F32), xs, ws, attrs, True, consts=consts)
        m.graph.node[0].output[0] = "c"
        m.graph.node.append(helper.make_node("Neg", ["c"], ["y"], name="neg"))
        return m

    f = feeds(op, xs, ws, attrs, True, seed=3)
    fed = harness.mlx_session(model())
    const_model = model({k: f[k] for k in ("w", "b")})
    prepared = harness.mlx_session(const_model)
    ref = harness.cpu_session(const_model).run(None, {"x": f["x"]})
    for run in range(7):
        a = fed.run(None, f)[0]
        b = prepared.run(None, {"x": f["x"]})[0]
        np.testing.assert_array_equal(b, a, err_msg=f"run {run}")
        np.testing.assert_allclose(b, ref[0], rtol=1e-4, atol=1e-5)


@pytest.mark.cpu_device
@pytest.mark.parametrize("kernel,depthwise,strides,path",
                         [((3, 3), True, [1, 1], conv_path(DEPTHWISE, True)),
                          ((1, 1), False, [1, 1], conv_path("conv_pointwise_packed", True)),
                          ((3, 3), False, [1, 1], conv_path(TAPS, True)),
                          ((3, 3), False, [2, 2], conv_path(IM2COL, True))],
                         ids=["depthwise", "pointwise", "taps", "im2col"])
def test_cpu_forms_follow_changing_shapes(kernel, depthwise, strides, path):
    """The depthwise host loop, the pointwise addmm, the per-tap products and the im2col copy fix
    their geometry when the graph is traced, so a session fed other sizes must trace again (Conv
    compiles keyed on shapes), not replay the first geometry: sizes alternate, each checked
    against ORT's CPU provider."""
    c = 32  # large enough for per-tap products (about a MiB of im2col columns)
    group = c if depthwise else 1
    ws = (c, c // group) + kernel
    consts = {"w": harness.rand(ws, low=-1, high=1, seed=3), "b": harness.rand((c,), seed=4)}
    pads = [1, 1, 1, 1] if kernel == (3, 3) else [0, 0, 0, 0]
    conv = helper.make_node("Conv", ["x", "w", "b"], ["h"], name="n", group=group, pads=pads,
                            strides=strides)
    relu = helper.make_node("Relu", ["h"], ["y"], name="relu")  # two nodes: a compiled group
    model = harness.make_model([conv, relu], [("x", TensorProto.FLOAT, (None, c, None, None))],
                               [("y", TensorProto.FLOAT, None)],
                               initializers=[("w", consts["w"]), ("b", consts["b"])])
    ref = harness.cpu_session(model)
    rec = harness.Recorded(model)
    for i, shape in enumerate([(1, c, 32, 32), (2, c, 24, 20), (1, c, 32, 32), (1, c, 40, 24)]):
        x = {"x": harness.rand(shape, low=-1, high=1, seed=10 + i)}
        np.testing.assert_allclose(rec.session.run(None, x)[0], ref.run(None, x)[0], rtol=1e-4,
                                   atol=1e-5)
    record = rec.close()
    assert harness.node_path(record, "n") == path, record
    group = harness.only_group(record)
    assert group["path"] == "keyed" and group["traces"] == 3, group


@pytest.mark.cpu_device
@pytest.mark.parametrize("group", [1, 4], ids=["taps", "depthwise"])
def test_cpu_forms_take_an_empty_batch(group):
    """A batch of 0 gives an empty result of the right shape, then a batch of 2 still runs."""
    w = harness.rand((4, 4 // group, 3, 3), seed=5)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4, group=group),
             helper.make_node("Relu", ["c"], ["y"])]
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 4, 5, 5))],
                               [("y", TensorProto.FLOAT, None)], initializers=[("w", w)])
    s = harness.mlx_session(model)
    ref = harness.cpu_session(model)
    for n in (0, 2):
        x = {"x": harness.rand((n, 4, 5, 5), seed=n)}
        got = s.run(None, x)[0]
        assert got.shape == (n, 4, 5, 5)
        np.testing.assert_allclose(got, ref.run(None, x)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.cpu_device
@pytest.mark.parametrize("dilation", [1, 2])
def test_im2col_reads_a_convolutions_channels_last_result(dilation):
    """A convolution fed by another reads that one's channels-last result in place: whole runs
    of taps copied at once along w (undilated), or tap by tap (dilated), against ORT's CPU
    provider; both nodes take the im2col product."""
    w1 = harness.rand((8, 5, 3, 3), low=-1, high=1, seed=1)
    w2 = harness.rand((6, 8, 3, 3), low=-1, high=1, seed=2)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="first", strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["h", "w2"], ["y"], name="second", pads=[2, 1, 0, 2],
                              dilations=[dilation, dilation])]
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, (2, 5, 17, 23))],
                               [("y", TensorProto.FLOAT, None)],
                               initializers=[("w1", w1), ("w2", w2)])
    x = {"x": harness.rand((2, 5, 17, 23), low=-1, high=1, seed=3)}
    got, ref, rec = harness.run_with_paths(model, x)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    for name in ("first", "second"):
        assert harness.node_path(rec, name) == conv_path(IM2COL), harness.node_paths(rec)


@pytest.mark.cpu_device
def test_small_stride1_convolution_takes_im2col_not_taps():
    """Below about a MiB of im2col columns one product per tap costs more than one product over
    im2col columns (silero-vad's short sequences: per-tap products 1.50 against MLX's own
    convolution's 1.40 ms per Run), so a small stride-1 convolution takes the im2col product."""
    model = conv_model("Conv", oc.elem(F32), (1, 8, 6, 6), (4, 8, 3, 3), dict(pads=[1] * 4))
    f = feeds("Conv", (1, 8, 6, 6), (4, 8, 3, 3), dict(pads=[1] * 4), False)
    got, ref, rec = harness.run_with_paths(model, f)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    assert harness.node_paths(rec) == {"n": conv_path(IM2COL)}, harness.node_paths(rec)



JOINED = ("composed", "concat_channels_last", ())  # written channels-last for the convolution


def concat_then_conv(parts, kernel, axis, extra):
    """A Concat of `parts` ("conv": two pointwise convolutions' results, "conv3": three,
    "inputs": two graph inputs, "inputs-1d": two 1-D ones) along `axis`, read by a convolution
    with a `kernel`-sized window (and, per `extra`, returned or read by a Relu too): the model
    and its feeds."""
    one_d = parts == "inputs-1d"
    xs = (2, 5, 9) if one_d else (1, 6, 4, 11)
    inits, nodes, names = [], [], []
    inputs = [("x", TensorProto.FLOAT, xs)]
    feeds = {"x": harness.rand(xs, low=-1, high=1, seed=51)}
    if parts.startswith("conv"):
        for i in range(3 if parts == "conv3" else 2):
            inits.append((f"w{i}", harness.rand((4 + i, 6, 1, 1), low=-1, high=1, seed=40 + i)))
            nodes.append(helper.make_node("Conv", ["x", f"w{i}"], [f"p{i}"], name=f"pw{i}"))
            names.append(f"p{i}")
        channels = sum(4 + i for i in range(len(names)))
    else:
        zs = (xs[0], 3) + xs[2:]
        inputs.append(("z", TensorProto.FLOAT, zs))
        feeds["z"] = harness.rand(zs, low=-1, high=1, seed=52)
        names, channels = ["x", "z"], xs[1] + 3
    if axis == 2:  # along a spatial axis: the first part twice, its channels only
        names, channels = [names[0], names[0]], 4
    nodes.append(helper.make_node("Concat", names, ["c"], name="cat", axis=axis))
    inits.append(("w", harness.rand((7, channels) + kernel, low=-1, high=1, seed=50)))
    nodes.append(helper.make_node("Conv", ["c", "w"], ["y"], name="n",
                                  pads=[k // 2 for k in kernel] * 2))
    outputs = [("y", TensorProto.FLOAT, None)]
    if extra == "output":
        outputs.append(("c", TensorProto.FLOAT, None))
    elif extra == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        outputs.append(("r", TensorProto.FLOAT, None))
    return harness.make_model(nodes, inputs, outputs, initializers=inits), feeds


# (name, parts, the reading convolution's kernel, the Concat's axis, extra reader)
CONCAT_CASES = [
    ("conv-results-1x3", "conv", (1, 3), 1, None),  # PP-OCRv4 rec's neck
    ("inputs-3x3", "inputs", (3, 3), 1, None),
    ("negative-axis-1d", "inputs-1d", (3,), -2, None),
    ("three-parts-pointwise", "conv3", (1, 1), 1, None),
    ("also-returned", "conv", (1, 3), 1, "output"),
    ("also-read-by-relu", "conv", (1, 3), 1, "relu"),
    ("spatial-axis", "conv", (1, 3), 2, None),
]


@pytest.mark.cpu_device
@pytest.mark.parametrize("name,parts,kernel,axis,extra", CONCAT_CASES,
                         ids=[c[0] for c in CONCAT_CASES])
def test_concat_before_a_convolution_is_joined_channels_last(name, parts, kernel, axis, extra):
    """A Concat along the channel axis that a convolution alone reads is written channels-last,
    which the convolution's host kernels read in place; read by anything else too, returned, or
    joined along another axis, it is a plain join. Values against ORT's CPU provider."""
    model, feeds = concat_then_conv(parts, kernel, axis, extra)
    got, ref, rec = harness.run_with_paths(model, feeds)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    joined = extra is None and axis != 2
    assert (harness.node_path(rec, "cat") == JOINED) == joined, harness.node_paths(rec)


# --- inputs whose windows do not fit ----------------------------------------------------------
W3 = np.ones((4, 3, 3, 3), np.float32)


@pytest.mark.parametrize("x_shape,attrs", [
    ((1, 3, 0, 0), dict(pads=[1, 1, 1, 1], strides=[2, 2])),  # the fuzzer's reproducer
    ((2, 3, 0, 5), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    ((1, 3, 2, 2), dict(strides=[2, 2])),                     # kernel wider than the input
    ((1, 3, 0, 4), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 3, 2, 5), dict(auto_pad="VALID")),
], ids=str)
def test_conv_window_not_fitting_fails_naming_the_node(x_shape, attrs):
    """ORT's CPU kernel rejects these ("Invalid input shape"); MLX would return an output it never
    wrote. The node fails naming itself and the session runs a valid input afterwards."""
    m = conv_model("Conv", TensorProto.FLOAT, [None, 3, None, None], W3.shape, attrs,
                   consts={"w": W3})
    good = {"x": harness.rand((1, 3, 5, 5), seed=1)}
    of.rejects_then_runs(m, {"x": np.ones(x_shape, np.float32)}, good, rtol=1e-5, atol=1e-5)


def test_conv_empty_input_made_up_by_pads_is_the_bias():
    """An empty spatial dim whose pads still fit the kernel: every window holds only padding, so
    the output is the bias (ORT agrees); MLX's convolution would leave it unwritten."""
    b = np.arange(4, dtype=np.float32)
    m = conv_model("Conv", TensorProto.FLOAT, [None, 3, None, None], W3.shape,
                   dict(pads=[2, 2, 2, 2]), bias=True, consts={"w": W3, "b": b})
    for shape in [(1, 3, 0, 0), (2, 3, 0, 4)]:
        x = np.ones(shape, np.float32)
        got = of.mlx_outputs(m, {"x": x})[0]
        want = harness.cpu_session(m).run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, np.broadcast_to(b[None, :, None, None], want.shape))


# (op, X, W, attrs, the output's spatial dims, whether ORT's CPU provider is asked: with pads,
# or output_padding, or groups, its kernels never return on zero channels, and its Conv may leave
# the output unwritten (the fuzzer saw NaN from an earlier buffer: seed 900 case 1160), so for
# Conv the spec's bias broadcast alone is the reference)
NO_CHANNELS = [
    ("Conv", (2, 0, 5, 5), (4, 0, 3, 3), {}, (3, 3), False),
    ("Conv", (2, 0, 5, 5), (4, 0, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2]), (3, 3), False),
    ("Conv", (0, 0, 5, 5), (4, 0, 3, 3), {}, (3, 3), False),
    ("Conv", (1, 0, 6), (4, 0, 2), dict(dilations=[2]), (4,), False),
    ("ConvTranspose", (6, 0, 20, 8), (0, 1, 1, 1), {}, (20, 8), True),
    ("ConvTranspose", (2, 0, 4, 4), (0, 2, 3, 3), dict(strides=[2, 2], group=2), (9, 9), False),
    ("ConvTranspose", (2, 0, 4, 4), (0, 2, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]),
     (7, 7), True),
    ("ConvTranspose", (2, 0, 3), (0, 2, 2), dict(output_padding=[1], strides=[2]), (7,), False),
]


@pytest.mark.parametrize("op,x_shape,w_shape,attrs,spatial,ask_ort", NO_CHANNELS, ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_no_input_channels_give_the_bias(op, x_shape, w_shape, attrs, spatial, ask_ort, bias):
    """No input channels: every output sums nothing, so it is the bias (or zero). The EP failed
    'group is out of range' (the fuzzer found it). Compared with ORT's CPU provider without its
    graph optimisations (its NCHWc Conv rejects zero channels) where it answers, and always with
    the bias broadcast over the spec's output shape."""
    b = np.arange(1, out_channels(op, w_shape, attrs) + 1, dtype=np.float32)
    consts = {"w": np.zeros(w_shape, np.float32), "b": b}
    m = conv_model(op, TensorProto.FLOAT, [None] * len(x_shape), w_shape, attrs, bias,
                   consts=consts)
    x = np.ones(x_shape, np.float32)
    got = of.mlx_outputs(m, {"x": x})[0]
    fill = (b if bias else np.zeros_like(b)).reshape((1, -1) + (1,) * len(spatial))
    np.testing.assert_array_equal(got, np.broadcast_to(fill, (x_shape[0], len(b)) + spatial))
    if ask_ort:
        want = harness.cpu_session(m, optimize=False).run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
