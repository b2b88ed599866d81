"""The compile policy seen from outside: which path each fused group takes (shapeless, keyed,
eager), cache hits and misses across input shapes, shape chains kept compiled per shape, the kill
switches, and that every path gives the same answers. Paths are read from the run record the
EP writes when a session ends (the stats_file option's JSON). The path trial (eager runs timed against compiled ones) is
switched off here, except in the tests of the trial itself, so that run counts are exact."""
import os
import re

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import counts, make_model, run_recorded

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def elementwise_chain():
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"], name="mul"),
             helper.make_node("Add", ["a", "x"], ["b"], name="add"),
             helper.make_node("Tanh", ["b"], ["y"], name="tanh")]
    return make_model(nodes, [("x", TP.FLOAT, ["N", "M"])], [("y", TP.FLOAT, None)])


def shape_chain():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0, name="g0"),
             helper.make_node("Unsqueeze", ["b", "axes0"], ["bu"], name="unsq"),
             helper.make_node("Concat", ["bu", "minus1"], ["shape2"], axis=0, name="cat"),
             helper.make_node("Reshape", ["x", "shape2"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    inits = [("zero", np.array(0, np.int64)), ("axes0", np.array([0], np.int64)),
             ("minus1", np.array([-1], np.int64))]
    return make_model(nodes, [("x", TP.FLOAT, ["N", 3, 4])], [("y", TP.FLOAT, None)], inits)


def test_shapeless_group_traces_once_across_shapes():
    [g] = run_recorded(elementwise_chain(), [(2, 3), (5, 7), (2, 3), (40, 9)])
    assert g["path"] == "shapeless", g
    assert counts(g, "compiled_runs", "fallbacks", "cache_misses") == (4, 0, 1), g


def test_shapeless_variants_follow_the_dim_pattern():
    """A shapeless variant is reused for any dims with the same pattern (which dims are 1, which
    equal each other); a new pattern (a dim of 1, two equal dims) is traced on its own, since
    MLX's shapeless replay does not re-check broadcasts."""
    [g] = run_recorded(elementwise_chain(), [(2, 3), (1, 7), (5, 7), (1, 1), (4, 4), (1, 9)])
    assert counts(g, "compiled_runs", "fallbacks") == (6, 0), g
    assert counts(g, "cache_misses", "cache_hits") == (4, 2), g


def test_keyed_group_keeps_shape_chains_compiled():
    [g] = run_recorded(shape_chain(), [(2, 3, 4), (5, 3, 4), (2, 3, 4), (5, 3, 4)])
    assert g["path"] == "keyed", g
    assert g["decided_by"] == {"node": "shape", "op": "Shape", "class": "shape_keyed"}, g
    assert counts(g, "compiled_runs", "eager_runs", "fallbacks") == (4, 0, 0), g
    assert counts(g, "cache_misses", "cache_hits") == (2, 2), g  # one variant per shape
    assert g["host_reads"] == 0, g


@pytest.mark.parametrize("switch,path", [("ONNXRUNTIME_EP_MLX_NO_COMPILE", "eager"),
                                         ("ONNXRUNTIME_EP_MLX_NO_SHAPELESS", "keyed")])
def test_kill_switches_change_the_path_not_the_answers(switch, path):
    [g] = run_recorded(elementwise_chain(), [(2, 3), (4, 5)], env={switch: "1"})
    assert g["path"] == path, g


def test_no_retrace_on_second_run():
    [g] = run_recorded(shape_chain(), [(2, 3, 4), (2, 3, 4)])
    assert counts(g, "traces", "cache_hits") == (1, 1), g


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"}],
                         ids=["shapeless", "keyed"])
def test_first_run_in_a_fresh_thread_is_the_only_trace(env):
    """MLX keys its compile cache on the calling thread's default stream; when the first call to
    a compiled function is what creates that stream, the second call used to trace again."""
    [g] = run_recorded(elementwise_chain(), [(2, 3)] * 3, env=env)
    assert counts(g, "traces", "cache_hits") == (1, 2), g


# --- the path trial -------------------------------------------------------------------------------
def trial_runs():
    """PLAN_TRIAL_RUNS, read from src/plan/plan.h (its one home)."""
    with open(os.path.join(ROOT, "src", "plan", "plan.h")) as f:
        return int(re.search(r"PLAN_TRIAL_RUNS = (\d+)", f.read()).group(1))


def test_path_trial_times_both_paths_then_keeps_one():
    """After the tracing run, PLAN_TRIAL_RUNS eager and as many compiled runs alternate; the
    summary records both paths' fastest runs and the choice (eager only when at least 10%
    faster), every run's output matches ORT's CPU provider, and later runs all take the chosen
    path."""
    n, after = trial_runs(), 5
    [g] = run_recorded(elementwise_chain(), [(64, 64)] * (1 + 2 * n + after),
                       env={"ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL": "0"})
    trial = g["trial"]
    assert trial["decided"] and trial["eager_ns"] > 0 and trial["compiled_ns"] > 0, g
    eager_won = trial["eager_ns"] * 100 < trial["compiled_ns"] * 90  # src/plan/plan.h's margin
    assert trial["chose"] == ("eager" if eager_won else "compiled"), g
    assert counts(g, "fallbacks", "cache_misses") == (0, 1), g
    # run 1 traces; the next 2n alternate; the last `after` take the winner
    assert g["path"] == "shapeless" and g["turned_eager"] == eager_won, g
    assert ("path_trial" in g["turned_eager_by"]) == eager_won, g
    if eager_won:
        assert counts(g, "eager_runs", "compiled_runs") == (n + after, 1 + n), g
    else:
        assert counts(g, "eager_runs", "compiled_runs") == (n, 1 + n + after), g


def test_path_trial_ignores_tracing_runs_of_new_shapes():
    """Keyed variants: a compiled run that traced a new shape is not a timing sample."""
    shapes = [(4, 4), (4, 4), (8, 8)] + [(4, 4), (8, 8)] * (2 * trial_runs())
    [g] = run_recorded(elementwise_chain(), shapes,
                       env={"ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL": "0",
                            "ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"})
    assert g["trial"]["decided"], g
    assert counts(g, "cache_misses", "fallbacks") == (2, 0), g


def test_path_trial_switch_keeps_groups_compiled():
    [g] = run_recorded(elementwise_chain(), [(64, 64)] * 8)
    assert g["trial"] is None and counts(g, "eager_runs", "compiled_runs") == (0, 8), g


# --- nodes whose output shape follows values ------------------------------------------------------
def nonzero_sandwich():
    """x*x + x -> NonZero -> Cast -> Pad (shape-keyed) -> d*d + d: NonZero's count decides the
    shape the suffix sees."""
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"], name="mul"),
             helper.make_node("Add", ["a", "x"], ["b"], name="add"),
             helper.make_node("NonZero", ["b"], ["nz"], name="nonzero"),
             helper.make_node("Cast", ["nz"], ["c"], name="cast", to=TP.FLOAT),
             helper.make_node("Pad", ["c", "pads"], ["d"], name="pad", mode="reflect"),
             helper.make_node("Mul", ["d", "d"], ["e"], name="mul2"),
             helper.make_node("Add", ["e", "d"], ["y"], name="add2")]
    return make_model(nodes, [("x", TP.FLOAT, ["N", "M"])], [("y", TP.FLOAT, None)],
                      initializers=[("pads", np.array([0, 1, 0, 1], np.int64))])


def test_host_shaped_node_gets_its_own_group_and_neighbours_compile():
    """NonZero is evaluated on the host; in a group of its own it leaves the nodes before and
    after it compiled (3 groups: compiled, eager NonZero, compiled)."""
    groups = run_recorded(nonzero_sandwich(), [(3, 4), (3, 4), (3, 4)])
    assert len(groups) == 3, groups
    host_shape = {"node": "nonzero", "op": "NonZero", "class": "host_shape"}
    alone = [g for g in groups if g["nodes"] == 1 and g["path"] == "eager" and
             g["decided_by"] == host_shape]
    assert len(alone) == 1, groups
    others = [g for g in groups if g not in alone]
    assert all(g["path"] in ("shapeless", "keyed") for g in others), groups
    assert all(counts(g, "compiled_runs", "eager_runs") == (3, 0) for g in others), groups


def test_keyed_group_meeting_new_shapes_on_most_runs_turns_eager():
    """Downstream of NonZero every new count is a new shape: after 16 traces, more than one run
    in two, the keyed group runs eagerly, and says so."""
    shapes = [(n, 3) for n in range(1, 25)]
    groups = run_recorded(nonzero_sandwich(), shapes)
    churned = [g for g in groups if "shape_churn" in g["turned_eager_by"]]
    assert len(churned) == 1 and churned[0]["turned_eager"], groups
    assert churned[0]["fallbacks"] == 0, groups


def test_shapeless_group_meeting_new_dim_patterns_on_most_runs_turns_eager():
    """The same guard for a shapeless group whose dims change pattern on every run (a new
    variant each time): after 16 traces it runs eagerly."""
    dims = ["A", "B", "C", "D", "E", "F"]
    model = make_model([helper.make_node("Mul", ["x", "x"], ["a"], name="mul"),
                        helper.make_node("Tanh", ["a"], ["y"], name="tanh")],
                       [("x", TP.FLOAT, dims)], [("y", TP.FLOAT, None)])
    shapes = [tuple(1 if k >> j & 1 else j + 2 for j in range(6)) for k in range(24)]
    [g] = run_recorded(model, shapes)
    assert g["path"] == "shapeless" and g["turned_eager"], g
    assert g["turned_eager_by"] == ["shape_churn"], g
    assert counts(g, "cache_misses", "fallbacks") == (16, 0), g


ENVS = [{}, {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"}, {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}]
ENV_IDS = ["shapeless", "keyed", "eager"]


def axes_const(values):
    return helper.make_node("Constant", [], ["axes"],
                            value=helper.make_tensor("axes", TP.INT64, [len(values)], values))


SIZE1_REDUCTIONS = {
    # MLX's shapeless compile dies on a reduction whose reduced axes all have size 1 (src/mlx/compile.cpp,
    # shapeless_mis_runs); these groups must compile keyed instead, with the same answers.
    "neg_reducemin": ([axes_const([3]), helper.make_node("Neg", ["x"], ["n"]),
                       helper.make_node("ReduceMin", ["n", "axes"], ["y"], keepdims=1)],
                      [3, 1, 4, 1]),
    "sumsquare_logsoftmax": ([axes_const([-3]),
                              helper.make_node("ReduceSumSquare", ["x", "axes"], ["r"], keepdims=1),
                              helper.make_node("LogSoftmax", ["r"], ["y"], axis=0)], [2, 3, 4]),
    "exp_reducesum_keep0": ([axes_const([0]), helper.make_node("Exp", ["x"], ["e"]),
                             helper.make_node("ReduceSum", ["e", "axes"], ["y"], keepdims=0)],
                            [1, 4]),
    "reducemean_tanh": ([axes_const([1, 2]),
                         helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
                         helper.make_node("Tanh", ["m"], ["y"])], [5, 1, 1, 3]),
    "max_then_min_of_ones": ([axes_const([-4]),
                              helper.make_node("ReduceMax", ["x"], ["m"], keepdims=1),
                              helper.make_node("ReduceMin", ["m", "axes"], ["y"], keepdims=0)],
                             [5, 1, 1, 3]),
    "abs_softmax_last": ([helper.make_node("Abs", ["x"], ["a"]),
                          helper.make_node("Softmax", ["a"], ["y"], axis=-1)], [4, 1]),
    "sigmoid_layernorm": ([helper.make_node("Sigmoid", ["x"], ["s"]),
                           helper.make_node("LayerNormalization", ["s", "g"], ["y"], axis=-1)],
                          [3, 1]),
}


@pytest.mark.parametrize("env", ENVS, ids=ENV_IDS)
@pytest.mark.parametrize("case", sorted(SIZE1_REDUCTIONS))
def test_reductions_over_size1_axes_run_on_every_path(case, env, monkeypatch):
    """Everyday graphs (an elementwise op next to a reduction over a size-1 axis) killed the
    process on the shapeless path; they give the CPU provider's answers on every path."""
    from mlx_harness import cpu_session, run_with_stats
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nodes, shape = SIZE1_REDUCTIONS[case]
    inits = [("g", np.ones(shape[-1:], np.float32))] if case == "sigmoid_layernorm" else []
    model = make_model(nodes, [("x", TP.FLOAT, shape)], [("y", TP.FLOAT, None)],
                       initializers=inits, opset=18)
    x = np.random.default_rng(1).random(shape, dtype=np.float32) - 0.5
    want = cpu_session(model).run(None, {"x": x})[0]
    got, stats = run_with_stats(model, {"x": x}, runs=3)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
    [group] = stats["groups"]
    assert group["runs"] == 3 and group["failures"] == 0, group
    if not env:  # the shapeless trace was refused: keyed from then on, no fallback to eager
        assert group["path"] == "keyed" and not group["turned_eager"], group
        assert group["compiled_runs"] == 3 and group["fallbacks"] == 0, group


def test_a_graph_too_deep_for_mlx_compile_runs_eagerly_on_a_small_stack():
    """MLX's compile walks the traced graph recursively; a chain of 8,000 nodes run from a thread
    with a 1 MiB stack overflowed it (SIGSEGV). Such a group now runs eagerly (MLX's eval is
    iterative), with the CPU provider's answers, and the group still ran on MLX."""
    import threading

    from mlx_harness import mlx_session
    nodes, prev = [], "x"
    for i in range(8000):
        out = "y" if i == 7999 else f"v{i}"
        nodes.append(helper.make_node("Neg" if i % 2 else "Abs", [prev], [out], name=f"n{i}"))
        prev = out
    model = make_model(nodes, [("x", TP.FLOAT, [4])], [("y", TP.FLOAT, [4])])
    x = np.array([1, -2, 3, -4], np.float32)
    result, errors = {}, []

    def run():
        try:
            s = mlx_session(model)
            result["y"] = [s.run(None, {"x": x})[0] for _ in range(2)]
        except Exception as e:  # collected: an assert in a thread would be lost
            errors.append(e)

    old = threading.stack_size(1 << 20)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    assert not errors, errors[0]
    for y in result["y"]:
        np.testing.assert_array_equal(y, -np.abs(x))
