"""Scatter rows (src/ops/index.c): ScatterElements (and its deprecated name Scatter) and
ScatterND with every reduction their opsets define (none from 11, add/mul from 16, max/min from
18) over every MLX dtype, negative axes and indices, int32/int64 indices, indices that cover
only part of the data, and symbolic dims. An out-of-range index fails the run naming the node
(it is clamped before the write, so nothing outside the data is touched) and the session keeps
working. With reduction 'none' ONNX leaves duplicate indices undefined (ORT applies them in
order, MLX in no promised order), so 'none' is tested with unique indices only; the reductions
are order-independent and are tested with duplicates. Bool has no arithmetic: add is logical or,
mul logical and."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
import ops_failures as of
from ops_common import BF16, F16, F32

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)]
BOOL = np.dtype(np.bool_)
ALL = [F32, F16, BF16] + INTS + [BOOL]
I64 = TensorProto.INT64
REDUCTIONS = ["none", "add", "mul", "max", "min"]


def data(shape, dtype, seed=0):
    dtype = np.dtype(dtype)
    if dtype in (F32, F16, BF16):
        return harness.rand(shape, np.float32, seed=seed)
    return harness.rand(shape, dtype, seed=seed)


def scatter_model(op, elem, shape, idx_shape, upd_shape, opset=18, ind=I64, **attrs):
    node = helper.make_node(op, ["x", "i", "u"], ["y"], name="n", **attrs)
    inputs = [("x", elem, shape), ("i", ind, idx_shape), ("u", elem, upd_shape)]
    return harness.make_model([node], inputs, [("y", elem, None)], opset=opset)


def unique_rows(n_rows, n_cols, dim, seed=0):
    """For each of n_rows, n_cols distinct indices in [-dim, dim) (no two naming one slot)."""
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(dim)[:n_cols] - rng.integers(0, 2, n_cols) * dim
            for _ in range(n_rows)]
    return np.array(rows, np.int64)


def tolerance(dtype, reduction):
    """float16/bfloat16 sums and products round differently from the float32 reference."""
    if reduction in ("add", "mul") and np.dtype(dtype) in (F16, BF16):
        return 2e-2, 2e-2
    return 0.0, 0.0


# --- ScatterElements --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_dtypes(dtype, reduction):
    x, u = data((3, 5), dtype), data((3, 4), dtype, seed=1)
    i = (unique_rows(3, 4, 5) if reduction == "none"
         else np.array([[0, 0, -1, 4], [2, 2, 2, 1], [-5, 0, 3, 3]], np.int64))
    rtol, atol = tolerance(dtype, reduction)
    oc.check_wide(lambda e: scatter_model("ScatterElements", e, ["N", 5], [3, 4], [3, 4],
                                          axis=1, reduction=reduction),
                  {"x": x, "i": i, "u": u}, dtype, data={"x", "u"}, rtol=rtol, atol=atol)


@pytest.mark.parametrize("opset,reduction", [(11, None), (13, None), (16, "add"), (16, "mul"),
                                             (16, "none"), (18, "max"), (18, "min")])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("ind", [np.int32, np.int64])
def test_scatter_elements_axes(opset, reduction, axis, ind):
    x, u = harness.rand((4, 5, 3)), harness.rand((2, 3, 2), seed=1)
    dim = x.shape[axis]
    rng = np.random.default_rng(axis + 7)
    if reduction in (None, "none"):  # distinct along the axis for every other coordinate
        ax = axis % 3
        i = np.empty((2, 3, 2), np.int64)
        for c in np.ndindex(*[s for k, s in enumerate(i.shape) if k != ax]):
            for j, v in enumerate(rng.permutation(dim)[:i.shape[ax]]):
                at = list(c)
                at.insert(ax, j)
                i[tuple(at)] = v - dim * rng.integers(0, 2)
    else:
        i = rng.integers(-dim, dim, (2, 3, 2))
    attrs = {"axis": axis} | ({"reduction": reduction} if reduction else {})
    m = scatter_model("ScatterElements", TensorProto.FLOAT, ["A", 5, "C"], [2, 3, 2], [2, 3, 2],
                      opset, harness.onnx_type(ind), **attrs)
    harness.check_against_cpu(m, {"x": x, "i": i.astype(ind), "u": u})


def test_scatter_elements_indices_cover_part_of_the_data():
    """Indices shorter than the data on the other axes and longer on the scattered one."""
    x = harness.rand((3, 4))
    m = scatter_model("ScatterElements", TensorProto.FLOAT, [3, 4], [2, 6], [2, 6], axis=1,
                      reduction="add")
    i = np.array([[0, 0, 1, 3, -1, 2], [3, 3, 3, 0, 0, -4]], np.int64)
    harness.check_against_cpu(m, {"x": x, "i": i, "u": harness.rand((2, 6), seed=3)})


def test_scatter_elements_empty_indices():
    m = scatter_model("ScatterElements", TensorProto.FLOAT, [3, 4], [3, 0], [3, 0], axis=1)
    harness.check_against_cpu(m, {"x": harness.rand((3, 4)), "i": np.zeros((3, 0), np.int64),
                                  "u": np.zeros((3, 0), np.float32)})


@pytest.mark.parametrize("opset", [9, 10])
def test_scatter_deprecated_name(opset):
    x = harness.rand((3, 4))
    node = helper.make_node("Scatter", ["x", "i", "u"], ["y"], name="n", axis=0)
    m = harness.make_model([node], [("x", TensorProto.FLOAT, [3, 4]), ("i", I64, [1, 4]),
                                    ("u", TensorProto.FLOAT, [1, 4])],
                           [("y", TensorProto.FLOAT, None)], opset=opset)
    harness.check_against_cpu(m, {"x": x, "i": np.array([[2, 0, 1, 2]], np.int64),
                                  "u": harness.rand((1, 4), seed=2)})


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
@pytest.mark.parametrize("bad", [4, -5, np.iinfo(np.int64).max], ids=str)
def test_scatter_out_of_range_fails_naming_the_node(op, bad):
    x = harness.rand((4, 3))
    if op == "ScatterElements":
        m = scatter_model(op, TensorProto.FLOAT, [4, 3], [1, 3], [1, 3], axis=0)
        i_bad, i_good = np.array([[0, bad, 1]], np.int64), np.array([[0, -1, 1]], np.int64)
        u = harness.rand((1, 3), seed=1)
    else:
        m = scatter_model(op, TensorProto.FLOAT, [4, 3], [2, 1], [2, 3])
        i_bad, i_good = np.array([[1], [bad]], np.int64), np.array([[1], [-1]], np.int64)
        u = harness.rand((2, 3), seed=1)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="'n'.*index out of range"):
        s.run(None, {"x": x, "i": i_bad, "u": u})
    feeds = {"x": x, "i": i_good, "u": u}
    np.testing.assert_array_equal(s.run(None, feeds)[0], harness.cpu_session(m).run(None, feeds)[0])


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
def test_scatter_reduction_before_its_opset_declined(op, tmp_path):
    shape = ([2, 2], [2, 2], [2, 2]) if op == "ScatterElements" else ([2, 2], [1, 1], [1, 2])
    m = scatter_model(op, TensorProto.FLOAT, *shape, opset=16, reduction="max")
    oc.check_declined(m, None, "n", "max/min from 18", tmp_path)


@pytest.mark.cpu_device
def test_scatter_float64_claimed_on_cpu():
    """float64 is claimed on the CPU device and scattered bit-exactly."""
    m = scatter_model("ScatterElements", TensorProto.DOUBLE, [2, 2], [1, 2], [1, 2])
    feeds = {"x": np.zeros((2, 2)), "i": np.array([[1, 0]], np.int64), "u": np.full((1, 2), 0.1)}
    got, ref, _ = harness.check_against_cpu(m, feeds)
    assert got[0].dtype == np.float64 and np.array_equal(got[0], ref[0])


# --- ScatterND --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_dtypes(dtype, reduction):
    x, u = data((4, 3, 2), dtype), data((3, 2), dtype, seed=1)
    i = (np.array([[0, 1], [-1, 2], [2, -3]], np.int64) if reduction == "none"
         else np.array([[0, 1], [-4, 1], [3, 0]], np.int64))
    rtol, atol = tolerance(dtype, reduction)
    oc.check_wide(lambda e: scatter_model("ScatterND", e, ["N", 3, 2], [3, 2], [3, 2],
                                          reduction=reduction),
                  {"x": x, "i": i, "u": u}, dtype, data={"x", "u"}, rtol=rtol, atol=atol)


@pytest.mark.parametrize("opset,reduction", [(11, None), (13, None), (16, "add"), (16, "mul"),
                                             (18, "max"), (18, "min")])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd_depths(opset, reduction, k):
    """Index tuples of length k address slices of rank 3 - k; a (2, 2, k) batch of them."""
    x = harness.rand((5, 4, 5))
    rng = np.random.default_rng(k)
    flat = rng.choice(int(np.prod(x.shape[:k])), 4, replace=reduction is not None)
    i = np.stack(np.unravel_index(flat, x.shape[:k]), -1).reshape(2, 2, k)
    i = i - (rng.integers(0, 2, i.shape) * np.array(x.shape[:k]))  # some negative
    u = harness.rand((2, 2) + x.shape[k:], seed=k)
    attrs = {"reduction": reduction} if reduction else {}
    m = scatter_model("ScatterND", TensorProto.FLOAT, ["A", 4, 5], [2, 2, k], list(u.shape),
                      opset, **attrs)
    harness.check_against_cpu(m, {"x": x, "i": i.astype(np.int64), "u": u})


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_duplicates_reduce(reduction):
    x = harness.rand((4, 3))
    i = np.array([[1], [1], [-3], [2], [1]], np.int64)
    m = scatter_model("ScatterND", TensorProto.FLOAT, [4, 3], [5, 1], [5, 3], reduction=reduction)
    harness.check_against_cpu(m, {"x": x, "i": i, "u": harness.rand((5, 3), seed=4)},
                              rtol=1e-5, atol=1e-5)


def test_scatter_nd_single_tuple():
    """indices of rank 1: one tuple, updates of the slice's shape."""
    m = scatter_model("ScatterND", TensorProto.FLOAT, [3, 4], [2], [])
    harness.check_against_cpu(m, {"x": harness.rand((3, 4)), "i": np.array([2, -1], np.int64),
                                  "u": np.array(9.0, np.float32)})


def test_compiled_keyed_scatter_gather():
    """ScatterElements and GatherElements with their range checks compile per shape."""
    nodes = [helper.make_node("ScatterElements", ["x", "i", "u"], ["s"], name="sc", axis=1,
                              reduction="add"),
             helper.make_node("GatherElements", ["s", "i"], ["y"], name="ga", axis=1)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 4]), ("i", I64, ["N", 2]),
                                   ("u", TensorProto.FLOAT, ["N", 2])],
                           [("y", TensorProto.FLOAT, None)], opset=18)
    feeds = [{"x": harness.rand((n, 4), seed=n), "i": np.full((n, 2), -1, np.int64),
              "u": harness.rand((n, 2), seed=n + 1)} for n in (2, 3, 2)]
    oc.check_compiled(m, feeds, path="keyed")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_zero_size_updates_leave_the_data(reduction):
    """data [1, 0], indices [[0]], updates [1, 0]: nothing is written and the result is the
    (empty) data, as on ORT's CPU provider; MLX's scatter would divide by the zero slice size."""
    m = scatter_model("ScatterND", TensorProto.FLOAT, [1, 0], [1, 1], [1, 0], reduction=reduction)
    feeds = {"x": np.zeros((1, 0), np.float32), "i": np.array([[0]], np.int64),
             "u": np.zeros((1, 0), np.float32)}
    got = of.mlx_outputs(m, feeds)[0]
    assert got.shape == (1, 0) and got.dtype == np.float32
    m3 = scatter_model("ScatterND", TensorProto.FLOAT, [2, 3, 0], [2, 2], [2, 0],
                       reduction=reduction)
    feeds = {"x": np.zeros((2, 3, 0), np.float32), "i": np.array([[1, 2], [0, -1]], np.int64),
             "u": np.zeros((2, 0), np.float32)}
    assert of.mlx_outputs(m3, feeds)[0].shape == (2, 3, 0)


def test_scatter_nd_zero_size_updates_still_check_indices():
    """ORT checks the indices even when the updates are empty; so do we, and the session runs on."""
    m = scatter_model("ScatterND", TensorProto.FLOAT, [1, 0], [1, 1], [1, 0])
    x, u = np.zeros((1, 0), np.float32), np.zeros((1, 0), np.float32)
    of.rejects_then_runs(m, {"x": x, "i": np.array([[5]], np.int64), "u": u},
                         {"x": x, "i": np.array([[-1]], np.int64), "u": u})


@pytest.mark.parametrize("op,axis", [("ScatterElements", 1), ("ScatterElements", 0),
                                     ("Scatter", 1)])
def test_scatter_elements_zero_size_indices_leave_the_data(op, axis):
    m = scatter_model(op, TensorProto.FLOAT, [2, 0], [2, 0], [2, 0], axis=axis,
                      opset=9 if op == "Scatter" else 18)
    feeds = {"x": np.zeros((2, 0), np.float32), "i": np.zeros((2, 0), np.int64),
             "u": np.zeros((2, 0), np.float32)}
    assert of.mlx_outputs(m, feeds)[0].shape == (2, 0)
    m = scatter_model(op, TensorProto.FLOAT, [2, 3], [0, 3], [0, 3], axis=0,
                      opset=9 if op == "Scatter" else 18)
    x = harness.rand((2, 3))
    feeds = {"x": x, "i": np.zeros((0, 3), np.int64), "u": np.zeros((0, 3), np.float32)}
    np.testing.assert_array_equal(of.mlx_outputs(m, feeds)[0], x)
