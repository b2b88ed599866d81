"""Control-flow rows (src/ops/control.c, src/plan/body.c): If with constant and live conditions,
both branches, outer-scope values (from nodes of the group and from graph inputs the If reads
only inside its branches), branches of different output shapes; Scan over sums, several states,
reverse directions and other axes; Loop with a trip count, a condition, both, and scan outputs;
nesting; bodies with a node MLX cannot run (declined with the body node's reason); the unroll
cap (declined at claim time when the trip count is known, an error naming the node at run time
otherwise, the session still usable)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import mlx_harness as harness
import ops_common as oc

F = TP.FLOAT
I64 = TP.INT64
B = TP.BOOL


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def graph(nodes, name, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


# --- If ---------------------------------------------------------------------------------------
def if_model(cond_const=None, else_shape_differs=False):
    """relu(a) -> x; If(c): then x + y, else x * y (or concat(x, x), shape [6])."""
    then_g = graph([helper.make_node("Add", ["x", "y"], ["t"], name="then_add")], "then", [],
                   [vi("t")])
    if else_shape_differs:
        else_g = graph([helper.make_node("Concat", ["x", "x"], ["e"], name="else_cat", axis=0)],
                       "else", [], [vi("e")])
    else:
        else_g = graph([helper.make_node("Mul", ["x", "y"], ["e"], name="else_mul")], "else", [],
                       [vi("e")])
    nodes = [helper.make_node("Relu", ["a"], ["x"], name="relu"),
             helper.make_node("If", ["c"], ["out"], name="if", then_branch=then_g,
                              else_branch=else_g)]
    inputs = [("a", F, [3]), ("y", F, [3])]
    inits = []
    if cond_const is None:
        inputs.append(("c", B, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond_const), "c"))
    return harness.make_model(nodes, inputs, [("out", F, None)], initializers=inits)


FEEDS = {"a": np.array([1, -2, 3], np.float32), "y": np.array([2, 2, 2], np.float32)}


@pytest.mark.parametrize("cond", [True, False])
def test_if_live_cond_both_branches(cond):
    got, _, _ = harness.check_against_cpu(if_model(), dict(FEEDS, c=np.array(cond)))
    want = np.array([3, 2, 5] if cond else [2, 0, 6], np.float32)
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("cond", [True, False])
def test_if_constant_cond(cond):
    """ORT's optimizer inlines an If whose cond is constant, so graph optimizations are turned
    off to let the EP see it; the group then has no host read and compiles."""
    import onnxruntime as ort

    import onnxruntime_ep_mlx as mlx

    model = if_model(cond_const=cond)
    so = mlx.session_options(None)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    s = ort.InferenceSession(model.SerializeToString(), so)
    placed = harness.assignment(s)
    assert placed.get("if") == harness.EP and placed.get("relu") == harness.EP, placed
    got = s.run(None, FEEDS)
    ref = harness.cpu_session(model).run(None, FEEDS)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_of_different_shapes(cond):
    got, _, _ = harness.check_against_cpu(if_model(else_shape_differs=True),
                                          dict(FEEDS, c=np.array(cond)))
    assert got[0].shape == ((3,) if cond else (6,))


def test_if_alone_reads_graph_inputs_only_in_branches():
    """The fused node holds only the If: its inputs must include the values the branches read
    from the outer scope (ORT's implicit inputs), else the branches would have nothing to read."""
    then_g = graph([helper.make_node("Sub", ["p", "q"], ["t"], name="then_sub")], "then", [],
                   [vi("t")])
    else_g = graph([helper.make_node("Neg", ["q"], ["e"], name="else_neg")], "else", [],
                   [vi("e")])
    node = helper.make_node("If", ["c"], ["out"], name="if", then_branch=then_g,
                            else_branch=else_g)
    m = harness.make_model([node], [("c", B, []), ("p", F, [2, 3]), ("q", F, [2, 3])],
                           [("out", F, None)])
    for c in (True, False):
        harness.check_against_cpu(m, {"c": np.array(c), "p": harness.rand((2, 3), seed=1),
                                      "q": harness.rand((2, 3), seed=2)})


@pytest.mark.cpu_device
def test_if_outer_value_computed_on_cpu(tmp_path):
    """An outer-scope value produced by a node left on CPU reaches the fused If as an input."""
    then_g = graph([helper.make_node("Add", ["z", "z"], ["t"], name="then_add")], "then", [],
                   [vi("t")])
    else_g = graph([helper.make_node("Identity", ["z"], ["e"], name="else_id")], "else", [],
                   [vi("e")])
    nodes = [helper.make_node("Sin", ["d"], ["sd"], name="sin64"),  # float64 Sin: declined
             helper.make_node("Cast", ["sd"], ["z"], name="cast", to=F),
             helper.make_node("If", ["c"], ["out"], name="if", then_branch=then_g,
                              else_branch=else_g)]
    m = harness.make_model(nodes, [("c", B, []), ("d", TP.DOUBLE, [4])], [("out", F, None)])
    for c in (True, False):
        feeds = {"c": np.array(c), "d": np.linspace(0, 1, 4)}
        harness.check_against_cpu(m, feeds, on_cpu=("sin64",))


@pytest.mark.cpu_device
def test_if_declined_for_unclaimable_branch_node(tmp_path):
    """A branch node MLX cannot run declines the If with that node's reason; the branches' other
    nodes are still claimed on their own, and the model stays right."""
    then_g = graph([helper.make_node("Cast", ["x"], ["x64"], name="to64", to=TP.DOUBLE),
                    helper.make_node("Sin", ["x64"], ["s64"], name="sin64"),
                    helper.make_node("Cast", ["s64"], ["t"], name="to32", to=F)], "then", [],
                   [vi("t")])
    else_g = graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                   [vi("e")])
    nodes = [helper.make_node("Relu", ["a"], ["x"], name="relu"),
             helper.make_node("If", ["c"], ["out"], name="if", then_branch=then_g,
                              else_branch=else_g)]
    m = harness.make_model(nodes, [("a", F, [3]), ("c", B, [])], [("out", F, None)])
    for c in (True, False):
        reason = oc.check_declined(m, {"a": FEEDS["a"], "c": np.array(c)}, "if",
                                   "then_branch node 'sin64' (Sin)", tmp_path)
        assert "float64" in reason


# --- Scan -------------------------------------------------------------------------------------
def scan_sum_model(length=4, width=3):
    body = graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="body_add"),
                  helper.make_node("Identity", ["s_out"], ["y_t"], name="body_id")], "body",
                 [vi("s_in", F, [width]), vi("x_t", F, [width])],
                 [vi("s_out", F, [width]), vi("y_t", F, [width])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], name="scan", body=body,
                            num_scan_inputs=1)
    return harness.make_model([node], [("s0", F, [width]), ("x", F, [length, width])],
                              [("s", F, None), ("y", F, None)])


def test_scan_cumulative_sum():
    feeds = {"s0": np.zeros(3, np.float32), "x": harness.rand((4, 3))}
    got, _, _ = harness.check_against_cpu(scan_sum_model(), feeds)
    np.testing.assert_allclose(got[1], np.cumsum(feeds["x"], axis=0), rtol=1e-6)


def test_scan_compiles_keyed():
    model = scan_sum_model()
    feeds = [{"s0": np.zeros(3, np.float32), "x": harness.rand((4, 3), seed=s)} for s in (1, 2)]
    oc.check_compiled(model, feeds, path="keyed")


def test_scan_states_directions_axes():
    """Two states, two scan inputs (one reversed, one scanned along axis 1), two scan outputs
    (one reversed, one stacked along axis 1), and an outer-scope weight."""
    body = graph([
        helper.make_node("Add", ["a_in", "u_t"], ["a_out"], name="b_add"),
        helper.make_node("Mul", ["b_in", "v_t"], ["bm"], name="b_mul"),
        helper.make_node("Mul", ["bm", "w"], ["b_out"], name="b_scale"),
        helper.make_node("Sub", ["a_out", "b_out"], ["o1"], name="b_sub"),
        helper.make_node("ReduceSum", ["v_t"], ["o2"], name="b_sum", keepdims=1),
    ], "body", [vi("a_in", F, [2]), vi("b_in", F, [2]), vi("u_t", F, [2]), vi("v_t", F, [2])],
        [vi("a_out", F, [2]), vi("b_out", F, [2]), vi("o1", F, [2]), vi("o2", F, [1])])
    node = helper.make_node("Scan", ["a0", "b0", "u", "v"], ["a", "b", "y1", "y2"], name="scan",
                            body=body, num_scan_inputs=2, scan_input_directions=[1, 0],
                            scan_input_axes=[0, 1], scan_output_directions=[1, 0],
                            scan_output_axes=[0, -1])
    m = harness.make_model([node], [("a0", F, [2]), ("b0", F, [2]), ("u", F, [5, 2]),
                                    ("v", F, [2, 5])],
                           [("a", F, None), ("b", F, None), ("y1", F, None), ("y2", F, None)],
                           initializers=[("w", np.array([0.5, 1.5], np.float32))], opset=17)
    feeds = {"a0": harness.rand(2, seed=1), "b0": harness.rand(2, seed=2),
             "u": harness.rand((5, 2), seed=3), "v": harness.rand((2, 5), seed=4, low=0.5,
                                                                   high=1.2)}
    harness.check_against_cpu(m, feeds, rtol=1e-5, atol=1e-5)


def scan8_model(with_lens=False):
    body = graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="body_add"),
                  helper.make_node("Mul", ["s_out", "x_t"], ["y_t"], name="body_mul")], "body",
                 [vi("s_in", F, [3]), vi("x_t", F, [3])], [vi("s_out", F, [3]), vi("y_t", F, [3])])
    node = helper.make_node("Scan", ["lens" if with_lens else "", "s0", "x"], ["s", "y"],
                            name="scan", body=body, num_scan_inputs=1, directions=[1])
    inputs = [("s0", F, [2, 3]), ("x", F, [2, 4, 3])] + ([("lens", I64, [2])] if with_lens
                                                          else [])
    return harness.make_model([node], inputs, [("s", F, None), ("y", F, None)], opset=8)


def test_scan8_batch():
    """Scan-8: a scan per batch entry (axis 0), along axis 1, here in reverse."""
    feeds = {"s0": harness.rand((2, 3), seed=1), "x": harness.rand((2, 4, 3), seed=2)}
    harness.check_against_cpu(scan8_model(), feeds, rtol=1e-5, atol=1e-5)


def test_scan8_sequence_lens_declined(tmp_path):
    feeds = {"s0": harness.rand((2, 3), seed=1), "x": harness.rand((2, 4, 3), seed=2),
             "lens": np.array([4, 2], np.int64)}
    oc.check_declined(scan8_model(with_lens=True), feeds, "scan", "sequence_lens", tmp_path)


# --- Loop -------------------------------------------------------------------------------------
def loop_model(with_m=True, with_cond=True, body_cond=False, scan=False, m_const=None):
    """Carried value v: v * 2 + i each iteration; optional scan output of v; when body_cond the
    body stops once the sum of v exceeds 100."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], name="b_cast", to=F),
             helper.make_node("Mul", ["v_in", "two"], ["v2"], name="b_mul"),
             helper.make_node("Add", ["v2", "fi"], ["v_out"], name="b_add")]
    outputs = [vi("cond_out", B, []), vi("v_out", F, [3])]
    if body_cond:
        nodes += [helper.make_node("ReduceSum", ["v_out"], ["tot"], name="b_sum", keepdims=0),
                  helper.make_node("Less", ["tot", "limit"], ["cond_out"], name="b_less")]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_id"))
    if scan:
        nodes.append(helper.make_node("Identity", ["v_out"], ["v_scan"], name="b_scan"))
        outputs.append(vi("v_scan", F, [3]))
    body = graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
                 outputs)
    loop_outs = ["v", "vs"] if scan else ["v"]
    node = helper.make_node("Loop", ["M" if with_m else "", "c" if with_cond else "", "v0"],
                            loop_outs, name="loop", body=body)
    inputs = [("v0", F, [3])]
    inits = [("two", np.array(2, np.float32)), ("limit", np.array(100, np.float32))]
    if with_m and m_const is None:
        inputs.append(("M", I64, []))
    elif with_m:
        inits.append(("M", np.array(m_const, np.int64)))
    if with_cond:
        inputs.append(("c", B, []))
    return harness.make_model([node], inputs, [(o, F, None) for o in loop_outs],
                              initializers=inits)


def loop_feeds(m=None, c=None):
    feeds = {"v0": np.array([0.5, -1, 2], np.float32)}
    if m is not None:
        feeds["M"] = np.array(m, np.int64)
    if c is not None:
        feeds["c"] = np.array(c)
    return feeds


@pytest.mark.parametrize("m", [0, 1, 5])
def test_loop_trip_count_only(m):
    harness.check_against_cpu(loop_model(with_cond=False), loop_feeds(m=m))


def test_loop_cond_only():
    harness.check_against_cpu(loop_model(with_m=False, body_cond=True), loop_feeds(c=True))


@pytest.mark.parametrize("m,c", [(3, True), (50, True), (5, False)])
def test_loop_trip_count_and_cond(m, c):
    harness.check_against_cpu(loop_model(body_cond=True, scan=True), loop_feeds(m=m, c=c))


@pytest.mark.parametrize("m", [1, 4])
def test_loop_scan_outputs(m):
    got, _, _ = harness.check_against_cpu(loop_model(with_cond=False, scan=True),
                                          loop_feeds(m=m))
    assert got[1].shape == (m, 3)


def test_loop_scan_outputs_zero_iterations():
    got, _, _ = harness.check_against_cpu(loop_model(with_cond=False, scan=True),
                                          loop_feeds(m=0))
    assert got[1].shape == (0, 3)


def test_loop_constant_trip_count_compiles_keyed():
    model = loop_model(with_cond=False, scan=True, m_const=6)
    feeds = [loop_feeds(), {"v0": np.array([1, 2, 3], np.float32)}]
    oc.check_compiled(model, feeds, path="keyed")


def test_loop_computed_trip_count_compiles_value_keyed():
    """A trip count fed at run time (with a pass-through cond) is evaluated before the call and
    keys the compiled variant: one trace per count, reused when the count comes back."""
    model = loop_model(with_cond=False, scan=True)
    feeds = [loop_feeds(m=3), loop_feeds(m=5), loop_feeds(m=3), loop_feeds(m=0)]
    group = oc.check_compiled(model, feeds, path="keyed")
    assert group["decided_by"]["class"] == "value_keyed", group
    assert (group["cache_misses"], group["cache_hits"]) == (3, 1), group


def test_loop_over_cap_at_run_time_names_node():
    """A live trip count over the unroll cap fails the run naming the node; the session stays
    usable."""
    s = harness.mlx_session(loop_model(with_cond=False))
    with pytest.raises(Exception, match=r"node 'loop' \(Loop\).*unroll cap"):
        s.run(None, loop_feeds(m=5000))
    ref = harness.cpu_session(loop_model(with_cond=False)).run(None, loop_feeds(m=3))
    np.testing.assert_allclose(s.run(None, loop_feeds(m=3))[0], ref[0])


def test_loop_known_trip_count_over_cap_declined(tmp_path):
    oc.check_declined(loop_model(with_cond=False, m_const=10000), loop_feeds(), "loop",
                      "exceeds the unroll cap", tmp_path, rtol=1e-5)


@pytest.mark.cpu_device
def test_loop_body_with_unclaimable_node_declined(tmp_path):
    nodes = [helper.make_node("Cast", ["v_in"], ["v64"], name="to64", to=TP.DOUBLE),
             helper.make_node("Sin", ["v64"], ["s64"], name="sin64"),
             helper.make_node("Cast", ["s64"], ["v_out"], name="to32", to=F),
             helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_id")]
    body = graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
                 [vi("cond_out", B, []), vi("v_out", F, [3])])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], name="loop", body=body)
    m = harness.make_model([node], [("v0", F, [3]), ("M", I64, [])], [("v", F, None)])
    oc.check_declined(m, loop_feeds(m=3), "loop", "body node 'sin64' (Sin)", tmp_path)


# --- nesting ----------------------------------------------------------------------------------
def test_if_inside_loop_body():
    """A Loop whose body holds an If on the iteration number's parity, reading an outer value
    of the main graph from inside the branch."""
    then_g = graph([helper.make_node("Add", ["v_in", "w"], ["t"], name="then_add")], "then", [],
                   [vi("t", F, [3])])
    else_g = graph([helper.make_node("Mul", ["v_in", "w"], ["e"], name="else_mul")], "else", [],
                   [vi("e", F, [3])])
    nodes = [helper.make_node("Mod", ["i", "two"], ["r"], name="b_mod"),
             helper.make_node("Equal", ["r", "zero"], ["even"], name="b_eq"),
             helper.make_node("If", ["even"], ["v_out"], name="b_if", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_id")]
    body = graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
                 [vi("cond_out", B, []), vi("v_out", F, [3])])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], name="loop", body=body)
    m = harness.make_model([node], [("v0", F, [3]), ("M", I64, []), ("w", F, [3])],
                           [("v", F, None)],
                           initializers=[("two", np.array(2, np.int64)),
                                         ("zero", np.array(0, np.int64))])
    feeds = dict(loop_feeds(m=5), w=np.array([1.5, -0.5, 2], np.float32))
    harness.check_against_cpu(m, feeds)


def test_sequence_inside_a_loop_body_is_declined_with_the_reason(tmp_path):
    """Sequences live only at a group's top level: a body that splits into a sequence keeps the
    Loop on ORT, with the reason, and the model still runs right."""
    body = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x_in"], ["parts"], name="split", axis=0),
         helper.make_node("SequenceAt", ["parts", "zero"], ["first"], name="at"),
         helper.make_node("Add", ["x_in", "x_in"], ["x_out"], name="dbl"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="c")],
        "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, []),
         helper.make_tensor_value_info("x_in", TP.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_value_info("x_out", TP.FLOAT, [2]),
         helper.make_tensor_value_info("first", TP.FLOAT, [1])],
        [helper.make_tensor("zero", TP.INT64, [], [0])])
    loop = helper.make_node("Loop", ["m", "", "x"], ["y", "firsts"], name="loop", body=body)
    model = harness.make_model([loop], [("x", TP.FLOAT, [2])],
                               [("y", TP.FLOAT, None), ("firsts", TP.FLOAT, None)],
                               initializers=[("m", np.array(3, np.int64))], opset=17)
    oc.check_declined(model, {"x": np.array([1.0, 2.0], np.float32)}, "loop",
                      "is a sequence or optional", tmp_path)


def chain(prefix, op, n, start="x"):
    nodes, cur = [], start
    for i in range(n):
        nodes.append(helper.make_node(op, [cur, "y"], [f"{prefix}{i}"], name=f"{prefix}{i}"))
        cur = f"{prefix}{i}"
    return nodes, cur


def test_if_with_computed_cond_compiles_one_variant_per_cond():
    """An If whose cond is computed is value-keyed: the plan evaluates cond before the call and
    keeps one compiled variant per value, so the whole If (80 branch nodes here) compiles with
    the node before it, and alternating conds hit the two variants."""
    then_nodes, t_out = chain("t", "Add", 40)
    else_nodes, e_out = chain("e", "Mul", 40)
    nodes = [helper.make_node("Relu", ["a"], ["x"], name="relu"),
             helper.make_node("ReduceSum", ["a"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["out"], name="if",
                              then_branch=graph(then_nodes, "then", [], [vi(t_out)]),
                              else_branch=graph(else_nodes, "else", [], [vi(e_out)]))]
    m = harness.make_model(nodes, [("a", F, [3]), ("y", F, [3])], [("out", F, None)],
                           initializers=[("zero", np.array(0, np.float32))])
    rec = harness.Recorded(m)
    cpu = harness.cpu_session(m)
    y = np.array([0.5, 1.0, 1.5], np.float32)
    for sign in (1, -1, 1, -1, 1):
        feeds = {"a": sign * np.array([1.0, 2.0, 3.0], np.float32), "y": y}
        np.testing.assert_allclose(rec.session.run(None, feeds)[0], cpu.run(None, feeds)[0],
                                   rtol=1e-5)
    group = harness.only_group(rec.close())
    assert group["path"] == "keyed" and not group["turned_eager"], group
    assert group["decided_by"] == {"node": "if", "op": "If", "class": "value_keyed"}, group
    assert (group["compiled_runs"], group["eager_runs"]) == (5, 0), group
    assert (group["cache_misses"], group["cache_hits"]) == (2, 3), group
    assert group["host_reads"] == 5, group  # cond, read before each call; the traces read none


def test_if_holding_an_if_with_computed_cond_is_claimed_branch_by_branch(tmp_path):
    """A branch holding an If with a computed cond would make the whole If run eagerly (keys
    are computed for a group's own graph only), so such an If is declined with the reason and
    ORT offers us its branches, whose nodes, the inner If included, are claimed on their own."""
    inner_then, it_out = chain("it", "Add", 3)
    inner_else, ie_out = chain("ie", "Mul", 3)
    inner = helper.make_node("If", ["c2"], ["inner_out"], name="inner_if",
                             then_branch=graph(inner_then, "ithen", [], [vi(it_out)]),
                             else_branch=graph(inner_else, "ielse", [], [vi(ie_out)]))
    then_nodes = [helper.make_node("Greater", ["x", "y"], ["gt"], name="cmp"),
                  helper.make_node("ReduceMax", ["gt_f"], ["c2f"], name="rmax", keepdims=0),
                  helper.make_node("Cast", ["gt"], ["gt_f"], name="cast", to=TP.FLOAT),
                  helper.make_node("Cast", ["c2f"], ["c2"], name="cast2", to=TP.BOOL), inner]
    # keep a topological order for the branch
    then_nodes = [then_nodes[0], then_nodes[2], then_nodes[1], then_nodes[3], inner]
    else_nodes, e_out = chain("e", "Sub", 3)
    nodes = [helper.make_node("Relu", ["a"], ["x"], name="relu"),
             helper.make_node("If", ["c"], ["out"], name="if",
                              then_branch=graph(then_nodes, "then", [], [vi("inner_out")]),
                              else_branch=graph(else_nodes, "else", [], [vi(e_out)]))]
    m = harness.make_model(nodes, [("a", F, [3]), ("y", F, [3]), ("c", B, [])], [("out", F, None)])
    # ORT asks again once the branches are placed: the last report gives that reason
    for c in (True, False):
        oc.check_declined(m, dict(FEEDS, c=np.array(c)), "if",
                          "already placed on MLXExecutionProvider", tmp_path)
    s = harness.mlx_session(m, allow_cpu=True)
    placed = harness.assignment(s)
    assert placed.get("inner_if") == harness.EP and placed.get("e2") == harness.EP, placed


def nested_loops_model(inner_m, outer_m_const=None):
    """Loop(M) { Loop(inner_m) { v + 1 } }: v0 + M * inner_m. inner_m is a constant of the outer
    body; M an input, or a constant when outer_m_const is given."""
    inner = graph([helper.make_node("Add", ["w_in", "one"], ["w_out"], name="inner_add"),
                   helper.make_node("Identity", ["c_in"], ["c_out"], name="inner_id")], "inner",
                  [vi("j", I64, []), vi("c_in", B, []), vi("w_in", F, [3])],
                  [vi("c_out", B, []), vi("w_out", F, [3])])
    outer = graph([helper.make_node("Loop", ["n", "", "v_in"], ["v_out"], name="inner_loop",
                                    body=inner),
                   helper.make_node("Identity", ["cond_in"], ["cond_out"], name="outer_id")],
                  "outer", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
                  [vi("cond_out", B, []), vi("v_out", F, [3])],
                  inits=[numpy_helper.from_array(np.array(inner_m, np.int64), "n")])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], name="loop", body=outer)
    inits = [("one", np.array(1, np.float32))]
    inputs = [("v0", F, [3])]
    if outer_m_const is None:
        inputs.append(("M", I64, []))
    else:
        inits.append(("M", np.array(outer_m_const, np.int64)))
    return harness.make_model([node], inputs, [("v", F, None)], initializers=inits)


def test_nested_loops_unrolling_too_much_declined_at_claim_time(tmp_path):
    """Two nested Loops of 4096 constant iterations each would unroll 16.7M bodies (15.7 GB
    resident before failing): declined with the reason, and ORT runs them right."""
    m = nested_loops_model(4096, outer_m_const=4096)
    oc.check_declined(m, {"v0": np.zeros(3, np.float32)}, "loop", "nested loops", tmp_path)


def test_nested_loops_over_the_node_cap_at_run_time_name_the_node():
    """The same nesting with a computed outer trip count fails the Run naming the node once its
    unrolling passes the cap, and the session stays usable."""
    s = harness.mlx_session(nested_loops_model(4096))
    with pytest.raises(Exception, match=r"node 'loop' \(Loop\)"):
        s.run(None, {"v0": np.zeros(3, np.float32), "M": np.array(4096, np.int64)})
    out = s.run(None, {"v0": np.zeros(3, np.float32), "M": np.array(2, np.int64)})[0]
    np.testing.assert_array_equal(out, np.full(3, 2 * 4096, np.float32))
