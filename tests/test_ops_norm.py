"""LayerNormalization rows (src/ops/norm.c): the MLX fast-kernel path (last axis, 1-D Scale/B,
Y only) and the composed path (several normalised axes, broadcast Scale/B, the Mean and
InvStdDev outputs), over float dtypes and epsilons, compared with ORT's CPU provider."""
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
    oc.check_declined(m, feeds, "n", "MLX cannot hold", tmp_path)


def test_compiled_shapeless_fast_and_composed(capfd):
    """The fast kernel and the composed form (with statistics) in one compiled function, over
    two sequence lengths."""
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
                          {"x": harness.rand((4, 5, 8), seed=4)}], capfd, rtol=1e-4, atol=1e-4)
