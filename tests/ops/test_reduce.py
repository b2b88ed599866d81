"""Reduction rows (src/ops/reduce.c): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare with axes as an attribute
(older opsets) and as an input (ReduceSum 13, the others 18+; constant or computed, the latter read
on the host), keepdims, noop_with_empty_axes (which still applies the elementwise part), integer
forms with ONNX Runtime's arithmetic (truncating means, floor-sqrt L2, truncated logs), bool
ReduceMax/ReduceMin (opset 20), reductions over empty sets (ORT's identity values, eager and in a
shapeless compiled function) and the declined forms."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS

SHAPE = (2, 3, 4)
# The opset where each op's axes move from an attribute to an input.
INPUT_FROM = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
              "ReduceProd": 18, "ReduceL1": 18, "ReduceL2": 18, "ReduceLogSum": 18,
              "ReduceLogSumExp": 18, "ReduceSumSquare": 18}
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


def data_for(op, x):
    """Inputs in each op's comfortable range: positive for ReduceLogSum, near 1 for ReduceProd
    (long products of half-precision values otherwise overflow or vanish)."""
    if op == "ReduceLogSum":
        return np.abs(x) + x.dtype.type(0.1)
    if op == "ReduceProd":
        return (x * x.dtype.type(0.1) + x.dtype.type(1)).astype(x.dtype)
    return x


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("axes", [None, [0], [1], [-1], [0, 2], [2, 0], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_and_keepdims(op, form, axes, keepdims):
    opset = opsets(op)[form == "input"]
    oc.check(lambda e: reduce_model(op, e, opset, axes, keepdims=keepdims),
             {"x": data_for(op, X)}, F32)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_dtypes(op, form, dtype):
    opset = opsets(op)[form == "input"]
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 ReduceSum arrives at opset 13, where axes are an input")
    x = data_for(op, harness.rand((4, 33, 5), seed=2))
    oc.check(lambda e: reduce_model(op, e, opset, [1], shape=x.shape), {"x": x}, dtype, scale=3)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["attr", "input"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_dtypes_stay_integral(op, form, dtype):
    opset = opsets(op)[form == "input"]
    x = data_for(op, harness.rand(SHAPE, dtype, seed=3))
    if op == "ReduceProd":
        x = harness.rand(SHAPE, dtype, low=-1, high=1, seed=3)
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


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("opset", [13, 18])
def test_max_min_small_ints(op, dtype, opset):
    x = harness.rand(SHAPE, dtype, seed=5)
    oc.check(lambda e: reduce_model(op, e, opset, [-1]), {"x": x}, dtype)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_max_min_bool_opset20(op):
    x = harness.rand(SHAPE, np.bool_, seed=6)
    x[0] = op == "ReduceMin"
    for axes in (None, [0], [2]):
        oc.check(lambda e: reduce_model(op, e, 20, axes, keepdims=0), {"x": x}, np.bool_)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("empty_axes", [False, True], ids=["no-axes", "empty-axes"])
@pytest.mark.parametrize("noop", [0, 1])
def test_noop_with_empty_axes(op, empty_axes, noop):
    """noop reduces over no axis; the elementwise part (square, |x|, log) still applies."""
    axes = [] if empty_axes else None
    got = oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], axes, noop_with_empty_axes=noop),
                   {"x": data_for(op, X)}, F32)
    assert got[0].shape == (SHAPE if noop else (1, 1, 1))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_noop_ints(op, dtype):
    x = data_for(op, harness.rand(SHAPE, dtype, seed=7))
    if op == "ReduceLogSum":
        x = x + dtype(1)
    oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], [], noop_with_empty_axes=1),
             {"x": x}, dtype)


@pytest.mark.parametrize("op", OPS)
def test_scalar_input(op):
    x = np.array(1.5, np.float32)
    oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], None, shape=()), {"x": x}, F32)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [[1], [-1, 0], []], ids=str)
def test_computed_axes_read_on_host(op, axes):
    """An axes input computed in the graph (here: a graph input) is claimed and read on the
    host when the node runs; an empty one means every axis."""
    m = reduce_model(op, TensorProto.FLOAT, INPUT_FROM[op], axes, axes_const=False)
    feeds = {"x": data_for(op, X), "axes": np.array(axes, np.int64)}
    got, _, _ = harness.check_against_cpu(m, feeds)
    if not axes:
        assert got[0].shape == (1, 1, 1)


def test_computed_axes_fall_back_to_eager():
    """A computed axes input needs a host read, which a compiled trace cannot do: the group runs
    eagerly after one fallback, and stays right for other axes and shapes."""
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("ReduceL2", ["a", "axes"], ["y"], name="l2", keepdims=0)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 3, 4)),
                                   ("axes", TensorProto.INT64, ("K",))],
                           [("y", TensorProto.FLOAT, None)], opset=18)
    rec = harness.Recorded(m)
    cpu = harness.cpu_session(m)
    for shape, axes in (((2, 3, 4), [1]), ((5, 3, 4), [0, 2]), ((1, 3, 4), [-1])):
        feeds = {"x": harness.rand(shape, seed=len(axes)), "axes": np.array(axes, np.int64)}
        np.testing.assert_allclose(rec.session.run(None, feeds)[0], cpu.run(None, feeds)[0],
                                   rtol=1e-5)
    group = rec.close()["groups"][0]
    assert (group["compiled_runs"], group["eager_runs"], group["fallbacks"]) == (0, 3, 1), group


def test_computed_axes_out_of_range_fails_at_run_time():
    m = reduce_model("ReduceSum", TensorProto.FLOAT, 13, [0], axes_const=False)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="out of range"):
        s.run(None, {"x": X, "axes": np.array([3], np.int64)})


# --- empty sets -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([1], 0), (None, 0), ([0, 1], 1)], ids=str)
def test_empty_set_identities(op, dtype, axes, keepdims):
    """ORT's values for a reduction over nothing: 0, 1 (Prod), -inf or the lowest integer (Max,
    LogSum, LogSumExp), +inf or the highest (Min)."""
    x = np.zeros((2, 0, 3), dtype)
    oc.check(lambda e: reduce_model(op, e, INPUT_FROM[op], axes, shape=x.shape,
                                    keepdims=keepdims), {"x": x}, dtype)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, BF16], ids=str)
def test_empty_max_min_small_types(op, dtype):
    x = np.zeros((0, 3), np.float32 if dtype == BF16 else dtype)
    oc.check(lambda e: reduce_model(op, e, 18, [0], shape=x.shape), {"x": x}, dtype)


def test_empty_set_in_shapeless_function():
    """One shapeless function traced on a non-empty input, then run on an empty axis (and the
    other way round in a second session): the identities hold both ways. Calls with an empty
    input run eagerly (MLX's shapeless replay mis-broadcasts empty dims), so ReduceLogSumExp,
    whose x - max(x) broadcasts the empty axis, is safe here too."""
    axes = np.array([1], np.int64)
    ops = ["ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL2", "ReduceLogSum",
           "ReduceLogSumExp"]
    nodes = [helper.make_node("Neg", ["x"], ["nx"], name="neg")]
    nodes += [helper.make_node(op, ["nx", "axes"], [f"y{i}"], name=op, keepdims=0)
              for i, op in enumerate(ops)]
    outs = [(f"y{i}", TensorProto.FLOAT, ("N",)) for i in range(len(ops))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M"))], outs,
                           initializers=[("axes", axes)], opset=18)
    full = {"x": harness.rand((3, 4), seed=8)}
    empty = {"x": np.zeros((3, 0), np.float32)}
    oc.check_compiled(m, [full, empty, full])
    oc.check_compiled(m, [empty, full])


# --- integer arithmetic as ORT does it ---------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_log_sum_exp_matches_ort(dtype):
    """ORT truncates each exp term into the integer accumulator: trunc(max + log(#maxima))."""
    rng = np.random.default_rng(9)
    for trial in range(6):
        x = rng.integers(-4, 4, size=(4, 5, 6)).astype(dtype)
        axes = [None, [0], [1], [2], [0, 2], [1, 2]][trial]
        oc.check(lambda e: reduce_model("ReduceLogSumExp", e, 18, axes, shape=x.shape,
                                        keepdims=trial % 2), {"x": x}, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_log_sum_truncates(dtype):
    x = np.array([[1, 1, 0], [3, 4, 0], [10, 10, 1], [-5, 1, 1], [0, 0, 0], [100, 300, 3]], dtype)
    got = oc.check(lambda e: reduce_model("ReduceLogSum", e, 18, [1], shape=x.shape, keepdims=0),
                   {"x": x}, dtype)
    assert list(got[0][:3]) == [0, 1, 3]


def test_int64_l2_is_exact_floor_sqrt():
    """Sums of squares beyond float32's precision still give floor(sqrt) exactly, up to the
    largest square below 2**63; a sum that wraps negative gives the lowest value (ORT: sqrt of
    a negative number converted on x86)."""
    import math
    x = np.array([[3037000499, 0], [3037000499, 1], [46341, 1], [123456789, 987654321],
                  [4097, 0], [-7, 24], [2**31 + 1, -1], [2**31, 2**31]], np.int64)
    m = reduce_model("ReduceL2", TensorProto.INT64, 18, [1], shape=x.shape, keepdims=0)
    want = [math.isqrt(int(a) ** 2 + int(b) ** 2) for a, b in x[:-1].tolist()]
    want = np.array(want + [np.iinfo(np.int64).min], np.int64)
    oc.check_ref(m, {"x": x}, [want])
    small = x[2:6]  # where ORT's double sqrt is exact too
    harness.check_against_cpu(reduce_model("ReduceL2", TensorProto.INT64, 18, [1],
                                           shape=small.shape, keepdims=0), {"x": small})


@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax", "ReduceProd", "ReduceL1",
                                "ReduceSumSquare", "ReduceL2"])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_unsigned_reductions_numpy(op, dtype):
    """ORT's CPU provider has no uint32/uint64 kernels for these; numpy is the reference."""
    import math
    x = harness.rand(SHAPE, dtype, low=0, high=3, seed=10)
    m = reduce_model(op, harness.onnx_type(dtype), 18, [1], keepdims=0)
    want = {"ReduceMin": lambda: x.min(axis=1), "ReduceMax": lambda: x.max(axis=1),
            "ReduceProd": lambda: x.prod(axis=1, dtype=dtype),
            "ReduceL1": lambda: x.sum(axis=1, dtype=dtype),
            "ReduceSumSquare": lambda: (x * x).sum(axis=1, dtype=dtype),
            "ReduceL2": lambda: np.vectorize(math.isqrt)((x * x).sum(axis=1, dtype=dtype))}[op]()
    oc.check_ref(m, {"x": x}, [np.asarray(want).astype(dtype)])


def test_sum_over_empty_axis_is_zero():
    x = np.zeros((2, 0, 3), np.float32)
    oc.check(lambda e: reduce_model("ReduceSum", e, 13, [1], shape=x.shape), {"x": x}, F32)


def test_repeated_axis_declined(tmp_path):
    m = reduce_model("ReduceMin", TensorProto.FLOAT, 18, [1, -2])
    oc.check_declined(m, None, "n", "name axis 1 twice", tmp_path)


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


def test_compiled_shapeless_int_mean_counts():
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
                          {"x": harness.rand((4, 7), np.int32, seed=2)}])


def test_compiled_shapeless_new_reductions():
    """The new reductions in one shapeless function over two shapes."""
    axes = np.array([-1], np.int64)
    ops = ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
           "ReduceSumSquare"]
    nodes = [helper.make_node("Abs", ["x"], ["ax"], name="abs"),
             helper.make_node("ReduceLogSum", ["ax", "axes"], ["ls"], name="logsum")]
    nodes += [helper.make_node(op, ["x", "axes"], [f"y{i}"], name=op)
              for i, op in enumerate(ops)]
    outs = [("ls", TensorProto.FLOAT, None)] + [(f"y{i}", TensorProto.FLOAT, None)
                                               for i in range(len(ops))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "M"))], outs,
                           initializers=[("axes", axes)], opset=18)
    oc.check_compiled(m, [{"x": harness.rand((2, 3), seed=1)},
                          {"x": harness.rand((4, 7), seed=2)}], rtol=1e-5, atol=1e-5)
