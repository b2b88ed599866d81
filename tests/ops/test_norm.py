"""Normalisation rows (src/ops/norm.c, src/ops/norm_channel.c) against ORT's CPU provider over
float32/float16/bfloat16 (bfloat16 against the float32 model on CPU): LayerNormalization's fast
kernel (last axis, 1-D Scale/B, Y only) and composed path (several axes, broadcast Scale/B, Mean
and InvStdDev); RMSNormalization (fast and composed, mixed X/Scale types); InstanceNormalization
(6, 22); GroupNormalization 18 (per-group scale) and 21 (per-channel); MeanVarianceNormalization
(axes); LpNormalization (p 1/2, axes, zero and extreme vectors); LRN (odd sizes against ORT, even
sizes and other ranks against the spec in NumPy); BatchNormalization inference at every row
(spatial=0, mixed types, opset 6 against opset 7); the declined forms with their reasons; and
compiled groups (shapeless and shape-keyed)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS

SHAPE = (2, 3, 8)


def ln_model(elem, axis=None, scale_shape=None, bias_shape=None, outputs=("y",), **attrs):
    """outputs: names among y/mean/inv; '' omits an output in the middle."""
    rank = len(SHAPE)
    a = -1 if axis is None else axis
    norm_shape = SHAPE[a % rank:]
    scale_shape = norm_shape if scale_shape is None else scale_shape
    if axis is not None:
        attrs["axis"] = axis
    names = ["x", "scale"] + (["bias"] if bias_shape is not None else [])
    node = helper.make_node("LayerNormalization", names, list(outputs), name="n", **attrs)
    stat_shape = SHAPE[:a % rank] + (1,) * len(norm_shape)
    outs = [(o, elem if o == "y" else TensorProto.FLOAT, SHAPE if o == "y" else stat_shape)
            for o in outputs if o]
    inputs = [("x", elem, SHAPE), ("scale", elem, scale_shape)]
    if bias_shape is not None:
        inputs.append(("bias", elem, bias_shape))
    return harness.make_model([node], inputs, outs, opset=17)


def ln_feeds(scale_shape, bias_shape=None, seed=0):
    f = {"x": harness.rand(SHAPE, low=-3, high=5, seed=seed),
         "scale": harness.rand(scale_shape, low=0.5, high=1.5, seed=seed + 1)}
    if bias_shape is not None:
        f["bias"] = harness.rand(bias_shape, seed=seed + 2)
    return f


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_fast_path_last_axis(dtype, with_bias):
    bias = (8,) if with_bias else None
    oc.check(lambda e: ln_model(e, None, (8,), bias), ln_feeds((8,), bias), dtype, scale=5)


@pytest.mark.parametrize("axis", [0, 1, -2, 2, -1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_axes_composed(axis, dtype):
    norm = SHAPE[axis % 3:]
    oc.check(lambda e: ln_model(e, axis, norm, norm), ln_feeds(norm, norm), dtype, scale=5)


@pytest.mark.parametrize("scale_shape,bias_shape", [((1,), (1,)), ((3, 1), (8,)), ((1, 8), None)],
                         ids=str)
def test_broadcast_scale_and_bias(scale_shape, bias_shape):
    """Scale/B broadcast against the normalised dims (axis -2): the composed path."""
    oc.check(lambda e: ln_model(e, -2, scale_shape, bias_shape), ln_feeds(scale_shape, bias_shape),
             F32)


def test_scalar_sized_scale_on_last_axis():
    """A 1-element Scale on the last axis cannot use MLX's kernel (it wants the full length)."""
    oc.check(lambda e: ln_model(e, -1, (1,), (8,)), ln_feeds((1,), (8,)), F32)


@pytest.mark.parametrize("outputs", [("y", "mean", "inv"), ("y", "", "inv"), ("y", "mean")],
                         ids=lambda o: "+".join(x or "_" for x in o))
@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_statistics_outputs(outputs, axis, dtype):
    norm = SHAPE[axis % 3:]
    oc.check(lambda e: ln_model(e, axis, norm, norm, outputs), ln_feeds(norm, norm), dtype,
             scale=5)


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 0.5])
def test_epsilon(epsilon):
    f = ln_feeds((8,))
    f["x"][0, 0] = 1.0  # a constant row: variance 0, epsilon decides
    oc.check(lambda e: ln_model(e, None, (8,), None, ("y", "mean", "inv"), epsilon=epsilon), f,
             F32, rtol=1e-4, atol=1e-4)


def test_constant_scale_and_bias_initializers():
    """The usual transformer form: Scale and B are initializers."""
    scale = harness.rand((8,), low=0.5, high=1.5, seed=3)
    bias = harness.rand((8,), seed=4)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="n", epsilon=1e-6)
    add = helper.make_node("Add", ["y", "x"], ["z"], name="residual")
    m = harness.make_model([node, add], [("x", TensorProto.FLOAT, SHAPE)],
                           [("z", TensorProto.FLOAT, SHAPE)],
                           initializers=[("s", scale), ("b", bias)], opset=17)
    harness.check_against_cpu(m, {"x": harness.rand(SHAPE, seed=5)}, rtol=1e-5, atol=1e-5)


def test_stash_type_declined(tmp_path):
    m = ln_model(TensorProto.FLOAT, None, (8,), None, stash_type=0)
    oc.check_declined(m, ln_feeds((8,)), "n", "stash_type 0", tmp_path, rtol=1e-5, atol=1e-5)


def test_float64_declined(tmp_path):
    m = ln_model(TensorProto.DOUBLE, None, (8,))
    feeds = {k: v.astype(np.float64) for k, v in ln_feeds((8,)).items()}
    oc.check_declined(m, feeds, "n", "is float64", tmp_path)


def test_compiled_shapeless_fast_and_composed(monkeypatch):
    """The fast kernel and the composed form (with statistics) in one compiled function, over
    two sequence lengths. (The fast form is a host kernel on the CPU device, keyed on shapes
    there: switched off, to compile shapeless.)"""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_NO_HOST_MATH", "1")
    s8 = harness.rand((8,), low=0.5, high=1.5, seed=1)
    b8 = harness.rand((8,), seed=2)
    nodes = [helper.make_node("LayerNormalization", ["x", "s8", "b8"], ["a"], name="fast"),
             helper.make_node("LayerNormalization", ["a", "s8"], ["y", "mean", "inv"],
                              name="composed", axis=1, epsilon=1e-3)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", "T", 8))],
                           [("y", TensorProto.FLOAT, ("N", "T", 8)),
                            ("mean", TensorProto.FLOAT, ("N", 1, 1)),
                            ("inv", TensorProto.FLOAT, ("N", 1, 1))],
                           initializers=[("s8", s8), ("b8", b8)], opset=17)
    oc.check_compiled(m, [{"x": harness.rand((2, 3, 8), seed=3)},
                          {"x": harness.rand((4, 5, 8), seed=4)}], rtol=1e-4, atol=1e-4)


# === the other normalisations (src/ops/norm.c, src/ops/norm_channel.c) ======================
def one_node(op, elem, inputs, opset, outputs=("y",), out_elem=None, **attrs):
    """inputs: [(name, elem or None for `elem`, shape)]; the node is named 'n'."""
    node = helper.make_node(op, [i[0] for i in inputs], list(outputs), name="n", **attrs)
    ins = [(name, elem if e is None else e, shape) for name, e, shape in inputs]
    outs = [(o, out_elem or elem, None) for o in outputs if o]
    return harness.make_model([node], ins, outs, opset=opset)


def check_vs_f32(build, feeds, dtype, scale=1.0):
    """For half types whose ORT CPU kernel is missing or broken: MLX on the dtype model against
    the float32 model on CPU, with the same (rounded) input values."""
    cast = {k: v.astype(dtype) for k, v in feeds.items()}
    ref = harness.cpu_session(build(TensorProto.FLOAT)).run(
        None, {k: v.astype(np.float32) for k, v in cast.items()})
    model = build(oc.elem(dtype))
    got, placed = oc.run_bf16_on_mlx(model, cast, [r.shape for r in ref])
    assert all(placed.get(n.name) == harness.EP for n in model.graph.node), placed
    rtol, atol = oc.tol(dtype, scale)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.asarray(g, np.float32), r, rtol=rtol, atol=atol)


def feeds_of(**shapes):
    """name=(shape, low, high) -> random float32 feeds."""
    return {k: harness.rand(s, low=lo, high=hi, seed=i) for i, (k, (s, lo, hi)) in
            enumerate(shapes.items())}


# --- RMSNormalization ----------------------------------------------------------------------
X4 = (2, 3, 4, 5)


@pytest.mark.parametrize("axis,scale_shape", [(-1, (5,)), (3, (5,)), (-2, (4, 5)), (1, (3, 4, 5)),
                                              (0, X4), (-1, (1,)), (2, (1, 5))], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rms_norm(dtype, axis, scale_shape):
    f = feeds_of(x=(X4, -3, 3), s=(scale_shape, 0.5, 1.5))
    oc.check(lambda e: one_node("RMSNormalization", e, [("x", None, X4), ("s", None, scale_shape)],
                                23, axis=axis, epsilon=1e-4), f, dtype, scale=5)


def test_rms_norm_mixed_types():
    """X float32, Scale float16: Y takes Scale's type. ORT's CPU function body does not
    type-check this form, so the reference is the float32 model rounded to float16."""
    f = feeds_of(x=(X4, -3, 3), s=((5,), 0.5, 1.5))
    f["s"] = f["s"].astype(np.float16)
    m = one_node("RMSNormalization", TensorProto.FLOAT,
                 [("x", None, X4), ("s", TensorProto.FLOAT16, (5,))], 23,
                 out_elem=TensorProto.FLOAT16)
    ref = harness.cpu_session(one_node("RMSNormalization", TensorProto.FLOAT,
                                       [("x", None, X4), ("s", None, (5,))], 23)).run(
        None, {"x": f["x"], "s": f["s"].astype(np.float32)})[0]
    oc.check_ref(m, f, [ref.astype(np.float16)], rtol=2e-3, atol=2e-3)


def test_rms_norm_stash_declined(tmp_path):
    m = one_node("RMSNormalization", TensorProto.FLOAT, [("x", None, X4), ("s", None, (5,))], 23,
                 stash_type=0)
    oc.check_declined(m, feeds_of(x=(X4, -1, 1), s=((5,), 1, 2)), "n", "stash_type 0", tmp_path)


# --- InstanceNormalization -----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 3, 4, 2)], ids=str)
@pytest.mark.parametrize("opset", [6, 22])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_instance_norm(dtype, opset, shape):
    if dtype == BF16 and opset < 22:
        pytest.skip("bfloat16 InstanceNormalization is opset 22")
    c = (shape[1],)
    f = feeds_of(x=(shape, -2, 4), s=(c, 0.5, 1.5), b=(c, -1, 1))
    oc.check(lambda e: one_node("InstanceNormalization", e,
                                [("x", None, shape), ("s", None, c), ("b", None, c)], opset,
                                epsilon=1e-3), f, dtype, scale=5)


def test_instance_norm_rank2_declined(tmp_path):
    m = one_node("InstanceNormalization", TensorProto.FLOAT,
                 [("x", None, (2, 3)), ("s", None, (3,)), ("b", None, (3,))], 6)
    declined = oc.declined_reasons(m, tmp_path)
    assert "rank >= 3" in declined["n"]


# --- GroupNormalization --------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((1, 6, 2, 2, 3), 6),
                                          ((2, 4, 3), 1), ((3, 4), 2)], ids=str)
@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_group_norm(dtype, opset, shape, groups):
    p = (groups,) if opset == 18 else (shape[1],)
    f = feeds_of(x=(shape, -2, 4), s=(p, 0.5, 1.5), b=(p, -1, 1))
    oc.check(lambda e: one_node("GroupNormalization", e,
                                [("x", None, shape), ("s", None, p), ("b", None, p)], opset,
                                num_groups=groups, epsilon=1e-3), f, dtype, scale=5)


def test_group_norm_stash_declined(tmp_path):
    """ORT's CPU provider has no kernel for this form either, so the session fails after the
    partition report is written."""
    p = (6,)
    m = one_node("GroupNormalization", TensorProto.FLOAT,
                 [("x", None, (2, 6, 3)), ("s", None, p), ("b", None, p)], 21, num_groups=2,
                 stash_type=0)
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "GroupNormalization")
    assert "stash_type 0" in declined["n"]


# --- MeanVarianceNormalization -------------------------------------------------------------
@pytest.mark.parametrize("axes", [None, [0, 2, 3], [2, 3], [1], [0, 1, 2, 3], [-1, -3], [3, 3]],
                         ids=str)
@pytest.mark.parametrize("opset", [9, 13])
def test_mvn(opset, axes):
    attrs = {} if axes is None else dict(axes=axes)
    oc.check(lambda e: one_node("MeanVarianceNormalization", e, [("x", None, X4)], opset, **attrs),
             feeds_of(x=(X4, -2, 5)), F32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_mvn_half(dtype):
    """ORT's CPU provider has no float16 kernel (its function body does not type-check)."""
    check_vs_f32(lambda e: one_node("MeanVarianceNormalization", e, [("x", None, X4)], 13),
                 feeds_of(x=(X4, -2, 5)), dtype, scale=5)


def test_mvn_axes_beyond_rank_dropped():
    """The default axes [0, 2, 3] on a 3-D X: axis 3 is dropped, as ONNX Runtime does."""
    shape = (4, 3, 5)
    oc.check(lambda e: one_node("MeanVarianceNormalization", e, [("x", None, shape)], 13),
             feeds_of(x=(shape, -2, 5)), F32, rtol=1e-4, atol=1e-5)


# --- LpNormalization -----------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("opset", [1, 22])
def test_lp_norm(opset, axis, p):
    f = feeds_of(x=((3, 4, 5), -3, 3))
    f["x"][0, 1, :] = 0  # zero vectors (along the last axis) give zeros
    f["x"][1, :, 2] = 0
    oc.check(lambda e: one_node("LpNormalization", e, [("x", None, (3, 4, 5))], opset, axis=axis,
                                p=p), f, F32)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_lp_norm_half(dtype):
    oc.check(lambda e: one_node("LpNormalization", e, [("x", None, (3, 4, 5))], 22, axis=1),
             feeds_of(x=((3, 4, 5), -3, 3)), dtype, scale=3)


def test_lp_norm_extreme_values():
    """Magnitudes whose squares overflow or underflow float32, infinities and a zero row: x is
    divided by its largest magnitude first (as newer ONNX Runtime releases do; 1.31's CPU kernel
    gives zeros for the first two rows at p = 2), so the result is the exact one."""
    x = np.array([[3e30, 4e30, 0], [1e-30, -2e-30, 2e-30], [np.inf, 1, 2], [0, 0, 0]], np.float32)
    for p in (1, 2):
        m = one_node("LpNormalization", TensorProto.FLOAT, [("x", None, (4, 3))], 22, p=p)
        x64 = x.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            norm = np.abs(x64).sum(1, keepdims=True) if p == 1 else \
                np.sqrt((x64 ** 2).sum(1, keepdims=True))
            want = np.where(norm == 0, 0, x64 / norm).astype(np.float32)
        oc.check_ref(m, {"x": x}, [want], rtol=1e-6, atol=1e-7)


def test_lp_norm_p3_declined(tmp_path):
    m = one_node("LpNormalization", TensorProto.FLOAT, [("x", None, (3, 4))], 22, p=3)
    declined = oc.declined_reasons(m, tmp_path)
    assert "only the L1 and L2 norms" in declined["n"]


# --- LRN -----------------------------------------------------------------------------------
@pytest.mark.parametrize("size,alpha,beta,bias", [(1, 1e-4, 0.75, 1.0), (3, 1e-3, 0.75, 1.0),
                                                  (5, 0.5, 1.2, 0.7), (9, 2.0, 0.75, 1.0)],
                         ids=str)
@pytest.mark.parametrize("opset", [1, 13])
def test_lrn(opset, size, alpha, beta, bias):
    shape = (2, 6, 3, 4)
    oc.check(lambda e: one_node("LRN", e, [("x", None, shape)], opset, size=size, alpha=alpha,
                                beta=beta, bias=bias), feeds_of(x=(shape, -3, 3)), F32,
             rtol=1e-5, atol=1e-6)


def lrn_ref(x, size, alpha, beta, bias):
    """The spec's LRN in float64: floor((size-1)/2) channels before, ceil((size-1)/2) after."""
    c, lo = x.shape[1], (size - 1) // 2
    sq = x.astype(np.float64) ** 2
    s = np.stack([sq[:, max(0, k - lo):min(c, k + size - lo)].sum(1) for k in range(c)], 1)
    return (x / (bias + alpha / size * s) ** beta).astype(np.float32)


@pytest.mark.parametrize("shape,size", [((2, 6, 3, 4), 2), ((2, 7, 5), 4), ((1, 5, 2, 2, 3), 6),
                                        ((2, 3), 3)], ids=str)
def test_lrn_even_size_and_other_ranks(shape, size):
    """ORT's CPU kernel takes odd sizes and 4-D X only (and ONNX's reference evaluator sums the
    wrong channels): against the spec in NumPy."""
    m = one_node("LRN", TensorProto.FLOAT, [("x", None, shape)], 13, size=size, alpha=0.3,
                 beta=0.6, bias=1.5)
    f = feeds_of(x=(shape, -3, 3))
    oc.check_ref(m, f, [lrn_ref(f["x"], size, 0.3, 0.6, 1.5)], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_lrn_half(dtype):
    shape = (2, 6, 3, 4)
    oc.check(lambda e: one_node("LRN", e, [("x", None, shape)], 13, size=3, alpha=0.1),
             feeds_of(x=(shape, -3, 3)), dtype, scale=3)


# --- BatchNormalization --------------------------------------------------------------------
def bn_model(elem, x_shape, p_shape, opset, outputs=("y",), p_elem=None, **attrs):
    names = ["s", "b", "m", "v"]
    return one_node("BatchNormalization", elem,
                    [("x", None, x_shape)] + [(k, p_elem, p_shape) for k in names], opset,
                    outputs, **attrs)


def bn_feeds(x_shape, p_shape, seed=0):
    return {"x": harness.rand(x_shape, low=-3, high=3, seed=seed),
            "s": harness.rand(p_shape, low=0.5, high=1.5, seed=seed + 1),
            "b": harness.rand(p_shape, low=-1, high=1, seed=seed + 2),
            "m": harness.rand(p_shape, low=-1, high=1, seed=seed + 3),
            "v": harness.rand(p_shape, low=0.2, high=2, seed=seed + 4)}


@pytest.mark.parametrize("x_shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 3)], ids=str)
@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm(dtype, opset, x_shape):
    if dtype == BF16 and opset < 14:
        pytest.skip("bfloat16 BatchNormalization is opset 14")
    oc.check(lambda e: bn_model(e, x_shape, (3,), opset, epsilon=1e-3), bn_feeds(x_shape, (3,)),
             dtype, scale=3)


def test_batch_norm_opset6_against_7():
    """ORT's CPU provider has no opset-6 kernel: compare with the opset-7 model on CPU."""
    f = bn_feeds((2, 3, 4), (3,))
    got, _ = harness.run_on_mlx(bn_model(TensorProto.FLOAT, (2, 3, 4), (3,), 6, is_test=1), f)
    ref = harness.cpu_session(bn_model(TensorProto.FLOAT, (2, 3, 4), (3,), 7)).run(None, f)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape", [(2, 3, 4), (2, 3, 2, 3)], ids=str)
def test_batch_norm_not_spatial(x_shape):
    """spatial=0 (opset 7): statistics per (C, D1, ...) element."""
    p = x_shape[1:]
    oc.check(lambda e: bn_model(e, x_shape, p, 7, spatial=0), bn_feeds(x_shape, p), F32)
    f = bn_feeds(x_shape, p)
    got, _ = harness.run_on_mlx(bn_model(TensorProto.FLOAT, x_shape, p, 6, is_test=1, spatial=0),
                                f)
    ref = harness.cpu_session(bn_model(TensorProto.FLOAT, x_shape, p, 7, spatial=0)).run(None, f)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)


def test_batch_norm_mixed_types():
    """Opset 15: X float16 with float32 scale/B/mean/var."""
    f = bn_feeds((2, 3, 4), (3,))
    f["x"] = f["x"].astype(np.float16)
    m = one_node("BatchNormalization", TensorProto.FLOAT16,
                 [("x", None, (2, 3, 4))] + [(k, TensorProto.FLOAT, (3,)) for k in "sbmv"], 15)
    harness.check_against_cpu(m, f, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("opset,attrs,outputs,reason", [
    (15, dict(training_mode=1), ("y", "rm", "rv"), "training_mode=1"),
    (9, {}, ("y", "rm", "rv", "sm", "sv"), "output 1 ('rm') only exists in training mode"),
    (7, {}, ("y", "rm", "rv", "sm", "sv"), "only exists in training mode"),
], ids=["training", "opset9-outputs", "opset7-outputs"])
def test_batch_norm_training_declined(tmp_path, opset, attrs, outputs, reason):
    m = bn_model(TensorProto.FLOAT, (4, 3, 5), (3,), opset, outputs, **attrs)
    declined = oc.declined_reasons(m, tmp_path)
    assert reason in declined["n"]


def test_batch_norm_is_test_0_declined(tmp_path):
    m = bn_model(TensorProto.FLOAT, (4, 3, 5), (3,), 6)
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "BatchNormalization")
    assert "is_test=0" in declined["n"]


# --- compiled groups -----------------------------------------------------------------------
def test_compiled_shapeless_norms():
    """BatchNormalization, InstanceNormalization, MeanVarianceNormalization, LpNormalization and
    RMSNormalization (fast and composed) in one shapeless function over two input shapes."""
    c3 = [(k, harness.rand((3,), low=0.5, high=1.5, seed=i)) for i, k in enumerate("sbmvg")]
    w = ("w", harness.rand((1,), low=0.5, high=1.5, seed=9))
    wl = ("wl", harness.rand((6,), low=0.5, high=1.5, seed=8))
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["a"], name="bn"),
             helper.make_node("InstanceNormalization", ["a", "s", "b"], ["c"], name="in"),
             helper.make_node("MeanVarianceNormalization", ["c"], ["d"], name="mvn", axes=[1, 2]),
             helper.make_node("LpNormalization", ["d"], ["e"], name="lp", axis=1),
             helper.make_node("RMSNormalization", ["e", "w"], ["f"], name="rms", axis=1),
             helper.make_node("RMSNormalization", ["f", "wl"], ["y"], name="rms_fast")]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 3, "T", 6))],
                           [("y", TensorProto.FLOAT, ("N", 3, "T", 6))],
                           initializers=c3 + [w, wl], opset=23)
    oc.check_compiled(m, [{"x": harness.rand((2, 3, 4, 6), seed=3)},
                          {"x": harness.rand((1, 3, 7, 6), seed=4)}], rtol=1e-4,
                      atol=1e-4)


def test_compiled_keyed_group_norm_lrn():
    s = ("s", harness.rand((6,), low=0.5, high=1.5, seed=1))
    b = ("b", harness.rand((6,), seed=2))
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["a"], name="gn",
                              num_groups=3),
             helper.make_node("LRN", ["a"], ["y"], name="lrn", size=3)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 6, "H", "W"))],
                           [("y", TensorProto.FLOAT, ("N", 6, "H", "W"))],
                           initializers=[s, b], opset=21)
    oc.check_compiled(m, [{"x": harness.rand((2, 6, 3, 4), seed=3)},
                          {"x": harness.rand((1, 6, 5, 2), seed=4)}], path="keyed",
                      rtol=1e-4, atol=1e-4)
