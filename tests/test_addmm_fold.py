"""A matrix product's bias folded into one addmm on the CPU device (src/ops/elementwise.c's Add,
src/ops/math.c's Gemm; bridge: mx_fold_into_product), or, for a MatMul whose constant weight was
packed once (src/cpu/matmul.c), into that product's host kernel; a Gemm by a constant B
takes that packed product itself, C as its bias row. Folding happens only where
the graph is built for one shape (eager, or compiled keyed on shapes), only when the MatMul's
product is read by the Add alone, and only for a float32 bias [N]. Each case is checked against ORT's CPU
provider, and the verbose summary's node path proves whether the fold happened: correct output
alone cannot tell a folded Add from a plain one."""
import gc

import numpy as np
import onnxruntime as ort
import onnxruntime_ep_mlx as mlx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import mlx_harness as harness

pytestmark = pytest.mark.cpu_device
FOLDED = "folded into the MatMul (addmm)"
FOLDED_PACKED = "folded into the MatMul (packed weight)"
NO_HOST = {"ONNXRUNTIME_EP_MLX_NO_HOST_MATH": "1"}  # MLX's product: the addmm fold


def run(model, feeds, monkeypatch, capfd, env, ort_fusions=False, atol=1e-5):
    """ORT's own graph optimisations are off unless asked for: they turn MatMul + Add into a
    Gemm (MatMulAddFusion) before the EP sees the graph."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    ref = harness.cpu_session(model).run(None, feeds)
    capfd.readouterr()
    so = mlx.session_options({**harness.PINNED_OPTIONS, "verbose": "1"})
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if not ort_fusions:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so)
    for _ in range(2):  # the second run takes the compiled (or eager) path again
        got = s.run(None, feeds)
    del s
    gc.collect()
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=atol)
    return capfd.readouterr().err


def matmul_add(a_shape, b_shape, bias_shape, bias_first=False, extra_reader=False):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(b_shape, np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(bias_shape, np.float32), "bias")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="mm"),
             helper.make_node("Add", ["bias", "p"] if bias_first else ["p", "bias"], ["s"],
                              name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    outputs = [("y", TP.FLOAT, None)]
    if extra_reader:  # the product is read twice: folding would compute it twice
        nodes.append(helper.make_node("Neg", ["p"], ["q"], name="neg"))
        outputs.append(("q", TP.FLOAT, None))
    model = harness.make_model(nodes, [("x", TP.FLOAT, a_shape)], outputs, initializers=inits)
    feeds = {"x": np.random.default_rng(1).standard_normal(a_shape, np.float32)}
    return model, feeds


KEYED = {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"}
EAGER = {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mlx-product"])
@pytest.mark.parametrize("env", [KEYED, EAGER], ids=["keyed", "eager"])
@pytest.mark.parametrize("a,b,bias_first", [((1, 16, 24), (24, 8), False),
                                            ((2, 3, 16, 24), (24, 8), True),
                                            ((16, 24), (24, 8), False),
                                            ((3, 37, 700), (700, 45), False),
                                            ((1, 128, 40), (40, 24), False),
                                            ((1, 139, 40), (40, 24), False)],
                         ids=["3d", "4d-bias-first", "2d", "tails-two-k-blocks",
                              "rest-of-two-rows-as-4-4", "second-row-block-of-seven-as-4-3"])
def test_bias_folds_into_the_product(a, b, bias_first, env, packed, monkeypatch, capfd):
    model, feeds = matmul_add(a, b, (b[-1],), bias_first)
    # sums of a[-1] products of unit normals, in another order than ORT's: float32 rounding
    atol = 1e-5 * max(1.0, a[-1] / 24)
    err = run(model, feeds, monkeypatch, capfd, env if packed else {**env, **NO_HOST}, atol=atol)
    assert f"node 'add' (Add): {FOLDED_PACKED if packed else FOLDED}" in err, err[-2000:]
    assert ("node 'mm' (MatMul): packed weight (CPU)" in err) == packed, err[-2000:]


@pytest.mark.parametrize("case", ["shapeless", "product-read-twice", "bias-2d", "batched-b"])
def test_bias_stays_a_plain_add(case, monkeypatch, capfd):
    # a constant weight makes the group keyed on the CPU device (packed): off, to stay shapeless
    env = NO_HOST if case == "shapeless" else KEYED
    if case == "bias-2d":
        model, feeds = matmul_add((1, 16, 24), (24, 8), (16, 8))
    elif case == "batched-b":  # a 3-D right operand: MLX's product is not one matrix product
        model, feeds = matmul_add((2, 16, 24), (2, 24, 8), (8,))
    else:
        model, feeds = matmul_add((1, 16, 24), (24, 8), (8,),
                                  extra_reader=case == "product-read-twice")
    err = run(model, feeds, monkeypatch, capfd, env)
    assert "(Add): folded" not in err
    assert "path shapeless" in err if case == "shapeless" else "path keyed" in err


ROW = "packed weight, C its bias row (CPU)"
PACKED = "packed weight (CPU)"


@pytest.mark.parametrize("c_shape,alpha,beta,folds,packed_note", [
    ((8,), 1.0, 1.0, True, ROW), ((16, 8), 1.0, 1.0, True, PACKED), ((1, 8), 1.0, 1.0, True, ROW),
    ((8,), 0.5, 1.0, False, None), ((8,), 1.0, 2.0, False, PACKED)])
@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mlx-product"])
def test_gemm_with_unit_scales_is_one_addmm(c_shape, alpha, beta, folds, packed_note, packed,
                                            monkeypatch, capfd):
    """Gemm by a constant B takes the packed product (C its bias row where C is one row, else
    added after), unless alpha is not 1; with MLX's product, unit scales make it one addmm."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 24), np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c_shape, np.float32), "c")]
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["g"], name="gemm", transB=1,
                              alpha=alpha, beta=beta),
             helper.make_node("Relu", ["g"], ["y"], name="relu")]
    model = harness.make_model(nodes, [("x", TP.FLOAT, (16, 24))], [("y", TP.FLOAT, None)],
                               initializers=inits)
    feeds = {"x": rng.standard_normal((16, 24), np.float32)}
    err = run(model, feeds, monkeypatch, capfd, KEYED if packed else {**KEYED, **NO_HOST})
    if packed:
        assert ("node 'gemm' (Gemm): " + str(packed_note) in err) == bool(packed_note), err[-2000:]
        assert "(Gemm): addmm" not in err
    else:
        assert ("node 'gemm' (Gemm): addmm (CPU)" in err) == folds, err[-2000:]


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mlx-product"])
def test_ort_fused_matmul_add_reaches_the_gemm_path(packed, monkeypatch, capfd):
    """With ORT's optimisations on, MatMul + Add arrives as ORT's Gemm (batched left operand
    reshaped around it), which the Gemm row runs as the packed product with C as its bias row,
    or, with MLX's product, as one addmm."""
    model, feeds = matmul_add((1, 16, 24), (24, 8), (8,))
    err = run(model, feeds, monkeypatch, capfd, KEYED if packed else {**KEYED, **NO_HOST},
              ort_fusions=True)
    assert f"(Gemm): {ROW if packed else 'addmm (CPU)'}" in err, err[-2000:]
