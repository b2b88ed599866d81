"""Pad and CenterCropPad rows (src/ops/shape.c): Pad with attributes (opsets 2..10), pads and
constant_value inputs (11+), an axes input (18) and wrap mode (19); modes constant, reflect,
edge and wrap with positive pads, negative pads (which crop first) and both mixed, over every
MLX dtype, with pads that are constant or computed at run time. Pads ONNX Runtime rejects
(reflect beyond dim-1, edge/reflect/wrap on an empty axis) fail on MLX too, naming the node, and
leave the session usable. CenterCropPad crops or zero-pads each named axis around its centre."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32

INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)]
BOOL = np.dtype(np.bool_)
ALL = [F32, F16, BF16] + INTS + [BOOL]
I64 = TensorProto.INT64
MODES = ["constant", "reflect", "edge", "wrap"]


def data(shape, dtype, seed=0):
    dtype = np.dtype(dtype)
    if dtype in (F32, F16, BF16):
        return harness.rand(shape, np.float32, seed=seed)
    return harness.rand(shape, dtype, seed=seed)


def pad_model(elem, shape, mode="constant", opset=19, pads=None, value=False, axes=None,
              pads_input=True):
    """Pad from opset 11: pads as a graph input (or an initializer), constant_value as a graph
    input when value is True, axes as an initializer."""
    names, inputs, inits = ["x", "p"], [("x", elem, shape)], []
    if pads_input:
        inputs.append(("p", I64, [len(pads)]))
    else:
        inits.append(("p", np.array(pads, np.int64)))
    if value or axes is not None:
        names.append("c" if value else "")
        if value:
            inputs.append(("c", elem, []))
    if axes is not None:
        names.append("a")
        inits.append(("a", np.array(axes, np.int64)))
    node = helper.make_node("Pad", names, ["y"], name="n", mode=mode)
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits,
                              opset=opset)


def run_both(m, feeds):
    """MLX's outputs equal ORT's, or both fail (MLX naming the node)."""
    try:
        want = harness.cpu_session(m).run(None, feeds)
    except Exception:
        with pytest.raises(Exception, match="'n'"):
            harness.mlx_session(m).run(None, feeds)
        return None
    got, placed = harness.run_on_mlx(m, feeds)
    assert placed == {"n": harness.EP}
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    return got


PADS = [[0, 0, 0, 0], [1, 2, 0, 1], [0, 2, 1, 2], [2, 3, 2, 3], [-1, 0, 0, -2], [1, -2, -1, 3],
        [0, -1, 2, 0], [3, 4, 3, 5], [0, -3, 0, -2]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pads", PADS, ids=str)
def test_pad_modes(mode, pads):
    x = harness.rand((3, 4))
    m = pad_model(TensorProto.FLOAT, ["A", "B"], mode, pads=pads)
    run_both(m, {"x": x, "p": np.array(pads, np.int64)})


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_pad_dtypes(dtype, mode):
    x = data((2, 3, 4), dtype)
    pads = [1, 0, -1, 0, 2, 2]
    oc.check_wide(lambda e: pad_model(e, ["N", 3, 4], mode, pads=pads, value=True),
                  {"x": x, "p": np.array(pads, np.int64), "c": np.array(1, np.float32)},
                  dtype, data={"x", "c"})


@pytest.mark.parametrize("opset,dtype", [(2, F32), (10, F32), (10, F16)], ids=str)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attributes(opset, dtype, mode):
    """(ORT's CPU provider cannot run float16 at opset 2: the Cast it inserts is invalid there.)"""
    x = data((3, 4), dtype)
    node = helper.make_node("Pad", ["x"], ["y"], name="n", mode=mode, pads=[1, -1, 2, 2],
                            value=2.5)
    oc.check(lambda e: harness.make_model([node], [("x", e, ["A", 4])], [("y", e, None)],
                                          opset=opset), {"x": x}, dtype)


@pytest.mark.parametrize("opset", [11, 13, 18, 19, 21, 23, 24, 25])
def test_pad_opsets_constant_pads(opset):
    x = harness.rand((2, 5))
    pads = [1, 2, 0, 1]
    m = pad_model(TensorProto.FLOAT, ["A", 5], "edge", opset, pads, pads_input=False)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axes,pads", [([1], [2, 3]), ([-1, 0], [1, -1, 2, 1]),
                                       ([0, 2], [-1, 1, 0, 2])], ids=str)
def test_pad_axes(mode, axes, pads):
    x = harness.rand((3, 4, 5))
    m = pad_model(TensorProto.FLOAT, [3, "B", 5], mode, 19, pads, axes=axes)
    run_both(m, {"x": x, "p": np.array(pads, np.int64)})


@pytest.mark.parametrize("value", [0, -3, 7])
def test_pad_constant_value_input(value):
    x = harness.rand((2, 3), np.int32)
    m = pad_model(TensorProto.INT32, [2, 3], pads=[1, 1, 1, 1], value=True, opset=13)
    harness.check_against_cpu(m, {"x": x, "p": np.array([1, 1, 1, 1], np.int64),
                                  "c": np.array(value, np.int32)})


def test_pad_dynamic_dims_one_session():
    m = pad_model(TensorProto.FLOAT, ["A", "B"], "reflect", pads=[1, 1, 1, 1])
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    for shape, pads in (((3, 4), [1, 2, 2, 1]), ((5, 2), [0, 1, 4, 0]), ((3, 4), [2, -1, 0, 2])):
        feeds = {"x": harness.rand(shape, seed=shape[0]), "p": np.array(pads, np.int64)}
        np.testing.assert_array_equal(s.run(None, feeds)[0], ref.run(None, feeds)[0])


@pytest.mark.parametrize("mode,shape,pads,match", [
    ("reflect", (3, 4), [0, 4, 0, 0], "reflect pads"),
    ("reflect", (3, 4), [0, -2, 0, 2], "reflect pads"),
    ("edge", (0, 4), [1, 0, 0, 0], "empty"),
    ("wrap", (0, 4), [0, 0, 1, 0], "empty"),
    ("constant", (3, 4), [0, -3, 0, -2], "crop"),
])
def test_pad_invalid_fails_naming_the_node(mode, shape, pads, match):
    """ORT rejects these too; the session stays usable."""
    m = pad_model(TensorProto.FLOAT, ["A", "B"], mode, pads=pads)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match=f"'n'.*{match}"):
        s.run(None, {"x": harness.rand(shape), "p": np.array(pads, np.int64)})
    good = {"x": harness.rand((3, 4)), "p": np.array([1, 1, 1, 1], np.int64)}
    np.testing.assert_array_equal(s.run(None, good)[0], harness.cpu_session(m).run(None, good)[0])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0, 0)], ids=str)
def test_pad_of_empty_tensor_grid(mode, shape):
    """A tensor with a zero-size dim under every pad of -1, 0 or 2 per side (the fuzzer's
    finding: negative pads cropping an empty axis, edge/reflect padding another axis, failed the
    run). Output position j reads input position j - pad_begin, so cropping an empty axis by 1
    and padding it by 2 gives one padded element; an output with no element is empty in every
    mode; edge/reflect padding an empty axis fails, naming the node. ORT's CPU provider answers
    each the same way."""
    import itertools
    for pads in itertools.product((-1, 0, 2), repeat=4):
        m = pad_model(TensorProto.FLOAT, [None, None], mode, pads=list(pads), pads_input=False)
        run_both(m, {"x": np.zeros(shape, np.float32)})


@pytest.mark.parametrize("mode,shape,pads,out", [
    ("wrap", (0, 3), [0, 1, 0, 1], (0, 5)),
    ("wrap", (2, 0), [1, -1, 0, 1], (3, 0)),
    ("edge", (3,), [-3, 0], (0,)),
    ("reflect", (2, 2), [-1, 0, -1, 1], (0, 3)),
])
def test_pad_to_an_empty_output(mode, shape, pads, out):
    """Outputs that hold no element, by the spec's shape rule; ORT's CPU provider fails them
    (its wrap mode has no empty-input case; a crop to nothing it calls a zero effective extent),
    so numpy's shape is the reference (tools/fuzz/known.py's oracle exception for empty
    answers)."""
    m = pad_model(TensorProto.FLOAT, [None] * len(shape), mode, pads=pads, pads_input=False)
    got, placed = harness.run_on_mlx(m, {"x": np.ones(shape, np.float32)})
    assert placed == {"n": harness.EP}
    assert got[0].shape == out


@pytest.mark.parametrize("mode,shape,pads", [("edge", (0, 3), [1, 0, 0, 0]),
                                             ("reflect", (2, 0), [0, 0, 0, 1]),
                                             ("wrap", (0, 3), [1, 0, 0, 0]),
                                             ("edge", (3,), [-4, 1])])
def test_pad_repeating_an_empty_axis_fails_naming_the_node(mode, shape, pads):
    """edge/reflect/wrap of an axis that is empty (or cropped to nothing) into an output that
    holds elements: there is no element to repeat."""
    import ops_failures as of
    m = pad_model(TensorProto.FLOAT, [None] * len(shape), mode, pads=pads)
    good = np.arange(1, 1 + np.prod([d or 3 for d in shape]), dtype=np.float32)
    of.rejects_then_runs(m, {"x": np.zeros(shape, np.float32), "p": np.array(pads, np.int64)},
                         {"x": good.reshape([d or 3 for d in shape]),
                          "p": np.zeros(len(pads), np.int64)}, cpu_errs=mode != "wrap")


I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pads", [[0, I64_MAX, 0, 0], [0, 0, 0, I64_MAX], [0, I64_MIN, 0, 0],
                                  [0, -5, 0, 0], [0, -2, 0, -2], [I64_MIN, 0, I64_MIN, 0]],
                         ids=str)
def test_pad_extreme_pads_fail_naming_the_node(mode, pads):
    """A pad of INT64_MAX overflowed the output size and came out as a crop; INT64_MIN (which has
    no negation) left the axis whole; crops beyond the axis. ORT's CPU provider fails all of them;
    so do we, naming the node, and the session runs a valid input afterwards."""
    import ops_failures as of
    m = pad_model(TensorProto.FLOAT, [2, 3], mode, pads=pads)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    of.rejects_then_runs(m, {"x": x, "p": np.array(pads, np.int64)},
                         {"x": x, "p": np.array([1, 1, 0, 2], np.int64)})


def test_pad_wrap_declined_before_opset_19(tmp_path):
    m = pad_model(TensorProto.FLOAT, [3, 4], "wrap", 18, [1, 1, 1, 1], pads_input=False)
    oc.check_declined(m, None, "n", "wrap from opset 19", tmp_path)


def test_compiled_keyed_pad():
    """Constant pads keep the group compiled (keyed on shapes) without a fallback."""
    nodes = [helper.make_node("Pad", ["x", "p"], ["t"], name="pad", mode="reflect"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 4])],
                           [("y", TensorProto.FLOAT, None)],
                           initializers=[("p", np.array([1, 2, -1, 3], np.int64))], opset=19)
    feeds = [{"x": harness.rand((n, 4), seed=n)} for n in (3, 6, 3)]
    oc.check_compiled(m, feeds, path="keyed")


# --- CenterCropPad ----------------------------------------------------------------------------
def ccp_model(elem, shape, n_axes, axes=None):
    attrs = {"axes": axes} if axes is not None else {}
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, shape), ("s", I64, [n_axes])],
                              [("y", elem, None)], opset=18)


@pytest.mark.parametrize("axes,target", [(None, [3, 4, 5]), (None, [1, 7, 2]), ([1], [8]),
                                         ([-1, 0], [2, 6]), ([0, 2], [4, 9])], ids=str)
def test_center_crop_pad(axes, target):
    x = harness.rand((3, 4, 5))
    m = ccp_model(TensorProto.FLOAT, ["A", 4, "C"], len(target), axes)
    harness.check_against_cpu(m, {"x": x, "s": np.array(target, np.int64)})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_center_crop_pad_dtypes(dtype):
    x = data((4, 5), dtype)
    oc.check_wide(lambda e: ccp_model(e, ["A", 5], 2), {"x": x, "s": np.array([3, 8])}, dtype,
                  data={"x"})
