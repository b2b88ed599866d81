"""Partitioning and declines: a model split into several MLX groups around nodes the EP declines
runs correctly, the declines carry their reasons, and the CLI reports them without running."""
import json
import subprocess
import sys

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import EP, assignment, check_against_cpu, cpu_session, make_model, mlx_session


def split_model():
    """add0 (MLX) -> tostr/fromstr (strings: declined) -> add1 (MLX)"""
    nodes = [
        helper.make_node("Add", ["x", "y"], ["s"], name="add0"),
        helper.make_node("Cast", ["s"], ["s_str"], to=TP.STRING, name="tostr"),
        helper.make_node("Cast", ["s_str"], ["p"], to=TP.FLOAT, name="fromstr"),
        helper.make_node("Add", ["p", "y"], ["out"], name="add1"),
    ]
    return make_model(nodes, [("x", TP.FLOAT, [2, 3]), ("y", TP.FLOAT, [2, 3])],
                      [("out", TP.FLOAT, [2, 3])])


def feeds():
    rng = np.random.default_rng(1)
    return {"x": rng.random((2, 3), dtype=np.float32), "y": rng.random((2, 3), dtype=np.float32)}


def test_model_split_around_cpu_nodes_runs_correctly():
    check_against_cpu(split_model(), feeds(), on_cpu={"tostr", "fromstr"})


def test_two_mlx_groups_with_cpu_between():
    s = mlx_session(split_model(), allow_cpu=True)
    placed = assignment(s)
    assert placed["add0"] == EP and placed["add1"] == EP
    assert placed["fromstr"] == "CPUExecutionProvider"
    groups = {sub.ep_name: 0 for sub in s.get_provider_graph_assignment_info()}
    mlx_subgraphs = [sub for sub in s.get_provider_graph_assignment_info() if sub.ep_name == EP]
    assert len(mlx_subgraphs) == 2, groups


def test_fallback_disabled_fails_when_a_node_is_declined():
    try:
        mlx_session(split_model(), allow_cpu=False)
    except Exception as e:
        assert "CPU" in str(e) or "fallback" in str(e).lower()
    else:
        raise AssertionError("session creation should fail with CPU fallback disabled")


def test_report_cli_lists_declines_with_reasons(tmp_path):
    path = tmp_path / "split.onnx"
    path.write_bytes(split_model().SerializeToString())
    r = subprocess.run([sys.executable, "-m", "onnxruntime_ep_mlx", "report", str(path), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["nodes"] == 4 and rep["claimed"] == 2 and rep["groups"] == 2
    reasons = {d["name"]: d["reason"] for d in rep["declined"]}
    assert set(reasons) == {"tostr", "fromstr"}
    assert "has element type string, which MLX cannot hold" in reasons["fromstr"]
    text = subprocess.run([sys.executable, "-m", "onnxruntime_ep_mlx", "report", str(path)],
                          capture_output=True, text=True, check=True).stdout
    assert "MLX EP claims 2 of 4 nodes in 2 fused group(s)" in text
    assert "fromstr" in text


def test_unknown_op_domain_is_declined_with_reason(tmp_path):
    # Celu is a real ai.onnx op with an ORT CPU kernel: whatever we claim, the report must
    # say why a node is declined or show it claimed; here we only check the report is complete.
    model = make_model([helper.make_node("Add", ["x", "y"], ["out"], name="a")],
                       [("x", TP.FLOAT, [2]), ("y", TP.FLOAT, [2])], [("out", TP.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    r = subprocess.run([sys.executable, "-m", "onnxruntime_ep_mlx", "report", str(path), "--json"],
                       capture_output=True, text=True, check=True)
    rep = json.loads(r.stdout)
    assert rep["claimed"] + len(rep["declined"]) == rep["nodes"] == 1


def test_cpu_reference_agrees_on_split_model():
    got = mlx_session(split_model(), allow_cpu=True).run(None, feeds())[0]
    ref = cpu_session(split_model()).run(None, feeds())[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_report_cli_needs_no_cpu_kernel_for_declined_nodes(tmp_path):
    """A StringNormalizer whose locale ORT's CPU provider cannot make a kernel for fails session
    creation after the partition is known; the report still lists the claim and the decline, with
    ORT's error beside them, and the CLI exits 0 without a traceback."""
    nodes = [helper.make_node("Add", ["x", "x"], ["y"], name="double"),
             helper.make_node("StringNormalizer", ["words"], ["norm"], name="normalize",
                              case_change_action="LOWER", locale="xx_NOWHERE.bogus")]
    model = make_model(nodes, [("x", TP.FLOAT, [2]), ("words", TP.STRING, [3])],
                       [("y", TP.FLOAT, [2]), ("norm", TP.STRING, None)])
    path = tmp_path / "strings.onnx"
    path.write_bytes(model.SerializeToString())
    r = subprocess.run([sys.executable, "-m", "onnxruntime_ep_mlx", "report", str(path), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    rep = json.loads(r.stdout)
    assert rep["nodes"] == 2 and rep["claimed"] == 1
    assert [d["name"] for d in rep["declined"]] == ["normalize"]
    assert "session_error" in rep
    text = subprocess.run([sys.executable, "-m", "onnxruntime_ep_mlx", "report", str(path)],
                          capture_output=True, text=True)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "normalize" in text.stdout
