"""Real scikit-learn exports: small models trained here, converted by skl2onnx (ZipMap off), run
entirely on MLX (no CPU fallback; every node ORT placed is the EP's) and matched against ORT's
CPU provider: forests, gradient boosting and histogram gradient boosting trained on data with
missing values (regressors, binary and multiclass classifiers),
support vector machines (SVC, SVR, NuSVR and OneClassSVM of every kernel), logistic regression,
linear models, and pipelines with StandardScaler, Normalizer,
OneHotEncoder and imputation. ZipMap (a sequence of maps) stays with ORT, with its reason
read from the partition report."""
import numpy as np
import pytest

import mlx_harness as harness
import ops_common as oc

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Normalizer, OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR, NuSVR, OneClassSVM  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 6)).astype(np.float32)
Y2 = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.int64)
Y3 = (X[:, 0] > 0).astype(np.int64) + (X[:, 3] > 0.4)
YR = (2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 4]).astype(np.float32)
TARGET = {"": 17, "ai.onnx.ml": 3}


def convert(model, x, zipmap=False):
    options = {id(model): {"zipmap": False}} if not zipmap and hasattr(model, "classes_") else None
    if options and hasattr(model, "steps"):
        options = {id(model.steps[-1][1]): {"zipmap": False}}
    try:
        return to_onnx(model, x[:1], options=options, target_opset=TARGET)
    except NameError:  # a converter without the zipmap option (LinearSVC: no probabilities)
        return to_onnx(model, x[:1], target_opset=TARGET)


def check_all_on_mlx(onnx_model, feeds, rtol=1e-5, atol=1e-5):
    """Every node ORT kept runs on MLX (fallback off); outputs match ORT's CPU provider."""
    got, placed = harness.run_on_mlx(onnx_model, feeds)
    assert placed and set(placed.values()) == {harness.EP}, placed
    ref = harness.cpu_session(onnx_model).run(None, feeds)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return got


ESTIMATORS = {
    "random_forest_regressor": (lambda: RandomForestRegressor(20, max_depth=6, random_state=0),
                                YR),
    "gradient_boosting_regressor": (lambda: GradientBoostingRegressor(n_estimators=40,
                                                                      random_state=0), YR),
    "random_forest_binary": (lambda: RandomForestClassifier(20, max_depth=6, random_state=0),
                             Y2),
    "random_forest_multiclass": (lambda: RandomForestClassifier(20, max_depth=6,
                                                                random_state=0), Y3),
    "gradient_boosting_binary": (lambda: GradientBoostingClassifier(n_estimators=30,
                                                                    random_state=0), Y2),
    "gradient_boosting_multiclass": (lambda: GradientBoostingClassifier(n_estimators=20,
                                                                        random_state=0), Y3),
    "logistic_regression_binary": (lambda: LogisticRegression(), Y2),
    "logistic_regression_multiclass": (lambda: LogisticRegression(), Y3),
    "linear_svc": (lambda: LinearSVC(), Y3),
    "linear_svr": (lambda: LinearSVR(), YR),
    "svc_rbf_binary": (lambda: SVC(), Y2),
    "svc_rbf_multiclass": (lambda: SVC(), Y3),
    "svc_poly_multiclass": (lambda: SVC(kernel="poly", degree=3), Y3),
    "svc_linear_binary": (lambda: SVC(kernel="linear"), Y2),
    "svc_sigmoid_multiclass": (lambda: SVC(kernel="sigmoid", gamma=0.05), Y3),
    "svr_rbf": (lambda: SVR(), YR),
    "nusvr_poly": (lambda: NuSVR(kernel="poly", degree=2), YR),
    "linear_regression": (lambda: LinearRegression(), YR),
    "ridge": (lambda: Ridge(), YR),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimator_runs_on_mlx(name):
    make, y = ESTIMATORS[name]
    model = make().fit(X, y)
    onnx_model = convert(model, X)
    # ORT sums an SVM's decision over its support vectors in float64; MLX in float32 (its GPU
    # has no float64): decisions of magnitude ~5 over ~100 vectors agree to ~3e-5
    tol = 1e-4 if "sv" in name else 1e-5
    got = check_all_on_mlx(onnx_model, {"X": X[:200]}, rtol=tol, atol=tol)
    if hasattr(model, "classes_"):  # labels agree with scikit-learn itself too
        np.testing.assert_array_equal(got[0], model.predict(X[:200]))


def test_one_class_svm():
    model = OneClassSVM(gamma=0.2).fit(X)
    got = check_all_on_mlx(convert(model, X), {"X": X[:100]})
    np.testing.assert_array_equal(got[0].ravel(), model.predict(X[:100]))


@pytest.fixture
def bool_attributes_as_ints(monkeypatch):
    """skl2onnx 1.20 hands HistGradientBoosting's nodes_missing_value_tracks_true to onnx with
    Python bools among the ints, which onnx 1.22's make_attribute refuses: they become ints."""
    import skl2onnx.common._container as container

    make_node = container.make_node

    def ints_for_bools(*args, **attrs):
        for k, v in attrs.items():
            if isinstance(v, (list, tuple)) and any(isinstance(b, (bool, np.bool_)) for b in v):
                attrs[k] = [int(b) if isinstance(b, (bool, np.bool_)) else b for b in v]
        return make_node(*args, **attrs)

    monkeypatch.setattr(container, "make_node", ints_for_bools)


@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_hist_gradient_boosting_with_missing_values(kind, bool_attributes_as_ints):
    """Trained on data with NaNs: the trees route missing values by
    nodes_missing_value_tracks_true, and scoring rows with NaNs takes those branches."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    x = X.copy()
    x[RNG.random(x.shape) < 0.15] = np.nan
    y = {"regressor": YR, "binary": Y2, "multiclass": Y3}[kind]
    make = HistGradientBoostingRegressor if kind == "regressor" else HistGradientBoostingClassifier
    model = make(max_iter=30, random_state=0).fit(x, y)
    onnx_model = convert(model, x)
    tree = next(n for n in onnx_model.graph.node if n.op_type.startswith("TreeEnsemble"))
    tracks = next(a.ints for a in tree.attribute if a.name == "nodes_missing_value_tracks_true")
    assert 0 < sum(tracks) < len(tracks)  # NaNs go both ways
    got = check_all_on_mlx(onnx_model, {"X": x[:200]})
    if kind != "regressor":
        np.testing.assert_array_equal(got[0], model.predict(x[:200]))


def test_pipeline_scaler_normalizer_logistic_regression():
    model = make_pipeline(StandardScaler(), Normalizer(), LogisticRegression()).fit(X, Y3)
    got = check_all_on_mlx(convert(model, X), {"X": X[:150]})
    np.testing.assert_array_equal(got[0], model.predict(X[:150]))


def test_pipeline_imputer_scaler_forest():
    x = X.copy()
    x[RNG.random(x.shape) < 0.1] = np.nan
    model = make_pipeline(SimpleImputer(), StandardScaler(),
                          RandomForestClassifier(10, max_depth=5, random_state=0)).fit(x, Y3)
    check_all_on_mlx(convert(model, x), {"X": x[:100]})


def test_pipeline_one_hot_encoder_and_scaler_columns():
    """Integer categories one-hot encoded beside scaled numeric columns, then a linear model."""
    cats = RNG.integers(0, 4, (300, 2)).astype(np.int64)
    nums = X[:, :3]
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), [0, 1]),
                             ("num", StandardScaler(), [2, 3, 4])])
    model = make_pipeline(pre, LogisticRegression())
    data = np.hstack([cats.astype(np.float32), nums])
    model.fit(data, Y2)
    from skl2onnx.common.data_types import FloatTensorType
    onnx_model = to_onnx(model, initial_types=[("X", FloatTensorType([None, 5]))],
                         options={id(model.steps[-1][1]): {"zipmap": False}},
                         target_opset=TARGET)
    got = check_all_on_mlx(onnx_model, {"X": data[:120]})
    np.testing.assert_array_equal(got[0], model.predict(data[:120]))


def test_zipmap_stays_with_ort(tmp_path):
    model = LogisticRegression().fit(X, Y3)
    onnx_model = convert(model, X, zipmap=True)
    zipmap = [n for n in onnx_model.graph.node if n.op_type == "ZipMap"]
    assert zipmap
    reasons = oc.declined_reasons(onnx_model, tmp_path)
    assert zipmap[0].name in reasons
    s = harness.mlx_session(onnx_model, allow_cpu=True)
    placed = harness.assignment(s)
    assert placed[zipmap[0].name] == "CPUExecutionProvider"
    assert any(ep == harness.EP for ep in placed.values())
    labels = s.run(None, {"X": X[:20]})[0]
    np.testing.assert_array_equal(labels, model.predict(X[:20]))


def test_large_batch_forest():
    """10,000 rows through a 100-tree forest, one fused group."""
    model = RandomForestRegressor(100, max_depth=8, random_state=0).fit(X, YR)
    x = RNG.normal(size=(10000, 6)).astype(np.float32)
    check_all_on_mlx(convert(model, X), {"X": x}, atol=1e-4)
