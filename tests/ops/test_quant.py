"""Quantization rows (src/ops/quant.c): QuantizeLinear and DequantizeLinear at every opset row
(per-tensor, per-axis, blocked; int8/uint8/int16/uint16/int32; float16/bfloat16 scales and
inputs; output_dtype and precision), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv. Integer results must equal ONNX Runtime's CPU provider exactly
(ties rounding half to even, saturation, full-range operands, contraction lengths that need one,
two and four float32 partial products); forms ORT's CPU kernels lack (bfloat16, per-row or
per-channel zero points, mixed-type scales) are compared with numpy references. Declined forms
stay on CPU with their reasons."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper
from onnx.reference import ReferenceEvaluator

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16

NP = {TP.INT8: np.int8, TP.UINT8: np.uint8, TP.INT16: np.int16, TP.UINT16: np.uint16,
      TP.INT32: np.int32, TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.BFLOAT16: BF16}


def rng(seed=0):
    return np.random.default_rng(seed)


def full_range(shape, t, seed=0):
    info = np.iinfo(NP[t])
    return rng(seed).integers(info.min, info.max + 1, size=shape).astype(NP[t])


def qdq_model(op, opset, x_t, xs, s_t, ss, z_t=None, out_t=None, zero_point=True, **attrs):
    names = ["x", "s"] + (["z"] if z_t and zero_point else [])
    ins = [("x", x_t, xs), ("s", s_t, ss)] + ([("z", z_t, ss)] if z_t and zero_point else [])
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    return harness.make_model([node], ins, [("y", out_t, xs)], opset=opset)


def ties(shape, scale, seed=0):
    """Values whose quotients by scale include exact halves (ties), in and beyond range."""
    q = rng(seed).integers(-600, 600, size=shape) * 0.5
    return (q * scale).astype(np.float32)


def quantize_ref(x, s, z, out_np, div_dtype=np.float32):
    info = np.iinfo(out_np)
    q = np.rint((x.astype(div_dtype) / s.astype(div_dtype))).astype(np.float64)
    q = q + (z.astype(np.float64) if z is not None else 0)
    return np.clip(q, info.min, info.max).astype(out_np)


# --- QuantizeLinear ---------------------------------------------------------------------------
Q_OPSETS = [10, 13, 19, 21, 23, 25]
Q_CASES = [(o, t) for o in Q_OPSETS for t in (TP.UINT8, TP.INT8)] + \
          [(o, t) for o in (21, 23, 25) for t in (TP.INT16, TP.UINT16)]


@pytest.mark.parametrize("opset,out_t", Q_CASES, ids=lambda v: str(v))
def test_quantize_per_tensor(opset, out_t):
    """Ties round half to even; values beyond the range saturate; the zero point shifts."""
    wide = out_t in (TP.INT16, TP.UINT16)
    scale = np.array(0.5 if not wide else 0.01, np.float32)
    x = ties((4, 6), float(scale))
    if wide:
        x = (rng(1).uniform(-500, 800, (4, 6))).astype(np.float32)
    z = np.array(3 if out_t in (TP.UINT8, TP.UINT16) else -2, NP[out_t])
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, x.shape, TP.FLOAT, (), out_t, out_t)
    got, _, _ = harness.check_against_cpu(m, {"x": x, "s": scale, "z": z})
    np.testing.assert_array_equal(got[0], quantize_ref(x, scale, z, NP[out_t]))


@pytest.mark.parametrize("opset", [10, 19, 21, 25])
def test_quantize_without_zero_point_is_uint8(opset):
    x = ties((3, 5), 0.25)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, x.shape, TP.FLOAT, (), TP.UINT8, TP.UINT8,
                  zero_point=False)
    harness.check_against_cpu(m, {"x": x, "s": np.array(0.25, np.float32)})


@pytest.mark.parametrize("opset", [21, 25])
def test_quantize_output_dtype_without_zero_point(opset):
    x = ties((3, 5), 0.25)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, x.shape, TP.FLOAT, (), TP.INT16, TP.INT16,
                  zero_point=False, output_dtype=TP.INT16)
    harness.check_against_cpu(m, {"x": x * 100, "s": np.array(0.25, np.float32)})


@pytest.mark.parametrize("opset,axis", [(13, 1), (13, -3), (19, 0), (21, 2), (25, -1)])
def test_quantize_per_axis(opset, axis):
    xs = (3, 4, 5)
    d = xs[axis]
    x = rng(2).uniform(-40, 40, xs).astype(np.float32)
    s = rng(3).uniform(0.05, 0.5, d).astype(np.float32)
    z = rng(4).integers(-20, 20, d).astype(np.int8)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, xs, TP.FLOAT, (d,), TP.INT8, TP.INT8,
                  axis=axis)
    harness.check_against_cpu(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_one_element_scale_on_vector(opset):
    """A [1] scale with x of rank 1 and the default axis 1 (beyond x's rank): per-tensor."""
    x = ties((7,), 0.5)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, (7,), TP.FLOAT, (1,), TP.UINT8, TP.UINT8)
    harness.check_against_cpu(m, {"x": x, "s": np.array([0.5], np.float32),
                                  "z": np.array([128], np.uint8)})


@pytest.mark.parametrize("opset,xs,axis,block", [(21, (3, 8), 1, 2), (21, (3, 7), 1, 3),
                                                 (25, (6, 4), 0, 4), (25, (2, 5, 3), -2, 2)])
def test_quantize_blocked(opset, xs, axis, block):
    ss = list(xs)
    ss[axis] = -(-xs[axis] // block)
    x = rng(5).uniform(-30, 30, xs).astype(np.float32)
    s = rng(6).uniform(0.05, 0.4, ss).astype(np.float32)
    z = rng(7).integers(0, 40, ss).astype(np.uint8)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT, xs, TP.FLOAT, ss, TP.UINT8, TP.UINT8,
                  axis=axis, block_size=block)
    harness.check_against_cpu(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("opset", [19, 21, 25])
def test_quantize_float16_divides_in_float32(opset):
    """ORT divides float16 x by a float16 scale in float32; so does the EP (f16 division would
    round some quotients across .5)."""
    x = rng(8).uniform(-3, 40, 4000).astype(np.float16)
    s = np.array(0.1605, np.float16)
    m = qdq_model("QuantizeLinear", opset, TP.FLOAT16, x.shape, TP.FLOAT16, (), TP.UINT8,
                  TP.UINT8)
    got, _, _ = harness.check_against_cpu(m, {"x": x, "s": s, "z": np.array(3, np.uint8)})
    np.testing.assert_array_equal(got[0], quantize_ref(x, s, np.array(3), np.uint8))


@pytest.mark.parametrize("opset", [19, 21, 25])
def test_quantize_bfloat16(opset):
    """No ORT CPU kernel for bfloat16: against numpy (division in float32)."""
    x = rng(9).uniform(-50, 50, (5, 6)).astype(BF16)
    s = np.array(0.375, BF16)
    m = qdq_model("QuantizeLinear", opset, TP.BFLOAT16, x.shape, TP.BFLOAT16, (), TP.INT8,
                  TP.INT8)
    z = np.array(-1, np.int8)
    got, _ = oc.run_bf16_on_mlx(m, {"x": x, "s": s, "z": z}, [x.shape])
    np.testing.assert_array_equal(got[0], quantize_ref(x, s, z, np.int8))


@pytest.mark.parametrize("precision", [None, TP.FLOAT])
def test_quantize_mixed_types_and_precision(precision):
    """Opset 23: a float16 scale for float32 x divides in float16 (the scale's precision) unless
    `precision` says float; ORT's CPU kernel fails on mixed types, so against numpy."""
    x = rng(10).uniform(-3, 40, 3000).astype(np.float32)
    s = np.array(0.1605, np.float16)
    attrs = {"precision": precision} if precision else {}
    m = qdq_model("QuantizeLinear", 23, TP.FLOAT, x.shape, TP.FLOAT16, (), TP.UINT8, TP.UINT8,
                  **attrs)
    z = np.array(3, np.uint8)
    want = quantize_ref(x, s, z, np.uint8, np.float32 if precision else np.float16)
    oc.check_ref(m, {"x": x, "s": s, "z": z}, [want])
    if not precision:  # the two precisions do differ on these values
        assert (want != quantize_ref(x, s, z, np.uint8)).any()


# --- DequantizeLinear -------------------------------------------------------------------------
DQ_CASES = [(o, t) for o in (10, 13, 19, 21, 23, 25) for t in (TP.INT8, TP.UINT8, TP.INT32)] + \
           [(o, t) for o in (21, 23, 25) for t in (TP.INT16, TP.UINT16)]


@pytest.mark.parametrize("opset,x_t", DQ_CASES, ids=lambda v: str(v))
def test_dequantize_per_tensor(opset, x_t):
    x = full_range((4, 5), x_t, seed=11)
    z = np.array(0 if x_t == TP.INT32 else 7, NP[x_t])
    m = qdq_model("DequantizeLinear", opset, x_t, x.shape, TP.FLOAT, (), x_t, TP.FLOAT)
    harness.check_against_cpu(m, {"x": x, "s": np.array(0.037, np.float32), "z": z})


@pytest.mark.parametrize("opset,axis", [(13, 0), (19, -1), (21, 1), (25, 2)])
def test_dequantize_per_axis(opset, axis):
    xs = (2, 3, 4)
    d = xs[axis]
    x = full_range(xs, TP.UINT8, seed=12)
    s = rng(13).uniform(0.01, 1, d).astype(np.float32)
    z = rng(14).integers(0, 255, d).astype(np.uint8)
    m = qdq_model("DequantizeLinear", opset, TP.UINT8, xs, TP.FLOAT, (d,), TP.UINT8, TP.FLOAT,
                  axis=axis)
    harness.check_against_cpu(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("opset,xs,axis,block", [(21, (4, 6), 1, 3), (23, (5, 4), 0, 2),
                                                 (25, (2, 7, 3), 1, 4)])
def test_dequantize_blocked(opset, xs, axis, block):
    ss = list(xs)
    ss[axis] = -(-xs[axis] // block)
    x = full_range(xs, TP.INT8, seed=15)
    s = rng(16).uniform(0.01, 1, ss).astype(np.float32)
    z = rng(17).integers(-10, 10, ss).astype(np.int8)
    m = qdq_model("DequantizeLinear", opset, TP.INT8, xs, TP.FLOAT, ss, TP.INT8, TP.FLOAT,
                  axis=axis, block_size=block)
    harness.check_against_cpu(m, {"x": x, "s": s, "z": z})


@pytest.mark.parametrize("opset", [19, 21, 25])
def test_dequantize_float16_scale(opset):
    x = full_range((6, 7), TP.UINT8, seed=18)
    m = qdq_model("DequantizeLinear", opset, TP.UINT8, x.shape, TP.FLOAT16, (), TP.UINT8,
                  TP.FLOAT16)
    harness.check_against_cpu(m, {"x": x, "s": np.array(0.0123, np.float16),
                                  "z": np.array(100, np.uint8)}, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [23, 25])
def test_dequantize_output_dtype(opset):
    x = full_range((3, 4), TP.INT16, seed=19)
    m = qdq_model("DequantizeLinear", opset, TP.INT16, x.shape, TP.FLOAT, (), TP.INT16,
                  TP.FLOAT16, output_dtype=TP.FLOAT16)
    harness.check_against_cpu(m, {"x": x, "s": np.array(0.001, np.float32),
                                  "z": np.array(-5, np.int16)}, rtol=1e-3, atol=0)


def test_dequantize_bfloat16_scale():
    x = full_range((4, 4), TP.INT8, seed=20)
    s = np.array(0.0625, BF16)
    m = qdq_model("DequantizeLinear", 21, TP.INT8, x.shape, TP.BFLOAT16, (), TP.INT8,
                  TP.BFLOAT16)
    got, _ = oc.run_bf16_on_mlx(m, {"x": x, "s": s, "z": np.array(1, np.int8)}, [x.shape])
    want = ((x.astype(np.float32) - 1) * np.float32(0.0625)).astype(BF16)
    np.testing.assert_array_equal(got[0].astype(np.float32), want.astype(np.float32))


def test_quantize_dequantize_compile_shapeless():
    """Per-axis DQ -> Q over a symbolic batch: rank-only, one shapeless trace for every shape."""
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"], name="dq", axis=1),
             helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["y"], name="q", axis=1)]
    m = harness.make_model(nodes, [("x", TP.UINT8, ("N", 3))],
                           [("y", TP.INT8, ("N", 3))], opset=21,
                           initializers=[("s", np.array([0.1, 0.2, 0.3], np.float32)),
                                         ("z", np.array([1, 128, 255], np.uint8)),
                                         ("s2", np.array(0.25, np.float32)),
                                         ("z2", np.array(-3, np.int8))])
    oc.check_compiled(m, [{"x": full_range((n, 3), TP.UINT8, seed=n)} for n in (2, 5, 9)])


# --- DynamicQuantizeLinear --------------------------------------------------------------------
@pytest.mark.parametrize("name,x", [
    ("mixed", rng(21).uniform(-3, 7, (3, 4)).astype(np.float32)),
    ("positive", rng(22).uniform(0.5, 9, (10,)).astype(np.float32)),
    ("negative", rng(23).uniform(-9, -0.5, (2, 3, 4)).astype(np.float32)),
    ("zeros", np.zeros((2, 3), np.float32)),
    ("scalar", np.array(2.5, np.float32)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_dynamic_quantize(name, x):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"], name="n")
    m = harness.make_model([node], [("x", TP.FLOAT, x.shape)],
                           [("y", TP.UINT8, x.shape), ("ys", TP.FLOAT, ()), ("yz", TP.UINT8, ())],
                           opset=11)
    harness.check_against_cpu(m, {"x": x}, rtol=0, atol=0)


# --- MatMulInteger ----------------------------------------------------------------------------
# (id, A shape, B shape, A type, B type, a_zero_point shape, b_zero_point shape); values span
# each type's full range, so K decides how many float32 partial products are needed.
MMI_CASES = [
    ("2d-u8", (3, 4), (4, 5), TP.UINT8, TP.UINT8, (), ()),
    ("2d-u8-i8", (3, 6), (6, 2), TP.UINT8, TP.INT8, (), (2,)),
    ("2d-i8-no-zp", (4, 7), (7, 3), TP.INT8, TP.INT8, None, None),
    ("batched", (2, 3, 5), (2, 5, 4), TP.UINT8, TP.INT8, (1,), ()),
    ("broadcast-b", (2, 3, 5), (5, 4), TP.INT8, TP.UINT8, (), (4,)),
    ("1d-a", (5,), (5, 3), TP.UINT8, TP.UINT8, (), ()),
    ("1d-b", (3, 5), (5,), TP.UINT8, TP.INT8, (), ()),
    ("k300-two-products", (3, 300), (300, 4), TP.UINT8, TP.UINT8, (), ()),
    ("k5000-four-products", (2, 5000), (5000, 3), TP.UINT8, TP.INT8, (), ()),
]


def mmi_model(a_s, b_s, at, bt, za, zb):
    names = ["a", "b", "za" if za is not None else "", "zb" if zb is not None else ""]
    while names[-1] == "":
        names.pop()
    ins = [("a", at, a_s), ("b", bt, b_s)] + ([("za", at, za)] if za is not None else []) + \
          ([("zb", bt, zb)] if zb is not None else [])
    node = helper.make_node("MatMulInteger", names, ["y"], name="n")
    return harness.make_model([node], ins, [("y", TP.INT32, None)], opset=10)


def zp(shape, t, seed):
    return None if shape is None else full_range(shape, t, seed)


def mmi_ref(a, b, za=None, zb=None):
    a = a.astype(np.int64) - (0 if za is None else za.astype(np.int64))
    b = b.astype(np.int64) - (0 if zb is None else zb.astype(np.int64))
    return np.matmul(a, b).astype(np.int32)


@pytest.mark.parametrize("case", MMI_CASES, ids=lambda c: c[0])
def test_matmul_integer(case):
    """Exact against int64 numpy; also against ORT's CPU provider except for uint8 x int8, where
    its x86 kernel saturates int16 pair sums (pmaddubsw) on full-range values and errs."""
    _, a_s, b_s, at, bt, za, zb = case
    feeds = {"a": full_range(a_s, at, 24), "b": full_range(b_s, bt, 25)}
    if za is not None:
        feeds["za"] = zp(za, at, 26)
    if zb is not None:
        feeds["zb"] = zp(zb, bt, 27)
    m = mmi_model(a_s, b_s, at, bt, za, zb)
    oc.check_ref(m, feeds, [mmi_ref(feeds["a"], feeds["b"], feeds.get("za"), feeds.get("zb"))])
    if (at, bt) != (TP.UINT8, TP.INT8):
        harness.check_against_cpu(m, feeds)


def test_matmul_integer_extreme_values_exact():
    """The worst case for float32 partial sums: every product 255 * 255, K = 4000."""
    a = np.full((2, 4000), 255, np.uint8)
    b = np.full((4000, 2), 0, np.uint8)
    m = mmi_model(a.shape, b.shape, TP.UINT8, TP.UINT8, (), ())
    got, _, _ = harness.check_against_cpu(m, {"a": a, "b": b, "za": np.array(0, np.uint8),
                                              "zb": np.array(255, np.uint8)})
    assert got[0][0, 0] == -255 * 255 * 4000


def test_matmul_integer_per_row_a_zero_point():
    """Per-row a_zero_point (the spec allows it; ORT's CPU kernel does not): against numpy."""
    a, b = full_range((4, 6), TP.UINT8, 28), full_range((6, 3), TP.UINT8, 29)
    za, zb = full_range((4,), TP.UINT8, 30), np.array(9, np.uint8)
    want = (a.astype(np.int32) - za[:, None]) @ (b.astype(np.int32) - zb)
    oc.check_ref(mmi_model(a.shape, b.shape, TP.UINT8, TP.UINT8, (4,), ()),
                 {"a": a, "b": b, "za": za, "zb": zb}, [want.astype(np.int32)])


def test_dynamic_quantized_matmul_compiles_shapeless():
    """The dynamic-quantization MatMul pattern: K is fixed by the graph, so the integer matmul's
    choice of partial products cannot change and the group compiles shapeless."""
    w = full_range((600, 8), TP.UINT8, 31)  # uint8: ORT's uint8 x int8 kernel saturates
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "qs", "qz"], name="dq"),
             helper.make_node("MatMulInteger", ["q", "w", "qz"], ["acc"], name="mm"),
             helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TP.FLOAT),
             helper.make_node("Mul", ["accf", "qs"], ["y"], name="mul")]
    m = harness.make_model(nodes, [("x", TP.FLOAT, ("N", 600))], [("y", TP.FLOAT, ("N", 8))],
                           initializers=[("w", w)], opset=13)
    oc.check_compiled(m, [{"x": rng(n).uniform(-2, 2, (n, 600)).astype(np.float32)}
                          for n in (1, 3, 6)], rtol=1e-6, atol=1e-4)


# --- QLinearMatMul ----------------------------------------------------------------------------
def qlmm_model(opset, a_s, b_s, t, s_t=TP.FLOAT, bs=(), name="n"):
    ins = [("a", t, a_s), ("as", s_t, ()), ("az", t, ()), ("b", t, b_s), ("bs", s_t, bs),
           ("bz", t, bs), ("ys", s_t, ()), ("yz", t, ())]
    node = helper.make_node("QLinearMatMul", [i[0] for i in ins], ["y"], name=name)
    return harness.make_model([node], ins, [("y", t, None)], opset=opset)


def qlmm_feeds(a_s, b_s, t, s_np=np.float32, bs=(), seed=32):
    return {"a": full_range(a_s, t, seed), "as": np.array(0.02, s_np),
            "az": full_range((), t, seed + 1), "b": full_range(b_s, t, seed + 2),
            "bs": rng(seed).uniform(0.005, 0.05, bs).astype(s_np),
            "bz": full_range(bs, t, seed + 3), "ys": np.array(0.9, s_np),
            "yz": full_range((), t, seed + 4)}


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("t", [TP.UINT8, TP.INT8])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 40), (2, 40, 6)),
                                    ((2, 400), (400, 3))], ids=["2d", "3d", "k400"])
def test_qlinear_matmul(opset, t, shapes):
    a_s, b_s = shapes
    harness.check_against_cpu(qlmm_model(opset, a_s, b_s, t), qlmm_feeds(a_s, b_s, t))


def test_qlinear_matmul_per_column_b():
    a_s, b_s = (3, 8), (8, 5)
    m = qlmm_model(10, a_s, b_s, TP.UINT8, bs=(5,))
    harness.check_against_cpu(m, qlmm_feeds(a_s, b_s, TP.UINT8, bs=(5,)))


def test_qlinear_matmul_float16_scales():
    """Opset 21: float16 scales (used in float32, as ORT does)."""
    a_s, b_s = (4, 16), (16, 3)
    m = qlmm_model(21, a_s, b_s, TP.INT8, s_t=TP.FLOAT16)
    harness.check_against_cpu(m, qlmm_feeds(a_s, b_s, TP.INT8, s_np=np.float16))


# --- ConvInteger and QLinearConv --------------------------------------------------------------
CONV_CASES = [
    ("2d", (1, 2, 5, 5), (3, 2, 3, 3), {}),
    ("2d-pads-stride", (2, 3, 7, 6), (4, 3, 3, 2), dict(pads=[1, 0, 2, 1], strides=[2, 1])),
    ("2d-group-dil", (1, 4, 8, 8), (6, 2, 2, 2), dict(group=2, dilations=[2, 1])),
    ("1d-same", (1, 3, 9), (2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2])),
    ("3d", (1, 2, 4, 4, 4), (2, 2, 2, 2, 2), dict(pads=[1, 0, 0, 0, 1, 1])),
    ("c32-k3x3-two-products", (1, 32, 6, 6), (4, 32, 3, 3), dict(pads=[1, 1, 1, 1])),
    ("c512-k3x3-four-products", (1, 512, 3, 3), (2, 512, 3, 3), {}),
]


def conv_int_model(xs, ws, attrs, wz=(), xt=TP.UINT8, wt=TP.UINT8):
    ins = [("x", xt, xs), ("w", wt, ws), ("xz", xt, ()), ("wz", wt, wz)]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], name="n", **attrs)
    return harness.make_model([node], ins, [("y", TP.INT32, None)], opset=10)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[0])
def test_conv_integer(case):
    _, xs, ws, attrs = case
    feeds = {"x": full_range(xs, TP.UINT8, 33), "w": full_range(ws, TP.UINT8, 34),
             "xz": np.array(128, np.uint8), "wz": np.array(3, np.uint8)}
    harness.check_against_cpu(conv_int_model(xs, ws, attrs), feeds)


def test_conv_integer_per_channel_weight_zero_point():
    """Per-channel w zero points (spec; ORT's CPU kernel has per-tensor only): against onnx's
    reference evaluator."""
    xs, ws = (1, 2, 5, 5), (3, 2, 2, 2)
    m = conv_int_model(xs, ws, dict(pads=[1, 1, 1, 1]), wz=(3,), wt=TP.INT8)
    feeds = {"x": full_range(xs, TP.UINT8, 35), "w": full_range(ws, TP.INT8, 36),
             "xz": np.array(17, np.uint8), "wz": np.array([-3, 0, 5], np.int8)}
    oc.check_ref(m, feeds, ReferenceEvaluator(m).run(None, feeds))


def qlconv_model(xs, ws, attrs, t=TP.UINT8, per_channel=False, bias=True):
    m_out = ws[0]
    wsh = (m_out,) if per_channel else ()
    ins = [("x", t, xs), ("xs", TP.FLOAT, ()), ("xz", t, ()), ("w", t, ws),
           ("ws", TP.FLOAT, wsh), ("wz", t, wsh), ("ys", TP.FLOAT, ()), ("yz", t, ())]
    if bias:
        ins.append(("B", TP.INT32, (m_out,)))
    node = helper.make_node("QLinearConv", [i[0] for i in ins], ["y"], name="n", **attrs)
    return harness.make_model([node], ins, [("y", t, None)], opset=10)


@pytest.mark.parametrize("t", [TP.UINT8, TP.INT8])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
@pytest.mark.parametrize("case", CONV_CASES[:3] + CONV_CASES[5:6], ids=lambda c: c[0])
def test_qlinear_conv(case, per_channel, t):
    _, xs, ws, attrs = case
    wsh = (ws[0],) if per_channel else ()
    feeds = {"x": full_range(xs, t, 37), "xs": np.array(0.05, np.float32),
             "xz": full_range((), t, 38), "w": full_range(ws, t, 39),
             "ws": rng(40).uniform(0.001, 0.01, wsh).astype(np.float32),
             "wz": np.zeros(wsh, NP[t]) if t == TP.INT8 else full_range(wsh, t, 41),
             "ys": np.array(2.5, np.float32), "yz": full_range((), t, 42),
             "B": rng(43).integers(-5000, 5000, ws[0]).astype(np.int32)}
    harness.check_against_cpu(qlconv_model(xs, ws, attrs, t, per_channel), feeds)


def test_qlinear_conv_without_bias():
    xs, ws = (1, 3, 6, 6), (2, 3, 3, 3)
    feeds = {"x": full_range(xs, TP.UINT8, 44), "xs": np.array(0.05, np.float32),
             "xz": np.array(120, np.uint8), "w": full_range(ws, TP.UINT8, 45),
             "ws": np.array(0.003, np.float32), "wz": np.array(130, np.uint8),
             "ys": np.array(0.7, np.float32), "yz": np.array(5, np.uint8)}
    harness.check_against_cpu(qlconv_model(xs, ws, {}, bias=False), feeds)


# --- declines ---------------------------------------------------------------------------------
def test_declines_quantize_int32_x(tmp_path):
    """ORT's CPU provider has no int32 kernel either: the session fails, the report names it."""
    m = qdq_model("QuantizeLinear", 23, TP.INT32, (4,), TP.FLOAT, (), TP.UINT8, TP.UINT8)
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "QuantizeLinear")
    assert "int32 x" in declined["n"]


def test_declines_scale_of_rank_two_without_block_size(tmp_path):
    m = qdq_model("DequantizeLinear", 21, TP.UINT8, (4, 6), TP.FLOAT, (4, 3), TP.UINT8, TP.FLOAT)
    oc.check_declined(m, None, "n", "without block_size", tmp_path)


def test_declines_per_axis_scale_at_opset_10(tmp_path):
    m = qdq_model("QuantizeLinear", 10, TP.FLOAT, (2, 3), TP.FLOAT, (3,), TP.UINT8, TP.UINT8)
    oc.check_declined(m, None, "n", "per-tensor scale only", tmp_path)


def test_declines_blocked_scale_of_wrong_length(tmp_path):
    m = qdq_model("DequantizeLinear", 21, TP.INT8, (3, 8), TP.FLOAT, (3, 3), TP.INT8, TP.FLOAT,
                  axis=1, block_size=2)
    oc.check_declined(m, None, "n", "blocked scale dimension 1 is 3", tmp_path)


def test_declines_float8e8m0_scale(tmp_path):
    """Float8/4-bit/2-bit values are carried (tests/ops/test_lowbit.py); a float8e8m0 scale is
    not translated."""
    m = qdq_model("DequantizeLinear", 25, TP.INT8, (4,), TP.FLOAT8E8M0, (), TP.INT8, TP.FLOAT,
                  output_dtype=TP.FLOAT)
    m.ir_version = 11
    reasons = oc.declines_without_cpu_kernel(m, tmp_path, "Could not find an implementation")
    assert "which MLX cannot hold" in reasons["n"]


def test_declines_matmul_integer_matrix_zero_point(tmp_path):
    m = mmi_model((3, 4), (4, 5), TP.UINT8, TP.UINT8, (), (4, 5))
    oc.check_declined(m, None, "n", "scalars and 1-D", tmp_path)


def test_declines_matmul_integer_too_long(tmp_path):
    m = mmi_model((1, 70000), (70000, 1), TP.UINT8, TP.UINT8, (), ())
    oc.check_declined(m, None, "n", "at most 65535", tmp_path)


def test_declines_conv_integer_four_spatial_dims(tmp_path):
    m = conv_int_model((1, 1, 3, 3, 3, 3), (1, 1, 2, 2, 2, 2), {})
    oc.check_declined(m, None, "n", "MLX convolves 1 to 3", tmp_path)
