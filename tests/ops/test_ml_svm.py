"""SVMRegressor and SVMClassifier (src/ops/ml_svm.c) against ORT's CPU provider, proven to run
on MLX: every kernel (LINEAR, POLY of degrees 2, 3 and 4, RBF, SIGMOID) with support vectors,
linear mode, one_class, two and several classes with uneven vectors per class, post-transforms,
integer input; plus the declines (prob_a/prob_b, string labels, PROBIT with two classes)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import ops_common as oc

KERNELS = [("LINEAR", [0.0, 0.0, 0.0]), ("POLY", [0.3, 0.5, 2.0]), ("POLY", [0.2, 1.0, 3.0]),
           ("POLY", [0.2, 0.1, 4.0]), ("RBF", [0.4, 0.0, 0.0]), ("SIGMOID", [0.3, 0.2, 0.0])]
F = 4


def floats(rng, n, lo=-1.0, hi=1.0):
    return [float(v) for v in rng.uniform(lo, hi, n)]


def svm_regressor(kernel, params, vectors=5, one_class=0, seed=0):
    rng = np.random.default_rng(seed)
    attrs = dict(kernel_type=kernel, kernel_params=params, n_supports=vectors,
                 coefficients=floats(rng, max(vectors, 1) if vectors else F), rho=[0.3],
                 one_class=one_class)
    if vectors:
        attrs["support_vectors"] = floats(rng, vectors * F)
    node = helper.make_node("SVMRegressor", ["X"], ["Y"], name="svm", domain="ai.onnx.ml",
                            **attrs)
    return harness.make_model([node], [("X", TP.FLOAT, ["n", F])], [("Y", TP.FLOAT, None)],
                              domains={"ai.onnx.ml": 1})


@pytest.mark.parametrize("kernel,params", KERNELS)
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor_kernels(kernel, params, one_class):
    x = harness.rand((12, F), low=-1, high=1)
    harness.check_against_cpu(svm_regressor(kernel, params, one_class=one_class), {"X": x},
                              atol=1e-5)


def test_svm_regressor_linear_mode_and_one_row():
    m = svm_regressor("LINEAR", [0.0, 0.0, 0.0], vectors=0)
    harness.check_against_cpu(m, {"X": harness.rand((6, F))}, atol=1e-5)
    harness.check_against_cpu(m, {"X": harness.rand((1, F))}, atol=1e-5)


def svm_classifier(kernel, params, per_class, labels, post="NONE", elem=TP.FLOAT, seed=0,
                   linear=False, **extra):
    rng = np.random.default_rng(seed)
    c, v = len(labels), sum(per_class)
    if linear:
        attrs = dict(coefficients=floats(rng, c * F), rho=[0.1], kernel_params=[0.0, 0.0, 0.0])
    else:
        attrs = dict(kernel_type=kernel, kernel_params=params, vectors_per_class=per_class,
                     support_vectors=floats(rng, v * F), coefficients=floats(rng, (c - 1) * v),
                     rho=floats(rng, c * (c - 1) // 2, -0.3, 0.3))
    node = helper.make_node("SVMClassifier", ["X"], ["Y", "Z"], name="svm", domain="ai.onnx.ml",
                            classlabels_ints=labels, post_transform=post, **attrs, **extra)
    return harness.make_model([node], [("X", elem, ["n", F])],
                              [("Y", TP.INT64, None), ("Z", TP.FLOAT, None)],
                              domains={"ai.onnx.ml": 1})


@pytest.mark.parametrize("kernel,params", KERNELS)
@pytest.mark.parametrize("classes", [2, 4])
def test_svm_classifier_kernels(kernel, params, classes):
    per_class = [3, 1, 4, 2][:classes]
    labels = [7, 3, 9, 1][:classes]
    x = harness.rand((20, F), low=-1, high=1)
    got, _, _ = harness.check_against_cpu(svm_classifier(kernel, params, per_class, labels),
                                          {"X": x}, atol=1e-5)
    assert set(got[0]) <= set(labels)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("classes", [2, 3])
def test_svm_classifier_post_transforms(post, classes):
    m = svm_classifier("RBF", [0.5, 0.0, 0.0], [2, 3, 2][:classes], [0, 1, 2][:classes], post)
    harness.check_against_cpu(m, {"X": harness.rand((10, F), low=-1, high=1)}, atol=1e-5)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("classes", [2, 3])
def test_svm_classifier_linear_mode(post, classes):
    m = svm_classifier(None, None, [], [4, 5, 6][:classes], post, linear=True, seed=classes)
    harness.check_against_cpu(m, {"X": harness.rand((16, F), low=-1, high=1)}, atol=1e-5)


@pytest.mark.parametrize("elem", [np.int64, np.int32])
def test_svm_classifier_integer_input(elem):
    m = svm_classifier("POLY", [0.1, 0.5, 2.0], [2, 2, 1], [0, 1, 2], elem=harness.onnx_type(elem))
    harness.check_against_cpu(m, {"X": harness.rand((8, F), elem)}, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("extra,reason", [
    (dict(prob_a=[1.0, 1.0, 1.0], prob_b=[0.0, 0.0, 0.0]), "prob_a/prob_b"),
])
def test_svm_classifier_probabilities_declined(extra, reason, tmp_path):
    m = svm_classifier("RBF", [0.5, 0.0, 0.0], [2, 2, 2], [0, 1, 2], **extra)
    oc.check_declined(m, {"X": harness.rand((5, F))}, "svm", reason, tmp_path)


def test_svm_classifier_two_class_probit_declined(tmp_path):
    m = svm_classifier("RBF", [0.5, 0.0, 0.0], [2, 2], [0, 1], "PROBIT")
    oc.check_declined(m, None, "svm", "PROBIT with two classes", tmp_path)


def test_svm_classifier_string_labels_declined(tmp_path):
    rng = np.random.default_rng(0)
    node = helper.make_node("SVMClassifier", ["X"], ["Y", "Z"], name="svm", domain="ai.onnx.ml",
                            classlabels_strings=["a", "b"], kernel_type="RBF",
                            kernel_params=[0.5, 0.0, 0.0], vectors_per_class=[1, 1],
                            support_vectors=floats(rng, 2 * F), coefficients=floats(rng, 2),
                            rho=[0.0])
    m = harness.make_model([node], [("X", TP.FLOAT, ["n", F])],
                           [("Y", TP.STRING, None), ("Z", TP.FLOAT, None)],
                           domains={"ai.onnx.ml": 1})
    oc.check_declined(m, None, "svm", "string", tmp_path)
