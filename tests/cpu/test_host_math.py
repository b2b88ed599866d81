"""Softmax and LayerNormalization over the last axis, Erf and Sigmoid, run as host kernels on the
CPU device for float32 (src/cpu/math.c). Each case runs against ORT's CPU provider and the
node's noted path proves the host kernel ran: rows whose length is a multiple of the 8-float
vector and rows that end in a remainder, single rows and enough rows to split over the cores,
extreme values (exp's clamps, erf's two branches, signed zeros, infinities and NaN). With
ONNXRUNTIME_EP_MLX_NO_HOST_MATH=1 the same nodes take the composed path again, and the two agree
to float32 rounding (the host forms fuse multiply-adds where the processor has FMA). Chains one
kernel replaces whole (the fusion table, src/ops/fusions.c): Gelu's five-node spelling in its
forms, Swish as x * Sigmoid(x), layer normalisation's nine-node spelling, a Softmax with its
scale and mask folded in, and look-alikes that must stay node by node."""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
from mlx_harness import host, make_model, node_path, node_paths, rand

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: the harness
KERNEL = {"Softmax": "softmax", "LayerNormalization": "layer_norm", "Erf": "erf",
          "Sigmoid": "sigmoid"}  # the host kernel each op's node 'n' takes
pytestmark = pytest.mark.cpu_device


def run_checked(model, feeds, op, rtol, atol):
    got, ref, rec = harness.run_with_paths(model, feeds)
    assert got[0].shape == ref[0].shape and got[0].dtype == ref[0].dtype
    np.testing.assert_allclose(got[0], ref[0], rtol=rtol, atol=atol)
    assert node_path(rec, "n") == host(KERNEL[op]), node_paths(rec)
    return got[0]


SHAPES = [(1, 1), (3, 5), (2, 7, 9), (4, 16), (12, 128, 128), (3, 1000), (700, 77)]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_last_axis(shape, opset):
    x = rand(shape, low=-30, high=30, seed=3)
    axis = len(shape) - 1 if opset < 13 else -1
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], name="n", axis=axis)],
                       [("x", TP.FLOAT, list(shape))], [("y", TP.FLOAT, None)], opset=opset)
    y = run_checked(model, {"x": x}, "Softmax", rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-5)


def test_softmax_extremes():
    x = rand((6, 11), low=-5, high=5, seed=4)
    x[0, :] = [-1e30, 1e30, 0, 0, 0, 0, 0, 0, 0, 0, 0]  # far past exp's clamps
    x[1, 3] = -np.inf                                  # exp(-inf) is 0
    x[2, :] = 88.0                                     # all equal: uniform
    x[3, :] = -200.0
    x[4, 5] = np.nan                                   # a NaN spreads over its row
    # an attention mask's float32 minimum beside exp's underflow edge (results there flush to 0)
    x[5, :] = [0, -3.4e38, -87.2, -87.4, -103, -3.4e38, -1, -3.4e38, -2, -3.4e38, -3.4e38]
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], name="n", axis=-1)],
                       [("x", TP.FLOAT, [6, 11])], [("y", TP.FLOAT, None)], opset=13)
    ref = harness.cpu_session(model).run(None, {"x": x})[0]
    got = harness.run_on_mlx(model, {"x": x})[0][0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-30)
    assert np.isnan(got[4]).all() and not np.isnan(got[:4]).any()


LN_CASES = [((2, 3, 8), True), ((5, 9), True), ((1, 384), False), ((128, 384), True),
            ((64, 1001), True), ((4, 2), True)]


@pytest.mark.parametrize("shape,bias", LN_CASES, ids=[f"{s}-{'bias' if b else 'nobias'}"
                                                     for s, b in LN_CASES])
def test_layer_norm_last_axis(shape, bias):
    d = shape[-1]
    inits = [("s", rand((d,), low=0.5, high=1.5, seed=5))]
    if bias:
        inits.append(("b", rand((d,), seed=6)))
    node = helper.make_node("LayerNormalization", ["x", "s"] + (["b"] if bias else []), ["y"],
                            name="n", axis=-1, epsilon=1e-5)
    model = make_model([node], [("x", TP.FLOAT, list(shape))], [("y", TP.FLOAT, None)],
                       initializers=inits)
    x = rand(shape, low=-3, high=5, seed=7)
    run_checked(model, {"x": x}, "LayerNormalization", rtol=1e-4, atol=1e-5)


SKIP = host("layer_norm", "residual")
SKIP_CASES = {  # id: (x shape, the Add's second operand's shape, also return the sum, folded)
    "residual": ((2, 3, 8), (2, 3, 8), False, True),
    "remainder": ((3, 5, 13), (3, 5, 13), False, True),
    "split-rows": ((128, 384), (128, 384), False, True),
    "broadcast-row": ((4, 16), (16,), False, False),
    "sum-returned": ((4, 16), (4, 16), True, False),
}


@pytest.mark.parametrize("case", list(SKIP_CASES))
def test_layer_norm_of_a_residual_sum(case):
    """A transformer's residual Add before its LayerNormalization is added inside the layer
    norm's kernel, when the Add's operands have its shape and nothing else reads the sum."""
    shape, other, returned, folded = SKIP_CASES[case]
    d = shape[-1]
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["r"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["sum"]),
             helper.make_node("LayerNormalization", ["sum", "s", "c"], ["y"], name="n", axis=-1,
                              epsilon=1e-5)]
    outputs = [("y", TP.FLOAT, None)] + ([("sum", TP.FLOAT, None)] if returned else [])
    model = make_model(nodes, [("x", TP.FLOAT, list(shape)), ("r", TP.FLOAT, list(other))],
                       outputs, initializers=[("s", rand((d,), low=0.5, high=1.5, seed=5)),
                                              ("c", rand((d,), seed=6))])
    feeds = {"x": rand(shape, low=-3, high=5, seed=7), "r": rand(other, seed=8)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    assert node_path(rec, "n") == (SKIP if folded else host("layer_norm")), node_paths(rec)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 196608 + 5])
def test_erf(n):
    x = rand((n,), low=-4, high=4, seed=8)
    if n > 10:  # both branches' edges, signed zeros, saturation, infinities, NaN
        x[:10] = [0.0, -0.0, 1.0, -1.0, np.nextafter(1, 0), 10.0, -10.0, np.inf, -np.inf, 0.5]
    model = make_model([helper.make_node("Erf", ["x"], ["y"], name="n")],
                       [("x", TP.FLOAT, [n])], [("y", TP.FLOAT, None)])
    y = run_checked(model, {"x": x}, "Erf", rtol=1e-6, atol=2e-7)
    if n > 10:
        assert np.signbit(y[1]) and not np.signbit(y[0])
        # within 1.7e-7 relative of float64 (both branches: the polynomial in x^2 below 1, the
        # fit to erfc above)
        exact = np.array([math.erf(v) for v in x.astype(np.float64)])
        finite = np.isfinite(x) & (x != 0)
        rel = np.abs(y[finite] - exact[finite]) / np.abs(exact[finite])
        assert rel.max() <= 1.7e-7, rel.max()
    x = np.array([np.nan], np.float32)
    model = make_model([helper.make_node("Erf", ["x"], ["y"], name="n")],
                       [("x", TP.FLOAT, [1])], [("y", TP.FLOAT, None)])
    assert np.isnan(harness.run_on_mlx(model, {"x": x})[0][0]).all()


def test_group_is_keyed_on_the_cpu_device():
    """Softmax, LayerNormalization and Erf rows are shapeless on the GPU but keyed on the CPU
    device, where their host kernels are built for concrete shapes (src/plan/plan.c)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="n", axis=-1)]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 16])], [("y", TP.FLOAT, None)], opset=13)
    rec = harness.Recorded(model)
    for n in (3, 5):
        x = rand((n, 16), seed=n)
        np.testing.assert_allclose(rec.session.run(None, {"x": x})[0],
                                   harness.cpu_session(model).run(None, {"x": x})[0], rtol=1e-5)
    record = rec.close()
    group = harness.only_group(record)
    assert group["path"] == "keyed", group
    assert group["decided_by"] == {"node": "n", "op": "Softmax", "class": "shape_keyed"}, group
    assert node_path(record, "n") == host("softmax"), group


def test_switched_off_composes_and_agrees(tmp_path):
    """ONNXRUNTIME_EP_MLX_NO_HOST_MATH=1: the composed path again, with the same results."""
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="sm", axis=-1),
             helper.make_node("Erf", ["x"], ["e"], name="erf"),
             helper.make_node("LayerNormalization", ["x", "g"], ["l"], name="ln", axis=-1)]
    model = make_model(nodes, [("x", TP.FLOAT, [64, 96])],
                       [("s", TP.FLOAT, None), ("e", TP.FLOAT, None), ("l", TP.FLOAT, None)],
                       initializers=[("g", rand((96,), seed=9))])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    code = textwrap.dedent(f"""
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        from mlx_harness import rand
        so = mlx.session_options({{"device": "cpu", "stats_file": sys.argv[2]}})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({str(path)!r}, so)
        np.savez(sys.argv[1], *s.run(None, {{"x": rand((64, 96), low=-3, high=3, seed=10)}}))
        del s
    """)
    outs = {}
    for mode in ("on", "off"):
        # keyed in both: switched off, the group would otherwise compile shapeless, where erf
        # and exp are MLX's own rather than fastmath.c's compositions
        env = dict(os.environ, ONNXRUNTIME_EP_MLX_NO_SHAPELESS="1")
        env.pop("ONNXRUNTIME_EP_MLX_NO_HOST_MATH", None)
        if mode == "off":
            env["ONNXRUNTIME_EP_MLX_NO_HOST_MATH"] = "1"
        out, stats = tmp_path / f"{mode}.npz", tmp_path / f"{mode}.json"
        r = subprocess.run([sys.executable, "-c", code, str(out), str(stats)],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        paths = node_paths(json.loads(stats.read_text()))
        want = {"sm": host("softmax"), "erf": host("erf"), "ln": host("layer_norm")}
        if mode == "on":
            assert paths == want, paths
        else:
            assert not any(p[0] == "host_kernel" for p in paths.values()), paths
        outs[mode] = np.load(out)
    on, off = [[outs[m][k] for k in outs[m].files] for m in ("on", "off")]
    np.testing.assert_allclose(on[0], off[0], rtol=2e-6, atol=1e-9)  # softmax: sums reordered
    # erf: two approximations, each within 2.4e-7 relative of float64 (test_elementwise.py)
    np.testing.assert_allclose(on[1], off[1], rtol=4.8e-7, atol=1e-30)
    np.testing.assert_allclose(on[2], off[2], rtol=2e-6, atol=1e-6)  # layer norm: MLX's kernel


# --- chains one kernel replaces (the fusion table, src/ops/fusions.c) ------------------------------------
GELU_TAIL = host("gelu")  # the last Mul
GELU_INNER = ("inside", "gelu", ())  # the Erf: the last Mul's kernel computes it


def gelu_nodes(form):
    """Gelu's five-node spelling: x / sqrt 2 as Div or as Mul by 1 / sqrt 2, and the three
    factors x, 1 + erf, 0.5 multiplied in the orders exporters write."""
    if form == "mul-scale":
        scaled = helper.make_node("Mul", ["c_isq2", "x"], ["d"], name="d")
    else:
        scaled = helper.make_node("Div", ["x", "c_sq2"], ["d"], name="d")
    nodes = [scaled, helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["c_one", "e"], ["a"], name="a")]
    if form == "half-first":  # (x * 0.5) * (1 + erf)
        nodes += [helper.make_node("Mul", ["x", "c_half"], ["h"], name="h"),
                  helper.make_node("Mul", ["a", "h"], ["y"], name="n")]
    else:                     # (x * (1 + erf)) * 0.5
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"], name="m"),
                  helper.make_node("Mul", ["m", "c_half"], ["y"], name="n")]
    return nodes


GELU_CONSTS = [("c_sq2", np.array(np.sqrt(2), np.float32)),
               ("c_isq2", np.array([1 / np.sqrt(2)], np.float32)),
               ("c_one", np.array(1, np.float32)), ("c_half", np.array(0.5, np.float32))]


@pytest.mark.parametrize("form", ["div", "mul-scale", "half-first"])
@pytest.mark.parametrize("shape", [(5, 7), (64, 1536)], ids=["small", "split"])
def test_gelu_chain_is_one_kernel(form, shape):
    x = rand(shape, low=-6, high=6, seed=11)
    x.flat[:4] = [0.0, -0.0, 12.0, -12.0]
    model = make_model(gelu_nodes(form), [("x", TP.FLOAT, list(shape))], [("y", TP.FLOAT, None)],
                       initializers=GELU_CONSTS, opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": x})
    # for x well below 0, 1 + erf cancels: an ulp of erf near -1 (6e-8) times |x| apart
    np.testing.assert_allclose(got[0], ref[0], rtol=2e-6, atol=1e-6)
    assert node_path(rec, "n") == GELU_TAIL, node_paths(rec)
    assert node_path(rec, "erf") == GELU_INNER, node_paths(rec)


@pytest.mark.parametrize("case", ["inner-read-twice", "inner-is-output", "wrong-constant"])
def test_gelu_lookalikes_stay_separate(case):
    """A chain whose inner value something else reads (or the graph returns), or whose constant
    is not Gelu's, runs node by node."""
    nodes, outputs, consts = gelu_nodes("div"), [("y", TP.FLOAT, None)], list(GELU_CONSTS)
    if case == "inner-read-twice":
        nodes.append(helper.make_node("Neg", ["e"], ["z"], name="neg"))
        outputs.append(("z", TP.FLOAT, None))
    elif case == "inner-is-output":
        outputs.append(("a", TP.FLOAT, None))
    else:
        consts[0] = ("c_sq2", np.array(1.5, np.float32))
    model = make_model(nodes, [("x", TP.FLOAT, [4, 9])], outputs, initializers=consts, opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": rand((4, 9), low=-3, high=3, seed=12)})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-7)
    paths = node_paths(rec)
    assert GELU_TAIL not in paths.values() and GELU_INNER not in paths.values(), paths
    assert paths.get("erf") == host("erf"), paths


SOFTMAX_FOLDS = [  # (scale op or None, scale, mask shape or None)
    ("Mul", 0.125, (2, 1, 1, 40)), ("Div", 8.0, (2, 1, 1, 40)), (None, 1.0, (1, 40)),
    ("Mul", 0.5, None), (None, 1.0, (2, 3, 40, 40)), ("Mul", 0.25, (3, 1, 40))]


@pytest.mark.parametrize("op,scale,mask", SOFTMAX_FOLDS,
                         ids=["mul-mask4d", "div-mask4d", "mask2d", "scale-only", "mask-full",
                              "mask-mid-broadcast"])
def test_softmax_folds_scale_and_mask(op, scale, mask):
    shape = (2, 3, 40, 40)
    nodes, inputs, inits, v = [], [("s", TP.FLOAT, list(shape))], [], "s"
    if op:
        nodes.append(helper.make_node(op, ["s", "k"], ["p"], name="scale"))
        inits.append(("k", np.array([scale], np.float32)))
        v = "p"
    feeds = {"s": rand(shape, low=-20, high=20, seed=13)}
    if mask:
        m = np.where(rand(mask, seed=14) > 0.3, 0, np.finfo(np.float32).min).astype(np.float32)
        inputs.append(("m", TP.FLOAT, list(mask)))
        feeds["m"] = m
        nodes.append(helper.make_node("Add", [v, "m"], ["q"], name="mask"))
        v = "q"
    nodes.append(helper.make_node("Softmax", [v], ["y"], name="n", axis=-1))
    model = make_model(nodes, inputs, [("y", TP.FLOAT, None)], initializers=inits, opset=13)
    got, ref, rec = harness.run_with_paths(model, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-7)
    folds = ("scale",) * (op is not None) + ("mask",) * (mask is not None)
    assert node_path(rec, "n") == host("softmax", *folds), node_paths(rec)


def test_softmax_folds_a_scale_computed_from_shapes():
    """scores / sqrt(d), d read from the input's shape (as exporters write the scale of
    attention with dynamic shapes): the scale is known in the keyed trace, and folds in."""
    nodes = [helper.make_node("Shape", ["s"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "last"], ["d"], name="d"),
             helper.make_node("Cast", ["d"], ["df"], name="df", to=TP.FLOAT),
             helper.make_node("Sqrt", ["df"], ["r"], name="r"),
             helper.make_node("Div", ["s", "r"], ["p"], name="scale"),
             helper.make_node("Softmax", ["p"], ["y"], name="n", axis=-1)]
    model = make_model(nodes, [("s", TP.FLOAT, ["B", 3, 40, 40])], [("y", TP.FLOAT, None)],
                       initializers=[("last", np.array(3, np.int64))], opset=13)
    feeds = {"s": rand((2, 3, 40, 40), low=-20, high=20, seed=17)}
    got, ref, rec = harness.run_with_paths(model, feeds, optimize=False)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-7)
    assert node_path(rec, "n") == host("softmax", "scale"), node_paths(rec)


def test_softmax_mask_broadcast_over_columns_is_not_folded():
    """A mask that is not a whole row (its last axis 1) is added first, as its own node."""
    nodes = [helper.make_node("Add", ["s", "m"], ["q"], name="mask"),
             helper.make_node("Softmax", ["q"], ["y"], name="n", axis=-1)]
    model = make_model(nodes, [("s", TP.FLOAT, [4, 16]), ("m", TP.FLOAT, [4, 1])],
                       [("y", TP.FLOAT, None)], opset=13)
    feeds = {"s": rand((4, 16), seed=15), "m": rand((4, 1), seed=16)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-7)
    assert node_path(rec, "n") == host("softmax"), node_paths(rec)


# --- elementwise chains with constants (src/cpu/chain.c) --------------------------------
CHAIN = host("chain")  # the chain's last node: one host kernel


def one(v):
    return np.array([v], np.float32)


EPILOGUE = ("epilogue", "chain", ())  # applied by the kernel computing the chain's input

# (producer, x shape, weight shape, producer attributes, whether its output is also returned)
VISION_CASES = [
    ("pointwise", (2, 8, 30, 40), (24, 8, 1, 1), {}, False),
    ("pointwise-bias", (1, 16, 20, 30), (40, 16, 1, 1), {}, False),
    ("depthwise", (1, 16, 12, 30), (16, 1, 5, 5), dict(group=16, pads=[2, 2, 2, 2]), False),
    ("returned", (2, 8, 30, 40), (24, 8, 1, 1), {}, True),
    ("taps", (1, 16, 48, 48), (16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), False),
    ("im2col", (1, 8, 20, 24), (16, 8, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), False),
]


@pytest.mark.parametrize("producer,xs,ws,attrs,returned", VISION_CASES,
                         ids=[c[0] for c in VISION_CASES])
def test_vision_chain_after_a_convolution(producer, xs, ws, attrs, returned):
    """PP-OCR's block: a convolution, then a scale and shift by [1] constants, HardSwish in four
    nodes, and another scale and shift: one kernel at the last Add. After a pointwise (its bias
    inside the product), an im2col or a depthwise convolution (host kernels) that nothing else
    reads, the chain is that kernel's epilogue (each row as it is finished); when the
    convolution's output is returned too, or comes from MLX's own operations (a large 3x3
    convolution's per-tap products), the chain is a kernel of its own, beneath the convolution's
    channels-first view."""
    conv_in = ["x", "w", "cb"] if producer.endswith("bias") else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], name="conv", **attrs),
             helper.make_node("Mul", ["s1", "c"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a"]),
             helper.make_node("Add", ["a", "three"], ["a3"]),
             helper.make_node("Clip", ["a3", "zero", "six"], ["cl"]),
             helper.make_node("Mul", ["a", "cl"], ["hm"]),
             helper.make_node("Div", ["hm", "six1"], ["hs"]),
             helper.make_node("Mul", ["s2", "hs"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["y"], name="n")]
    inits = [("w", rand(ws, seed=20)), ("s1", one(0.7)), ("b1", one(-0.2)),
             ("three", one(3)), ("zero", np.array(0, np.float32)), ("six", np.array(6, np.float32)),
             ("six1", one(6)), ("s2", one(1.3)), ("b2", one(0.05)),
             ("cb", rand((ws[0],), seed=27))]
    outputs = [("y", TP.FLOAT, None)] + ([("c", TP.FLOAT, None)] if returned else [])
    model = make_model(nodes, [("x", TP.FLOAT, list(xs))], outputs, initializers=inits,
                       opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": rand(xs, low=-4, high=4, seed=21)})
    for g, r in zip(got, ref):  # sums of up to 144 products near 25, then the chain
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=5e-5)
    folded = producer in ("pointwise", "pointwise-bias", "depthwise", "im2col")
    paths = node_paths(rec)
    assert paths.get("n") == (EPILOGUE if folded else CHAIN), paths
    # the inner steps see the chain goes on
    assert list(paths.values()).count(CHAIN) + list(paths.values()).count(EPILOGUE) == 1, paths


# MatMul with a constant weight (one packed product, src/cpu/matmul.c), then a chain: the
# product takes it as its epilogue, over rows split between the threads (more rows than
# columns) or columns (fewer), over one block of K or several (K > 384). A Softmax first keys
# the group on shapes (a packed product is never traced shapeless).
@pytest.mark.parametrize("m,k,n", [(300, 64, 40), (24, 500, 200), (200, 800, 96), (7, 3, 5)],
                         ids=["rows", "columns", "k-blocks", "tiny"])
def test_chain_after_a_packed_product(m, k, n):
    nodes = [helper.make_node("Softmax", ["x"], ["sx"], axis=-1),
             helper.make_node("MatMul", ["sx", "w"], ["p"]),
             helper.make_node("Mul", ["p", "s1"], ["m1"]),
             helper.make_node("Max", ["m1", "lo"], ["r"]),
             helper.make_node("Sub", ["r", "b1"], ["y"], name="n")]
    inits = [("w", rand((k, n), seed=24)), ("s1", one(0.9)), ("lo", one(-0.1)),
             ("b1", one(0.25))]
    model = make_model(nodes, [("x", TP.FLOAT, [m, k])], [("y", TP.FLOAT, None)],
                       initializers=inits, opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": rand((m, k), seed=26)})
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
    assert node_path(rec, "n") == EPILOGUE, node_paths(rec)


@pytest.mark.parametrize("opset", [10, 13])
def test_every_step_kind(opset):
    """Sub from a constant, Div into one, Max, Min, Clip (attributes before opset 11, inputs
    after), Relu, in one chain after a Softmax (which keys the group on shapes)."""
    clip = (helper.make_node("Clip", ["d"], ["cl"], min=-0.5, max=2.5) if opset < 11 else
            helper.make_node("Clip", ["d", "lo", "hi"], ["cl"]))
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=1 if opset < 13 else -1),
             helper.make_node("Sub", ["k1", "s"], ["a"]),
             helper.make_node("Div", ["k2", "a"], ["b"]),
             helper.make_node("Max", ["b", "k3"], ["c"]),
             helper.make_node("Min", ["k4", "c"], ["d"]),
             clip, helper.make_node("Sub", ["cl", "k5"], ["e"]),
             helper.make_node("Relu", ["e"], ["y"], name="n")]
    inits = [("k1", one(1.5)), ("k2", one(2.0)), ("k3", one(0.2)), ("k4", one(3.0)),
             ("k5", one(0.7))]
    if opset >= 11:
        inits += [("lo", np.array(-0.5, np.float32)), ("hi", np.array(2.5, np.float32))]
    model = make_model(nodes, [("x", TP.FLOAT, [64, 100])], [("y", TP.FLOAT, None)],
                       initializers=inits, opset=opset)
    got, ref, rec = harness.run_with_paths(model, {"x": rand((64, 100), low=-3, high=3, seed=22)})
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
    assert node_path(rec, "n") == CHAIN, node_paths(rec)


@pytest.mark.parametrize("case", ["inner-is-output", "widening-constant", "small"])
def test_chain_boundaries(case):
    """A chain stops at a value the graph returns (two shorter chains, each of 3 nodes); a
    constant of more dimensions than the value is left to MLX (it widens the result); below 4096
    elements MLX's fused kernel is kept."""
    n = 16 if case == "small" else 128
    k = (np.ones((1, 1, 1), np.float32) * 0.5 if case == "widening-constant" else one(0.5))
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=-1)]
    names = ["s"]
    for i in range(6):
        names.append(f"v{i}")
        nodes.append(helper.make_node("Mul" if i % 2 else "Add", [names[-2], "k"], [names[-1]],
                                      name=f"n{i}"))
    outputs = [("v5", TP.FLOAT, None)] + ([("v2", TP.FLOAT, None)] if case == "inner-is-output"
                                          else [])
    model = make_model(nodes, [("x", TP.FLOAT, [n, 64])], outputs, initializers=[("k", k)],
                       opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": rand((n, 64), seed=23)})
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    notes = {"inner-is-output": ["n2", "n5"], "widening-constant": [], "small": []}[case]
    noted = [f"n{i}" for i in range(6) if node_path(rec, f"n{i}") == CHAIN]
    assert noted == notes, node_paths(rec)


# --- the sigmoid, Swish and layer normalisation's nine-node spelling -------------------------
@pytest.mark.parametrize("n", [1, 9, 40 * 240 + 3, 196608 + 5])
def test_sigmoid(n):
    x = rand((n,), low=-12, high=12, seed=21)
    if n > 10:  # signed zeros, both sides' saturation, exp's flush to zero, infinities
        x[:10] = [0.0, -0.0, 1.0, -1.0, 20.0, -20.0, 100.0, -100.0, np.inf, -np.inf]
    model = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="n")],
                       [("x", TP.FLOAT, [n])], [("y", TP.FLOAT, None)])
    # ORT's own logistic is a rational approximation: up to 1.5e-7 apart from float64 in absolute
    # terms, 2% in relative terms near -12; against float64 below, ours is within 2.4e-7 relative
    y = run_checked(model, {"x": x}, "Sigmoid", rtol=1e-6, atol=3e-7)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    keep = np.abs(x) < 80
    assert np.max(np.abs(y[keep] - exact[keep]) / exact[keep]) <= 2.4e-7
    if n > 10:
        assert y[0] == 0.5 and y[8] == 1.0 and y[9] == 0.0 and y[7] == 0.0
    x = np.array([np.nan], np.float32)
    model = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="n")],
                       [("x", TP.FLOAT, [1])], [("y", TP.FLOAT, None)])
    assert np.isnan(harness.run_on_mlx(model, {"x": x})[0][0]).all()


SWISH_TAIL = host("swish")  # the Mul of x * Sigmoid(x)
SWISH_INNER = ("inside", "swish", ())  # the Sigmoid: the Mul's kernel computes it
QUICK_TAIL = host("swish", "scale")  # x * Sigmoid(x * beta): beta taken in


def swish_nodes(order, beta):
    """x * Sigmoid(x), or x * Sigmoid(x * beta) with beta a [1] constant "beta" when beta is not
    None (QuickGelu's spelling), the last Mul named n and its operands in `order`."""
    operands = ["x", "s"] if order == "x-first" else ["s", "x"]
    nodes = [helper.make_node("Sigmoid", ["xb" if beta else "x"], ["s"], name="sig"),
             helper.make_node("Mul", operands, ["y"], name="n")]
    if beta:
        scaled = ["x", "beta"] if order == "x-first" else ["beta", "x"]
        nodes.insert(0, helper.make_node("Mul", scaled, ["xb"], name="scale"))
    return nodes, [("beta", one(beta))] if beta else []


@pytest.mark.parametrize("beta", [None, 1.702], ids=["swish", "quick-gelu"])
@pytest.mark.parametrize("order", ["x-first", "sigmoid-first"])
@pytest.mark.parametrize("shape", [(40, 240), (64, 1536)], ids=["small", "split"])
def test_swish_is_one_kernel(beta, order, shape):
    x = rand(shape, low=-10, high=10, seed=22)
    x.flat[:4] = [0.0, -0.0, 100.0, -100.0]
    nodes, inits = swish_nodes(order, beta)
    model = make_model(nodes, [("x", TP.FLOAT, list(shape))], [("y", TP.FLOAT, None)],
                       initializers=inits)
    got, ref, rec = harness.run_with_paths(model, {"x": x})
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6, atol=3e-6)  # ORT's logistic, above
    tail = QUICK_TAIL if beta else SWISH_TAIL
    paths = node_paths(rec)
    assert paths.get("n") == tail and paths.get("sig") == SWISH_INNER, paths


SWISH_FOLDED = ("epilogue", "swish", ())  # applied by the kernel computing x
QUICK_FOLDED = ("epilogue", "swish", ("scale",))


@pytest.mark.parametrize("beta", [None, 1.702], ids=["swish", "quick-gelu"])
@pytest.mark.parametrize("producer", ["pointwise", "matmul", "matmul-returned"])
def test_swish_folds_into_the_product_before_it(producer, beta):
    """Swish of a product's result (PP-OCRv4 rec's neck: a 1x1 convolution, then x * Sigmoid(x);
    its transformer blocks: a MatMul, then QuickGelu's x * Sigmoid(1.702 x)) is that product's
    epilogue, applied to the rows it has just finished; when the product's result is returned
    too, the Swish is a kernel of its own."""
    if producer == "pointwise":
        xs, w = (1, 24, 1, 40), rand((48, 24, 1, 1), seed=31)
        first = helper.make_node("Conv", ["x0", "w"], ["x"], name="conv")
    else:
        xs, w = (40, 120), rand((120, 96), seed=31)
        first = helper.make_node("MatMul", ["x0", "w"], ["x"], name="mm")
    nodes, inits = swish_nodes("x-first", beta)
    outputs = [("y", TP.FLOAT, None)]
    if producer.endswith("returned"):
        outputs.append(("x", TP.FLOAT, None))
    model = make_model([first] + nodes, [("x0", TP.FLOAT, list(xs))], outputs,
                       initializers=[("w", w)] + inits, opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x0": rand(xs, low=-2, high=2, seed=32)})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    returned = producer.endswith("returned")
    tail = (QUICK_TAIL if returned else QUICK_FOLDED) if beta else (
        SWISH_TAIL if returned else SWISH_FOLDED)
    paths = node_paths(rec)
    assert paths.get("n") == tail and paths.get("sig") == SWISH_INNER, paths


SWISH_LOOKALIKES = ["sigmoid-read-twice", "other-operand", "sigmoid-is-output",
                    "scaled-other-value", "scale-not-constant", "scaled-read-twice",
                    "scale-not-one-element", "scale-of-higher-rank"]


@pytest.mark.parametrize("case", SWISH_LOOKALIKES)
def test_swish_lookalikes_stay_separate(case):
    """A Sigmoid something else reads (or the graph returns), or a Mul by another value's
    sigmoid, runs as its own host kernel and a Mul; so does QuickGelu's spelling when the value
    scaled is not the one multiplied, the scale is not a one-element constant, or the scaled
    value is read elsewhere too."""
    scaled = case.startswith("scale")
    sig_in = "xb" if scaled else "x"
    nodes = [helper.make_node("Sigmoid", [sig_in], ["s"], name="sig"),
             helper.make_node("Mul", ["z" if case == "other-operand" else "x", "s"], ["y"],
                              name="n")]
    inputs, outputs = [("x", TP.FLOAT, [6, 10]), ("z", TP.FLOAT, [6, 10])], [("y", TP.FLOAT, None)]
    inits = []
    if scaled:
        factor = {"scaled-other-value": ["z", "beta"], "scale-not-constant": ["x", "z"],
                  "scaled-read-twice": ["x", "beta"],
                  "scale-not-one-element": ["x", "beta10"],
                  "scale-of-higher-rank": ["x", "beta3d"]}[case]
        nodes.insert(0, helper.make_node("Mul", factor, ["xb"], name="scale"))
        inits = [("beta", one(1.702)), ("beta10", rand((10,), seed=25)),
                 ("beta3d", np.full((1, 1, 1), 1.702, np.float32))]
    if case == "sigmoid-read-twice":
        nodes.append(helper.make_node("Neg", ["s"], ["w"], name="neg"))
        outputs.append(("w", TP.FLOAT, None))
    elif case == "sigmoid-is-output":
        outputs.append(("s", TP.FLOAT, None))
    elif case == "scaled-read-twice":
        outputs.append(("xb", TP.FLOAT, None))
    model = make_model(nodes, inputs, outputs, initializers=inits)
    feeds = {"x": rand((6, 10), low=-5, high=5, seed=23), "z": rand((6, 10), seed=24)}
    got, ref, rec = harness.run_with_paths(model, feeds)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=3e-7)
    paths = node_paths(rec)
    assert not {SWISH_TAIL, QUICK_TAIL, SWISH_INNER} & set(paths.values()), paths
    assert paths.get("sig") == host("sigmoid"), paths


LN_TAIL = host("layer_norm")  # on the spelling's last Add


def layer_norm_nodes(opset, square="pow", swap=False, axis=-1, extra_reader=False):
    """(x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + bias, as paddle2onnx writes it;
    swap: the Mul's and Adds' operands the other way round."""
    def mean(src, dst):
        if opset >= 18:
            return helper.make_node("ReduceMean", [src, "c_axes"], [dst], name=dst)
        return helper.make_node("ReduceMean", [src], [dst], name=dst, axes=[axis])
    sq = (helper.make_node("Pow", ["d", "c_two"], ["sq"], name="sq") if square == "pow"
          else helper.make_node("Mul", ["d", "d"], ["sq"], name="sq"))
    nodes = [mean("x", "m"), helper.make_node("Sub", ["x", "m"], ["d"], name="d"), sq,
             mean("sq", "v"),
             helper.make_node("Add", ["c_eps", "v"] if swap else ["v", "c_eps"], ["ve"], name="ve"),
             helper.make_node("Sqrt", ["ve"], ["r"], name="r"),
             helper.make_node("Div", ["d", "r"], ["nrm"], name="nrm"),
             helper.make_node("Mul", ["scale", "nrm"] if swap else ["nrm", "scale"], ["sc"],
                              name="sc"),
             helper.make_node("Add", ["bias", "sc"] if swap else ["sc", "bias"], ["y"], name="n")]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["d"], ["z"], name="neg"))
    return nodes


def layer_norm_consts(c, axis=-1):
    return [("c_axes", np.array([axis], np.int64)), ("c_two", np.array(2.0, np.float32)),
            ("c_eps", np.array(1e-5, np.float32)), ("scale", rand((c,), seed=25)),
            ("bias", rand((c,), low=-1, high=1, seed=26))]


@pytest.mark.parametrize("opset,square,swap", [(13, "pow", False), (13, "mul", True),
                                               (18, "pow", True), (18, "mul", False)])
@pytest.mark.parametrize("shape", [(1, 40, 120), (700, 77)], ids=["rec-neck", "split"])
def test_layer_norm_chain_is_one_kernel(opset, square, swap, shape):
    x = rand(shape, low=-3, high=5, seed=27)
    model = make_model(layer_norm_nodes(opset, square, swap), [("x", TP.FLOAT, list(shape))],
                       [("y", TP.FLOAT, None)], initializers=layer_norm_consts(shape[-1]),
                       opset=opset)
    # ORT's own optimiser fuses some spellings into LayerNormalization before the EP sees them
    got, ref, rec = harness.run_with_paths(model, {"x": x}, optimize=False)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
    assert node_path(rec, "n") == LN_TAIL, node_paths(rec)


@pytest.mark.parametrize("case", ["not-last-axis", "difference-read-thrice", "keepdims-0"])
def test_layer_norm_lookalikes_stay_separate(case):
    """Means over another axis, a difference something else also reads, or means that drop
    their axis (then the Sub broadcasts otherwise) run node by node. ORT's optimiser fuses the
    last into LayerNormalization all the same (its CPU provider then returns what the nodes do
    not compute), so the reference runs the nodes as written too."""
    shape = (6, 8, 10)
    axis = 1 if case == "not-last-axis" else -1
    nodes = layer_norm_nodes(13, axis=axis, extra_reader=case == "difference-read-thrice")
    outputs = [("y", TP.FLOAT, None)]
    if case == "difference-read-thrice":
        outputs.append(("z", TP.FLOAT, None))
    if case == "keepdims-0":  # the first mean over the last axis of [10, 10, 10] kept as
        shape = (10, 10, 10)  # [10, 10]: it broadcasts along x's first axis, a valid graph
        for nd in nodes[:1]:
            nd.attribute.append(helper.make_attribute("keepdims", 0))
    model = make_model(nodes, [("x", TP.FLOAT, list(shape))], outputs,
                       initializers=layer_norm_consts(shape[-1], axis), opset=13)
    got, ref, rec = harness.run_with_paths(model, {"x": rand(shape, low=-2, high=2, seed=28)},
                                           optimize=False)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    assert LN_TAIL not in node_paths(rec).values(), node_paths(rec)


def test_layer_norm_spelling_keys_its_anchor():
    """The fusion pass makes the spelling's last Add shape-keyed on the CPU device (its host
    kernel is built for concrete shapes), found with the batch dimension symbolic; the means
    inside it are shapeless rows of their own."""
    model = make_model(layer_norm_nodes(13), [("x", TP.FLOAT, ["N", 40, 120])],
                       [("y", TP.FLOAT, None)], initializers=layer_norm_consts(120), opset=13)
    x = rand((3, 40, 120), low=-3, high=5, seed=29)
    got, ref, rec = harness.run_with_paths(model, {"x": x}, optimize=False)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
    assert node_path(rec, "n") == LN_TAIL, node_paths(rec)
    (g,) = rec["groups"]
    assert g["path"] == "keyed" and g["decided_by"]["node"] == "n", g


def test_mean_outside_a_layer_norm_stays_shapeless():
    """A float32 mean that keeps its dims but opens no layer normalisation leaves the group
    shapeless."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], name="m", axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"], name="d"),
             helper.make_node("Neg", ["d"], ["y"], name="neg")]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 16])], [("y", TP.FLOAT, None)], opset=13)
    x = rand((5, 16), seed=31)
    got, ref, rec = harness.run_with_paths(model, {"x": x}, optimize=False)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6, atol=1e-6)
    (g,) = rec["groups"]
    assert g["path"] == "shapeless", g


def test_matmul_with_a_constant_weight_is_keyed_and_packed():
    """A group of nothing but a MatMul by a constant float32 weight and an elementwise step
    still compiles keyed on the CPU device, so the weight is packed for the plugin's product
    (src/cpu/matmul.c; a shapeless trace could not take it), over two batch sizes."""
    w = rand((48, 24), low=-1, high=1, seed=30)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="n"),
             helper.make_node("Neg", ["h"], ["y"], name="neg")]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 48])], [("y", TP.FLOAT, None)],
                       initializers=[("w", w)], opset=13)
    ref = harness.cpu_session(model)
    rec = harness.Recorded(model)
    for n in (5, 9):
        x = {"x": rand((n, 48), low=-1, high=1, seed=n)}
        np.testing.assert_allclose(rec.session.run(None, x)[0], ref.run(None, x)[0], rtol=1e-5,
                                   atol=1e-5)
    record = rec.close()
    assert node_path(record, "n") == host("matmul_packed"), record
    assert harness.only_group(record)["path"] == "keyed", record


ROW = host("matmul_packed", "bias")  # the packed product, C its bias row
PACKED = host("matmul_packed")
GEMM_CASES = {  # id: (transB, C shape or None, alpha, beta, the Gemm's path); transA: A is [48, N]
    "bias-row": (0, (24,), 1.0, 1.0, ROW),
    "transA": (0, (24,), 1.0, 1.0, ROW),
    "transB-bias-2d-row": (1, (1, 24), 1.0, 1.0, ROW),
    "no-C": (1, None, 1.0, 1.0, PACKED),
    "full-C": (0, ("N", 24), 1.0, 1.0, PACKED),
    "column-C": (0, ("N", 1), 1.0, 1.0, PACKED),
    "beta": (0, (24,), 1.0, 0.5, PACKED),
    "beta-0": (0, (24,), 1.0, 0.0, PACKED),
    "alpha": (0, (24,), 2.0, 1.0, None),  # not packed: MLX's product, shapeless
}


@pytest.mark.parametrize("case", list(GEMM_CASES))
def test_gemm_with_a_constant_b_is_packed(case):
    """Gemm by a constant float32 B (ORT's optimiser writes MatMul + Add of a bias this way)
    takes the packed product, C its bias row where it is one; other C are added after; alpha
    other than 1 keeps MLX's product (and the group shapeless). Over two batch sizes."""
    trans_b, c_shape, alpha, beta, note = GEMM_CASES[case]
    trans_a = case == "transA"
    w = rand((24, 48) if trans_b else (48, 24), low=-1, high=1, seed=34)
    inputs, inits = [("x", TP.FLOAT, [48, "N"] if trans_a else ["N", 48])], [("w", w)]
    gemm_in = ["x", "w"]
    if c_shape:
        gemm_in.append("c")
        if "N" in c_shape:
            inputs.append(("c", TP.FLOAT, list(c_shape)))
        else:
            inits.append(("c", rand(c_shape, seed=35)))
    nodes = [helper.make_node("Gemm", gemm_in, ["h"], name="n", transA=int(trans_a),
                              transB=trans_b, alpha=alpha, beta=beta),
             helper.make_node("Neg", ["h"], ["y"], name="neg")]
    model = make_model(nodes, inputs, [("y", TP.FLOAT, None)], initializers=inits, opset=13)
    ref = harness.cpu_session(model)
    rec = harness.Recorded(model)
    for n in (5, 9):
        feeds = {"x": rand((48, n) if trans_a else (n, 48), low=-1, high=1, seed=n)}
        if c_shape and "N" in c_shape:
            feeds["c"] = rand((n, c_shape[1]), seed=n + 1)
        np.testing.assert_allclose(rec.session.run(None, feeds)[0], ref.run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-5)
    record = rec.close()
    # not packed: MLX's product, no path noted
    assert node_path(record, "n") == note, record
    assert harness.only_group(record)["path"] == ("keyed" if note else "shapeless"), record


def test_gelu_after_a_gemm_is_its_epilogue():
    """ORT's optimiser turns a feed-forward layer's MatMul and bias Add into a Gemm between two
    Reshapes; the Gelu after it still folds into the packed product."""
    w = rand((96, 320), low=-0.3, high=0.3, seed=36)
    nodes = [helper.make_node("MatMul", ["t", "w"], ["p"], name="mm"),
             helper.make_node("Add", ["p", "bias"], ["x"], name="bias")] + gelu_nodes("div")
    model = make_model(nodes, [("t", TP.FLOAT, [2, 64, 96])], [("y", TP.FLOAT, None)],
                       initializers=GELU_CONSTS + [("w", w), ("bias", rand((320,), seed=37))],
                       opset=13)
    got, ref, rec = harness.run_with_paths(model,
                                           {"t": rand((2, 64, 96), low=-2, high=2, seed=38)})
    np.testing.assert_allclose(got[0], ref[0], rtol=2e-6, atol=2e-6)
    assert ROW in harness.op_paths(rec, "Gemm"), node_paths(rec)  # the Gemm ORT made
    assert node_path(rec, "n") == GELU_EPILOGUE, node_paths(rec)


GELU_EPILOGUE = ("epilogue", "gelu", ())  # the last Mul: applied by the kernel computing x


@pytest.mark.parametrize("form", ["div", "half-first"])
@pytest.mark.parametrize("returned", [False, True], ids=["private", "returned"])
def test_gelu_after_a_packed_product_is_its_epilogue(form, returned):
    """A feed-forward layer: MatMul by a constant weight, a bias Add (folded into the packed
    product), Gelu's five nodes. The product applies the Gelu to the rows it finishes, over a
    split between the threads; when the product's output is returned too, the Gelu is a kernel
    of its own."""
    w = rand((96, 320), low=-0.3, high=0.3, seed=31)
    nodes = [helper.make_node("MatMul", ["t", "w"], ["p"], name="mm"),
             helper.make_node("Add", ["p", "bias"], ["x"], name="bias")] + gelu_nodes(form)
    outputs = [("y", TP.FLOAT, None)] + ([("x", TP.FLOAT, None)] if returned else [])
    # nodes as written: ORT's optimiser makes this MatMul and Add one Gemm (not MiniLM's)
    model = make_model(nodes, [("t", TP.FLOAT, [2, 64, 96])], outputs,
                       initializers=GELU_CONSTS + [("w", w), ("bias", rand((320,), seed=32))],
                       opset=13)
    got, ref, rec = harness.run_with_paths(
        model, {"t": rand((2, 64, 96), low=-2, high=2, seed=33)}, optimize=False)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6)
    assert node_path(rec, "n") == (GELU_TAIL if returned else GELU_EPILOGUE), node_paths(rec)


HS_FOLDED = ("epilogue", "chain", ())  # applied by the kernel computing its input


@pytest.mark.parametrize("case", ["squeeze-excitation", "large-input", "small-input",
                                  "input-read-twice"])
def test_hard_sigmoid_as_host_chain_steps(case):
    """HardSigmoid of float32 on the CPU device runs as host-chain steps (alpha * x + beta, then
    clipped to [0, 1]): the epilogue of the product computing its input in a squeeze-and-
    excitation block (PP-OCRv4 rec), one kernel for a large input, and MLX's composition for a
    small one. Extremes and NaN included; against ORT's CPU provider."""
    attrs = {} if case == "squeeze-excitation" else dict(alpha=0.3, beta=0.4)
    if case == "squeeze-excitation":
        xs = (1, 16, 6, 10)
        nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
                 helper.make_node("Conv", ["g", "w"], ["c"], name="conv"),
                 helper.make_node("HardSigmoid", ["c"], ["h"], name="hs"),
                 helper.make_node("Mul", ["x", "h"], ["y"], name="n")]
        inits = [("w", rand((16, 16, 1, 1), seed=41))]
    else:
        xs = (3, 5) if case == "small-input" else (64, 100)
        nodes = [helper.make_node("HardSigmoid", ["x"], ["y"], name="hs", **attrs)]
        inits = []
        if case == "input-read-twice":  # a product's result, which its epilogue would change
            nodes = [helper.make_node("MatMul", ["x0", "w"], ["x"], name="mm"),
                     helper.make_node("HardSigmoid", ["x"], ["y"], name="hs", **attrs),
                     helper.make_node("Neg", ["x"], ["z"], name="neg")]
            inits = [("w", rand((100, 100), seed=43))]
    inputs = [("x0" if case == "input-read-twice" else "x", TP.FLOAT, list(xs))]
    outputs = [("y", TP.FLOAT, None)] + ([("z", TP.FLOAT, None)]
                                         if case == "input-read-twice" else [])
    model = make_model(nodes, inputs, outputs, initializers=inits, opset=13)
    x = rand(xs, low=-6, high=6, seed=42)
    if case not in ("squeeze-excitation", "input-read-twice"):
        x.flat[:6] = [0.0, -0.0, np.inf, -np.inf, 1e30, np.nan]
    got, ref, rec = harness.run_with_paths(model, {inputs[0][0]: x})
    for g, r in zip(got, ref):  # the products: sums of 100 terms near 6
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=2e-5)
    # small input: MLX's composition, no path noted
    note = {"squeeze-excitation": HS_FOLDED, "large-input": host("chain"), "small-input": None,
            "input-read-twice": host("chain")}[case]
    assert node_path(rec, "hs") == note, node_paths(rec)
