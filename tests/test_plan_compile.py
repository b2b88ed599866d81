"""The compile policy seen from outside: which path each fused group takes (shapeless, keyed,
eager), cache hits and misses across input shapes, shape chains kept compiled per shape, the kill
switches, and that every path gives the same answers. Paths are read from the verbose summary
the EP prints when a session ends. The path trial (eager runs timed against compiled ones) is
switched off here, except in the tests of the trial itself, so that run counts are exact."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import make_model

HERE = os.path.dirname(os.path.abspath(__file__))


def run_verbose(model, shapes, env=None):
    """Runs `model` (input x) once per shape in a child process; returns the EP's summary."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"compile-{os.getpid()}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    code = textwrap.dedent(f"""
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({path!r}, so)
        ref = ort.InferenceSession({path!r}, providers=["CPUExecutionProvider"])
        for shape in {shapes!r}:
            x = (np.random.default_rng(len(shape)).random(shape, dtype=np.float32) - 0.5)
            got, want = s.run(None, {{"x": x}})[0], ref.run(None, {{"x": x}})[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        del s
    """)
    full_env = dict(os.environ, ONNXRUNTIME_EP_MLX_VERBOSE="1",
                    ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL="1")
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env)
    os.unlink(path)
    assert r.returncode == 0, r.stderr[-3000:]
    groups = [line for line in r.stderr.splitlines() if " nodes, path " in line]
    assert groups, r.stderr[-2000:]
    return groups


def stat(line, name):
    return int(re.search(rf"{name} (\d+)", line).group(1))


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
    [g] = run_verbose(elementwise_chain(), [(2, 3), (5, 7), (2, 3), (40, 9)])
    assert "path shapeless" in g
    assert stat(g, "compiled") == 4 and stat(g, "fallbacks") == 0
    assert stat(g, "misses") == 1


def test_shapeless_variants_follow_the_dim_pattern():
    """A shapeless variant is reused for any dims with the same pattern (which dims are 1, which
    equal each other); a new pattern (a dim of 1, two equal dims) is traced on its own, since
    MLX's shapeless replay does not re-check broadcasts."""
    [g] = run_verbose(elementwise_chain(), [(2, 3), (1, 7), (5, 7), (1, 1), (4, 4), (1, 9)])
    assert stat(g, "compiled") == 6 and stat(g, "fallbacks") == 0
    assert stat(g, "misses") == 4 and stat(g, "hits") == 2


def test_keyed_group_keeps_shape_chains_compiled():
    [g] = run_verbose(shape_chain(), [(2, 3, 4), (5, 3, 4), (2, 3, 4), (5, 3, 4)])
    assert "path keyed" in g and "Shape 'shape' is shape-keyed" in g
    assert stat(g, "compiled") == 4 and stat(g, "eager") == 0 and stat(g, "fallbacks") == 0
    assert stat(g, "misses") == 2 and stat(g, "hits") == 2  # one variant per shape
    assert stat(g, "host reads") == 0


@pytest.mark.parametrize("switch,path", [("ONNXRUNTIME_EP_MLX_NO_COMPILE", "path eager"),
                                         ("ONNXRUNTIME_EP_MLX_NO_SHAPELESS", "path keyed")])
def test_kill_switches_change_the_path_not_the_answers(switch, path):
    [g] = run_verbose(elementwise_chain(), [(2, 3), (4, 5)], env={switch: "1"})
    assert path in g


def test_no_retrace_on_second_run():
    [g] = run_verbose(shape_chain(), [(2, 3, 4), (2, 3, 4)])
    assert stat(g, "traces") == 1 and stat(g, "hits") == 1


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"}],
                         ids=["shapeless", "keyed"])
def test_first_run_in_a_fresh_thread_is_the_only_trace(env):
    """MLX keys its compile cache on the calling thread's default stream; when the first call to
    a compiled function is what creates that stream, the second call used to trace again."""
    [g] = run_verbose(elementwise_chain(), [(2, 3)] * 3, env=env)
    assert stat(g, "traces") == 1 and stat(g, "hits") == 2, g


# --- the path trial -------------------------------------------------------------------------------
def runs_of(line, kind):
    """The summary's run breakdown "(failed F, compiled C, eager E)"."""
    return int(re.search(rf"\(failed \d+, compiled (\d+), eager (\d+)\)", line)
               .group(1 if kind == "compiled" else 2))

def trial_runs():
    """PLAN_TRIAL_RUNS, read from src/plan/plan.h (its one home)."""
    with open(os.path.join(HERE, "..", "src", "plan", "plan.h")) as f:
        return int(re.search(r"PLAN_TRIAL_RUNS = (\d+)", f.read()).group(1))


def test_path_trial_times_both_paths_then_keeps_one():
    """After the tracing run, PLAN_TRIAL_RUNS eager and as many compiled runs alternate; the
    summary records both paths' fastest runs and the choice (eager only when at least 10%
    faster), every run's output matches ORT's CPU provider, and later runs all take the chosen
    path."""
    n, after = trial_runs(), 5
    [g] = run_verbose(elementwise_chain(), [(64, 64)] * (1 + 2 * n + after),
                      env={"ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL": "0"})
    m = re.search(rf"path trial: eager ([\d.]+) ms, compiled ([\d.]+) ms \(fastest of {n}\)", g)
    assert m, g
    eager_won = float(m.group(1)) < float(m.group(2)) * 0.90  # src/plan/plan.h's margin
    assert stat(g, "fallbacks") == 0 and stat(g, "misses") == 1
    # run 1 traces; the next 2n alternate; the last `after` take the winner
    if eager_won:
        assert "path shapeless->eager" in g
        assert runs_of(g, "eager") == n + after and runs_of(g, "compiled") == 1 + n
    else:
        assert "path shapeless (path trial" in g
        assert runs_of(g, "eager") == n and runs_of(g, "compiled") == 1 + n + after


def test_path_trial_ignores_tracing_runs_of_new_shapes():
    """Keyed variants: a compiled run that traced a new shape is not a timing sample."""
    shapes = [(4, 4), (4, 4), (8, 8)] + [(4, 4), (8, 8)] * (2 * trial_runs())
    [g] = run_verbose(elementwise_chain(), shapes,
                      env={"ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL": "0",
                           "ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"})
    assert "path trial:" in g and stat(g, "misses") == 2 and stat(g, "fallbacks") == 0


def test_path_trial_switch_keeps_groups_compiled():
    [g] = run_verbose(elementwise_chain(), [(64, 64)] * 8)
    assert "path trial" not in g and runs_of(g, "eager") == 0 and runs_of(g, "compiled") == 8


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
    groups = run_verbose(nonzero_sandwich(), [(3, 4), (3, 4), (3, 4)])
    assert len(groups) == 3, groups
    alone = [g for g in groups if ": 1 nodes, path eager (NonZero 'nonzero' is evaluated on the "
             "host (its output shape follows values))" in g]
    assert len(alone) == 1, groups
    others = [g for g in groups if g not in alone]
    assert all("path shapeless" in g or "path keyed" in g for g in others), groups
    assert all(re.search(r"compiled 3, eager 0", g) for g in others), groups


def test_keyed_group_meeting_new_shapes_on_most_runs_turns_eager():
    """Downstream of NonZero every new count is a new shape: after 16 traces, more than one run
    in two, the keyed group runs eagerly, and says so."""
    shapes = [(n, 3) for n in range(1, 25)]
    groups = run_verbose(nonzero_sandwich(), shapes)
    churned = [g for g in groups if "input shapes traced in" in g]
    assert len(churned) == 1 and "->eager" in churned[0], groups
    assert stat(churned[0], "fallbacks") == 0


def test_shapeless_group_meeting_new_dim_patterns_on_most_runs_turns_eager():
    """The same guard for a shapeless group whose dims change pattern on every run (a new
    variant each time): after 16 traces it runs eagerly."""
    dims = ["A", "B", "C", "D", "E", "F"]
    model = make_model([helper.make_node("Mul", ["x", "x"], ["a"], name="mul"),
                        helper.make_node("Tanh", ["a"], ["y"], name="tanh")],
                       [("x", TP.FLOAT, dims)], [("y", TP.FLOAT, None)])
    shapes = [tuple(1 if k >> j & 1 else j + 2 for j in range(6)) for k in range(24)]
    [g] = run_verbose(model, shapes)
    assert "path shapeless->eager" in g and "input shapes traced in" in g, g
    assert stat(g, "misses") == 16 and stat(g, "fallbacks") == 0, g
