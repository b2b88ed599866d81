"""Shape rows (src/ops/shape.c): Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Concat, Expand,
Shape, Identity and Cast over every MLX dtype, the opset versions where their semantics change,
negative axes, symbolic (dynamic) dims and shape inputs that are constant or computed at run time.
Each model is proven to run on MLX and compared with ORT's CPU provider (bfloat16 against the
float32 model, see ops_common)."""
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


def test_squeeze_negative_axes_declined_before_opset_11(tmp_path):
    x = harness.rand((2, 1, 3))
    m = one("Squeeze", [("x", TensorProto.FLOAT, x.shape)], {"axes": [-2]}, opset=1)
    oc.check_declined(m, {"x": x}, "n", "opset 11", tmp_path)


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


def test_concat_negative_axis_declined_before_opset_11(tmp_path):
    a = harness.rand((2, 3))
    m = one("Concat", [("a", TensorProto.FLOAT, [2, 3]), ("b", TensorProto.FLOAT, [2, 3])],
            {"axis": -1}, opset=10)
    oc.check_declined(m, {"a": a, "b": a}, "n", "opset 11", tmp_path)


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


@pytest.mark.parametrize("to", [TensorProto.DOUBLE, TensorProto.FLOAT8E4M3FN,
                                TensorProto.STRING], ids=["float64", "float8", "string"])
def test_cast_to_types_mlx_lacks_declined(to, tmp_path):
    """The generic boundary check declines them; ORT's CPU provider runs the Cast (compared as
    strings, which covers float8 and string outputs)."""
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
def test_compiled_shapeless_rank_only_ops(capfd):
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
    oc.check_compiled(m, feeds, capfd, path="shapeless")


def test_compiled_keyed_shape_reads(capfd):
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
    oc.check_compiled(m, feeds, capfd, path="keyed")
