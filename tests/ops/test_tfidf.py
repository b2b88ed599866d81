"""TfIdfVectorizer (src/ops/tfidf.c) against ORT's CPU provider: TF, IDF and TFIDF with and
without weights, batch [N, C] and 1-D [C] input, skips, unigrams with bigrams and trigrams,
lengths outside [min, max] in the pool, permuted and shared output coordinates, int32 input,
inputs too short for any window, empty rows, and randomised pools; plus the declines (string
input, IDF weights on shared coordinates, duplicate n-grams, a short ngram_indexes)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import ops_common as oc


def tf_model(shape, elem=TP.INT64, **attrs):
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], name="tf", **attrs)
    return harness.make_model([node], [("X", elem, list(shape))], [("Y", TP.FLOAT, None)],
                              opset=9)


# Unigrams [2, 3, 5, 4], bigrams [5,6] [7,8] [6,7] [2,3], trigram [2, 3, 5].
POOL = dict(pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 2, 3, 5],
            ngram_counts=[0, 4, 12], ngram_indexes=[0, 1, 2, 3, 4, 5, 6, 7, 8])
WEIGHTS = [0.5, 1.5, 2.0, 3.0, 0.25, 1.0, 4.0, 0.75, 2.5]
X2 = np.array([[1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], [2, 3, 5, 4, 2, 3, 5, 6, 7, 8, 6, 7]],
              np.int64)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("lengths", [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (3, 3)])
@pytest.mark.parametrize("skip", [0, 1, 3])
def test_tfidf_modes_lengths_skips(mode, weights, lengths, skip):
    attrs = dict(POOL, mode=mode, min_gram_length=lengths[0], max_gram_length=lengths[1],
                 max_skip_count=skip)
    if weights:
        attrs["weights"] = WEIGHTS
    harness.check_against_cpu(tf_model(X2.shape, **attrs), {"X": X2})


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_1d_int32_input(mode):
    x = X2[1].astype(np.int32)
    m = tf_model(x.shape, TP.INT32, mode=mode, min_gram_length=1, max_gram_length=2,
                 max_skip_count=2, weights=WEIGHTS, **POOL)
    got, _, _ = harness.check_against_cpu(m, {"X": x})
    assert got[0].shape == (9,) and got[0].sum() > 0


def test_tfidf_permuted_and_shared_output_coordinates():
    """ngram_indexes permuted, one coordinate shared by two n-grams (their counts add, each
    weighted by its own n-gram's weight), and a coordinate nothing maps to."""
    attrs = dict(POOL, ngram_indexes=[9, 2, 0, 2, 4, 1, 7, 3, 5])
    for mode in ["TF", "TFIDF"]:
        m = tf_model(X2.shape, mode=mode, min_gram_length=1, max_gram_length=3,
                     max_skip_count=1, weights=WEIGHTS, **attrs)
        got, _, _ = harness.check_against_cpu(m, {"X": X2})
        assert got[0].shape == (2, 10)


def test_tfidf_idf_weights_follow_pool_order():
    """IDF weights belong to pool n-grams (ORT and the spec), not to output coordinates."""
    m = tf_model([4], mode="IDF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
                 ngram_counts=[0], ngram_indexes=[2, 0, 1], pool_int64s=[5, 6, 7],
                 weights=[10.0, 20.0, 30.0])
    got, _, _ = harness.check_against_cpu(m, {"X": np.array([5, 5, 6, 9], np.int64)})
    np.testing.assert_array_equal(got[0], [20.0, 0.0, 10.0])


def test_tfidf_short_and_empty_rows():
    attrs = dict(POOL, mode="TF", min_gram_length=2, max_gram_length=3, max_skip_count=4)
    x = np.array([[5, 6], [2, 9]], np.int64)  # one bigram fits, no trigram
    harness.check_against_cpu(tf_model(x.shape, **attrs), {"X": x})
    x = np.array([[7]], np.int64)  # no window fits at all
    harness.check_against_cpu(tf_model(x.shape, **attrs), {"X": x})
    x = np.zeros((3, 0), np.int64)  # empty rows: zeros
    got, _, _ = harness.check_against_cpu(tf_model(x.shape, **attrs), {"X": x})
    assert got[0].shape == (3, 9) and not got[0].any()


def test_tfidf_dynamic_shapes_one_session():
    m = tf_model(["N", "C"], mode="TFIDF", min_gram_length=1, max_gram_length=3,
                 max_skip_count=2, weights=WEIGHTS, **POOL)
    s = harness.mlx_session(m)
    cpu = harness.cpu_session(m)
    for x in [X2, X2[:1, :5], np.tile(X2, (3, 2))]:
        np.testing.assert_allclose(s.run(None, {"X": x})[0], cpu.run(None, {"X": x})[0],
                                   rtol=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_tfidf_random_pools(seed):
    rng = np.random.default_rng(seed)
    vocab, max_len = 6, 3
    pool, counts, total = [], [], 0
    for n in range(1, max_len + 1):  # up to 8 distinct n-grams of each length
        counts.append(len(pool))
        grams = sorted({tuple(int(v) for v in rng.integers(0, vocab, n)) for _ in range(8)})
        total += len(grams)
        pool.extend(v for g in grams for v in g)
    indexes = [int(v) for v in rng.permutation(total)]
    lo = int(rng.integers(1, 3))
    attrs = dict(mode=["TF", "IDF", "TFIDF"][seed % 3], min_gram_length=lo,
                 max_gram_length=int(rng.integers(lo, 4)), max_skip_count=int(rng.integers(0, 4)),
                 pool_int64s=pool, ngram_counts=counts, ngram_indexes=indexes,
                 weights=[float(w) for w in rng.uniform(0.1, 2.0, total)])
    x = rng.integers(0, vocab, (3, 17)).astype(np.int64)
    harness.check_against_cpu(tf_model(x.shape, **attrs), {"X": x}, rtol=1e-5)


def test_tfidf_string_input_declined(tmp_path):
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], name="tf", mode="TF",
                            min_gram_length=1, max_gram_length=1, max_skip_count=0,
                            ngram_counts=[0], ngram_indexes=[0, 1], pool_strings=["a", "b"])
    m = harness.make_model([node], [("X", TP.STRING, [3])], [("Y", TP.FLOAT, None)], opset=9)
    reason = oc.check_declined(m, {"X": np.array(["a", "b", "a"], dtype=object)}, "tf",
                               "element type string, which MLX cannot hold", tmp_path)
    assert "input 0" in reason


def test_tfidf_idf_weights_on_shared_coordinate_declined(tmp_path):
    m = tf_model([3], mode="IDF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
                 ngram_counts=[0], ngram_indexes=[0, 0], pool_int64s=[5, 6],
                 weights=[10.0, 20.0])
    oc.check_declined(m, {"X": np.array([5, 6, 6], np.int64)}, "tf",
                      "IDF with weights where several n-grams share an output coordinate",
                      tmp_path)


def test_tfidf_duplicate_ngram_declined(tmp_path):
    """ORT's kernel rejects the pool at session creation; the report still names the reason."""
    m = tf_model([4], mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                 ngram_counts=[0, 2], ngram_indexes=[0, 1, 2, 3], pool_int64s=[5, 5, 5, 6, 5, 6])
    declined = oc.declines_without_cpu_kernel(m, tmp_path, "Duplicate ngram")
    assert "pool_int64s holds the same 1-gram twice" in declined["tf"]


def test_tfidf_short_ngram_indexes_declined(tmp_path):
    """Not run: ORT's CPU kernel accepts the session but aborts the process when run."""
    m = tf_model([4], mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                 ngram_counts=[0, 2], ngram_indexes=[0, 1, 2], pool_int64s=[5, 6, 5, 6, 6, 5])
    oc.check_declined(m, None, "tf", "ngram_indexes has 3 entries for 4 pool n-grams", tmp_path)


def test_tfidf_compiles_keyed():
    """TfIdfVectorizer + Relu in one fused group compile keyed on the input shape."""
    tf = helper.make_node("TfIdfVectorizer", ["X"], ["T"], name="tf", mode="TFIDF",
                          min_gram_length=1, max_gram_length=3, max_skip_count=2,
                          weights=WEIGHTS, **POOL)
    relu = helper.make_node("Relu", ["T"], ["Y"], name="relu")
    m = harness.make_model([tf, relu], [("X", TP.INT64, ["n", "c"])], [("Y", TP.FLOAT, None)],
                           opset=9)
    oc.check_compiled(m, [{"X": X2}, {"X": X2[:, :7]}], path="keyed")
