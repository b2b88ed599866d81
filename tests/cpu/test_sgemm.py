"""The plugin's own matrix product (src/cpu/sgemm/), the cblas_sgemm libmlx's CPU matrix products bind
to. Its entry point is called directly here, through ctypes on the loaded plugin, against float64
NumPy: both storage orders, every transpose pair, alpha and beta (beta 0 must not read C, so NaNs
there stay out), shapes that end in partial register blocks, that split over threads by columns
and by rows, that span several cache blocks of K and N, and leading dimensions wider than the
rows. Each battery runs in a child process that first creates an MLX EP session, which is what
applies the environment switches: once with the processor's kernels, once without the AVX-512
kernel (ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM=1), once with the portable ones
(ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM=1). A model-level check runs MatMuls through the EP and proves
they ran on MLX, so they reached this product; batched MatMuls of computed operands (attention's
per-head views among them) run as one host kernel that reads the operands where they lie."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
from mlx_harness import check_against_cpu, make_model, rand

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: the harness
pytestmark = pytest.mark.cpu_device

# The child's first lines: the plugin's cblas_sgemm as `f`, after a session has applied the EP's
# switches (ep.c), and a seeded `rng`.
CHILD_PROLOGUE = textwrap.dedent("""
    import ctypes, sys, threading, numpy as np, onnxruntime as ort
    sys.path.insert(0, {here!r})
    import onnxruntime_ep_mlx as mlx
    from mlx_harness import make_model
    from onnx import TensorProto as TP, helper
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, [2])],
                   [("y", TP.FLOAT, [2])])
    s = ort.InferenceSession(m.SerializeToString(), mlx.session_options({{"device": "cpu"}}))
    s.run(None, {{"x": np.ones(2, np.float32)}})
    f = ctypes.CDLL(mlx.library_path()).cblas_sgemm
    f.restype = None
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                  ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    rng = np.random.default_rng(0)
""")

BATTERY = CHILD_PROLOGUE + textwrap.dedent("""
    ROW, COL, NT, T = 101, 102, 111, 112

    def check(order, ta, tb, m, n, k, alpha, beta, pad=0):
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c0 = rng.standard_normal((m, n)).astype(np.float32)
        ref = alpha * ((a.T if ta else a).astype(np.float64) @ (b.T if tb else b))
        ref = ref + (beta * c0 if beta else 0)
        if order == ROW:  # leading dimensions `pad` wider than the rows
            A = np.zeros((a.shape[0], a.shape[1] + pad), np.float32); A[:, :a.shape[1]] = a
            B = np.zeros((b.shape[0], b.shape[1] + pad), np.float32); B[:, :b.shape[1]] = b
            C = np.full((m, n + pad), np.nan, np.float32)
            C[:, :n] = c0 if beta else np.nan
            f(ROW, T if ta else NT, T if tb else NT, m, n, k, alpha, A.ctypes.data, A.shape[1],
              B.ctypes.data, B.shape[1], beta, C.ctypes.data, C.shape[1])
            out = C[:, :n]
            assert np.isnan(C[:, n:]).all(), "wrote past the rows"
        else:
            A, B = np.asfortranarray(a), np.asfortranarray(b)
            C = np.asfortranarray(c0 if beta else np.full((m, n), np.nan, np.float32))
            # leading dimensions at least 1, as CBLAS requires even of an empty matrix
            f(COL, T if ta else NT, T if tb else NT, m, n, k, alpha, A.ctypes.data,
              max(a.shape[0], 1), B.ctypes.data, max(b.shape[0], 1), beta, C.ctypes.data, m)
            out = C
        err = np.abs(out - ref).max() / max(np.abs(ref).max(), 1.0)
        assert err < 2e-6 * max(k, 1) ** 0.5, (order, ta, tb, m, n, k, alpha, beta, err)

    count = 0
    shapes = [(1, 1, 1), (5, 7, 3), (6, 16, 8), (7, 17, 300), (13, 1100, 530), (200, 33, 800),
              (1, 1536, 384), (97, 5, 600), (128, 128, 32), (64, 40, 0),
              (1000, 70, 400)]  # column blocks cut into pieces of rows
    for order in (ROW, COL):
        for ta in (0, 1):
            for tb in (0, 1):
                for m, n, k in shapes:
                    for alpha, beta in [(1.0, 0.0), (0.5, 1.0), (2.0, -0.5), (0.0, 0.0)]:
                        check(order, ta, tb, m, n, k, alpha, beta, pad=3); count += 1
    # two callers at once: one gets the pool, the other computes alone; both right
    errors = []
    def worker():
        try:
            for _ in range(20): check(ROW, 0, 1, 150, 300, 200, 1.0, 0.0)
        except AssertionError as e:
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    [t.start() for t in threads]; [t.join() for t in threads]
    assert not errors, errors
    # arguments CBLAS rejects leave C alone
    C = np.full((2, 2), 7.0, np.float32); A = np.ones((2, 2), np.float32)
    f(ROW, 999, NT, 2, 2, 2, 1.0, A.ctypes.data, 2, A.ctypes.data, 2, 0.0, C.ctypes.data, 2)
    f(103, NT, NT, 2, 2, 2, 1.0, A.ctypes.data, 2, A.ctypes.data, 2, 0.0, C.ctypes.data, 2)
    f(ROW, NT, NT, -1, 2, 2, 1.0, A.ctypes.data, 2, A.ctypes.data, 2, 0.0, C.ctypes.data, 2)
    f(ROW, NT, NT, 2, 2, 2, 1.0, A.ctypes.data, 1, A.ctypes.data, 2, 0.0, C.ctypes.data, 2)
    f(COL, NT, NT, 2, 2, 2, 1.0, A.ctypes.data, 2, A.ctypes.data, 2, 0.0, C.ctypes.data, 1)
    assert (C == 7.0).all()
    print("checked", count)
""")


@pytest.mark.parametrize("kernels", ["fastest", "avx2", "portable"])
def test_cblas_sgemm_battery(kernels):
    env = dict(os.environ)
    for name in ("ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM", "ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM",
                 "ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM"):
        env.pop(name, None)
    if kernels == "portable":
        env["ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM"] = "1"
    if kernels == "avx2":  # the AVX2 kernels alone, also where the processor has AVX-512
        env["ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM"] = "1"
    r = subprocess.run([sys.executable, "-c", BATTERY.format(here=HERE)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "checked 352" in r.stdout


SAME_BITS = CHILD_PROLOGUE + textwrap.dedent("""
    out = []
    for m, n, k, tb, beta in [(128, 384, 384, 0, 0.0), (1000, 70, 400, 0, 1.0),
                              (128, 128, 32, 1, 0.0), (13, 1100, 530, 1, 0.5)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        f(101, 111, 112 if tb else 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data,
          k if tb else n, beta, c.ctypes.data, n)
        out.append(c)
    np.save(sys.argv[1], np.concatenate([o.ravel() for o in out]))
""")


def test_avx512_kernel_gives_the_avx2_bits(tmp_path):
    """The AVX-512 pair kernel takes the same fused multiply-adds in the same order as the AVX2
    kernels, so a product comes out bit for bit the same with it or without it
    (ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM=1). On a processor without AVX-512F both runs take the
    AVX2 kernels."""
    results = []
    for wide in (True, False):
        env = {k: v for k, v in os.environ.items()
               if k not in ("ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM", "ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM",
                            "ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM")}
        if not wide:
            env["ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM"] = "1"
        path = tmp_path / f"c_{wide}.npy"
        r = subprocess.run([sys.executable, "-c", SAME_BITS.format(here=HERE), str(path)],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-4000:]
        results.append(np.load(path))
    assert np.array_equal(results[0].view(np.uint32), results[1].view(np.uint32))


@pytest.mark.parametrize("a_shape,b_shape,trans_b", [
    ((3, 128, 384), (384, 1536), False),   # splits by columns over the threads
    ((2, 300, 64), (64, 20), False),       # narrow: splits by rows
    ((12, 128, 32), (12, 128, 32), True),  # batched, the right operand transposed
], ids=["columns", "rows", "batched-transposed"])
def test_matmul_through_the_ep(a_shape, b_shape, trans_b):
    nodes = [helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1])] if trans_b else []
    nodes.append(helper.make_node("MatMul", ["a", "bt" if trans_b else "b"], ["y"]))
    model = make_model(nodes, [("a", TP.FLOAT, list(a_shape)), ("b", TP.FLOAT, list(b_shape))],
                       [("y", TP.FLOAT, None)])
    check_against_cpu(model, {"a": rand(a_shape, seed=1), "b": rand(b_shape, seed=2)},
                      rtol=1e-4, atol=1e-4)


def test_packed_weight_product_of_many_rows():
    """A constant right operand is packed once; with 1024 rows a column block is much work, so
    the threads' parts start and end with pieces of a block's rows (src/cpu/sgemm/sgemm.c, run_part)."""
    w = rand((384, 400), seed=3)
    model = make_model([helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")],
                       [("a", TP.FLOAT, [8, 128, 384])], [("y", TP.FLOAT, None)],
                       initializers=[("w", w)])
    feeds = {"a": rand((8, 128, 384), seed=4)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-4)
    assert harness.node_path(rec, "mm") == harness.host("matmul_packed"), rec


BATCHED = harness.host("matmul_batched")  # operands read in place


@pytest.mark.parametrize("a_shape,b_shape", [
    ((2, 3, 5, 7), (2, 3, 7, 4)),      # whole batches
    ((2, 1, 5, 7), (1, 3, 7, 4)),      # both broadcast along different axes
    ((4, 9, 6), (6, 11)),              # a batch times a computed matrix
    ((9, 6), (3, 6, 2)),               # a matrix times a batch
    ((1, 12, 128, 32), (1, 12, 32, 128)),  # attention's size: items spread over the cores
    ((2, 5, 0), (2, 0, 3)),            # k = 0: zeros
], ids=["whole", "broadcast", "batch-matrix", "matrix-batch", "attention", "k0"])
def test_batched_products_of_computed_operands(a_shape, b_shape):
    """MatMul of two computed float32 operands, one with a batch, is one host kernel on the CPU
    device (src/cpu/matmul.c), its node noting the path, in a group compiled keyed on shapes
    (the Softmax's doing; a shapeless trace keeps MLX's product). Relu and Neg make the operands
    computed."""
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Neg", ["b"], ["nb"]),
             helper.make_node("MatMul", ["ra", "nb"], ["p"], name="n"),
             helper.make_node("Softmax", ["p"], ["y"], axis=-1)]
    model = make_model(nodes, [("a", TP.FLOAT, list(a_shape)), ("b", TP.FLOAT, list(b_shape))],
                       [("y", TP.FLOAT, None)])
    feeds = {"a": rand(a_shape, seed=3), "b": rand(b_shape, seed=4)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    assert got[0].shape == ref[0].shape
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    assert harness.node_path(rec, "n") == BATCHED, harness.node_paths(rec)


def test_attention_heads_are_read_where_they_lie():
    """Per-head views as attention makes them (Reshape then Transpose of [B, T, H*D]): the batched
    kernel reads them with their strides, the right operand transposed in place too."""
    b, t, h, d = 2, 20, 3, 8
    nodes = [helper.make_node("Relu", ["q"], ["rq"]), helper.make_node("Relu", ["k"], ["rk"]),
             helper.make_node("Reshape", ["rq", "split"], ["qh"]),
             helper.make_node("Reshape", ["rk", "split"], ["kh"]),
             helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["qt", "kt"], ["y"], name="n")]
    model = make_model(nodes, [("q", TP.FLOAT, [b, t, h * d]), ("k", TP.FLOAT, [b, t, h * d])],
                       [("y", TP.FLOAT, None)],
                       initializers=[("split", np.array([b, t, h, d], np.int64))])
    feeds = {"q": rand((b, t, h * d), seed=5), "k": rand((b, t, h * d), seed=6)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    assert harness.node_path(rec, "n") == BATCHED, harness.node_paths(rec)
