"""The operators exported decoder LLMs are made of (com.microsoft, and ORT's ai.onnx
SimplifiedLayerNormalization): each against ORT's CPU provider with proof that the node ran on
MLX (no CPU fallback), in float32 and float16, plus the forms the EP declines with the reason
its partition report gives."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model
from onnxruntime_ep_mlx.decoders import with_accuracy_level
from ssm_harness import BF16, MS, declines, f32, run_mlx

F, H16 = TP.FLOAT, TP.FLOAT16
NP = {F: np.float32, H16: np.float16}


# --- MatMulNBits ---------------------------------------------------------------------------
def quantize(n, k, bits, bs, zp_form, dtype, seed=0):
    """Random B in ORT's MatMulNBits layout: (B bytes [N, blocks, blob], scales [N * blocks],
    zero points (packed uint8, float or None), the dequantized weight [N, K] in float64)."""
    r = np.random.default_rng(seed)
    blocks = -(-k // bs)
    kpad = blocks * bs
    q = r.integers(0, 1 << bits, size=(n, kpad)).astype(np.uint8)
    scales = (r.random((n, blocks)) * 0.02 + 0.005).astype(NP[dtype])
    per = 8 // bits  # values per byte, the first in the lowest bits
    packed = np.zeros((n, kpad // per), np.uint8)
    for j in range(per):
        packed |= (q[:, j::per] << (j * bits)).astype(np.uint8)
    b = packed.reshape(n, blocks, bs * bits // 8)
    if zp_form is None:
        zp_vals, zp = np.full((n, blocks), 1 << (bits - 1), np.float64), None
    elif zp_form == "uint8":
        zq = r.integers(0, 1 << bits, size=(n, blocks)).astype(np.uint8)
        zp_vals = zq.astype(np.float64)
        if bits == 4:
            if blocks % 2:
                zq = np.concatenate([zq, np.zeros((n, 1), np.uint8)], axis=1)
            zp = (zq[:, 0::2] | (zq[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
        else:
            zp = zq.reshape(-1)
    else:
        zp = (r.random((n, blocks)) * ((1 << bits) - 1)).astype(NP[dtype])
        zp_vals = zp.astype(np.float64)
        zp = zp.reshape(-1)
    w = (q.astype(np.float64) - np.repeat(zp_vals, bs, axis=1)) * np.repeat(
        scales.astype(np.float64), bs, axis=1)
    return b, scales.reshape(-1), zp, w[:, :k]


def mnb_model(a_shape, n, k, bits=4, bs=32, zp_form="uint8", dtype=F, bias=False, g_idx=None,
              seed=0, **attrs):
    b, scales, zp, w = quantize(n, k, bits, bs, zp_form, dtype, seed)
    inits = [("B", b), ("scales", scales)]
    names = ["A", "B", "scales", "", "", ""]
    if zp is not None:
        inits.append(("zp", zp))
        names[3] = "zp"
    if g_idx is not None:
        inits.append(("g_idx", np.asarray(g_idx, np.int32)))
        names[4] = "g_idx"
    if bias:
        inits.append(("bias", (np.random.default_rng(seed + 1).standard_normal(n) * 0.1)
                      .astype(NP[dtype])))
        names[5] = "bias"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulNBits", names, ["Y"], name="mnb", domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=bs,
                            **{"accuracy_level": 0, **attrs})
    model = make_model([node], [("A", dtype, a_shape)], [("Y", dtype, None)], inits, opset=21,
                       domains=MS)
    return model, w


def feeds_a(shape, dtype, seed=3):
    return {"A": np.random.default_rng(seed).standard_normal(shape).astype(NP[dtype])}


def run_mnb(model, feeds, dtype):
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == F else dict(rtol=1e-2, atol=1e-2)
    got, ref, _ = check_against_cpu(model, feeds, **tol)
    err = float(np.max(np.abs(got[0].astype(np.float64) - ref[0].astype(np.float64))))
    return got[0], ref[0], err


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("bs", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("zp_form", [None, "uint8", "float"])
def test_matmulnbits_forms(bits, bs, zp_form):
    model, w = mnb_model([5, 896], 96, 896, bits, bs, zp_form)
    f = feeds_a([5, 896], F)
    if bits == 8 and zp_form == "float":  # ORT's CPU kernel has no such form: NumPy alone
        from mlx_harness import run_on_mlx
        got, placed = run_on_mlx(model, f)
        assert placed["mnb"] == "MLXExecutionProvider"
        got = got[0]
    else:
        got, _, _ = run_mnb(model, f, F)
    # and against the dequantized weight in float64, so a layout mistake shared with ORT's
    # reading could not pass
    want = f["A"].astype(np.float64) @ w.T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k", [900, 1000, 40])
@pytest.mark.parametrize("bits,bs", [(4, 32), (4, 256), (8, 64), (4, 16)])
def test_matmulnbits_k_not_multiple_of_block(k, bits, bs):
    model, w = mnb_model([3, k], 64, k, bits, bs, "uint8", bias=True)
    run_mnb(model, feeds_a([3, k], F), F)


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("zp_form", [None, "uint8", "float"])
def test_matmulnbits_rank3_realistic(dtype, bias, zp_form):
    """A Qwen2.5-0.5B projection (896 x 896, int4, block 32) on a rank-3 activation."""
    model, _ = mnb_model([2, 7, 896], 896, 896, 4, 32, zp_form, dtype, bias=bias)
    run_mnb(model, feeds_a([2, 7, 896], dtype), dtype)


def test_matmulnbits_decode_step_and_trivial_g_idx():
    k, bs = 256, 64
    for zp_form in (None, "float"):
        model, _ = mnb_model([1, 1, k], 128, k, 4, bs, zp_form, g_idx=np.arange(k) // bs,
                             bias=True)
        run_mnb(model, feeds_a([1, 1, k], F), F)


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_matmulnbits_any_accuracy_level_claimed(level):
    """A lower accuracy level is a permission: the EP computes as level 0 does (compared with a
    level-0 reference, since ORT's level-4 kernel quantizes A)."""
    model, _ = mnb_model([4, 256], 64, 256, 4, 32, "uint8", accuracy_level=level)
    ref_model, _ = mnb_model([4, 256], 64, 256, 4, 32, "uint8", accuracy_level=0)
    from mlx_harness import cpu_session, run_on_mlx
    f = feeds_a([4, 256], F)
    got, placed = run_on_mlx(model, f)
    assert placed["mnb"] == "MLXExecutionProvider"
    ref = cpu_session(ref_model).run(None, f)
    np.testing.assert_allclose(got[0], ref[0], rtol=2e-4, atol=2e-4)


def test_matmulnbits_declines():
    k = 128
    cases = {
        "bits": (dict(bits=2), "bits 2"),
        "g_idx": (dict(g_idx=np.arange(k)[::-1] // 32, zp_form=None), "act-order"),
        "g_idx_zp": (dict(g_idx=np.arange(k) // 32), "ignores those zero points"),
        "block": (dict(bs=512), "block_size 512"),
        "prepacked": (dict(weight_prepacked=1), "weight_prepacked 1"),
    }
    for what, (kw, words) in cases.items():
        model, _ = mnb_model([2, k], 32, k, **{"bs": 32, **kw})
        reason = declines(model).get("mnb", "")
        assert words in reason, (what, reason)
    # B fed at run time
    model, _ = mnb_model([2, k], 32, k)
    g = model.graph
    b = [i for i in g.initializer if i.name == "B"][0]
    g.initializer.remove(b)
    g.input.append(helper.make_tensor_value_info("B", TP.UINT8, list(b.dims)))
    assert "B is not a constant initializer" in declines(model).get("mnb", "")


# --- SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, SkipLayerNormalization -
def rnd(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(NP[dtype])


def norm_tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == F else dict(rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("axis,scale_shape,inv", [(-1, [64], False), (-1, [64], True),
                                                  (1, [5, 64], True), (2, [64], False)])
def test_simplified_layer_norm(dtype, axis, scale_shape, inv):
    x_shape = [2, 5, 64]
    outs = ["Y", "inv"] if inv else ["Y"]
    node = helper.make_node("SimplifiedLayerNormalization", ["X", "scale"], outs, name="sln",
                            axis=axis, epsilon=1e-6)
    model = make_model([node], [("X", dtype, x_shape)],
                       [("Y", dtype, None)] + ([("inv", F, None)] if inv else []),
                       [("scale", rnd(scale_shape, dtype, 1))], opset=17)
    check_against_cpu(model, {"X": rnd(x_shape, dtype, 0) * 3}, **norm_tol(dtype))


def skip_model(op, x_shape, skip_shape, dtype, bias, beta, outs, seed=0):
    h = x_shape[-1]
    names = ["input", "skip", "gamma"]
    inits = [("gamma", rnd([h], dtype, seed + 2))]
    if op == "SkipLayerNormalization":
        names.append("beta" if beta else "")
        if beta:
            inits.append(("beta", rnd([h], dtype, seed + 3)))
    if bias:
        names.append("bias")
        inits.append(("bias", rnd([h], dtype, seed + 4)))
    while names[-1] == "":
        names.pop()
    out_names = ["output", "mean", "inv_std_var", "input_skip_bias_sum"]
    node_outs = [o if o in outs else "" for o in out_names]
    while node_outs[-1] == "":
        node_outs.pop()
    types = {"output": dtype, "mean": F, "inv_std_var": F, "input_skip_bias_sum": dtype}
    node = helper.make_node(op, names, node_outs, name="skipnorm", domain="com.microsoft",
                            epsilon=1e-6)
    model = make_model([node], [("input", dtype, x_shape), ("skip", dtype, skip_shape)],
                       [(o, types[o], None) for o in node_outs if o], inits, opset=17,
                       domains=MS)
    feeds = {"input": rnd(x_shape, dtype, seed), "skip": rnd(skip_shape, dtype, seed + 1)}
    return model, feeds


ALL_OUTS = ("output", "mean", "inv_std_var", "input_skip_bias_sum")


@pytest.mark.parametrize("op", ["SkipSimplifiedLayerNormalization", "SkipLayerNormalization"])
@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("outs", [("output",), ("output", "input_skip_bias_sum"), ALL_OUTS])
def test_skip_norms(op, dtype, bias, outs):
    model, feeds = skip_model(op, [2, 7, 96], [2, 7, 96], dtype, bias, True, outs)
    check_against_cpu(model, feeds, **norm_tol(dtype))


@pytest.mark.parametrize("op", ["SkipSimplifiedLayerNormalization", "SkipLayerNormalization"])
@pytest.mark.parametrize("x_shape,skip_shape", [([2, 7, 96], [1, 7, 96]),
                                                ([2, 7, 96], [7, 96]), ([7, 96], [7, 96])])
def test_skip_norms_shapes(op, x_shape, skip_shape):
    model, feeds = skip_model(op, x_shape, skip_shape, F, True, False, ALL_OUTS)
    check_against_cpu(model, feeds, **norm_tol(F))


def test_norm_declines():
    node = helper.make_node("SimplifiedLayerNormalization", ["X", "scale"], ["Y"], name="sln",
                            stash_type=0)
    model = make_model([node], [("X", F, [2, 8])], [("Y", F, None)],
                       [("scale", rnd([8], F, 1))], opset=17)
    assert "stash_type 0" in declines(model).get("sln", "")
    model, _ = skip_model("SkipSimplifiedLayerNormalization", [2, 3, 4, 8], [2, 3, 4, 8], F,
                          False, False, ("output",))
    assert "rank 4" in declines(model).get("skipnorm", "")


# --- RotaryEmbedding (com.microsoft) --------------------------------------------------------
def rope_model(x_shape, dtype, max_pos=64, half=8, pos="bs", interleaved=0, seed=0, **attrs):
    b, s = x_shape[0], x_shape[2] if len(x_shape) == 4 else x_shape[1]
    r = np.random.default_rng(seed)
    ang = r.random((max_pos, half)) * 6.0
    inits = [("cos", np.cos(ang).astype(NP[dtype])), ("sin", np.sin(ang).astype(NP[dtype]))]
    pos_shape = [b, s] if pos == "bs" else [1]
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], name="rope",
                            domain="com.microsoft", interleaved=interleaved, **attrs)
    model = make_model([node], [("x", dtype, x_shape), ("pos", TP.INT64, pos_shape)],
                       [("y", dtype, None)], inits, opset=17, domains=MS)
    if pos == "bs":
        p = r.integers(0, max_pos - s, size=(b, 1)) + np.arange(s)[None, :]
    else:
        p = np.array([5])
    return model, {"x": rnd(x_shape, dtype, seed + 1), "pos": p.astype(np.int64)}


def rope_tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == F else dict(rtol=2e-3, atol=4e-3)


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("pos", ["bs", "offset"])
@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_rotary_embedding(dtype, interleaved, pos, layout):
    shape = [2, 5, 4 * 16] if layout == "3d" else [2, 4, 5, 16]
    model, feeds = rope_model(shape, dtype, half=8, pos=pos, interleaved=interleaved)
    check_against_cpu(model, feeds, **rope_tol(dtype))


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_rotary_embedding_partial(interleaved, layout):
    """Phi-style partial rotary: 32 of each head's 64 values rotate, the rest pass through."""
    shape = [1, 6, 3 * 64] if layout == "3d" else [1, 3, 6, 64]
    model, feeds = rope_model(shape, F, half=16, interleaved=interleaved,
                              rotary_embedding_dim=32, num_heads=3)
    got, ref, _ = check_against_cpu(model, feeds, **rope_tol(F))


def test_rotary_embedding_declines():
    model, _ = rope_model([1, 4, 32], F, is_packed_batching=1)
    assert "is_packed_batching 1" in declines(model).get("rope", "")
    model, _ = rope_model([1, 4, 32], F, rotary_embedding_dim=8)
    assert "needs num_heads" in declines(model).get("rope", "")


# --- GroupQueryAttention (com.microsoft) ----------------------------------------------------
def gqa_model(s=1, past=0, nq=4, nkv=2, h=32, dtype=F, packed=False, rotary=False,
              rot_half=None, interleaved=0, with_past=True, batch=1, extra_inputs=(), seed=0,
              **attrs):
    r = np.random.default_rng(seed)
    total = past + s
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_len"]
    qw = (nq + 2 * nkv) * h if packed else nq * h
    ins = [("query", dtype, [batch, s, qw])]
    feeds = {"query": r.standard_normal((batch, s, qw)).astype(NP[dtype])}
    if packed:
        names[1] = names[2] = ""
    else:
        for nm in ("key", "value"):
            ins.append((nm, dtype, [batch, s, nkv * h]))
            feeds[nm] = r.standard_normal((batch, s, nkv * h)).astype(NP[dtype])
    if with_past:
        for nm in ("past_key", "past_value"):
            ins.append((nm, dtype, [batch, nkv, past, h]))
            feeds[nm] = r.standard_normal((batch, nkv, past, h)).astype(NP[dtype])
    else:
        names[3] = names[4] = ""
    ins += [("seqlens_k", TP.INT32, [batch]), ("total_len", TP.INT32, [])]
    feeds["seqlens_k"] = np.full([batch], total - 1, np.int32)
    feeds["total_len"] = np.array(total, np.int32)
    inits = []
    if rotary:
        half = rot_half or h // 2
        ang = r.random((64, half)) * 6.0
        inits = [("cos", np.cos(ang).astype(NP[dtype])), ("sin", np.sin(ang).astype(NP[dtype]))]
        names += ["cos", "sin"]
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
    for idx, (nm, shape) in extra_inputs:
        while len(names) < idx:
            names.append("")
        names.append(nm)
        ins.append((nm, dtype, shape))
        feeds[nm] = r.standard_normal(shape).astype(NP[dtype])
    node = helper.make_node("GroupQueryAttention", names, ["out", "present_key", "present_value"],
                            name="gqa", domain="com.microsoft", num_heads=nq, kv_num_heads=nkv,
                            **attrs)
    model = make_model([node], ins, [("out", dtype, None), ("present_key", dtype, None),
                                     ("present_value", dtype, None)], inits, opset=17,
                       domains=MS)
    return model, feeds


def gqa_tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == F else dict(rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("s,past", [(7, 0), (1, 9), (4, 5), (1, 0)])
@pytest.mark.parametrize("packed", [False, True])
def test_gqa_growing_past(dtype, s, past, packed):
    model, feeds = gqa_model(s=s, past=past, dtype=dtype, packed=packed)
    check_against_cpu(model, feeds, **gqa_tol(dtype))


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("s,past", [(6, 0), (1, 6), (3, 4)])
@pytest.mark.parametrize("rot_half", [None, 8])
def test_gqa_rotary(interleaved, s, past, rot_half):
    model, feeds = gqa_model(s=s, past=past, h=32, rotary=True, rot_half=rot_half,
                             interleaved=interleaved, packed=past == 6)
    check_against_cpu(model, feeds, **gqa_tol(F))


@pytest.mark.parametrize("dtype", [F, H16])
def test_gqa_qwen_shaped_decode(dtype):
    """Qwen2.5-0.5B's attention: 14 query heads over 2 KV heads of 64, rotary, packed QKV."""
    model, feeds = gqa_model(s=1, past=20, nq=14, nkv=2, h=64, dtype=dtype, packed=True,
                             rotary=True)
    check_against_cpu(model, feeds, **gqa_tol(dtype))


def test_gqa_no_past_inputs_and_scale():
    model, feeds = gqa_model(s=5, with_past=False, scale=0.1)
    check_against_cpu(model, feeds, **gqa_tol(F))


def test_gqa_declines():
    """What stays declined (the score forms are claimed: test_llm_gqa_forms.py)."""
    cases = [
        (dict(causal=0), "causal 0"),
        (dict(qk_output=1), "qk_output 1"),
    ]
    for kw, words in cases:
        model, _ = gqa_model(s=1, past=3, **kw)
        reason = declines(model).get("gqa", "")
        assert words in reason, (kw, reason)


def symbolic(model, dims):
    """model with input dims renamed to symbols: {input name: {axis: symbol}}."""
    for i in model.graph.input:
        for axis, sym in dims.get(i.name, {}).items():
            d = i.type.tensor_type.shape.dim[axis]
            d.ClearField("dim_value")
            d.dim_param = sym
    return model


def test_gqa_decode_steps_one_session():
    """A prefill then decode steps through one session (dynamic S and past), the present of
    each step fed back as the next past, step by step against ORT's CPU provider."""
    from mlx_harness import cpu_session, mlx_session
    nq, nkv, h = 4, 2, 32
    model, _ = gqa_model(s=5, past=0, nq=nq, nkv=nkv, h=h, packed=True, rotary=True)
    model = symbolic(model, {"query": {1: "s"}, "past_key": {2: "p"}, "past_value": {2: "p"}})
    mlx, cpu = mlx_session(model), cpu_session(model)
    r = np.random.default_rng(7)
    past_k = past_v = np.zeros((1, nkv, 0, h), np.float32)
    for s in (5, 1, 1, 1, 3, 1):
        total = past_k.shape[2] + s
        feeds = {"query": r.standard_normal((1, s, (nq + 2 * nkv) * h)).astype(np.float32),
                 "past_key": past_k, "past_value": past_v,
                 "seqlens_k": np.array([total - 1], np.int32),
                 "total_len": np.array(total, np.int32)}
        got, ref = mlx.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        past_k, past_v = ref[1], ref[2]


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("s,valid", [(5, 0), (1, 7), (3, 4), (1, 15)])
def test_gqa_shared_buffer(dtype, s, valid):
    """onnxruntime-genai's convention: past and present hold the whole capacity (16 rows), the
    valid prefix given by seqlens_k; present takes the new rows after it, zeros beyond (ORT's
    kernel zero-fills a present of its own)."""
    model, feeds = gqa_model(s=s, past=16, dtype=dtype, packed=True, rotary=True)
    total = valid + s
    feeds["seqlens_k"] = np.array([total - 1], np.int32)
    feeds["total_len"] = np.array(total, np.int32)
    got, ref, _ = check_against_cpu(model, feeds, **gqa_tol(dtype))
    assert got[1].shape == (1, 2, 16, 32)


def test_gqa_batch_entries_of_their_own_lengths():
    """Two batch entries with right-padded pasts of different valid lengths (seqlens_k 6 and 3)
    decode one token each."""
    model, feeds = gqa_model(s=1, past=6, batch=2, rotary=True)
    feeds["seqlens_k"] = np.array([6, 3], np.int32)
    feeds["total_len"] = np.array(7, np.int32)
    check_against_cpu(model, feeds, **gqa_tol(F))


def test_gqa_shared_buffer_decode_steps_one_session():
    """Prefill and decode steps with a fixed-capacity cache fed back each step, as
    onnxruntime-genai runs a decoder, step by step against ORT's CPU provider."""
    from mlx_harness import cpu_session, mlx_session
    nq, nkv, h, cap = 4, 2, 32, 12
    model, _ = gqa_model(s=4, past=cap, nq=nq, nkv=nkv, h=h, packed=True, rotary=True)
    model = symbolic(model, {"query": {1: "s"}})
    mlx, cpu = mlx_session(model), cpu_session(model)
    r = np.random.default_rng(3)
    pk = pv = np.zeros((1, nkv, cap, h), np.float32)
    valid = 0
    for s in (4, 1, 1, 2, 1):
        total = valid + s
        feeds = {"query": r.standard_normal((1, s, (nq + 2 * nkv) * h)).astype(np.float32),
                 "past_key": pk, "past_value": pv,
                 "seqlens_k": np.array([total - 1], np.int32),
                 "total_len": np.array(total, np.int32)}
        got, ref = mlx.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        pk, pv, valid = got[1], got[2], total


def test_gqa_seqlens_out_of_range_fail_at_run_time():
    """seqlens_k asking for past rows that are not there is refused when the node runs, not
    answered from rows that do not exist."""
    from mlx_harness import mlx_session
    model, feeds = gqa_model(s=1, past=4)
    feeds["seqlens_k"] = np.array([9], np.int32)
    feeds["total_len"] = np.array(10, np.int32)
    with pytest.raises(Exception, match="seqlens_k"):
        mlx_session(model).run(None, feeds)


# --- bfloat16 (ORT's CPU provider has no kernels: the float32 model's answer is the reference) -
def _bf16_case(kind):
    BF = TP.BFLOAT16
    NP[BF] = BF16
    if kind == "sln":
        mk = lambda dt: (make_model(  # noqa: E731
            [helper.make_node("SimplifiedLayerNormalization", ["X", "scale"], ["Y"], name="sln")],
            [("X", dt, [2, 5, 64])], [("Y", dt, None)], [("scale", rnd([64], dt, 1))],
            opset=17), {"X": rnd([2, 5, 64], dt, 0)})
    elif kind == "skip":
        mk = lambda dt: skip_model("SkipSimplifiedLayerNormalization", [2, 7, 96],  # noqa: E731
                                   [2, 7, 96], dt, True, False,
                                   ("output", "input_skip_bias_sum"))
    elif kind == "skipln":
        mk = lambda dt: skip_model("SkipLayerNormalization", [2, 7, 96], [2, 7, 96], dt,  # noqa
                                   True, True, ("output",))
    else:
        mk = lambda dt: rope_model([2, 5, 64], dt, half=8, interleaved=1)  # noqa: E731
    return mk(F), mk(BF)


@pytest.mark.parametrize("kind", ["sln", "skip", "skipln", "rope"])
def test_llm_bfloat16(kind):
    from mlx_harness import cpu_session
    (m32, f32_feeds), (m16, f16_feeds) = _bf16_case(kind)
    got = run_mlx(m16, f16_feeds)
    # the reference sees the same (bfloat16-rounded) inputs and weights, in float32
    from onnx import numpy_helper
    for init in m32.graph.initializer:
        same = next(i for i in m16.graph.initializer if i.name == init.name)
        init.CopyFrom(numpy_helper.from_array(f32(numpy_helper.to_array(same)), init.name))
    ref = cpu_session(m32).run(None, {k: f32(v) if v.dtype == BF16 else v
                                      for k, v in f16_feeds.items()})
    for g, r in zip(got, ref):
        assert g.dtype == BF16
        np.testing.assert_allclose(f32(g), r, rtol=8e-3, atol=8e-3)


# --- a Qwen2-shaped decoder layer: every operator above in one graph ------------------------
def decoder_layer(d=128, nq=4, nkv=2, h=32, inter=256, bs=32, seed=0):
    r = np.random.default_rng(seed)
    inits, nodes = [], []

    def mnb(name, x, n, k, bias=False):
        b, scales, zp, _ = quantize(n, k, 4, bs, "uint8", F, seed=len(inits))
        inits.extend([(name + "_B", b), (name + "_s", scales), (name + "_z", zp)])
        ins = [x, name + "_B", name + "_s", name + "_z"]
        if bias:
            inits.append((name + "_bias", (r.standard_normal(n) * 0.1).astype(np.float32)))
            ins += ["", name + "_bias"]
        nodes.append(helper.make_node("MatMulNBits", ins, [name], name=name,
                                      domain="com.microsoft", K=k, N=n, bits=4, block_size=bs,
                                      accuracy_level=4))
        return name

    inits += [("g1", 1 + 0.1 * r.standard_normal(d).astype(np.float32)),
              ("g2", 1 + 0.1 * r.standard_normal(d).astype(np.float32))]
    ang = np.arange(64)[:, None] / (10000.0 ** (np.arange(h // 2) / (h // 2)))[None, :]
    inits += [("cos", np.cos(ang).astype(np.float32)), ("sin", np.sin(ang).astype(np.float32))]
    nodes.append(helper.make_node("SimplifiedLayerNormalization", ["hidden", "g1"], ["h1"],
                                  name="ln1", epsilon=1e-6))
    qkv = mnb("qkv", "h1", (nq + 2 * nkv) * h, d, bias=True)
    nodes.append(helper.make_node(
        "GroupQueryAttention", [qkv, "", "", "past_key", "past_value", "seqlens_k", "total_len",
                                "cos", "sin"], ["attn", "present_key", "present_value"],
        name="gqa", domain="com.microsoft", num_heads=nq, kv_num_heads=nkv, do_rotary=1))
    o = mnb("o_proj", "attn", d, nq * h)
    nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [o, "hidden", "g2"],
                                  ["h2", "", "", "resid"], name="ln2", domain="com.microsoft",
                                  epsilon=1e-6))
    gate, up = mnb("gate", "h2", inter, d), mnb("up", "h2", inter, d)
    nodes += [helper.make_node("Sigmoid", [gate], ["sg"], name="sig"),
              helper.make_node("Mul", [gate, "sg"], ["silu"], name="silu_mul"),
              helper.make_node("Mul", ["silu", up], ["act"], name="act_mul")]
    down = mnb("down", "act", d, inter)
    nodes.append(helper.make_node("Add", [down, "resid"], ["out"], name="residual"))
    ins = [("hidden", F, [1, "s", d]), ("past_key", F, [1, nkv, "p", h]),
           ("past_value", F, [1, nkv, "p", h]), ("seqlens_k", TP.INT32, [1]),
           ("total_len", TP.INT32, [])]
    outs = [("out", F, None), ("present_key", F, None), ("present_value", F, None)]
    return make_model(nodes, ins, outs, inits, opset=21, domains=MS)


def test_decoder_layer_prefill_and_decode():
    """Prefill then decode steps, the cache fed back, every node on MLX, each step against ORT's
    CPU provider (whose MatMulNBits runs at accuracy_level 0 here: the model says 4, which
    quantizes A on ORT's CPU; the EP always computes as level 0 does)."""
    from mlx_harness import cpu_session
    from ssm_harness import mlx_session_checked
    model = decoder_layer()
    ref_model = with_accuracy_level(model, 0)
    mlx, cpu = mlx_session_checked(model), cpu_session(ref_model)
    r = np.random.default_rng(11)
    nkv, h = 2, 32
    pk = pv = np.zeros((1, nkv, 0, h), np.float32)
    worst = 0.0
    for s in (6, 1, 1, 1):
        total = pk.shape[2] + s
        feeds = {"hidden": r.standard_normal((1, s, 128)).astype(np.float32),
                 "past_key": pk, "past_value": pv,
                 "seqlens_k": np.array([total - 1], np.int32),
                 "total_len": np.array(total, np.int32)}
        got, ref = mlx.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
            worst = max(worst, float(np.max(np.abs(g - w))))
        pk, pv = got[1], got[2]  # the EP's own cache carries on
    assert worst < 1e-4


def test_matmulnbits_constant_a_folded_at_plan_build():
    """A constant A makes the node foldable when the plan is built, before any prepare hook
    ran: the translator then re-packs B itself (were it to fail, the node would run per call
    instead; either way the answer must be right)."""
    from mlx_harness import assignment, cpu_session, mlx_session
    model, w = mnb_model([3, 128], 32, 128, 4, 32, "uint8")
    a = rnd([3, 128], F, 5)
    model.graph.input.pop()
    model.graph.initializer.append(helper.make_tensor("A", TP.FLOAT, [3, 128], a.ravel()))
    s = mlx_session(model, optimize=False)
    assert assignment(s)["mnb"] == "MLXExecutionProvider"
    got = s.run(None, {})[0]
    ref = cpu_session(model, optimize=False).run(None, {})[0]
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)


QUANTIZED = ("mlx_fused", "quantized_matmul", ())
DEQUANTIZED = ("composed", "dequantized_matmul", ())


@pytest.mark.parametrize("bs,path", [(16, DEQUANTIZED), (32, QUANTIZED), (64, QUANTIZED),
                                     (128, QUANTIZED), (256, QUANTIZED)])
def test_matmulnbits_path(bs, path):
    """Which form each block size takes, from the run record."""
    from mlx_harness import node_path, run_with_stats
    model, _ = mnb_model([3, 256], 32, 256, 4, bs, "uint8")
    _, stats = run_with_stats(model, feeds_a([3, 256], F))
    assert len(stats["groups"]) == 1
    assert node_path(stats, "mnb") == path, stats


def test_decoder_layer_is_one_group():
    """The whole layer fuses into one MLX group that runs every step without failures or
    fallbacks (from the run record). With a growing past each decode step traces once (its
    shapes grow); the shared buffer's steps share one trace (next test)."""
    import gc
    import json
    import os
    import tempfile

    from mlx_harness import mlx_session
    fd, path = tempfile.mkstemp(suffix=".json", prefix="mlx-stats-")
    os.close(fd)
    try:
        s = mlx_session(decoder_layer(), provider_options={"stats_file": path})
        r = np.random.default_rng(0)
        pk = pv = np.zeros((1, 2, 0, 32), np.float32)
        for st in (6, 1, 1, 1):
            total = pk.shape[2] + st
            pk, pv = s.run(None, {
                "hidden": r.standard_normal((1, st, 128)).astype(np.float32),
                "past_key": pk, "past_value": pv, "seqlens_k": np.array([total - 1], np.int32),
                "total_len": np.array(total, np.int32)})[1:]
        del s
        gc.collect()
        with open(path) as f:
            stats = json.load(f)
    finally:
        os.unlink(path)
    [group] = stats["groups"]
    assert group["nodes"] == 12 and group["runs"] == 4, group
    assert group["failures"] == 0 and group["fallbacks"] == 0, group
    from mlx_harness import node_path
    assert node_path(stats, "qkv") == QUANTIZED, group


def test_decoder_layer_shared_buffer_decode_traces_once():
    """onnxruntime-genai's convention (past and present one buffer of capacity 16): a prefill
    and four decode steps through one session, each against ORT's CPU provider, trace twice in
    all (the prefill, then one variant every decode step reuses: total_sequence_length keys the
    group by class, key_class_gqa), from the run record's counters."""
    from mlx_harness import Recorded, cpu_session, only_group
    model = decoder_layer()
    ref_model = with_accuracy_level(model, 0)
    rec, cpu = Recorded(model), cpu_session(ref_model)
    r = np.random.default_rng(2)
    cap, valid = 16, 0
    pk = pv = np.zeros((1, 2, cap, 32), np.float32)
    for st in (6, 1, 1, 1, 1):
        total = valid + st
        feeds = {"hidden": r.standard_normal((1, st, 128)).astype(np.float32),
                 "past_key": pk, "past_value": pv, "seqlens_k": np.array([total - 1], np.int32),
                 "total_len": np.array(total, np.int32)}
        got, ref = rec.session.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        pk, pv, valid = got[1], got[2], total
    g = only_group(rec.close())
    assert g["runs"] == 5 and g["fallbacks"] == 0 and g["failures"] == 0, g
    assert g["traces"] == 2 and g["cache_hits"] == 3, g


@pytest.mark.parametrize("bits,bs,zp_form", [(4, 16, "uint8"), (4, 256, None), (8, 64, "uint8"),
                                             (8, 128, None), (4, 64, "float")])
def test_matmulnbits_float16_forms(bits, bs, zp_form):
    model, _ = mnb_model([2, 3, 320], 48, 320, bits, bs, zp_form, H16, bias=True)
    run_mnb(model, feeds_a([2, 3, 320], H16), H16)


@pytest.mark.parametrize("with_past", [False, True])
def test_gqa_padded_batch_prompt(with_past):
    """A first prompt (S == total_sequence_length) of two entries, the second right-padded
    (seqlens_k 4 and 2): no past is read for either, as ORT's kernel reads none on a first
    prompt, whether or not an (empty or shared) past is given."""
    model, feeds = gqa_model(s=5, past=8 if with_past else 0, batch=2, rotary=True,
                             with_past=with_past)
    feeds["seqlens_k"] = np.array([4, 2], np.int32)
    feeds["total_len"] = np.array(5, np.int32)
    check_against_cpu(model, feeds, **gqa_tol(F))
