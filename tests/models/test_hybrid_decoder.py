"""The tiny hybrid decoder of bench/hybrid_decoder.py (GatedDeltaNet blocks of the fused
com.microsoft operators interleaved with TensorScatter KV-cache attention) runs entirely on MLX
and matches ORT's CPU provider, for a prefill and for decode steps chained through its states."""
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mlx_harness import check_against_cpu
from ssm_harness import group_records, mlx_session_checked

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import hybrid_decoder as hd  # noqa: E402

TINY = hd.SIZES["tiny"]


@pytest.mark.parametrize("rule", ["gated_delta", "linear"])
@pytest.mark.parametrize("batch, tokens, past", [(1, 1, 0), (2, 5, 3), (1, 16, 0)])
def test_tiny_runs_on_mlx_and_matches_cpu(rule, batch, tokens, past):
    cfg = replace(TINY, update_rule=rule)
    check_against_cpu(hd.build(cfg), hd.feeds(cfg, batch, tokens, past), rtol=1e-4, atol=1e-4)


def test_tiny_circular_cache_matches_cpu():
    cfg = replace(TINY, circular_cache=True)
    check_against_cpu(hd.build(cfg), hd.feeds(cfg, 2, 3, 14), rtol=1e-4, atol=1e-4)


def test_decode_loop_chains_states():
    """Prefill 4 tokens, then decode 3 one at a time feeding every present state back; the MLX
    session and ORT's CPU provider must agree at every step."""
    from mlx_harness import cpu_session
    model = hd.build(TINY)
    mlx_s, cpu_s = mlx_session_checked(model), cpu_session(model)
    names = [o.name for o in mlx_s.get_outputs()]
    f = hd.feeds(TINY, 2, 4, 0)
    past = 0
    for step in range(4):
        got, want = mlx_s.run(None, f), cpu_s.run(None, f)
        for n, g, w in zip(names, got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"{n} step {step}")
        past += f["hidden"].shape[1]
        nxt = hd.feeds(TINY, 2, 1, past, seed=10 + step)
        for n, g in zip(names, got):
            if n.startswith("present_"):
                nxt[n.replace("present_", "past_" if "key" in n or "value" in n else "")] = g
        f = nxt


def test_realistic_config_builds():
    model = hd.build(replace(hd.SIZES["realistic"], layers=2, attn_every=2))
    ops = {n.op_type for n in model.graph.node}
    assert {"LinearAttentionGate", "CausalConvWithState", "LinearAttention", "GatedRMSNorm",
            "GatedAdd", "TensorScatter", "Softmax", "MatMul"} <= ops


def test_gated_deltanet_stack_compiles_keyed_without_fallback():
    """Without the (eager) TensorScatter layers the stack is one group compiled keyed on shape:
    every trace must succeed, whatever T (1, prefill); T = 0 runs eagerly (an empty input)."""
    from mlx_harness import cpu_session
    cfg = replace(TINY, attn_every=100, layers=3)
    model = hd.build(cfg)
    feeds = [hd.feeds(cfg, 2, t, 0, seed=t) for t in (1, 6, 1, 0)]
    outs, groups = group_records(model, feeds)
    cpu = cpu_session(model)
    for f, got in zip(feeds, outs):
        for g, w in zip(got, cpu.run(None, f)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    assert len(groups) == 1, groups
    g = groups[0]
    assert g["path"] == "keyed" and g["fallbacks"] == 0, g
    assert (g["compiled_runs"], g["eager_runs"]) == (3, 1), g
    assert (g["cache_hits"], g["cache_misses"]) == (1, 2), g
