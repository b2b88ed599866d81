"""Index rows (src/ops/index.c): Slice (attributes in opsets 1..9, inputs from 10, negative steps,
ONNX's clamping of out-of-range and INT64_MAX/INT64_MIN bounds, exhaustively over one axis),
Gather, GatherElements and GatherND (axes, batch_dims, int32/int64 and negative indices, every MLX
dtype), OneHot (wrapping, all-off rows, every values type) and the host-evaluated Compress,
NonZero and Unique (data-dependent shapes, eager; a constant Compress condition compiles keyed).
An out-of-range Gather/GatherElements/GatherND index fails the run naming the node and leaves the
session usable. Scatters are in test_scatter.py."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)]
ALL = [F32, F16, BF16] + INTS + [np.dtype(np.bool_)]
I64 = TensorProto.INT64
IMAX, IMIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def data(shape, dtype, seed=0):
    dtype = np.dtype(dtype)
    if dtype in (F32, F16, BF16):
        return harness.rand(shape, np.float32, seed=seed)
    return harness.rand(shape, dtype, seed=seed)


def i64(v):
    return np.array(v, np.int64)


def slice_model(elem, shape, starts, ends, axes=None, steps=None, opset=13, as_inputs=False,
                ind=np.int64):
    """Slice from opset 10: starts/ends/axes/steps are initializers (or graph inputs)."""
    names, inits, inputs = ["x", "starts", "ends"], [], [("x", elem, shape)]
    vals = {"starts": starts, "ends": ends}
    if axes is not None or steps is not None:
        names.append("axes" if axes is not None else "")
        if axes is not None:
            vals["axes"] = axes
    if steps is not None:
        names.append("steps")
        vals["steps"] = steps
    for k, v in vals.items():
        if as_inputs:
            inputs.append((k, harness.onnx_type(ind), [len(v)]))
        else:
            inits.append((k, np.array(v, ind)))
    node = helper.make_node("Slice", names, ["y"], name="n")
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits,
                              opset=opset)


# --- Slice ------------------------------------------------------------------------------------
@pytest.mark.parametrize("starts,ends,axes", [
    ([1, 0], [2, 3], [0, 1]),
    ([0], [-1], None),
    ([-3], [IMAX], [1]),
    ([1, -100], [1000, 1000], [-1, -3]),
    ([2], [1], [0]),            # empty
])
def test_slice_opset1_attributes(starts, ends, axes):
    x = harness.rand((3, 4, 5))
    attrs = {"starts": starts, "ends": ends}
    if axes is not None:
        attrs["axes"] = axes
    node = helper.make_node("Slice", ["x"], ["y"], name="n", **attrs)
    m = harness.make_model([node], [("x", TensorProto.FLOAT, ["A", 4, 5])],
                           [("y", TensorProto.FLOAT, None)], opset=9)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [2, 4], [0, 2], None),
    ([-1], [IMIN], [1], [-1]),              # whole axis reversed
    ([IMAX], [IMIN], [-1], [-2]),           # reversed with stride, from past the end
    ([3], [0], [1], [-1]),                  # stops before index 0
    ([-2, 1], [-100, 4], [2, 0], [-3, 2]),
    ([0, 0, 0], [IMAX, IMAX, IMAX], None, [2, 3, 4]),
    ([5], [1], [2], [1]),                   # empty
    ([1], [5], [2], [-1]),                  # empty backwards
    ([0], [1], [0], [IMAX]),                # huge step: one element
    ([4], [IMIN], [2], [-IMAX]),            # huge negative step: one element
])
def test_slice_inputs(opset, starts, ends, axes, steps):
    x = harness.rand((3, 4, 5))
    m = slice_model(TensorProto.FLOAT, ["N", 4, 5], starts, ends, axes, steps, opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("ind", [np.int32, np.int64])
def test_slice_inputs_from_graph(ind):
    """starts/ends/axes/steps computed at run time are read on the host."""
    x = harness.rand((4, 6))
    m = slice_model(TensorProto.FLOAT, [4, 6], [0, 0], [0, 0], [0, 0], [1, 1], as_inputs=True,
                    ind=ind)
    for st, en, ax, sp in [([1, -1], [3, -7], [0, 1], [1, -2]), ([5, 0], [-9, 6], [0, 1],
                                                                [-1, 2])]:
        feeds = {"x": x, "starts": np.array(st, ind), "ends": np.array(en, ind),
                 "axes": np.array(ax, ind), "steps": np.array(sp, ind)}
        harness.check_against_cpu(m, feeds)


def test_slice_clamping_exhaustive():
    """Every start/end in [-9, 9] plus INT64_MIN/MAX with several steps on an axis of 7, in one
    session, equals ORT's CPU provider."""
    x = np.arange(7, dtype=np.float32)
    m = slice_model(TensorProto.FLOAT, [7], [0], [0], [0], [1], as_inputs=True)
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    bounds = list(range(-9, 10)) + [IMIN, IMAX, 2**31 - 1]
    for step in (-IMAX, -3, -1, 1, 2, IMAX):
        for a in bounds:
            for b in bounds:
                feeds = {"x": x, "starts": i64([a]), "ends": i64([b]), "axes": i64([0]),
                         "steps": i64([step])}
                got, want = s.run(None, feeds)[0], ref.run(None, feeds)[0]
                assert got.shape == want.shape and np.array_equal(got, want), (a, b, step)
    assert harness.assignment(s) == {"n": harness.EP}


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_slice_dtypes(dtype):
    x = data((4, 5), dtype)
    oc.check(lambda e: slice_model(e, ["N", 5], [-1, 1], [IMIN, 5], [0, 1], [-2, 2]),
             {"x": x}, dtype)


def test_slice_dynamic_dims_one_session():
    m = slice_model(TensorProto.FLOAT, ["N", "M"], [1, -3], [IMAX, IMAX], [0, 1])
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    for shape in [(3, 4), (1, 2), (5, 9), (3, 4)]:
        x = harness.rand(shape, seed=sum(shape))
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])


# --- Gather -----------------------------------------------------------------------------------
def gather_model(elem, shape, idx_shape, axis=0, opset=13, ind=I64, idx=None):
    """idx: a constant initializer for the indices; None makes them a graph input."""
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="gather_node", axis=axis)
    inputs = [("x", elem, shape)]
    inits = []
    if idx is None:
        inputs.append(("i", ind, idx_shape))
    else:
        inits.append(("i", idx))
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits,
                              opset=opset)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_gather_dtypes(dtype):
    x = data((4, 3), dtype)
    i = i64([[3, -1], [0, -4]])
    oc.check(lambda e: gather_model(e, ["N", 3], [2, 2], axis=0), {"x": x, "i": i}, dtype)


@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("ind", [np.int32, np.int64])
@pytest.mark.parametrize("idx", [[1], [[0, 2], [-1, 1]], 2, -2, []], ids=str)
def test_gather_axes_and_indices(opset, axis, ind, idx):
    x = harness.rand((3, 4, 5))
    i = np.array(idx, ind)
    m = gather_model(TensorProto.FLOAT, ["A", 4, "C"], list(i.shape), axis, opset,
                     harness.onnx_type(ind))
    got, _, _ = harness.check_against_cpu(m, {"x": x, "i": i})
    ax = axis % 3
    assert got[0].shape == x.shape[:ax] + i.shape + x.shape[ax + 1:]


def test_gather_constant_indices():
    x = harness.rand((5, 2))
    m = gather_model(TensorProto.FLOAT, ["N", 2], None, axis=0, idx=i64([4, -5, 0]))
    harness.check_against_cpu(m, {"x": x})


def test_gather_from_empty_axis():
    """No indices from an empty axis is fine; any index into it fails, naming the node."""
    m = gather_model(TensorProto.FLOAT, ["N", 3], ["K"])
    harness.check_against_cpu(m, {"x": harness.rand((0, 3)), "i": i64([])})
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="gather_node.*empty"):
        s.run(None, {"x": harness.rand((0, 3)), "i": i64([0])})


@pytest.mark.parametrize("bad", [[0, 3], [-4], [2, 7, -9], [np.iinfo(np.int64).max]], ids=str)
def test_gather_out_of_range_fails_naming_the_node(bad):
    x = harness.rand((3, 2))
    m = gather_model(TensorProto.FLOAT, [3, 2], ["K"])
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="gather_node"):
        s.run(None, {"x": x, "i": i64(bad)})
    good = i64([2, -3, 0])
    got = s.run(None, {"x": x, "i": good})[0]
    np.testing.assert_array_equal(got, x[[2, 0, 0]])


def test_gather_out_of_range_int32_message():
    x = harness.rand((3, 2))
    m = gather_model(TensorProto.FLOAT, [3, 2], [2], ind=TensorProto.INT32, axis=0)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match=r"gather_node.*out of range"):
        s.run(None, {"x": x, "i": np.array([1, 3], np.int32)})
    np.testing.assert_array_equal(s.run(None, {"x": x, "i": np.array([1, -1], np.int32)})[0],
                                  x[[1, 2]])


@pytest.mark.cpu_device
def test_gather_float64_claimed_on_cpu():
    """float64 data is claimed on the CPU device and moved bit-exactly."""
    x = np.random.default_rng(0).standard_normal((3, 2))
    m = gather_model(TensorProto.DOUBLE, [3, 2], [2])
    got, ref, _ = harness.check_against_cpu(m, {"x": x, "i": i64([0, -1])})
    assert got[0].dtype == np.float64 and np.array_equal(got[0], ref[0])


def test_compiled_keyed_slice_gather():
    """Slice and Gather (with its run-time range check) compile per input shape without
    falling back to eager translation."""
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"], name="sl"),
             helper.make_node("Gather", ["s", "i"], ["y"], name="ga", axis=1)]
    inits = [("st", i64([-1])), ("en", i64([IMIN])), ("ax", i64([0])), ("sp", i64([-2])),
             ("i", i64([[0, -1], [2, 1]]))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3])],
                           [("y", TensorProto.FLOAT, None)], initializers=inits, opset=13)
    feeds = [{"x": harness.rand((n, 3), seed=n)} for n in (4, 7, 4)]
    oc.check_compiled(m, feeds, path="keyed")


# --- GatherElements, GatherND, OneHot ---------------------------------------------------------
# Data-movement rows are swept over every MLX dtype with ops_common.check_wide (ORT's CPU
# kernels lack several dtypes; the reference runs the same values as float32/int64).
def two_input_model(op, elem, x_shape, i_shape, ind=I64, opset=13, out_elem=None, **attrs):
    node = helper.make_node(op, ["x", "i"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, x_shape), ("i", ind, i_shape)],
                              [("y", out_elem or elem, None)], opset=opset)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_gather_elements_dtypes(dtype):
    x = data((3, 4), dtype)
    i = i64([[0, -1, 3], [2, 2, -4]])
    oc.check_wide(lambda e: two_input_model("GatherElements", e, ["N", 4], [2, 3], axis=1),
                  {"x": x, "i": i}, dtype, data={"x"})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("ind", [np.int32, np.int64])
@pytest.mark.parametrize("i_shape", [(3, 4, 5), (2, 3, 1), (1, 1, 1), (6, 4, 5)], ids=str)
def test_gather_elements(opset, axis, ind, i_shape):
    """Indices as large as the data, smaller on every axis, or larger on the gathered one."""
    x = harness.rand((3, 4, 5))
    if any(i_shape[d] > x.shape[d] for d in range(3) if d != axis % 3):
        pytest.skip("indices may exceed the data only on the gathered axis")
    dim = x.shape[axis]
    i = np.random.default_rng(axis % 3).integers(-dim, dim, i_shape).astype(ind)
    m = two_input_model("GatherElements", TensorProto.FLOAT, ["A", 4, "C"], list(i_shape),
                        harness.onnx_type(ind), opset, axis=axis)
    harness.check_against_cpu(m, {"x": x, "i": i})


@pytest.mark.parametrize("op", ["GatherElements", "GatherND"])
@pytest.mark.parametrize("bad", [3, -4, np.iinfo(np.int64).max], ids=str)
def test_gather_nd_elements_out_of_range_fails_naming_the_node(op, bad):
    x = harness.rand((3, 2))
    if op == "GatherElements":
        m = two_input_model(op, TensorProto.FLOAT, [3, 2], [1, 2], axis=0)
        i_bad, i_good = i64([[0, bad]]), i64([[0, -1]])
    else:
        m = two_input_model(op, TensorProto.FLOAT, [3, 2], [2, 1])
        i_bad, i_good = i64([[1], [bad]]), i64([[1], [-1]])
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="'n'.*index out of range"):
        s.run(None, {"x": x, "i": i_bad})
    feeds = {"x": x, "i": i_good}
    np.testing.assert_array_equal(s.run(None, feeds)[0], harness.cpu_session(m).run(None, feeds)[0])


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_gather_nd_dtypes(dtype):
    x = data((3, 4, 2), dtype)
    i = i64([[0, 1], [-1, 3], [2, -4]])
    oc.check_wide(lambda e: two_input_model("GatherND", e, ["N", 4, 2], [3, 2]), {"x": x, "i": i},
                  dtype, data={"x"})


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("batch_dims,i_shape", [(0, (2,)), (0, (3, 1)), (0, (2, 2, 2)),
                                                (0, (2, 3)), (0, (0, 2)), (0, (2, 0)),
                                                (1, (3, 1)), (1, (3, 2, 2)), (1, (3, 0)),
                                                (2, (3, 4, 1))], ids=str)
def test_gather_nd(opset, batch_dims, i_shape):
    """Index tuples of every length (0 copies whole slices), some negative, with and without
    batch dims; empty index batches give empty outputs."""
    if opset == 11 and batch_dims:
        pytest.skip("batch_dims is defined from GatherND-12")
    x = harness.rand((3, 4, 5))
    rng = np.random.default_rng(len(i_shape) + batch_dims)
    dims = np.array(x.shape[batch_dims:batch_dims + i_shape[-1]], np.int64)
    i = rng.integers(0, 1 << 20, i_shape) % np.maximum(dims, 1)
    i = i - dims * rng.integers(0, 2, i_shape)
    attrs = {"batch_dims": batch_dims} if opset >= 12 else {}
    m = two_input_model("GatherND", TensorProto.FLOAT, ["A", 4, 5], list(i_shape), opset=opset,
                        **attrs)
    harness.check_against_cpu(m, {"x": x, "i": i.astype(np.int64)})


def one_hot_model(i_elem, d_elem, v_elem, i_shape, axis=None, opset=11):
    attrs = {"axis": axis} if axis is not None else {}
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("i", i_elem, i_shape), ("d", d_elem, []),
                                       ("v", v_elem, [2])], [("y", v_elem, None)], opset=opset)


@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2, 2])
@pytest.mark.parametrize("i_shape", [(4,), (2, 3)], ids=str)
def test_one_hot(opset, axis, i_shape):
    """Negative indices wrap; indices outside [-depth, depth) give all-off rows."""
    if axis is not None and (axis > len(i_shape) or axis < -len(i_shape) - 1):
        pytest.skip("axis out of range for this rank")
    i = np.random.default_rng(3).integers(-6, 6, i_shape).astype(np.int64)
    m = one_hot_model(I64, I64, TensorProto.FLOAT, list(i_shape), axis, opset)
    harness.check_against_cpu(m, {"i": i, "d": i64(4), "v": np.array([-1.5, 2.0], np.float32)})


@pytest.mark.parametrize("i_t,d_t,v_t", [(np.int64, np.int64, np.int64),
                                         (np.float32, np.int64, np.int64),
                                         (np.int32, np.float32, np.float32),
                                         (np.int64, np.float32, np.int32),
                                         (np.float32, np.float32, np.float32)], ids=str)
def test_one_hot_types_ort_runs(i_t, d_t, v_t):
    i = np.array([[0.0, -1.0, 2.9], [-3.5, 7.0, 1.0]]).astype(i_t)
    m = one_hot_model(harness.onnx_type(i_t), harness.onnx_type(d_t), harness.onnx_type(v_t),
                      [2, 3], 1)
    harness.check_against_cpu(m, {"i": i, "d": np.array(3.7 if d_t == np.float32 else 3, d_t),
                                  "v": np.array([0, 5], v_t)})


@pytest.mark.parametrize("values", [F32, F16] + INTS + [np.dtype(np.bool_)], ids=str)
@pytest.mark.parametrize("indices", [np.int8, np.uint16, np.float16, np.int64], ids=str)
def test_one_hot_any_values_type(values, indices):
    """Every dtype OneHot's values take (bfloat16 is not among them; ORT's CPU kernel has only a
    few combinations): compared with numpy. A fractional float index matches nothing."""
    i = np.array([2, 1 if np.dtype(indices).kind == "u" else -1, 0, 5, 3], indices)
    if np.dtype(indices) == F16:
        i[4] = 2.5
    v = np.array([0, 1]).astype(values)
    m = one_hot_model(harness.onnx_type(indices), I64, oc.elem(values), [5], -1)
    idx = np.where(i.astype(np.float32) % 1 == 0, i.astype(np.int64), 99)
    idx = np.where(idx < 0, idx + 4, idx)
    want = np.where(idx[:, None] == np.arange(4)[None, :], v[1], v[0]).astype(values)
    feeds = {"i": i, "d": i64(4), "v": v}
    if np.dtype(values) == BF16:
        got, placed = oc.run_bf16_on_mlx(m, feeds, [want.shape])
        assert placed == {"n": harness.EP}
        np.testing.assert_array_equal(got[0].astype(np.float32), want.astype(np.float32))
    else:
        oc.check_ref(m, feeds, [want])


def test_one_hot_bad_depth_fails_naming_the_node():
    m = one_hot_model(I64, I64, TensorProto.FLOAT, [3], -1)
    s = harness.mlx_session(m)
    feeds = {"i": i64([0, 1, 2]), "v": np.array([0, 1], np.float32)}
    with pytest.raises(Exception, match="'n'.*depth"):
        s.run(None, feeds | {"d": i64(0)})
    np.testing.assert_array_equal(s.run(None, feeds | {"d": i64(3)})[0], np.eye(3, dtype=np.float32))


# --- Compress, NonZero, Unique: evaluated on the host -----------------------------------------
def test_compress_dtypes():
    """Compress' types exclude bfloat16."""
    for dtype in [d for d in ALL if d != BF16]:
        x = data((3, 4), dtype)
        c = np.array([True, False, True])
        oc.check_wide(lambda e: two_input_model("Compress", e, ["N", 4], ["K"],
                                                ind=TensorProto.BOOL, opset=11, axis=0),
                      {"x": x, "i": c}, dtype, data={"x"})


@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("cond", [[1, 0, 1], [0, 0, 0], [1, 1, 1, 1, 1], [0, 1], [],
                                  [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1]], ids=str)
def test_compress(opset, axis, cond):
    """A condition shorter than the axis selects among its first entries; entries past the
    axis are ignored (as ORT does)."""
    x = harness.rand((3, 4))
    attrs = {"axis": axis} if axis is not None else {}
    m = two_input_model("Compress", TensorProto.FLOAT, ["A", "B"], ["K"], ind=TensorProto.BOOL,
                        opset=opset, **attrs)
    harness.check_against_cpu(m, {"x": x, "i": np.array(cond, bool)})


def test_compress_in_a_fused_group_runs_eagerly():
    """A host-evaluated row between computed values: the group runs eagerly every time."""
    nodes = [helper.make_node("Greater", ["x", "z"], ["c"], name="gt"),
             helper.make_node("Compress", ["x", "c"], ["s"], name="cp"),
             helper.make_node("Neg", ["s"], ["y"], name="neg")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N"])],
                           [("y", TensorProto.FLOAT, None)],
                           initializers=[("z", np.array(0, np.float32))], opset=13)
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    for n in (5, 9, 5, 0):
        x = harness.rand((n,), seed=n)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    assert set(harness.assignment(s).values()) == {harness.EP}


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (0, 3)], ids=str)
def test_nonzero(dtype, shape):
    """(rank, count) coordinates in row-major order; a scalar counts as shape (1). (ORT's shape
    inference says (0, n) for a scalar, which its IOBinding enforces for the bfloat16 run.)"""
    if shape == () and dtype == BF16:
        pytest.skip("ORT rejects the (1, n) result of a bound scalar output")
    x = np.where(harness.rand(shape, seed=9) > 0, data(shape, dtype, seed=len(shape)), 0)
    oc.check_wide(lambda e: one_input_model("NonZero", e, list(shape), I64), {"x": x}, dtype,
                  data={"x"}, via=None if np.dtype(dtype) == np.bool_ else F32)


def one_input_model(op, elem, shape, out_elem, opset=13, n_out=1, **attrs):
    outs = ["y", "first", "inverse", "counts"][:n_out]
    node = helper.make_node(op, ["x"], outs, name="n", **attrs)
    out_types = [out_elem if op == "NonZero" else elem] + [I64] * (n_out - 1)
    return harness.make_model([node], [("x", elem, shape)],
                              [(o, t, None) for o, t in zip(outs, out_types)], opset=opset)


def numpy_unique(x, axis, sorted_):
    """ORT's four outputs (sorted or in order of first occurrence)."""
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", [F32, np.dtype(np.int64), np.dtype(np.int8)], ids=str)
def test_unique_against_ort(sorted_, axis, dtype):
    x = np.array([[2, 1, 2, 1], [0, 3, 0, 3], [2, 1, 2, 1], [-1, 3, -1, 3]]).astype(dtype)
    attrs = {"sorted": sorted_} | ({"axis": axis} if axis is not None else {})
    m = one_input_model("Unique", harness.onnx_type(dtype), ["A", 4], I64, 11, 4, **attrs)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("dtype", [d for d in ALL if d != BF16], ids=str)
@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 1])
def test_unique_dtypes(dtype, sorted_, axis):
    """Every dtype Unique takes (not bfloat16; ORT's CPU kernel has four): compared with numpy's
    unique."""
    x = data((3, 5), dtype, seed=4)
    x = np.concatenate([x, x[:, :2]], 1).astype(dtype)
    attrs = {"sorted": sorted_} | ({"axis": axis} if axis is not None else {})
    m = one_input_model("Unique", oc.elem(dtype), [3, 7], I64, 11, 4, **attrs)
    want = numpy_unique(x, axis, sorted_)
    oc.check_ref(m, {"x": x}, [want[0].astype(dtype)] + want[1:])


def test_unique_optional_outputs_and_empty_input():
    m = one_input_model("Unique", TensorProto.FLOAT, ["N"], I64, 11, 1)
    harness.check_against_cpu(m, {"x": np.array([3, 1, 3, 2], np.float32)})
    m = one_input_model("Unique", TensorProto.FLOAT, ["N"], I64, 11, 4)
    harness.check_against_cpu(m, {"x": np.zeros((0,), np.float32)})


def test_compress_negative_axis_before_opset_11():
    """ONNX Runtime's Compress-9 kernel counts a negative axis from the back; so does the EP."""
    m = two_input_model("Compress", TensorProto.FLOAT, [3, 4], [4], ind=TensorProto.BOOL,
                        opset=9, axis=-1)
    harness.check_against_cpu(m, {"x": harness.rand((3, 4)),
                                  "i": np.array([True, False, True, True])})



def test_compiled_keyed_compress_with_constant_condition():
    """A constant condition fixes the output shape: the group compiles keyed, no host reads."""
    nodes = [helper.make_node("Compress", ["x", "c"], ["s"], name="cp", axis=1),
             helper.make_node("Neg", ["s"], ["y"], name="neg")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 4])],
                           [("y", TensorProto.FLOAT, None)],
                           initializers=[("c", np.array([True, False, True, True]))], opset=11)
    feeds = [{"x": harness.rand((n, 4), seed=n)} for n in (2, 5, 2)]
    oc.check_compiled(m, feeds, path="keyed")


def test_one_hot_computed_depth_in_a_group():
    """A depth computed at run time is read on the host: the group runs eagerly, correctly."""
    nodes = [helper.make_node("Add", ["d0", "one"], ["d"], name="add"),
             helper.make_node("OneHot", ["i", "d", "v"], ["h"], name="oh", axis=0),
             helper.make_node("Neg", ["h"], ["y"], name="neg")]
    m = harness.make_model(nodes, [("i", I64, ["N"]), ("d0", I64, [])],
                           [("y", TensorProto.FLOAT, None)],
                           initializers=[("one", i64(1)), ("v", np.array([0, 1], np.float32))],
                           opset=11)
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    for n, d in ((4, 3), (2, 5), (4, 3)):
        feeds = {"i": np.arange(n, dtype=np.int64) - 1, "d0": i64(d)}
        np.testing.assert_array_equal(s.run(None, feeds)[0], ref.run(None, feeds)[0])
    assert set(harness.assignment(s).values()) == {harness.EP}
