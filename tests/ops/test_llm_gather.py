"""GatherBlockQuantized (com.microsoft): the quantized token-embedding gather of exported
decoders, against ORT's CPU provider with proof it ran on MLX (and against NumPy, so a layout
mistake shared with ORT's reading could not pass): uint8 data with bits 2, 4 and 8, int4 and
uint4 data on any axes, zero points present or implicit, float and float16 scales, int32 and
int64 indices (negative ones and ones out of range), constant and computed tables."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model, node_path, run_with_stats
from ssm_harness import MS, declines

F, H16 = TP.FLOAT, TP.FLOAT16
NP = {F: np.float32, H16: np.float16}


def pack_last(q, bits):
    """Values (uint8, [.., n]) packed `bits` to a byte along the last axis, lowest first."""
    per = 8 // bits
    n = q.shape[-1]
    pad = (-n) % per
    if pad:
        q = np.concatenate([q, np.zeros(q.shape[:-1] + (pad,), np.uint8)], axis=-1)
    out = np.zeros(q.shape[:-1] + (q.shape[-1] // per,), np.uint8)
    for j in range(per):
        out |= (q[..., j::per] << (j * bits)).astype(np.uint8)
    return out


def uint8_case(v=50, k=96, bits=4, bs=32, zp=True, dtype=F, seed=0):
    """A [v, k] table in uint8 form: (inits, dequantized float64 table)."""
    r = np.random.default_rng(seed)
    nb = -(-k // bs)
    q = r.integers(0, 1 << bits, size=(v, k)).astype(np.uint8)
    sc = (r.random((v, nb)) * 0.05 + 0.01).astype(NP[dtype])
    inits = [("data", pack_last(q, bits)), ("scales", sc)]
    if zp:
        z = r.integers(0, 1 << bits, size=(v, nb)).astype(np.uint8)
        inits.append(("zp", pack_last(z, bits)))
    else:
        z = np.full((v, nb), 1 << (bits - 1), np.uint8)
    zf = np.repeat(z.astype(np.float64), bs, axis=1)[:, :k]
    w = (q.astype(np.float64) - zf) * np.repeat(sc.astype(np.float64), bs, axis=1)[:, :k]
    return inits, w


def gbq_model(inits, idx_shape, dtype=F, idx_type=TP.INT64, data_as_input=None, **attrs):
    names = ["data", "indices", "scales"] + (["zp"] if any(n == "zp" for n, _ in inits) else [])
    node = helper.make_node("GatherBlockQuantized", names, ["y"], name="gbq",
                            domain="com.microsoft", **attrs)
    ins = [("indices", idx_type, idx_shape)]
    if data_as_input is not None:
        ins.append(data_as_input)
        inits = [i for i in inits if i[0] != "data"]
    return make_model([node], ins, [("y", dtype, None)], inits, opset=21, domains=MS)


def take_ref(w, idx, axis=0):
    """NumPy's answer: rows of w at idx (negative from the end, out of range: zeros)."""
    dim = w.shape[axis]
    i = np.where(idx < 0, idx + dim, idx)
    ok = (i >= 0) & (i < dim)
    got = np.take(w, np.clip(i, 0, dim - 1), axis=axis)
    shape = [1] * axis + list(idx.shape) + [1] * (w.ndim - axis - 1)
    return np.where(ok.reshape(shape), got, 0.0)


def tol(dtype):
    return dict(rtol=1e-6, atol=1e-6) if dtype == F else dict(rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("bs", [16, 32, 128])
@pytest.mark.parametrize("zp", [False, True])
def test_gbq_uint8_forms(bits, bs, zp):
    inits, w = uint8_case(k=100, bits=bits, bs=bs, zp=zp)
    model = gbq_model(inits, [2, 3], bits=bits, block_size=bs, gather_axis=0, quantize_axis=1)
    idx = np.array([[0, 7, 49], [-1, 3, 3]], np.int64)
    got, _, _ = check_against_cpu(model, {"indices": idx}, **tol(F))
    np.testing.assert_allclose(got[0], take_ref(w, idx), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("idx_type", [TP.INT32, TP.INT64])
def test_gbq_embedding_shaped(dtype, idx_type):
    """A Qwen2.5-shaped embedding in miniature: int4 in uint8, block 32, quantize_axis -1, a
    [1, 7] prompt then a [1, 1] decode step through one session."""
    from mlx_harness import cpu_session, mlx_session
    inits, w = uint8_case(v=300, k=128, bits=4, bs=32, dtype=dtype)
    model = gbq_model(inits, [1, "s"], dtype, idx_type, bits=4, block_size=32, quantize_axis=-1)
    mlx, cpu = mlx_session(model), cpu_session(model)
    npi = np.int32 if idx_type == TP.INT32 else np.int64
    for idx in (np.array([[5, 299, 0, 17, 17, 150, 2]], npi), np.array([[42]], npi)):
        got, ref = mlx.run(None, {"indices": idx})[0], cpu.run(None, {"indices": idx})[0]
        assert got.dtype == ref.dtype and got.shape == ref.shape == (1, idx.shape[1], 128)
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), **tol(dtype))
        np.testing.assert_allclose(got.astype(np.float64), take_ref(w, idx), **tol(dtype))


def test_gbq_out_of_range_indices_give_zeros():
    inits, w = uint8_case(v=20, k=64, bits=8, bs=16)
    model = gbq_model(inits, [4], bits=8, block_size=16)
    idx = np.array([3, 20, -21, -20], np.int64)
    got, _, _ = check_against_cpu(model, {"indices": idx}, **tol(F))
    assert not got[0][1].any() and not got[0][2].any()
    np.testing.assert_allclose(got[0], take_ref(w, idx), rtol=1e-6, atol=1e-6)


def int4_case(shape, qaxis, bs, signed, zp, seed=0):
    """An int4 / uint4 table of `shape` quantized along qaxis: (inits, float64 table)."""
    r = np.random.default_rng(seed)
    lo, hi = (-8, 8) if signed else (0, 16)
    q = r.integers(lo, hi, size=shape)
    sshape = list(shape)
    sshape[qaxis] = -(-shape[qaxis] // bs)
    sc = (r.random(sshape) * 0.05 + 0.01).astype(np.float32)
    t = TP.INT4 if signed else TP.UINT4
    inits = [helper.make_tensor("data", t, shape, q.ravel().tolist()), ("scales", sc)]
    z = np.zeros(sshape, np.int64)
    if zp:
        z = r.integers(lo, hi, size=sshape)
        inits.append(helper.make_tensor("zp", t, sshape, z.ravel().tolist()))
    rep = lambda a: np.take(np.repeat(a.astype(np.float64), bs, axis=qaxis),  # noqa: E731
                            np.arange(shape[qaxis]), axis=qaxis)
    return inits, (q - rep(z)) * rep(sc)


def gbq_int4_model(inits, idx_shape, **attrs):
    names = ["data", "indices", "scales"] + (["zp"] if any(
        getattr(i, "name", None) == "zp" for i in inits) else [])
    node = helper.make_node("GatherBlockQuantized", names, ["y"], name="gbq",
                            domain="com.microsoft", bits=4, **attrs)
    return make_model([node], [("indices", TP.INT64, idx_shape)], [("y", F, None)], inits,
                      opset=21, domains=MS)


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("shape,gaxis,qaxis", [((40, 64), 0, 1), ((64, 40), 1, 0),
                                               ((3, 40, 32), 1, 2), ((48, 6), 0, 0)])
def test_gbq_int4_axes(signed, zp, shape, gaxis, qaxis):
    inits, w = int4_case(shape, qaxis, 16, signed, zp)
    model = gbq_int4_model(inits, [2, 2], block_size=16, gather_axis=gaxis, quantize_axis=qaxis)
    idx = np.array([[0, 5], [-1, 2]], np.int64)
    got, _, _ = check_against_cpu(model, {"indices": idx}, **tol(F))
    np.testing.assert_allclose(got[0], take_ref(w, idx, gaxis), rtol=1e-6, atol=1e-6)


def test_gbq_computed_table():
    """The table computed in the graph (a Reshape, as a tied lm_head's weight is), not an
    initializer: still claimed, still right."""
    inits, w = uint8_case(v=32, k=64, bits=4, bs=32)
    data = next(a for n, a in inits if n == "data")
    flat = [i for i in inits if i[0] != "data"] + [("data_flat", data.reshape(-1)),
                                                   ("shape", np.array(data.shape, np.int64))]
    nodes = [helper.make_node("Reshape", ["data_flat", "shape"], ["data"], name="reshape"),
             helper.make_node("GatherBlockQuantized", ["data", "indices", "scales", "zp"],
                              ["y"], name="gbq", domain="com.microsoft", bits=4, block_size=32)]
    model = make_model(nodes, [("indices", TP.INT64, [3])], [("y", F, None)], flat, opset=21,
                       domains=MS)
    from mlx_harness import cpu_session, mlx_session
    idx = np.array([1, 31, 4], np.int64)
    s = mlx_session(model, optimize=False)
    got = s.run(None, {"indices": idx})[0]
    ref = cpu_session(model, optimize=False).run(None, {"indices": idx})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, take_ref(w, idx), rtol=1e-6, atol=1e-6)


def test_gbq_path():
    inits, _ = uint8_case()
    model = gbq_model(inits, [3], bits=4, block_size=32)
    _, record = run_with_stats(model, {"indices": np.array([1, 2, 3], np.int64)})
    assert node_path(record, "gbq") == ("composed", "gather_dequantize", ())


def test_gbq_declines():
    """bfloat16 scales (ORT's schema admits them, its CPU kernel has no implementation) are left
    to the CPU provider with a reason. (Bad bits, block sizes and uint8 axes are refused by
    ORT's own shape inference before the EP is asked.)"""
    from ssm_harness import BF16
    inits, _ = uint8_case()
    bf = [(n, a.astype(BF16) if a.dtype == np.float32 else a) for n, a in inits]
    model = gbq_model(bf, [3], TP.BFLOAT16, bits=4, block_size=32)
    assert "scales of type bfloat16" in declines(model).get("gbq", "")
