"""GroupQueryAttention's score forms exported decoders use (local_window_size, softcap,
smooth_softmax, head_sink, attention_bias, position_ids), each against ORT's CPU provider with
proof the node ran on MLX: a growing past and the shared buffer, batch entries of their own
lengths, decode steps through one session (and, with the shared buffer, one trace for all of
them, from the run record)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import (Recorded, check_against_cpu, cpu_session, node_path, only_group,
                          run_on_mlx)
from ssm_harness import declines
from test_llm import H16, F, NP, gqa_model, gqa_tol, symbolic

NQ, NKV, HD = 4, 2, 32

FORMS = {
    "window": dict(local_window_size=3),
    "softcap": dict(softcap=1.5),
    "window_softcap": dict(local_window_size=4, softcap=2.0),
    "smooth": dict(smooth_softmax=1),
    "sink": dict(sink=True),
    "window_sink": dict(local_window_size=2, sink=True),
    "bias": dict(bias="1,1"),
    "bias_per_head": dict(bias="B,N", local_window_size=3),
    "position_ids": dict(position_ids=True),
    "all_at_once": dict(local_window_size=3, softcap=1.5, bias="B,N", sink=True,
                        position_ids=True),
}


def form_model(form, s, past, batch=1, dtype=F, total=None, symbolic_dims=None, seed=0):
    """gqa_model (packed QKV, rotary) with one of FORMS; inputs the form adds are fed too."""
    kw = dict(FORMS[form])
    sink, bias, pos = kw.pop("sink", False), kw.pop("bias", None), kw.pop("position_ids", False)
    total = past + s if total is None else total
    extra = []
    if sink:
        extra.append((11, ("head_sink", [NQ])))
    model, feeds = gqa_model(s=s, past=past, nq=NQ, nkv=NKV, h=HD, dtype=dtype, packed=True,
                             rotary=True, batch=batch, extra_inputs=extra, seed=seed, **kw)
    node = model.graph.node[0]
    names = list(node.input)
    r = np.random.default_rng(seed + 1)
    if pos or bias:
        while len(names) < 11:
            names.append("")
    if pos:
        names[9] = "position_ids"
        model.graph.input.append(helper.make_tensor_value_info("position_ids", TP.INT64,
                                                               [batch, s]))
        feeds["position_ids"] = r.integers(0, 40, (batch, s)).astype(np.int64)
    if bias:
        b0, n0 = (1, 1) if bias == "1,1" else (batch, NQ)
        names[10] = "attention_bias"
        model.graph.input.append(helper.make_tensor_value_info("attention_bias", dtype,
                                                               [b0, n0, s, total]))
        feeds["attention_bias"] = r.standard_normal((b0, n0, s, total)).astype(NP[dtype])
    if sink:
        feeds["head_sink"] = (r.standard_normal(NQ) * 2).astype(NP[dtype])
    del node.input[:]
    node.input.extend(names)
    feeds["seqlens_k"] = np.full([batch], total - 1, np.int32)
    feeds["total_len"] = np.array(total, np.int32)
    return model, feeds


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("s,past", [(7, 0), (1, 9), (3, 5)])
def test_gqa_form_growing_past(form, s, past):
    model, feeds = form_model(form, s, past)
    check_against_cpu(model, feeds, **gqa_tol(F))


@pytest.mark.parametrize("form", ["window_softcap", "sink", "bias_per_head", "position_ids"])
def test_gqa_form_float16(form):
    model, feeds = form_model(form, 3, 6, dtype=H16)
    check_against_cpu(model, feeds, **gqa_tol(H16))


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("s,valid", [(5, 0), (1, 9), (2, 6)])
def test_gqa_form_shared_buffer(form, s, valid):
    """Past and present one buffer of 12 rows, the valid prefix given by seqlens_k."""
    model, feeds = form_model(form, s, 12, total=valid + s)
    got, _, _ = check_against_cpu(model, feeds, **gqa_tol(F))
    assert got[1].shape == (1, NKV, 12, HD)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shared", [False, True])
def test_gqa_form_padded_batch(form, shared):
    """Two entries of their own lengths: a decode step (seqlens_k 7 and 3) and a right-padded
    first prompt (seqlens_k 4 and 2). With a window, ORT 1.31.1's kernel reads score columns
    past the entry's last key for the padding rows of a padded prompt (columns its product never
    wrote), so those rows, whose values no decoder reads, are compared only without one."""
    model, feeds = form_model(form, 1, 10 if shared else 7, batch=2, total=8)
    feeds["seqlens_k"] = np.array([7, 3], np.int32)
    check_against_cpu(model, feeds, **gqa_tol(F))
    model, feeds = form_model(form, 5, 10 if shared else 0, batch=2, total=5)
    feeds["seqlens_k"] = np.array([4, 2], np.int32)
    if "local_window_size" not in FORMS[form]:
        check_against_cpu(model, feeds, **gqa_tol(F))
        return
    got, placed = run_on_mlx(model, feeds)
    assert placed["gqa"] == "MLXExecutionProvider"
    ref = cpu_session(model).run(None, feeds)
    for g, w in zip(got[1:], ref[1:]):
        np.testing.assert_allclose(g, w, **gqa_tol(F))
    np.testing.assert_allclose(got[0][0], ref[0][0], **gqa_tol(F))
    np.testing.assert_allclose(got[0][1, :3], ref[0][1, :3], **gqa_tol(F))


def steps_feeds(r, form, s, total, pk, pv, batch=1):
    f = {"query": r.standard_normal((batch, s, (NQ + 2 * NKV) * HD)).astype(np.float32),
         "past_key": pk, "past_value": pv, "seqlens_k": np.full([batch], total - 1, np.int32),
         "total_len": np.array(total, np.int32)}
    if FORMS[form].get("sink"):
        f["head_sink"] = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    if FORMS[form].get("position_ids"):
        f["position_ids"] = (total - s + np.arange(s) + 2)[None, :].repeat(batch, 0)
    if FORMS[form].get("bias"):
        f["attention_bias"] = r.standard_normal((batch, NQ, s, total)).astype(np.float32)
    return f


@pytest.mark.parametrize("form", ["window", "window_softcap", "sink", "smooth", "position_ids",
                                  "all_at_once"])
@pytest.mark.parametrize("shared", [False, True])
def test_gqa_form_decode_steps(form, shared):
    """A prefill then decode steps through one session, the cache fed back each step, against
    ORT's CPU provider step by step (traces are counted in test_llm_decoders.py: a group of one
    node runs eagerly)."""
    cap = 12
    model, _ = form_model(form, 4, cap if shared else 0)
    dims = {"query": {1: "s"}}
    if not shared:
        dims.update({"past_key": {2: "p"}, "past_value": {2: "p"}})
    if FORMS[form].get("position_ids"):
        dims["position_ids"] = {1: "s"}
    if FORMS[form].get("bias"):
        dims["attention_bias"] = {2: "s", 3: "t"}
    model = symbolic(model, dims)
    rec, cpu = Recorded(model), cpu_session(model)
    r = np.random.default_rng(5)
    rows = cap if shared else 0
    pk = pv = np.zeros((1, NKV, rows, HD), np.float32)
    valid = 0
    steps = (4, 1, 1, 1, 1, 1)
    for s in steps:
        total = valid + s
        feeds = steps_feeds(r, form, s, total, pk, pv)
        got, ref = rec.session.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        pk, pv, valid = got[1], got[2], total
    g = only_group(rec.close())
    assert g["runs"] == len(steps) and g["fallbacks"] == 0 and g["failures"] == 0, g


def test_gqa_form_paths():
    """softcap and sinks take the composed softmax; a window and a bias stay in MLX's sdpa."""
    from mlx_harness import run_with_stats
    for form, path in [("softcap", ("composed", "softcap_or_sink_attention", ())),
                       ("sink", ("composed", "softcap_or_sink_attention", ())),
                       ("window", ("mlx_fused", "sdpa", ())),
                       ("bias", ("mlx_fused", "sdpa", ()))]:
        model, feeds = form_model(form, 2, 4)
        _, stats = run_with_stats(model, feeds)
        assert node_path(stats, "gqa") == path, (form, stats)


def test_gqa_form_declines():
    cases = [
        (dict(local_window_size=0), "local_window_size 0"),
        (dict(softcap=-1.0), "softcap -1"),
        (dict(k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", kv_cache_bit_width=8),
         "quantized KV cache"),
    ]
    for kw, words in cases:
        model, _ = gqa_model(s=1, past=3, **kw)
        reason = declines(model).get("gqa", "")
        assert words in reason, (kw, reason)


# --- sliding_window_cache: a window-sized cache the op evicts from ----------------------------
def resident(total, cap, window):
    """The operator's L(T): how many of an entry's most recent positions its cache rows hold."""
    if total <= cap:
        return total
    g = cap - window + 1
    return total - g * -(-(total - cap) // g)


@pytest.mark.parametrize("cap,window,dtype", [(5, 3, F), (4, 4, F), (7, 2, F), (5, 3, H16)])
@pytest.mark.parametrize("form", ["plain", "all_at_once"])
def test_gqa_sliding_window_cache_steps(cap, window, dtype, form):
    """A prefill then steps of 1-3 tokens through one session, each entry's cache evicted inside
    the op: the output and the present rows in use ([0, L(T)), the rest unspecified) against
    ORT's CPU provider, each side feeding back its own cache; also two entries (a prompt, then
    single-token steps: ORT's kernel takes no right-padded prompt with a windowed cache, nor
    steps of several tokens with a batch)."""
    for batch, steps in ((1, (4, 1, 1, 1, 2, 1, 1, 3, 1, 1)), (2, (6, 1, 1, 1, 1, 1, 1))):
        kw = dict(FORMS[form]) if form != "plain" else {}
        kw.update(local_window_size=window)
        extra = kw.pop("sink", False)
        kw.pop("bias", None), kw.pop("position_ids", None)
        model, _ = gqa_model(s=steps[0], past=cap, nq=NQ, nkv=NKV, h=HD, packed=True, dtype=dtype,
                             rotary=True, batch=batch, sliding_window_cache=1,
                             extra_inputs=[(11, ("head_sink", [NQ]))] if extra else (), **kw)
        model = symbolic(model, {"query": {1: "s"}})
        from mlx_harness import mlx_session
        mine, ref = mlx_session(model), cpu_session(model)
        r = np.random.default_rng(cap * 10 + window)
        lengths = np.full(batch, steps[0])
        pk_m = pv_m = pk_r = pv_r = np.zeros((batch, NKV, cap, HD), NP[dtype])
        done = np.zeros(batch, int)
        for n, s in enumerate(steps):
            new = lengths if n == 0 else np.full(batch, s)
            total = done + new
            feeds = {"query": r.standard_normal((batch, s, (NQ + 2 * NKV) * HD))
                     .astype(NP[dtype]),
                     "seqlens_k": (total - 1).astype(np.int32),
                     "total_len": np.array(total.max(), np.int32)}
            if extra:
                feeds["head_sink"] = np.array([0.5, -1.0, 2.0, 0.0], NP[dtype])
            got = mine.run(None, {**feeds, "past_key": pk_m, "past_value": pv_m})
            want = ref.run(None, {**feeds, "past_key": pk_r, "past_value": pv_r})
            for b in range(batch):
                rows = min(int(new[b]), s)
                np.testing.assert_allclose(got[0][b, :rows].astype(np.float32),
                                           want[0][b, :rows].astype(np.float32),
                                           **gqa_tol(dtype), err_msg=f"step {n} entry {b}")
                keep = resident(int(total[b]), cap, window)
                for i in (1, 2):
                    np.testing.assert_allclose(got[i][b, :, :keep].astype(np.float32),
                                               want[i][b, :, :keep].astype(np.float32),
                                               **gqa_tol(dtype),
                                               err_msg=f"step {n} entry {b} output {i}")
            pk_m, pv_m, pk_r, pv_r = got[1], got[2], want[1], want[2]
            done = total


def test_gqa_sliding_window_cache_declines():
    for kw, words in [(dict(sliding_window_cache=1), "needs local_window_size"),
                      (dict(sliding_window_cache=1, local_window_size=2, with_past=False),
                       "needs past_key")]:
        model, _ = gqa_model(s=2, past=4, **kw)
        reason = declines(model).get("gqa", "")
        assert words in reason, (kw, reason)


# --- q_norm_weight, k_norm_weight: Qwen3's per-head RMS norm, folded into the op ------------
def qk_norm_models(s, past, packed, dtype, batch=1, eps=1e-6):
    """(the op with inputs 14 and 15, the unfused graph exporters write: [Split], Reshape,
    SimplifiedLayerNormalization over the head, Reshape, then the op; ORT's CPU kernel has no
    q/k norm, so the unfused graph on it is the reference), feeds."""
    from mlx_harness import make_model
    from ssm_harness import MS
    r = np.random.default_rng(4)
    qn = (1 + 0.2 * r.standard_normal(HD)).astype(NP[dtype])
    kn = (1 + 0.2 * r.standard_normal(HD)).astype(NP[dtype])
    ang = r.random((64, HD // 2)) * 6.0
    inits = [("cos", np.cos(ang).astype(NP[dtype])), ("sin", np.sin(ang).astype(NP[dtype])),
             ("qn", qn), ("kn", kn), ("heads", np.array([0, 0, -1, HD], np.int64)),
             ("flat", np.array([0, 0, -1], np.int64))]
    widths = [NQ * HD, NKV * HD, NKV * HD]
    ins = [("q", dtype, [batch, s, sum(widths) if packed else widths[0]])]
    feeds = {"q": r.standard_normal((batch, s, ins[0][2][2])).astype(NP[dtype]) * 3}
    if not packed:
        for nm, w in (("k", widths[1]), ("v", widths[2])):
            ins.append((nm, dtype, [batch, s, w]))
            feeds[nm] = r.standard_normal((batch, s, w)).astype(NP[dtype]) * 3
    ins += [("past_key", dtype, [batch, NKV, past, HD]),
            ("past_value", dtype, [batch, NKV, past, HD]),
            ("seqlens_k", TP.INT32, [batch]), ("total_len", TP.INT32, [])]
    feeds["past_key"] = r.standard_normal((batch, NKV, past, HD)).astype(NP[dtype])
    feeds["past_value"] = r.standard_normal((batch, NKV, past, HD)).astype(NP[dtype])
    feeds["seqlens_k"] = np.full([batch], past + s - 1, np.int32)
    feeds["total_len"] = np.array(past + s, np.int32)
    outs = [("out", dtype, None), ("present_key", dtype, None), ("present_value", dtype, None)]
    attrs = dict(num_heads=NQ, kv_num_heads=NKV, do_rotary=1, qk_norm_epsilon=eps)
    tail = ["past_key", "past_value", "seqlens_k", "total_len", "cos", "sin"]
    qkv = ["q", "", ""] if packed else ["q", "k", "v"]
    fused = make_model([helper.make_node(
        "GroupQueryAttention", qkv + tail + ["", "", "", "", "", "qn", "kn"],
        ["out", "present_key", "present_value"], name="gqa", domain="com.microsoft", **attrs)],
        ins, outs, inits, opset=21, domains=MS)
    nodes = []
    if packed:
        inits.append(("split", np.array(widths, np.int64)))
        nodes.append(helper.make_node("Split", ["q", "split"], ["q0", "k0", "v0"], name="split",
                                      axis=2))
        src = {"q": "q0", "k": "k0", "v": "v0"}
    else:
        src = {"q": "q", "k": "k", "v": "v"}
    for nm in ("q", "k"):
        nodes += [helper.make_node("Reshape", [src[nm], "heads"], [nm + "_h"], name=nm + "_r"),
                  helper.make_node("SimplifiedLayerNormalization", [nm + "_h", nm + "n"],
                                   [nm + "_n"], name=nm + "_norm", axis=-1, epsilon=eps),
                  helper.make_node("Reshape", [nm + "_n", "flat"], [nm + "_f"], name=nm + "_r2")]
    attrs.pop("qk_norm_epsilon")
    nodes.append(helper.make_node("GroupQueryAttention", ["q_f", "k_f", src["v"]] + tail,
                                  ["out", "present_key", "present_value"], name="gqa",
                                  domain="com.microsoft", **attrs))
    unfused = make_model(nodes, ins, outs, inits, opset=21, domains=MS)
    return fused, unfused, feeds


@pytest.mark.parametrize("dtype", [F, H16])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("s,past", [(5, 0), (1, 7), (3, 12)])
def test_gqa_qk_norm_weights(dtype, packed, s, past):
    fused, unfused, feeds = qk_norm_models(s, past, packed, dtype)
    got, placed = run_on_mlx(fused, feeds)
    assert placed["gqa"] == "MLXExecutionProvider"
    want = cpu_session(unfused).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), **gqa_tol(dtype))
    # the norm matters: the op without it answers otherwise
    node = fused.graph.node[0]
    del node.input[14:]
    plain, _ = run_on_mlx(fused, feeds)
    assert np.abs(plain[0].astype(np.float32) - want[0].astype(np.float32)).max() > 0.05


def test_gqa_qk_norm_declines_one_alone():
    fused, _, _ = qk_norm_models(1, 3, False, F)
    node = fused.graph.node[0]
    node.input[15] = ""
    assert "q_norm_weight and k_norm_weight both" in declines(fused).get("gqa", "")
