"""TreeEnsembleRegressor and TreeEnsembleClassifier (src/ops/ml_tree.c) against ORT's CPU
provider, proven to run on MLX: random forests of every branch mode with NaN inputs and both
missing-value directions, every aggregate function, several targets, base values, every
post_transform, the float _as_tensor forms (opset 3), integer input to the classifier, the
multiclass and the two-class forms ORT distinguishes (one class's weights, all-positive or mixed
weights, 0 or 1 base values, both classes' weights); TreeEnsemble (ai.onnx.ml 5) with
BRANCH_MEMBER sets; float64 X on the CPU device (double _as_tensor attributes, a float64 Y
from TreeEnsemble 5); a forest over a constant X; plus the declines (string labels, double
_as_tensor attributes with float X, rank-1 X, the two-class forms whose ORT output is no
per-row rule, a broken tree)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import mlx_harness as harness
import ops_common as oc

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_forest(rng, trees=5, depth=4, features=4, modes=("BRANCH_LEQ",), missing=False,
                  grid=False):
    """Node attributes of `trees` random trees; leaves listed as (tree, node)."""
    a = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true"]}
    leaves = []
    for t in range(trees):
        count = [0]

        def grow(d):
            me = count[0]
            count[0] += 1
            row = len(a["nodes_treeids"])
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(me)
            leaf = d == depth or (d > 1 and rng.random() < 0.25)
            a["nodes_featureids"].append(0 if leaf else int(rng.integers(features)))
            a["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            value = float(rng.integers(-2, 3)) / 2 if grid else float(rng.uniform(-1.5, 1.5))
            a["nodes_values"].append(0.0 if leaf else value)
            a["nodes_missing_value_tracks_true"].append(int(missing and rng.random() < 0.5))
            a["nodes_truenodeids"].append(0)
            a["nodes_falsenodeids"].append(0)
            if leaf:
                leaves.append((t, me))
            else:
                a["nodes_truenodeids"][row] = grow(d + 1)
                a["nodes_falsenodeids"][row] = grow(d + 1)
            return me

        grow(0)
    if not missing:
        del a["nodes_missing_value_tracks_true"]
    return a, leaves


def inputs(rng, rows=16, features=4, grid=False, nans=False):
    x = (rng.integers(-2, 3, (rows, features)) / 2 if grid else
         rng.uniform(-2, 2, (rows, features))).astype(np.float32)
    if nans:
        x[rng.random(x.shape) < 0.2] = np.nan
    return x


def regressor(nodes, leaves, rng, targets=1, agg="SUM", post="NONE", base=None, opset=1,
              as_tensor=None, features=4):
    ws = dict(target_treeids=[], target_nodeids=[], target_ids=[], target_weights=[])
    for t, n in leaves:
        for k in range(targets):
            if targets > 1 and rng.random() < 0.2:
                continue  # a leaf without a weight for this target
            ws["target_treeids"].append(t)
            ws["target_nodeids"].append(n)
            ws["target_ids"].append(k)
            ws["target_weights"].append(float(rng.uniform(-1, 1)))
    attrs = dict(nodes, **ws, n_targets=targets, aggregate_function=agg, post_transform=post)
    if base is not None:
        attrs["base_values"] = base
    if as_tensor:  # opset 3: thresholds, weights and base values as tensors
        for name in ["nodes_values", "target_weights", "base_values"]:
            if name in attrs:
                attrs[name + "_as_tensor"] = numpy_helper.from_array(
                    np.array(attrs.pop(name), as_tensor), name)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name="tree",
                            domain="ai.onnx.ml", **attrs)
    return harness.make_model([node], [("X", TP.FLOAT, ["n", features])], [("Y", TP.FLOAT, None)],
                              domains={"ai.onnx.ml": opset})


@pytest.mark.parametrize("modes", [("BRANCH_LEQ",), tuple(MODES)])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_regressor_modes_and_missing_values(modes, missing, seed):
    rng = np.random.default_rng(seed)
    grid = len(modes) > 1  # thresholds and inputs on one grid, so EQ/NEQ and ties happen
    nodes, leaves = random_forest(rng, modes=modes, missing=missing, grid=grid)
    x = inputs(rng, grid=grid, nans=True)
    harness.check_against_cpu(regressor(nodes, leaves, rng), {"X": x}, atol=1e-5)


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("base", [False, True])
def test_regressor_aggregates_targets_base_values(agg, targets, base):
    rng = np.random.default_rng(targets)
    nodes, leaves = random_forest(rng, trees=7, modes=tuple(MODES), missing=True, grid=True)
    b = [float(v) for v in rng.uniform(-1, 1, targets)] if base else None
    m = regressor(nodes, leaves, rng, targets=targets, agg=agg, base=b)
    harness.check_against_cpu(m, {"X": inputs(rng, grid=True, nans=True)}, atol=1e-5)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("targets", [1, 3])
def test_regressor_post_transforms(post, targets):
    rng = np.random.default_rng(7)
    nodes, leaves = random_forest(rng, trees=3)
    m = regressor(nodes, leaves, rng, targets=targets, post=post, agg="AVERAGE",
                  base=[0.5] * targets if post == "PROBIT" else None)
    if post == "PROBIT":  # keep the scores inside (0, 1)
        for at in m.graph.node[0].attribute:
            if at.name == "target_weights":
                at.floats[:] = [w * 0.3 for w in at.floats]
    # ORT's closed-form erfinv cancels near p = 0.5: an ulp of its log moves the result ~1e-5
    harness.check_against_cpu(m, {"X": inputs(rng)}, atol=5e-5 if post == "PROBIT" else 1e-5)


def test_regressor_as_tensor_forms():
    """Opset 3's _as_tensor attributes (float: ORT runs double ones only for double X)."""
    rng = np.random.default_rng(3)
    nodes, leaves = random_forest(rng, trees=6, modes=tuple(MODES))
    m = regressor(nodes, leaves, rng, targets=2, opset=3, as_tensor=np.float32, base=[0.25, -0.5])
    harness.check_against_cpu(m, {"X": inputs(rng, rows=64)}, atol=1e-5)


def test_double_as_tensor_declined(tmp_path):
    rng = np.random.default_rng(3)
    nodes, leaves = random_forest(rng, trees=2)
    m = regressor(nodes, leaves, rng, opset=3, as_tensor=np.float64)
    assert "double _as_tensor" in oc.declined_reasons(m, tmp_path)["tree"]


def test_regressor_one_row():
    rng = np.random.default_rng(11)
    nodes, leaves = random_forest(rng, trees=4, modes=tuple(MODES), grid=True)
    m = regressor(nodes, leaves, rng)
    harness.check_against_cpu(m, {"X": inputs(rng, rows=1, grid=True)}, atol=1e-5)


def test_regressor_1d_input_declined(tmp_path):
    rng = np.random.default_rng(11)
    nodes, leaves = random_forest(rng, trees=2, features=1)
    m = regressor(nodes, leaves, rng, features=1)
    m.graph.input[0].type.tensor_type.shape.dim.pop(1)
    reason = oc.check_declined(m, {"X": inputs(rng, rows=5, features=1)[:, 0].copy()}, "tree",
                               "rank 1", tmp_path)
    assert "one row of one feature" in reason


@pytest.mark.parametrize("elem", [np.int64, np.int32])
def test_classifier_integer_input(elem):
    rng = np.random.default_rng(11)
    nodes, leaves = random_forest(rng, trees=4, modes=tuple(MODES), grid=True)
    m = classifier(nodes, leaves, rng, [0, 1, 2], [0, 1, 2])
    m.graph.input[0].type.tensor_type.elem_type = harness.onnx_type(elem)
    x = rng.integers(-2, 3, (9, 4)).astype(elem)
    harness.check_against_cpu(m, {"X": x}, atol=1e-5)


def classifier(nodes, leaves, rng, labels, class_ids, post="NONE", base=None, positive=False,
               opset=1, as_tensor=None):
    ws = dict(class_treeids=[], class_nodeids=[], class_ids=[], class_weights=[])
    for t, n in leaves:
        for k in class_ids:
            ws["class_treeids"].append(t)
            ws["class_nodeids"].append(n)
            ws["class_ids"].append(k)
            ws["class_weights"].append(float(rng.uniform(0 if positive else -1, 1)))
    attrs = dict(nodes, **ws, classlabels_int64s=labels, post_transform=post)
    if base is not None:
        attrs["base_values"] = base
    if as_tensor:
        for name in ["nodes_values", "class_weights", "base_values"]:
            if name in attrs:
                attrs[name + "_as_tensor"] = numpy_helper.from_array(
                    np.array(attrs.pop(name), as_tensor), name)
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], name="tree",
                            domain="ai.onnx.ml", **attrs)
    return harness.make_model([node], [("X", TP.FLOAT, ["n", 4])],
                              [("Y", TP.INT64, None), ("Z", TP.FLOAT, None)],
                              domains={"ai.onnx.ml": opset})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("base", [False, True])
def test_classifier_multiclass(post, base):
    rng = np.random.default_rng(5)
    nodes, leaves = random_forest(rng, trees=6, modes=tuple(MODES), missing=True, grid=True)
    m = classifier(nodes, leaves, rng, [3, 1, 4, 7], [0, 1, 2, 3], post=post,
                   base=[0.1, -0.2, 0.3, 0.0] if base else None)
    got, _, _ = harness.check_against_cpu(m, {"X": inputs(rng, grid=True, nans=True)},
                                          atol=1e-5)
    assert set(got[0]) <= {3, 1, 4, 7}


def test_classifier_multiclass_some_classes_without_weights():
    """Classes no leaf reached stay out of the arg max when there are no base values."""
    rng = np.random.default_rng(6)
    nodes, leaves = random_forest(rng, trees=3)
    m = classifier(nodes, leaves, rng, [0, 1, 2], [0, 2])
    harness.check_against_cpu(m, {"X": inputs(rng)}, atol=1e-5)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("base", [None, [0.3]])
@pytest.mark.parametrize("positive", [False, True])
def test_classifier_binary_one_class_weights(post, base, positive):
    """Two labels, weights for class 0 only (gradient boosting's form): ORT's binary rules, all
    positive weights ([1 - p, p], label by p > 0.5) or mixed ([-s, s] or the sigmoid pair)."""
    rng = np.random.default_rng(8)
    nodes, leaves = random_forest(rng, trees=5)
    m = classifier(nodes, leaves, rng, [10, 20], [0], post=post, base=base, positive=positive)
    harness.check_against_cpu(m, {"X": inputs(rng, rows=64)}, atol=1e-5)


@pytest.mark.parametrize("class_ids,base,post,reason", [
    ([0], [0.2, 0.7], "NONE", "two base values"),
    ([1], None, "NONE", "weights for class 1 only"),
    ([0, 1], None, "PROBIT", "PROBIT with two classes"),
])
def test_classifier_binary_forms_declined(class_ids, base, post, reason, tmp_path):
    """Two-class forms where ORT's output is not a per-row rule (zeros, dropped base values,
    probits packed into the wrong column) stay with ORT."""
    rng = np.random.default_rng(8)
    nodes, leaves = random_forest(rng, trees=3)
    m = classifier(nodes, leaves, rng, [10, 20], class_ids, post=post, base=base)
    assert reason in oc.declined_reasons(m, tmp_path)["tree"]


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("base", [None, [0.1, 0.2]])
def test_classifier_binary_both_classes(post, base):
    """Two labels with weights for both classes (a random forest's form)."""
    rng = np.random.default_rng(9)
    nodes, leaves = random_forest(rng, trees=4)
    m = classifier(nodes, leaves, rng, [0, 1], [0, 1], post=post, base=base, positive=True)
    harness.check_against_cpu(m, {"X": inputs(rng)}, atol=1e-5)


def test_classifier_as_tensor_forms():
    rng = np.random.default_rng(12)
    nodes, leaves = random_forest(rng, trees=4, modes=tuple(MODES), grid=True)
    m = classifier(nodes, leaves, rng, [0, 1, 2], [0, 1, 2], post="SOFTMAX", opset=3,
                   as_tensor=np.float32, base=[0.0, 0.1, 0.2])
    harness.check_against_cpu(m, {"X": inputs(rng, grid=True)}, atol=1e-5)


def test_classifier_binary_some_leaves_without_class1_declined(tmp_path):
    """Both classes' weights, base values, and leaves without a class-1 weight: rows reaching
    only those get scores from ORT that no per-row rule gives; without base values it runs."""
    rng = np.random.default_rng(9)
    nodes, leaves = random_forest(rng, trees=1, depth=3)
    for base in [[0.1, 0.2], None]:
        m = classifier(nodes, leaves, rng, [0, 1], [0, 1], base=base, positive=True)
        a = {at.name: at for at in m.graph.node[0].attribute}
        keep = [i for i, (c, n) in enumerate(zip(a["class_ids"].ints, a["class_nodeids"].ints))
                if not (c == 1 and n % 2 == 0)]
        for k in ["class_ids", "class_nodeids", "class_treeids"]:
            v = [a[k].ints[i] for i in keep]
            del a[k].ints[:]
            a[k].ints.extend(v)
        v = [a["class_weights"].floats[i] for i in keep]
        del a["class_weights"].floats[:]
        a["class_weights"].floats.extend(v)
        if base:
            assert "no class-1 weight" in oc.declined_reasons(m, tmp_path)["tree"]
        else:
            harness.check_against_cpu(m, {"X": inputs(rng, rows=64)}, atol=1e-5)


def test_classifier_string_labels_declined(tmp_path):
    rng = np.random.default_rng(1)
    nodes, leaves = random_forest(rng, trees=2)
    m = classifier(nodes, leaves, rng, [0, 1], [0, 1])
    n = m.graph.node[0]
    keep = [a for a in n.attribute if a.name != "classlabels_int64s"]
    del n.attribute[:]
    n.attribute.extend(keep + [helper.make_attribute("classlabels_strings", ["a", "b"])])
    m.graph.output[0].type.tensor_type.elem_type = TP.STRING
    oc.check_declined(m, None, "tree", "string", tmp_path)


def test_regressor_child_outside_tree_declined(tmp_path):
    rng = np.random.default_rng(2)
    nodes, leaves = random_forest(rng, trees=2, depth=2)
    nodes["nodes_truenodeids"][0] = 99
    reason = oc.declined_reasons(regressor(nodes, leaves, rng), tmp_path)
    assert "names a child that tree lacks" in reason["tree"]


def test_forest_of_many_trees_one_group():
    """200 deep trees over 1000 rows: a Scaler feeding the forest, one group on MLX."""
    rng = np.random.default_rng(4)
    nodes, leaves = random_forest(rng, trees=200, depth=8, features=6, missing=True)
    tree = regressor(nodes, leaves, rng, features=6).graph.node[0]
    scaler = helper.make_node("Scaler", ["X0"], ["X"], name="sc", domain="ai.onnx.ml",
                              offset=[0.0] * 6, scale=[1.5] * 6)
    m = harness.make_model([scaler, tree], [("X0", TP.FLOAT, ["n", 6])],
                           [("Y", TP.FLOAT, None)], domains={"ai.onnx.ml": 1})
    x = inputs(rng, rows=1000, features=6, nans=True)
    got, ref, record = harness.run_with_paths(m, {"X0": x})
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-4)
    assert len(record["groups"]) == 1


def tree_ensemble_v5(rng, trees=4, depth=4, targets=2, member=False, missing=False, agg=1,
                     post=0, leaf_tree=False):
    """A TreeEnsemble (ai.onnx.ml 5): interior nodes and leaves apart, modes as uint8."""
    a = {k: [] for k in ["nodes_featureids", "nodes_modes", "nodes_splits", "nodes_truenodeids",
                         "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs",
                         "nodes_missing_value_tracks_true"]}
    leaf_t, leaf_w, members, roots = [], [], [], []

    def leaf():
        leaf_t.append(int(rng.integers(targets)))
        leaf_w.append(float(rng.uniform(-1, 1)))
        return len(leaf_t) - 1

    def grow(d):
        me = len(a["nodes_featureids"])
        mode = int(rng.choice([0, 1, 2, 3, 4, 5, 6] if member else [0, 1, 2, 3, 4, 5]))
        a["nodes_featureids"].append(int(rng.integers(4)))
        a["nodes_modes"].append(mode)
        a["nodes_splits"].append(float(rng.integers(-2, 3)) / 2)
        a["nodes_missing_value_tracks_true"].append(int(missing and rng.random() < 0.5))
        for side in ["true", "false"]:
            a[f"nodes_{side}nodeids"].append(0)
            a[f"nodes_{side}leafs"].append(0)
        if mode == 6:
            members.extend([float(v) for v in rng.choice(range(-2, 8), 2, replace=False)])
            members.append(float("nan"))
        for side in ["true", "false"]:
            is_leaf = d == depth or rng.random() < 0.3
            a[f"nodes_{side}leafs"][me] = int(is_leaf)
            a[f"nodes_{side}nodeids"][me] = leaf() if is_leaf else grow(d + 1)
        return me

    for _ in range(trees):
        roots.append(grow(1))
    if leaf_tree:  # a tree that is one leaf: both branches name it
        roots.append(len(a["nodes_featureids"]))
        only = leaf()
        for k, v in [("nodes_featureids", 0), ("nodes_modes", 0), ("nodes_splits", 0.0),
                     ("nodes_truenodeids", only), ("nodes_trueleafs", 1),
                     ("nodes_falsenodeids", only), ("nodes_falseleafs", 1),
                     ("nodes_missing_value_tracks_true", 0)]:
            a[k].append(v)
    t = {k: numpy_helper.from_array(np.array(v, dt), k) for k, v, dt in [
        ("nodes_modes", a.pop("nodes_modes"), np.uint8),
        ("nodes_splits", a.pop("nodes_splits"), np.float32),
        ("leaf_weights", leaf_w, np.float32)]}
    if members:
        t["membership_values"] = numpy_helper.from_array(np.array(members, np.float32),
                                                         "membership_values")
    if not missing:
        del a["nodes_missing_value_tracks_true"]
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], name="tree", domain="ai.onnx.ml",
                            tree_roots=roots, leaf_targetids=leaf_t, n_targets=targets,
                            aggregate_function=agg, post_transform=post, **a, **t)
    return harness.make_model([node], [("X", TP.FLOAT, ["n", 4])], [("Y", TP.FLOAT, None)],
                              opset=21, domains={"ai.onnx.ml": 5})


@pytest.mark.parametrize("member", [False, True])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("agg", [0, 1, 2, 3])
def test_tree_ensemble_v5(member, missing, agg):
    """Every mode, NaN rules and aggregate, a one-leaf tree. BRANCH_MEMBER is tested on
    integer-valued X: ORT 1.31's set test for fractional x follows no rule the spec gives
    (0.5 is not in {0, 1}, 2.5 is in {-1, 2}); the EP tests membership exactly."""
    rng = np.random.default_rng(agg + 4 * member)
    m = tree_ensemble_v5(rng, member=member, missing=missing, agg=agg, leaf_tree=agg == 1)
    x = inputs(rng, grid=True, nans=True)
    if member:
        x = np.where(np.isnan(x), x, rng.integers(-2, 8, x.shape)).astype(np.float32)
    harness.check_against_cpu(m, {"X": x}, atol=1e-5)


@pytest.mark.parametrize("post", [0, 3])
def test_tree_ensemble_v5_post_transforms(post):
    rng = np.random.default_rng(20 + post)
    m = tree_ensemble_v5(rng, targets=3, post=post)
    harness.check_against_cpu(m, {"X": inputs(rng, grid=True)}, atol=1e-5)


@pytest.mark.parametrize("post", [1, 2])
def test_tree_ensemble_v5_post_transform_numbers_follow_the_spec(post):
    """The spec numbers SOFTMAX 1 and LOGISTIC 2; ORT 1.31 reads them the other way round, so
    the reference is ORT's raw scores (post_transform 0) transformed here with NumPy."""
    rng = np.random.default_rng(20 + post)
    m = tree_ensemble_v5(rng, targets=3, post=post)
    x = inputs(rng, grid=True)
    got, placed = harness.run_on_mlx(m, {"X": x})
    assert placed["tree"] == harness.EP
    for a in m.graph.node[0].attribute:
        if a.name == "post_transform":
            a.i = 0
    raw = harness.cpu_session(m).run(None, {"X": x})[0].astype(np.float64)
    if post == 1:
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    else:
        want = 1 / (1 + np.exp(-raw))
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_constant_input_folds_at_plan_build():
    """A forest over a constant X is folded when the plan is built (before prepare hooks run)."""
    rng = np.random.default_rng(13)
    nodes, leaves = random_forest(rng, trees=3)
    m = regressor(nodes, leaves, rng)
    x = inputs(rng, rows=5)
    m.graph.initializer.append(numpy_helper.from_array(x, "X"))
    del m.graph.input[:]
    got, placed = harness.run_on_mlx(m, {})
    assert placed["tree"] == harness.EP
    np.testing.assert_allclose(got[0], harness.cpu_session(m).run(None, {})[0], atol=1e-5)


def as_float64_input(m):
    m.graph.input[0].type.tensor_type.elem_type = TP.DOUBLE
    return m


@pytest.mark.cpu_device
@pytest.mark.parametrize("as_tensor", [None, np.float64])
@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MAX"])
def test_regressor_float64_input(as_tensor, agg):
    """float64 X (the CPU device): compared and summed in float64 as ORT does, with float
    attributes or double _as_tensor ones (thresholds no float32 equals among them)."""
    rng = np.random.default_rng(31)
    nodes, leaves = random_forest(rng, trees=6, modes=tuple(MODES), missing=True)
    x = inputs(rng, rows=40, nans=True).astype(np.float64)
    if as_tensor:
        picks = x[~np.isnan(x)][rng.integers(0, 100, len(nodes["nodes_values"]))]
        nodes["nodes_values"] = list(picks + rng.choice([-1e-12, 0.0, 1e-12], picks.size))
    m = regressor(nodes, leaves, rng, targets=2, agg=agg, opset=3, as_tensor=as_tensor,
                  base=[0.5, -0.25], post="LOGISTIC" if agg == "MAX" else "NONE")
    harness.check_against_cpu(as_float64_input(m), {"X": x}, atol=1e-6)


@pytest.mark.cpu_device
@pytest.mark.parametrize("labels,class_ids", [([0, 1, 2], [0, 1, 2]), ([3, 8], [0])])
def test_classifier_float64_input(labels, class_ids):
    rng = np.random.default_rng(32)
    nodes, leaves = random_forest(rng, trees=5, modes=tuple(MODES), grid=True)
    m = classifier(nodes, leaves, rng, labels, class_ids, post="LOGISTIC")
    x = inputs(rng, rows=40, grid=True).astype(np.float64)
    harness.check_against_cpu(as_float64_input(m), {"X": x}, atol=1e-6)


@pytest.mark.cpu_device
def test_tree_ensemble_v5_float64():
    """TreeEnsemble 5 over float64 X with double splits, weights and sets: Y is float64."""
    rng = np.random.default_rng(33)
    m = tree_ensemble_v5(rng, member=True, missing=True)
    node = m.graph.node[0]
    for a in node.attribute:
        if a.name in ("nodes_splits", "leaf_weights", "membership_values"):
            a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64),
                                                 a.name))
    m.graph.output[0].type.tensor_type.elem_type = TP.DOUBLE
    x = np.where(rng.random((32, 4)) < 0.1, np.nan, rng.integers(-2, 8, (32, 4)))
    got, _, _ = harness.check_against_cpu(as_float64_input(m), {"X": x}, atol=1e-12)
    assert got[0].dtype == np.float64
