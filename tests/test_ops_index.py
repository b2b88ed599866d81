"""Index rows (src/ops/index.c): Slice (attributes in opsets 1..9, inputs from 10, negative steps,
ONNX's clamping of out-of-range and INT64_MAX/INT64_MIN bounds, exhaustively over one axis) and
Gather (axes, int32/int64 and negative indices, scalar indices, every MLX dtype). An out-of-range
Gather index fails the run naming the node and leaves the session usable."""
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
    if opset == 10 and axes is not None and min(axes) < 0:
        pytest.skip("negative axes are defined from Slice-11")
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


def test_gather_float64_declined(tmp_path):
    x = harness.rand((3, 2)).astype(np.float64)
    m = gather_model(TensorProto.DOUBLE, [3, 2], [2])
    oc.check_declined(m, {"x": x, "i": i64([0, 2])}, "gather_node", "MLX cannot hold", tmp_path)


def test_compiled_keyed_slice_gather(capfd):
    """Slice and Gather (with its run-time range check) compile per input shape without
    falling back to eager translation."""
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"], name="sl"),
             helper.make_node("Gather", ["s", "i"], ["y"], name="ga", axis=1)]
    inits = [("st", i64([-1])), ("en", i64([IMIN])), ("ax", i64([0])), ("sp", i64([-2])),
             ("i", i64([[0, -1], [2, 1]]))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3])],
                           [("y", TensorProto.FLOAT, None)], initializers=inits, opset=13)
    feeds = [{"x": harness.rand((n, 3), seed=n)} for n in (4, 7, 4)]
    oc.check_compiled(m, feeds, capfd, path="keyed")
