"""Reduction rows (src/ops/reduce.c): ReduceSum, ReduceMean and ReduceMax with axes as an
attribute (older opsets) and as a constant-initializer input (ReduceSum 13, ReduceMean/Max 18+),
keepdims, noop_with_empty_axes, integer sums and truncating integer means, bool ReduceMax
(opset 20), and the declined forms (computed axes, ReduceMax over an empty axis)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS

SHAPE = (2, 3, 4)
# The opset where each op's axes move from an attribute to an input.
INPUT_FROM = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18}
OPS = list(INPUT_FROM)


def reduce_model(op, elem, opset, axes=None, shape=SHAPE, axes_const=True, **attrs):
    """axes None: not given. In input form the axes are an int64 initializer (axes_const) or a
    graph input."""
    inputs, inits, names = [("x", elem, shape)], [], ["x"]
    if opset >= INPUT_FROM[op]:
        if axes is not None:
            names.append("axes")
            if axes_const:
                inits.append(("axes", np.array(axes, np.int64)))
            else:
                inputs.append(("axes", TensorProto.INT64, (len(axes),)))
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits,
                              opset=opset)


def opsets(op):
    return [11, INPUT_FROM[op]] if op == "ReduceSum" else [13, INPUT_FROM[op]]


X = harness.rand(SHAPE, low=-3, high=3, seed=1)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("axes", [None, [0], [1], [-1], [0, 2], [2, 0], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_and_keepdims(op, form, axes, keepdims):
    opset = opsets(op)[form == "input"]
    oc.check(lambda e: reduce_model(op, e, opset, axes, keepdims=keepdims), {"x": X}, F32)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_dtypes(op, form, dtype):
    opset = opsets(op)[form == "input"]
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 ReduceSum arrives at opset 13, where axes are an input")
    x = harness.rand((4, 33, 5), seed=2)
    oc.check(lambda e: reduce_model(op, e, opset, [1], shape=x.shape), {"x": x}, dtype, scale=3)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_dtypes_stay_integral(op, form, dtype):
    opset = opsets(op)[form == "input"]
    x = harness.rand(SHAPE, dtype, seed=3)
    for axes in (None, [1], [0, 2]):
        got = oc.check(lambda e: reduce_model(op, e, opset, axes, keepdims=0), {"x": x}, dtype)
        assert got[0].dtype == dtype


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_mean_truncates_toward_zero(dtype):
    """-8 / 3 is -2 in ORT (C division), not numpy's floor -3."""
    x = np.array([[-7, -1, 0], [5, 2, 0], [-2, -2, -1], [7, 7, 7]], dtype)
    for opset in (13, 18):
        got = oc.check(lambda e: reduce_model("ReduceMean", e, opset, [1], shape=x.shape,
                                              keepdims=0), {"x": x}, dtype)
        np.testing.assert_array_equal(got[0], np.array([-2, 2, -1, 7], dtype))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_unsigned_without_ort_kernel(op, dtype):
    """ORT's CPU provider has no uint32/uint64 ReduceSum/ReduceMean; numpy is the reference."""
    x = harness.rand(SHAPE, dtype, seed=4)
    m = reduce_model(op, harness.onnx_type(dtype), INPUT_FROM[op], [1])
    want = x.sum(axis=1, keepdims=True, dtype=dtype)
    if op == "ReduceMean":
        want = want // dtype(SHAPE[1])
    oc.check_ref(m, {"x": x}, [want.astype(dtype)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("opset", [13, 18])
def test_max_small_ints(dtype, opset):
    x = harness.rand(SHAPE, dtype, seed=5)
    oc.check(lambda e: reduce_model("ReduceMax", e, opset, [-1]), {"x": x}, dtype)


def test_max_bool_opset20():
    x = harness.rand(SHAPE, np.bool_, seed=6)
    x[0] = False
    for axes in (None, [0], [2]):
        oc.check(lambda e: reduce_model("ReduceMax", e, 20, axes, keepdims=0), {"x": x}, np.bool_)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("empty_axes", [False, True], ids=["no-axes", "empty-axes"])
@pytest.mark.parametrize("noop", [0, 1])
def test_noop_with_empty_axes(op, empty_axes, noop):
    axes = [] if empty_axes else None
    got = oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], axes, noop_with_empty_axes=noop),
                   {"x": X}, F32)
    assert got[0].shape == (SHAPE if noop else (1, 1, 1))


@pytest.mark.parametrize("op", OPS)
def test_scalar_input(op):
    x = np.array(1.5, np.float32)
    oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], None, shape=()), {"x": x}, F32)


@pytest.mark.parametrize("op", OPS)
def test_computed_axes_declined(op, tmp_path):
    m = reduce_model(op, TensorProto.FLOAT, INPUT_FROM[op], [1], axes_const=False)
    oc.check_declined(m, {"x": X, "axes": np.array([1], np.int64)}, "n",
                      "must be a constant initializer", tmp_path)


def test_max_over_empty_axis_declined(tmp_path):
    x = np.zeros((2, 0, 3), np.float32)
    m = reduce_model("ReduceMax", TensorProto.FLOAT, 18, [1], shape=x.shape)
    oc.check_declined(m, {"x": x}, "n", "empty axis 1", tmp_path)


def test_sum_over_empty_axis_is_zero():
    x = np.zeros((2, 0, 3), np.float32)
    oc.check(lambda e: reduce_model("ReduceSum", e, 13, [1], shape=x.shape), {"x": x}, F32)


def test_reduce_chain_softmax_by_hand():
    """exp(x - max) / sum(exp(x - max)) built from the reduce rows, all in one MLX group."""
    axes = np.array([-1], np.int64)
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["m"], name="max"),
             helper.make_node("Sub", ["x", "m"], ["d"], name="sub"),
             helper.make_node("Exp", ["d"], ["e"], name="exp"),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], name="sum"),
             helper.make_node("Div", ["e", "s"], ["y"], name="div")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, SHAPE)],
                           [("y", TensorProto.FLOAT, SHAPE)], initializers=[("axes", axes)],
                           opset=18)
    harness.check_against_cpu(m, {"x": X})


def test_compiled_shapeless_int_mean_counts(capfd):
    """The integer mean's element count is computed in the graph, so a shapeless function traced
    on one shape divides correctly for another."""
    axes = np.array([1], np.int64)
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean", keepdims=0),
             helper.make_node("ReduceMax", ["x", "axes"], ["mx"], name="max", keepdims=0),
             helper.make_node("Add", ["m", "mx"], ["y"], name="add"),
             helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0)]
    m = harness.make_model(nodes, [("x", TensorProto.INT32, ("N", "M"))],
                           [("y", TensorProto.INT32, ("N",)), ("s", TensorProto.INT32, ())],
                           initializers=[("axes", axes)], opset=18)
    oc.check_compiled(m, [{"x": harness.rand((2, 3), np.int32, seed=1)},
                          {"x": harness.rand((4, 7), np.int32, seed=2)}], capfd)
