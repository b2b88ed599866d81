"""Linear-algebra rows (src/ops/linalg.c): Einsum over explicit and implicit outputs, "...",
diagonals, reductions, outer and batched products, spaces in the equation, float64 (CPU device)
and float16; integer operands declined; Det over single and batched matrices (singular ones
included) and bfloat16."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import ops_common as oc

F = TP.FLOAT


def einsum_model(equation, shapes, elem=F):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="n", equation=equation)
    return harness.make_model([node], [(nm, elem, list(s)) for nm, s in zip(names, shapes)],
                              [("y", elem, None)], opset=12)


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("...ij,jk", [(2, 2, 3, 4), (4, 2)]),
    ("...ii->...i", [(3, 4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ba", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("BIJ,BJK->BIK", [(2, 3, 4), (2, 4, 2)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM)
def test_einsum(equation, shapes):
    if equation == "i,i":
        shapes = [(5,), (5,)]
    feeds = {f"x{i}": harness.rand(s, seed=i) for i, s in enumerate(shapes)}
    harness.check_against_cpu(einsum_model(equation, shapes), feeds, rtol=1e-5, atol=1e-5)


def test_einsum_scalar():
    harness.check_against_cpu(einsum_model("->", [()]), {"x0": np.array(5.0, np.float32)})


@pytest.mark.cpu_device
def test_einsum_float64():
    shapes = [(2, 3, 4), (2, 4, 5)]
    rng = np.random.default_rng(1)
    feeds = {f"x{i}": rng.standard_normal(s) for i, s in enumerate(shapes)}
    got, _, _ = harness.check_against_cpu(einsum_model("bij,bjk->bik", shapes, TP.DOUBLE),
                                          feeds, rtol=1e-13, atol=1e-14)
    assert got[0].dtype == np.float64


def test_einsum_float16():
    """Against ORT's float32 result (no bfloat16 in Einsum-12's schema)."""
    shapes = [(3, 4), (4, 5)]
    feeds = {f"x{i}": harness.rand(s, seed=i) for i, s in enumerate(shapes)}
    ref = harness.cpu_session(einsum_model("ij,jk->ik", shapes)).run(None, feeds)
    oc.check_ref(einsum_model("ij,jk->ik", shapes, TP.FLOAT16),
                 {k: v.astype(np.float16) for k, v in feeds.items()},
                 [ref[0].astype(np.float16)], rtol=1e-2, atol=1e-2)


def test_einsum_integers_declined(tmp_path):
    m = einsum_model("ij,jk->ik", [(2, 3), (3, 2)], TP.INT32)
    feeds = {"x0": np.arange(6, dtype=np.int32).reshape(2, 3),
             "x1": np.arange(6, dtype=np.int32).reshape(3, 2)}
    oc.check_declined(m, feeds, "n", "does not take element type int32", tmp_path)


# --- Det --------------------------------------------------------------------------------------
def det_model(shape, elem=F, opset=22):
    node = helper.make_node("Det", ["x"], ["y"], name="n")
    return harness.make_model([node], [("x", elem, list(shape))], [("y", elem, None)],
                              opset=opset)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 5), (4, 3, 3), (2, 3, 4, 4)])
@pytest.mark.parametrize("opset", [11, 22])
def test_det(shape, opset):
    harness.check_against_cpu(det_model(shape, opset=opset), {"x": harness.rand(shape, seed=2)},
                              rtol=1e-4, atol=1e-5)


def test_det_singular_and_permuted():
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[0, 0], [0, 0]],
                  [[2, 0], [0, 3]]], np.float32)
    harness.check_against_cpu(det_model(x.shape), {"x": x})


def test_det_half_types():
    x = harness.rand((3, 3, 3), seed=3)
    oc.check(lambda e: det_model((3, 3, 3), e), {"x": x}, oc.BF16, scale=4)
