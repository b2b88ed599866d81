"""The default model: all-MiniLM-L6-v2 built from its real weights runs entirely on MLX and
matches ORT's CPU provider and an independent NumPy forward pass."""
import numpy as np
import pytest

from mlx_harness import EP, assignment, cpu_session, mlx_session
from onnxruntime_ep_mlx import minilm


@pytest.fixture(scope="module")
def model_path():
    return str(minilm.ensure_model())


@pytest.fixture(scope="module")
def feeds():
    ids, mask = minilm.tokenize(minilm.SENTENCES)
    return {"input_ids": ids, "attention_mask": mask}


def test_minilm_runs_fully_on_mlx_and_matches_cpu(model_path, feeds):
    s = mlx_session(model_path)  # CPU fallback disabled: creation fails if a node is left
    placed = assignment(s)
    assert placed and all(p == EP for p in placed.values()), placed
    got = s.run(None, feeds)
    ref = cpu_session(model_path).run(None, feeds)
    diff = max(float(np.max(np.abs(g - r))) for g, r in zip(got, ref))
    print(f"MiniLM max abs diff MLX vs CPU: {diff:.3g}")
    assert diff < 1e-4
    np.testing.assert_allclose(got[0], minilm.reference_embeddings(minilm.SENTENCES), atol=1e-4)


def test_minilm_similarities_are_meaningful(model_path, feeds):
    emb = mlx_session(model_path).run(None, feeds)[0]
    sims = emb @ emb.T
    assert sims[0, 1] > 0.5 and sims[2, 3] > 0.5
    assert sims[0, 2] < 0.2 and sims[1, 3] < 0.2


def test_minilm_dynamic_batch_and_sequence(model_path):
    s = mlx_session(model_path)
    for sentences in (minilm.SENTENCES[:1], minilm.SENTENCES):
        ids, mask = minilm.tokenize(sentences, pad_to=32)
        got = s.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        np.testing.assert_allclose(got, minilm.reference_embeddings(sentences), atol=1e-4)
