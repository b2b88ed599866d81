"""CausalConvWithState (com.microsoft; ai.onnx opset 27) on MLX: claim conditions with their
decline reasons, numerics against ORT's CPU provider (which has no state_window and no bfloat16)
and against a NumPy reference for windows and bfloat16; channels-first and channels-last,
dilation, activation, L = 0, 1, shorter and longer than the window, dynamic lengths, and a
prefill-then-decode chain that must equal one long call."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model
from ssm_harness import BF16, MS, declines, f32, mlx_session_checked, ort_refuses, run, run_mlx

F, H16, BF = TP.FLOAT, TP.FLOAT16, TP.BFLOAT16
NP = {F: np.float32, H16: np.float16, BF: BF16}


def geometry(b, c, length, k, dilation=1, channels_last=0, trail=None, window=0):
    """(x shape, state shape) for the layout; trail splits C into channels-last dims."""
    carry = (k - 1) * dilation
    if channels_last:
        trail = list(trail or [c])
        x, st = [b, length] + trail, [b, carry] + trail
    else:
        x, st = [b, c, length], [b, c, carry]
    return x, ([window] + st if window else st)


def conv_model(t=F, b=2, c=4, length=5, k=3, bias=True, past=True, domain="com.microsoft",
               opset=17, x_shape=None, w_shape=None, state_shape=None, trail=None, **attrs):
    x, st = geometry(b, c, length, k, attrs.get("dilation", 1), attrs.get("channels_last", 0),
                     trail, attrs.get("state_window", 0))
    ins = [("x", t, list(x_shape or x)), ("w", t, list(w_shape or [c, 1, k]))]
    names = ["x", "w"]
    if bias:
        ins.append(("bias", t, [c]))
        names.append("bias")
    if past:
        names += [""] * (3 - len(names)) + ["past"]
        ins.append(("past", t, list(state_shape or st)))
    node = helper.make_node("CausalConvWithState", names, ["y", "present"], name="conv",
                            domain=domain, **attrs)
    domains = MS if domain == "com.microsoft" else None
    return make_model([node], ins, [("y", t, None), ("present", t, None)], opset=opset,
                      domains=domains, ir_version=11 if opset >= 27 else None)


def conv_feeds(t=F, b=2, c=4, length=5, k=3, bias=True, past=True, seed=0, trail=None,
               **attrs):
    r = np.random.default_rng(seed)
    x, st = geometry(b, c, length, k, attrs.get("dilation", 1), attrs.get("channels_last", 0),
                     trail, attrs.get("state_window", 0))
    f = {"x": r.standard_normal(x).astype(NP[t]), "w": r.standard_normal((c, 1, k)).astype(NP[t])}
    if bias:
        f["bias"] = r.standard_normal(c).astype(NP[t])
    if past:
        f["past"] = r.standard_normal(st).astype(NP[t])
    return f


def conv_ref(f, channels_last=0, dilation=1, state_window=0, activation="none"):
    x, w = f32(f["x"]), f32(f["w"])
    c, k = w.shape[0], w.shape[2]
    carry = (k - 1) * dilation
    b = x.shape[0]

    def to_btc(a):  # state or input layout -> [B, time, C]
        return a.reshape(a.shape[0], a.shape[1], c) if channels_last else a.transpose(0, 2, 1)

    def from_btc(a, like_shape):
        return a.reshape(like_shape) if channels_last else a.transpose(0, 2, 1)

    xs = to_btc(x)
    length = xs.shape[1]
    past = f.get("past")
    if past is None:
        p = np.zeros((b, carry, c), np.float32)
    else:
        p = to_btc(f32(past)[-1] if state_window else f32(past))
    padded = np.concatenate([p, xs], axis=1)
    y = np.zeros((b, length, c), np.float32)
    for j in range(k):
        y += padded[:, j * dilation:j * dilation + length] * w[:, 0, j]
    if "bias" in f:
        y += f32(f["bias"])
    if activation in ("silu", "swish"):
        y = y / (1 + np.exp(-y))
    state_shape = (b, carry) + x.shape[2:] if channels_last else (b, c, carry)
    if not state_window:
        state = from_btc(padded[:, length:length + carry], state_shape)
    elif length == 0:
        state = f32(past) if past is not None else np.zeros((state_window,) + state_shape,
                                                            np.float32)
    else:
        slots = []
        for j in range(state_window):
            pos = length - state_window + j
            slots.append(np.zeros(state_shape, np.float32) if pos < 0 else
                         from_btc(padded[:, pos + 1:pos + 1 + carry], state_shape))
        state = np.stack(slots)
    return from_btc(y, x.shape), state


def check_ref(t=F, tol=1e-5, **kw):
    attrs = {k: v for k, v in kw.items() if k in ("channels_last", "dilation", "state_window",
                                                  "activation")}
    f = conv_feeds(t, **kw)
    got = run_mlx(conv_model(t, **kw), f)
    want = conv_ref(f, **attrs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if t == BF:
            w = f32(w.astype(BF16))
        np.testing.assert_allclose(f32(g), w, rtol=tol, atol=tol)
    return got


# --- against ORT's CPU provider ------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {}, dict(bias=False), dict(past=False), dict(bias=False, past=False),
    dict(activation="silu"), dict(activation="swish"), dict(dilation=2), dict(dilation=3, k=4),
    dict(length=1), dict(length=1, dilation=2), dict(length=2, k=4),  # L < carry
    dict(length=0), dict(k=1), dict(k=1, length=0),
])
def test_channels_first_matches_cpu(kw):
    check_against_cpu(conv_model(**kw), conv_feeds(**kw), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [
    dict(channels_last=1), dict(channels_last=1, dilation=2, activation="silu"),
    dict(channels_last=1, trail=[2, 3], c=6), dict(channels_last=1, trail=[2, 1, 2], c=4,
                                                    length=1),
    dict(channels_last=1, length=0, past=False),
])
def test_channels_last_matches_cpu(kw):
    check_against_cpu(conv_model(**kw), conv_feeds(**kw), rtol=1e-5, atol=1e-5)


def test_float16_matches_cpu():
    kw = dict(activation="silu", dilation=2)
    check_against_cpu(conv_model(H16, **kw), conv_feeds(H16, **kw), rtol=3e-3, atol=3e-3)


def test_ai_onnx_opset27_matches_cpu(monkeypatch):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")  # ORT 1.31 guarantees opset 26
    m = conv_model(domain="", opset=27, activation="silu")
    check_against_cpu(m, conv_feeds(), rtol=1e-5, atol=1e-5)
    check_against_cpu(conv_model(domain="", opset=27, past=False, bias=False),
                      conv_feeds(past=False, bias=False), rtol=1e-5, atol=1e-5)


# --- against NumPy: windows, bfloat16 ------------------------------------------------------------
@pytest.mark.parametrize("length", [0, 1, 2, 3, 7])  # window 3: L = 0, < W, == W, > W
@pytest.mark.parametrize("channels_last", [0, 1])
def test_state_window(length, channels_last):
    check_ref(length=length, state_window=3, channels_last=channels_last, dilation=2)


def test_state_window_without_past_and_size_eight():
    check_ref(length=4, state_window=8, past=False, activation="silu")
    check_ref(length=11, state_window=8, past=False, channels_last=1, trail=[2, 2])
    check_ref(length=0, state_window=2, past=False)


def test_state_window_one_equals_plain_state():
    f = conv_feeds(length=4)
    plain = run_mlx(conv_model(length=4), f)
    f1 = dict(f, past=f["past"][None])
    windowed = run_mlx(conv_model(length=4, state_window=1), f1)
    np.testing.assert_array_equal(plain[0], windowed[0])
    np.testing.assert_array_equal(plain[1], windowed[1][0])


def test_bfloat16_matches_numpy():
    check_ref(BF, tol=3e-2, activation="silu", dilation=2)
    check_ref(BF, tol=3e-2, channels_last=1, state_window=2, length=3)


# --- dynamic length, decode chaining -------------------------------------------------------------
def test_dynamic_length_one_session():
    m = conv_model(x_shape=["B", 4, "L"], state_shape=["B", 4, 4], dilation=2)
    s = mlx_session_checked(m)
    for length in (6, 1, 0, 3):
        f = conv_feeds(length=length, dilation=2, seed=length)
        got = run(s, f)
        for g, w in zip(got, conv_ref(f, dilation=2)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels_last", [0, 1])
def test_prefill_then_decode_equals_one_call(channels_last):
    kw = dict(channels_last=channels_last, dilation=2, activation="silu")
    full = conv_feeds(length=9, **kw)
    want_y, want_state = run_mlx(conv_model(length=9, **kw), full)
    axis = 1 if channels_last else 2
    xs = np.split(full["x"], [6, 7, 8], axis=axis)
    state, ys = full["past"], []
    for x in xs:
        length = x.shape[axis]
        f = dict(full, x=x, past=state)
        y, state = run_mlx(conv_model(length=length, **kw), f)
        ys.append(y)
    np.testing.assert_allclose(np.concatenate(ys, axis=axis), want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(state, want_state)


# --- declines ------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, reason", [
    (lambda: conv_model(ndim=2, x_shape=[2, 4, 3, 5], w_shape=[4, 1, 2, 3], past=False),
     "ndim 2: only the 1-D causal convolution (ndim=1) is translated"),
    (lambda: conv_model(activation="relu"), "activation 'relu' is not one of none, silu, swish"),
    (lambda: conv_model(w_shape=[4, 1, "K"], past=False),
     "weight must be a static [C, 1, k] with C, k > 0 (depthwise)"),
    (lambda: conv_model(w_shape=[4, 2, 3]),
     "weight must be a static [C, 1, k] with C, k > 0 (depthwise)"),
    (lambda: conv_model(x_shape=[2, "C", 5], past=False),
     "the input's channel dims must be static (the weight has C = 4)"),
    (lambda: conv_model(x_shape=[2, 6, 5], past=False, bias=False),
     "the input has 6 channels, the weight 4"),
    (lambda: conv_model(channels_last=1, x_shape=[2, 5, 2, 3], past=False, bias=False),
     "the input has 6 channels, the weight 4"),
    (lambda: conv_model(state_shape=[2, 4, 3]), "past_state dim 2 is 3, expected 2"),
    (lambda: conv_model(dilation=2**30, past=False),
     "receptive field (k - 1) * dilation = 2 * 1073741824 does not fit int32"),
    (lambda: conv_model(dilation=2**31, k=1, past=False),
     "dilation 2147483648 does not fit int32"),
    (lambda: conv_model(state_shape=[3, 2, 4, 2], state_window=2),
     "past_state dim 0 is 3, expected 2"),
    (lambda: conv_model(state_shape=[2, 4, 2], state_window=2),
     "past_state must have rank 4 (has 3)"),
])
def test_declines(model, reason):
    assert declines(model()).get("conv", "") == reason


# The predicate declines these too, but ORT's schema checks refuse the model at load, before any
# provider is asked (the ai.onnx form rejects the contrib-only attributes even at their defaults).
@pytest.mark.parametrize("model, ort_text", [
    (lambda: conv_model(dilation=0, past=False), "dilation must be >= 1"),
    (lambda: conv_model(state_window=9, past=False), "state_window must be in [0, 8]"),
    (lambda: conv_model(channels_last=2, past=False), "channels_last must be 0 or 1"),
    (lambda: conv_model(x_shape=[2, 4, 5, 1], past=False), "input must have rank ndim + 2"),
    (lambda: conv_model(domain="", opset=27, past=False, channels_last=1),
     "Unrecognized attribute: channels_last"),
    (lambda: conv_model(domain="", opset=27, past=False, dilation=1),
     "Unrecognized attribute: dilation"),
    (lambda: conv_model(domain="", opset=27, past=False, state_window=0),
     "Unrecognized attribute: state_window"),
])
def test_refused_by_ort_first(monkeypatch, model, ort_text):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    err = ort_refuses(model())
    assert err and ort_text in err, err


@pytest.mark.parametrize("shape", [[5], [2, 2]])
def test_bias_shape_declined(shape):
    m = conv_model()
    m.graph.input[2].CopyFrom(helper.make_tensor_value_info("bias", F, shape))
    assert declines(m)["conv"] == "bias must be [C] = [4]"
