"""Constant rows (src/ops/constant.c): Constant, ConstantOfShape and Range. ONNX Runtime turns
Constant nodes into initializers when it loads a model, so a Constant node never reaches the EP:
its tests prove each value attribute arrives intact and that the consumer runs on MLX.
ConstantOfShape and Range take their shape and scalars from graph inputs (all-constant nodes
would be folded by ORT itself), over every dtype they allow; integer Range is exact even where
float64 arithmetic is not."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)]
BOOL = np.dtype(np.bool_)
NP_ALL = [F32, F16] + INTS + [BOOL]
I64 = TensorProto.INT64


# --- Constant ---------------------------------------------------------------------------------
def constant_then_concat(elem, const_attrs, x_shape):
    """Constant -> Concat(x, c) on axis 0, so a graph input keeps the consumer from folding."""
    nodes = [helper.make_node("Constant", [], ["c"], name="const", **const_attrs),
             helper.make_node("Concat", ["x", "c"], ["y"], name="concat", axis=0)]
    return harness.make_model(nodes, [("x", elem, x_shape)], [("y", elem, None)])


def run_constant(model, feeds):
    """The Constant node is gone (an initializer now); every node left runs on MLX."""
    got, placed = harness.run_on_mlx(model, feeds)
    assert "const" not in placed and placed == {"concat": harness.EP}, placed
    ref = harness.cpu_session(model).run(None, feeds)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)
    return got


@pytest.mark.parametrize("dtype", NP_ALL, ids=str)
def test_constant_value_tensor(dtype):
    c = harness.rand((2, 3), dtype, seed=4)
    x = harness.rand((1, 3), dtype, seed=5)
    m = constant_then_concat(harness.onnx_type(dtype), {"value": numpy_helper.from_array(c)},
                             ["N", 3])
    got = run_constant(m, {"x": x})
    np.testing.assert_array_equal(got[0][1:], c)


@pytest.mark.parametrize("attr,value,elem", [
    ("value_float", 2.5, TensorProto.FLOAT),
    ("value_floats", [1.5, -2.0, 3.25], TensorProto.FLOAT),
    ("value_int", -7, I64),
    ("value_ints", [4, 5, -6], I64),
])
def test_constant_value_attributes(attr, value, elem):
    np_t = np.float32 if elem == TensorProto.FLOAT else np.int64
    want = np.array(value, np_t).reshape(-1)
    nodes = [helper.make_node("Constant", [], ["c"], name="const", **{attr: value})]
    if np.ndim(value) == 0:  # a scalar: lift it to 1-D for the Concat
        nodes.append(helper.make_node("Unsqueeze", ["c", "ax"], ["c1"], name="unsq"))
    nodes.append(helper.make_node("Concat", ["x", nodes[-1].output[0]], ["y"], name="concat",
                                  axis=0))
    m = harness.make_model(nodes, [("x", elem, ["N"])], [("y", elem, None)],
                           initializers=[("ax", np.array([0], np.int64))])
    x = np.array([9, 8], np_t)
    got, placed = harness.run_on_mlx(m, {"x": x})
    assert "const" not in placed and set(placed.values()) == {harness.EP}
    np.testing.assert_array_equal(got[0], np.concatenate([x, want]))


# --- ConstantOfShape --------------------------------------------------------------------------
def cos_model(value=None, opset=21, out_elem=TensorProto.FLOAT, shape_len="K"):
    attrs = {} if value is None else {"value": value}
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("s", I64, [shape_len])], [("y", out_elem, None)],
                              opset=opset)


@pytest.mark.parametrize("dtype", NP_ALL, ids=str)
def test_constant_of_shape_dtypes(dtype):
    v = harness.rand((1,), dtype, seed=6)
    m = cos_model(numpy_helper.from_array(v), out_elem=harness.onnx_type(dtype))
    got, _, _ = harness.check_against_cpu(m, {"s": np.array([2, 3], np.int64)})
    assert (got[0] == v[0]).all()


def test_constant_of_shape_bfloat16():
    v = helper.make_tensor("v", TensorProto.BFLOAT16, [1], [1.5])
    m = cos_model(v, out_elem=TensorProto.BFLOAT16)
    got, placed = oc.run_bf16_on_mlx(m, {"s": np.array([2, 2], np.int64)}, [(2, 2)])
    assert placed == {"n": harness.EP}
    np.testing.assert_array_equal(got[0].astype(np.float32), np.full((2, 2), 1.5, np.float32))


@pytest.mark.parametrize("opset", [9, 20, 21])
@pytest.mark.parametrize("shape", [[3], [2, 0, 4], [], [1, 1, 1, 5]], ids=str)
def test_constant_of_shape_default_value(opset, shape):
    m = cos_model(opset=opset)
    got, _, _ = harness.check_against_cpu(m, {"s": np.array(shape, np.int64)})
    assert got[0].dtype == np.float32 and got[0].shape == tuple(shape) and not got[0].any()


def test_constant_of_shape_from_computed_shape():
    """Shape(x) -> ConstantOfShape, the usual way of making a mask of x's size."""
    v = numpy_helper.from_array(np.array([7], np.int32))
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos", value=v)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", "M"])],
                           [("y", TensorProto.INT32, None)])
    for shape in [(2, 3), (4, 1)]:
        harness.check_against_cpu(m, {"x": harness.rand(shape)})


@pytest.mark.cpu_device
def test_constant_of_shape_float64_claimed_on_cpu():
    """A float64 value is claimed on the CPU device and filled bit-exactly."""
    m = cos_model(numpy_helper.from_array(np.array([0.1])), out_elem=TensorProto.DOUBLE)
    got, ref, _ = harness.check_against_cpu(m, {"s": np.array([2, 2], np.int64)})
    assert got[0].dtype == np.float64 and np.array_equal(got[0], ref[0])


def test_constant_of_shape_rank_over_16_declined(tmp_path):
    m = cos_model(shape_len=17)
    oc.check_declined(m, {"s": np.ones(17, np.int64)}, "n", "at most 16", tmp_path)


# --- Range ------------------------------------------------------------------------------------
def range_model(elem, opset=11):
    node = helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="n")
    return harness.make_model([node], [(k, elem, []) for k in ("start", "limit", "delta")],
                              [("y", elem, None)], opset=opset)


def scalars(dtype, start, limit, delta):
    return {k: np.array(v, dtype) for k, v in zip(("start", "limit", "delta"),
                                                   (start, limit, delta))}


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64], ids=str)
@pytest.mark.parametrize("start,limit,delta", [
    (3, 9, 3), (10, 4, -2), (0, 10, 1), (-5, 5, 3), (5, -6, -4), (4, 4, 1), (9, 3, 2),
    (0, 1, 100), (-7, -1, 2),
])
def test_range_ints(dtype, start, limit, delta):
    m = range_model(harness.onnx_type(dtype))
    got, _, _ = harness.check_against_cpu(m, scalars(dtype, start, limit, delta))
    np.testing.assert_array_equal(got[0], np.arange(start, limit, delta, dtype=dtype))


@pytest.mark.parametrize("start,limit,delta", [
    (2**53 + 1, 2**53 + 10, 3), (2**62, 2**62 - 7, -2), (-(2**63), -(2**63) + 5, 2),
])
def test_range_int64_exact(start, limit, delta):
    """Bounds past 2**53 that float64 rounds: the length and values are exact integers. (ORT's
    CPU kernel converts the bounds to double for the length and gets these wrong, so Python's
    range is the reference.)"""
    m = range_model(I64)
    got, placed = harness.run_on_mlx(m, scalars(np.int64, start, limit, delta))
    assert placed == {"n": harness.EP}
    assert got[0].dtype == np.int64 and got[0].tolist() == list(range(start, limit, delta))


def test_range_int16_extremes():
    m = range_model(TensorProto.INT16)
    harness.check_against_cpu(m, scalars(np.int16, -32768, 32767, 4096))


@pytest.mark.parametrize("start,limit,delta", [
    (0.0, 1.0, 0.25), (0.5, 3.7, 0.3), (3.0, -1.0, -0.5), (1.0, 1.0, 0.1), (0.1, 0.0, 0.1),
    (-2.5, 2.5, 1.0),
])
def test_range_float(start, limit, delta):
    m = range_model(TensorProto.FLOAT)
    harness.check_against_cpu(m, scalars(np.float32, start, limit, delta), rtol=1e-6, atol=1e-6)


def test_range_from_computed_limit():
    """Shape -> Gather -> Range(0, n, 1): position ids for a dynamic sequence length."""
    nodes = [helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Gather", ["sh", "one"], ["n"], name="gather", axis=0),
             helper.make_node("Range", ["zero", "n", "one"], ["y"], name="range")]
    inits = [("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["B", "S"])], [("y", I64, None)],
                           initializers=inits)
    for shape in [(2, 5), (1, 1), (3, 8)]:
        got, _, _ = harness.check_against_cpu(m, {"x": harness.rand(shape)})
        np.testing.assert_array_equal(got[0], np.arange(shape[1]))


def test_range_zero_delta_fails_naming_the_node():
    s = harness.mlx_session(range_model(I64))
    with pytest.raises(Exception, match="'n'.*delta"):
        s.run(None, scalars(np.int64, 0, 5, 0))
    np.testing.assert_array_equal(s.run(None, scalars(np.int64, 0, 5, 2))[0], [0, 2, 4])


@pytest.mark.parametrize("start,limit,delta", [(0.0, 2.0, 0.5), (0.1, 1000.0, 0.1),
                                               (1.0, -2.0, -0.3), (-0.0, 1.0, 0.25),
                                               (0.0, 1.0, -0.5), (1e16, 1e16 + 64, 3.0)])
@pytest.mark.cpu_device
def test_range_float64_claimed_on_cpu(start, limit, delta):
    """float64 ranges are claimed on the CPU device and match ORT bit for bit: its length comes
    from the float64 difference and its values from accumulating start += delta."""
    m = range_model(TensorProto.DOUBLE)
    got, ref, _ = harness.check_against_cpu(m, scalars(np.float64, start, limit, delta))
    assert got[0].dtype == np.float64 and got[0].shape == ref[0].shape
    assert np.array_equal(got[0].view(np.uint64), ref[0].view(np.uint64))
