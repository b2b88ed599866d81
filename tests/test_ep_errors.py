"""Failures at run time: an error inside MLX comes back as an ORT error naming the node, the
process lives, and the same session keeps working for valid inputs."""
import threading

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import make_model, mlx_session


def broadcast_model():
    # N and M are independent symbolic dims: ORT cannot reject a mismatch before we run.
    return make_model([helper.make_node("Add", ["a", "b"], ["c"], name="the_add"),
                       helper.make_node("Mul", ["c", "c"], ["d"], name="the_mul")],
                      [("a", TP.FLOAT, ["N"]), ("b", TP.FLOAT, ["M"])], [("d", TP.FLOAT, None)])


def test_mlx_failure_becomes_ort_error_naming_the_node():
    s = mlx_session(broadcast_model())
    with pytest.raises(Exception, match=r"MLXExecutionProvider: node 'the_add' \(Add\).*broadcast"):
        s.run(None, {"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})
    # the process is alive and the session still serves valid inputs
    out = s.run(None, {"a": np.ones(3, np.float32), "b": np.full(3, 2, np.float32)})[0]
    np.testing.assert_array_equal(out, np.full(3, 9, np.float32))


def test_wrong_input_dtype_is_rejected_before_mlx():
    s = mlx_session(broadcast_model())
    with pytest.raises(Exception):
        s.run(None, {"a": np.ones(3, np.int64), "b": np.ones(3, np.float32)})


def test_concurrent_runs_on_one_session_are_correct():
    s = mlx_session(broadcast_model())
    errors = []

    def worker(k):
        try:
            for i in range(20):
                a = np.full(5, k + i, np.float32)
                b = np.full(5, 1, np.float32)
                out = s.run(None, {"a": a, "b": b})[0]
                np.testing.assert_array_equal(out, (a + b) * (a + b))
        except Exception as e:  # collected: an assert in a thread would be lost
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"},
                                 {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}],
                         ids=["shapeless", "keyed", "eager"])
def test_shapes_that_stop_broadcasting_fail_on_every_path(env, monkeypatch):
    """Inputs that broadcast on the first runs and not on a later one fail cleanly, naming the
    node, on every path. MLX's shapeless replay does not re-check shapes, so a shapeless variant
    is keyed on which dims are 1 and which are equal (src/plan/run.c): without that, [128, 512]
    + [3, 512] after two runs of [128, 512] + [128, 512] read past the second buffer."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    model = make_model([helper.make_node("Add", ["x", "y"], ["s"], name="add_rows"),
                        helper.make_node("Relu", ["s"], ["r"], name="relu")],
                       [("x", TP.FLOAT, ["N", 512]), ("y", TP.FLOAT, ["M", 512])],
                       [("r", TP.FLOAT, None)])
    for _ in range(2):  # a second session: MLX's compile cache has seen this function
        s = mlx_session(model)
        x = np.ones((128, 512), np.float32)
        for _ in range(2):
            np.testing.assert_array_equal(s.run(None, {"x": x, "y": x})[0], 2 * x)
        with pytest.raises(Exception, match=r"node 'add_rows' \(Add\).*broadcast"):
            s.run(None, {"x": x, "y": np.ones((3, 512), np.float32)})
        np.testing.assert_array_equal(s.run(None, {"x": x[:3], "y": x[:3]})[0], 2 * x[:3])
