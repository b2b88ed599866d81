"""Attention spelled in ONNX nodes (MatMul of queries and transposed keys, an optional scale and
mask, Softmax over the last axis, MatMul by values) runs as one host kernel on the CPU device
(src/cpu/attention.c). Each case runs against ORT's CPU provider, and the last MatMul's noted
path proves the one kernel ran; when a Transpose merging the heads reads the result, the kernel
writes that layout itself ("heads merged"). Covered: BERT's spelling with its [B, 1, 1, T] mask,
a Div for the scale, masks broadcast other ways or read through a transpose, cross attention,
broadcast batches, a single head, rows that need several blocks, a single query row, and the
look-alikes that must stay three kernels (an inner value read elsewhere, a softmax over another
axis, a different transpose after)."""

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
from mlx_harness import make_model, rand

pytestmark = pytest.mark.cpu_device
# the last MatMul's path in the run record (path, kernel, folds): src/plan/node_path.h
FUSED = ("host_kernel", "attention", ())
MERGED = ("host_kernel", "attention", ("merge_heads",))
SEPARATE = ("host_kernel", "matmul_batched", ())


def bert_attention(b, t, h, d, scale_op="Mul", mask_shape=None, merge=True, tk=None,
                   extra_outputs=(), softmax_axis=-1, merge_perm=(0, 2, 1, 3), dynamic=False):
    """q [b, t, h*d], k and v [b, tk, h*d] made computed by Relu, split into heads, attention,
    then (merge) the heads transposed back and reshaped to [b, t, h*d]. dynamic: the sequence
    lengths are named dimensions."""
    tk = tk or t
    nodes = [helper.make_node("Relu", [x], ["r" + x]) for x in "qkv"]
    nodes += [helper.make_node("Reshape", ["rq", "split_q"], ["qh"]),
              helper.make_node("Reshape", ["rk", "split_k"], ["kh"]),
              helper.make_node("Reshape", ["rv", "split_k"], ["vh"]),
              helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qt", "kt"], ["scores"], name="scores")]
    inits = [("split_q", np.array([b, -1 if dynamic else t, h, d], np.int64)),
             ("split_k", np.array([b, -1 if dynamic else tk, h, d], np.int64))]
    inputs = [("q", TP.FLOAT, [b, "T" if dynamic else t, h * d]),
              ("k", TP.FLOAT, [b, "TK" if dynamic else tk, h * d]),
              ("v", TP.FLOAT, [b, "TK" if dynamic else tk, h * d])]
    feeds = {"q": rand((b, t, h * d), seed=1), "k": rand((b, tk, h * d), seed=2),
             "v": rand((b, tk, h * d), seed=3)}
    v = "scores"
    if scale_op:
        nodes.append(helper.make_node(scale_op, [v, "c"], ["scaled"], name="scale"))
        inits.append(("c", np.array(d ** -0.5 if scale_op == "Mul" else d ** 0.5, np.float32)))
        v = "scaled"
    if mask_shape:
        m = np.where(rand(mask_shape, seed=4) > -1.0, 0, np.finfo(np.float32).min)
        inputs.append(("m", TP.FLOAT, list(mask_shape)))
        feeds["m"] = m.astype(np.float32)
        nodes.append(helper.make_node("Add", [v, "m"], ["masked"], name="mask"))
        v = "masked"
    nodes.append(helper.make_node("Softmax", [v], ["probs"], name="softmax", axis=softmax_axis))
    nodes.append(helper.make_node("MatMul", ["probs", "vt"], ["context"], name="n"))
    out = "context"
    if merge:
        nodes += [helper.make_node("Transpose", ["context"], ["ct"], perm=list(merge_perm)),
                  helper.make_node("Reshape", ["ct", "merged"], ["y"])]
        inits.append(("merged", np.array([b, -1, h * d], np.int64)))
        out = "y"
    outputs = [(out, TP.FLOAT, None)] + [(o, TP.FLOAT, None) for o in extra_outputs]
    return make_model(nodes, inputs, outputs, initializers=inits, opset=17), feeds


def check(model, feeds, note, rtol=1e-4, atol=1e-5):
    got, ref, record = harness.run_with_paths(model, feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    assert harness.node_path(record, "n") == note, harness.node_paths(record)
    return got, record


CASES = {  # id: bert_attention arguments
    "bert": dict(b=2, t=24, h=3, d=8, mask_shape=(2, 1, 1, 24)),
    "minilm-size": dict(b=1, t=128, h=12, d=32, mask_shape=(1, 1, 1, 128)),
    "div-scale": dict(b=2, t=10, h=2, d=16, scale_op="Div", mask_shape=(2, 1, 1, 10)),
    "no-scale-no-mask": dict(b=1, t=9, h=4, d=5, scale_op=None),
    "mask-full": dict(b=2, t=7, h=3, d=4, mask_shape=(2, 3, 7, 7)),
    "mask-rows": dict(b=2, t=7, h=3, d=4, mask_shape=(7, 7)),
    "mask-vector": dict(b=1, t=33, h=2, d=8, mask_shape=(33,)),
    "cross": dict(b=2, t=5, h=3, d=8, tk=19, mask_shape=(2, 1, 1, 19)),
    "blocks": dict(b=1, t=200, h=1, d=16, tk=1500, mask_shape=(1, 1, 1, 1500)),
    "one-row": dict(b=1, t=1, h=4, d=16, tk=40),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("merge", [True, False], ids=["merged", "heads-first"])
def test_attention_is_one_kernel(case, merge):
    model, feeds = bert_attention(**CASES[case], merge=merge)
    check(model, feeds, MERGED if merge else FUSED)


def test_mask_read_through_a_transpose():
    """A mask whose rows are strided (a transposed view): the kernel gathers each row."""
    model, feeds = bert_attention(b=2, t=12, h=2, d=8, mask_shape=(2, 1, 12, 12))
    nodes = list(model.graph.node)
    i = next(k for k, n in enumerate(nodes) if n.name == "mask")
    nodes.insert(i, helper.make_node("Transpose", ["m"], ["mt"], perm=[0, 1, 3, 2]))
    nodes[i + 1].input[1] = "mt"
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    check(model, feeds, MERGED)


def test_single_head_and_broadcast_batches():
    """q [M, K] against a batch of keys, v [N, D] shared by every item: broadcast operands."""
    nodes = [helper.make_node("Relu", ["q"], ["rq"]), helper.make_node("Relu", ["k"], ["rk"]),
             helper.make_node("Relu", ["v"], ["rv"]),
             helper.make_node("MatMul", ["rq", "rk"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "rv"], ["y"], name="n")]
    model = make_model(nodes, [("q", TP.FLOAT, [6, 10]), ("k", TP.FLOAT, [3, 10, 17]),
                               ("v", TP.FLOAT, [17, 5])], [("y", TP.FLOAT, None)], opset=13)
    feeds = {"q": rand((6, 10), seed=7), "k": rand((3, 10, 17), seed=8),
             "v": rand((17, 5), seed=9)}
    check(model, feeds, FUSED)
    two_d = make_model(nodes, [("q", TP.FLOAT, [6, 10]), ("k", TP.FLOAT, [10, 17]),
                               ("v", TP.FLOAT, [17, 5])], [("y", TP.FLOAT, None)], opset=13)
    check(two_d, {"q": feeds["q"], "k": feeds["k"][0], "v": feeds["v"]}, FUSED)


def test_softmax_of_an_older_opset():
    """Softmax-11 coerces to 2-D at its axis; at the last axis that is the same softmax."""
    nodes = [helper.make_node("Relu", ["q"], ["rq"]), helper.make_node("Relu", ["k"], ["rk"]),
             helper.make_node("MatMul", ["rq", "rk"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=2),
             helper.make_node("MatMul", ["p", "v"], ["y"], name="n")]
    model = make_model(nodes, [("q", TP.FLOAT, [2, 7, 4]), ("k", TP.FLOAT, [2, 4, 9]),
                               ("v", TP.FLOAT, [2, 9, 3])], [("y", TP.FLOAT, None)], opset=11)
    feeds = {"q": rand((2, 7, 4), seed=10), "k": rand((2, 4, 9), seed=11),
             "v": rand((2, 9, 3), seed=12)}
    check(model, feeds, FUSED)


LOOKALIKES = {  # id: (bert_attention arguments, the MatMul's note)
    "scores-returned": (dict(extra_outputs=["scores"]), SEPARATE),
    "probs-returned": (dict(extra_outputs=["probs"]), SEPARATE),
    "masked-returned": (dict(extra_outputs=["masked"]), SEPARATE),
    "softmax-other-axis": (dict(softmax_axis=2), SEPARATE),
    "other-transpose": (dict(merge_perm=(0, 2, 3, 1)), FUSED),
}


@pytest.mark.parametrize("case", list(LOOKALIKES))
def test_lookalikes_stay_apart(case):
    args, note = LOOKALIKES[case]
    model, feeds = bert_attention(b=2, t=12, h=3, d=8, mask_shape=(2, 1, 1, 12), **args)
    check(model, feeds, note)


def test_changing_shapes():
    """A keyed group traces again for new sequence lengths; the kernel's geometry follows them."""
    model, _ = bert_attention(b=1, t=16, h=2, d=8, dynamic=True)
    rec = harness.Recorded(model)
    s = rec.session
    ref = harness.cpu_session(model)
    for t, tk in ((16, 16), (16, 16), (40, 7), (3, 300)):
        f = {"q": rand((1, t, 16), seed=t), "k": rand((1, tk, 16), seed=tk),
             "v": rand((1, tk, 16), seed=tk + 1)}
        got, want = s.run(None, f)[0], ref.run(None, f)[0]
        assert got.shape == want.shape == (1, t, 16)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    del s
    assert harness.node_path(rec.close(), "n") == MERGED
