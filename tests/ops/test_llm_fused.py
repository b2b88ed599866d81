"""The fused forms ORT's transformer optimizer writes (com.microsoft): FastGelu (bias
optional), BiasGelu, QuickGelu (alpha) and FusedMatMul (transA/transB, transBatchA/transBatchB,
alpha, batch broadcasting), against ORT's CPU provider with proof they ran on MLX."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model
from ssm_harness import MS, declines

F, H16 = TP.FLOAT, TP.FLOAT16
NP = {F: np.float32, H16: np.float16}


def rnd(shape, dtype=F, seed=0, scale=2.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(NP[dtype])


def act_model(op, shape, dtype=F, bias=None, bias_init=True, **attrs):
    names, ins, inits = ["x"], [("x", dtype, shape)], []
    if bias is not None:
        names.append("b")
        if bias_init:
            inits.append(("b", rnd(bias, dtype, 1)))
        else:
            ins.append(("b", dtype, bias))
    node = helper.make_node(op, names, ["y"], name="act", domain="com.microsoft", **attrs)
    return make_model([node], ins, [("y", dtype, None)], inits, opset=17, domains=MS)


def act_tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == F else dict(rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("op,bias,attrs,bias_init", [
    ("FastGelu", None, {}, True), ("FastGelu", [32], {}, True), ("FastGelu", [32], {}, False),
    ("BiasGelu", [32], {}, True), ("BiasGelu", [32], {}, False), ("QuickGelu", None, {}, True),
    ("QuickGelu", None, {"alpha": 1.0}, True), ("QuickGelu", None, {"alpha": -0.7}, True)])
def test_activations(op, bias, attrs, bias_init):
    model = act_model(op, [2, 5, 32], F, bias, bias_init, **attrs)
    feeds = {"x": rnd([2, 5, 32])}
    if not bias_init:
        feeds["b"] = rnd(bias, F, 1)
    check_against_cpu(model, feeds, **act_tol(F))


@pytest.mark.parametrize("op,bias", [("FastGelu", [32]), ("BiasGelu", [32]), ("QuickGelu", None)])
def test_activations_float16(op, bias):
    """float16 (ORT's CPU provider computes these in float32 only for some): the float32 model's
    answer on the same rounded inputs is the reference where ORT has no float16 kernel."""
    from mlx_harness import cpu_session, run_on_mlx
    m16 = act_model(op, [3, 32], H16, bias)
    x = rnd([3, 32], H16)
    got, placed = run_on_mlx(m16, {"x": x})
    assert placed["act"] == "MLXExecutionProvider"
    m32 = act_model(op, [3, 32], F, bias)
    if bias is not None:
        m32.graph.initializer[0].CopyFrom(helper.make_tensor(
            "b", F, bias, rnd(bias, H16, 1).astype(np.float32).ravel()))
    ref = cpu_session(m32).run(None, {"x": x.astype(np.float32)})[0]
    assert got[0].dtype == np.float16
    np.testing.assert_allclose(got[0].astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def fmm_model(a_shape, b_shape, dtype=F, **attrs):
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], name="fmm", domain="com.microsoft",
                            **attrs)
    return make_model([node], [("A", dtype, a_shape), ("B", dtype, b_shape)], [("Y", dtype, None)],
                      opset=17, domains=MS)


@pytest.mark.parametrize("a,b,attrs", [
    ([4, 8], [8, 5], {}),
    ([4, 8], [5, 8], {"transB": 1, "alpha": 0.125}),
    ([8, 4], [8, 5], {"transA": 1}),
    ([8, 4], [5, 8], {"transA": 1, "transB": 1, "alpha": 2.0}),
    ([2, 3, 4, 8], [2, 3, 5, 8], {"transB": 1, "alpha": 0.5}),  # attention scores
    ([2, 3, 4, 8], [8, 5], {}),                                 # batch broadcasting
    ([3, 4, 8], [1, 8, 5], {}),
    ([4, 2, 8], [2, 8, 5], {"transBatchA": 1}),
    ([4, 2, 8], [2, 5, 8], {"transBatchA": 1, "transB": 1}),
    ([8, 2, 4], [2, 8, 5], {"transBatchA": 1, "transA": 1}),
    ([2, 4, 8], [8, 2, 5], {"transBatchB": 1}),
    ([2, 4, 8], [5, 2, 8], {"transBatchB": 1, "transB": 1, "alpha": 0.3}),
    ([3, 2, 4, 8], [8, 3, 2, 5], {"transBatchB": 1}),
])
def test_fused_matmul(a, b, attrs):
    model = fmm_model(a, b, **attrs)
    check_against_cpu(model, {"A": rnd(a, seed=2), "B": rnd(b, seed=3)}, rtol=1e-4, atol=1e-4)


def test_fused_matmul_declines():
    model = fmm_model([8], [8, 5], transA=1)
    assert "transA" in declines(model).get("fmm", "")
    model = fmm_model([4, 8], [8, 5], transBatchA=1)
    assert "one rank, 3 or more (ranks 2 and 2)" in declines(model).get("fmm", "")


def test_fused_chain_shapeless_across_shapes():
    """FusedMatMul into FastGelu compile shapeless (they read ranks only): one session over
    several batch and sequence sizes matches ORT's CPU provider, from few traces."""
    from mlx_harness import Recorded, cpu_session, only_group
    nodes = [helper.make_node("FusedMatMul", ["A", "B"], ["Y"], name="fmm",
                              domain="com.microsoft", transB=1, alpha=0.5),
             helper.make_node("FastGelu", ["Y", "b"], ["Z"], name="fg", domain="com.microsoft")]
    model = make_model(nodes, [("A", F, ["b", "s", 8]), ("B", F, ["b", 5, 8])], [("Z", F, None)],
                       [("b", rnd([5], seed=4))], opset=17, domains=MS)
    rec, cpu = Recorded(model), cpu_session(model)
    for b, s in ((2, 3), (1, 4), (3, 7), (2, 3), (4, 9)):
        f = {"A": rnd([b, s, 8], seed=s), "B": rnd([b, 5, 8], seed=b)}
        np.testing.assert_allclose(rec.session.run(None, f)[0], cpu.run(None, f)[0], rtol=1e-5,
                                   atol=1e-5)
    g = only_group(rec.close())
    assert g["path"] == "shapeless" and g["fallbacks"] == 0 and g["traces"] <= 2, g


def test_fast_gelu_bias_of_another_length_fails_as_ort():
    from mlx_harness import mlx_session
    model = act_model("FastGelu", [2, "n"], F, [4], bias_init=True)
    with pytest.raises(Exception, match="last dimension"):
        mlx_session(model).run(None, {"x": rnd([2, 6])})
