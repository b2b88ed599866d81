"""float64 on the CPU device: rows MLX computes exactly in float64 are claimed and agree with
ORT's CPU provider to within a few ulps; rows it would compute in float32 precision (exp, erf,
trigonometry) are declined with the reason, and the model still runs correctly."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import ops_common as oc
from mlx_harness import check_against_cpu, make_model

F64_EXACT = ["MatMul"]


def model(op, n_inputs, shape_a=(4, 5), shape_b=(5, 3)):
    names = ["a", "b"][:n_inputs]
    shapes = [shape_a, shape_b][:n_inputs]
    return make_model([helper.make_node(op, names, ["y"], name="node")],
                      [(nm, TP.DOUBLE, list(sh)) for nm, sh in zip(names, shapes)],
                      [("y", TP.DOUBLE, None)])


@pytest.mark.parametrize("op", F64_EXACT)
def test_exact_float64_rows_run_on_mlx(op):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    got, ref, _ = check_against_cpu(model(op, 2), {"a": a, "b": b}, rtol=1e-13, atol=1e-14)
    assert got[0].dtype == np.float64


def test_inexact_float64_row_is_declined_with_reason(tmp_path):
    m = make_model([helper.make_node("Exp", ["a"], ["y"], name="exp64")],
                   [("a", TP.DOUBLE, [3])], [("y", TP.DOUBLE, [3])])
    oc.check_declined(m, {"a": np.array([0.5, 1.0, 2.0])}, "exp64",
                      "MLX does not compute Exp exactly in float64", tmp_path, rtol=1e-15)
