"""TensorScatter (ai.onnx opset 24) on MLX: claim conditions with their decline reasons, linear
and circular writes against ORT's CPU provider, negative and extreme circular indices (which the
CPU provider rejects) against a NumPy reference, run-time range errors in linear mode that name
the node and leave the session usable, and dynamic update lengths."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from mlx_harness import check_against_cpu, make_model, onnx_type
from ssm_harness import BF16, declines, f32, mlx_session_checked, ort_refuses, run, run_mlx

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def ts_model(cache, update, t=TP.FLOAT, indices=True, const_indices=None, opset=24, **attrs):
    names = ["cache", "update"] + (["idx"] if indices or const_indices is not None else [])
    node = helper.make_node("TensorScatter", names, ["out"], name="ts", **attrs)
    ins = [("cache", t, list(cache)), ("update", t, list(update))]
    inits = []
    if const_indices is not None:
        inits.append(numpy_helper.from_array(np.asarray(const_indices, np.int64), "idx"))
    elif indices:
        ins.append(("idx", TP.INT64, [cache[0]]))
    return make_model([node], ins, [("out", t, None)], initializers=inits, opset=opset)


def ts_ref(cache, update, idx, axis=-2, mode="linear"):
    out = cache.copy()
    ax = axis % cache.ndim
    cap, length = cache.shape[ax], update.shape[ax]
    for b in range(cache.shape[0]):
        start = 0 if idx is None else int(idx[b])
        for s in range(length):
            pos = start + s
            if mode == "circular":
                pos %= cap  # Python's % is Euclidean for a positive divisor
            dst = (b,) + (slice(None),) * (ax - 1) + (pos,)
            src = (b,) + (slice(None),) * (ax - 1) + (s,)
            out[dst] = update[src]
    return out


def feeds(cache_shape, update_shape, idx=None, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    if dtype == np.bool_:
        f = {"cache": r.random(cache_shape) > 0.5, "update": r.random(update_shape) > 0.5}
    else:
        f = {"cache": (r.standard_normal(cache_shape) * 10).astype(dtype),
             "update": (r.standard_normal(update_shape) * 10).astype(dtype)}
    if idx is not None:
        f["idx"] = np.asarray(idx, np.int64)
    return f


# --- accepted forms against ORT's CPU provider ---------------------------------------------------
@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("idx", [[0, 0], [3, 1], [6, 5]])
def test_decode_step_matches_cpu(mode, idx):
    m = ts_model((2, 4, 8, 3), (2, 4, 2, 3), mode=mode)
    check_against_cpu(m, feeds((2, 4, 8, 3), (2, 4, 2, 3), idx))


def test_circular_wrap_past_the_end_matches_cpu():
    m = ts_model((3, 2, 6, 4), (3, 2, 4, 4), mode="circular")
    check_against_cpu(m, feeds((3, 2, 6, 4), (3, 2, 4, 4), [5, 3, 13]))


def test_without_indices_writes_at_zero():
    m = ts_model((2, 8, 4), (2, 3, 4), indices=False)
    f = feeds((2, 8, 4), (2, 3, 4))
    check_against_cpu(m, f)
    np.testing.assert_array_equal(run_mlx(m, f)[0], ts_ref(f["cache"], f["update"], None))


@pytest.mark.parametrize("axis, cache, update", [
    (1, (2, 8, 3), (2, 5, 3)),
    (-1, (2, 3, 8), (2, 3, 5)),
    (2, (2, 3, 8, 2, 2), (2, 3, 1, 2, 2)),
    (-1, (2, 5), (2, 2)),  # rank 2: the written axis is 1
])
def test_axes_match_cpu(axis, cache, update):
    for mode in ("linear", "circular"):
        m = ts_model(cache, update, axis=axis, mode=mode)
        cap, length = cache[axis], update[axis]
        check_against_cpu(m, feeds(cache, update, [cap - length, 1]))


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.int32, np.uint8, np.bool_])
def test_element_types_match_cpu(dtype):
    m = ts_model((2, 6, 4), (2, 2, 4), t=onnx_type(dtype), mode="circular")
    check_against_cpu(m, feeds((2, 6, 4), (2, 2, 4), [4, 5], dtype=dtype))


def test_bfloat16_matches_numpy():
    f = feeds((2, 6, 4), (2, 3, 4), [4, 1])
    f["cache"], f["update"] = f["cache"].astype(BF16), f["update"].astype(BF16)
    got = run_mlx(ts_model((2, 6, 4), (2, 3, 4), t=TP.BFLOAT16, mode="circular"), f)[0]
    want = ts_ref(f32(f["cache"]), f32(f["update"]), f["idx"], mode="circular")
    np.testing.assert_array_equal(f32(got), want)


def test_zero_length_update_returns_the_cache():
    m = ts_model((2, 6, 4), (2, 0, 4))
    f = feeds((2, 6, 4), (2, 0, 4), [6, 0])  # even index == capacity is fine for length 0
    check_against_cpu(m, f)


def test_full_length_update_replaces_the_cache():
    for mode in ("linear", "circular"):
        m = ts_model((2, 5, 3), (2, 5, 3), mode=mode)
        check_against_cpu(m, feeds((2, 5, 3), (2, 5, 3), [0, 0]))
    f = feeds((2, 5, 3), (2, 5, 3), [2, -1])
    got = run_mlx(ts_model((2, 5, 3), (2, 5, 3), mode="circular"), f)[0]
    np.testing.assert_array_equal(got, ts_ref(f["cache"], f["update"], f["idx"], -2, "circular"))


def test_inputs_are_not_modified():
    f = feeds((2, 6, 4), (2, 2, 4), [1, 2])
    before = {k: v.copy() for k, v in f.items()}
    run_mlx(ts_model((2, 6, 4), (2, 2, 4)), f)
    for k in f:
        np.testing.assert_array_equal(f[k], before[k])


# --- circular indices beyond what ORT's CPU provider accepts -------------------------------------
@pytest.mark.parametrize("idx", [
    [-1, -6], [I64_MIN, I64_MAX], [I64_MIN + 1, -(6 * 10**17) - 1], [-13, 2**62 + 3],
])
def test_negative_and_extreme_circular_indices_match_numpy(idx):
    f = feeds((2, 3, 6, 2), (2, 3, 4, 2), idx)
    got = run_mlx(ts_model((2, 3, 6, 2), (2, 3, 4, 2), mode="circular"), f)[0]
    np.testing.assert_array_equal(got, ts_ref(f["cache"], f["update"], idx, -2, "circular"))


# --- run-time validation in linear mode ----------------------------------------------------------
@pytest.mark.parametrize("bad, text", [
    ([0, 7], r"write_indices\[1\] = 7 is out of range: linear mode needs 0 <= index <= 6"),
    ([-1, 0], r"write_indices\[0\] = -1 is out of range"),
    ([I64_MIN, 0], r"write_indices\[0\] = -9223372036854775808 is out of range"),
    ([0, I64_MAX], r"write_indices\[1\] = 9223372036854775807 is out of range"),
])
def test_linear_out_of_range_is_an_error_naming_the_node(bad, text):
    s = mlx_session_checked(ts_model((2, 8, 3), (2, 2, 3)))
    with pytest.raises(Exception, match=r"node 'ts' \(TensorScatter\): " + text):
        s.run(None, feeds((2, 8, 3), (2, 2, 3), bad))
    f = feeds((2, 8, 3), (2, 2, 3), [6, 0])  # the session still serves valid inputs
    np.testing.assert_array_equal(run(s, f)[0], ts_ref(f["cache"], f["update"], f["idx"]))


# --- dynamic lengths -----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_dynamic_update_length(mode):
    m = make_model([helper.make_node("TensorScatter", ["cache", "update", "idx"], ["out"],
                                     name="ts", mode=mode)],
                   [("cache", TP.FLOAT, ["B", 2, "S", 4]), ("update", TP.FLOAT, ["B", 2, "T", 4]),
                    ("idx", TP.INT64, ["B"])], [("out", TP.FLOAT, None)], opset=24)
    s = mlx_session_checked(m)
    for t_len, idx in [(1, [0, 3]), (4, [2, 0]), (0, [1, 1]), (8, [0, 0]), (3, [5, 2])]:
        f = feeds((2, 2, 8, 4), (2, 2, t_len, 4), idx, seed=t_len)
        np.testing.assert_array_equal(run(s, f)[0],
                                      ts_ref(f["cache"], f["update"], idx, -2, mode))


# --- constant indices ----------------------------------------------------------------------------
def test_constant_linear_indices_in_range_claimed():
    m = ts_model((2, 8, 3), (2, 2, 3), const_indices=[6, 0])
    f = feeds((2, 8, 3), (2, 2, 3))
    check_against_cpu(m, f)


def test_constant_circular_negative_indices():
    m = ts_model((2, 8, 3), (2, 3, 3), const_indices=[-1, I64_MIN], mode="circular")
    f = feeds((2, 8, 3), (2, 3, 3))
    got = run_mlx(m, f)[0]
    np.testing.assert_array_equal(got, ts_ref(f["cache"], f["update"], [-1, I64_MIN], -2,
                                              "circular"))


# --- declines ------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, reason", [
    (lambda: ts_model((2, 8, 3), (2, 2, 3), const_indices=[7, 0]),
     "constant write_indices[0] = 7 is out of range: linear mode needs 0 <= index <= 6 "
     "(capacity 8 - length 2)"),
    (lambda: ts_model((2, 8, 3), (2, 2, 3), const_indices=[0, -1]),
     "constant write_indices[1] = -1 is out of range: linear mode needs 0 <= index <= 6 "
     "(capacity 8 - length 2)"),
    (lambda: ts_model((2, 4, 3), (2, 5, 3)),
     "update length 5 exceeds the cache length 4 on axis 1"),
    (lambda: ts_model((2, 8, 3), (2, 2, 3), mode="ring"),
     "mode 'ring' is not 'linear' or 'circular'"),
])
def test_declines(model, reason):
    assert declines(model()).get("ts", "") == reason


def idx_shape(m, shape):
    m.graph.input[2].CopyFrom(helper.make_tensor_value_info("idx", TP.INT64, shape))
    return m


# The predicate checks these too, but where shapes are static ORT's own shape inference refuses
# the model at load, before any provider is asked, so they are never reached through ORT.
@pytest.mark.parametrize("model, ort_text", [
    (lambda: ts_model(("B", "S", "D"), ("B", "T", "D"), axis=0),
     "axis 0 is out of range for rank 3"),
    (lambda: ts_model((2, 8, 3), (2, 2, 3), axis=-3), "axis 0 is out of range for rank 3"),
    (lambda: ts_model((2, 8, 3), (2, 2, 3), axis=3), "axis 3 is out of range for rank 3"),
    (lambda: ts_model((2, 8, 3), (2, 2, 4)), "Dimension mismatch"),
    (lambda: idx_shape(ts_model((2, 8, 3), (2, 2, 3)), [3]), "Dimension mismatch"),
    (lambda: idx_shape(ts_model((2, 8, 3), (2, 2, 3)), [2, 1]), "expected to have rank 1"),
    (lambda: ts_model((8,), (2,), indices=False, axis=-1), "out of range for rank 1"),
])
def test_static_violations_refused_by_ort_first(model, ort_text):
    err = ort_refuses(model())
    assert err and ort_text in err, err
