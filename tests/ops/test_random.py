"""Random rows (src/ops/random.c). MLX's generator is not ONNX Runtime's, so values are checked
statistically, on fixed large sizes, against the distribution (moments, range, frequencies) rather
than against ORT's output: RandomNormal/RandomUniform and their Like forms (shape, dtype, mean,
spread), Bernoulli (per-probability frequencies, output dtypes), Multinomial (class frequencies,
int32/int64). Without a seed every run draws fresh values (the rows are never constant-folded,
also inside a larger fused group); with one, runs repeat. float64 is declined."""
import json

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness

N = 100_000  # samples per check: a 5-sigma band on the mean is about 1.6% of the std


def run(model, feeds=None, runs=1):
    s = harness.mlx_session(model)  # CPU fallback disabled: every node must be claimed
    return [s.run(None, feeds or {})[0] for _ in range(runs)]


def gen_model(op, attrs, out=TP.FLOAT, inputs=(), opset=22):
    node = helper.make_node(op, [i[0] for i in inputs], ["y"], name="n", **attrs)
    return harness.make_model([node], list(inputs), [("y", out, None)], opset=opset)


def close_to(value, want, sigma, n=N, k=5.0):
    assert abs(value - want) <= k * sigma / np.sqrt(n), (value, want)


@pytest.mark.parametrize("mean,scale", [(0.0, 1.0), (3.0, 0.5), (-2.0, 4.0)])
@pytest.mark.parametrize("out", [TP.FLOAT, TP.FLOAT16])
def test_random_normal(mean, scale, out):
    m = gen_model("RandomNormal", {"mean": mean, "scale": scale, "shape": [200, 500],
                                   "dtype": out}, out)
    a, b = run(m, runs=2)
    assert a.shape == (200, 500) and a.dtype == (np.float32 if out == TP.FLOAT else np.float16)
    x = a.astype(np.float64)
    close_to(x.mean(), mean, scale)
    assert abs(x.std() - scale) < 0.02 * scale
    assert abs(((x - mean) / scale > 1.0).mean() - 0.1587) < 0.01  # the tail, not just moments
    assert not np.array_equal(a, b), "two runs drew the same values"


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.0, 5.0)])
def test_random_uniform(low, high):
    m = gen_model("RandomUniform", {"low": low, "high": high, "shape": [N]})
    a, b = run(m, runs=2)
    assert a.shape == (N,) and a.dtype == np.float32
    assert a.min() >= low and a.max() < high
    width = high - low
    close_to(a.mean(), (low + high) / 2, width / np.sqrt(12))
    assert abs(a.var() - width ** 2 / 12) < 0.02 * width ** 2 / 12
    hist, _ = np.histogram(a, bins=10, range=(low, high))
    assert np.all(np.abs(hist / N - 0.1) < 0.005), hist
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
@pytest.mark.parametrize("in_type,dtype,want", [
    (TP.FLOAT, None, np.float32), (TP.FLOAT16, None, np.float16),
    (TP.INT64, TP.FLOAT, np.float32), (TP.FLOAT, TP.FLOAT16, np.float16)])
def test_like_forms(op, in_type, dtype, want):
    attrs = {} if dtype is None else {"dtype": dtype}
    out = in_type if dtype is None else dtype
    m = gen_model(op, attrs, out, inputs=[("x", in_type, [100, 1000])])
    x = np.zeros((100, 1000), helper.tensor_dtype_to_np_dtype(in_type))
    (a,) = run(m, {"x": x})
    assert a.shape == (100, 1000) and a.dtype == want
    v = a.astype(np.float64)
    if op == "RandomNormalLike":
        close_to(v.mean(), 0.0, 1.0)
        assert abs(v.std() - 1.0) < 0.02
    else:
        assert v.min() >= 0.0 and v.max() <= 1.0
        close_to(v.mean(), 0.5, 1 / np.sqrt(12))


def test_seed_repeats_and_seeds_differ():
    def m(seed):
        return gen_model("RandomNormal", {"shape": [1000], "seed": seed})
    a, b = run(m(1.0), runs=2)
    (c,) = run(m(1.0))
    (d,) = run(m(2.0))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, d)


def test_fresh_values_inside_a_fused_group():
    """Random -> Add -> Mul: the group runs eagerly, so every run draws anew."""
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["r"], name="r"),
             helper.make_node("Add", ["r", "x"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "s"], ["y"], name="mul")]
    m = harness.make_model(nodes, [("x", TP.FLOAT, [4, 64])], [("y", TP.FLOAT, None)], opset=22)
    got, placed = harness.run_on_mlx(m, {"x": np.zeros((4, 64), np.float32)})
    assert set(placed.values()) == {harness.EP}
    a, b = run(m, {"x": np.zeros((4, 64), np.float32)}, runs=2)
    assert not np.array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1


@pytest.mark.parametrize("dtype,want", [(None, np.float32), (TP.BOOL, np.bool_),
                                        (TP.INT32, np.int32), (TP.FLOAT16, np.float16)])
def test_bernoulli(dtype, want):
    p = np.tile(np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32), (N // 5, 1))
    attrs = {} if dtype is None else {"dtype": dtype}
    out = TP.FLOAT if dtype is None else dtype
    m = gen_model("Bernoulli", attrs, out, inputs=[("p", TP.FLOAT, list(p.shape))])
    (a,) = run(m, {"p": p})
    assert a.shape == p.shape and a.dtype == want
    freq = a.astype(np.float64).mean(axis=0)
    assert freq[0] == 0.0 and freq[-1] == 1.0
    for f, q in zip(freq[1:4], (0.1, 0.5, 0.9)):
        close_to(f, q, np.sqrt(q * (1 - q)), n=N // 5)


@pytest.mark.parametrize("dtype,want", [(None, np.int32), (TP.INT64, np.int64)])
def test_multinomial(dtype, want):
    probs = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]], np.float32)
    logits = np.log(np.maximum(probs, 1e-30)).astype(np.float32)
    attrs = {"sample_size": N // 2}
    if dtype is not None:
        attrs["dtype"] = dtype
    out = TP.INT32 if dtype is None else dtype
    m = gen_model("Multinomial", attrs, out, inputs=[("x", TP.FLOAT, [2, 4])], opset=7)
    (a,) = run(m, {"x": logits})
    assert a.shape == (2, N // 2) and a.dtype == want
    assert a.min() >= 0 and a.max() <= 3
    for row, p in zip(a, probs):
        freq = np.bincount(row, minlength=4) / row.size
        for f, q in zip(freq, p):
            close_to(f, q, np.sqrt(q * (1 - q)) + 1e-9, n=row.size)


def test_float64_declined(tmp_path):
    m = gen_model("RandomNormal", {"shape": [3], "dtype": TP.DOUBLE}, TP.DOUBLE, opset=21)
    report = tmp_path / "partition.json"
    s = harness.mlx_session(m, allow_cpu=True, provider_options={"report_file": str(report)})
    assert harness.assignment(s).get("n") == "CPUExecutionProvider"
    assert s.run(None, {})[0].shape == (3,)
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert "float64" in declined["n"]
