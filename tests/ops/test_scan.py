"""Index-returning reductions, scans and selection (src/ops/reduce.c): ArgMax/ArgMin (keepdims,
select_last_index, the first extreme among ties), CumSum and CumProd (exclusive, reverse, the axis
input constant or computed) and TopK (k as an attribute, a constant or a computed input; largest
or smallest; ties keep the lower index first, as ONNX Runtime), over dtypes and opset versions.
Every node is proven to run on MLX and compared with ORT's CPU provider (numpy where ORT has no
kernel)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
import ops_failures as of
from ops_common import BF16, F16, F32, FLOATS

SHAPE = (3, 4, 5)
TIES = np.round(harness.rand(SHAPE, low=-2, high=2, seed=1))  # many ties


def arg_model(op, elem, shape, opset, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, shape)], [("y", TensorProto.INT64, None)],
                              opset=opset)


def np_arg(op, x, axis, keepdims, last):
    f = np.argmax if op == "ArgMax" else np.argmin
    if last:
        r = x.shape[axis] - 1 - f(np.flip(x, axis), axis=axis)
    else:
        r = f(x, axis=axis)
    return np.expand_dims(r, axis) if keepdims else r


# --- ArgMax ArgMin --------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset", [1, 11, 12, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_axes_keepdims(op, opset, axis, keepdims):
    if opset == 1 and axis is not None and axis < 0:
        pytest.skip("negative axes arrive at opset 11")
    attrs = {"keepdims": keepdims} if axis is None else {"axis": axis, "keepdims": keepdims}
    got = oc.check(lambda e: arg_model(op, e, SHAPE, opset, **attrs), {"x": TIES}, F32)
    np.testing.assert_array_equal(got[0], np_arg(op, TIES, axis or 0, keepdims, False))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_select_last_index(op, axis, keepdims):
    for last in (0, 1):
        got = oc.check(lambda e: arg_model(op, e, SHAPE, 13, axis=axis, keepdims=keepdims,
                                           select_last_index=last), {"x": TIES}, F32)
        np.testing.assert_array_equal(got[0], np_arg(op, TIES, axis, keepdims, last))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", FLOATS + [np.int8, np.int16, np.int32, np.int64, np.uint8,
                                            np.uint16, np.uint32, np.uint64], ids=str)
@pytest.mark.parametrize("last", [0, 1])
def test_arg_dtypes(op, dtype, last):
    dtype = np.dtype(dtype)
    x = TIES if dtype.kind == "f" or dtype == BF16 else harness.rand(SHAPE, dtype, seed=2)
    m = lambda e: arg_model(op, e, SHAPE, 13, axis=1, select_last_index=last)
    if dtype in (F32, F16, BF16, np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8),
                 np.dtype(np.int64)):
        oc.check(m, {"x": x}, dtype)
    else:  # no ORT CPU kernel
        oc.check_ref(m(harness.onnx_type(dtype)), {"x": x}, [np_arg(op, x, 1, 1, last)])


def test_arg_long_rows_keep_the_first_extreme():
    x = np.zeros((2, 5000), np.float32)
    x[0, [17, 2000, 4999]] = 1.0
    x[1, [3, 4000]] = -1.0
    for op, last in (("ArgMax", 0), ("ArgMax", 1), ("ArgMin", 0), ("ArgMin", 1)):
        got = oc.check(lambda e: arg_model(op, e, x.shape, 13, axis=1, keepdims=0,
                                           select_last_index=last), {"x": x}, F32)
        np.testing.assert_array_equal(got[0], np_arg(op, x, 1, 0, last))


NAN_ROWS = np.array([[np.nan, 1, 2, 0], [1, np.nan, 2, 0], [1, 2, np.nan, 0],
                     [np.nan, np.nan, 1, 0], [np.nan] * 4, [1, np.nan, 3, np.nan],
                     [3, 1, 3, 1], [-np.inf, np.nan, np.inf, np.nan], [0, 2, 2, np.nan],
                     [-np.inf, np.nan, -np.inf, np.nan], [np.inf, np.nan, np.inf, 5]], np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [1, 0])
def test_arg_nan_slices_match_cpu(op, last, keepdims, axis):
    """ORT scans from a slice's first element and moves on a strictly better value (or an equal
    one, for the last index): a NaN is skipped unless it comes first (index 0). MLX propagates
    NaN; the last-index form gave -1, which a Gather after it silently wrapped."""
    x = NAN_ROWS if axis == 1 else NAN_ROWS.T.copy()
    m = arg_model(op, TensorProto.FLOAT, x.shape, 13, axis=axis, keepdims=keepdims,
                  select_last_index=last)
    got = of.mlx_outputs(m, {"x": x})[0]
    want = harness.cpu_session(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).all()


@pytest.mark.parametrize("dtype", [F32, F16, np.dtype(np.float64)], ids=str)
def test_arg_nan_and_infinities_random_rows_match_cpu(dtype):
    """Random 37-wide rows of NaN, +-inf and small values, every form, against ORT."""
    vals = np.array([np.nan, -np.inf, np.inf, 0, 1, 2], np.float32)
    x = vals[np.random.default_rng(0).integers(0, len(vals), size=(60, 37))].astype(dtype)
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            m = arg_model(op, oc.elem(dtype), x.shape, 13, axis=-1, select_last_index=last)
            got = of.mlx_outputs(m, {"x": x})[0]
            np.testing.assert_array_equal(got, harness.cpu_session(m).run(None, {"x": x})[0],
                                          err_msg=f"{op} select_last_index={last}")


def test_arg_nan_then_gather_stays_in_range():
    """The fuzzer's chain: ArgMax (select_last_index=1) of a slice with NaN feeding a Gather."""
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], name="arg", axis=1, keepdims=0,
                              select_last_index=1),
             helper.make_node("Gather", ["t", "i"], ["y"], name="gather", axis=0)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, [3, 4]),
                                   ("t", TensorProto.FLOAT, [4])],
                           [("y", TensorProto.FLOAT, None)], opset=13)
    feeds = {"x": np.array([[1, np.nan, 2, 0], [np.nan] * 4, [5, 5, np.nan, 1]], np.float32),
             "t": np.array([10, 11, 12, 13], np.float32)}
    np.testing.assert_array_equal(of.mlx_outputs(m, feeds)[0], [12, 10, 11])
    np.testing.assert_array_equal(harness.cpu_session(m).run(None, feeds)[0], [12, 10, 11])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis", [((2, 0, 3), 0), ((2, 0, 3), 2), ((0, 3), 1),
                                        ((0, 0), 0), ((1, 0, 1), 2)])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_over_empty_tensor_is_empty(op, shape, axis, keepdims, last):
    """A zero-size dim other than the reduced axis leaves no element in the output: the answer
    is that empty int64 tensor (MLX's argmax refused to reduce an empty array; the fuzzer found
    it). The input's dims are left unknown, so the claim cannot see them; ORT's CPU provider
    agrees (with these non-negative axes)."""
    m = arg_model(op, TensorProto.FLOAT, [None] * len(shape), 13, axis=axis, keepdims=keepdims,
                  select_last_index=last)
    x = np.zeros(shape, np.float32)
    got = of.mlx_outputs(m, {"x": x})[0]
    want = harness.cpu_session(m).run(None, {"x": x})[0]
    spec = tuple(1 if i == axis else d for i, d in enumerate(shape) if keepdims or i != axis)
    assert got.dtype == np.int64 and got.shape == want.shape == spec and got.size == 0


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_over_empty_axis_with_elements_left_fails_naming_the_node(op):
    """Reducing an empty axis while the output keeps elements: each would be an index into
    nothing. ORT's CPU provider rejects it; so does the EP, naming the node, and the session
    goes on."""
    m = arg_model(op, TensorProto.FLOAT, [None, None], 13, axis=0, keepdims=0)
    of.rejects_then_runs(m, {"x": np.zeros((0, 3), np.float32)}, {"x": TIES[0]})


def test_arg_negative_axis_before_opset11_declined(tmp_path):
    m = arg_model("ArgMax", TensorProto.FLOAT, SHAPE, 1, axis=-1)
    oc.check_declined(m, None, "n", "negative axes arrive at opset 11", tmp_path)


def test_arg_empty_axis_declined(tmp_path):
    m = arg_model("ArgMin", TensorProto.FLOAT, (2, 0), 13, axis=1)
    oc.check_declined(m, None, "n", "empty axis 1", tmp_path)


# --- CumSum CumProd -----------------------------------------------------------------------------
def cum_model(op, elem, shape, opset, axis, axis_const=True, axis_elem=TensorProto.INT64,
              **attrs):
    inputs, inits = [("x", elem, shape)], []
    axis_dtype = np.int64 if axis_elem == TensorProto.INT64 else np.int32
    if axis_const:
        inits.append(("axis", np.array(axis, axis_dtype)))
    else:
        inputs.append(("axis", axis_elem, ()))
    node = helper.make_node(op, ["x", "axis"], ["y"], name="n", **attrs)
    return harness.make_model([node], inputs, [("y", elem, shape)], initializers=inits,
                              opset=opset)


CUM = [("CumSum", 11), ("CumSum", 14), ("CumProd", 26)]


@pytest.mark.parametrize("op,opset", CUM, ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cum_attributes(op, opset, axis, exclusive, reverse):
    x = harness.rand(SHAPE, low=0.5, high=1.5, seed=3)
    oc.check(lambda e: cum_model(op, e, SHAPE, opset, axis, exclusive=exclusive,
                                 reverse=reverse), {"x": x}, F32)


@pytest.mark.parametrize("op,opset", [("CumSum", 14), ("CumProd", 26)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cum_floats(op, opset, dtype):
    x = harness.rand(SHAPE, low=0.8, high=1.2, seed=4)
    oc.check(lambda e: cum_model(op, e, SHAPE, opset, 2, exclusive=1), {"x": x}, dtype, scale=2)


@pytest.mark.parametrize("op,opset", CUM, ids=str)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_cum_ints(op, opset, dtype):
    x = harness.rand(SHAPE, dtype, low=1, high=2, seed=5)
    m = cum_model(op, harness.onnx_type(dtype), SHAPE, opset, 1, reverse=1)
    if np.dtype(dtype).kind == "u":  # no ORT CPU kernel
        f = np.cumsum if op == "CumSum" else np.cumprod
        want = np.flip(f(np.flip(x, 1), axis=1, dtype=dtype), 1)
        oc.check_ref(m, {"x": x}, [want])
    else:
        harness.check_against_cpu(m, {"x": x})


def test_cumsum_int32_axis_and_rank1():
    x = harness.rand((7,), seed=6)
    m = cum_model("CumSum", TensorProto.FLOAT, x.shape, 14, 0, axis_elem=TensorProto.INT32)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_computed_axis(axis):
    """An axis fed at run time is read on the host when the node runs."""
    x = harness.rand(SHAPE, seed=7)
    m = cum_model("CumSum", TensorProto.FLOAT, SHAPE, 14, axis, axis_const=False)
    harness.check_against_cpu(m, {"x": x, "axis": np.array(axis, np.int64)})


def test_cumsum_axis_out_of_range_declined(tmp_path):
    m = cum_model("CumSum", TensorProto.FLOAT, SHAPE, 14, 3)
    oc.check_declined(m, None, "n", "axis 3 is out of range", tmp_path)


def test_compiled_shapeless_cumsum_argmax():
    nodes = [helper.make_node("CumSum", ["x", "axis"], ["c"], name="cumsum", exclusive=1),
             helper.make_node("ArgMax", ["c"], ["i"], name="argmax", axis=1,
                              select_last_index=1),
             helper.make_node("ArgMin", ["x"], ["j"], name="argmin", axis=-1, keepdims=0)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M"))],
                           [("i", TensorProto.INT64, None), ("j", TensorProto.INT64, None)],
                           initializers=[("axis", np.array(1, np.int64))], opset=14)
    oc.check_compiled(m, [{"x": np.round(harness.rand((2, 3), seed=1))},
                          {"x": np.round(harness.rand((5, 7), seed=2))}])


# --- TopK -----------------------------------------------------------------------------------------
def topk_model(elem, shape, opset, k, k_const=True, **attrs):
    inputs, inits, names = [("x", elem, shape)], [], ["x"]
    if opset < 10:
        attrs["k"] = k
    else:
        names.append("k")
        if k_const:
            inits.append(("k", np.array([k], np.int64)))
        else:
            inputs.append(("k", TensorProto.INT64, (1,)))
    node = helper.make_node("TopK", names, ["values", "indices"], name="n", **attrs)
    return harness.make_model([node], inputs, [("values", elem, None),
                                               ("indices", TensorProto.INT64, None)],
                              initializers=inits, opset=opset)


def np_topk(x, k, axis=-1, largest=True):
    key = (-x if x.dtype.kind == "f" else ~x) if largest else x  # ~x: no overflow at the minimum
    idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx.astype(np.int64)


@pytest.mark.parametrize("opset", [1, 10, 11, 24])
@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_topk_largest(opset, k, axis):
    attrs = {} if axis is None else {"axis": axis if axis >= 0 or opset >= 11 else 2}
    dim = SHAPE[attrs.get("axis", -1)]
    if opset == 1 and k == 0:
        pytest.skip("ONNX's shape inference rejects k=0 in TopK-1")
    k = min(k, dim)
    got = oc.check(lambda e: topk_model(e, SHAPE, opset, k, **attrs), {"x": TIES}, F32)
    want = np_topk(TIES, k, attrs.get("axis", -1))
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, 2, -2])
def test_topk_smallest_and_ties(largest, axis):
    got = oc.check(lambda e: topk_model(e, SHAPE, 11, 2, axis=axis, largest=largest),
                   {"x": TIES}, F32)
    np.testing.assert_array_equal(got[1], np_topk(TIES, 2, axis, bool(largest))[1])


def test_topk_unsorted_returns_the_same_set():
    """sorted=0 leaves the order to the implementation; we return sorted order."""
    x = harness.rand((4, 9), seed=8)
    m = topk_model(TensorProto.FLOAT, x.shape, 11, 4, sorted=0)
    got, _ = harness.run_on_mlx(m, {"x": x})
    ref = harness.cpu_session(m).run(None, {"x": x})
    np.testing.assert_array_equal(np.sort(got[1], axis=1), np.sort(ref[1], axis=1))
    np.testing.assert_array_equal(got[1], np_topk(x, 4)[1])


@pytest.mark.parametrize("dtype", FLOATS + [np.int8, np.int16, np.int32, np.int64, np.uint8,
                                            np.uint16, np.uint32, np.uint64], ids=str)
@pytest.mark.parametrize("largest", [0, 1])
def test_topk_dtypes(dtype, largest):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = np.random.default_rng(9).integers(info.min, info.max, size=(3, 8), dtype=dtype,
                                              endpoint=True)
        x[:, :3] = x[:, 3:6]  # ties
        x[0, 0], x[1, 0] = info.min, info.max
    else:
        x = np.round(harness.rand((3, 8), seed=9) * 2)
    opset = 24 if dtype == BF16 else 11
    m = lambda e: topk_model(e, x.shape, opset, 3, largest=largest)
    if dtype.kind == "f" or dtype == BF16 or dtype in (np.dtype(np.int32), np.dtype(np.int64)):
        oc.check(m, {"x": x}, dtype)
    else:  # no ORT CPU kernel
        oc.check_ref(m(harness.onnx_type(dtype)), {"x": x}, list(np_topk(x, 3, -1, largest)))


def test_topk_computed_k():
    x = harness.rand((3, 9), seed=10)
    m = topk_model(TensorProto.FLOAT, x.shape, 11, 0, k_const=False)
    for k in (1, 4, 9):
        harness.check_against_cpu(m, {"x": x, "k": np.array([k], np.int64)})


def test_topk_computed_k_too_large_fails_at_run_time():
    """(A constant k beyond the axis is rejected by ONNX's shape inference before partitioning.)"""
    x = harness.rand((3, 4), seed=11)
    m = topk_model(TensorProto.FLOAT, x.shape, 11, 0, k_const=False)
    with pytest.raises(Exception, match="k = 5 is out of range"):
        harness.mlx_session(m).run(None, {"x": x, "k": np.array([5], np.int64)})


def test_compiled_keyed_topk():
    """TopK slices k with the concrete shape: the group compiles per input shape."""
    nodes = [helper.make_node("Neg", ["x"], ["nx"], name="neg"),
             helper.make_node("TopK", ["nx", "k"], ["v", "i"], name="topk", largest=0),
             helper.make_node("Relu", ["v"], ["y"], name="relu")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M"))],
                           [("y", TensorProto.FLOAT, None), ("i", TensorProto.INT64, None)],
                           initializers=[("k", np.array([2], np.int64))], opset=11)
    oc.check_compiled(m, [{"x": harness.rand((2, 5), seed=1)},
                          {"x": harness.rand((4, 3), seed=2)}], path="keyed")
