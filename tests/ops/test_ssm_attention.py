"""LinearAttention (com.microsoft; ai.onnx opset 27) on MLX: claim conditions with their decline
reasons; all four update rules, both GQA directions, both decay forms and both beta forms
against ORT's CPU provider; state windows 0..8 (no CPU kernel), bfloat16, and the half-ulp
accumulation that needs a float32 working state (dk 257..512) against a NumPy reference;
T = 0, T = 1, T > window, window > T; a dynamic T with one session."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model
from ssm_harness import (BF16, MS, declines, f32, group_records, mlx_session_checked,
                         ort_refuses, run, run_mlx)

F, H16, BF = TP.FLOAT, TP.FLOAT16, TP.BFLOAT16
NP = {F: np.float32, H16: np.float16, BF: BF16}
RULES = ["linear", "gated", "delta", "gated_delta"]


def la_model(b=2, t=4, hq=2, hk=None, h=2, dk=4, dv=3, rule="gated_delta", past=True,
             decay="H", beta="H", window=0, dtype=F, state_dtype=None, domain="com.microsoft",
             opset=17, shapes=None, **attrs):
    hk = hk or h
    st = state_dtype or dtype
    shapes = dict(shapes or {})
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    sshape = ([window] if window else []) + [b, h, dk, dv]
    ins = [("q", dtype, shapes.get("q", [b, t, hq * dk])),
           ("k", dtype, shapes.get("k", [b, t, hk * dk])),
           ("v", dtype, shapes.get("v", [b, t, h * dv]))]
    names = ["q", "k", "v", "", "", ""]
    if past:
        ins.append(("past", st, shapes.get("past", sshape)))
        names[3] = "past"
    if gated and decay:
        ins.append(("decay", dtype, shapes.get("decay", [b, t, h if decay == "H" else h * dk])))
        names[4] = "decay"
    if delta and beta:
        ins.append(("beta", dtype, shapes.get("beta", [b, t, h if beta == "H" else 1])))
        names[5] = "beta"
    while names[-1] == "":
        names.pop()
    if window:
        attrs["state_window"] = window
    node = helper.make_node("LinearAttention", names, ["out", "present"], name="la",
                            domain=domain, q_num_heads=hq, kv_num_heads=h, update_rule=rule,
                            **attrs)
    return make_model([node], ins, [("out", dtype, None), ("present", st, None)], opset=opset,
                      domains=MS if domain == "com.microsoft" else None,
                      ir_version=11 if opset >= 27 else None)


def la_feeds(model, seed=0, dims=None, decay_scale=1.0):
    """Random feeds for the model's inputs (symbolic dims from `dims`)."""
    r = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
                 for d in i.type.tensor_type.shape.dim]
        dt = NP[i.type.tensor_type.elem_type]
        if i.name == "decay":
            a = -r.random(shape) * decay_scale  # log-space decay <= 0
        elif i.name == "beta":
            a = r.random(shape)
        elif i.name == "k":
            a = r.standard_normal(shape) / np.sqrt(shape[-1] / 4)
        else:
            a = r.standard_normal(shape)
        out[i.name] = a.astype(np.float32).astype(dt)
    return out


def la_ref(f, hq, h, rule="gated_delta", scale=0.0, window=0, carry_dtype=np.float32):
    """The recurrence as the spec writes it, in float64 arithmetic, the carried state rounded to
    carry_dtype after every step."""
    q, k, v = (np.asarray(f32(f[n]), np.float64) for n in ("q", "k", "v"))
    b, t, qhid = q.shape
    dk = qhid // hq
    hk = k.shape[2] // dk
    dv = v.shape[2] // h
    scale = scale or 1 / np.sqrt(dk)
    q, k, v = q.reshape(b, t, hq, dk), k.reshape(b, t, hk, dk), v.reshape(b, t, h, dv)
    past = f.get("past")
    if past is None:
        s = np.zeros((b, h, dk, dv))
    else:
        s = np.asarray(f32(past[-1] if window else past), np.float64)
    ho = max(hq, h)
    out = np.zeros((b, t, ho, dv))
    kept = []
    for step in range(t):
        kt = np.repeat(k[:, step], h // hk, axis=1)  # [b, h, dk]
        if rule in ("gated", "gated_delta"):
            g = np.asarray(f32(f["decay"][:, step]), np.float64)
            g = g[:, :, None, None] if g.shape[-1] == h else g.reshape(b, h, dk, 1)
            s = s * np.exp(g)
        if rule in ("delta", "gated_delta"):
            r = np.einsum("bhk,bhkv->bhv", kt, s)
            bt = np.asarray(f32(f["beta"][:, step]), np.float64)[:, :, None]
            d = bt * (v[:, step] - r)
        else:
            d = v[:, step]
        s = s + kt[..., None] * d[:, :, None, :]
        if hq >= h:
            qs = q[:, step].reshape(b, h, hq // h, dk)
            o = np.einsum("bhgk,bhkv->bhgv", qs, s).reshape(b, ho, dv)
        else:
            qs = np.repeat(q[:, step], h // hq, axis=1)
            o = np.einsum("bhk,bhkv->bhv", qs, s)
        out[:, step] = scale * o
        s = s.astype(carry_dtype).astype(np.float64)
        kept.append(s)
    if not window:
        present = s
    elif t == 0:
        present = np.asarray(f32(past), np.float64) if past is not None else \
            np.zeros((window, b, h, dk, dv))
    else:
        slots = [np.zeros((b, h, dk, dv))] * max(0, window - t) + kept[-window:]
        present = np.stack(slots)
    return out.reshape(b, t, ho * dv), present


def check_ref(model, f, hq, h, rule="gated_delta", tol=1e-4, **kw):
    got = run_mlx(model, f)
    want = la_ref(f, hq, h, rule, **kw)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(f32(g), w, rtol=tol, atol=tol)
    return got


# --- against ORT's CPU provider ------------------------------------------------------------------
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("past", [True, False])
def test_rules_match_cpu(rule, past):
    m = la_model(rule=rule, past=past)
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hq, hk, h", [
    (4, 2, 2), (8, 2, 2),  # each state read by Hq/H query heads
    (2, 2, 4), (1, 1, 4),  # each query head reads H/Hq states
    (4, 2, 4), (2, 1, 4), (4, 1, 2), (8, 2, 4),  # key heads repeated to H
])
@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
def test_head_groupings_match_cpu(hq, hk, h, rule):
    m = la_model(hq=hq, hk=hk, h=h, rule=rule, t=3)
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("decay, beta", [("H", "H"), ("Hdk", "H"), ("H", "1"), ("Hdk", "1")])
@pytest.mark.parametrize("rule", ["gated", "gated_delta", "delta"])
def test_decay_and_beta_forms_match_cpu(decay, beta, rule):
    m = la_model(rule=rule, decay=decay, beta=beta)
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("t", [0, 1, 9])
def test_lengths_match_cpu(t):
    m = la_model(t=t)
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


def test_scale_and_unnormalised_keys_and_zero_decay_match_cpu():
    m = la_model(scale=0.37, t=6)
    f = la_feeds(m, decay_scale=0.0)  # decay 0: exp(0) = 1, no forgetting
    f["k"] = f["k"] * 3  # unnormalised keys
    check_against_cpu(m, f, rtol=1e-4, atol=1e-4)


def test_strong_decay_matches_cpu():
    m = la_model(rule="gated", decay="Hdk", t=5)
    check_against_cpu(m, la_feeds(m, decay_scale=40.0), rtol=1e-4, atol=1e-5)


def test_float16_matches_cpu():
    m = la_model(dtype=H16, rule="gated_delta", t=5)
    check_against_cpu(m, la_feeds(m), rtol=2e-2, atol=2e-2)


def test_large_head_dims_match_cpu():
    m = la_model(b=1, t=3, hq=1, h=1, dk=300, dv=5, rule="delta")
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-4)


def test_ai_onnx_opset27_matches_cpu(monkeypatch):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")  # ORT 1.31 guarantees opset 26
    for rule in RULES:
        m = la_model(domain="", opset=27, hq=4, h=2, rule=rule)
        check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


def test_ai_onnx_float32_state_for_float16_queries(monkeypatch):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    m = la_model(domain="", opset=27, dtype=H16, state_dtype=F, t=5)
    f = la_feeds(m)
    got = check_ref(m, f, 2, 2, tol=2e-2)
    assert got[0].dtype == np.float16 and got[1].dtype == np.float32


# --- state windows and bfloat16 against NumPy ----------------------------------------------------
@pytest.mark.parametrize("window, t", [(3, 7), (3, 3), (3, 2), (3, 1), (3, 0), (8, 5), (8, 8),
                                       (1, 4)])
def test_state_window(window, t):
    m = la_model(window=window, t=t)
    check_ref(m, la_feeds(m), 2, 2, window=window)


def test_state_window_without_past():
    for t in (0, 2, 6):
        m = la_model(window=4, t=t, past=False, hq=4, h=2, rule="delta")
        check_ref(m, la_feeds(m), 4, 2, "delta", window=4)


def test_state_window_chain_rolls_back():
    """Slot j of the window is the state after token T - W + j: re-running from slot j's state
    must reproduce the later tokens' outputs."""
    m = la_model(window=4, t=6, rule="gated_delta")
    f = la_feeds(m)
    out, present = run_mlx(m, f)
    m2 = la_model(window=0, t=2, rule="gated_delta")
    f2 = {"q": f["q"][:, 4:], "k": f["k"][:, 4:], "v": f["v"][:, 4:], "past": present[1],
          "decay": f["decay"][:, 4:], "beta": f["beta"][:, 4:]}
    out2, present2 = run_mlx(m2, f2)
    np.testing.assert_allclose(out2, out[:, 4:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(present2, present[3], rtol=1e-5, atol=1e-5)


def test_bfloat16_matches_numpy():
    m = la_model(dtype=BF, t=4, hq=4, h=2)
    f = la_feeds(m)
    check_ref(m, f, 4, 2, tol=5e-2, carry_dtype=BF16)


def test_bfloat16_half_ulp_increments_accumulate_for_dk_257_to_512():
    """With dk in 257..512 and bfloat16 the working state is float32, so increments of half a
    bfloat16 ulp accumulate; with dk <= 256 the state is carried in bfloat16 and they vanish."""
    def case(dk, t=16):
        m = la_model(b=1, t=t, hq=1, h=1, dk=dk, dv=1, rule="linear", dtype=BF, scale=1.0)
        q = np.zeros((1, t, dk), np.float32)
        q[..., 0] = 1
        past = np.zeros((1, 1, dk, 1), np.float32)
        past[0, 0, 0, 0] = 1.0
        f = {"q": q.astype(BF16), "k": q.astype(BF16),
             "v": np.full((1, t, 1), 2.0 ** -8, np.float32).astype(BF16),  # half an ulp of 1.0
             "past": past.astype(BF16)}
        return m, f

    for dk in (257, 384, 512):
        m, f = case(dk)
        out, present = run_mlx(m, f)
        want_out, want_state = la_ref(f, 1, 1, "linear", scale=1.0)  # float32 carry
        assert f32(present)[0, 0, 0, 0] == np.float32(BF16.type(1 + 16 * 2.0 ** -8))
        np.testing.assert_array_equal(f32(out), f32(want_out.astype(np.float32).astype(BF16)))
        assert f32(out)[0, -1, 0] > 1.0
    m, f = case(256)
    out, present = run_mlx(m, f)
    want_out, want_state = la_ref(f, 1, 1, "linear", scale=1.0, carry_dtype=BF16)
    assert f32(present)[0, 0, 0, 0] == 1.0  # ties to even: every increment is lost
    np.testing.assert_array_equal(f32(present), f32(want_state.astype(np.float32).astype(BF16)))


def test_ai_onnx_form_carries_float32_state_like_its_function_body(monkeypatch):
    """ai.onnx's LinearAttention is defined by a float32 function body: half-ulp bfloat16
    increments accumulate even with dk <= 256, where the contrib form's typed state loses them."""
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    t, dk = 16, 64
    m = la_model(b=1, t=t, hq=1, h=1, dk=dk, dv=1, rule="linear", dtype=BF, scale=1.0,
                 domain="", opset=27)
    q = np.zeros((1, t, dk), np.float32)
    q[..., 0] = 1
    past = np.zeros((1, 1, dk, 1), np.float32)
    past[0, 0, 0, 0] = 1.0
    f = {"q": q.astype(BF16), "k": q.astype(BF16),
         "v": np.full((1, t, 1), 2.0 ** -8, np.float32).astype(BF16), "past": past.astype(BF16)}
    out, present = run_mlx(m, f)
    want_out, _ = la_ref(f, 1, 1, "linear", scale=1.0)  # float32 carry
    assert f32(present)[0, 0, 0, 0] == np.float32(BF16.type(1 + 16 * 2.0 ** -8))
    np.testing.assert_array_equal(f32(out), f32(want_out.astype(np.float32).astype(BF16)))


# --- dynamic T -----------------------------------------------------------------------------------
def test_dynamic_time_one_session():
    m = la_model(shapes={"q": ["B", "T", 8], "k": ["B", "T", 8], "v": ["B", "T", 6],
                         "decay": ["B", "T", 2], "beta": ["B", "T", 2], "past": ["B", 2, 4, 3]})
    s = mlx_session_checked(m)
    for t in (5, 1, 0, 3):
        f = la_feeds(m, seed=t, dims={"B": 2, "T": t})
        got = run(s, f)
        for g, w in zip(got, la_ref(f, 2, 2)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_composition_switch_gives_same_results(monkeypatch):
    """On the CPU both sessions compose (bit-equal); on a GPU the first runs the fused kernel,
    whose float32 sums are ordered differently (bench/gpu/linear_attention.py checks it widely)."""
    m = la_model(t=5)
    f = la_feeds(m)
    base = run_mlx(m, f)
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN", "1")
    forced = run_mlx(m, f)
    for a, b in zip(base, forced):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --- declines ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, reason", [
    (dict(hq=3, h=2, past=False),
     "q_num_heads 3 and kv_num_heads 2: one must divide the other"),
    (dict(rule="gated", decay=None), "update_rule 'gated' needs decay (input 4)"),
    (dict(rule="delta", beta=None), "update_rule 'delta' needs beta (input 5)"),
    (dict(rule="gated_delta", beta=None), "update_rule 'gated_delta' needs beta (input 5)"),
    (dict(rule="rwkv"), "update_rule 'rwkv' is not one of linear, gated, delta, gated_delta"),
    (dict(shapes={"q": [2, 4, "D"]}),
     "the hidden (last) dims of query, key and value must be static"),
    (dict(shapes={"k": [2, 4, 6]}),
     "key hidden 6 is not a positive multiple of the head size dk = 4"),
    (dict(hk=3, h=2, shapes={"k": [2, 4, 12]}), "3 key heads do not divide kv_num_heads 2"),
    (dict(shapes={"v": [2, 4, 5]}), "value hidden 5 is not a positive multiple of kv_num_heads 2"),
    (dict(shapes={"decay": [2, 4, 3]}), "decay must be [B, T, H] or [B, T, H*dk] (last dim is 3)"),
    (dict(shapes={"beta": [2, 4, 3]}), "beta must be [B, T, 1] or [B, T, H] (last dim is 3)"),
    (dict(shapes={"beta": [2, 4]}), "beta must be [B, T, 1] or [B, T, H] (has rank 2)"),
    (dict(shapes={"past": [2, 2, 4, 4]}), "past_state dim 3 is 4, expected 3"),
    (dict(shapes={"past": [2, 2, 4, 3]}, window=2), "past_state must have rank 5 (has 4)"),
    (dict(state_dtype=H16), "the com.microsoft form keeps past_state in the query type float32 "
                            "(is float16)"),
])
def test_declines(kw, reason):
    assert declines(la_model(**kw)).get("la", "") == reason


def test_more_declines():
    assert declines(la_model(hq=0))["la"] == \
        "q_num_heads and kv_num_heads must be positive (are 0 and 2)"
    assert declines(la_model(shapes={"q": [2, 4, 7]}))["la"] == \
        "query hidden 7 is not a positive multiple of q_num_heads 2"
    assert declines(la_model(shapes={"q": [2, 4, 8], "k": [2, 4, 8], "v": [2, 3, 6]}))["la"] == \
        "the batch and time dims of query, key and value must agree"


def test_run_time_length_mismatch_is_an_error_naming_the_node():
    m = la_model(rule="linear", shapes={"q": ["B", "T", 8], "k": ["B", "T", 8],
                                        "v": ["B", "S", 6], "past": ["B", 2, 4, 3]})
    s = mlx_session_checked(m)
    f = la_feeds(m, dims={"B": 2, "T": 3, "S": 2})
    with pytest.raises(Exception, match=r"node 'la' \(LinearAttention\): the batch and time dims"):
        s.run(None, f)
    f = la_feeds(m, dims={"B": 2, "T": 3, "S": 3})
    for g, w in zip(run(s, f), la_ref(f, 2, 2, "linear")):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


    assert declines(la_model(shapes={"decay": [2, 5, 2]}))["la"] == \
        "decay's batch and time dims must match the query's"


def test_run_time_decay_length_mismatch_is_an_error_naming_the_node():
    m = la_model(shapes={"q": [2, "T", 8], "k": [2, "T", 8], "v": [2, "T", 6],
                         "decay": [2, "S", 2], "beta": [2, "T", 2]})
    s = mlx_session_checked(m)
    with pytest.raises(Exception, match=r"node 'la' \(LinearAttention\): decay must be \[B=2, T=3"):
        s.run(None, la_feeds(m, dims={"T": 3, "S": 4}))
    f = la_feeds(m, dims={"T": 3, "S": 3})
    for g, w in zip(run(s, f), la_ref(f, 2, 2)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta"])
def test_unused_decay_and_beta_are_ignored_like_cpu(rule):
    m = la_model(rule="gated_delta")
    attr = next(a for a in m.graph.node[0].attribute if a.name == "update_rule")
    attr.s = rule.encode()  # decay and beta stay connected
    check_against_cpu(m, la_feeds(m), rtol=1e-4, atol=1e-5)


def test_ai_onnx_form_accepts_its_own_state_type(monkeypatch):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    m = la_model(domain="", opset=27, dtype=H16, state_dtype=F)
    assert declines(m) == {}


# The predicate declines these too, but ORT's schema checks refuse the model at load, before any
# provider is asked.
@pytest.mark.parametrize("kw, ort_text", [
    (dict(window=9), "state_window must be in [0, 8]"),
    (dict(domain="", opset=27, hq=2, h=4), "q_num_heads (2) must be a multiple of kv_num_heads"),
    (dict(domain="", opset=27, hq=4, hk=2, h=4), "Dimension mismatch"),
    (dict(domain="", opset=27, window=2), "Unrecognized attribute: state_window"),
    (dict(domain="", opset=27, state_dtype=F, present_dtype=H16), "Type Error"),
])
def test_refused_by_ort_first(monkeypatch, kw, ort_text):
    monkeypatch.setenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    present = kw.pop("present_dtype", None)
    m = la_model(**kw)
    if present:
        m.graph.output[1].CopyFrom(helper.make_tensor_value_info("present", present, None))
    with pytest.raises(AssertionError, match="no partition report") as e:
        declines(m)
    assert ort_text in str(e.value), str(e.value)


# --- compiled (keyed) with windows, chained into CausalConvWithState -----------------------------
def test_windows_compile_keyed_without_fallback():
    from test_ssm_conv import conv_ref
    la = la_model(window=3, shapes={"q": ["B", "T", 8], "k": ["B", "T", 8], "v": ["B", "T", 6],
                                    "decay": ["B", "T", 2], "beta": ["B", "T", 2],
                                    "past": [3, "B", 2, 4, 3]})
    g = la.graph
    g.node.append(helper.make_node("CausalConvWithState", ["out", "w", "", "cpast"],
                                   ["y", "cpresent"], name="conv", domain="com.microsoft",
                                   channels_last=1, state_window=2, activation="silu"))
    g.input.extend([helper.make_tensor_value_info("w", F, [6, 1, 3]),
                    helper.make_tensor_value_info("cpast", F, [2, "B", 2, 6])])
    g.output.extend([helper.make_tensor_value_info("y", F, None),
                     helper.make_tensor_value_info("cpresent", F, None)])
    feeds = []
    for t in (4, 1, 0, 4, 2):
        f = la_feeds(la, seed=t, dims={"B": 2, "T": t})
        r = np.random.default_rng(t)
        f["w"] = r.standard_normal((6, 1, 3)).astype(np.float32)
        f["cpast"] = r.standard_normal((2, 2, 2, 6)).astype(np.float32)
        feeds.append(f)
    outs, groups = group_records(la, feeds)
    for f, got in zip(feeds, outs):
        out, present = la_ref(f, 2, 2, window=3)
        y, cpresent = conv_ref({"x": out.astype(np.float32), "w": f["w"], "past": f["cpast"]},
                               channels_last=1, state_window=2, activation="silu")
        for g_, w_ in zip(got, [out, present, y, cpresent]):
            np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)
    assert len(groups) == 1 and groups[0]["path"] == "keyed", groups
    assert groups[0]["fallbacks"] == 0, groups
    # T = 0 (an empty input) runs eagerly
    assert (groups[0]["compiled_runs"], groups[0]["eager_runs"]) == (4, 1), groups
