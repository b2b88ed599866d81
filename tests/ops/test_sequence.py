"""Sequence and optional rows (src/ops/sequence.c) and the boundary rule that keeps such values
inside one MLX group (src/ep/containers.c): SplitToSequence (scalar, 1-D and default splits,
uneven pieces, keepdims, negative axes) feeding SequenceAt; SequenceConstruct / SequenceInsert /
SequenceErase / SequenceEmpty / SequenceLength / ConcatFromSequence (concat and stack) over
float, int64, float16 and bool; Optional / OptionalHasElement / OptionalGetElement; negative and
computed positions; compiled and eager paths; an out-of-range position failing the run with the
node named while the session survives; and the declines: a sequence that is a graph output or
is read by a node left on CPU stays on CPU, with the reason in the report, and the model still
gives the CPU provider's answers."""
import json

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import onnxruntime as ort
import onnxruntime_ep_mlx as mlx
import ops_common as oc
from mlx_harness import counts, run_recorded

F = TP.FLOAT


def unoptimized_session(model, allow_cpu=False, report=None):
    """An MLX session without ORT's graph optimisations, which would fold input-less nodes and
    remove Identity before the EP sees them."""
    so = mlx.session_options({"report_file": str(report)} if report else None)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if not allow_cpu:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return ort.InferenceSession(model.SerializeToString(), so)


def node(op, ins, outs, name, **attrs):
    return helper.make_node(op, ins, outs, name=name, **attrs)


def i64(*v):
    return np.array(v if len(v) != 1 else v[0], np.int64)


# --- SplitToSequence -> SequenceAt -> Add ------------------------------------------------------
SPLITS = [
    # (split initializer or None, axis, keepdims, position, x shape)
    (None, 0, 1, 2, (4, 3)),
    (None, 1, 0, -1, (2, 5)),
    (None, -1, 0, 0, (2, 3, 4)),
    (i64(2), 0, 1, -1, (5, 3)),             # scalar split, uneven: pieces 2, 2, 1
    (i64(3), 1, 1, 1, (2, 7)),               # 3, 3, 1
    (np.array([1, 3, 1], np.int64), 0, 1, 1, (5, 2)),  # 1-D, uneven lengths
    (np.array([2, 2], np.int32), -2, 0, -2, (4, 3)),   # int32 split; keepdims ignored
]


def split_at_model(split, axis, keepdims, position, shape):
    ins = ["x"] + (["split"] if split is not None else [])
    nodes = [node("SplitToSequence", ins, ["seq"], "split", axis=axis, keepdims=keepdims),
             node("SequenceAt", ["seq", "pos"], ["item"], "at"),
             node("Add", ["item", "item"], ["y"], "add")]
    inits = [("pos", i64(position))] + ([("split", split)] if split is not None else [])
    return harness.make_model(nodes, [("x", F, list(shape))], [("y", F, None)], inits, opset=17)


@pytest.mark.parametrize("split,axis,keepdims,position,shape", SPLITS)
def test_split_to_sequence_at(split, axis, keepdims, position, shape):
    harness.check_against_cpu(split_at_model(split, axis, keepdims, position, shape),
                              {"x": harness.rand(shape)})


# --- SequenceConstruct -> SequenceInsert -> ConcatFromSequence ---------------------------------
DTYPES = [np.float32, np.int64, np.float16, np.bool_]


def construct_insert_concat(elem, position, axis, new_axis, shape=(2, 3)):
    ins = ["seq", "c"] + (["pos"] if position is not None else [])
    nodes = [node("SequenceConstruct", ["a", "b"], ["seq"], "construct"),
             node("SequenceInsert", ins, ["seq2"], "insert"),
             node("ConcatFromSequence", ["seq2"], ["y"], "concat", axis=axis, new_axis=new_axis)]
    inits = [("pos", i64(position))] if position is not None else []
    return harness.make_model(nodes, [(k, elem, list(shape)) for k in "abc"], [("y", elem, None)],
                              inits, opset=17)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("position,axis,new_axis", [(None, 0, 0), (0, 1, 0), (-1, -1, 0),
                                                    (2, 0, 1), (-2, 2, 1), (1, -3, 1)])
def test_construct_insert_concat(dtype, position, axis, new_axis):
    feeds = {k: harness.rand((2, 3), dtype, seed=i) for i, k in enumerate("abc")}
    harness.check_against_cpu(construct_insert_concat(harness.onnx_type(dtype), position, axis,
                                                      new_axis), feeds)


def test_concat_items_of_different_lengths():
    """Items of a sequence may differ in shape: [x[:, :1], x[:, 1:]] concatenated back."""
    nodes = [node("SplitToSequence", ["x", "split"], ["seq"], "split", axis=1),
             node("SequenceErase", ["seq", "zero"], ["rest"], "erase"),
             node("SequenceInsert", ["rest", "x"], ["seq2"], "insert"),
             node("ConcatFromSequence", ["seq2"], ["y"], "concat", axis=1)]
    m = harness.make_model(nodes, [("x", F, [3, 4])], [("y", F, None)],
                           [("split", np.array([1, 3], np.int64)), ("zero", i64(0))])
    harness.check_against_cpu(m, {"x": harness.rand((3, 4))})


# --- SequenceEmpty, SequenceInsert, SequenceErase, SequenceLength ------------------------------
@pytest.mark.parametrize("erase_at", [None, 0, -2])
def test_empty_insert_erase_length(erase_at):
    erase_ins = ["s2"] + (["epos"] if erase_at is not None else [])
    nodes = [node("SequenceEmpty", [], ["s0"], "empty", dtype=TP.INT64),
             node("SequenceInsert", ["s0", "a"], ["s1"], "ins_a"),
             node("SequenceInsert", ["s1", "b", "zero"], ["s2"], "ins_b_front"),
             node("SequenceErase", erase_ins, ["s3"], "erase"),
             node("SequenceLength", ["s3"], ["n"], "length"),
             node("SequenceLength", ["s0"], ["n0"], "length0"),
             node("ConcatFromSequence", ["s3"], ["y"], "concat", axis=0)]
    inits = [("zero", i64(0))] + ([("epos", i64(erase_at))] if erase_at is not None else [])
    m = harness.make_model(nodes, [("a", TP.INT64, [2]), ("b", TP.INT64, [3])],
                           [("n", TP.INT64, None), ("n0", TP.INT64, None),
                            ("y", TP.INT64, None)], inits)
    got, _, _ = harness.check_against_cpu(m, {"a": i64(1, 2), "b": i64(7, 8, 9)})
    assert got[0] == 1 and got[1] == 0


# --- Optional ----------------------------------------------------------------------------------
def test_optional_tensor_roundtrip():
    nodes = [node("Optional", ["x"], ["o"], "opt"),
             node("OptionalHasElement", ["o"], ["has"], "has"),
             node("OptionalGetElement", ["o"], ["e"], "get"),
             node("Relu", ["e"], ["y"], "relu"),
             node("Optional", [], ["none"], "opt_none", type=helper.make_tensor_type_proto(F, [])),
             node("OptionalHasElement", ["none"], ["has_none"], "has_none"),
             node("OptionalHasElement", ["x"], ["has_x"], "has_tensor"),
             node("OptionalGetElement", ["x"], ["x2"], "get_tensor")]
    m = harness.make_model(nodes, [("x", F, [2, 3])],
                           [("has", TP.BOOL, []), ("y", F, None), ("has_none", TP.BOOL, []),
                            ("has_x", TP.BOOL, []), ("x2", F, None)], opset=18)
    got, _, _ = harness.check_against_cpu(m, {"x": harness.rand((2, 3))})
    assert got[0] and not got[2] and got[3]


def test_optional_has_element_absent_input():
    nodes = [node("OptionalHasElement", [""], ["has"], "has"),
             node("Or", ["has", "x"], ["y"], "or")]
    m = harness.make_model(nodes, [("x", TP.BOOL, [2])], [("y", TP.BOOL, None)], opset=18)
    s = unoptimized_session(m)
    assert set(harness.assignment(s).values()) == {harness.EP}
    x = np.array([True, False])
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], x)


def test_empty_optional_get_fails_naming_the_node():
    nodes = [node("Optional", [], ["none"], "opt_none", type=helper.make_tensor_type_proto(F, [])),
             node("OptionalGetElement", ["none"], ["e"], "get_empty"),
             node("Add", ["e", "x"], ["y"], "add")]
    m = harness.make_model(nodes, [("x", F, [])], [("y", F, None)], opset=18)
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match=r"node 'get_empty' \(OptionalGetElement\).*empty"):
        s.run(None, {"x": np.array(1, np.float32)})


# --- computed positions, errors, compile paths -------------------------------------------------
def computed_position_model():
    nodes = [node("SplitToSequence", ["x"], ["seq"], "split", axis=0),
             node("SequenceAt", ["seq", "pos"], ["item"], "at_computed"),
             node("Mul", ["item", "item"], ["y"], "mul")]
    return harness.make_model(nodes, [("x", F, [4, 2]), ("pos", TP.INT64, [])],
                              [("y", F, None)])


def test_computed_position_and_out_of_range_error():
    m = computed_position_model()
    x = harness.rand((4, 2))
    for p in (0, 3, -4, -1):
        harness.check_against_cpu(m, {"x": x, "pos": i64(p)})
    s = harness.mlx_session(m)
    with pytest.raises(Exception, match=r"node 'at_computed' \(SequenceAt\).*position 4 is out "
                                        r"of range for a sequence of 4"):
        s.run(None, {"x": x, "pos": i64(4)})
    with pytest.raises(Exception, match=r"node 'at_computed' \(SequenceAt\).*position -5"):
        s.run(None, {"x": x, "pos": i64(-5)})
    # the session survives and still serves valid positions
    np.testing.assert_allclose(s.run(None, {"x": x, "pos": i64(1)})[0], x[1:2] * x[1:2])


def test_constant_out_of_range_insert_fails_naming_the_node():
    m = construct_insert_concat(F, 5, 0, 0)
    s = harness.mlx_session(m)
    feeds = {k: harness.rand((2, 3), seed=i) for i, k in enumerate("abc")}
    with pytest.raises(Exception, match=r"node 'insert' \(SequenceInsert\).*position 5"):
        s.run(None, feeds)


def split_concat_chain():
    """x -> SplitToSequence -> SequenceAt(-1) / Length ... -> Tanh: one group with input x."""
    nodes = [node("SplitToSequence", ["x"], ["seq"], "split", axis=0, keepdims=0),
             node("SequenceErase", ["seq"], ["seq2"], "erase"),
             node("SequenceInsert", ["seq2", "x0"], ["seq3"], "insert"),
             node("ConcatFromSequence", ["seq3"], ["c"], "stack", axis=0, new_axis=1),
             node("Tanh", ["c"], ["y"], "tanh")]
    inits = [("x0", np.zeros((3,), np.float32))]
    return harness.make_model(nodes, [("x", F, ["N", 3])], [("y", F, None)], inits)


def construct_chain():
    nodes = [node("Mul", ["x", "x"], ["a"], "mul"),
             node("SequenceConstruct", ["x", "a"], ["seq"], "construct"),
             node("SequenceAt", ["seq", "one"], ["b"], "at"),
             node("ConcatFromSequence", ["seq"], ["c"], "concat", axis=0),
             node("Add", ["b", "b"], ["d"], "add"),
             node("Concat", ["c", "d"], ["y"], "cat", axis=0)]
    return harness.make_model(nodes, [("x", F, ["N", "M"])], [("y", F, None)],
                              [("one", i64(1))])


def test_split_group_compiles_keyed_per_shape():
    [g] = run_recorded(split_concat_chain(), [(3, 3), (5, 3), (3, 3)])
    assert g["path"] == "keyed", g
    assert g["decided_by"] == {"node": "split", "op": "SplitToSequence", "class": "shape_keyed"}, g
    assert counts(g, "compiled_runs", "fallbacks", "cache_misses") == (3, 0, 2), g


def test_construct_group_compiles_shapeless():
    [g] = run_recorded(construct_chain(), [(2, 3), (4, 5)])
    assert g["path"] == "shapeless", g
    assert counts(g, "compiled_runs", "fallbacks") == (2, 0), g


@pytest.mark.parametrize("build", [split_concat_chain, construct_chain])
def test_eager_path_gives_the_same_answers(build):
    [g] = run_recorded(build(), [(3, 3), (2, 3)], env={"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"})
    assert g["path"] == "eager" and g["eager_runs"] == 2, g


def test_computed_position_is_claimed_without_declines(tmp_path):
    m = computed_position_model()
    s = harness.mlx_session(m, provider_options={"report_file": str(tmp_path / "r.json")})
    x = harness.rand((4, 2))
    np.testing.assert_allclose(s.run(None, {"x": x, "pos": i64(2)})[0], x[2:3] ** 2)
    assert json.loads((tmp_path / "r.json").read_text())["declined"] == []


# --- declines: the boundary rule ---------------------------------------------------------------
def test_sequence_graph_output_is_declined(tmp_path):
    seq_out = helper.make_tensor_sequence_value_info("seq", F, None)
    nodes = [node("SplitToSequence", ["x"], ["seq"], "split", axis=0),
             node("SequenceAt", ["seq", "pos"], ["item"], "at"),
             node("Relu", ["item"], ["y"], "relu")]
    m = harness.make_model(nodes, [("x", F, [3, 2])], [("y", F, None), seq_out],
                           [("pos", i64(1))])
    x = harness.rand((3, 2))
    report = tmp_path / "partition.json"
    s = harness.mlx_session(m, allow_cpu=True, provider_options={"report_file": str(report)})
    placed = harness.assignment(s)
    assert placed["split"] == placed["at"] == "CPUExecutionProvider"
    assert placed["relu"] == harness.EP  # the tensor part stays on MLX
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    want = "sequence value 'seq' would cross the MLX boundary (it is a graph output)"
    assert declined["split"] == want and declined["at"] == want
    got, ref = s.run(None, {"x": x}), harness.cpu_session(m).run(None, {"x": x})
    np.testing.assert_allclose(got[0], ref[0])
    for g, r in zip(got[1], ref[1]):
        np.testing.assert_allclose(g, r)


def test_sequence_read_by_a_cpu_node_is_declined(tmp_path):
    """Identity of a sequence is not claimed: the sequence around it stays on CPU."""
    nodes = [node("SequenceConstruct", ["a", "b"], ["seq"], "construct"),
             node("Identity", ["seq"], ["seq2"], "ident"),
             node("ConcatFromSequence", ["seq2"], ["c"], "concat", axis=0),
             node("Sigmoid", ["c"], ["y"], "sig")]
    m = harness.make_model(nodes, [("a", F, [2]), ("b", F, [3])], [("y", F, None)])
    feeds = {"a": harness.rand((2,)), "b": harness.rand((3,), seed=1)}
    report = tmp_path / "partition.json"
    s = unoptimized_session(m, allow_cpu=True, report=report)
    placed = harness.assignment(s)
    assert [placed[k] for k in ("construct", "ident", "concat")] == ["CPUExecutionProvider"] * 3
    assert placed["sig"] == harness.EP
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert declined["construct"] == ("sequence value 'seq' would cross the MLX boundary "
                                     "(consumer 'ident' (Identity) runs on CPU)")
    assert declined["concat"] == ("sequence value 'seq2' would cross the MLX boundary "
                                  "(producer 'ident' (Identity) runs on CPU)")
    np.testing.assert_allclose(s.run(None, feeds)[0],
                               harness.cpu_session(m).run(None, feeds)[0], rtol=1e-6)


def test_string_sequence_is_declined(tmp_path):
    nodes = [node("SequenceConstruct", ["a", "b"], ["seq"], "construct"),
             node("SequenceAt", ["seq", "pos"], ["y"], "at")]
    m = harness.make_model(nodes, [("a", TP.STRING, [2]), ("b", TP.STRING, [2])],
                           [("y", TP.STRING, None)], [("pos", i64(0))])
    oc.check_declined(m, None, "construct", "has element type string, which MLX cannot hold",
                      tmp_path)


def test_sequence_read_inside_an_if_branch_is_declined(tmp_path):
    """An If branch reads the sequence from the outer graph (an implicit input of the If, which
    runs on CPU): the producer and the branch's reader stay on CPU."""
    def branch(pos, name):
        at = node("SequenceAt", ["seq", pos], [f"{name}_out"], f"{name}_at")
        k = helper.make_tensor(pos, TP.INT64, [], [0 if name == "then" else 1])
        c = helper.make_node("Constant", [], [pos], name=f"{name}_pos", value=k)
        return helper.make_graph([c, at], name, [],
                                 [helper.make_tensor_value_info(f"{name}_out", F, None)])
    nodes = [node("SequenceConstruct", ["a", "b"], ["seq"], "construct"),
             helper.make_node("If", ["cond"], ["r"], name="if",
                              then_branch=branch("p0", "then"), else_branch=branch("p1", "else")),
             node("Neg", ["r"], ["y"], "neg")]
    m = harness.make_model(nodes, [("a", F, [2]), ("b", F, [3]), ("cond", TP.BOOL, [])],
                           [("y", F, None)])
    report = tmp_path / "partition.json"
    s = unoptimized_session(m, allow_cpu=True, report=report)
    placed = harness.assignment(s)
    assert placed["construct"] == "CPUExecutionProvider" and placed["neg"] == harness.EP
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert declined["construct"] == ("sequence value 'seq' would cross the MLX boundary "
                                     "(consumer 'if' (If) runs on CPU)")
    # the branches' SequenceAt read 'seq' from the outer graph: declined too (their reports
    # are separate GetCapability calls, and the report file keeps the last, the main graph's)
    assert placed.get("then_at") != harness.EP and placed.get("else_at") != harness.EP
    feeds = {"a": harness.rand((2,)), "b": harness.rand((3,), seed=1)}
    for c in (True, False):
        feeds["cond"] = np.array(c)
        np.testing.assert_allclose(s.run(None, feeds)[0],
                                   harness.cpu_session(m).run(None, feeds)[0])
