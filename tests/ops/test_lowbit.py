"""Raw element types across the EP boundary (src/plan/packed.c, src/ops/lowbit.c): float8 (all
five variants), float4e2m1, int4/uint4 and int2/uint2 as graph inputs, outputs and initializers
of Cast, CastLike, QuantizeLinear and DequantizeLinear. ORT packs the sub-byte types (2 or 4 a
byte, lowest bits first); the EP unpacks them into one MLX element per value and packs results
back. Results must equal ONNX Runtime's CPU provider bit for bit where it has a kernel (float8 and
int4 Cast, float8/int4 Quantize/DequantizeLinear), else the ONNX reference implementation; every
node must run on MLX (the sessions refuse CPU fallback)."""
import ctypes
import json

import ml_dtypes as ml
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP, helper
from onnx.reference import ReferenceEvaluator

import mlx_harness as harness

F8 = [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2, TP.FLOAT8E5M2FNUZ]
ML = {TP.FLOAT8E4M3FN: ml.float8_e4m3fn, TP.FLOAT8E4M3FNUZ: ml.float8_e4m3fnuz,
      TP.FLOAT8E5M2: ml.float8_e5m2, TP.FLOAT8E5M2FNUZ: ml.float8_e5m2fnuz,
      TP.FLOAT8E8M0: ml.float8_e8m0fnu, TP.FLOAT4E2M1: ml.float4_e2m1fn, TP.INT4: ml.int4,
      TP.UINT4: ml.uint4, TP.INT2: ml.int2, TP.UINT2: ml.uint2}
BITS = {TP.FLOAT4E2M1: 4, TP.INT4: 4, TP.UINT4: 4, TP.INT2: 2, TP.UINT2: 2}
NAME = {t: TP.DataType.Name(t) for t in ML}


def bits(t):
    return BITS.get(t, 8)


def codes_of(a, t):
    """One uint8 code per value (the low `bits` of ml_dtypes' byte)."""
    return (np.ascontiguousarray(a).view(np.uint8) & ((1 << bits(t)) - 1)).astype(np.uint8)


def raw_value(codes, t):
    """An OrtValue of type t holding codes (one per value), packed as ORT lays it out."""
    codes = np.ascontiguousarray(codes, np.uint8)
    v = ort.OrtValue.ortvalue_from_shape_and_type(list(codes.shape), t)
    b = bits(t)
    per = 8 // b
    flat = codes.ravel() & ((1 << b) - 1)
    flat = np.concatenate([flat, np.zeros((-flat.size) % per, np.uint8)]).reshape(-1, per)
    packed = np.zeros(flat.shape[0], np.uint8)
    for j in range(per):
        packed |= (flat[:, j] << (j * b)).astype(np.uint8)
    assert packed.size == v.tensor_size_in_bytes()
    if packed.size:
        ctypes.memmove(v.data_ptr(), packed.ctypes.data, packed.size)
    return v


def read_codes(v, shape, t):
    n = v.tensor_size_in_bytes()
    packed = np.frombuffer(ctypes.string_at(v.data_ptr(), n), np.uint8) if n else \
        np.zeros(0, np.uint8)
    b = bits(t)
    per = 8 // b
    out = np.stack([(packed >> (j * b)) & ((1 << b) - 1) for j in range(per)], axis=1)
    return out.ravel()[:int(np.prod(shape))].astype(np.uint8).reshape(shape)


def run(session, feeds, outs):
    """feeds: {name: numpy array, or (codes, raw type)}; outs: [(shape, type)] in output order.
    Returns numpy arrays, codes for raw outputs."""
    io = session.io_binding()
    keep = []
    for name, value in feeds.items():
        if isinstance(value, tuple):
            keep.append(raw_value(*value))
            io.bind_ortvalue_input(name, keep[-1])
        else:
            io.bind_cpu_input(name, value)
    raw = {}
    for i, (o, (shape, t)) in enumerate(zip(session.get_outputs(), outs)):
        if t in ML:
            raw[i] = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), t)
            io.bind_ortvalue_output(o.name, raw[i])
        else:
            io.bind_output(o.name)
    session.run_with_iobinding(io)
    got = io.get_outputs()
    return [read_codes(raw[i], shape, t) if i in raw else got[i].numpy()
            for i, (shape, t) in enumerate(outs)]


def on_mlx(model, feeds, outs):
    s = harness.mlx_session(model)
    got = run(s, feeds, outs)
    placed = harness.assignment(s)
    for node in model.graph.node:
        where = placed.get(node.name)
        assert where == harness.EP, f"{node.name!r} ran on {where}"
    return got


def on_cpu(model, feeds, outs):
    return run(harness.cpu_session(model), feeds, outs)


def assert_same(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "f":
            np.testing.assert_array_equal(g, w)  # NaN == NaN here
        else:
            assert np.array_equal(g, w), f"\n{g.ravel().tolist()}\n{w.ravel().tolist()}"


def cast_model(frm, to, shape, opset=23, **attrs):
    node = helper.make_node("Cast", ["x"], ["y"], name="cast", to=to, **attrs)
    return harness.make_model([node], [("x", frm, shape)], [("y", to, shape)], opset=opset,
                              ir_version=11)


SPECIAL = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.5, 0.3, -0.3, 3.75,
                    1e-6, -1e-9,
                    240.0, 248.0, 250.0, 256.0, 448.0, 464.0, 500.0, 57344.0, 1e6, -1e6,
                    0.001953125, 0.0029296875, 2.5, -2.5, 0.5, 7.6, 8.5, -8.5, 100.0, -9.0],
                   np.float32)


def floats(n=64, seed=0):
    r = np.random.default_rng(seed)
    return np.concatenate([SPECIAL, (r.standard_normal(n) * 10 ** r.uniform(-3, 3, n))
                           .astype(np.float32)])


# --- float8 and int4 Cast against ORT's CPU kernels ---------------------------------------------
@pytest.mark.parametrize("to", F8, ids=[NAME[t] for t in F8])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_float_to_float8_matches_cpu(to, saturate):
    x = floats()
    if not saturate:  # ORT's CPU kernel departs from the ONNX spec just past the largest value
        x = x[(np.abs(x) <= 448) | (np.abs(x) > 65536) | ~np.isfinite(x)]
    with np.errstate(over="ignore"):
        x16 = x.astype(np.float16)
    for frm, xs in [(TP.FLOAT, x), (TP.FLOAT16, x16)]:
        m = cast_model(frm, to, list(xs.shape), saturate=saturate)
        assert_same(on_mlx(m, {"x": xs}, [(xs.shape, to)]),
                    on_cpu(m, {"x": xs}, [(xs.shape, to)]))


@pytest.mark.parametrize("frm", F8, ids=[NAME[t] for t in F8])
@pytest.mark.parametrize("to", [TP.FLOAT, TP.FLOAT16])
def test_cast_float8_to_float_every_code(frm, to):
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    m = cast_model(frm, to, [16, 16])
    assert_same(on_mlx(m, {"x": (codes, frm)}, [(codes.shape, to)]),
                on_cpu(m, {"x": (codes, frm)}, [(codes.shape, to)]))


@pytest.mark.parametrize("to", [TP.INT4, TP.UINT4])
@pytest.mark.parametrize("n", [1, 7, 32])
def test_cast_to_int4_matches_cpu(to, n):
    x = floats()[:n] if n < 32 else floats()
    m = cast_model(TP.FLOAT, to, [x.size])
    assert_same(on_mlx(m, {"x": x}, [(x.shape, to)]), on_cpu(m, {"x": x}, [(x.shape, to)]))
    i = (np.arange(x.size) * 37 - 300).astype(np.int32)  # integers wrap
    m = cast_model(TP.INT32, to, [i.size])
    assert_same(on_mlx(m, {"x": i}, [(i.shape, to)]), on_cpu(m, {"x": i}, [(i.shape, to)]))


@pytest.mark.parametrize("frm", [TP.INT4, TP.UINT4])
@pytest.mark.parametrize("to", [TP.FLOAT, TP.INT8, TP.UINT8, TP.INT32, TP.FLOAT16])
def test_cast_from_int4_every_code_odd_length(frm, to):
    codes = np.array(list(range(16)) * 2 + [5], np.uint8).reshape(1, 33)
    m = cast_model(frm, to, [1, 33])
    assert_same(on_mlx(m, {"x": (codes, frm)}, [(codes.shape, to)]),
                on_cpu(m, {"x": (codes, frm)}, [(codes.shape, to)]))


# --- types ORT has no CPU Cast for: against the ONNX reference ---------------------------------
def reference_codes(model, feeds, t):
    (y,) = ReferenceEvaluator(model).run(None, feeds)
    return codes_of(y, t)


def test_cast_float_to_float4_matches_reference():
    x = floats()
    m = cast_model(TP.FLOAT, TP.FLOAT4E2M1, [x.size])
    (got,) = on_mlx(m, {"x": x}, [(x.shape, TP.FLOAT4E2M1)])
    assert np.array_equal(got, reference_codes(m, {"x": x}, TP.FLOAT4E2M1))


def test_cast_float4_every_code_to_float():
    codes = np.arange(16, dtype=np.uint8).reshape(1, 16)[:, :15]  # odd count: a half byte
    m = cast_model(TP.FLOAT4E2M1, TP.FLOAT, [1, 15])
    (got,) = on_mlx(m, {"x": (codes, TP.FLOAT4E2M1)}, [(codes.shape, TP.FLOAT)])
    np.testing.assert_array_equal(got, codes.view(ml.float4_e2m1fn).astype(np.float32))


@pytest.mark.parametrize("t", [TP.INT2, TP.UINT2])
def test_int2_round_trip(t):
    lo, hi = (-2, 1) if t == TP.INT2 else (0, 3)
    x = np.array([lo, hi, 0, 1, hi, lo, 1], np.float32)  # 7 values: a partial last byte
    m = cast_model(TP.FLOAT, t, [7], opset=25)
    (got,) = on_mlx(m, {"x": x}, [(x.shape, t)])
    assert np.array_equal(got, reference_codes(m, {"x": x}, t))
    back = cast_model(t, TP.INT8, [7], opset=25)
    (y,) = on_mlx(back, {"x": (got, t)}, [(x.shape, TP.INT8)])
    np.testing.assert_array_equal(y, x.astype(np.int8))


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_cast_float_to_float8e8m0(mode):
    x = np.abs(floats())
    m = cast_model(TP.FLOAT, TP.FLOAT8E8M0, [x.size], opset=24, round_mode=mode)
    (got,) = on_mlx(m, {"x": x}, [(x.shape, TP.FLOAT8E8M0)])
    assert np.array_equal(got, reference_codes(m, {"x": x}, TP.FLOAT8E8M0))


def test_castlike_float8_and_int4():
    x = floats()
    for t in (TP.FLOAT8E4M3FN, TP.INT4):
        node = helper.make_node("CastLike", ["x", "like"], ["y"], name="castlike")
        m = harness.make_model([node], [("x", TP.FLOAT, [x.size]), ("like", t, [1])],
                               [("y", t, [x.size])], opset=23, ir_version=11)
        like = (np.zeros(1, np.uint8), t)
        assert_same(on_mlx(m, {"x": x, "like": like}, [(x.shape, t)]),
                    on_cpu(m, {"x": x, "like": like}, [(x.shape, t)]))


def test_chain_stays_on_mlx():
    """A raw value between two MLX nodes never crosses the boundary."""
    x = floats()
    nodes = [helper.make_node("Cast", ["x"], ["q"], name="to8", to=TP.FLOAT8E5M2),
             helper.make_node("Cast", ["q"], ["y"], name="back", to=TP.FLOAT)]
    m = harness.make_model(nodes, [("x", TP.FLOAT, [x.size])], [("y", TP.FLOAT, [x.size])],
                           opset=23, ir_version=11)
    assert_same(on_mlx(m, {"x": x}, [(x.shape, TP.FLOAT)]),
                on_cpu(m, {"x": x}, [(x.shape, TP.FLOAT)]))


# --- QuantizeLinear / DequantizeLinear ---------------------------------------------------------
@pytest.mark.parametrize("t", [TP.FLOAT8E4M3FN, TP.FLOAT8E5M2, TP.INT4, TP.UINT4],
                         ids=lambda t: NAME[t])
def test_quantize_dequantize_matches_cpu(t):
    x = floats()
    x = x[np.isfinite(x)][:40].reshape(5, 8)
    zp_val = {TP.INT4: -3.0, TP.UINT4: 5.0}.get(t, 0.0)
    zp = helper.make_tensor("zp", t, [1], [zp_val])
    scale = np.float32(0.37)
    q = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q")
    m = harness.make_model([q], [("x", TP.FLOAT, [5, 8])], [("q", t, [5, 8])],
                           initializers=[("s", np.array(scale))], opset=21, ir_version=11)
    m.graph.initializer.append(zp)
    assert_same(on_mlx(m, {"x": x}, [((5, 8), t)]), on_cpu(m, {"x": x}, [((5, 8), t)]))
    codes = on_cpu(m, {"x": x}, [((5, 8), t)])[0]
    dq = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dq")
    m = harness.make_model([dq], [("q", t, [5, 8])], [("y", TP.FLOAT, [5, 8])],
                           initializers=[("s", np.array(scale))], opset=21, ir_version=11)
    m.graph.initializer.append(zp)
    feeds = {"q": (codes, t)}
    assert_same(on_mlx(m, feeds, [((5, 8), TP.FLOAT)]), on_cpu(m, feeds, [((5, 8), TP.FLOAT)]))


def test_other_ops_still_decline_raw_types(tmp_path):
    """Rows without the OP_RAW bits keep declining these types at the boundary."""
    node = helper.make_node("Identity", ["x"], ["y"], name="id")
    m = harness.make_model([node], [("x", TP.FLOAT8E4M3FN, [4])], [("y", TP.FLOAT8E4M3FN, [4])],
                           opset=21, ir_version=11)
    report = tmp_path / "r.json"
    s = harness.mlx_session(m, allow_cpu=True, provider_options={"report_file": str(report)})
    assert harness.assignment(s).get("id") == "CPUExecutionProvider"
    reasons = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert "which MLX cannot hold" in reasons["id"]


@pytest.mark.parametrize("to", F8, ids=[NAME[t] for t in F8])
def test_cast_every_float16_to_float8(to):
    """All 65536 float16 values (ties, subnormals, overflow, inf, NaN) round as ORT's CPU."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    m = cast_model(TP.FLOAT16, to, [256, 256], saturate=1)
    assert_same(on_mlx(m, {"x": x}, [(x.shape, to)]), on_cpu(m, {"x": x}, [(x.shape, to)]))
