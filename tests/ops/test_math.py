"""Matrix-product rows (src/ops/math.c): MatMul with numpy semantics (1-D operands, broadcast
batch dimensions) and Gemm (transA/transB, alpha/beta, optional and broadcast C, the opset 7..10
and 11..13 rows), over float dtypes; integer operands are declined with a reason and still
computed, on CPU."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32, FLOATS


def matmul_model(elem, a_shape, b_shape, opset=13):
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="n")
    return harness.make_model([node], [("a", elem, a_shape), ("b", elem, b_shape)],
                              [("y", elem, None)], opset=opset)


# --- MatMul ---------------------------------------------------------------------------------
SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),          # 1-D A: 1 prepended, then squeezed
    ((3, 4), (4,)),          # 1-D B: 1 appended, then squeezed
    ((4,), (4,)),            # both 1-D: a scalar
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),  # batch dimensions broadcast
    ((1, 3, 4), (2, 4, 5)),
]


@pytest.mark.parametrize("a_shape,b_shape", SHAPES, ids=str)
def test_matmul_shapes(a_shape, b_shape):
    a = harness.rand(a_shape, seed=1)
    b = harness.rand(b_shape, seed=2)
    oc.check(lambda e: matmul_model(e, a_shape, b_shape), {"a": a, "b": b}, F32)


@pytest.mark.parametrize("opset", [1, 9, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_matmul_dtypes_and_opsets(opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 MatMul arrives at opset 13")
    if dtype == F16 and opset == 1:
        pytest.skip("ORT's CPU reference inserts an invalid opset-1 Cast for float16 MatMul-1")
    a = harness.rand((2, 3, 8), seed=3)
    b = harness.rand((8, 5), seed=4)
    oc.check(lambda e: matmul_model(e, a.shape, b.shape, opset), {"a": a, "b": b}, dtype,
             scale=4)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_matmul_ints_declined(dtype, tmp_path):
    a = harness.rand((3, 4), dtype, seed=5)
    b = harness.rand((4, 2), dtype, seed=6)
    m = matmul_model(harness.onnx_type(dtype), a.shape, b.shape)
    oc.check_declined(m, {"a": a, "b": b}, "n", "floating-point matrices only", tmp_path)


def test_matmul_declined_int_next_to_claimed_float(tmp_path):
    """One graph: the float MatMul is claimed, the int one declined; both outputs correct."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="f"),
             helper.make_node("MatMul", ["i", "j"], ["z"], name="i")]
    m = harness.make_model(
        nodes, [("a", TensorProto.FLOAT, (2, 3)), ("b", TensorProto.FLOAT, (3, 4)),
                ("i", TensorProto.INT32, (2, 3)), ("j", TensorProto.INT32, (3, 4))],
        [("y", TensorProto.FLOAT, None), ("z", TensorProto.INT32, None)], opset=13)
    feeds = {"a": harness.rand((2, 3)), "b": harness.rand((3, 4), seed=1),
             "i": harness.rand((2, 3), np.int32), "j": harness.rand((3, 4), np.int32, seed=1)}
    harness.check_against_cpu(m, feeds, on_cpu=("i",))
    oc.check_declined(m, feeds, "i", "Cast the operands to float32", tmp_path)


# --- Gemm -----------------------------------------------------------------------------------
M, K, N = 3, 5, 4


def gemm_model(elem, c_shape, opset=13, trans_a=0, trans_b=0, **attrs):
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    inputs = [("a", elem, a_shape), ("b", elem, b_shape)]
    names = ["a", "b"]
    if c_shape is not None:
        inputs.append(("c", elem, c_shape))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], name="n", transA=trans_a, transB=trans_b,
                            **attrs)
    return harness.make_model([node], inputs, [("y", elem, (M, N))], opset=opset)


def gemm_feeds(trans_a, trans_b, c_shape, seed=0):
    f = {"a": harness.rand((K, M) if trans_a else (M, K), seed=seed),
         "b": harness.rand((N, K) if trans_b else (K, N), seed=seed + 1)}
    if c_shape is not None:
        f["c"] = harness.rand(c_shape, seed=seed + 2)
    return f


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("alpha,beta", [(None, None), (0.5, 2.0), (-1.5, 0.25)])
def test_gemm_transposes_and_scales(trans_a, trans_b, alpha, beta):
    attrs = {k: v for k, v in (("alpha", alpha), ("beta", beta)) if v is not None}
    oc.check(lambda e: gemm_model(e, (M, N), 13, trans_a, trans_b, **attrs),
             gemm_feeds(trans_a, trans_b, (M, N)), F32)


@pytest.mark.parametrize("c_shape", [(), (1,), (N,), (1, N), (M, 1), (1, 1), (M, N)], ids=str)
def test_gemm_c_broadcast(c_shape):
    oc.check(lambda e: gemm_model(e, c_shape, 13, 0, 1, beta=0.5), gemm_feeds(0, 1, c_shape),
             F32)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("alpha", [1.0, 2.5])
def test_gemm_without_c(opset, alpha):
    oc.check(lambda e: gemm_model(e, None, opset, 1, 0, alpha=alpha), gemm_feeds(1, 0, None), F32)


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_gemm_dtypes_and_opsets(opset, dtype):
    if dtype == BF16 and opset < 13:
        pytest.skip("bfloat16 Gemm arrives at opset 13")
    oc.check(lambda e: gemm_model(e, (N,), opset, 0, 1, alpha=0.75, beta=1.5),
             gemm_feeds(0, 1, (N,), seed=7), dtype, scale=4)


def test_gemm_beta_zero_ignores_c():
    """beta == 0 drops C, as ORT does, so an infinite C does not turn Y into NaN."""
    feeds = gemm_feeds(0, 0, (M, N))
    feeds["c"][0, 0] = np.inf
    got = oc.check(lambda e: gemm_model(e, (M, N), 13, beta=0.0), feeds, F32)[0]
    assert np.isfinite(got).all()


def test_gemm_ints_declined(tmp_path):
    """ORT's CPU provider has no integer Gemm either, so the session cannot be created; the
    partition report (written during partitioning, before that failure) carries the reason."""
    m = gemm_model(TensorProto.INT32, (N,), 13)
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "implementation for Gemm")
    assert "Gemm of int32" in declined["n"] and "floating-point" in declined["n"]


def test_gemm_then_matmul_chain():
    """A small MLP: Gemm, Relu-free MatMul and Gemm in one MLX group."""
    w1 = harness.rand((8, 16), seed=1)
    w2 = harness.rand((16, 4), seed=2)
    b2 = harness.rand((4,), seed=3)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm"),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], name="gemm", alpha=0.5)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, (3, 8))],
                           [("y", TensorProto.FLOAT, (3, 4))],
                           initializers=[("w1", w1), ("w2", w2), ("b2", b2)], opset=13)
    harness.check_against_cpu(m, {"x": harness.rand((3, 8))}, rtol=1e-4, atol=1e-5)


# --- compiled groups --------------------------------------------------------------------------
def test_compiled_shapeless_matmul_gemm():
    """MatMul (batch and 1-D operands) and Gemm in one compiled function, two batch sizes. The
    2-D weight is fed: a constant one would be packed for the CPU device's host kernel, which
    compiles keyed on shapes (tests/cpu/test_host_math.py)."""
    w = harness.rand((8, 6), seed=1)
    v = harness.rand((6,), seed=2)
    b = harness.rand((6, 5), seed=3)
    c = harness.rand((5,), seed=4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("MatMul", ["h", "v"], ["s"], name="mv"),
             helper.make_node("Gemm", ["h", "b", "c"], ["y"], name="gemm", alpha=0.5, beta=2.0),
             helper.make_node("Gemm", ["b", "h"], ["z"], name="gemm_t", transA=1, transB=1)]
    m = harness.make_model(nodes, [("x", TensorProto.FLOAT, ("N", 8)), ("w", TensorProto.FLOAT, (8, 6))],
                           [("y", TensorProto.FLOAT, ("N", 5)), ("s", TensorProto.FLOAT, ("N",)),
                            ("z", TensorProto.FLOAT, (5, "N"))],
                           initializers=[("v", v), ("b", b), ("c", c)], opset=13)
    oc.check_compiled(m, [{"x": harness.rand((3, 8), seed=5), "w": w},
                          {"x": harness.rand((7, 8), seed=6), "w": w}], rtol=1e-4, atol=1e-5)
