"""Activation rows (src/ops/activation.c): Relu, Sigmoid, Tanh, Gelu, LeakyRelu, PRelu, Elu, Selu,
Celu, HardSigmoid, HardSwish, Mish, Shrink, Softplus, Softsign, ThresholdedRelu, Swish, Softmax,
LogSoftmax and Hardmax, over dtypes, opset versions (rows split where semantics change) and
attributes, each proven to run on MLX and compared with ORT's CPU provider (numpy where ORT has no
kernel)."""
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


def test_sigmoid_float64_declined(tmp_path):
    """Relu is claimed in float64 (tests/ops/test_float64.py); Sigmoid, which MLX computes in
    float32 precision, is not."""
    x = X.astype(np.float64)
    m = unary_model("Sigmoid", TensorProto.DOUBLE, x.shape, 13)
    oc.check_declined(m, {"x": x}, "n", "is float64", tmp_path)


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
def test_compiled_shapeless_opset20_chain(monkeypatch):
    """All rows are shapeless: one compiled function serves two batch sizes. (Softmax is a host
    kernel on the CPU device, keyed on shapes there: switched off, to compile shapeless.)"""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_NO_HOST_MATH", "1")
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
                      [{"x": harness.rand((5, 3, 7), seed=3)}])


def test_compiled_shapeless_coerced_softmax(monkeypatch):
    """The 2-D coercion is a softmax over [axis, rank): no shape is baked into the trace. (Host
    kernels switched off, as above.)"""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_NO_HOST_MATH", "1")
    nodes = [helper.make_node("Softmax", ["x"], ["a"], name="softmax"),
             helper.make_node("LogSoftmax", ["a"], ["y"], name="logsoftmax", axis=2)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M", 4))],
                           [("y", TensorProto.FLOAT, ("N", "M", 4))], opset=11)
    oc.check_compiled(m, [{"x": harness.rand((2, 3, 4), seed=1)},
                          {"x": harness.rand((3, 6, 4), seed=2)}])


# --- parametrised pointwise activations ---------------------------------------------------------
# (op, opsets, attribute sets): the first opset of each row and the latest version.
POINTWISE = [
    ("LeakyRelu", [6, 16], [{}, {"alpha": 0.2}, {"alpha": -1.5}]),
    ("Elu", [6, 22], [{}, {"alpha": 0.5}]),
    ("Selu", [6, 22], [{}, {"alpha": 1.5, "gamma": 2.0}]),
    ("HardSigmoid", [6, 22], [{}, {"alpha": 0.3, "beta": 0.2}]),
    ("HardSwish", [14, 22], [{}]),
    ("Mish", [18, 22], [{}]),
    ("Softplus", [1, 22], [{}]),
    ("Softsign", [1, 22], [{}]),
    ("ThresholdedRelu", [10, 22], [{}, {"alpha": 0.5}, {"alpha": -1.0}]),
    ("Swish", [24], [{}, {"alpha": 0.5}]),
]
POINTWISE_CASES = [(op, opset, attrs) for op, opsets, attr_sets in POINTWISE
                   for opset in opsets for attrs in attr_sets]


def half_types_for(op, opset):
    """bfloat16 joins these ops at opset 22 (LeakyRelu at 16, Mish at 22, Swish at 24)."""
    bf16_from = {"LeakyRelu": 16, "Swish": 24}.get(op, 22)
    return FLOATS if opset >= bf16_from else [F32, F16]


XW = np.concatenate([harness.rand((22,), low=-6, high=6, seed=10),
                     np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -3.0, 30.0, -30.0, 1e-4],
                              np.float32)]).reshape(4, 8)


@pytest.mark.parametrize("op,opset,attrs", POINTWISE_CASES,
                         ids=[f"{o}-{v}-{a}" for o, v, a in POINTWISE_CASES])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pointwise_parametrised(op, opset, attrs, dtype):
    if dtype not in half_types_for(op, opset):
        pytest.skip(f"{op}-{opset} has no {dtype}")
    if dtype == F16 and opset < 6:
        pytest.skip("ORT's float16 fallback inserts an opset-6 Cast into an opset-1 model")
    # ORT's sigmoid is an approximation: Swish(-30, alpha 0.5) is -1.07e-5 there, -9.18e-6 exact.
    atol = 2e-5 if op == "Swish" and dtype == F32 else None
    oc.check(lambda e: unary_model(op, e, XW.shape, opset, **attrs), {"x": XW}, dtype, atol=atol)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5}, {"alpha": 2.0}], ids=str)
def test_celu(attrs):
    oc.check(lambda e: unary_model("Celu", e, XW.shape, 12, **attrs), {"x": XW}, F32)


def test_softplus_large_values_stable():
    x = np.array([-100.0, -20.0, 0.0, 20.0, 100.0, 88.0, 89.0], np.float32)
    got = oc.check(lambda e: unary_model("Softplus", e, x.shape, 1), {"x": x}, F32)
    assert np.isfinite(got[0]).all()


# --- PRelu ----------------------------------------------------------------------------------
def prelu_model(elem, x_shape, slope_shape, opset):
    node = helper.make_node("PRelu", ["x", "slope"], ["y"], name="n")
    return harness.make_model([node], [("x", elem, x_shape), ("slope", elem, slope_shape)],
                              [("y", elem, x_shape)], opset=opset)


@pytest.mark.parametrize("slope_shape", [(), (1,), (5,), (3, 1), (3, 5), (2, 3, 5), (1, 1, 1)],
                         ids=str)
@pytest.mark.parametrize("opset", [7, 9, 16])
def test_prelu_broadcast(slope_shape, opset):
    x = harness.rand((2, 3, 5), low=-3, high=3, seed=11)
    slope = harness.rand(slope_shape, low=-1, high=1, seed=12)
    oc.check(lambda e: prelu_model(e, x.shape, slope.shape, opset), {"x": x, "slope": slope},
             F32)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_prelu_dtypes(dtype):
    x = harness.rand((2, 3, 5), low=-3, high=3, seed=13)
    slope = harness.rand((3, 1), low=-1, high=1, seed=14)
    oc.check(lambda e: prelu_model(e, x.shape, slope.shape, 16), {"x": x, "slope": slope}, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_prelu_ints(dtype):
    x = harness.rand((3, 4), dtype, low=-3, high=3, seed=15)
    slope = np.array([2, 3, 1, 0], dtype)
    m = prelu_model(harness.onnx_type(dtype), x.shape, slope.shape, 16)
    if dtype == np.uint64:  # no ORT CPU kernel
        oc.check_ref(m, {"x": x, "slope": slope}, [x])
    else:
        harness.check_against_cpu(m, {"x": x, "slope": slope})


def test_prelu_slope_not_broadcastable_declined(tmp_path):
    """A slope of higher rank than X is not a unidirectional broadcast; ORT's CPU kernel
    refuses it at run time too, so only the decline is checked."""
    m = prelu_model(TensorProto.FLOAT, (3, 5), (2, 3, 5), 16)
    oc.check_declined(m, None, "n", "more than X's 2", tmp_path)


# --- Shrink -------------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs", [{}, {"lambd": 1.0, "bias": 0.5}, {"lambd": 0.0, "bias": 2.0}],
                         ids=str)
@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
def test_shrink_floats(attrs, dtype):
    oc.check(lambda e: unary_model("Shrink", e, XW.shape, 9, **attrs), {"x": XW}, dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_shrink_ints(dtype):
    """Integer Shrink computes in float and truncates: 5 - 1.5 == 3."""
    signed = np.dtype(dtype).kind == "i"
    x = np.array([-7, -3, -2, -1, 0, 1, 2, 3, 5, 9], np.int64)
    if not signed:
        x = x[x >= 3]  # results below zero are undefined for unsigned types
    x = x.astype(dtype)
    m = unary_model("Shrink", harness.onnx_type(dtype), x.shape, 9, lambd=2.0, bias=1.5)
    harness.check_against_cpu(m, {"x": x})


# --- Hardmax ------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1, -3])
def test_hardmax_axes(opset, axis):
    if opset == 1 and axis is not None and axis < 0:
        pytest.skip("negative axes arrive at opset 11")
    x = np.round(X4 * 0.5)  # many ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    oc.check(lambda e: unary_model("Hardmax", e, x.shape, opset, **attrs), {"x": x}, F32)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_hardmax_dtypes(opset, dtype):
    if dtype not in floats_for(opset):
        pytest.skip(f"Hardmax-{opset} has no {dtype}")
    x = np.round(X4 * 0.5)
    oc.check(lambda e: unary_model("Hardmax", e, x.shape, opset, axis=1), {"x": x}, dtype)


def test_hardmax_first_of_ties_and_nan():
    """A NaN after the first element is skipped (ORT's result for a leading NaN is all zeros,
    an artefact of its running max; not reproduced)."""
    x = np.array([[1, 3, 3, 2], [5, 5, 5, 5], [1, np.nan, 2, 2], [-np.inf, -np.inf, np.nan, -5]],
                 np.float32)
    got = oc.check(lambda e: unary_model("Hardmax", e, x.shape, 13), {"x": x}, F32)
    np.testing.assert_array_equal(got[0], [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0],
                                           [0, 0, 0, 1]])


def test_compiled_shapeless_new_activations():
    """LeakyRelu, PRelu, HardSwish, Mish, Shrink and a coerced Hardmax in one shapeless function."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="leaky", alpha=0.1),
             helper.make_node("PRelu", ["a", "slope"], ["b"], name="prelu"),
             helper.make_node("HardSwish", ["b"], ["c"], name="hswish"),
             helper.make_node("Mish", ["c"], ["d"], name="mish"),
             helper.make_node("Shrink", ["d"], ["e"], name="shrink", lambd=0.1),
             helper.make_node("Hardmax", ["e"], ["y"], name="hardmax", axis=1)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M", 3))],
                           [("y", TensorProto.FLOAT, ("N", "M", 3))],
                           initializers=[("slope", np.array([0.5, -0.5, 2.0], np.float32))],
                           opset=18)
    oc.check_compiled(m, [{"x": harness.rand((2, 4, 3), seed=1)},
                          {"x": harness.rand((3, 6, 3), seed=2)}])


def test_compiled_shapeless_coerced_hardmax():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Hardmax", ["a"], ["y"], name="hardmax", axis=1)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M", "K"))],
                           [("y", TensorProto.FLOAT, ("N", "M", "K"))], opset=11)
    oc.check_compiled(m, [{"x": np.round(harness.rand((2, 3, 4), seed=1))},
                          {"x": np.round(harness.rand((3, 5, 2), seed=2))}])


@pytest.mark.parametrize("shape", [[0, 3], [2, 0], [3, 0, 2]])
@pytest.mark.parametrize("op,attrs,opset", [("Softmax", {"axis": 1}, 13),
                                            ("LogSoftmax", {"axis": -1}, 13),
                                            ("Hardmax", {"axis": 0}, 13),
                                            ("Softmax", {}, 11),
                                            ("LpNormalization", {"axis": 0}, 13)])
def test_normalising_an_empty_tensor_gives_an_empty_tensor(op, attrs, opset, shape):
    """Found by the fuzzer: a tensor with a zero-size dim failed the run (MLX's max refuses to
    reduce an empty axis) where ORT's CPU provider answers with the empty tensor."""
    m = harness.make_model([helper.make_node(op, ["x"], ["y"], name="n", **attrs)],
                           [("x", TensorProto.FLOAT, shape)], [("y", TensorProto.FLOAT, None)],
                           opset=opset)
    harness.check_against_cpu(m, {"x": np.zeros(shape, np.float32)})
