"""Whole decoders in the exporters' forms (python/onnxruntime_ep_mlx/decoders.py: Qwen2 with qkv
bias and a tied quantized embedding, Qwen3 with q/k norm, Llama, Phi with partial rotary, Gemma 2
with softcaps and sliding windows, GPT-OSS's attention with sinks): every node claimed (from the
partition report), one MLX group, a right-padded two-entry prefill and decode steps in both KV
conventions, each step against ORT's CPU provider.

Tolerance: the reference runs the same model at MatMulNBits accuracy_level 0 (ORT's CPU kernel
at the exported level 4 quantizes activations to int8, ~0.75% of max|y|; the EP always computes
as level 0 does). Both sides then multiply the same dequantized int4 weights in float32 and
differ only in summation order: ~1e-6 of the logits' scale per product, measured at most 7.5e-6
over these models (logits of standard deviation ~2). 1e-4 leaves a margin of 20 and would still
catch any wrong row, position, mask or cache entry (those move logits by 1e-2 or more). Greedy
tokens must be equal. In float16 (the CUDA flavour's activations) each operator's result is
rounded to float16 on both sides, but ORT's kernels and MLX's round at different places (ORT's
GroupQueryAttention may multiply in float16): measured at most 1e-2 (2.5 units in the last
place of logits near 4); 3e-2 leaves a margin of 3, still under the 0.4-4.6 a missing window or
softcap moves them."""
import dataclasses

import numpy as np
import pytest

from mlx_harness import Recorded, cpu_session, mlx_session
from onnxruntime_ep_mlx import decoders as D
from ssm_harness import report

ATOL = {"float32": 1e-4, "float16": 3e-2}
PROMPT_LENGTHS = [6, 4]  # entry 1 right-padded to 6
DECODE_STEPS = 5
CAPACITY = 16


def all_claimed(model, optimize=True):
    """The partition report of a session: every node claimed, in one group."""
    if optimize:
        rep = report(model)
    else:  # ORT's optimisations off: the EP sees every node as written
        import json
        import os
        import tempfile
        fd, path = tempfile.mkstemp(suffix=".json", prefix="mlx-dec-report-")
        os.close(fd)
        try:
            mlx_session(model, optimize=False, provider_options={"report_file": path})
            with open(path) as f:
                rep = json.load(f)
        finally:
            os.unlink(path)
    assert not rep["declined"], rep["declined"]
    assert rep["claimed"] == rep["nodes"] and rep["groups"] == 1, rep
    return rep


@pytest.mark.parametrize("family", sorted(D.FAMILIES))
def test_decoder_every_node_claimed(family):
    model = D.build(family)
    rep = all_claimed(model)
    # ORT drops the final Identity (and folds the tied table's Reshape of a constant)
    assert rep["nodes"] >= len(model.graph.node) - 2
    rep = all_claimed(model, optimize=False)
    assert rep["nodes"] == len(model.graph.node)


def greedy(logits, lengths):
    """Each entry's next token: the argmax at its last valid position."""
    return np.array([[logits[b, n - 1].argmax()] for b, n in enumerate(lengths)], np.int64)


@pytest.mark.parametrize("family", sorted(D.FAMILIES))
@pytest.mark.parametrize("shared", [False, True], ids=["growing_past", "shared_buffer"])
def test_decoder_prefill_and_decode_match_cpu(family, shared):
    decode_against_cpu(family, shared)


@pytest.mark.parametrize("family", sorted(D.FAMILIES))
def test_decoder_float16_shared_buffer(family):
    decode_against_cpu(family, True, dtype="float16")


@pytest.mark.parametrize("family", sorted(D.FAMILIES))
@pytest.mark.parametrize("lengths_inputs", [True, False], ids=["lengths", "mask"])
def test_decoder_shared_buffer_decode_steps_trace_once(family, lengths_inputs):
    """The shared buffer's decode steps share one compiled variant: two traces in all (the
    prefill, then one every decode step reuses: key_class_gqa), with every attention form of the
    families (windows, softcaps, q/k norms, partial rotary), whether the decoder is fed
    seqlens_k and total_sequence_length or, as the builder exports it, the growing
    attention_mask (the plan's prologue turns it into those lengths before the call)."""
    g = decode_against_cpu(family, True, lengths_inputs=lengths_inputs)
    assert g["traces"] == 2 and g["cache_hits"] == DECODE_STEPS - 1, g


@pytest.mark.parametrize("shared", [False, True], ids=["growing_past", "shared_buffer"])
def test_decoder_gemma2_window_sized_caches(shared):
    """Gemma 2's sliding layers with window-sized caches (6 rows, window 4: the first decode
    step evicts) beside full-length ones; the windowed caches' rows past those in use are
    unspecified, so only the logits and the full caches are compared there. Prompts of one
    length: ORT's kernel takes no right-padded prompt with a windowed cache."""
    decode_against_cpu("gemma2", shared, window_cache=6, prompt_lengths=[6, 6])


def test_decoder_qwen3_norm_folded_into_the_op():
    """Qwen3 with its q/k norm weights given to GroupQueryAttention (inputs 14, 15, as ORT's CUDA
    graph fusion leaves it) on MLX, against the unfused graph on ORT's CPU provider (whose kernel
    has no q/k norm): the same weights, the same answers."""
    decode_against_cpu("qwen3", True, mine_overrides=dict(qk_norm_fused=True))


def test_decoder_as_written_tied_table_computed():
    """ORT's optimisations off: Qwen2's embedding table stays the Reshape of the lm_head's int4
    weight, computed in the group (not folded into a constant)."""
    decode_against_cpu("qwen2", True, optimize=False)


def decode_against_cpu(family, shared, optimize=True, dtype="float32", lengths_inputs=False,
                       window_cache=0, prompt_lengths=PROMPT_LENGTHS, mine_overrides=None):
    """Runs the prefill and decode steps on both providers, comparing each step; returns the
    group's run record. mine_overrides: config fields only the MLX side's model takes."""
    cfg = D.config(family, dtype=dtype, lengths_inputs=lengths_inputs, window_cache=window_cache)
    atol = ATOL[dtype]
    ref_model = D.build(cfg)
    model = D.build(dataclasses.replace(cfg, **mine_overrides)) if mine_overrides else ref_model
    # CPU fallback disabled: a node left to ORT fails the session
    rec = Recorded(model, optimize=optimize)
    ref = cpu_session(D.with_accuracy_level(ref_model, 0))
    mine = D.DecoderRun(rec.session, cfg, 2, shared, CAPACITY)
    theirs = D.DecoderRun(ref, cfg, 2, shared, CAPACITY)
    prompt = np.random.default_rng(1).integers(0, cfg.vocab, (2, max(prompt_lengths)))
    got = mine.step(prompt, prompt_lengths).astype(np.float32)
    want = theirs.step(prompt, prompt_lengths).astype(np.float32)
    worst = 0.0
    for b, n in enumerate(prompt_lengths):  # padding rows carry no token
        np.testing.assert_allclose(got[b, :n], want[b, :n], rtol=0, atol=atol)
        worst = max(worst, float(np.abs(got[b, :n] - want[b, :n]).max()))
    tokens = greedy(want, prompt_lengths)
    assert (greedy(got, prompt_lengths) == tokens).all()
    for _ in range(DECODE_STEPS):
        got = mine.step(tokens).astype(np.float32)
        want = theirs.step(tokens).astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=0, atol=atol)
        worst = max(worst, float(np.abs(got - want).max()))
        tokens = greedy(want, [1, 1])
        assert (greedy(got, [1, 1]) == tokens).all()
    # the caches the EP carried equal the reference's
    for name, past in mine.past.items():
        if cfg.windowed(int(name.split(".")[1])):
            continue
        np.testing.assert_allclose(past.astype(np.float32),
                                   theirs.past[name].astype(np.float32), rtol=0, atol=atol)
    del mine
    [g] = rec.close()["groups"]
    # every step ran compiled in the one group, none failed over to the eager path
    assert g["runs"] == 1 + DECODE_STEPS and g["fallbacks"] == 0 and g["failures"] == 0, g
    print(f"{family} {dtype} {'shared' if shared else 'growing'}: max |logit diff| {worst:.2e}, "
          f"traces {g['traces']} in {g['runs']} runs")
    return g
