"""Attention rows (src/ops/attention.c), opsets 23 and 24: 3-D and 4-D inputs, grouped- and
multi-query heads, scale, softcap, is_causal (upper-left without a past, offset by the past
length with one), float and bool masks of every rank (and, in opset 24, shorter than the total
length), past/present key and value, qk_matmul_output in modes 0-3, nonpad_kv_seqlen, rows masked
everywhere, float32/float16 against ONNX Runtime's CPU provider and bfloat16 against the float32
model; forms ORT's CPU kernel lacks or computes differently against a float64 numpy reference of
the spec; which path (MLX's fast attention or the composition) a node took; declined forms."""

import numpy as np
import pytest
from onnx import TensorProto as TP, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def attn_model(elem, shapes, attrs, opset=23, mask_t=None, outs=("Y",), past=False,
               nonpad=False):
    """shapes: dict of input name -> shape (Q, K, V, and optionally M, PK, PV)."""
    names = ["Q", "K", "V", "M" if "M" in shapes else "", "PK" if past else "",
             "PV" if past else "", "L" if nonpad else ""]
    while names[-1] == "":
        names.pop()
    ins = [(n, elem, shapes[n]) for n in ("Q", "K", "V")]
    if "M" in shapes:
        ins.append(("M", mask_t if mask_t is not None else elem, shapes["M"]))
    if past:
        ins += [("PK", elem, shapes["PK"]), ("PV", elem, shapes["PV"])]
    if nonpad:
        ins.append(("L", TP.INT64, (shapes["Q"][0],)))
    all_outs = ["Y", "PKo", "PVo", "QK"]
    out_names = [o if o in outs else "" for o in all_outs]
    while out_names[-1] == "":
        out_names.pop()
    node = helper.make_node("Attention", names, out_names, name="n", **attrs)
    return harness.make_model([node], ins, [(o, elem, None) for o in all_outs if o in outs],
                              opset=opset)


def feeds_for(shapes, seed=0, mask_kind="float"):
    f = {n: rand(s, seed + i) for i, (n, s) in enumerate(sorted(shapes.items())) if n != "M"}
    if "M" in shapes:
        r = np.random.default_rng(seed + 99).random(shapes["M"])
        f["M"] = (r > 0.3) if mask_kind == "bool" else \
            np.where(r > 0.3, r - 0.5, -np.inf).astype(np.float32)
    return f


# --- numpy reference of the spec (float64) ---------------------------------------------------
def attention_ref(Q, K, V, M=None, PK=None, PV=None, L=None, scale=None, is_causal=0,
                  q_num_heads=None, kv_num_heads=None, softcap=0.0, qk_matmul_output_mode=0):
    f = np.float64
    rank = Q.ndim
    if rank == 3:
        def split(x, h):
            b, s, hd = x.shape
            return x.reshape(b, s, h, hd // h).transpose(0, 2, 1, 3)
        Q, K, V = split(Q, q_num_heads), split(K, kv_num_heads), split(V, kv_num_heads)
    Q, K, V = Q.astype(f), K.astype(f), V.astype(f)
    past = 0
    if PK is not None:
        past = PK.shape[2]
        K = np.concatenate([PK.astype(f), K], 2)
        V = np.concatenate([PV.astype(f), V], 2)
    b, hq, sq, d = Q.shape
    t = K.shape[2]
    scale = 1 / np.sqrt(d) if scale is None else scale
    bias = np.zeros((sq, t))
    if M is not None:
        m = np.where(M, 0.0, -np.inf) if M.dtype == bool else M.astype(f)
        pad = t - m.shape[-1]
        m = np.pad(m, [(0, 0)] * (m.ndim - 1) + [(0, pad)], constant_values=-np.inf)
        bias = bias + m
    if is_causal:
        bias = bias + np.where(np.arange(t)[None] <= np.arange(sq)[:, None] + past, 0, -np.inf)
    if L is not None:
        bias = bias + np.where(np.arange(t)[None] < L[:, None], 0, -np.inf)[:, None, None]
    r = hq // K.shape[1]
    K, V = np.repeat(K, r, 1), np.repeat(V, r, 1)
    qk = (Q * np.sqrt(scale)) @ (K * np.sqrt(scale)).transpose(0, 1, 3, 2)
    capped = softcap * np.tanh(qk / softcap) if softcap > 0 else qk
    s = capped + bias
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    p = e / np.where(e.sum(-1, keepdims=True) == 0, 1, e.sum(-1, keepdims=True))
    y = p @ V
    if rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    qk_out = [qk, capped, s, p][qk_matmul_output_mode]
    return y, K[:, ::r], V[:, ::r], qk_out


# --- against ORT's CPU provider ---------------------------------------------------------------
B, H, SQ, T, D = 2, 3, 4, 6, 8
S4 = dict(Q=(B, H, SQ, D), K=(B, H, T, D), V=(B, H, T, D))
CASES = [
    ("4d", S4, {}),
    ("4d-v-head-size", dict(S4, V=(B, H, T, 10)), {}),
    ("4d-gqa", dict(Q=(B, 6, SQ, D), K=(B, 2, T, D), V=(B, 2, T, D)), {}),
    ("4d-mqa", dict(Q=(1, 4, 3, D), K=(1, 1, 5, D), V=(1, 1, 5, 4)), {}),
    ("3d", dict(Q=(B, SQ, 24), K=(B, T, 24), V=(B, T, 24)), dict(q_num_heads=3, kv_num_heads=3)),
    ("3d-gqa", dict(Q=(B, SQ, 48), K=(B, 5, 16), V=(B, 5, 20)),
     dict(q_num_heads=6, kv_num_heads=2)),
    ("scaled", S4, dict(scale=0.1)),
    ("softcap", S4, dict(softcap=2.0)),
    ("causal-square", dict(Q=(B, H, T, D), K=(B, H, T, D), V=(B, H, T, D)), dict(is_causal=1)),
    ("causal-upper-left", S4, dict(is_causal=1)),
    ("causal-more-queries", dict(Q=(B, H, 7, D), K=(B, H, 3, D), V=(B, H, 3, D)),
     dict(is_causal=1)),
    ("mask-2d", dict(S4, M=(SQ, T)), {}),
    ("mask-4d", dict(S4, M=(B, H, SQ, T)), {}),
    ("mask-batch", dict(S4, M=(B, 1, SQ, T)), {}),
    ("mask-causal", dict(S4, M=(B, 1, SQ, T)), dict(is_causal=1)),
    ("mask-gqa-softcap", dict(Q=(B, 6, SQ, D), K=(B, 2, T, D), V=(B, 2, T, D), M=(SQ, T)),
     dict(softcap=1.5)),
]


@pytest.mark.parametrize("opset", [23, 24])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_attention(case, opset):
    _, shapes, attrs = case
    oc.check(lambda e: attn_model(e, shapes, attrs, opset), feeds_for(shapes), F32)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[5], CASES[9], CASES[12]],
                         ids=lambda c: c[0])
def test_attention_half_types(case, dtype):
    _, shapes, attrs = case
    oc.check(lambda e: attn_model(e, shapes, attrs), feeds_for(shapes, 3), dtype)


@pytest.mark.parametrize("mask_shape", [(SQ, T), (B, H, SQ, T)], ids=["2d", "4d"])
@pytest.mark.parametrize("causal", [0, 1])
def test_bool_mask(mask_shape, causal):
    shapes = dict(S4, M=mask_shape)
    oc.check(lambda e: attn_model(e, shapes, dict(is_causal=causal), mask_t=TP.BOOL),
             feeds_for(shapes, 4, "bool"), F32)


PAST = dict(Q=(B, H, SQ, D), K=(B, H, 3, D), V=(B, H, 3, 10), PK=(B, H, 5, D),
            PV=(B, H, 5, 10))


@pytest.mark.parametrize("variant", ["4d", "4d-mask", "4d-causal", "3d-gqa", "decode-causal"])
def test_past_and_present(variant):
    shapes, attrs = dict(PAST), {}
    if variant == "4d-mask":
        shapes["M"] = (SQ, 8)
    if variant == "4d-causal":
        attrs = dict(is_causal=1)
    if variant == "3d-gqa":
        shapes = dict(Q=(B, SQ, 48), K=(B, 3, 16), V=(B, 3, 16), PK=(B, 2, 5, 8),
                      PV=(B, 2, 5, 8))
        attrs = dict(q_num_heads=6, kv_num_heads=2)
    if variant == "decode-causal":
        shapes = dict(Q=(B, H, 1, D), K=(B, H, 1, D), V=(B, H, 1, D), PK=(B, H, 7, D),
                      PV=(B, H, 7, D))
        attrs = dict(is_causal=1)
    oc.check(lambda e: attn_model(e, shapes, attrs, past=True, outs=("Y", "PKo", "PVo")),
             feeds_for(shapes, 5), F32)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("softcap", [0.0, 2.0])
def test_qk_matmul_output(mode, softcap):
    """Mode 0 is the raw product even with softcap (the spec and ORT; onnx's reference returns
    it softcapped)."""
    shapes = dict(S4, M=(SQ, T))
    attrs = dict(qk_matmul_output_mode=mode, softcap=softcap)
    oc.check(lambda e: attn_model(e, shapes, attrs, outs=("Y", "QK")), feeds_for(shapes, 6), F32)


def test_qk_matmul_output_with_past_and_causal_bias():
    """Mode 2 with causal and a past: the causal positions are -inf (as the spec's reference;
    ORT's CPU kernel writes a finite lowest value there), so against numpy."""
    shapes = dict(PAST, M=(SQ, 8))
    attrs = dict(qk_matmul_output_mode=2, is_causal=1)
    m = attn_model(TP.FLOAT, shapes, attrs, past=True, outs=("Y", "PKo", "PVo", "QK"))
    f = feeds_for(shapes, 7)
    want = [w.astype(np.float32) for w in attention_ref(**f, **attrs)]
    got = oc.check_ref(m, f, want, rtol=1e-5, atol=1e-5)
    assert np.isneginf(got[3]).any()


def test_rows_masked_everywhere_get_zero_weights():
    """A query row whose mask is -inf everywhere: ORT gives zero weights (and Y 0), not NaN."""
    shapes = dict(S4, M=(SQ, T))
    f = feeds_for(shapes, 8)
    f["M"][1] = -np.inf
    m = attn_model(TP.FLOAT, shapes, dict(qk_matmul_output_mode=3), outs=("Y", "QK"))
    got, _, _ = harness.check_against_cpu(m, f)
    assert (got[0][:, :, 1] == 0).all() and (got[1][:, :, 1] == 0).all()


def test_softmax_precision_float():
    shapes = dict(S4, M=(SQ, T))
    oc.check(lambda e: attn_model(e, shapes, dict(softmax_precision=TP.FLOAT)),
             feeds_for(shapes, 9), F16)


# --- opset 24: nonpad_kv_seqlen, masks shorter than the total length --------------------------
@pytest.mark.parametrize("with_mask", [False, True])
def test_nonpad_kv_seqlen(with_mask):
    shapes = dict(S4, M=(B, H, SQ, T)) if with_mask else dict(S4)
    f = feeds_for(shapes, 10)
    f["L"] = np.array([4, 6], np.int64)
    m = attn_model(TP.FLOAT, shapes, {}, opset=24, nonpad=True)
    harness.check_against_cpu(m, f)


@pytest.mark.parametrize("nonpad", [False, True])
def test_mask_shorter_than_total_length(nonpad):
    """Opset 24 pads a short mask with -inf (ORT's CPU kernel rejects it): against numpy."""
    shapes = dict(S4, M=(B, H, SQ, 4))
    f = feeds_for(shapes, 11)
    if nonpad:
        f["L"] = np.array([3, 4], np.int64)
    m = attn_model(TP.FLOAT, shapes, {}, opset=24, nonpad=nonpad)
    oc.check_ref(m, f, [attention_ref(**f)[0].astype(np.float32)])


# --- paths ------------------------------------------------------------------------------------
def node_path(model, feeds):
    """The Attention node's (path, kernel) from the EP's run record (src/plan/node_path.h)."""
    _, record = harness.run_with_stats(model, feeds)
    path = harness.node_path(record, "n")
    return path and path[:2]


SDPA = ("mlx_fused", "sdpa")  # MLX's fast attention
COMPOSED = ("composed", None)


@pytest.mark.parametrize("name,shapes,attrs,kw,path", [
    ("plain", S4, {}, {}, SDPA),
    ("gqa-causal-upper-left", dict(Q=(B, 6, SQ, D), K=(B, 2, T, D), V=(B, 2, T, D)),
     dict(is_causal=1), {}, SDPA),
    ("decode", dict(Q=(B, H, 1, D), K=(B, H, 1, D), V=(B, H, 1, D), PK=(B, H, 7, D),
                    PV=(B, H, 7, D)), dict(is_causal=1), dict(past=True), SDPA),
    ("mask", dict(S4, M=(SQ, T)), {}, {}, COMPOSED),
    ("softcap", S4, dict(softcap=3.0), {}, COMPOSED),
    ("qk-output", S4, {}, dict(outs=("Y", "QK")), COMPOSED),
])
def test_path(name, shapes, attrs, kw, path):
    """MLX's fast attention where nothing it lacks is asked for; the composition otherwise."""
    m = attn_model(TP.FLOAT, shapes, attrs, **kw)
    assert node_path(m, feeds_for(shapes, 12)) == path


@pytest.mark.cpu_device
def test_path_float16_on_cpu_is_composed():
    """On the CPU, MLX's fast attention would multiply float16 in float16: composed in float32."""
    m = attn_model(TP.FLOAT16, S4, {})
    f = {k: v.astype(np.float16) for k, v in feeds_for(S4, 13).items()}
    assert node_path(m, f) == COMPOSED


# --- declines ---------------------------------------------------------------------------------
def test_declines_softmax_precision_double(tmp_path):
    m = attn_model(TP.FLOAT, S4, dict(softmax_precision=TP.DOUBLE))
    oc.check_declined(m, feeds_for(S4, 14), "n", "softmax_precision", tmp_path)


def test_declines_nonpad_with_past(tmp_path):
    shapes = dict(PAST)
    m = attn_model(TP.FLOAT, shapes, {}, opset=24, past=True, nonpad=True,
                   outs=("Y", "PKo", "PVo"))
    oc.check_declined(m, None, "n", "nonpad_kv_seqlen with past", tmp_path)


def test_declines_heads_not_a_multiple(tmp_path):
    shapes = dict(Q=(B, 4, SQ, D), K=(B, 3, T, D), V=(B, 3, T, D))
    oc.check_declined(attn_model(TP.FLOAT, shapes, {}), None, "n", "needs a multiple", tmp_path)
