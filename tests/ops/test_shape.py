"""Shape rows (src/ops/shape.c): Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Concat, Expand,
Shape, Identity, Cast, Split, Tile, DepthToSpace, SpaceToDepth, Size, Dropout, Trilu, EyeLike and
ReverseSequence over every MLX dtype, the opset versions where their semantics change, negative
axes, symbolic (dynamic) dims and shape inputs that are constant or computed at run time. Each
model is proven to run on MLX and compared with ORT's CPU provider (bfloat16 against the float32
model, see ops_common; dtypes ORT lacks kernels for through ops_common.check_wide). Pad and
CenterCropPad are in test_pad.py."""
import json

import ml_dtypes
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


def data(shape, dtype, seed=0):
    """Test values for dtype: floats are made in float32 (ops_common casts them)."""
    dtype = np.dtype(dtype)
    if dtype in (F32, F16, BF16):
        return harness.rand(shape, np.float32, seed=seed)
    return harness.rand(shape, dtype, seed=seed)


def one(op, inputs, attrs=None, inits=(), opset=17, out_elem=None):
    """A one-node model whose node is named 'n' and takes the graph inputs, then the constant
    initializers, in order. inputs: [(name, elem, shape)]; inits: [(name, array)]."""
    names = [i[0] for i in inputs] + [i[0] for i in inits]
    node = helper.make_node(op, names, ["y"], name="n", **(attrs or {}))
    out = out_elem if out_elem is not None else inputs[0][1]
    return harness.make_model([node], inputs, [("y", out, None)], initializers=inits, opset=opset)


# --- Reshape --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_reshape_dtypes(dtype):
    x = data((2, 3, 4), dtype)
    oc.check(lambda e: one("Reshape", [("x", e, x.shape)], inits=[("s", np.array([4, -1]))]),
             {"x": x}, dtype)


@pytest.mark.parametrize("opset", [5, 13, 14, 19, 21])
@pytest.mark.parametrize("in_shape,spec", [
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [0, 0, 2, 2]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [3, 1, -1, 2]),
    ((6,), [1, 1, 6]),
    ((1,), []),
])
def test_reshape_specs(opset, in_shape, spec):
    x = harness.rand(in_shape)
    m = one("Reshape", [("x", TensorProto.FLOAT, in_shape)],
            inits=[("s", np.array(spec, np.int64))], opset=opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("allowzero", [0, 1])
def test_reshape_allowzero(allowzero):
    """allowzero=1 (opset 14+) keeps a 0 in the shape as an empty dim instead of copying."""
    x = harness.rand((0, 3))
    spec = [3, 0] if allowzero else [0, 3]
    m = one("Reshape", [("x", TensorProto.FLOAT, [0, 3])], {"allowzero": allowzero},
            inits=[("s", np.array(spec, np.int64))], opset=14)
    got, _, _ = harness.check_against_cpu(m, {"x": x})
    assert got[0].shape == ((3, 0) if allowzero else (0, 3))


def test_reshape_shape_from_graph_input():
    """A shape that is not a constant is read on the host at run time."""
    x = harness.rand((2, 3, 4))
    m = one("Reshape", [("x", TensorProto.FLOAT, [2, 3, 4]), ("s", I64, [3])])
    harness.check_against_cpu(m, {"x": x, "s": np.array([4, 0, -1], np.int64)})
    harness.check_against_cpu(m, {"x": x, "s": np.array([-1, 2, 2], np.int64)})


def test_reshape_dynamic_dims_one_session():
    """Symbolic dims: one session runs several batch sizes."""
    m = one("Reshape", [("x", TensorProto.FLOAT, ["N", 3, 4])],
            inits=[("s", np.array([0, -1], np.int64))])
    s = harness.mlx_session(m)
    ref = harness.cpu_session(m)
    for n in (1, 2, 5, 2):
        x = harness.rand((n, 3, 4), seed=n)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    assert set(harness.assignment(s).values()) == {harness.EP}


def test_shape_chain_computed_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the shape is computed on MLX (the last
    dim moves, so ORT's ReshapeFusion cannot turn the chain into a constant [0, -1])."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"], name="shape"),
        helper.make_node("Gather", ["sh", "i2"], ["w"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["w", "ax0"], ["w1"], name="unsq"),
        helper.make_node("Concat", ["minus1", "w1"], ["spec"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "spec"], ["y"], name="reshape"),
    ]
    inits = [("i2", np.array(-1, np.int64)), ("ax0", np.array([0], np.int64)),
             ("minus1", np.array([-1], np.int64))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3, "W"])],
                           [("y", TensorProto.FLOAT, None)], initializers=inits)
    for shape in [(2, 3, 4), (5, 3, 1)]:
        got, _, _ = harness.check_against_cpu(m, {"x": harness.rand(shape)})
        assert got[0].shape == (shape[0] * 3, shape[2])


@pytest.mark.parametrize("spec", [[[2, 3]], [[6]], 6], ids=str)
def test_reshape_shape_not_1d_fails_naming_the_node(spec):
    """The shape input must be 1-D. With its rank known, ONNX's shape inference rejects the model
    before any provider sees it (the claim declines it too); with the rank unknown, ORT's CPU
    kernel fails the run and so do we (we used to flatten it), and the session goes on."""
    import ops_failures as of
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="n")
    m = harness.make_model([node], [("x", TensorProto.FLOAT, [2, 3]),
                                    helper.make_tensor_value_info("s", I64, None)],
                           [("y", TensorProto.FLOAT, None)], opset=14)
    x = harness.rand((2, 3))
    of.rejects_then_runs(m, {"x": x, "s": np.array(spec, np.int64)},
                         {"x": x, "s": np.array([3, -1], np.int64)})


def test_reshape_rank_over_16_declined(tmp_path):
    x = harness.rand((2, 3))
    spec = np.array([2, 3] + [1] * 15, np.int64)
    m = one("Reshape", [("x", TensorProto.FLOAT, [2, 3])], inits=[("s", spec)])
    oc.check_declined(m, {"x": x}, "n", "at most 16", tmp_path)


# --- Transpose ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_transpose_dtypes(dtype):
    x = data((2, 3, 4), dtype)
    oc.check(lambda e: one("Transpose", [("x", e, ["A", 3, "C"])], {"perm": [2, 0, 1]}),
             {"x": x}, dtype)


@pytest.mark.parametrize("opset", [1, 13, 21])
@pytest.mark.parametrize("perm", [None, [0, 1, 2, 3], [3, 1, 0, 2], [1, 0, 3, 2]])
def test_transpose_perms(opset, perm):
    x = harness.rand((2, 3, 4, 5))
    attrs = {} if perm is None else {"perm": perm}
    harness.check_against_cpu(one("Transpose", [("x", TensorProto.FLOAT, x.shape)], attrs,
                                  opset=opset), {"x": x})


# --- Squeeze / Unsqueeze ----------------------------------------------------------------------
@pytest.mark.parametrize("opset,axes", [
    (1, [1, 3]), (11, [1, -1]), (11, None), (13, [-3]), (13, [3, 1]), (13, None), (21, [1]),
])
def test_squeeze(opset, axes):
    x = harness.rand((2, 1, 3, 1))
    if opset < 13:
        attrs = {} if axes is None else {"axes": axes}
        m = one("Squeeze", [("x", TensorProto.FLOAT, ["N", 1, 3, 1])], attrs, opset=opset)
    else:
        inits = [] if axes is None else [("a", np.array(axes, np.int64))]
        m = one("Squeeze", [("x", TensorProto.FLOAT, ["N", 1, 3, 1])], inits=inits, opset=opset)
    harness.check_against_cpu(m, {"x": x})


def test_squeeze_axes_from_graph_input():
    x = harness.rand((2, 1, 3, 1))
    m = one("Squeeze", [("x", TensorProto.FLOAT, x.shape), ("a", I64, [1])], opset=13)
    harness.check_against_cpu(m, {"x": x, "a": np.array([-1], np.int64)})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_squeeze_unsqueeze_dtypes(dtype):
    x = data((3, 1, 4), dtype)
    nodes = [helper.make_node("Squeeze", ["x", "a"], ["s"], name="sq"),
             helper.make_node("Unsqueeze", ["s", "b"], ["y"], name="unsq")]
    oc.check(lambda e: harness.make_model(
        nodes, [("x", e, x.shape)], [("y", e, None)],
        initializers=[("a", np.array([1], np.int64)), ("b", np.array([0, -1], np.int64))]),
        {"x": x}, dtype)


@pytest.mark.parametrize("opset,axes", [
    (1, [0, 3]), (11, [0, -1]), (11, [-2]), (13, [2, 0]), (13, [-1, 1, 0]), (21, [1]),
])
def test_unsqueeze(opset, axes):
    x = harness.rand((2, 3))
    if opset < 13:
        m = one("Unsqueeze", [("x", TensorProto.FLOAT, ["N", 3])], {"axes": axes}, opset=opset)
    else:
        m = one("Unsqueeze", [("x", TensorProto.FLOAT, ["N", 3])],
                inits=[("a", np.array(axes, np.int64))], opset=opset)
    harness.check_against_cpu(m, {"x": x})


def test_unsqueeze_scalar_and_axes_from_graph_input():
    m = one("Unsqueeze", [("x", TensorProto.FLOAT, []), ("a", I64, [2])], opset=13)
    harness.check_against_cpu(m, {"x": np.array(3.5, np.float32), "a": np.array([0, 1])})


@pytest.mark.parametrize("opset", [1, 10])
def test_squeeze_negative_axes_before_opset_11(opset):
    """ONNX Runtime's kernel counts negative axes from the back before opset 11 too."""
    x = harness.rand((2, 1, 3, 1))
    m = one("Squeeze", [("x", TensorProto.FLOAT, x.shape)], {"axes": [-3, -1]}, opset=opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("opset", [1, 10])
@pytest.mark.parametrize("axes", [[-1], [-3], [0, -1]], ids=str)
def test_unsqueeze_negative_axes_before_opset_11(opset, axes):
    """Negative axes count from the back of the output, as ONNX Runtime does at every opset."""
    x = harness.rand((2, 3))
    m = one("Unsqueeze", [("x", TensorProto.FLOAT, x.shape)], {"axes": axes}, opset=opset)
    harness.check_against_cpu(m, {"x": x})


# --- Flatten --------------------------------------------------------------------------------
@pytest.mark.parametrize("opset,axis", [
    (1, 1), (9, 0), (9, 2), (9, 3), (11, -1), (11, -3), (13, 0), (13, 1), (13, 3), (21, -2),
])
def test_flatten(opset, axis):
    x = harness.rand((2, 3, 4))
    m = one("Flatten", [("x", TensorProto.FLOAT, ["N", 3, "W"])], {"axis": axis}, opset=opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_flatten_dtypes(dtype):
    x = data((2, 3, 2, 2), dtype)
    oc.check(lambda e: one("Flatten", [("x", e, x.shape)], {"axis": 2}), {"x": x}, dtype)


def test_flatten_default_axis():
    x = harness.rand((4, 2, 3))
    harness.check_against_cpu(one("Flatten", [("x", TensorProto.FLOAT, x.shape)]), {"x": x})



# --- Concat ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_concat_dtypes(dtype):
    a, b = data((2, 3), dtype, seed=1), data((2, 1), dtype, seed=2)
    oc.check(lambda e: one("Concat", [("a", e, [2, 3]), ("b", e, [2, 1])], {"axis": 1}),
             {"a": a, "b": b}, dtype)


@pytest.mark.parametrize("opset,axis", [(4, 0), (4, 2), (11, -1), (11, -3), (13, 1), (13, -2)])
def test_concat_axes(opset, axis):
    shapes = [[2, 3, 4] for _ in range(3)]
    for i in (1, 2):
        shapes[i][axis] = i
    feeds = {f"x{i}": harness.rand(s, seed=i) for i, s in enumerate(shapes)}
    m = one("Concat", [(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
            {"axis": axis}, opset=opset)
    harness.check_against_cpu(m, feeds)


def test_concat_dynamic_and_empty():
    a, b, c = harness.rand((2, 0)), harness.rand((2, 5)), harness.rand((2, 1))
    m = one("Concat", [("a", TensorProto.FLOAT, [2, "A"]), ("b", TensorProto.FLOAT, [2, "B"]),
                       ("c", TensorProto.FLOAT, [2, "C"])], {"axis": -1})
    harness.check_against_cpu(m, {"a": a, "b": b, "c": c})


@pytest.mark.parametrize("opset", [4, 10])
def test_concat_negative_axis_before_opset_11(opset):
    """ONNX Runtime's kernel counts a negative axis from the back before opset 11 too."""
    a, b = harness.rand((2, 3)), harness.rand((2, 1), seed=1)
    m = one("Concat", [("a", TensorProto.FLOAT, [2, 3]), ("b", TensorProto.FLOAT, [2, 1])],
            {"axis": -1}, opset=opset)
    harness.check_against_cpu(m, {"a": a, "b": b})


# --- Expand ---------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [8, 13])
@pytest.mark.parametrize("in_shape,spec", [
    ((3, 1), [2, 1, 4]),   # grows rank and broadcasts the 1
    ((3, 4), [1]),         # shape smaller than the input: bidirectional
    ((1,), [3]),
    ((2, 1, 1), [2, 3, 1]),
    ((4,), []),
    ((2, 1), [2, 0]),      # broadcast to an empty dim
])
def test_expand(opset, in_shape, spec):
    x = harness.rand(in_shape)
    m = one("Expand", [("x", TensorProto.FLOAT, in_shape)],
            inits=[("s", np.array(spec, np.int64))], opset=opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_expand_dtypes(dtype):
    x = data((3, 1), dtype)
    oc.check(lambda e: one("Expand", [("x", e, ["N", 1])], inits=[("s", np.array([2, 1, 4]))]),
             {"x": x}, dtype)


def test_expand_shape_from_graph_input():
    x = harness.rand((3, 1))
    m = one("Expand", [("x", TensorProto.FLOAT, ["N", 1]), ("s", I64, ["K"])])
    harness.check_against_cpu(m, {"x": x, "s": np.array([2, 3, 5], np.int64)})
    harness.check_against_cpu(m, {"x": x, "s": np.array([1, 1], np.int64)})


# --- Shape ----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset,start,end", [
    (1, None, None), (13, None, None), (15, None, None), (15, 1, None), (15, -1, None),
    (15, 0, -1), (15, -10, 10), (15, 2, 1), (15, 4, None), (19, 1, 3), (21, -3, -1),
])
def test_shape(opset, start, end):
    x = harness.rand((2, 3, 4, 5))
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    m = one("Shape", [("x", TensorProto.FLOAT, ["N", "C", "H", "W"])], attrs, opset=opset,
            out_elem=I64)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_shape_dtypes(dtype):
    x = data((2, 0, 3), dtype)
    oc.check(lambda e: one("Shape", [("x", e, ["A", "B", "C"])], out_elem=I64), {"x": x}, dtype)



# --- Identity -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_identity(dtype):
    x = data((2, 3), dtype)
    oc.check(lambda e: one("Identity", [("x", e, ["N", 3])]), {"x": x}, dtype)


@pytest.mark.parametrize("opset", [1, 13, 14, 16, 19, 21])
def test_identity_opsets(opset):
    x = harness.rand((4,))
    harness.check_against_cpu(one("Identity", [("x", TensorProto.FLOAT, [4])], opset=opset),
                              {"x": x})


# --- Cast -----------------------------------------------------------------------------------
NP_ALL = [F32, F16] + INTS + [BOOL]


def cast_source(dtype, to):
    """Values valid to cast from dtype to `to`: floats keep fractions (truncation is tested) and
    stay non-negative toward unsigned types (negative float -> unsigned is undefined in C)."""
    dtype, to = np.dtype(dtype), np.dtype(to)
    if dtype.kind == "f":
        v = np.array([-3.7, -1.5, -0.0, 0.0, 0.25, 1.9, 2.5, 100.7, -100.2, 7.0])
        if to.kind == "u":
            v = np.abs(v)
        return v.astype(dtype).reshape(2, 5)
    if dtype == BOOL:
        return np.array([[True, False, True, True, False], [False, True, True, False, True]])
    return harness.rand((2, 5), dtype, seed=3)


@pytest.mark.parametrize("to", NP_ALL, ids=str)
@pytest.mark.parametrize("src", NP_ALL, ids=str)
def test_cast_pairs(src, to):
    if src == to:
        pytest.skip("ORT removes a Cast to the same type before partitioning")
    x = cast_source(src, to)
    m = one("Cast", [("x", harness.onnx_type(src), ["N", 5])], {"to": harness.onnx_type(to)},
            out_elem=harness.onnx_type(to), opset=13)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_opsets(opset):
    x = cast_source(F32, np.int32)
    m = one("Cast", [("x", TensorProto.FLOAT, [2, 5])], {"to": TensorProto.INT32},
            out_elem=TensorProto.INT32, opset=opset)
    got, _, _ = harness.check_against_cpu(m, {"x": x})
    np.testing.assert_array_equal(got[0], np.trunc(x).astype(np.int32))


def test_cast_integer_narrowing_wraps():
    x = np.array([300, -129, 65535, -1, 2**40 + 5, -(2**33) - 7], np.int64)
    for to in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.uint64):
        m = one("Cast", [("x", I64, [6])], {"to": harness.onnx_type(to)},
                out_elem=harness.onnx_type(to))
        harness.check_against_cpu(m, {"x": x})


def test_cast_float_to_bool_is_nonzero():
    x = np.array([0.0, -0.0, 0.5, -2.0, np.inf, 1e-30], np.float32)
    m = one("Cast", [("x", TensorProto.FLOAT, [6])], {"to": TensorProto.BOOL},
            out_elem=TensorProto.BOOL)
    got, _, _ = harness.check_against_cpu(m, {"x": x})
    np.testing.assert_array_equal(got[0], x != 0)


@pytest.mark.parametrize("to", [TensorProto.INT32, TensorProto.FLOAT, TensorProto.FLOAT16,
                                TensorProto.BOOL, TensorProto.UINT8])
def test_cast_from_bfloat16(to):
    """bfloat16 -> T; the float32 model run on CPU is the reference."""
    x = np.abs(cast_source(F32, np.uint8))
    oc.check(lambda e: one("Cast", [("x", e, [2, 5])], {"to": to}, out_elem=to), {"x": x}, BF16)


@pytest.mark.parametrize("src", [F32, F16, np.dtype(np.int32), np.dtype(np.int64), BOOL],
                         ids=str)
def test_cast_to_bfloat16(src):
    """T -> bfloat16 rounds to nearest even, as ml_dtypes does."""
    x = cast_source(src, np.int32)
    if src.kind == "f":
        x = (x * np.float32(1.001)).astype(src)  # bits below bfloat16's precision
    m = one("Cast", [("x", harness.onnx_type(src), [2, 5])], {"to": TensorProto.BFLOAT16},
            out_elem=TensorProto.BFLOAT16)
    got, placed = oc.run_bf16_on_mlx(m, {"x": x}, [x.shape])
    assert placed["n"] == harness.EP
    want = x.astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got[0].view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("to", [TensorProto.STRING], ids=["string"])
def test_cast_to_types_mlx_lacks_declined(to, tmp_path):
    """The generic boundary check declines them; ORT's CPU provider runs the Cast (compared as
    strings). Float8/int4/float4/int2 are carried instead: tests/ops/test_lowbit.py."""
    x = harness.rand((2, 3))
    m = one("Cast", [("x", TensorProto.FLOAT, [2, 3])], {"to": to}, out_elem=to)
    s = harness.mlx_session(m, allow_cpu=True, provider_options={
        "report_file": str(tmp_path / "r.json")})
    assert harness.assignment(s) == {"n": "CPUExecutionProvider"}
    reasons = {d["name"]: d["reason"]
               for d in json.loads((tmp_path / "r.json").read_text())["declined"]}
    assert "MLX cannot hold" in reasons["n"]
    got, ref = s.run(None, {"x": x}), harness.cpu_session(m).run(None, {"x": x})
    assert np.array_equal(np.asarray(got[0]).astype(str), np.asarray(ref[0]).astype(str))


# --- compiled paths -------------------------------------------------------------------------
def test_compiled_shapeless_rank_only_ops():
    """Transpose, Flatten, Unsqueeze (attribute axes), Concat and Cast depend on ranks only: one
    shapeless compiled function serves every batch size."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[0, 2, 1]),
             helper.make_node("Flatten", ["t"], ["f"], name="fl", axis=1),
             helper.make_node("Unsqueeze", ["f"], ["u"], name="un", axes=[-1]),
             helper.make_node("Concat", ["u", "u"], ["c"], name="cc", axis=-1),
             helper.make_node("Cast", ["c"], ["y"], name="ca", to=TensorProto.INT32)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3, 4])],
                           [("y", TensorProto.INT32, None)], opset=11)
    feeds = [{"x": harness.rand((n, 3, 4), low=-9, high=9, seed=n)} for n in (2, 5, 1)]
    oc.check_compiled(m, feeds, path="shapeless")


def test_compiled_keyed_shape_reads():
    """Reshape, Expand and Squeeze-13 read constant shapes/axes and concrete dims: compiled once
    per input shape, with no fallback to eager translation."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="rs"),
             helper.make_node("Expand", ["r", "e"], ["ex"], name="ex"),
             helper.make_node("Squeeze", ["ex", "a"], ["y"], name="sq")]
    inits = [("s", np.array([0, 1, -1], np.int64)), ("e", np.array([1, 3, 1], np.int64)),
             ("a", np.array([0], np.int64))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, [1, "N", 4])],
                           [("y", TensorProto.FLOAT, None)], initializers=inits, opset=13)
    feeds = [{"x": harness.rand((1, n, 4), seed=n)} for n in (2, 5, 2)]
    oc.check_compiled(m, feeds, path="keyed")


# --- Split, Tile, DepthToSpace, SpaceToDepth, Size, Dropout, Trilu, EyeLike, ReverseSequence ---
# Data-movement rows are swept over every MLX dtype with ops_common.check_wide: ORT's CPU
# kernels lack several of those dtypes, so the reference runs the same values as float32/int64.
def split_model(elem, shape, n_out, opset=18, attrs=None, split=None, split_input=False):
    """Split into n_out outputs; split (opset 13+) as an initializer, or a graph input."""
    inputs, inits, names = [("x", elem, shape)], [], ["x"]
    if split is not None:
        names.append("s")
        if split_input:
            inputs.append(("s", I64, [len(split)]))
        else:
            inits.append(("s", np.array(split, np.int64)))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node("Split", names, outs, name="n", **(attrs or {}))
    return harness.make_model([node], inputs, [(o, elem, None) for o in outs],
                              initializers=inits, opset=opset)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_split_dtypes(dtype):
    x = data((2, 7), dtype)
    oc.check_wide(lambda e: split_model(e, ["N", 7], 3, attrs={"axis": -1, "num_outputs": 3}),
                  {"x": x}, dtype, data={"x"})


@pytest.mark.parametrize("opset,attrs,n_out,split", [
    (2, {"axis": 1}, 2, None),                        # equal parts
    (2, {"axis": 0, "split": [1, 3]}, 2, None),
    (11, {"axis": -1, "split": [2, 0, 4]}, 3, None),  # an empty part
    (11, {"axis": -2}, 4, None),
    (13, {"axis": 1}, 3, [3, 1, 2]),
    (13, {"axis": 0}, 2, None),
    (18, {"axis": 1}, 2, [5, 1]),
    (18, {"axis": 1, "num_outputs": 3}, 3, None),
    (18, {"axis": 1, "num_outputs": 4}, 4, None),     # chunks of 2: the last would be empty
    (18, {"axis": -1, "num_outputs": 5}, 5, None),    # chunks of 2: runs out before the last
    (18, {"axis": 0, "num_outputs": 3}, 3, None),     # 4 rows: 2, 2, then nothing
    (18, {"axis": 0, "num_outputs": 5}, 5, None),     # more outputs than rows
])
def test_split_forms(opset, attrs, n_out, split):
    """Each form equals ORT's CPU provider, or fails on MLX (naming the node) where ORT fails."""
    x = harness.rand((4, 6))
    m = split_model(TensorProto.FLOAT, ["N", 6], n_out, opset, attrs, split)
    ref = harness.cpu_session(m)
    try:
        want = ref.run(None, {"x": x})
    except Exception:  # ONNX Runtime rejects this split: so must the MLX EP, naming the node
        with pytest.raises(Exception, match="'n'"):
            harness.mlx_session(m).run(None, {"x": x})
        return
    got, placed = harness.run_on_mlx(m, {"x": x})
    assert placed == {"n": harness.EP}
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_split_uneven_num_outputs():
    """Opset 18: ceil-sized chunks with a smaller last one (7 -> 3, 3, 1)."""
    x = harness.rand((2, 7))
    m = split_model(TensorProto.FLOAT, [2, "W"], 3, attrs={"axis": 1, "num_outputs": 3})
    got, _, _ = harness.check_against_cpu(m, {"x": x})
    assert [g.shape[1] for g in got] == [3, 3, 1]


def test_split_sizes_from_graph_input():
    x = harness.rand((3, 6))
    m = split_model(TensorProto.FLOAT, [3, 6], 3, 13, {"axis": 1}, [0, 0, 0], split_input=True)
    s = harness.mlx_session(m)
    for sizes in ([1, 2, 3], [6, 0, 0], [2, 2, 2]):
        feeds = {"x": x, "s": np.array(sizes, np.int64)}
        for g, w in zip(s.run(None, feeds), harness.cpu_session(m).run(None, feeds)):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(Exception, match="'n'.*sum"):
        s.run(None, {"x": x, "s": np.array([1, 1, 1], np.int64)})
    assert s.run(None, {"x": x, "s": np.array([3, 3, 0], np.int64)})[2].shape == (3, 0)


@pytest.mark.parametrize("opset", [2, 10])
@pytest.mark.parametrize("split", [None, [2, 4]], ids=["equal", "sizes"])
def test_split_negative_axis_before_opset_11(opset, split):
    """Split-2 with axis -1 (as in the pytorch-converted test_GLU) runs as ONNX Runtime runs it."""
    attrs = {"axis": -1} if split is None else {"axis": -1, "split": split}
    m = split_model(TensorProto.FLOAT, [4, 6], 2, opset, attrs)
    harness.check_against_cpu(m, {"x": harness.rand((4, 6))})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_tile_dtypes(dtype):
    x = data((2, 3), dtype)
    oc.check_wide(lambda e: one("Tile", [("x", e, ["N", 3])], inits=[("r", np.array([2, 3]))],
                                opset=13), {"x": x}, dtype, data={"x"})


@pytest.mark.parametrize("opset", [6, 13])
@pytest.mark.parametrize("shape,reps", [((2, 3), [1, 1]), ((2, 3), [3, 2]), ((4,), [0]),
                                        ((2, 1, 3), [1, 4, 0]), ((), [])], ids=str)
def test_tile(opset, shape, reps):
    x = harness.rand(shape)
    m = one("Tile", [("x", TensorProto.FLOAT, list(shape)), ("r", I64, [len(reps)])],
            opset=opset)
    harness.check_against_cpu(m, {"x": x, "r": np.array(reps, np.int64)})


def test_tile_dynamic_dims_and_bad_repeats():
    m = one("Tile", [("x", TensorProto.FLOAT, ["A", "B"]), ("r", I64, [2])], opset=13)
    s, ref = harness.mlx_session(m), harness.cpu_session(m)
    for shape, reps in (((2, 3), [2, 1]), ((1, 5), [3, 2]), ((2, 3), [1, 1])):
        feeds = {"x": harness.rand(shape), "r": np.array(reps, np.int64)}
        np.testing.assert_array_equal(s.run(None, feeds)[0], ref.run(None, feeds)[0])
    with pytest.raises(Exception, match="'n'.*repeats"):
        s.run(None, {"x": harness.rand((2, 3)), "r": np.array([-1, 2], np.int64)})


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("op,attrs", [("DepthToSpace", {"blocksize": 2, "mode": "DCR"}),
                                      ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}),
                                      ("SpaceToDepth", {"blocksize": 2})], ids=str)
def test_depth_space_dtypes(dtype, op, attrs):
    shape = (2, 8, 2, 3) if op == "DepthToSpace" else (2, 2, 4, 6)
    x = data(shape, dtype)
    oc.check_wide(lambda e: one(op, [("x", e, ["N", shape[1], shape[2], shape[3]])], attrs,
                                opset=13), {"x": x}, dtype, data={"x"}, via=F32)


@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("block", [1, 2, 3])
@pytest.mark.parametrize("mode", [None, "DCR", "CRD"])
def test_depth_to_space(opset, block, mode):
    if mode and opset < 11:
        pytest.skip("the mode attribute is defined from DepthToSpace-11")
    x = harness.rand((2, 2 * block * block, 3, 2), seed=block)
    attrs = {"blocksize": block} | ({"mode": mode} if mode else {})
    m = one("DepthToSpace", [("x", TensorProto.FLOAT, list(x.shape))], attrs, opset=opset)
    harness.check_against_cpu(m, {"x": x})


@pytest.mark.parametrize("opset", [1, 13])
@pytest.mark.parametrize("block", [1, 2, 3])
def test_space_to_depth(opset, block):
    x = harness.rand((2, 3, 2 * block, 3 * block), seed=block)
    m = one("SpaceToDepth", [("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
            {"blocksize": block}, opset=opset)
    harness.check_against_cpu(m, {"x": x})


def test_depth_to_space_indivisible_fails_naming_the_node():
    m = one("DepthToSpace", [("x", TensorProto.FLOAT, ["N", "C", 2, 2])], {"blocksize": 2},
            opset=13)
    with pytest.raises(Exception, match="'n'.*divide"):
        harness.mlx_session(m).run(None, {"x": harness.rand((1, 6, 2, 2))})


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_size_dtypes(dtype):
    x = data((2, 3), dtype)
    oc.check_wide(lambda e: one("Size", [("x", e, ["N", 3])], opset=13, out_elem=I64),
                  {"x": x}, dtype, data={"x"})


@pytest.mark.parametrize("opset", [1, 13, 19, 21])
@pytest.mark.parametrize("shape", [(), (0, 4), (3, 1, 5)], ids=str)
def test_size(opset, shape):
    m = one("Size", [("x", TensorProto.FLOAT, list(shape))], opset=opset, out_elem=I64)
    got, _, _ = harness.check_against_cpu(m, {"x": harness.rand(shape)})
    assert got[0].shape == () and got[0] == int(np.prod(shape))


def dropout_model(elem, opset, mask=True, ratio=None, training=None, training_input=False):
    names, inputs, inits = ["x"], [("x", elem, ["N", 3])], []
    if ratio is not None or training is not None or training_input:
        names.append("r" if ratio is not None else "")
        if ratio is not None:
            inits.append(("r", np.array(ratio, np.float32)))
    if training_input:
        names.append("t")
        inputs.append(("t", TensorProto.BOOL, []))
    elif training is not None:
        names.append("t")
        inits.append(("t", np.array(training)))
    mask_elem = TensorProto.BOOL if opset >= 10 else elem
    outs = [("y", elem, None)] + ([("m", mask_elem, None)] if mask else [])
    node = helper.make_node("Dropout", names, [o[0] for o in outs], name="n")
    return harness.make_model([node], inputs, outs, initializers=inits, opset=opset)


@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
@pytest.mark.parametrize("mask", [False, True])
def test_dropout_inference(opset, mask):
    """Identity; the mask is all true from opset 12 and all zero before (ORT's kernel)."""
    x = harness.rand((4, 3))
    got, _, _ = harness.check_against_cpu(dropout_model(TensorProto.FLOAT, opset, mask),
                                          {"x": x})
    if mask:
        assert got[1].all() == (opset >= 12) and got[1].any() == (opset >= 12)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_dropout_dtypes(dtype):
    oc.check(lambda e: dropout_model(e, 13, ratio=0.5, training=False), {"x": data((4, 3), F32)},
             dtype)


@pytest.mark.parametrize("training,training_input,reason", [
    (True, False, "training_mode is true"),
    (None, True, "training_mode is not a constant"),
])
def test_dropout_training_declined(training, training_input, reason, tmp_path):
    m = dropout_model(TensorProto.FLOAT, 13, mask=False, ratio=0.0, training=training,
                      training_input=training_input)
    feeds = {"x": harness.rand((4, 3))} | ({"t": np.array(False)} if training_input else {})
    oc.check_declined(m, feeds, "n", reason, tmp_path)


def test_compiled_dropout_shapeless():
    nodes = [helper.make_node("Dropout", ["x"], ["d", "m"], name="drop"),
             helper.make_node("Relu", ["d"], ["y"], name="relu")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3])],
                           [("y", TensorProto.FLOAT, None), ("m", TensorProto.BOOL, None)],
                           opset=13)
    feeds = [{"x": harness.rand((n, 3), seed=n)} for n in (2, 5, 2)]
    oc.check_compiled(m, feeds, path="shapeless")


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_dtypes(dtype, upper):
    x = data((2, 3, 4), dtype)
    oc.check_wide(lambda e: one("Trilu", [("x", e, ["B", 3, 4]), ("k", I64, [])],
                                {"upper": upper}, opset=14),
                  {"x": x, "k": np.array(1, np.int64)}, dtype, data={"x"})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -1, 3, -4, 100, -100,
                               np.iinfo(np.int64).max, np.iinfo(np.int64).min], ids=str)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 5, 3), (0, 2)], ids=str)
def test_trilu(upper, k, shape):
    x = harness.rand(shape)
    if k is None:
        m = one("Trilu", [("x", TensorProto.FLOAT, list(shape))], {"upper": upper}, opset=14)
        feeds = {"x": x}
    else:
        m = one("Trilu", [("x", TensorProto.FLOAT, list(shape)), ("k", I64, [])],
                {"upper": upper}, opset=14)
        feeds = {"x": x, "k": np.array(k, np.int64)}
    harness.check_against_cpu(m, feeds)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_eye_like_dtypes(dtype):
    """EyeLike-22 takes every MLX dtype; ORT's CPU kernel has only a few, so the reference is
    numpy's eye."""
    x = data((3, 4), dtype)
    m = one("EyeLike", [("x", oc.elem(dtype), ["N", 4])], {"k": -1}, opset=22)
    want = np.eye(3, 4, -1).astype(dtype)
    if dtype == BF16:
        got, placed = oc.run_bf16_on_mlx(m, {"x": x.astype(BF16)}, [want.shape])
        assert placed == {"n": harness.EP}
        np.testing.assert_array_equal(got[0].astype(np.float32), want.astype(np.float32))
    else:
        oc.check_ref(m, {"x": x.astype(dtype)}, [want])


@pytest.mark.parametrize("opset", [9, 22])
@pytest.mark.parametrize("to", [None, TensorProto.FLOAT, TensorProto.INT32, TensorProto.BOOL,
                                TensorProto.UINT8, TensorProto.FLOAT16, TensorProto.INT64])
@pytest.mark.parametrize("k", [0, 2, -2, 7, -7])
def test_eye_like(opset, to, k):
    x = harness.rand((3, 5))
    attrs = {"k": k} | ({"dtype": to} if to is not None else {})
    out = to if to is not None else TensorProto.FLOAT
    m = one("EyeLike", [("x", TensorProto.FLOAT, ["A", "B"])], attrs, opset=opset, out_elem=out)
    oc.check_ref(m, {"x": x}, [np.eye(3, 5, k).astype(helper.tensor_dtype_to_np_dtype(out))])


@pytest.mark.cpu_device
def test_eye_like_float64_claimed_on_cpu():
    """float64 output (the dtype attribute) is claimed on the CPU device; exact."""
    m = one("EyeLike", [("x", TensorProto.FLOAT, [3, 4])], {"dtype": TensorProto.DOUBLE, "k": 1},
            opset=9, out_elem=TensorProto.DOUBLE)
    got, ref, _ = harness.check_against_cpu(m, {"x": harness.rand((3, 4))})
    assert got[0].dtype == np.float64 and np.array_equal(got[0], ref[0])


@pytest.mark.parametrize("dtype", [F32, F16] + INTS + [BOOL], ids=str)
def test_reverse_sequence_dtypes(dtype):
    """ReverseSequence-10 is the only version; its types exclude bfloat16."""
    x = data((4, 3, 2), dtype)
    oc.check_wide(lambda e: one("ReverseSequence", [("x", e, ["T", 3, 2]), ("l", I64, [3])],
                                {"batch_axis": 1, "time_axis": 0}, opset=10),
                  {"x": x, "l": np.array([4, 0, 2], np.int64)}, dtype, data={"x"})


@pytest.mark.parametrize("batch_axis,time_axis", [(0, 1), (1, 0)])
@pytest.mark.parametrize("lens", [[1, 2, 3], [0, 5, 4], [5, 5, 5]], ids=str)
def test_reverse_sequence(batch_axis, time_axis, lens):
    shape = [5, 3, 2] if time_axis == 0 else [3, 5, 2]
    x = harness.rand(shape)
    m = one("ReverseSequence", [("x", TensorProto.FLOAT, shape), ("l", I64, [3])],
            {"batch_axis": batch_axis, "time_axis": time_axis}, opset=10)
    harness.check_against_cpu(m, {"x": x, "l": np.array(lens, np.int64)})


def test_reverse_sequence_bad_length_fails_naming_the_node():
    m = one("ReverseSequence", [("x", TensorProto.FLOAT, [3, 4]), ("l", I64, [3])],
            {"batch_axis": 0, "time_axis": 1}, opset=10)
    s = harness.mlx_session(m)
    x = harness.rand((3, 4))
    for bad in ([5, 0, 1], [1, -1, 1]):
        with pytest.raises(Exception, match=r"'n'.*sequence_lens must lie in \[0, 4\]"):
            s.run(None, {"x": x, "l": np.array(bad, np.int64)})
    good = {"x": x, "l": np.array([4, 0, 2], np.int64)}
    np.testing.assert_array_equal(s.run(None, good)[0], harness.cpu_session(m).run(None, good)[0])


def test_compiled_keyed_new_shape_rows():
    """Tile, DepthToSpace, Trilu and ReverseSequence compile per input shape (keyed) with a
    run-time check inside the trace and no fallback to eager translation."""
    nodes = [helper.make_node("Tile", ["x", "r"], ["t"], name="tile"),
             helper.make_node("DepthToSpace", ["t"], ["d"], name="d2s", blocksize=2),
             helper.make_node("Trilu", ["d"], ["u"], name="trilu", upper=0),
             helper.make_node("Reshape", ["u", "s"], ["v"], name="flat"),
             helper.make_node("ReverseSequence", ["v", "l"], ["y"], name="rev", batch_axis=0,
                              time_axis=1)]
    inits = [("r", np.array([1, 2, 1, 1], np.int64)), ("s", np.array([2, -1], np.int64))]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, [2, 4, "H", 2]), ("l", I64, [2])],
                           [("y", TensorProto.FLOAT, None)], initializers=inits, opset=14)
    feeds = [{"x": harness.rand((2, 4, h, 2), seed=h), "l": np.array([h, 1], np.int64)}
             for h in (1, 3, 1)]
    oc.check_compiled(m, feeds, path="keyed")
