"""A keyed group's prologue (src/plan/prologue.c): index and length arithmetic on inputs that only
it reads (a mask's ReduceSum, Shape, Gather, Cast, Sub) runs before the compiled call, and the
compiled function takes its results instead, so those inputs' dims key no variant. Decoders in
onnxruntime-genai's builder form (python/onnxruntime_ep_mlx/decoders.py) feed attention_mask, one
column wider every decode step: with the shared-buffer cache every decode step reuses one
variant. A width that shapes a traced value keeps keying; one read only as a value flows in as
data. Counts come from the run record (the path trial is off in tests: conftest.py); every
output is compared with ORT's CPU provider, sessions run without CPU fallback."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import Recorded, cpu_session, make_model
from onnxruntime_ep_mlx import decoders as D

PROMPT_LENGTHS = [6, 4]  # entry 1 right-padded
DECODE_STEPS = 5
CAPACITY = 16
# the decoders' reference runs at MatMulNBits accuracy_level 0 (tests/ops/test_llm_decoders.py)
ATOL = 1e-4


def decode(family, shared, lengths_inputs=False, **overrides):
    """A prefill and DECODE_STEPS greedy decode steps on the MLX EP and ORT's CPU provider,
    compared step by step; returns the group's run record."""
    cfg = D.config(family, lengths_inputs=lengths_inputs, **overrides)
    model = D.build(cfg)
    rec = Recorded(model)
    mine = D.DecoderRun(rec.session, cfg, 2, shared, CAPACITY)
    theirs = D.DecoderRun(cpu_session(D.with_accuracy_level(model, 0)), cfg, 2, shared, CAPACITY)
    prompt = np.random.default_rng(1).integers(0, cfg.vocab, (2, max(PROMPT_LENGTHS)))
    got, want = mine.step(prompt, PROMPT_LENGTHS), theirs.step(prompt, PROMPT_LENGTHS)
    for b, n in enumerate(PROMPT_LENGTHS):
        np.testing.assert_allclose(got[b, :n], want[b, :n], rtol=0, atol=ATOL)
    tokens = np.array([[want[b, n - 1].argmax()] for b, n in enumerate(PROMPT_LENGTHS)])
    for _ in range(DECODE_STEPS):
        got, want = mine.step(tokens), theirs.step(tokens)
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
        tokens = want[:, -1:].argmax(-1)
    for name, past in mine.past.items():
        np.testing.assert_allclose(past, theirs.past[name], rtol=0, atol=ATOL)
    del mine
    [g] = rec.close()["groups"]
    assert g["runs"] == 1 + DECODE_STEPS and g["fallbacks"] == 0 and g["failures"] == 0, g
    return g


@pytest.mark.parametrize("family", ["qwen2", "llama", "gemma2"])
def test_mask_form_shared_buffer_decode_reuses_one_variant(family):
    """The mask's dims key nothing: the prefill traces, the first decode step traces, and every
    later step (the mask one column wider each time) reuses that variant, as with seqlens_k and
    total_sequence_length fed directly (ReduceSum, Sub, Cast and Shape, Gather, Cast run before
    the call; total_sequence_length keys by its class, key_class_gqa)."""
    g = decode(family, shared=True)
    assert g["unkeyed_inputs"] == ["attention_mask"] and g["prologue_nodes"] == 6, g
    assert g["traces"] == 2 and g["cache_hits"] == DECODE_STEPS - 1, g
    assert g["compiled_runs"] == 1 + DECODE_STEPS and g["eager_runs"] == 0, g


def test_decoder_of_many_layers_keeps_one_decode_variant():
    """33 layers: 66 cache inputs besides input_ids and the mask, more than 64 keying the
    compiled function, which still compiles, and its decode steps share one variant."""
    g = decode("llama", shared=True, layers=33)
    assert g["unkeyed_inputs"] == ["attention_mask"], g
    assert g["traces"] == 2 and g["cache_hits"] == DECODE_STEPS - 1, g


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_mask_form_growing_past_traces_as_the_lengths_form(family):
    """With a growing past each decode step's past is one row longer, which shapes the present
    cache: those steps trace (the prefill's empty past runs eagerly). The mask adds no trace of
    its own: as many as when seqlens_k and total_sequence_length are fed."""
    g = decode(family, shared=False)
    lengths = decode(family, shared=False, lengths_inputs=True)
    assert g["unkeyed_inputs"] == ["attention_mask"], g
    assert g["traces"] == lengths["traces"] == DECODE_STEPS, (g, lengths)


def run_widths(model, feeds_of, widths):
    """Runs `model` once per mask width on the MLX EP and ORT's CPU provider; returns the run
    record's group."""
    rec = Recorded(model)
    ref = cpu_session(model)
    for t in widths:
        feeds = feeds_of(t)
        for got, want in zip(rec.session.run(None, feeds), ref.run(None, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    [g] = rec.close()["groups"]
    assert g["path"] == "keyed" and g["fallbacks"] == 0 and g["failures"] == 0, g
    return g


def mask_feeds(t, b=2, d=3):
    x = np.arange(b * d, dtype=np.float32).reshape(b, d)
    mask = (np.arange(t)[None, :] < np.array([t, t - 1])[:, None]).astype(np.int64)
    return {"x": x, "mask": mask}


AXES1 = ("axes1", np.array([1], np.int64))


def test_width_that_shapes_a_traced_value_keeps_keying():
    """Expand reads Shape(mask) on the host as the variant's fixed output shape: the mask's
    width shapes a traced value, so the mask stays keyed (no prologue), each width traces its
    own variant, and a width met again reuses its own."""
    nodes = [helper.make_node("Shape", ["mask"], ["s"], name="shape"),
             helper.make_node("Expand", ["x1", "s"], ["e"], name="expand"),
             helper.make_node("ReduceSum", ["mask", "axes1"], ["n"], keepdims=1, name="sum"),
             helper.make_node("Cast", ["n"], ["nf"], to=TP.FLOAT, name="cast"),
             helper.make_node("Mul", ["e", "nf"], ["y"], name="mul")]
    model = make_model(nodes, [("x1", TP.FLOAT, ["B", 1]), ("mask", TP.INT64, ["B", "T"])],
                       [("y", TP.FLOAT, None)], [AXES1])

    def feeds(t):
        f = mask_feeds(t)
        return {"x1": f["x"][:, :1].copy(), "mask": f["mask"]}
    g = run_widths(model, feeds, [3, 4, 5, 4])
    assert g["unkeyed_inputs"] == [] and g["prologue_nodes"] == 0, g
    assert (g["traces"], g["cache_hits"]) == (3, 1), g


def test_width_read_as_a_value_flows_in_as_data():
    """Sum(Range(0, width)) comes from the mask's shape alone, but only a Cast (shapeless-safe)
    reads it after the prologue: it enters the compiled function as a traced scalar, so one
    variant serves every width and its value is each call's own."""
    nodes = [helper.make_node("Shape", ["mask"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "one"], ["t"], axis=0, name="width"),
             helper.make_node("Range", ["zero", "t", "one"], ["r"], name="range"),
             helper.make_node("ReduceSum", ["r", "axes0"], ["n"], keepdims=0, name="sum"),
             helper.make_node("Cast", ["n"], ["nf"], to=TP.FLOAT, name="cast"),
             helper.make_node("Add", ["x", "nf"], ["y"], name="add")]
    model = make_model(nodes, [("x", TP.FLOAT, ["B", 3]), ("mask", TP.INT64, ["B", "T"])],
                       [("y", TP.FLOAT, None)],
                       [("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64)),
                        ("axes0", np.array([0], np.int64))])
    g = run_widths(model, mask_feeds, [3, 4, 5, 9])
    assert g["unkeyed_inputs"] == ["mask"] and g["prologue_nodes"] == 4, g
    assert (g["traces"], g["cache_hits"]) == (1, 3), g


def test_width_reaching_a_fixed_shape_through_float_arithmetic_keeps_keying():
    """The width through Cast to float, Mul, Cast back (shapeless-safe nodes, all fixed per
    variant while the mask keys) into Reshape's target, which Reshape reads on the host: the
    mask stays keyed, so the target stays fixed for each variant and nothing falls back."""
    nodes = [helper.make_node("Shape", ["mask"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "one"], ["t"], axis=0, name="width"),
             helper.make_node("Cast", ["t"], ["tf"], to=TP.FLOAT, name="to_float"),
             helper.make_node("Mul", ["tf", "two"], ["t2"], name="double"),
             helper.make_node("Cast", ["t2"], ["ti"], to=TP.INT64, name="to_int"),
             helper.make_node("Unsqueeze", ["ti", "axes0"], ["tu"], name="unsq"),
             helper.make_node("Concat", ["minus1", "tu"], ["target"], axis=0, name="cat"),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    model = make_model(nodes, [("x", TP.FLOAT, ["B", "T2"]), ("mask", TP.INT64, ["B", "T"])],
                       [("y", TP.FLOAT, None)],
                       [("one", np.array(1, np.int64)), ("two", np.array(2.0, np.float32)),
                        ("axes0", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64))])

    def feeds(t):
        m = mask_feeds(t)["mask"]
        return {"x": np.arange(4 * t, dtype=np.float32).reshape(2, 2 * t) - 3, "mask": m}
    g = run_widths(model, feeds, [3, 4, 3])
    assert g["unkeyed_inputs"] == [] and g["host_reads"] == 0, g
    assert (g["traces"], g["cache_hits"]) == (2, 1), g


def gathered_lengths_model():
    """Per entry its mask's sum, looked up in a table (a Gather the prologue runs, with its
    live index check), added to x."""
    nodes = [helper.make_node("ReduceSum", ["mask", "axes1"], ["n"], keepdims=0, name="sum"),
             helper.make_node("Gather", ["table", "n"], ["v"], axis=0, name="lookup"),
             helper.make_node("Cast", ["v"], ["vf"], to=TP.FLOAT, name="cast"),
             helper.make_node("Unsqueeze", ["vf", "axes1"], ["vu"], name="unsq"),
             helper.make_node("Add", ["x", "vu"], ["a"], name="add"),
             helper.make_node("Reshape", ["a", "flat"], ["y"], name="reshape")]
    return make_model(nodes, [("x", TP.FLOAT, ["B", 3]), ("mask", TP.INT64, ["B", "T"])],
                      [("y", TP.FLOAT, None)],
                      [AXES1, ("table", np.arange(8, dtype=np.int64) * 10),
                       ("flat", np.array([-1], np.int64))])


def test_prologue_values_of_data_key_by_their_dims():
    """The lengths [B] a mask sums to key by their dims, which hold as the mask widens."""
    g = run_widths(gathered_lengths_model(), mask_feeds, [3, 4, 5, 6])
    assert g["unkeyed_inputs"] == ["mask"] and g["prologue_nodes"] == 2, g
    assert (g["traces"], g["cache_hits"]) == (1, 3), g


def test_prologue_check_fails_the_run_naming_the_node():
    """A live check of a prologue node (an index out of the table) rides along with the
    outputs and fails the Run naming the node; the session stays usable."""
    rec = Recorded(gathered_lengths_model())
    try:
        rec.session.run(None, mask_feeds(4))  # traces the variant
        with pytest.raises(Exception, match=r"node 'lookup' \(Gather\)"):
            rec.session.run(None, mask_feeds(9))  # sums 9 and 8: past the table's 8 rows
        got = rec.session.run(None, mask_feeds(5))[0]
        np.testing.assert_allclose(got, cpu_session(gathered_lengths_model()).run(
            None, mask_feeds(5))[0])
    finally:
        g = rec.close()["groups"][0]
    assert g["failures"] == 1 and g["fallbacks"] == 0, g
