"""Elementwise rows (src/ops/elementwise.c): arithmetic (Add Sub Mul Div Pow Mod), variadic Max
Min Sum Mean, Clip, comparison (Equal Less Greater LessOrEqual GreaterOrEqual), logic (Not And Or
Xor Where), bitwise ops (BitwiseAnd/Or/Xor/Not, BitShift), unary math (Neg Abs Exp Log Sqrt
Reciprocal Erf, trigonometric and hyperbolic functions, Floor Ceil Round Sign), IsNaN, IsInf,
CastLike and BitCast, over dtypes, numpy broadcasting and opset versions; integer Div truncating
toward zero with negative operands; Pow with exponents of another type; Mod's two sign rules;
Round's halves to even. Every node is proven to run on MLX and compared with ORT's CPU provider
(numpy where ORT has no kernel)."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
import ops_failures as of
from ops_common import BF16, F16, F32, FLOATS

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def op_model(op, in_elems, in_shapes, out_elem, opset, **attrs):
    names = [f"in{i}" for i in range(len(in_elems))]
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    inputs = [(n, e, s) for n, e, s in zip(names, in_elems, in_shapes)]
    return harness.make_model([node], inputs, [("y", out_elem, None)], opset=opset)


def binary(op, elem, a, b, opset=14, out_elem=None):
    return op_model(op, [elem, elem], [a.shape, b.shape], out_elem or elem, opset)


# --- Add Sub Mul Div ---------------------------------------------------------------------
ARITH = ["Add", "Sub", "Mul", "Div"]
BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)),
              ((1,), (2, 3)), ((5, 1, 1), (1, 2, 3))]


@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("a_shape,b_shape", BROADCASTS, ids=str)
def test_arith_broadcasting(op, a_shape, b_shape):
    a = harness.rand(a_shape, seed=1)
    b = harness.rand(b_shape, low=0.5, high=2.0, seed=2)
    oc.check(lambda e: binary(op, e, a, b), {"in0": a, "in1": b}, F32)


@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("opset", [7, 13, 14])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_arith_floats(op, opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip(f"bfloat16 {op} arrives at opset 13")
    a = harness.rand((3, 4), seed=3)
    b = harness.rand((4,), low=0.5, high=2.0, seed=4)
    oc.check(lambda e: binary(op, e, a, b, opset), {"in0": a, "in1": b}, dtype)


@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_arith_ints(op, dtype):
    a = harness.rand((3, 4), dtype, low=1, high=3, seed=5)
    b = harness.rand((4,), dtype, low=1, high=3, seed=6)
    b[b == 0] = 1
    opset = 14 if np.dtype(dtype).itemsize < 4 else 13  # 8/16-bit ints arrive at opset 14
    oc.check(lambda e: binary(op, e, a, b, opset), {"in0": a, "in1": b}, dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_int_div_truncates_toward_zero(dtype):
    """ONNX Runtime's integer Div is C division: -7 / 2 == -3 (numpy's // gives -4)."""
    a = np.array([-7, 7, -7, 7, -1, 1, 0, -6, 6, -5], dtype)
    b = np.array([2, -2, -2, 2, 3, -3, -4, 3, -3, 7], dtype)
    got = oc.check(lambda e: binary("Div", e, a, b), {"in0": a, "in1": b}, dtype)
    np.testing.assert_array_equal(got[0], np.array([-3, -3, 3, 3, 0, 0, 0, -2, -2, 0], dtype))


def test_int_div_broadcast_scalar_divisor():
    a = np.arange(-9, 10, dtype=np.int64).reshape(1, 19)
    b = np.array(-4, np.int64)
    oc.check(lambda e: binary("Div", e, a, b), {"in0": a, "in1": b}, np.int64)


# --- Pow ----------------------------------------------------------------------------------
POW_TYPES = [(np.float32, np.float32), (np.float32, np.int32), (np.float32, np.int64),
             (np.float32, np.float16), (np.float16, np.float32), (np.float16, np.int64),
             (np.int32, np.int32), (np.int64, np.int64), (np.int32, np.int64),
             (np.int64, np.float32), (np.int32, np.float16)]


@pytest.mark.parametrize("base,exp", POW_TYPES, ids=lambda t: np.dtype(t).name)
def test_pow_mixed_types(base, exp):
    a = harness.rand((3, 4), base, low=1, high=3, seed=7)
    if np.dtype(base).kind == "f":
        a = np.abs(a) + base(0.5)
    e = np.array([0, 1, 2, 3], np.float32).astype(exp)
    m = op_model("Pow", [harness.onnx_type(base), harness.onnx_type(exp)], [a.shape, e.shape],
                 harness.onnx_type(base), 15)
    rtol, atol = oc.tol(base)
    harness.check_against_cpu(m, {"in0": a, "in1": e}, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_int_negative_exponent(dtype):
    a = np.array([2, 1, -1, -1, 3], dtype)
    b = np.array([-1, -2, -3, -2, 0], dtype)
    oc.check(lambda e: binary("Pow", e, a, b, 15), {"in0": a, "in1": b}, dtype)


@pytest.mark.xfail(strict=True, reason="known gap in elementwise.c: an integer base with a float "
                   "exponent is computed in float32 (ORT: double), so 5**13 rounds")
def test_pow_int_base_float_exponent_large():
    a = np.array([5, 3], np.int64)
    b = np.array([13, 2], np.float32)
    m = op_model("Pow", [TensorProto.INT64, TensorProto.FLOAT], [a.shape, b.shape],
                 TensorProto.INT64, 15)
    harness.check_against_cpu(m, {"in0": a, "in1": b})


@pytest.mark.parametrize("opset", [7, 12, 13, 15])
def test_pow_opsets(opset):
    a = harness.rand((2, 3), low=0.5, high=2.0, seed=8)
    b = harness.rand((3,), low=-2, high=2, seed=9)
    oc.check(lambda e: binary("Pow", e, a, b, opset), {"in0": a, "in1": b}, F32, rtol=1e-5,
             atol=1e-5)


def test_pow_bfloat16():
    a = harness.rand((2, 3), low=0.5, high=2.0, seed=10)
    b = harness.rand((3,), low=-2, high=2, seed=11)
    oc.check(lambda e: binary("Pow", e, a, b, 15), {"in0": a, "in1": b}, BF16)


# --- Equal Less Greater ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32, np.int64,
                                   np.uint8, np.uint64], ids=lambda d: np.dtype(d).name)
def test_comparisons(op, dtype):
    a = harness.rand((3, 4), dtype, low=-2, high=2, seed=12)
    b = a[1:2].copy()  # broadcast, with some equal elements
    b[0, 0] += dtype(1)
    opset = 13
    oc.check(lambda e: binary(op, e, a, b, opset, TensorProto.BOOL), {"in0": a, "in1": b},
             dtype)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
def test_comparisons_bfloat16(op):
    a = harness.rand((3, 4), seed=13)
    b = a[:, 1:2].copy()
    oc.check(lambda e: binary(op, e, a, b, 13, TensorProto.BOOL), {"in0": a, "in1": b}, BF16)


def test_equal_bool():
    a = harness.rand((3, 4), np.bool_, seed=14)
    b = harness.rand((4,), np.bool_, seed=15)
    oc.check(lambda e: binary("Equal", e, a, b, 19, TensorProto.BOOL), {"in0": a, "in1": b},
             np.bool_)


# --- Not Where ------------------------------------------------------------------------------
def test_not():
    a = harness.rand((3, 5), np.bool_, seed=16)
    oc.check(lambda e: op_model("Not", [e], [a.shape], e, 1), {"in0": a}, np.bool_)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32, np.int64,
                                   np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opset", [9, 16])
def test_where_broadcast(dtype, opset):
    c = harness.rand((2, 1, 4), np.bool_, seed=17)
    x = harness.rand((3, 4), dtype, seed=18)
    y = harness.rand((2, 3, 1), dtype, seed=19)
    m = op_model("Where", [TensorProto.BOOL, harness.onnx_type(dtype), harness.onnx_type(dtype)],
                 [c.shape, x.shape, y.shape], harness.onnx_type(dtype), opset)
    harness.check_against_cpu(m, {"in0": c, "in1": x, "in2": y})


def test_where_bfloat16():
    c = harness.rand((3, 4), np.bool_, seed=20)
    x = harness.rand((3, 4), seed=21)
    y = harness.rand((4,), seed=22)
    oc.check(lambda e: op_model("Where", [TensorProto.BOOL, e, e], [c.shape, x.shape, y.shape],
                                e, 16), {"in0": c, "in1": x, "in2": y}, BF16)


def test_where_bool_values():
    """ORT's CPU provider has no bool Where; numpy is the reference."""
    c, x, y = (harness.rand((3, 4), np.bool_, seed=s) for s in (23, 24, 25))
    m = op_model("Where", [TensorProto.BOOL] * 3, [c.shape] * 3, TensorProto.BOOL, 16)
    oc.check_ref(m, {"in0": c, "in1": x, "in2": y}, [np.where(c, x, y)])


# --- unary math -------------------------------------------------------------------------------
UNARY_FLOAT = ["Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Erf"]


@pytest.mark.parametrize("op", UNARY_FLOAT)
@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_unary_floats(op, opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip(f"bfloat16 {op} arrives at opset 13")
    positive = op in ("Log", "Sqrt", "Reciprocal")
    x = harness.rand((3, 4), low=0.1 if positive else -3, high=3, seed=26)
    oc.check(lambda e: op_model(op, [e], [x.shape], e, opset), {"in0": x}, dtype)


@pytest.mark.parametrize("op,dtypes", [("Neg", [np.int8, np.int16, np.int32, np.int64]),
                                       ("Abs", INTS)], ids=["Neg", "Abs"])
def test_unary_ints(op, dtypes):
    for dtype in dtypes:
        x = harness.rand((3, 4), dtype, low=-3, high=3, seed=27)
        oc.check(lambda e: op_model(op, [e], [x.shape], e, 13), {"in0": x}, dtype)


def test_unary_chain_fused():
    """Exp(Log(Sqrt(|x|)+1)) * -x / 2 in one MLX group."""
    two = np.array(2.0, np.float32)
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("Sqrt", ["a"], ["b"], name="sqrt"),
             helper.make_node("Add", ["b", "two"], ["c"], name="add"),
             helper.make_node("Log", ["c"], ["d"], name="log"),
             helper.make_node("Exp", ["d"], ["e"], name="exp"),
             helper.make_node("Neg", ["x"], ["f"], name="neg"),
             helper.make_node("Mul", ["e", "f"], ["g"], name="mul"),
             helper.make_node("Div", ["g", "two"], ["y"], name="div")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, (3, 4))],
                           [("y", TensorProto.FLOAT, (3, 4))], initializers=[("two", two)],
                           opset=13)
    harness.check_against_cpu(m, {"x": harness.rand((3, 4), seed=28)})


# --- declines -------------------------------------------------------------------------------
def test_add_opset6_declined(tmp_path):
    """Opset 6 Add had a `broadcast` attribute; its row starts at 7. (ORT's CPU provider has no
    Add-6 kernel either, so only the decline itself can be checked.)"""
    a, b = harness.rand((2, 3)), harness.rand((2, 3), seed=1)
    m = binary("Add", TensorProto.FLOAT, a, b, opset=6)
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "implementation for Add")
    assert "opset version 6 is not translated (supported: 7..14)" in declined["n"]


@pytest.mark.cpu_device
def test_float64_mul_runs_on_mlx():
    """float64 arithmetic is claimed on the CPU device (tests/ops/test_float64.py has the rest)."""
    a = harness.rand((2, 3)).astype(np.float64)
    b = harness.rand((3,), seed=1).astype(np.float64)
    m = binary("Mul", TensorProto.DOUBLE, a, b)
    got, _, _ = harness.check_against_cpu(m, {"in0": a, "in1": b}, rtol=0, atol=0)
    assert got[0].dtype == np.float64


def test_compiled_shapeless_int_div_pow_where():
    """Truncating Div, mixed-type Pow and Where in one compiled function, two shapes."""
    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="div"),
             helper.make_node("Pow", ["q", "e"], ["p"], name="pow"),
             helper.make_node("Less", ["a", "b"], ["lt"], name="less"),
             helper.make_node("Where", ["lt", "p", "q"], ["y"], name="where")]
    m = harness.make_model(nodes, [("a", TensorProto.INT64, ("N", "M")),
                                   ("b", TensorProto.INT64, ("M",))],
                           [("y", TensorProto.INT64, ("N", "M"))],
                           initializers=[("e", np.array(2.0, np.float32))], opset=15)

    def feeds(shape, seed):
        b = harness.rand(shape[1:], np.int64, seed=seed)
        b[b == 0] = 3
        return {"a": harness.rand(shape, np.int64, seed=seed + 1), "b": b}
    oc.check_compiled(m, [feeds((2, 3), 1), feeds((5, 4), 3)])


# --- trigonometric, hyperbolic, Floor Ceil Round ----------------------------------------------
# (op, low, high): a domain where the function is defined and well conditioned.
TRIG = [("Sin", -3, 3), ("Cos", -3, 3), ("Tan", -1.2, 1.2), ("Asin", -0.95, 0.95),
        ("Acos", -0.95, 0.95), ("Atan", -3, 3), ("Sinh", -3, 3), ("Cosh", -3, 3),
        ("Asinh", -3, 3), ("Acosh", 1.1, 4), ("Atanh", -0.9, 0.9)]


@pytest.mark.parametrize("op,low,high", TRIG, ids=[t[0] for t in TRIG])
@pytest.mark.parametrize("opset", [9, 22])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_trig_hyperbolic(op, low, high, opset, dtype):
    if dtype == BF16 and opset < 22:
        pytest.skip(f"bfloat16 {op} arrives at opset 22")
    x = harness.rand((3, 5), low=low, high=high, seed=30)
    oc.check(lambda e: op_model(op, [e], [x.shape], e, opset), {"in0": x}, dtype, scale=2)


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_floor_ceil_round(op, dtype):
    x = np.concatenate([harness.rand((20,), low=-5, high=5, seed=31),
                        np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0, 0.49, -3.51],
                                 np.float32)])
    opset = 22 if op == "Round" else 13
    oc.check(lambda e: op_model(op, [e], [x.shape], e, opset), {"in0": x}, dtype)


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 2.4999, -2.5001], np.float32)
    got = oc.check(lambda e: op_model("Round", [e], [x.shape], e, 11), {"in0": x}, F32)
    np.testing.assert_array_equal(got[0], [-2, -2, -0, 0, 2, 2, 4, 4, 2, -3])


@pytest.mark.parametrize("op", ["Floor", "Ceil"])
def test_floor_ceil_opset6(op):
    x = harness.rand((4, 3), low=-5, high=5, seed=32)
    oc.check(lambda e: op_model(op, [e], [x.shape], e, 6), {"in0": x}, F32)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
def test_sign(dtype):
    x = harness.rand((4, 5), dtype, low=-3, high=3, seed=33)
    x.flat[0] = 0
    oc.check(lambda e: op_model("Sign", [e], [x.shape], e, 13), {"in0": x}, dtype)


# --- Mod ----------------------------------------------------------------------------------------
def mod_model(elem, a, b, fmod):
    return op_model("Mod", [elem, elem], [a.shape, b.shape], elem, 13, fmod=fmod)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_mod_signed_sign_rules(fmod, dtype):
    """fmod=0: the result takes the divisor's sign (-7 mod 3 == 2); fmod=1: the dividend's
    (fmod(-7, 3) == -1)."""
    a = np.array([-7, 7, -7, 7, -6, 6, 0, 5, -5, 9], dtype)
    b = np.array([3, -3, -3, 3, 3, -3, 4, 7, 7, -2], dtype)
    got = oc.check(lambda e: mod_model(e, a, b, fmod), {"in0": a, "in1": b}, dtype)
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_mod_unsigned(fmod, dtype):
    a = harness.rand((3, 4), dtype, low=0, high=9, seed=34)
    b = np.array([1, 2, 5, 7], dtype)
    oc.check(lambda e: mod_model(e, a, b, fmod), {"in0": a, "in1": b}, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mod_float_fmod_broadcast(dtype):
    a = harness.rand((3, 4), low=-9, high=9, seed=35)
    b = np.array([1.5, -2.25, 3.0, -0.75], np.float32)
    got = oc.check(lambda e: mod_model(e, a, b, 1), {"in0": a, "in1": b}, dtype)
    if dtype == F32:
        np.testing.assert_array_equal(got[0], np.fmod(a, b))


def test_mod_float_without_fmod_declined(tmp_path):
    """ONNX leaves float Mod with fmod=0 undefined; ORT's CPU kernel refuses it at run time."""
    a, b = harness.rand((3,)), harness.rand((3,), seed=1)
    m = mod_model(TensorProto.FLOAT, a, b, 0)
    oc.check_declined(m, None, "n", "fmod=0", tmp_path)


# --- integer Div and Mod at the edges ------------------------------------------------------------
def c_division(a, b, dtype):
    """NumPy-free reference in Python ints, wrapped to dtype as two's complement: C's truncating
    quotient, Python's floored remainder (fmod=0) and C's remainder (fmod=1)."""
    bits, signed = np.dtype(dtype).itemsize * 8, np.issubdtype(dtype, np.signedinteger)

    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if signed and v >> (bits - 1) else v

    def trunc(x, y):
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q
    pairs = [(int(x), int(y)) for x, y in zip(a, b)]
    return {"Div": np.array([wrap(trunc(x, y)) for x, y in pairs], dtype),
            0: np.array([wrap(x % y) for x, y in pairs], dtype),
            1: np.array([wrap(x - trunc(x, y) * y) for x, y in pairs], dtype)}


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_int_div_mod_extremes_match_reference(dtype):
    """Every pair of edge values: INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 (MLX's
    C++ kernels trap there, SIGFPE; so does ORT's CPU provider), and INT_MIN (whose magnitude
    does not fit) divides and reduces exactly by every divisor."""
    info = np.iinfo(dtype)
    vals = sorted({v for v in (info.min, info.min + 1, -7, -3, -2, -1, 1, 2, 3, 7, info.max - 1,
                               info.max) if info.min <= v <= info.max} | {0})
    a = np.array([x for x in vals for y in vals if y != 0], dtype)
    b = np.array([y for x in vals for y in vals if y != 0], dtype)
    want = c_division(a, b, dtype)
    elem = harness.onnx_type(np.dtype(dtype))
    got = of.mlx_outputs(binary("Div", elem, a, b), {"in0": a, "in1": b})[0]
    np.testing.assert_array_equal(got, want["Div"])
    for fmod in (0, 1):
        got = of.mlx_outputs(mod_model(elem, a, b, fmod), {"in0": a, "in1": b})[0]
        np.testing.assert_array_equal(got, want[fmod], err_msg=f"fmod={fmod}")


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,fmod", [("Div", None), ("Mod", 0), ("Mod", 1)])
def test_int_division_by_zero_fails_naming_the_node(dtype, op, fmod):
    """ORT's CPU provider fails integer Div and Mod by zero; so do we (MLX would give 0 or the
    dividend), and the session runs on."""
    elem = harness.onnx_type(np.dtype(dtype))
    a = np.array([7, 5, 0, 9], dtype)
    bad, good = np.array([2, 0, 1, 3], dtype), np.array([2, 4, 1, 3], dtype)
    m = (binary("Div", elem, a, bad) if op == "Div" else mod_model(elem, a, bad, fmod))
    of.rejects_then_runs(m, {"in0": a, "in1": bad}, {"in0": a, "in1": good}, op=op)


def test_int_division_by_zero_fails_when_compiled():
    """The check holds inside a compiled function too (Div then Add, shapeless, two shapes), and
    the session runs on."""
    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="div"),
             helper.make_node("Add", ["q", "a"], ["y"], name="add")]
    m = harness.make_model(nodes, [("a", TensorProto.INT64, ("N", 3)),
                                   ("b", TensorProto.INT64, ("N", 3))],
                           [("y", TensorProto.INT64, None)], opset=14)
    rec = harness.Recorded(m)
    s = rec.session
    for n in (2, 3):
        x = np.arange(1, 3 * n + 1, dtype=np.int64).reshape(n, 3)
        np.testing.assert_array_equal(s.run(None, {"a": x, "b": x})[0], x + 1)
    y = x.copy()
    y[2, 1] = 0
    with pytest.raises(of.RuntimeException, match=of.names_node("div", "Div")):
        s.run(None, {"a": x, "b": y})
    np.testing.assert_array_equal(s.run(None, {"a": x, "b": x})[0], x + 1)
    del s
    group = harness.only_group(rec.close())
    assert group["path"] == "shapeless", group
    # the failed compiled run is repeated eagerly to name the failing check
    assert (group["failures"], group["compiled_runs"], group["eager_runs"]) == (1, 4, 1), group


# --- Max Min Sum Mean ----------------------------------------------------------------------------
def variadic_model(op, elem, shapes, opset=13):
    return op_model(op, [elem] * len(shapes), shapes, elem, opset)


VARIADIC_SHAPES = [[(3, 4)], [(3, 4), (3, 4)], [(2, 1, 4), (3, 1), (4,)], [(), (2, 3), (1, 3)]]


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=str)
@pytest.mark.parametrize("opset", [8, 13])
def test_variadic_broadcasting(op, shapes, opset):
    feeds = {f"in{i}": harness.rand(s, seed=40 + i) for i, s in enumerate(shapes)}
    oc.check(lambda e: variadic_model(op, e, shapes, opset), feeds, F32)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_variadic_half(op, dtype):
    shapes = [(3, 4), (4,), (3, 1)]
    feeds = {f"in{i}": harness.rand(s, seed=44 + i) for i, s in enumerate(shapes)}
    oc.check(lambda e: variadic_model(op, e, shapes), feeds, dtype)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_max_min_ints(op, dtype):
    shapes = [(3, 4), (4,), (3, 1)]
    feeds = {f"in{i}": harness.rand(s, dtype, seed=47 + i) for i, s in enumerate(shapes)}
    m = variadic_model(op, harness.onnx_type(dtype), shapes)
    if np.dtype(dtype) in (np.dtype(np.int16), np.dtype(np.uint16)):  # no ORT CPU kernel
        fold = np.maximum if op == "Max" else np.minimum
        want = fold(fold(feeds["in0"], feeds["in1"]), feeds["in2"])
        oc.check_ref(m, feeds, [want])
    else:
        harness.check_against_cpu(m, feeds)


def test_max_min_nan_propagates():
    a = np.array([np.nan, -2, 5, 1], np.float32)
    b = np.array([1, np.nan, 2, 1], np.float32)
    for op in ("Max", "Min"):
        got = oc.check(lambda e: variadic_model(op, e, [a.shape, b.shape]), {"in0": a, "in1": b},
                       F32)
        assert np.isnan(got[0][:2]).all()


# --- Clip -------------------------------------------------------------------------------------
def clip_model(elem, shape, opset, lo=None, hi=None, bound_shape=(), **attrs):
    """lo/hi: None (absent), or a value fed as an input (opset 11+)."""
    names, inputs = ["x"], [("x", elem, shape)]
    for name, v in (("lo", lo), ("hi", hi)):
        if v is None:
            names.append("")
        else:
            names.append(name)
            inputs.append((name, elem, bound_shape))
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("Clip", names, ["y"], name="n", **attrs)
    return harness.make_model([node], inputs, [("y", elem, shape)], opset=opset)


@pytest.mark.parametrize("attrs", [{}, {"min": -0.5}, {"max": 0.5}, {"min": -1.0, "max": 0.25}],
                         ids=str)
@pytest.mark.parametrize("opset", [6, 10])
@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
def test_clip_attributes(attrs, opset, dtype):
    x = harness.rand((3, 5), seed=50)
    oc.check(lambda e: clip_model(e, x.shape, opset, **attrs), {"x": x}, dtype)


@pytest.mark.parametrize("lo,hi", [(None, None), (-0.5, None), (None, 0.5), (-1.0, 0.25),
                                   (0.5, -0.5)], ids=str)
@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_clip_inputs(lo, hi, opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 Clip arrives at opset 13")
    x = harness.rand((3, 5), seed=51)
    feeds = {"x": x}
    if lo is not None:
        feeds["lo"] = np.array(lo, np.float32)
    if hi is not None:
        feeds["hi"] = np.array(hi, np.float32)
    oc.check(lambda e: clip_model(e, x.shape, opset, lo, hi), feeds, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_clip_ints(dtype):
    x = harness.rand((4, 5), dtype, low=-3, high=3, seed=52)
    lo, hi = np.array(1, dtype), np.array(4, dtype)
    m = clip_model(harness.onnx_type(dtype), x.shape, 13, lo, hi)
    if np.dtype(dtype).itemsize == 2:  # no ORT CPU kernel for 16-bit integer Clip
        oc.check_ref(m, {"x": x, "lo": lo, "hi": hi}, [np.clip(x, lo, hi)])
    else:
        harness.check_against_cpu(m, {"x": x, "lo": lo, "hi": hi})


def test_clip_one_element_bounds_and_scalar_input():
    """A [1]-shaped bound (accepted by ORT) does not add a dimension to a scalar input."""
    for shape in [(), (2, 3)]:
        x = harness.rand(shape, seed=53)
        lo, hi = np.array([-0.5], np.float32), np.array([0.5], np.float32)
        m = clip_model(TensorProto.FLOAT, shape, 13, lo, hi, bound_shape=(1,))
        harness.check_against_cpu(m, {"x": x, "lo": lo, "hi": hi})


def test_clip_nan_passes_through():
    x = np.array([np.nan, -3, 3, 0.1], np.float32)
    m = clip_model(TensorProto.FLOAT, x.shape, 13, -1, 1)
    got, _, _ = harness.check_against_cpu(m, {"x": x, "lo": np.array(-1, np.float32),
                                              "hi": np.array(1, np.float32)})
    assert np.isnan(got[0][0])


INF_ROW = np.array([np.inf, -np.inf, np.nan, 6e4, -3.0, 5.0], np.float32)


@pytest.mark.parametrize("lo,hi", [(None, None), (-1.0, None), (None, 1.0)], ids=str)
@pytest.mark.parametrize("opset", [6, 11, 13])
@pytest.mark.parametrize("dtype", [F32, F16, np.dtype(np.float64)], ids=str)
def test_clip_default_bounds_clamp_infinities(lo, hi, opset, dtype):
    """An absent min (max) is the type's lowest (highest) value from opset 11, and float32's
    range before (the attributes' defaults, which a float16 holds as inf): so +-inf is clamped to
    it, as the spec says and ORT does; the EP passed inf through (found by the fuzzer)."""
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        m = clip_model(oc.elem(dtype), INF_ROW.shape, opset, **attrs)
        feeds = {"x": INF_ROW.astype(dtype)}
        with np.errstate(over="ignore"):  # float32's largest value is inf as a float16
            bound = np.float32(np.finfo(np.float32).max).astype(dtype)
    else:
        m = clip_model(oc.elem(dtype), INF_ROW.shape, opset, lo, hi)
        feeds = {"x": INF_ROW.astype(dtype)}
        feeds.update({k: np.array(v, dtype) for k, v in (("lo", lo), ("hi", hi)) if v is not None})
        bound = np.finfo(dtype).max
    got = of.mlx_outputs(m, feeds)[0]
    want = np.clip(feeds["x"], -bound if lo is None else lo, bound if hi is None else hi)
    np.testing.assert_array_equal(got, want)
    # ORT has no float64 Clip-6 or Clip-11, and its float16 Clip-11 leaves inf unclamped
    # (Clip-12 on clamps it): there the spec is the reference (tools/fuzz/known.py says so)
    if dtype == F32 or (opset != 11 and dtype == F16) or (opset > 11 and dtype == np.float64):
        np.testing.assert_array_equal(got, harness.cpu_session(m).run(None, feeds)[0])


@pytest.mark.parametrize("lo,hi", [(-1.0, None), (None, 1.0)], ids=str)
def test_clip_default_bound_in_a_host_chain(lo, hi, monkeypatch):
    """Mul -> Add -> Clip over a large float32 tensor runs as one host kernel on the CPU device
    when the group is not compiled shapeless (its Clip step had +-inf for an absent bound); the
    run record names the Clip's path."""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_NO_SHAPELESS", "1")
    x = np.resize(INF_ROW, (64, 128)).copy()
    inits = [("two", np.array(2, np.float32)), ("one", np.array(1, np.float32))]
    names = ["a", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    inits += [(k, np.array(v, np.float32)) for k, v in (("lo", lo), ("hi", hi)) if v is not None]
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "one"], ["a"], name="add"),
             helper.make_node("Clip", [n for n in names if n] if hi is None else names, ["y"],
                              name="c")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, x.shape)],
                           [("y", TensorProto.FLOAT, None)], initializers=inits, opset=13)
    got, stats = harness.run_with_stats(m, {"x": x})
    want = harness.cpu_session(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got[0], want)
    assert np.isfinite(got[0][~np.isnan(got[0])]).all()
    paths = {k: v for g in stats["groups"] for k, v in g["node_paths"].items()}
    assert paths.get("c"), paths


def test_clip_vector_bound_declined(tmp_path):
    m = clip_model(TensorProto.FLOAT, (2, 3), 13, 0.0, None, bound_shape=(3,))
    oc.check_declined(m, None, "n", "must be a scalar", tmp_path)


# --- comparison, logic, bitwise ----------------------------------------------------------------
@pytest.mark.parametrize("op", ["LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("opset", [12, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_or_equal_comparisons(op, opset, dtype):
    a = harness.rand((3, 4), dtype, low=-2, high=2, seed=60)
    b = a[1:2].copy()
    oc.check(lambda e: binary(op, e, a, b, opset, TensorProto.BOOL), {"in0": a, "in1": b}, dtype)


@pytest.mark.parametrize("op", ["LessOrEqual", "GreaterOrEqual"])
def test_or_equal_comparisons_bfloat16(op):
    a = harness.rand((3, 4), seed=61)
    b = a[:, 1:2].copy()
    oc.check(lambda e: binary(op, e, a, b, 16, TensorProto.BOOL), {"in0": a, "in1": b}, BF16)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("b_shape", [(3, 4), (4,), (3, 1), ()], ids=str)
def test_logical(op, b_shape):
    a = harness.rand((3, 4), np.bool_, seed=62)
    b = np.asarray(harness.rand(b_shape, np.bool_, seed=63))
    oc.check(lambda e: binary(op, e, a, b, 7), {"in0": a, "in1": b}, np.bool_)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_binary(op, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(64)
    a = rng.integers(info.min, info.max, size=(3, 4), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(4,), dtype=dtype, endpoint=True)
    oc.check(lambda e: binary(op, e, a, b, 18), {"in0": a, "in1": b}, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_not(dtype):
    info = np.iinfo(dtype)
    a = np.random.default_rng(65).integers(info.min, info.max, size=(3, 4), dtype=dtype,
                                           endpoint=True)
    oc.check(lambda e: op_model("BitwiseNot", [e], [a.shape], e, 18), {"in0": a}, dtype)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_bitshift(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = np.random.default_rng(66).integers(0, np.iinfo(dtype).max, size=(3, 4), dtype=dtype)
    b = np.array([0, 1, 3, bits - 1], dtype)
    m = op_model("BitShift", [harness.onnx_type(dtype)] * 2, [a.shape, b.shape],
                 harness.onnx_type(dtype), 11, direction=direction)
    want = (a << b) if direction == "LEFT" else (a >> b)
    if dtype == np.uint16:  # no ORT CPU kernel
        oc.check_ref(m, {"in0": a, "in1": b}, [want.astype(dtype)])
    else:
        harness.check_against_cpu(m, {"in0": a, "in1": b})


def test_bitshift_bad_direction_declined(tmp_path):
    """ORT's CPU kernel rejects the node as well, so the session fails after the decline."""
    m = op_model("BitShift", [TensorProto.UINT8] * 2, [(3,), (3,)], TensorProto.UINT8, 11,
                 direction="UP")
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "Invalid direction")
    assert "direction 'UP'" in declined["n"]


# --- IsNaN IsInf ------------------------------------------------------------------------------
SPECIAL = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3.0, -0.0, np.inf], np.float32)


@pytest.mark.parametrize("opset", [9, 13, 20])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_isnan(opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 IsNaN arrives at opset 13")
    m = lambda e: op_model("IsNaN", [e], [SPECIAL.shape], TensorProto.BOOL, opset)
    oc.check(m, {"in0": SPECIAL}, dtype)


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1), (0, 0)])
@pytest.mark.parametrize("opset", [10, 20])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_isinf(pos, neg, opset, dtype):
    if dtype != F32 and opset < 20:
        pytest.skip("half-precision IsInf arrives at opset 20")
    m = lambda e: op_model("IsInf", [e], [SPECIAL.shape], TensorProto.BOOL, opset,
                           detect_positive=pos, detect_negative=neg)
    oc.check(m, {"in0": SPECIAL}, dtype)


# --- CastLike BitCast ------------------------------------------------------------------------
CAST_PAIRS = [(np.float32, np.int32), (np.float32, np.float16), (np.int64, np.float32),
              (np.float16, np.float32), (np.int32, np.bool_), (np.bool_, np.float32),
              (np.uint8, np.int64), (np.float32, np.uint8)]


@pytest.mark.parametrize("src,dst", CAST_PAIRS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("opset", [15, 21])
def test_castlike(src, dst, opset):
    x = harness.rand((3, 4), src, low=0 if np.dtype(dst).kind == "u" else -3, high=3, seed=70)
    like = np.zeros((2,), dst)
    m = op_model("CastLike", [harness.onnx_type(src), harness.onnx_type(dst)], [x.shape, (2,)],
                 harness.onnx_type(dst), opset)
    harness.check_against_cpu(m, {"in0": x, "in1": like})


def test_castlike_bfloat16_target():
    x = harness.rand((3, 4), seed=71)
    m = op_model("CastLike", [TensorProto.FLOAT, TensorProto.BFLOAT16], [x.shape, (1,)],
                 TensorProto.BFLOAT16, 19)
    like = np.zeros((1,), BF16)
    got, placed = oc.run_bf16_on_mlx(m, {"in0": x, "in1": like}, [x.shape])
    assert placed["n"] == harness.EP
    np.testing.assert_array_equal(got[0], x.astype(BF16))


BITCAST_PAIRS = [(np.float32, np.int32), (np.int32, np.float32), (np.float16, np.uint16),
                 (np.int64, np.uint64), (np.uint8, np.int8), (np.uint8, np.bool_)]


@pytest.mark.parametrize("src,dst", BITCAST_PAIRS, ids=lambda t: np.dtype(t).name)
def test_bitcast(src, dst):
    x = harness.rand((2, 3), src, low=-3, high=3, seed=72)
    if dst == np.bool_:
        x = (x % 2).astype(src)
    m = op_model("BitCast", [harness.onnx_type(src)], [x.shape], harness.onnx_type(dst), 26,
                 to=harness.onnx_type(dst))
    if dst == np.bool_:  # no ORT CPU kernel with a bool output
        oc.check_ref(m, {"in0": x}, [x.view(dst)])
    else:
        harness.check_against_cpu(m, {"in0": x})


# --- compiled --------------------------------------------------------------------------------
def test_compiled_shapeless_new_elementwise():
    """Mod, Clip, Max, Sum, Round, Sin, IsInf and a comparison fused in one shapeless function."""
    nodes = [helper.make_node("Mod", ["a", "b"], ["m"], name="mod", fmod=1),
             helper.make_node("Clip", ["m", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Max", ["c", "a", "b"], ["mx"], name="max"),
             helper.make_node("Sum", ["mx", "c"], ["s"], name="sum"),
             helper.make_node("Round", ["s"], ["r"], name="round"),
             helper.make_node("Sin", ["r"], ["y"], name="sin"),
             helper.make_node("IsInf", ["y"], ["inf"], name="isinf"),
             helper.make_node("GreaterOrEqual", ["y", "lo"], ["ge"], name="ge")]
    m = harness.make_model(nodes, [("a", TensorProto.FLOAT, ("N", "M")),
                                   ("b", TensorProto.FLOAT, ("M",))],
                           [("y", TensorProto.FLOAT, ("N", "M")), ("inf", TensorProto.BOOL, None),
                            ("ge", TensorProto.BOOL, None)],
                           initializers=[("lo", np.array(-1.0, np.float32)),
                                         ("hi", np.array(2.0, np.float32))], opset=22)

    def feeds(shape, seed):
        return {"a": harness.rand(shape, low=-5, high=5, seed=seed),
                "b": harness.rand(shape[1:], low=0.5, high=3, seed=seed + 1)}
    oc.check_compiled(m, [feeds((2, 3), 1), feeds((5, 4), 3)])


def _exp_grid():
    """Every region of float32 exp: subnormal and zero results, around 0, large, overflow,
    +-inf and NaN."""
    rng = np.random.default_rng(7)
    parts = [np.linspace(-110, 95, 20001), rng.uniform(-1e-3, 1e-3, 2000),
             rng.uniform(-88, 88, 20000), [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73,
                                           -87.33, -103.9, -104.5, 1e-30, -1e-30]]
    return np.concatenate([np.asarray(p, np.float64) for p in parts]).astype(np.float32)


@pytest.mark.cpu_device
@pytest.mark.parametrize("op,ref", [("Exp", np.exp), ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
                                    ("Erf", np.vectorize(math.erf, otypes=[np.float64]))])
def test_composed_exp_on_cpu_is_accurate(op, ref):
    """On the CPU device float32 Exp, Sigmoid and Erf in a group compiled keyed on shapes are composed
    from MLX arithmetic (src/cpu/fastmath.c, MLX's CPU exp being scalar code): within 2 ulps of
    float64 exp rounded to float32 over every region, inf/NaN/zero/subnormal results included,
    and the node notes its path. (A zero Pad makes the group shape-keyed.)"""
    x = _exp_grid()
    nodes = [helper.make_node(op, ["x"], ["e"], name="n"),
             helper.make_node("Pad", ["e", "pads"], ["y"], name="pad")]
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, [x.size])],
                               [("y", TensorProto.FLOAT, None)], opset=13,
                               initializers=[("pads", np.array([0, 0], np.int64))])
    got, record = harness.run_with_stats(model, {"x": x})
    got = got[0]
    # Erf and Sigmoid run as host kernels there (src/cpu/math.c: erf's own polynomial fits
    # and one exp; the sigmoid from e^-|x|); held to the same bound
    path = harness.host(op.lower()) if op in ("Erf", "Sigmoid") else ("composed", "fastmath", ())
    assert harness.node_path(record, "n") == path, record
    with np.errstate(over="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    # subnormal results: MLX's CPU threads may flush them to zero (MLX's own exp returns 0 for
    # them), so only the absolute error is bounded there
    tiny = np.abs(want) < np.finfo(np.float32).tiny
    np.testing.assert_allclose(got[fin & tiny], want[fin & tiny], rtol=0,
                               atol=np.finfo(np.float32).tiny)
    np.testing.assert_allclose(got[fin & ~tiny], want[fin & ~tiny], rtol=2.4e-7, atol=0)
