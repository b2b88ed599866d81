"""The numeric ai.onnx.ml operators of src/ops/ml.c against ORT's CPU provider, each proven to
run on MLX: Scaler, Normalizer (MAX, L1, L2), Binarizer, LinearRegressor and LinearClassifier
(every post_transform, the one-score binary forms), ArrayFeatureExtractor, Imputer (NaN and
value replacement, float and int64), FeatureVectorizer, OneHotEncoder and LabelEncoder (opset 2
lists and opset 4 tensors); plus the string forms that stay with ORT, read from the partition
report."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import mlx_harness as harness
import ops_common as oc

POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


def ml_model(op, inputs, outputs, ml_opset=3, **attrs):
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], name="n",
                            domain="ai.onnx.ml", **attrs)
    return harness.make_model([node], inputs, outputs, domains={"ai.onnx.ml": ml_opset})


@pytest.mark.parametrize("shape", [(6, 3), (3,)])
@pytest.mark.parametrize("elem", [np.float32, np.int64, np.int32])
@pytest.mark.parametrize("per_column", [True, False])
def test_scaler(shape, elem, per_column):
    x = harness.rand(shape, elem)
    attrs = dict(offset=[1.0, -2.0, 0.5], scale=[0.5, 2.0, -1.5]) if per_column else \
        dict(offset=[0.25], scale=[3.0])
    m = ml_model("Scaler", [("X", harness.onnx_type(elem), list(shape))],
                 [("Y", TP.FLOAT, None)], **attrs)
    harness.check_against_cpu(m, {"X": x})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
def test_normalizer(norm, shape):
    x = harness.rand(shape)
    x.reshape(-1, shape[-1])[0] = 0  # a zero row keeps its zeros
    m = ml_model("Normalizer", [("X", TP.FLOAT, list(shape))], [("Y", TP.FLOAT, None)], norm=norm)
    harness.check_against_cpu(m, {"X": x})


def test_normalizer_int_input():
    x = harness.rand((4, 3), np.int64)
    m = ml_model("Normalizer", [("X", TP.INT64, [4, 3])], [("Y", TP.FLOAT, None)], norm="L1")
    harness.check_against_cpu(m, {"X": x})


@pytest.mark.parametrize("threshold", [0.0, 0.7, -1.0])
def test_binarizer(threshold):
    x = harness.rand((4, 5))
    x[0, 0] = threshold
    m = ml_model("Binarizer", [("X", TP.FLOAT, [4, 5])], [("Y", TP.FLOAT, None)],
                 threshold=threshold)
    got, _, _ = harness.check_against_cpu(m, {"X": x})
    assert set(np.unique(got[0])) <= {0.0, 1.0}


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(post, targets):
    rng = np.random.default_rng(targets)
    x = harness.rand((7, 4), low=-1, high=1)
    attrs = dict(coefficients=[float(v) for v in rng.uniform(-0.3, 0.3, 4 * targets)],
                 intercepts=[float(v) for v in rng.uniform(0.1, 0.3, targets)],
                 targets=targets, post_transform=post)
    if post == "PROBIT":  # probit wants scores in (0, 1)
        attrs["coefficients"] = [v * 0.2 for v in attrs["coefficients"]]
        attrs["intercepts"] = [0.5] * targets
    m = ml_model("LinearRegressor", [("X", TP.FLOAT, [7, 4])], [("Y", TP.FLOAT, None)], **attrs)
    harness.check_against_cpu(m, {"X": x}, rtol=1e-5, atol=1e-5)


def classifier(n_classes, labels, post, elem=TP.FLOAT, rows=8, features=4, seed=0):
    rng = np.random.default_rng(seed)
    attrs = dict(coefficients=[float(v) for v in rng.uniform(-1, 1, features * n_classes)],
                 intercepts=[float(v) for v in rng.uniform(-0.5, 0.5, n_classes)],
                 post_transform=post)
    if post == "PROBIT":
        attrs["coefficients"] = [v * 0.1 for v in attrs["coefficients"]]
        attrs["intercepts"] = [0.5] * n_classes
    if labels is not None:
        attrs["classlabels_ints"] = labels
    return ml_model("LinearClassifier", [("X", elem, [rows, features])],
                    [("Y", TP.INT64, None), ("Z", TP.FLOAT, None)], **attrs)


@pytest.mark.parametrize("post", POSTS)
def test_linear_classifier_multiclass(post):
    x = harness.rand((8, 4), low=-1, high=1)
    got, _, _ = harness.check_against_cpu(classifier(3, [10, 20, 30], post), {"X": x},
                                          rtol=1e-5, atol=1e-5)
    assert set(got[0]) <= {10, 20, 30}


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("labels", [[4, 9], None])
def test_linear_classifier_one_score(post, labels, tmp_path):
    """One intercept: the label is picked by the score's sign; with two labels ORT widens the
    score p (sigmoid(s) for LOGISTIC, else s) to [1 - p, p], without them only PROBIT changes
    the one column."""
    x = harness.rand((8, 4), low=-1, high=1)
    m = classifier(1, labels, post)
    if labels and post == "PROBIT":  # ORT packs the probits into Z's first half
        oc.check_declined(m, None, "n", "PROBIT on one score with two labels", tmp_path)
        return
    got, _, _ = harness.check_against_cpu(m, {"X": x}, rtol=1e-5, atol=1e-5)
    assert got[1].shape == (8, 2 if labels else 1)


@pytest.mark.parametrize("elem", [np.int64, np.int32])
def test_linear_classifier_int_input(elem):
    x = harness.rand((8, 4), elem)
    harness.check_against_cpu(classifier(3, [0, 1, 2], "NONE", harness.onnx_type(elem)),
                              {"X": x}, rtol=1e-5, atol=1e-5)


def test_linear_classifier_string_labels_declined(tmp_path):
    m = ml_model("LinearClassifier", [("X", TP.FLOAT, [2, 2])],
                 [("Y", TP.STRING, None), ("Z", TP.FLOAT, None)], coefficients=[1.0, 0, 0, 1.0],
                 intercepts=[0.0, 0.0], classlabels_strings=["a", "b"])
    oc.check_declined(m, None, "n", "string", tmp_path)


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6), (6,)])
def test_array_feature_extractor(shape):
    x = harness.rand(shape)
    idx = np.array([5, 0, 2, 2], np.int64)
    m = ml_model("ArrayFeatureExtractor", [("X", TP.FLOAT, list(shape)), ("I", TP.INT64, [4])],
                 [("Y", TP.FLOAT, None)])
    harness.check_against_cpu(m, {"X": x, "I": idx})


def test_array_feature_extractor_int64_values_and_bad_index():
    x = harness.rand((3, 5), np.int64)
    m = ml_model("ArrayFeatureExtractor", [("X", TP.INT64, [3, 5]), ("I", TP.INT64, [2])],
                 [("Y", TP.INT64, None)])
    harness.check_against_cpu(m, {"X": x, "I": np.array([4, 1], np.int64)})
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match="outside"):
        s.run(None, {"X": x, "I": np.array([5, 1], np.int64)})


@pytest.mark.parametrize("replaced", [float("nan"), 0.0, -1.0])
@pytest.mark.parametrize("per_column", [True, False])
def test_imputer_float(replaced, per_column):
    x = harness.rand((6, 3))
    x[0, 1] = np.nan
    x[2, 0] = 0.0
    x[3, 2] = -1.0
    vals = [1.5, -2.5, 7.0] if per_column else [9.0]
    m = ml_model("Imputer", [("X", TP.FLOAT, [6, 3])], [("Y", TP.FLOAT, None)],
                 imputed_value_floats=vals, replaced_value_float=replaced)
    harness.check_against_cpu(m, {"X": x})


def test_imputer_int64():
    x = harness.rand((5, 3), np.int64)
    x[1, 1] = -7
    m = ml_model("Imputer", [("X", TP.INT64, [5, 3])], [("Y", TP.INT64, None)],
                 imputed_value_int64s=[100, 200, 300], replaced_value_int64=-7)
    harness.check_against_cpu(m, {"X": x})


@pytest.mark.parametrize("elem", [np.float32, np.int64])
def test_feature_vectorizer(elem):
    a, b, c = (harness.rand(s, elem, seed=i) for i, s in enumerate([(4, 2), (4, 5), (4, 3)]))
    t = harness.onnx_type(elem)
    m = ml_model("FeatureVectorizer", [("A", t, [4, 2]), ("B", t, [4, 5]), ("C", t, [4, 3])],
                 [("Y", TP.FLOAT, None)], inputdimensions=[2, 3, 4])  # B cut, C padded
    got, _, _ = harness.check_against_cpu(m, {"A": a, "B": b, "C": c})
    assert got[0].shape == (4, 9)


@pytest.mark.parametrize("zeros", [1, 0])
@pytest.mark.parametrize("elem", [np.int64, np.float32])
def test_one_hot_encoder(zeros, elem):
    x = np.array([[3, 1], [7, 3], [1, 1]]).astype(elem)
    if zeros:
        x[1, 0] = 5  # not a category: all zeros
    m = ml_model("OneHotEncoder", [("X", harness.onnx_type(elem), [3, 2])],
                 [("Y", TP.FLOAT, None)], cats_int64s=[1, 3, 7], zeros=zeros)
    got, _, _ = harness.check_against_cpu(m, {"X": x})
    assert got[0].shape == (3, 2, 3)


def test_one_hot_encoder_unknown_category_fails_with_zeros_0():
    m = ml_model("OneHotEncoder", [("X", TP.INT64, [2])], [("Y", TP.FLOAT, None)],
                 cats_int64s=[1, 3], zeros=0)
    with pytest.raises(Exception, match="cats_int64s"):
        harness.mlx_session(m).run(None, {"X": np.array([1, 2], np.int64)})


def test_one_hot_encoder_string_categories_declined(tmp_path):
    m = ml_model("OneHotEncoder", [("X", TP.INT64, [2])], [("Y", TP.FLOAT, None)],
                 cats_strings=["a", "b"])
    reason = oc.check_declined(m, None, "n", "cats_strings", tmp_path)
    assert "string" in reason


@pytest.mark.parametrize("keys,values,default", [
    ("int64s", "int64s", {"default_int64": 42}),
    ("int64s", "floats", {"default_float": 0.5}),
    ("floats", "int64s", {}),
    ("floats", "floats", {}),
])
def test_label_encoder_opset2(keys, values, default):
    kv = {"int64s": [3, -1, 8, 0], "floats": [0.5, -2.0, 3.25, 0.0]}
    attrs = {f"keys_{keys}": kv[keys], f"values_{values}": kv[values][::-1], **default}
    ke = TP.INT64 if keys == "int64s" else TP.FLOAT
    ve = TP.INT64 if values == "int64s" else TP.FLOAT
    x = np.array([[3, 8, 5], [0, -1, 3]], np.int64) if keys == "int64s" else \
        np.array([[0.5, 3.25, 1.0], [0.0, -2.0, np.nan]], np.float32)
    m = ml_model("LabelEncoder", [("X", ke, [2, 3])], [("Y", ve, None)], ml_opset=2, **attrs)
    harness.check_against_cpu(m, {"X": x})


@pytest.mark.parametrize("kt,vt", [(TP.INT64, TP.FLOAT), (TP.FLOAT, TP.INT64),
                                   (TP.FLOAT, TP.FLOAT), (TP.INT64, TP.INT64)])
def test_label_encoder_opset4_tensors(kt, vt):
    """Opset 4's keys_tensor/values_tensor/default_tensor; a NaN key matches NaN inputs."""
    np_of = {TP.INT64: np.int64, TP.FLOAT: np.float32}
    keys = np.array([1, 2, 5] if kt == TP.INT64 else [1.5, np.nan, -3.0], np_of[kt])
    vals = np.array([10, 20, 30], np_of[vt])
    attrs = dict(keys_tensor=numpy_helper.from_array(keys, "k"),
                 values_tensor=numpy_helper.from_array(vals, "v"),
                 default_tensor=numpy_helper.from_array(np.array([-5], np_of[vt]), "d"))
    x = np.array([1, 5, 7, 2], np.int64) if kt == TP.INT64 else \
        np.array([1.5, np.nan, 2.0, -3.0], np.float32)
    m = ml_model("LabelEncoder", [("X", kt, [4])], [("Y", vt, None)], ml_opset=4, **attrs)
    harness.check_against_cpu(m, {"X": x})


def test_label_encoder_strings_declined(tmp_path):
    m = ml_model("LabelEncoder", [("X", TP.INT64, [3])], [("Y", TP.STRING, None)], ml_opset=2,
                 keys_int64s=[1, 2], values_strings=["a", "b"], default_string="z")
    oc.check_declined(m, None, "n", "string", tmp_path)


@pytest.mark.cpu_device
@pytest.mark.parametrize("op", ["Scaler", "Normalizer", "LinearClassifier", "ArrayFeatureExtractor",
                                "FeatureVectorizer", "OneHotEncoder", "LabelEncoder"])
def test_float64_input_on_cpu_device(op):
    """float64 X (the CPU device): read as ORT's kernels read it, cast to float32 where they do."""
    x = np.round(harness.rand((5, 3), np.float64) * 2) / 2
    feeds = {"X": x}
    d = TP.DOUBLE
    if op == "Scaler":
        m = ml_model(op, [("X", d, [5, 3])], [("Y", TP.FLOAT, None)], offset=[1.0], scale=[2.0])
    elif op == "Normalizer":
        m = ml_model(op, [("X", d, [5, 3])], [("Y", TP.FLOAT, None)], norm="L2")
    elif op == "LinearClassifier":
        m = classifier(3, [0, 1, 2], "SOFTMAX", d, rows=5, features=3)
    elif op == "ArrayFeatureExtractor":
        m = ml_model(op, [("X", d, [5, 3]), ("I", TP.INT64, [2])], [("Y", d, None)])
        feeds["I"] = np.array([2, 0], np.int64)
    elif op == "FeatureVectorizer":
        m = ml_model(op, [("X", d, [5, 3])], [("Y", TP.FLOAT, None)], inputdimensions=[4])
    elif op == "OneHotEncoder":
        m = ml_model(op, [("X", d, [5, 3])], [("Y", TP.FLOAT, None)], cats_int64s=[0, 1, -1])
    else:
        t = {k: numpy_helper.from_array(np.array(v), k) for k, v in
             [("keys_tensor", [0.5, 1.0, -2.0]), ("values_tensor", [2.0, 3.0, 4.0]),
              ("default_tensor", [-1.0])]}
        m = ml_model(op, [("X", d, [5, 3])], [("Y", d, None)], ml_opset=4, **t)
    harness.check_against_cpu(m, feeds)


def test_ml_chain_one_group():
    """Imputer -> Scaler -> Normalizer -> LinearClassifier: one fused group on MLX."""
    nodes = [
        helper.make_node("Imputer", ["X"], ["A"], name="imp", domain="ai.onnx.ml",
                         imputed_value_floats=[0.0, 1.0, 2.0]),
        helper.make_node("Scaler", ["A"], ["B"], name="sc", domain="ai.onnx.ml",
                         offset=[0.1, 0.2, 0.3], scale=[2.0, 1.0, 0.5]),
        helper.make_node("Normalizer", ["B"], ["C"], name="nm", domain="ai.onnx.ml", norm="L2"),
        helper.make_node("LinearClassifier", ["C"], ["Y", "Z"], name="lc", domain="ai.onnx.ml",
                         coefficients=[1.0, -1.0, 0.5, 0.2, 0.3, -0.7], intercepts=[0.1, -0.1],
                         classlabels_ints=[0, 1], post_transform="LOGISTIC"),
    ]
    m = harness.make_model(nodes, [("X", TP.FLOAT, ["n", 3])],
                           [("Y", TP.INT64, None), ("Z", TP.FLOAT, None)],
                           domains={"ai.onnx.ml": 3})
    x = harness.rand((9, 3))
    x[1, 1] = 0.0
    got, ref, record = harness.run_with_paths(m, {"X": x})
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
    assert len(record["groups"]) == 1
