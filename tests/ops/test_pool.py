"""Pooling rows (src/ops/pool.c): MaxPool, AveragePool and LpPool over 1-3 spatial dims with
strides, explicit (asymmetric) pads, dilations, ceil_mode (a last window that would start in the
right padding is dropped), auto_pad, count_include_pad and p; the global pools; float32/float16
against ORT's CPU provider, bfloat16 (no ORT CPU kernel) against the float32 model on CPU, int8
and uint8 MaxPool; every opset row (the few without an ORT CPU kernel against the next opset's
model on CPU); and the declined forms, which stay on CPU with their reasons."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
import ops_failures as of
from ops_common import BF16, F16, F32, FLOATS

# (id, X shape, attributes)
CASES = [
    ("1d", (2, 3, 9), dict(kernel_shape=[3])),
    ("1d-stride-asym-pads", (2, 3, 10), dict(kernel_shape=[3], strides=[2], pads=[1, 2])),
    ("1d-ceil", (1, 2, 10), dict(kernel_shape=[3], strides=[2], ceil_mode=1)),
    ("1d-ceil-drops-window", (1, 2, 4),
     dict(kernel_shape=[2], strides=[2], pads=[0, 1], ceil_mode=1)),
    ("1d-ceil-pads", (1, 2, 6), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)),
    ("1d-dil", (1, 2, 11), dict(kernel_shape=[3], dilations=[2], pads=[2, 1])),
    ("1d-dil-ceil", (1, 2, 12), dict(kernel_shape=[2], dilations=[3], strides=[2], ceil_mode=1,
                                    pads=[1, 1])),
    ("1d-unused-tail", (1, 2, 10), dict(kernel_shape=[3], strides=[4])),
    ("1d-same-upper", (1, 2, 10), dict(kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER")),
    ("1d-same-lower", (1, 2, 9), dict(kernel_shape=[4], strides=[2], auto_pad="SAME_LOWER")),
    ("1d-valid", (1, 2, 10), dict(kernel_shape=[3], strides=[3], auto_pad="VALID")),
    ("2d", (2, 3, 8, 7), dict(kernel_shape=[3, 2])),
    ("2d-stride-asym-pads", (2, 3, 9, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1])),
    ("2d-ceil-dil", (1, 2, 9, 10), dict(kernel_shape=[2, 3], strides=[2, 3], dilations=[2, 1],
                                       ceil_mode=1, pads=[1, 1, 0, 1])),
    ("2d-same-upper", (1, 2, 7, 8),
     dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ("2d-same-lower-ceil", (1, 2, 7, 8), dict(kernel_shape=[2, 3], strides=[2, 2],
                                             auto_pad="SAME_LOWER", ceil_mode=1)),
    ("3d", (1, 2, 5, 6, 7),
     dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 1])),
    ("3d-ceil-dil", (1, 2, 6, 6, 6), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2],
                                         dilations=[1, 2, 1], ceil_mode=1)),
]
ids = [c[0] for c in CASES]


def case(name):
    return next(c for c in CASES if c[0] == name)


def pool_model(op, elem, x_shape, attrs, opset=22, outputs=1):
    names = ["y", "idx"][:outputs]
    node = helper.make_node(op, ["x"], names, name="n", **attrs)
    outs = [("y", elem, None)] + ([("idx", TensorProto.INT64, None)] if outputs > 1 else [])
    return harness.make_model([node], [("x", elem, x_shape)], outs, opset=opset)


def x_for(shape, seed=0):
    return {"x": harness.rand(shape, seed=seed)}


@pytest.mark.parametrize("case_", CASES, ids=ids)
def test_max_pool(case_):
    _, xs, attrs = case_
    oc.check(lambda e: pool_model("MaxPool", e, xs, attrs), x_for(xs), F32)


@pytest.mark.parametrize("include_pad", [0, 1], ids=["exclude-pad", "include-pad"])
@pytest.mark.parametrize("case_", CASES, ids=ids)
def test_average_pool(case_, include_pad):
    _, xs, attrs = case_
    attrs = dict(attrs, count_include_pad=include_pad)
    oc.check(lambda e: pool_model("AveragePool", e, xs, attrs), x_for(xs), F32, rtol=1e-5,
             atol=1e-6)


@pytest.mark.parametrize("case_", CASES, ids=ids)
def test_lp_pool(case_):
    _, xs, attrs = case_
    oc.check(lambda e: pool_model("LpPool", e, xs, attrs), x_for(xs), F32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_p(p):
    _, xs, attrs = case("2d-stride-asym-pads")
    oc.check(lambda e: pool_model("LpPool", e, xs, dict(attrs, p=p)), x_for(xs), F32, rtol=1e-5,
             atol=1e-5)


DTYPE_CASES = ["1d-ceil-pads", "2d-ceil-dil", "3d"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", DTYPE_CASES)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_float_dtypes(op, name, dtype):
    """float16 against ORT's kernels; bfloat16 (opset 22, no ORT CPU kernel) against the float32
    model on CPU with the same bfloat16-rounded values. Averages and Lp norms of half types are
    summed in float32 and rounded once."""
    _, xs, attrs = case(name)
    if op == "AveragePool":
        attrs = dict(attrs, count_include_pad=1)
    oc.check(lambda e: pool_model(op, e, xs, attrs), x_for(xs), dtype, scale=2)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("name", ["1d-ceil-pads", "2d-stride-asym-pads", "3d-ceil-dil"])
def test_max_pool_int8(name, dtype):
    """MaxPool takes int8/uint8 from opset 12; windows pad with the type's minimum."""
    _, xs, attrs = case(name)
    x = harness.rand(xs, dtype, seed=3)
    oc.check(lambda e: pool_model("MaxPool", e, xs, attrs, opset=12), {"x": x}, dtype)


@pytest.mark.parametrize("op,opset", [("MaxPool", 7), ("MaxPool", 8), ("MaxPool", 10),
                                      ("MaxPool", 11), ("MaxPool", 12), ("AveragePool", 7),
                                      ("AveragePool", 10), ("AveragePool", 11),
                                      ("AveragePool", 19), ("LpPool", 2), ("LpPool", 11),
                                      ("LpPool", 18)])
def test_opset_rows(op, opset):
    """Each row, with the attributes its opset defines (ceil_mode from 10, dilations later)."""
    ceil_from, dilations_from = {"MaxPool": (10, 10), "AveragePool": (10, 19),
                                 "LpPool": (18, 18)}[op]
    _, xs, attrs = case("1d-ceil-pads" if opset >= ceil_from else "1d-stride-asym-pads")
    if op == "AveragePool" and opset >= 7:
        attrs = dict(attrs, count_include_pad=1)
    if opset >= dilations_from:
        attrs = dict(attrs, dilations=[2])
    oc.check(lambda e: pool_model(op, e, xs, attrs, opset=opset), x_for(xs), F32, atol=1e-5)


def check_against_other_opset(model, ref_model, feeds, rtol=1e-5, atol=1e-5):
    """For rows ORT's CPU provider has no kernel for: the reference is an equivalent model at an
    opset it does have, run on CPU."""
    ref = harness.cpu_session(ref_model).run(None, feeds)
    oc.check_ref(model, feeds, ref, rtol=rtol, atol=atol)


def test_average_pool_opset1_excludes_pads():
    """AveragePool-1 (no count_include_pad: pads never counted) has no ORT CPU kernel."""
    _, xs, attrs = case("2d-stride-asym-pads")
    check_against_other_opset(pool_model("AveragePool", TensorProto.FLOAT, xs, attrs, opset=1),
                              pool_model("AveragePool", TensorProto.FLOAT, xs, attrs, opset=7),
                              x_for(xs))


def test_lp_pool_opset1_float_p():
    """LpPool-1 takes p as a float and has no ORT CPU kernel; LpPool-2 (integer p) is the
    reference."""
    _, xs, attrs = case("2d-stride-asym-pads")
    model = pool_model("LpPool", TensorProto.FLOAT, xs, dict(attrs, p=3.0), opset=1)
    ref_model = pool_model("LpPool", TensorProto.FLOAT, xs, dict(attrs, p=3), opset=2)
    check_against_other_opset(model, ref_model, x_for(xs))


# --- global pools -----------------------------------------------------------------------------
GLOBAL_SHAPES = [(2, 3, 7), (2, 3, 5, 6), (1, 2, 3, 4, 5)]
GLOBALS = ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"]


def global_model(op, elem, shape, opset, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="n", **attrs)
    return harness.make_model([node], [("x", elem, shape)], [("y", elem, None)], opset=opset)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", GLOBAL_SHAPES, ids=str)
@pytest.mark.parametrize("op", GLOBALS)
def test_global_pools(op, shape, dtype):
    """Opset 22 (bfloat16 arrives there); ORT's CPU provider has no GlobalLpPool-22 kernel, so
    that one is compared with GlobalLpPool-2 on CPU (float32 reference for half types)."""
    x = harness.rand(shape, seed=4)
    if op != "GlobalLpPool":
        oc.check(lambda e: global_model(op, e, shape, 22), {"x": x}, dtype, scale=2)
        return
    xd = x.astype(dtype)
    ref = harness.cpu_session(global_model(op, TensorProto.FLOAT, shape, 2)).run(
        None, {"x": xd.astype(np.float32)})[0]
    model = global_model(op, oc.elem(dtype), shape, 22)
    rtol, atol = oc.tol(dtype, 2)
    if dtype == BF16:
        got, placed = oc.run_bf16_on_mlx(model, {"x": xd}, [ref.shape])
        assert placed["n"] == harness.EP
        np.testing.assert_allclose(np.asarray(got[0], np.float32), ref, rtol=rtol, atol=atol)
    else:
        oc.check_ref(model, {"x": xd}, [ref.astype(dtype)], rtol=rtol, atol=atol)


@pytest.mark.parametrize("op,opset", [("GlobalMaxPool", 1), ("GlobalAveragePool", 1),
                                      ("GlobalLpPool", 2)])
def test_global_opset_rows(op, opset):
    x = harness.rand((2, 3, 4, 5), seed=5)
    oc.check(lambda e: global_model(op, e, x.shape, opset, p=3) if op == "GlobalLpPool"
             else global_model(op, e, x.shape, opset), {"x": x}, F32, atol=1e-5)


def test_global_lp_pool_opset1_float_p():
    x = x_for((2, 3, 4, 5), seed=6)
    model = global_model("GlobalLpPool", TensorProto.FLOAT, (2, 3, 4, 5), 1, p=3.0)
    ref_model = global_model("GlobalLpPool", TensorProto.FLOAT, (2, 3, 4, 5), 2, p=3)
    check_against_other_opset(model, ref_model, x)


def test_pools_inside_a_graph():
    """MaxPool -> AveragePool -> GlobalAveragePool fused in one MLX group."""
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], name="m", kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
             helper.make_node("AveragePool", ["a"], ["b"], name="a", kernel_shape=[2, 2],
                              pads=[1, 0, 0, 1]),
             helper.make_node("GlobalAveragePool", ["b"], ["y"], name="g")]
    x = harness.rand((2, 3, 11, 9), seed=7)
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, x.shape)],
                               [("y", TensorProto.FLOAT, None)])
    harness.check_against_cpu(model, {"x": x})


# --- host kernels on the CPU device (src/cpu/pool.c) -------------------------------------
AVG_HOST_CASES = [c for c in CASES if c[0] in ("1d-stride-asym-pads", "1d-ceil-drops-window",
                                               "1d-dil-ceil", "2d-stride-asym-pads",
                                               "2d-ceil-dil", "2d-same-lower-ceil", "3d",
                                               "3d-ceil-dil")]
AVG_HOST_CASES.append(("rec-neck", (1, 48, 3, 80), dict(kernel_shape=[3, 2], strides=[3, 2])))


@pytest.mark.cpu_device
@pytest.mark.parametrize("after_conv", [False, True], ids=["input", "after-conv"])
@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("case_", AVG_HOST_CASES, ids=[c[0] for c in AVG_HOST_CASES])
def test_average_pools_are_host_kernels(case_, include_pad, after_conv):
    """AveragePool, then GlobalAveragePool of its result and of its input, each one host kernel
    on the CPU device (the group is keyed: AveragePool is shape-keyed). The input is the model's
    (channels-first) or a 1x1 convolution's channels-last result seen channels-first, as in
    PP-OCR's neck; the pooled result is channels-last."""
    _, xs, attrs = case_
    nodes, inits, src = [], [], "x"
    if after_conv:
        c = xs[1]
        inits.append(("w", harness.rand((c, c) + (1,) * (len(xs) - 2), seed=9)))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["c"], name="conv"))
        src = "c"
    nodes += [helper.make_node("AveragePool", [src], ["p"], name="n", count_include_pad=include_pad,
                               **attrs),
              helper.make_node("GlobalAveragePool", ["p"], ["g"], name="global"),
              helper.make_node("GlobalAveragePool", [src], ["g2"], name="global_in")]
    model = harness.make_model(nodes, [("x", TensorProto.FLOAT, xs)],
                               [("p", TensorProto.FLOAT, None), ("g", TensorProto.FLOAT, None),
                                ("g2", TensorProto.FLOAT, None)],
                               initializers=inits, opset=19)
    got, ref, rec = harness.run_with_paths(model, x_for(xs, seed=8))
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    paths = harness.node_paths(rec)
    assert paths.get("n") == harness.host("avg_pool"), paths
    assert paths.get("global") == harness.host("global_avg_pool"), paths
    assert paths.get("global_in") == harness.host("global_avg_pool"), paths


# --- declined forms ---------------------------------------------------------------------------
def test_declines_max_pool_indices(tmp_path):
    _, xs, attrs = case("2d-stride-asym-pads")
    m = pool_model("MaxPool", TensorProto.FLOAT, xs, attrs, outputs=2)
    oc.check_declined(m, x_for(xs), "n", "Indices", tmp_path)


def test_declines_pads_not_below_kernel(tmp_path):
    """ORT's CPU kernel then fails the session; the EP's report, written while partitioning,
    still gives the reason."""
    m = pool_model("AveragePool", TensorProto.FLOAT, (1, 2, 8), dict(kernel_shape=[2], pads=[2, 0]))
    report = tmp_path / "partition.json"
    with pytest.raises(Exception, match="Pad should be smaller than kernel"):
        harness.mlx_session(m, allow_cpu=True, provider_options={"report_file": str(report)})
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert "smaller than kernel_shape" in declined["n"], declined


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_declines_same_with_dilations(op, tmp_path):
    """ORT pads SAME for the undilated kernel (3 outputs here, the spec's 5)."""
    xs, attrs = (1, 2, 5), dict(kernel_shape=[3], dilations=[2], auto_pad="SAME_UPPER")
    oc.check_declined(pool_model(op, TensorProto.FLOAT, xs, attrs), x_for(xs), "n", "dilations",
                      tmp_path)


def test_declines_same_with_kernel_below_stride(tmp_path):
    """SAME with kernel 1, stride 5 on 10 elements would pad by -4, where ORT's pools disagree
    with each other (MaxPool fails); declined, and AveragePool's CPU result is returned."""
    xs, attrs = (1, 2, 10), dict(kernel_shape=[1], strides=[5], auto_pad="SAME_UPPER")
    oc.check_declined(pool_model("AveragePool", TensorProto.FLOAT, xs, attrs), x_for(xs), "n",
                      "negative padding", tmp_path)


# --- inputs ORT's CPU pools reject --------------------------------------------------------------
WINDOWED = [("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])),
            ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])),
            ("LpPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))]


@pytest.mark.parametrize("x_shape", [(1, 3, 0, 0), (2, 3, 0, 5), (1, 0, 4, 4)], ids=str)
@pytest.mark.parametrize("op,attrs", WINDOWED, ids=[w[0] for w in WINDOWED])
def test_pool_of_empty_input_fails_naming_the_node(op, attrs, x_shape):
    """ORT's CPU pools accept an empty input only when the batch is what is empty; we invented a
    1x1 window of padding before. The session runs a valid input afterwards."""
    m = pool_model(op, TensorProto.FLOAT, [None, None, None, None], attrs, opset=18)
    of.rejects_then_runs(m, {"x": np.ones(x_shape, np.float32)}, x_for((1, 3, 5, 5)),
                         rtol=1e-5, atol=1e-5)
    y = of.mlx_outputs(m, {"x": np.ones((0, 3, 5, 5), np.float32)})[0]
    assert y.shape == (0, 3, 3, 3)


@pytest.mark.parametrize("x_shape", [(1, 3, 0, 0), (2, 3, 0), (1, 0, 2, 2)], ids=str)
@pytest.mark.parametrize("op", GLOBALS)
def test_global_pool_of_empty_input_fails_naming_the_node(op, x_shape):
    m = global_model(op, TensorProto.FLOAT, [None] * len(x_shape), 18)
    good_shape = tuple(d or 2 for d in x_shape)
    of.rejects_then_runs(m, {"x": np.ones(x_shape, np.float32)}, x_for(good_shape),
                         rtol=1e-5, atol=1e-5)
    batch0 = (0,) + good_shape[1:]
    assert of.mlx_outputs(m, {"x": np.ones(batch0, np.float32)})[0].shape == \
        (0, good_shape[1]) + (1,) * (len(x_shape) - 2)


@pytest.mark.parametrize("x_shape", [(0, 5, 10, 0), (0, 5, 0), (0, 0, 3, 3), (0, 2, 0, 0)],
                         ids=str)
@pytest.mark.parametrize("op", GLOBALS)
def test_global_pool_of_empty_batch_with_an_empty_spatial_dim(op, x_shape):
    """An empty batch whose spatial dim is empty too: ORT's CPU provider answers the empty
    [0, C, 1, ...]; the EP failed (MLX's max refuses to reduce an empty axis; seed 700 case 964
    of the fuzzer)."""
    m = global_model(op, TensorProto.FLOAT, [None] * len(x_shape), 18)
    x = {"x": np.ones(x_shape, np.float32)}
    got = of.mlx_outputs(m, x)[0]
    want = harness.cpu_session(m).run(None, x)[0]
    assert got.shape == want.shape == x_shape[:2] + (1,) * (len(x_shape) - 2)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("n,k,s,pads,ceil", [(3, 5, 1, [0, 0], 0), (1, 3, 1, [0, 0], 1),
                                             (1, 5, 2, [0, 0], 0), (1, 5, 1, [1, 1], 0)])
def test_pool_kernel_overshooting_the_input_fails(op, n, k, s, pads, ceil):
    """ORT computes (in + pads - extent) / stride + 1 with C division and rejects a negative
    result; smaller overshoots give its 0 or 1 windows, which we match (test_pool_overshoot_grid)."""
    attrs = dict(kernel_shape=[k], strides=[s], pads=pads, ceil_mode=ceil)
    m = pool_model(op, TensorProto.FLOAT, [1, 2, None], attrs, opset=19)
    of.rejects_then_runs(m, x_for((1, 2, n)), x_for((1, 2, k + 2)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_overshoot_grid(op):
    """Every small 1-D geometry (input 0-4, kernel 1-5, pads below the kernel, stride 1-3,
    ceil_mode): the EP fails exactly where ORT's CPU provider does, and otherwise matches it."""
    import itertools
    for n, k, s, ceil in itertools.product(range(5), range(1, 6), (1, 2, 3), (0, 1)):
        for lo, hi in itertools.product(range(k), range(k)):
            if lo + hi > 3:
                continue
            attrs = dict(kernel_shape=[k], strides=[s], pads=[lo, hi], ceil_mode=ceil)
            m = pool_model(op, TensorProto.FLOAT, [1, 2, None], attrs, opset=19)
            x = {"x": np.arange(1, 1 + 2 * n, dtype=np.float32).reshape(1, 2, n)}
            try:
                want = harness.cpu_session(m).run(None, x)[0]
            except of.CPU_ERRORS:
                want = None
            s_ = harness.mlx_session(m)
            if want is None:
                with pytest.raises(of.RuntimeException, match=of.names_node("n", op)):
                    s_.run(None, x)
            else:
                np.testing.assert_allclose(s_.run(None, x)[0], want, rtol=1e-6,
                                           err_msg=str((n, k, s, ceil, lo, hi)))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_of_empty_batch_shape_grid(op):
    """An empty batch over small 1-D geometries (input 0-2, kernel 1-3, stride 1-3, ceil_mode,
    pads): the output has ORT's shape. With ceil_mode, an empty axis without left padding has no
    window (the one window would start in the right padding): the fuzzer's AveragePool of
    [0, 7, 0, 6] with kernel 1, stride 2 gave [0, 7, 1, 3] where ORT answers [0, 7, 0, 3]."""
    import itertools
    for n, k, s, ceil in itertools.product(range(3), range(1, 4), (1, 2, 3), (0, 1)):
        for lo, hi in itertools.product(range(k), range(k)):
            attrs = dict(kernel_shape=[k], strides=[s], pads=[lo, hi], ceil_mode=ceil)
            m = pool_model(op, TensorProto.FLOAT, [None, 2, None], attrs, opset=19)
            x = {"x": np.zeros((0, 2, n), np.float32)}
            try:
                want = harness.cpu_session(m).run(None, x)[0]
            except of.CPU_ERRORS:
                continue  # a window overshooting the input: test_pool_overshoot_grid
            got = of.mlx_outputs(m, x)[0]
            assert got.shape == want.shape, (n, k, s, ceil, lo, hi)


@pytest.mark.parametrize("shape", [(3,), (2, 3)], ids=str)
@pytest.mark.parametrize("op", GLOBALS)
def test_global_pool_below_rank_3(op, shape, tmp_path):
    """ORT's CPU pools need rank >= 3: a known rank is declined with the reason; an unknown one
    fails the run naming the node (as ORT does) and the session goes on."""
    reasons = oc.declined_reasons(global_model(op, TensorProto.FLOAT, list(shape), 18), tmp_path)
    assert "rank" in reasons["n"], reasons
    node = helper.make_node(op, ["x"], ["y"], name="n")
    m = harness.make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                           [("y", TensorProto.FLOAT, None)], opset=18)
    of.rejects_then_runs(m, {"x": np.ones(shape, np.float32)}, x_for((1, 2, 3)), rtol=1e-5)
