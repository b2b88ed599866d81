"""MultiHeadAttention (com.microsoft): separate 3-D q/k/v, bias, key_padding_mask,
attention_bias, past/present BNSH and unidirectional (causal) attention, against ORT's CPU
provider with proof it ran on MLX; a decode loop through one session; the declined forms with
their reasons."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import check_against_cpu, make_model, node_path, run_with_stats
from ssm_harness import MS, declines

F, H16 = TP.FLOAT, TP.FLOAT16
NP = {F: np.float32, H16: np.float16}
TOL = dict(rtol=1e-4, atol=1e-4)


def mha_model(b=2, s=3, l=None, n=4, h=8, hv=None, past=None, bias=False, mask=None,
              attn_bias=None, presents=None, dtype=F, seed=0, **attrs):
    """mask: None, "lengths" ([B]), "2d" ([B, T]) or "3d" ([B, S, T]); attn_bias: the shape's
    leading (B or 1, N or 1); presents default to past being given."""
    r = np.random.default_rng(seed)
    l = s if l is None else l
    hv = hv or h
    d, dv = n * h, n * hv
    total = (past or 0) + l
    names = ["query", "key", "value", "", "", "", "", ""]
    ins = [("query", dtype, [b, s, d]), ("key", dtype, [b, l, d]), ("value", dtype, [b, l, dv])]
    feeds = {"query": r.standard_normal((b, s, d)), "key": r.standard_normal((b, l, d)),
             "value": r.standard_normal((b, l, dv))}
    inits = []
    if bias:
        names[3] = "bias"
        inits.append(("bias", (r.standard_normal(2 * d + dv) * 0.5).astype(NP[dtype])))
    if mask == "lengths":
        names[4] = "mask"
        ins.append(("mask", TP.INT32, [b]))
        feeds["mask"] = np.array([total, max(1, total - 2)] * b, np.int32)[:b]
    elif mask in ("2d", "3d"):
        names[4] = "mask"
        shape = [b, total] if mask == "2d" else [b, s, total]
        m = (r.random(shape) > 0.3).astype(np.int32)
        m[..., 0] = 1  # every query keeps a key
        ins.append(("mask", TP.INT32, shape))
        feeds["mask"] = m
    if attn_bias:
        names[5] = "attn_bias"
        shape = list(attn_bias) + [s, total]
        ins.append(("attn_bias", dtype, shape))
        feeds["attn_bias"] = r.standard_normal(shape)
    if past is not None:
        names[6], names[7] = "past_key", "past_value"
        ins += [("past_key", dtype, [b, n, past, h]), ("past_value", dtype, [b, n, past, hv])]
        feeds["past_key"] = r.standard_normal((b, n, past, h))
        feeds["past_value"] = r.standard_normal((b, n, past, hv))
    while names[-1] == "":
        names.pop()
    presents = past is not None if presents is None else presents
    outs = ["out"] + (["present_key", "present_value"] if presents else [])
    node = helper.make_node("MultiHeadAttention", names, outs, name="mha",
                            domain="com.microsoft", num_heads=n, **attrs)
    model = make_model([node], ins, [(o, dtype, None) for o in outs], inits, opset=17,
                       domains=MS)
    feeds = {k: v if v.dtype == np.int32 else v.astype(NP[dtype]) for k, v in feeds.items()}
    return model, feeds


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("past", [None, 0, 5])
def test_mha_basic(bias, unidirectional, past):
    model, feeds = mha_model(past=past, bias=bias, unidirectional=unidirectional)
    check_against_cpu(model, feeds, **TOL)


@pytest.mark.parametrize("mask", ["lengths", "2d", "3d"])
@pytest.mark.parametrize("past", [None, 4])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_mha_key_padding_mask(mask, past, unidirectional):
    model, feeds = mha_model(s=3, past=past, mask=mask, unidirectional=unidirectional)
    check_against_cpu(model, feeds, **TOL)


@pytest.mark.parametrize("lead", [(2, 4), (1, 4), (2, 1), (1, 1)])
def test_mha_attention_bias(lead):
    model, feeds = mha_model(past=2, attn_bias=lead, mask="2d", bias=True)
    check_against_cpu(model, feeds, **TOL)


def test_mha_cross_attention_shapes_scale_and_v_head():
    """Keys of another length than the queries (cross attention), a value head size of its own,
    an explicit scale and mask_filter_value."""
    model, feeds = mha_model(s=4, l=7, h=8, hv=16, scale=0.3, mask="2d", mask_filter_value=-1e4)
    check_against_cpu(model, feeds, **TOL)


def test_mha_float16_against_float32():
    """ORT's CPU provider has no float16 MultiHeadAttention: the float32 model on the same
    rounded inputs is the reference."""
    from mlx_harness import cpu_session, run_on_mlx
    m16, f16 = mha_model(past=3, bias=True, unidirectional=1, dtype=H16)
    got, placed = run_on_mlx(m16, f16)
    assert placed["mha"] == "MLXExecutionProvider"
    m32, _ = mha_model(past=3, bias=True, unidirectional=1, dtype=F)
    m32.graph.initializer[0].CopyFrom(helper.make_tensor(
        "bias", F, [96], np.frombuffer(m16.graph.initializer[0].raw_data, np.float16)
        .astype(np.float32)))
    ref = cpu_session(m32).run(None, {k: v.astype(np.float32) for k, v in f16.items()})
    for g, w in zip(got, ref):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=5e-3, atol=5e-3)


def test_mha_decode_steps_one_session():
    """A causal prefill then decode steps, present fed back as past, step by step against ORT's
    CPU provider; the run record shows the sdpa path and one trace per new past length."""
    from mlx_harness import Recorded, cpu_session
    n, h = 4, 8
    model, _ = mha_model(b=1, s=5, past=0, bias=True, unidirectional=1)
    for i in model.graph.input:
        dims = i.type.tensor_type.shape.dim
        if i.name in ("query", "key", "value"):
            dims[1].dim_param = "s"
        elif i.name.startswith("past"):
            dims[2].dim_param = "p"
    rec, cpu = Recorded(model), cpu_session(model)
    r = np.random.default_rng(5)
    pk = pv = np.zeros((1, n, 0, h), np.float32)
    for s in (5, 1, 1, 1):
        feeds = {k: r.standard_normal((1, s, n * h)).astype(np.float32)
                 for k in ("query", "key", "value")}
        feeds.update(past_key=pk, past_value=pv)
        got, ref = rec.session.run(None, feeds), cpu.run(None, feeds)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, **TOL)
        pk, pv = got[1], got[2]
    record = rec.close()
    assert node_path(record, "mha") == ("mlx_fused", "sdpa", ("mask",))
    [group] = record["groups"]
    assert group["runs"] == 4 and group["fallbacks"] == 0, group


def test_mha_path_without_mask():
    model, feeds = mha_model(past=None)
    _, record = run_with_stats(model, feeds)
    assert node_path(record, "mha") == ("mlx_fused", "sdpa", ())


def test_mha_declines():
    model, _ = mha_model()
    node = model.graph.node[0]
    # packed QKV: key and value absent
    packed = helper.make_node("MultiHeadAttention", ["query"], ["out"], name="mha",
                              domain="com.microsoft", num_heads=4)
    m = make_model([packed], [("query", F, [2, 3, 4, 3, 8])], [("out", F, None)], opset=17,
                   domains=MS)
    assert "packed QKV" in declines(m).get("mha", "")
    # key/value in BNSH (cross-attention cache)
    bnsh = make_model([node], [("query", F, [2, 3, 32]), ("key", F, [2, 4, 6, 8]),
                               ("value", F, [2, 4, 6, 8])], [("out", F, None)], opset=17,
                      domains=MS)
    assert "BNSH" in declines(bnsh).get("mha", "")
    # a [2B] padding mask (start and end positions)
    m2, _ = mha_model(mask="lengths")
    m2.graph.input[3].type.tensor_type.shape.dim[0].dim_value = 4
    assert "[2B]" in declines(m2).get("mha", "")


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_mha_fully_padded_row_as_ort(unidirectional):
    """A batch entry whose keys are all padded: ORT adds mask_filter_value (not -inf), and adds
    the causal mask's on top, so such a row is a finite average; the EP gives the same one."""
    model, feeds = mha_model(s=3, mask="2d", unidirectional=unidirectional)
    feeds["mask"][0, :] = 0
    got, _, _ = check_against_cpu(model, feeds, **TOL)
    assert np.isfinite(got[0]).all()
