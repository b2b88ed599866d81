"""Activation rows (src/ops/activation.c): Relu, Sigmoid, Tanh, Gelu, Softmax, LogSoftmax, over
dtypes, opset versions (rows split where semantics change) and attributes, each proven to run on
MLX and compared with ORT's CPU provider (numpy where ORT has no kernel)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS


def unary_model(op, elem, shape, opset, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, shape)], [("y", elem, shape)], opset=opset)


def floats_for(opset):
    """bfloat16 joins these ops' type lists at opset 13."""
    return FLOATS if opset >= 13 else [F32, F16]


X = harness.rand((2, 3, 4), low=-4, high=4, seed=1)


# --- Relu, Sigmoid, Tanh --------------------------------------------------------------------
@pytest.mark.parametrize("opset", [6, 13, 14])
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pointwise_floats(op, opset, dtype):
    if dtype not in floats_for(opset):
        pytest.skip(f"{op}-{opset} has no {dtype}")
    oc.check(lambda e: unary_model(op, e, X.shape, opset), {"x": X}, dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_relu_ints_opset14(dtype):
    x = harness.rand((3, 5), dtype, seed=2)
    harness.check_against_cpu(unary_model("Relu", harness.onnx_type(dtype), x.shape, 14), {"x": x})


@pytest.mark.parametrize("dtype", [np.int16, np.int64])
def test_relu_ints_without_ort_kernel(dtype):
    """ORT's CPU provider has no int16/int64 Relu; numpy is the reference."""
    x = harness.rand((3, 5), dtype, seed=3)
    m = unary_model("Relu", harness.onnx_type(dtype), x.shape, 14)
    oc.check_ref(m, {"x": x}, [np.maximum(x, 0).astype(dtype)])


def test_relu_float64_declined(tmp_path):
    x = X.astype(np.float64)
    m = unary_model("Relu", TensorProto.DOUBLE, x.shape, 14)
    oc.check_declined(m, {"x": x}, "n", "MLX cannot hold", tmp_path)


# --- Gelu -------------------------------------------------------------------------------------
@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_gelu(approximate, dtype):
    attrs = {} if approximate is None else {"approximate": approximate}
    oc.check(lambda e: unary_model("Gelu", e, X.shape, 20, **attrs), {"x": X}, dtype,
             scale=2 if dtype != F32 else 1)


def test_gelu_unknown_approximation_declined(tmp_path):
    """The node goes to ORT's CPU provider, whose kernel rejects it at run time in turn."""
    m = unary_model("Gelu", TensorProto.FLOAT, X.shape, 20, approximate="erf")
    oc.check_declined(m, None, "n", "approximate='erf'", tmp_path)
    with pytest.raises(Exception, match="erf"):
        harness.cpu_session(m).run(None, {"x": X})


# --- Softmax, LogSoftmax ------------------------------------------------------------------------
X4 = harness.rand((2, 3, 4, 5), low=-5, high=5, seed=4)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1, -3])
def test_softmax_coerced_2d(op, opset, axis):
    """Opset < 13: flatten [0, axis) and [axis, rank), normalise over the second block."""
    if opset == 1 and axis is not None and axis < 0:
        pytest.skip("negative axes arrive at opset 11")
    attrs = {} if axis is None else {"axis": axis}
    oc.check(lambda e: unary_model(op, e, X4.shape, opset, **attrs), {"x": X4}, F32)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1, -2, -4])
def test_softmax_opset13_single_axis(op, axis):
    attrs = {} if axis is None else {"axis": axis}
    oc.check(lambda e: unary_model(op, e, X4.shape, 13, **attrs), {"x": X4}, F32)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_dtypes(op, opset, dtype):
    if dtype not in floats_for(opset):
        pytest.skip(f"{op}-{opset} has no {dtype}")
    oc.check(lambda e: unary_model(op, e, X4.shape, opset, axis=2), {"x": X4}, dtype,
             scale=2 if op == "LogSoftmax" and dtype != F32 else 1)


def test_softmax_differs_between_rows():
    """The same axis means different things at opset 11 and 13; both rows must match CPU and
    must disagree with each other."""
    a = oc.check(lambda e: unary_model("Softmax", e, X4.shape, 11, axis=1), {"x": X4}, F32)[0]
    b = oc.check(lambda e: unary_model("Softmax", e, X4.shape, 13, axis=1), {"x": X4}, F32)[0]
    np.testing.assert_allclose(a.sum(axis=(1, 2, 3)), 1, rtol=1e-5)
    np.testing.assert_allclose(b.sum(axis=1), 1, rtol=1e-5)
    assert not np.allclose(a, b)


def test_softmax_large_values_stable():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]], np.float32)
    for op in ("Softmax", "LogSoftmax"):
        oc.check(lambda e: unary_model(op, e, x.shape, 13), {"x": x}, F32)


def test_softmax_in_a_chain():
    """Several activation nodes fused into one MLX group."""
    nodes = [helper.make_node("Gelu", ["x"], ["a"], name="g"),
             helper.make_node("Tanh", ["a"], ["b"], name="t"),
             helper.make_node("Relu", ["b"], ["c"], name="r"),
             helper.make_node("LogSoftmax", ["c"], ["y"], name="s", axis=-1)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, X4.shape)],
                           [("y", TensorProto.FLOAT, X4.shape)], opset=20)
    harness.check_against_cpu(m, {"x": X4})


# --- compiled groups ----------------------------------------------------------------------------
def test_compiled_shapeless_opset20_chain(capfd):
    """All rows are shapeless: one compiled function serves two batch sizes."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
             helper.make_node("Tanh", ["x"], ["c"], name="tanh"),
             helper.make_node("Add", ["b", "c"], ["d"], name="add"),
             helper.make_node("Gelu", ["d"], ["e"], name="gelu", approximate="tanh"),
             helper.make_node("Softmax", ["e"], ["f"], name="softmax", axis=1),
             helper.make_node("LogSoftmax", ["f"], ["y"], name="logsoftmax")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 3, "W"))],
                           [("y", TensorProto.FLOAT, ("N", 3, "W"))], opset=20)
    oc.check_compiled(m, [{"x": harness.rand((2, 3, 4), seed=s)} for s in (1, 2)] +
                      [{"x": harness.rand((5, 3, 7), seed=3)}], capfd)


def test_compiled_shapeless_coerced_softmax(capfd):
    """The 2-D coercion is a softmax over [axis, rank): no shape is baked into the trace."""
    nodes = [helper.make_node("Softmax", ["x"], ["a"], name="softmax"),
             helper.make_node("LogSoftmax", ["a"], ["y"], name="logsoftmax", axis=2)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M", 4))],
                           [("y", TensorProto.FLOAT, ("N", "M", 4))], opset=11)
    oc.check_compiled(m, [{"x": harness.rand((2, 3, 4), seed=1)},
                          {"x": harness.rand((3, 6, 4), seed=2)}], capfd)
