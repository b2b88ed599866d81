"""A matrix product's bias folded into one addmm on the CPU device (src/ops/elementwise.c's Add,
src/ops/math.c's Gemm; bridge: mx_fold_into_product), or, for a MatMul whose constant weight was
packed once (src/cpu/matmul.c), into that product's host kernel; a Gemm by a constant B
takes that packed product itself, C as its bias row. Folding happens only where
the graph is built for one shape (eager, or compiled keyed on shapes), only when the MatMul's
product is read by the Add alone, and only for a float32 bias [N]. Each case is checked against ORT's CPU
provider, and the node paths of the EP's run record prove whether the fold happened: correct
output alone cannot tell a folded Add from a plain one."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import mlx_harness as harness

pytestmark = pytest.mark.cpu_device
# node paths (path, kernel, folds) as the run record gives them (src/plan/node_path.h)
FOLDED = ("mlx_fused", "addmm", ())  # the Add: MLX's product became one addmm
FOLDED_PACKED = ("epilogue", "bias", ())  # the Add: the packed product's kernel adds the bias
PACKED = ("host_kernel", "matmul_packed", ())
ROW = ("host_kernel", "matmul_packed", ("bias",))  # Gemm's C taken as the bias row
ADDMM = ("mlx_fused", "addmm", ("bias",))
NO_HOST = {"ONNXRUNTIME_EP_MLX_NO_HOST_MATH": "1"}  # MLX's product: the addmm fold


def run(model, feeds, monkeypatch, env, ort_fusions=False, atol=1e-5):
    """ORT's own graph optimisations are off unless asked for: they turn MatMul + Add into a
    Gemm (MatMulAddFusion) before the EP sees the graph."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    ref = harness.cpu_session(model).run(None, feeds)
    # the second run takes the compiled (or eager) path again
    got, record = harness.run_with_stats(model, feeds, runs=2, optimize=ort_fusions)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=atol)
    return record


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
def test_bias_folds_into_the_product(a, b, bias_first, env, packed, monkeypatch):
    model, feeds = matmul_add(a, b, (b[-1],), bias_first)
    # sums of a[-1] products of unit normals, in another order than ORT's: float32 rounding
    atol = 1e-5 * max(1.0, a[-1] / 24)
    rec = run(model, feeds, monkeypatch, env if packed else {**env, **NO_HOST}, atol=atol)
    assert harness.node_path(rec, "add") == (FOLDED_PACKED if packed else FOLDED), rec
    assert (harness.node_path(rec, "mm") == PACKED) == packed, rec


@pytest.mark.parametrize("case", ["shapeless", "product-read-twice", "bias-2d", "batched-b"])
def test_bias_stays_a_plain_add(case, monkeypatch):
    # a constant weight makes the group keyed on the CPU device (packed): off, to stay shapeless
    env = NO_HOST if case == "shapeless" else KEYED
    if case == "bias-2d":
        model, feeds = matmul_add((1, 16, 24), (24, 8), (16, 8))
    elif case == "batched-b":  # a 3-D right operand: MLX's product is not one matrix product
        model, feeds = matmul_add((2, 16, 24), (2, 24, 8), (8,))
    else:
        model, feeds = matmul_add((1, 16, 24), (24, 8), (8,),
                                  extra_reader=case == "product-read-twice")
    rec = run(model, feeds, monkeypatch, env)
    assert harness.node_path(rec, "add") not in (FOLDED, FOLDED_PACKED), rec
    want = "shapeless" if case == "shapeless" else "keyed"
    assert any(g["path"] == want for g in rec["groups"]), rec


@pytest.mark.parametrize("c_shape,alpha,beta,folds,packed_note", [
    ((8,), 1.0, 1.0, True, ROW), ((16, 8), 1.0, 1.0, True, PACKED), ((1, 8), 1.0, 1.0, True, ROW),
    ((8,), 0.5, 1.0, False, None), ((8,), 1.0, 2.0, False, PACKED)])
@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mlx-product"])
def test_gemm_with_unit_scales_is_one_addmm(c_shape, alpha, beta, folds, packed_note, packed,
                                            monkeypatch):
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
    rec = run(model, feeds, monkeypatch, KEYED if packed else {**KEYED, **NO_HOST})
    if packed:  # the packed product, or (alpha not 1) no noted path at all: not addmm either
        assert harness.node_path(rec, "gemm") == packed_note, rec
    else:
        assert (harness.node_path(rec, "gemm") == ADDMM) == folds, rec


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "mlx-product"])
def test_ort_fused_matmul_add_reaches_the_gemm_path(packed, monkeypatch):
    """With ORT's optimisations on, MatMul + Add arrives as ORT's Gemm (batched left operand
    reshaped around it), which the Gemm row runs as the packed product with C as its bias row,
    or, with MLX's product, as one addmm."""
    model, feeds = matmul_add((1, 16, 24), (24, 8), (8,))
    rec = run(model, feeds, monkeypatch, KEYED if packed else {**KEYED, **NO_HOST},
              ort_fusions=True)
    assert (ROW if packed else ADDMM) in harness.op_paths(rec, "Gemm"), rec
