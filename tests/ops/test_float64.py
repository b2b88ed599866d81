"""float64 on the CPU device: rows MLX computes exactly in float64 are claimed and agree with
ORT's CPU provider to within a few ulps; rows it would compute in float32 precision (exp, erf,
trigonometry) are declined with the reason, and the model still runs correctly.

The data-movement rows (src/ops/shape.c, index.c, constant.c) are bit-exact: every float64 output
must equal ORT's to the last bit (signed zeros, subnormals and values float32 cannot hold
included), which also proves no translation narrows a value to float32 on the way."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ops_common as oc
from mlx_harness import EP, check_against_cpu, cpu_session, make_model, run_on_mlx

pytestmark = pytest.mark.cpu_device  # float64 is claimed on the CPU device only

F64_EXACT = ["MatMul"]


def model(op, n_inputs, shape_a=(4, 5), shape_b=(5, 3)):
    names = ["a", "b"][:n_inputs]
    shapes = [shape_a, shape_b][:n_inputs]
    return make_model([helper.make_node(op, names, ["y"], name="node")],
                      [(nm, TP.DOUBLE, list(sh)) for nm, sh in zip(names, shapes)],
                      [("y", TP.DOUBLE, None)])


@pytest.mark.parametrize("op", F64_EXACT)
def test_exact_float64_rows_run_on_mlx(op):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    got, ref, _ = check_against_cpu(model(op, 2), {"a": a, "b": b}, rtol=1e-13, atol=1e-14)
    assert got[0].dtype == np.float64


def test_inexact_float64_row_is_declined_with_reason(tmp_path):
    m = make_model([helper.make_node("Exp", ["a"], ["y"], name="exp64")],
                   [("a", TP.DOUBLE, [3])], [("y", TP.DOUBLE, [3])])
    oc.check_declined(m, {"a": np.array([0.5, 1.0, 2.0])}, "exp64",
                      "MLX does not compute Exp exactly in float64", tmp_path, rtol=1e-15)


# --- data movement: bit-exact -------------------------------------------------------------------
D, I64, B = TP.DOUBLE, TP.INT64, TP.BOOL
# Values float32 would change: 0.1 and 1/3 (rounded), a subnormal and a huge value (lost), plus
# a signed zero, infinities and a NaN that data movement must carry unchanged.
SPECIAL = [0.1, 1 / 3, 5e-324, 1e-310, -1.7976931348623157e308, -0.0, np.pi, 1e300,
           np.inf, -np.inf, np.nan, 2.0 ** 60 + 2.0 ** 8]


def values(shape, seed=0, special=True):
    x = np.random.default_rng(seed).standard_normal(shape)
    if special:
        flat = x.reshape(-1)
        k = min(len(SPECIAL), flat.size)
        flat[:k] = SPECIAL[:k]
    return x


def i64(v):
    return np.array(v, np.int64)


def case(op, inputs, feeds, attrs=None, outs=(("y", D),), opset=17, inits=()):
    """One node named 'n': inputs are graph inputs [(name, elem, shape)] then initializers
    [(name, array)]; outs [(name, elem)]."""
    names = [i[0] for i in inputs] + [i[0] for i in inits]
    node = helper.make_node(op, names, [o[0] for o in outs], name="n", **(attrs or {}))
    m = make_model([node], inputs, [(o[0], o[1], None) for o in outs], initializers=inits,
                   opset=opset)
    return m, feeds


X = values((2, 3, 4))
XS = {"x": X}
X_IN = [("x", D, [2, 3, 4])]
X_SYM = [("x", D, ["N", 3, "W"])]
U = values((2, 3, 4), seed=1, special=False)  # finite update values for the reductions


def scatter_el(reduction, opset, dup=True, op="ScatterElements"):
    idx = np.zeros((2, 3, 4), np.int64) if dup else np.array(
        [[[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]]] * 2, np.int64)
    attrs = {"axis": 1} if reduction is None else {"axis": 1, "reduction": reduction}
    return case(op, [("x", D, [2, 3, 4]), ("i", I64, [2, 3, 4]), ("u", D, [2, 3, 4])],
                {"x": U * 3, "i": idx, "u": U}, attrs, opset=opset)


def scatter_nd(reduction, opset):
    idx = i64([[0, 1], [1, 2], [0, 1], [-2, -2]])  # [0, 1] twice, [1, 2] == [-1, -2]... twice
    attrs = {} if reduction is None else {"reduction": reduction}
    return case("ScatterND", [("x", D, [2, 3, 4]), ("i", I64, [4, 2]), ("u", D, [4, 4])],
                {"x": U * 3, "i": idx, "u": values((4, 4), seed=2, special=False)}, attrs,
                opset=opset)


def cast(to, x, frm=D):
    return case("Cast", [("x", frm, list(x.shape))], {"x": x}, {"to": to}, outs=[("y", to)],
                opset=13)


HALF_TIES = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, 70000.0, 6e-8, -2.5e-8,
                      65519.99, 0.1, -0.0, np.inf, np.nan])
INT_SAFE = np.array([0.0, -0.0, 0.9, -0.9, 2.5, -2.5, 1e9, -2.1e9, 123456.789, -7.99])
BIG_INTS = i64([2 ** 53 + 1, -(2 ** 53) - 3, 2 ** 62 + 1, -(2 ** 63), 2 ** 63 - 1, 7])

CASES = {
    "Reshape-5": lambda: case("Reshape", X_IN, XS, opset=5, inits=[("s", i64([4, 0, -1]))]),
    "Reshape-14-allowzero": lambda: case("Reshape", X_IN, XS, {"allowzero": 1}, opset=14,
                                         inits=[("s", i64([6, 4]))]),
    "Transpose-1": lambda: case("Transpose", X_IN, XS, opset=1),
    "Transpose-13-perm": lambda: case("Transpose", X_IN, XS, {"perm": [1, 2, 0]}, opset=13),
    "Squeeze-1-neg": lambda: case("Squeeze", [("x", D, [2, 1, 4])],
                                  {"x": values((2, 1, 4))}, {"axes": [-2]}, opset=1),
    "Squeeze-13": lambda: case("Squeeze", [("x", D, [2, 1, 4])], {"x": values((2, 1, 4))},
                               opset=13, inits=[("a", i64([1]))]),
    "Unsqueeze-1-neg": lambda: case("Unsqueeze", X_IN, XS, {"axes": [-1, 0]}, opset=1),
    "Unsqueeze-13": lambda: case("Unsqueeze", X_IN, XS, opset=13, inits=[("a", i64([1, -1]))]),
    "Flatten-1": lambda: case("Flatten", X_IN, XS, {"axis": 2}, opset=1),
    "Flatten-13-neg": lambda: case("Flatten", X_IN, XS, {"axis": -1}, opset=13),
    "Concat-4-neg": lambda: case("Concat", X_IN + [("z", D, [2, 3, 1])],
                                 {"x": X, "z": values((2, 3, 1), seed=3)}, {"axis": -1},
                                 opset=4),
    "Concat-13": lambda: case("Concat", X_IN + [("z", D, [1, 3, 4])],
                              {"x": X, "z": values((1, 3, 4), seed=3)}, {"axis": 0}, opset=13),
    "Expand-8": lambda: case("Expand", [("x", D, [3, 1])], {"x": values((3, 1))}, opset=8,
                             inits=[("s", i64([2, 3, 4]))]),
    "Expand-13": lambda: case("Expand", X_IN, XS, opset=13, inits=[("s", i64([2, 1, 1, 1]))]),
    # symbolic dims: ORT folds Shape and Size of a static shape itself
    "Shape-1": lambda: case("Shape", X_SYM, XS, outs=[("y", I64)], opset=1),
    "Shape-15-start": lambda: case("Shape", X_SYM, XS, {"start": -2}, outs=[("y", I64)],
                                   opset=15),
    "Size-13": lambda: case("Size", X_SYM, XS, outs=[("y", I64)], opset=13),
    "Identity-16": lambda: case("Identity", X_IN, XS, opset=16),
    "Cast-double-to-float": lambda: cast(TP.FLOAT, np.r_[values((12,)), 3.4028235e38,
                                                        3.4028236e38, 1e-46, 1.5e-45]),
    "Cast-double-to-float16": lambda: cast(TP.FLOAT16, HALF_TIES),
    "Cast-double-to-int64": lambda: cast(I64, INT_SAFE),
    "Cast-double-to-int32": lambda: cast(TP.INT32, INT_SAFE),
    "Cast-double-to-uint8": lambda: cast(TP.UINT8, np.array([0.0, 0.9, 254.99, 17.5, 255.0])),
    "Cast-double-to-bool": lambda: cast(B, np.array([0.0, -0.0, 5e-324, -1.0, np.inf, np.nan])),
    "Cast-float-to-double": lambda: cast(D, np.array([0.1, -3e38, 1e-45, -0.0, np.nan],
                                                     np.float32), TP.FLOAT),
    "Cast-float16-to-double": lambda: cast(D, np.array([0.1, 65504, 6e-8, -0.0], np.float16),
                                           TP.FLOAT16),
    "Cast-int64-to-double": lambda: cast(D, BIG_INTS, I64),
    "Cast-uint64-to-double": lambda: cast(D, np.array([2 ** 64 - 1, 2 ** 53 + 1, 0], np.uint64),
                                          TP.UINT64),
    "Cast-int32-to-double": lambda: cast(D, np.array([-(2 ** 31), 2 ** 31 - 1], np.int32),
                                         TP.INT32),
    "Cast-bool-to-double": lambda: cast(D, np.array([True, False]), B),
    "Cast-double-to-double": lambda: cast(D, X.reshape(-1)),
    "Slice-1": lambda: case("Slice", X_IN, XS, {"starts": [1, -3], "ends": [3, 100],
                                                "axes": [1, 2]}, opset=1),
    "Slice-13-steps": lambda: case("Slice", X_IN, XS, opset=13,
                                   inits=[("st", i64([-1, 0])), ("en", i64([-100, 4])),
                                          ("ax", i64([2, 1])), ("sp", i64([-2, 2]))]),
    "Gather-1": lambda: case("Gather", X_IN + [("i", I64, [2])], {"x": X, "i": i64([2, 0])},
                             {"axis": 1}, opset=1),
    "Gather-13-neg": lambda: case("Gather", X_IN + [("i", TP.INT32, [2, 2])],
                                  {"x": X, "i": np.array([[-1, 0], [3, -4]], np.int32)},
                                  {"axis": -1}, opset=13),
    "GatherElements-13": lambda: case("GatherElements", X_IN + [("i", I64, [2, 2, 4])],
                                      {"x": X, "i": i64([[[0, 1, 2, -1]] * 2] * 2)},
                                      {"axis": 1}, opset=13),
    "GatherND-13-batch": lambda: case("GatherND", X_IN + [("i", I64, [2, 2, 1])],
                                      {"x": X, "i": i64([[[1], [-1]], [[0], [2]]])},
                                      {"batch_dims": 1}, opset=13),
    "GatherND-11": lambda: case("GatherND", X_IN + [("i", I64, [3, 2])],
                                {"x": X, "i": i64([[0, 1], [1, 2], [-1, -3]])}, opset=11),
    "ScatterElements-11": lambda: scatter_el(None, 11, dup=False),
    "ScatterElements-16-add": lambda: scatter_el("add", 16),
    "ScatterElements-16-mul": lambda: scatter_el("mul", 16),
    "ScatterElements-18-max": lambda: scatter_el("max", 18),
    "ScatterElements-18-min": lambda: scatter_el("min", 18),
    "Scatter-9": lambda: scatter_el(None, 9, dup=False, op="Scatter"),
    "ScatterND-11": lambda: case("ScatterND", [("x", D, [2, 3, 4]), ("i", I64, [2, 2]),
                                               ("u", D, [2, 4])],
                                 {"x": X, "i": i64([[0, 1], [-1, 2]]), "u": values((2, 4), 4)},
                                 opset=11),
    "ScatterND-16-add": lambda: scatter_nd("add", 16),
    "ScatterND-16-mul": lambda: scatter_nd("mul", 16),
    "ScatterND-18-max": lambda: scatter_nd("max", 18),
    "ScatterND-18-min": lambda: scatter_nd("min", 18),
    "Split-2-neg": lambda: case("Split", X_IN, XS, {"axis": -1},
                                outs=[("a", D), ("b", D)], opset=2),
    "Split-11-sizes": lambda: case("Split", X_IN, XS, {"axis": 1, "split": [1, 2]},
                                   outs=[("a", D), ("b", D)], opset=11),
    "Split-13-input": lambda: case("Split", X_IN, XS, {"axis": 2}, outs=[("a", D), ("b", D)],
                                   opset=13, inits=[("s", i64([3, 1]))]),
    "Split-18-num-outputs": lambda: case("Split", X_IN, XS, {"axis": 1, "num_outputs": 2},
                                         outs=[("a", D), ("b", D)], opset=18),
    "Tile-6": lambda: case("Tile", X_IN, XS, opset=6, inits=[("r", i64([2, 1, 3]))]),
    "Tile-13": lambda: case("Tile", X_IN, XS, opset=13, inits=[("r", i64([1, 2, 1]))]),
    "Pad-2-value": lambda: case("Pad", X_IN, XS, {"pads": [0, 1, -1, 1, 0, 2], "value": 0.1},
                                opset=2),
    "Pad-2-reflect": lambda: case("Pad", X_IN, XS, {"pads": [0, 0, 2, 0, 1, 1],
                                                    "mode": "reflect"}, opset=2),
    "Pad-11-constant": lambda: case("Pad", X_IN, XS, opset=11,
                                    inits=[("p", i64([1, 0, 1, 0, 2, 1])),
                                           ("v", np.array(1 / 3))]),
    "Pad-13-edge": lambda: case("Pad", X_IN, XS, {"mode": "edge"}, opset=13,
                                inits=[("p", i64([0, 2, 1, 0, 1, 3]))]),
    "Pad-18-axes": lambda: case("Pad", X_IN, XS, opset=18,
                                inits=[("p", i64([1, -1, 2, 0])), ("v", np.array(-0.0)),
                                       ("ax", i64([-1, 1]))]),
    "Pad-19-wrap": lambda: case("Pad", X_IN, XS, {"mode": "wrap"}, opset=19,
                                inits=[("p", i64([0, 1, 2, 0, 2, 5]))]),
    "CenterCropPad-18": lambda: case("CenterCropPad", X_IN, XS, opset=18,
                                     inits=[("s", i64([3, 2, 7]))]),
    "DepthToSpace-1": lambda: case("DepthToSpace", [("x", D, [1, 8, 2, 3])],
                                   {"x": values((1, 8, 2, 3))}, {"blocksize": 2}, opset=1),
    "DepthToSpace-13-CRD": lambda: case("DepthToSpace", [("x", D, [1, 8, 2, 3])],
                                        {"x": values((1, 8, 2, 3))},
                                        {"blocksize": 2, "mode": "CRD"}, opset=13),
    "SpaceToDepth-13": lambda: case("SpaceToDepth", [("x", D, [1, 2, 4, 6])],
                                    {"x": values((1, 2, 4, 6))}, {"blocksize": 2}, opset=13),
    "Dropout-7": lambda: case("Dropout", X_IN, XS, outs=[("y", D), ("m", D)], opset=7),
    "Dropout-10-mask": lambda: case("Dropout", X_IN, XS, outs=[("y", D), ("m", B)], opset=10),
    "Dropout-13-mask": lambda: case("Dropout", X_IN, XS, outs=[("y", D), ("m", B)], opset=13),
    "Trilu-14-upper": lambda: case("Trilu", X_IN, XS, opset=14, inits=[("k", i64(1))]),
    "Trilu-14-lower": lambda: case("Trilu", X_IN, XS, {"upper": 0}, opset=14,
                                   inits=[("k", i64(-1))]),
    "EyeLike-9": lambda: case("EyeLike", [("x", D, [3, 4])], {"x": values((3, 4))}, {"k": -1},
                              opset=9),
    "EyeLike-9-int-to-double": lambda: case("EyeLike", [("x", I64, [3, 3])],
                                            {"x": np.zeros((3, 3), np.int64)}, {"dtype": D},
                                            opset=9),
    "ReverseSequence-10": lambda: case("ReverseSequence", [("x", D, [4, 3, 2]),
                                                           ("l", I64, [3])],
                                       {"x": values((4, 3, 2)), "l": i64([4, 0, 2])},
                                       {"batch_axis": 1, "time_axis": 0}, opset=10),
    "Compress-9-neg": lambda: case("Compress", X_IN + [("c", B, [4])],
                                   {"x": X, "c": np.array([True, False, True, True])},
                                   {"axis": -1}, opset=9),
    "Compress-11-flat": lambda: case("Compress", X_IN + [("c", B, [30])],
                                     {"x": X, "c": np.arange(30) % 3 == 0}, opset=11),
    "Unique-11-sorted": lambda: case(
        "Unique", [("x", D, [10])],
        {"x": np.array([0.1, 1 / 3, -0.0, 0.1, 1e-310, 0.1 + 2 ** -56, 1 / 3, 0.0, -1e300, 5.0])},
        outs=[("y", D), ("i", I64), ("v", I64), ("c", I64)], opset=11),
    "Unique-11-axis-unsorted": lambda: case(
        "Unique", [("x", D, [4, 2])],
        {"x": np.array([[0.1, 2.0], [1 / 3, 1.0], [0.1, 2.0], [0.1, 2.0 + 2 ** -51]])},
        {"axis": 0, "sorted": 0}, outs=[("y", D), ("i", I64), ("v", I64), ("c", I64)],
        opset=11),
    "ConstantOfShape-9": lambda: case("ConstantOfShape", [("s", I64, [2])], {"s": i64([2, 3])},
                                      {"value": numpy_helper.from_array(np.array([0.1]))},
                                      opset=9),
    "ConstantOfShape-20-subnormal": lambda: case(
        "ConstantOfShape", [("s", I64, [3])], {"s": i64([1, 2, 2])},
        {"value": numpy_helper.from_array(np.array([5e-324]))}, opset=20),
    "Range-11": lambda: case("Range", [("s", D, []), ("l", D, []), ("d", D, [])],
                             {"s": np.array(0.1), "l": np.array(1000.0), "d": np.array(0.1)},
                             opset=11),
    "Range-11-negative": lambda: case("Range", [("s", D, []), ("l", D, []), ("d", D, [])],
                                      {"s": np.array(1e16), "l": np.array(-1e16 / 3),
                                       "d": np.array(-1e16 / 7)}, opset=11),
}


def assert_bit_exact(got, ref):
    """Equal to the last bit (so -0.0 differs from 0.0); NaN must meet NaN, whatever its payload
    (MLX's float16 conversion writes another quiet NaN than ORT's)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.shape)
    if got.dtype.kind == "f":
        nan = np.isnan(ref)
        assert np.array_equal(np.isnan(got), nan), f"NaNs differ:\n{got!r}\n{ref!r}"
        g = np.ascontiguousarray(got).view(f"u{got.dtype.itemsize}")[~nan]
        r = np.ascontiguousarray(ref).view(f"u{ref.dtype.itemsize}")[~nan]
        assert np.array_equal(g, r), f"not bit-exact:\n{got!r}\n{ref!r}"
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("name", list(CASES))
def test_data_movement_float64_bit_exact(name):
    """Each row runs on MLX (CPU device) and matches ORT's CPU provider to the last bit."""
    m, feeds = CASES[name]()
    got, ref, placed = check_against_cpu(m, feeds, rtol=1e-15, atol=0)
    assert placed == {"n": EP}
    assert any(np.asarray(a).dtype == np.float64 for a in list(feeds.values()) + got)
    for g, r in zip(got, ref):
        assert_bit_exact(g, r)


# Rows ORT's CPU provider has no float64 kernel for: compared with numpy.
def test_cast_float64_to_bfloat16_matches_cpu():
    """float64 -> bfloat16 -> float32 (both Casts on MLX) as ORT rounds it: through float32."""
    x = np.r_[HALF_TIES, 1 + 2.0 ** -8 + 2.0 ** -40, 3.0e38]
    nodes = [helper.make_node("Cast", ["x"], ["b"], name="to_bf16", to=TP.BFLOAT16),
             helper.make_node("Cast", ["b"], ["y"], name="to_f32", to=TP.FLOAT)]
    m = make_model(nodes, [("x", D, [len(x)])], [("y", TP.FLOAT, None)], opset=13)
    got, ref, _ = check_against_cpu(m, {"x": x})
    assert_bit_exact(got[0], ref[0])


def test_one_hot_float64_values_and_indices():
    """OneHot with float64 indices (compared as float64: 2 + 2**-40 is not integral), depth and
    values; ORT's CPU provider has no kernel for these types."""
    idx = np.array([0.0, 2.0, -1.0, 2 + 2.0 ** -40, 7.0, -3.0])
    vals = np.array([1 / 3, 0.1])
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="n", axis=-1)
    m = make_model([node], [("i", D, [6]), ("d", D, []), ("v", D, [2])], [("y", D, None)],
                   opset=11)
    want = np.full((6, 4), 1 / 3)
    for r, k in enumerate([0, 2, 3, None, None, 1]):
        if k is not None:
            want[r, k] = 0.1
    got, placed = run_on_mlx(m, {"i": idx, "d": np.array(4.0), "v": vals})
    assert placed == {"n": EP}
    assert_bit_exact(got[0], want)


def test_nonzero_float64():
    """NonZero of float64 (ORT's CPU provider has no kernel for it): -0.0 is zero, a subnormal
    and NaN are not."""
    x = np.array([[0.0, -0.0, 5e-324], [np.nan, 0.0, -1e-300]])
    m = make_model([helper.make_node("NonZero", ["x"], ["y"], name="n")], [("x", D, [2, 3])],
                   [("y", I64, None)], opset=13)
    got, placed = run_on_mlx(m, {"x": x})
    assert placed == {"n": EP}
    np.testing.assert_array_equal(got[0], np.array(np.nonzero(x)))


def test_constant_float64_value_tensor():
    """A float64 Constant (ORT makes it an initializer; the consumer runs on MLX) arrives
    bit-exact."""
    c = np.array([[0.1, 5e-324, -0.0]])
    nodes = [helper.make_node("Constant", [], ["c"], name="const",
                              value=numpy_helper.from_array(c)),
             helper.make_node("Concat", ["x", "c"], ["y"], name="concat", axis=0)]
    m = make_model(nodes, [("x", D, ["N", 3])], [("y", D, None)])
    x = values((2, 3))
    got, placed = run_on_mlx(m, {"x": x})
    assert placed == {"concat": EP}
    assert_bit_exact(got[0], cpu_session(m).run(None, {"x": x})[0])
    assert_bit_exact(got[0][2:], c)



# --- math (src/ops/elementwise.c, activation.c, reduce.c) ---------------------------------------
# Rows whose float64 arithmetic MLX's CPU stream does as IEEE double (one rounding per step, as
# ORT's CPU kernels), checked bit-exact; compositions whose rounding order may differ from ORT's
# (mean as sum * 1/n, L2's sqrt of a sum, tanh/atan/sinh libm calls) within 1e-13 relative.
Y = values((2, 3, 4), seed=5)
XY_IN = [("x", D, [2, 3, 4]), ("z", D, [2, 3, 4])]
XY = {"x": X, "z": Y}
P = np.abs(U) + 0.5  # positive, finite
F32 = lambda v: float(np.float32(v))  # a float attribute as ONNX stores it


def binary(op, opset=14, outs=(("y", D),), feeds=None, **attrs):
    return lambda: case(op, XY_IN, feeds or XY, attrs, outs=outs, opset=opset)


def unary(op, opset=13, feeds=None, outs=(("y", D),), **attrs):
    return lambda: case(op, X_IN, feeds or XS, attrs, outs=outs, opset=opset)


def reduce(op, opset, axes=(1,), keep=1, feeds=None):
    f = feeds or {"x": U * 3}
    if opset >= (13 if op == "ReduceSum" else 18):
        return lambda: case(op, X_IN, f, {"keepdims": keep}, opset=opset,
                            inits=[("a", i64(list(axes)))])
    return lambda: case(op, X_IN, f, {"axes": list(axes), "keepdims": keep}, opset=opset)


TIES = {"x": np.r_[np.arange(-3.5, 4, 0.5), 2.5 + 2 ** -40, -0.0, 1e300, 0.49999999999999994,
                   np.inf, -np.inf, np.nan, 5e-324, 4503599627370497.0][:24].reshape(2, 3, 4)}
INT_EXP = [("x", I64, [2, 3]), ("z", D, [2, 3])]

MATH_EXACT = {
    "Add-14": binary("Add"), "Sub-14": binary("Sub"), "Mul-14": binary("Mul"),
    "Div-14": binary("Div"), "Add-7-broadcast": lambda: case(
        "Add", [("x", D, [2, 3, 4]), ("z", D, [4])], {"x": X, "z": values((4,), 9)}, opset=7),
    "Pow-15": binary("Pow", 15, feeds={"x": P, "z": Y}),
    "Mod-13-fmod": binary("Mod", 13, feeds={"x": U * 1e3, "z": P}, fmod=1),
    "Max-13": lambda: case("Max", XY_IN + [("w", D, [4])],
                           {"x": X, "z": Y, "w": values((4,), 7)}, opset=13),
    "Min-13": lambda: case("Min", XY_IN, XY, opset=13),
    "Sum-13": lambda: case("Sum", XY_IN + [("w", D, [4])],
                           {"x": U, "z": Y, "w": values((4,), 7)}, opset=13),
    "Sum-8-one": lambda: case("Sum", X_IN, XS, opset=8),
    "Clip-12": lambda: case("Clip", X_IN, XS, opset=12,
                            inits=[("lo", np.array(-1 / 3)), ("hi", np.array(0.1))]),
    "Clip-13-min-only": lambda: case("Clip", X_IN + [("lo", D, [])], {"x": X, "lo": np.array(
        0.1)}, opset=13),
    "Equal-19": binary("Equal", 19, outs=[("y", B)], feeds={"x": X, "z": np.where(
        np.arange(24).reshape(2, 3, 4) % 2 == 0, X, Y)}),
    "Less-13": binary("Less", 13, outs=[("y", B)]),
    "Greater-13": binary("Greater", 13, outs=[("y", B)]),
    "LessOrEqual-16": binary("LessOrEqual", 16, outs=[("y", B)], feeds={"x": X, "z": X[::-1]}),
    "GreaterOrEqual-16": binary("GreaterOrEqual", 16, outs=[("y", B)],
                                feeds={"x": X, "z": X[::-1]}),
    "Where-16": lambda: case("Where", [("c", B, [3, 4])] + XY_IN,
                             {"c": np.arange(12).reshape(3, 4) % 3 == 0, "x": X, "z": Y},
                             opset=16),
    "Neg-13": unary("Neg"), "Abs-13": unary("Abs"), "Sign-13": unary("Sign"),
    "Sqrt-13": unary("Sqrt"), "Reciprocal-13": unary("Reciprocal"),
    "Floor-13": unary("Floor", feeds=TIES), "Ceil-13": unary("Ceil", feeds=TIES),
    "Round-22": unary("Round", 22, feeds=TIES),
    "IsNaN-20": unary("IsNaN", 20, outs=[("y", B)]),
    "IsInf-20": unary("IsInf", 20, outs=[("y", B)]),
    "IsInf-20-neg": unary("IsInf", 20, outs=[("y", B)], detect_positive=0),
    "LeakyRelu-16": unary("LeakyRelu", 16, alpha=0.1),
    "PRelu-16": lambda: case("PRelu", X_IN + [("s", D, [4])], {"x": X, "s": values((4,), 3)},
                             opset=16),
    "ThresholdedRelu-22": unary("ThresholdedRelu", 22, alpha=0.3),
    "Softsign-22": unary("Softsign", 22),
    "HardSigmoid-22": unary("HardSigmoid", 22, alpha=0.3, beta=0.4),
    "HardSwish-22": unary("HardSwish", 22),
    "Shrink-9": unary("Shrink", 9, lambd=0.7, bias=0.3),
    "ReduceSum-13": reduce("ReduceSum", 13),
    "ReduceMax-18": reduce("ReduceMax", 18), "ReduceMin-13": reduce("ReduceMin", 13, (2,)),
    "ReduceMax-20-keep0": reduce("ReduceMax", 20, (0, 2), keep=0),
    "ReduceProd-18": reduce("ReduceProd", 18), "ReduceL1-13": reduce("ReduceL1", 13),
    "ReduceSumSquare-18": reduce("ReduceSumSquare", 18, (2,)),
    "ArgMax-13": unary("ArgMax", 13, outs=[("y", I64)], axis=2, feeds={"x": U}),
    "ArgMin-13-last": unary("ArgMin", 13, outs=[("y", I64)], axis=1, select_last_index=1,
                            feeds={"x": np.round(U)}),
    "ArgMax-11-neg": unary("ArgMax", 11, outs=[("y", I64)], axis=-2, keepdims=0,
                           feeds={"x": U}),
    "CumSum-14": lambda: case("CumSum", X_IN, {"x": U}, opset=14, inits=[("a", i64(2))]),
    "CumSum-14-excl-rev": lambda: case("CumSum", X_IN, {"x": U}, {"exclusive": 1, "reverse": 1},
                                       opset=14, inits=[("a", i64(-2))]),
    "TopK-11": lambda: case("TopK", X_IN, {"x": U}, {"axis": 1}, outs=[("y", D), ("i", I64)],
                            opset=11, inits=[("k", i64([2]))]),
    "TopK-11-smallest": lambda: case("TopK", X_IN, {"x": np.round(U)}, {"largest": 0},
                                     outs=[("y", D), ("i", I64)], opset=11,
                                     inits=[("k", i64([3]))]),
    "TopK-1": lambda: case("TopK", X_IN, {"x": U}, {"k": 2}, outs=[("y", D), ("i", I64)],
                           opset=1),
}

MATH_CLOSE = {
    # ORT cubes as x*x*x, MLX calls pow(): an ulp apart
    "Pow-15-int-exponent": lambda: case("Pow", [("x", D, [2, 3, 4]), ("z", I64, [])],
                                        {"x": X, "z": i64(3)}, opset=15),
    "Log-13": unary("Log"),  # MLX's log and ORT's (Eigen) differ by an ulp at times
    # max(-0.0, 0) is +0.0 on MLX, -0.0 on ORT: equal as numbers
    "Relu-14": unary("Relu", 14), "Relu-6": unary("Relu", 6),
    "ReduceSum-1-all": reduce("ReduceSum", 1, (0, 1, 2)),  # summation order
    "Mean-13": lambda: case("Mean", XY_IN, {"x": U, "z": Y}, opset=13),
    "ReduceMean-18": reduce("ReduceMean", 18, (0, 2)), "ReduceMean-13": reduce("ReduceMean", 13),
    "ReduceL2-18": reduce("ReduceL2", 18), "ReduceLogSum-18": reduce("ReduceLogSum", 18,
                                                                    feeds={"x": P}),
    "Tanh-13": unary("Tanh"), "Atan-22": unary("Atan", 22), "Sinh-22": unary("Sinh", 22,
                                                                              feeds={"x": U}),
    "Pow-15-int-base": lambda: case("Pow", INT_EXP, {"x": i64([[2, 3, 5], [7, -3, 11]]),
                                                     "z": np.array([[40.0, 30, 20], [18, 33, 2.5]])},
                                    outs=[("y", I64)], opset=15),
}

# ORT's CPU provider has no float64 kernel for these: numpy references.
NUMPY_REF = {
    "Clip-12": lambda f: np.clip(f["x"], -1 / 3, 0.1),
    # an absent max is the type's highest value (spec), so +inf is clamped to it
    "Clip-13-min-only": lambda f: np.minimum(np.maximum(f["x"], f["lo"]), np.finfo(np.float64).max),
    "LeakyRelu-16": lambda f: np.where(f["x"] < 0, f["x"] * F32(0.1), f["x"]),
    "PRelu-16": lambda f: np.where(f["x"] < 0, f["x"] * f["s"], f["x"]),
    "ThresholdedRelu-22": lambda f: np.where(f["x"] > F32(0.3), f["x"], 0.0),
    "Softsign-22": lambda f: f["x"] / (1 + np.abs(f["x"])),
    "HardSigmoid-22": lambda f: np.clip(f["x"] * F32(0.3) + F32(0.4), 0, 1),
    "HardSwish-22": lambda f: f["x"] * np.clip(f["x"] * (1 / 6) + 0.5, 0, 1),
    "Shrink-9": lambda f: np.where(f["x"] < -F32(0.7), f["x"] + F32(0.3),
                                   np.where(f["x"] > F32(0.7), f["x"] - F32(0.3), 0.0)),
    "Atan-22": lambda f: np.arctan(f["x"]),
    "Sinh-22": lambda f: np.sinh(f["x"]),
    "Relu-6": lambda f: np.maximum(f["x"], 0.0),
    "Mean-13": lambda f: (f["x"] + f["z"]) / 2,
}


def reference(name, m, feeds):
    if name in NUMPY_REF:
        return [NUMPY_REF[name](feeds)]
    return cpu_session(m).run(None, feeds)


@pytest.mark.parametrize("name", list(MATH_EXACT))
def test_math_float64_bit_exact(name):
    """Each row runs on MLX (CPU device) in float64 and matches ORT's CPU provider (numpy where
    ORT has no float64 kernel) to the last bit."""
    m, feeds = MATH_EXACT[name]()
    got, placed = run_on_mlx(m, feeds)
    assert set(placed.values()) == {EP}  # ORT renames PRelu's node
    for g, r in zip(got, reference(name, m, feeds)):
        assert_bit_exact(g, np.asarray(r))


@pytest.mark.parametrize("name", list(MATH_CLOSE))
def test_math_float64_within_1e13(name):
    """Rows whose rounding order or libm may differ from ORT's: float64 to 1e-13 relative (a
    float32 step anywhere would be off by ~1e-8)."""
    m, feeds = MATH_CLOSE[name]()
    got, placed = run_on_mlx(m, feeds)
    assert set(placed.values()) == {EP}  # ORT renames PRelu's node
    for g, r in zip(got, reference(name, m, feeds)):
        r = np.asarray(r)
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-13, atol=0)
