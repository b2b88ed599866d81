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


HUGE = 1 << 17  # [HUGE, HUGE] float32 is 64 GiB: every dim fits int32, the bytes fit no machine


@pytest.mark.parametrize("env", [{}, {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"},
                                 {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}],
                         ids=["shapeless", "keyed", "eager"])
def test_outputs_too_large_to_allocate_fail_naming_the_node(env, monkeypatch):
    """MLX's CPU allocator hands back a null buffer when malloc fails and its kernels write
    through it (SIGSEGV). An array larger than MLX's memory limit is refused when it is built, so
    the Run fails naming the node, and the session keeps serving small inputs; a shapeless group
    first traced small and then replayed on huge inputs is checked as well."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    model = make_model([helper.make_node("Add", ["a", "b"], ["s"], name="outer_add"),
                        helper.make_node("ReduceSum", ["s"], ["y"], name="total", keepdims=0)],
                       [("a", TP.FLOAT, ["N", 1]), ("b", TP.FLOAT, [1, "N"])],
                       [("y", TP.FLOAT, None)], opset=18)
    s = mlx_session(model)
    small = {"a": np.ones((4, 1), np.float32), "b": np.ones((1, 4), np.float32)}
    assert s.run(None, small)[0] == 32
    with pytest.raises(Exception, match=r"node 'outer_add' \(Add\)"):
        s.run(None, {"a": np.ones((HUGE, 1), np.float32), "b": np.ones((1, HUGE), np.float32)})
    assert s.run(None, small)[0] == 32


def test_huge_products_tiles_and_pads_fail_naming_the_node():
    cases = [
        (helper.make_node("MatMul", ["x", "xt"], ["y"], name="big_matmul"),
         {"x": np.ones((HUGE, 1), np.float32), "xt": np.ones((1, HUGE), np.float32)}),
        (helper.make_node("Tile", ["x", "reps"], ["y"], name="big_tile"),
         {"x": np.ones((1, 1), np.float32), "reps": np.array([HUGE, HUGE], np.int64)}),
        (helper.make_node("Pad", ["x", "pads"], ["y"], name="big_pad"),
         {"x": np.ones((1, 1), np.float32), "pads": np.array([HUGE, HUGE, 0, 0], np.int64)}),
    ]
    for node, feeds in cases:
        inputs = [(k, TP.FLOAT if v.dtype == np.float32 else TP.INT64, list(v.shape))
                  for k, v in feeds.items()]
        s = mlx_session(make_model([node], inputs, [("y", TP.FLOAT, None)], opset=18))
        with pytest.raises(Exception, match=rf"node '{node.name}' \({node.op_type}\)"):
            s.run(None, feeds)


def test_a_constant_too_large_to_fold_fails_at_run_not_at_session_creation():
    """ConstantOfShape of [2^20, 2^15] (128 GiB) with a constant shape: folding it at session
    creation crashed inside InferenceSession(). The node is left unfolded; the session is made
    (as on ORT's CPU provider) and the Run fails naming the node."""
    from onnx import numpy_helper
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 15], np.int64), "shape")
    fill = helper.make_tensor("v", TP.FLOAT, [1], [1.0])
    model = make_model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="huge_fill",
                                         value=fill),
                        helper.make_node("Add", ["c", "x"], ["y"], name="add_x")],
                       [("x", TP.FLOAT, [1])], [("y", TP.FLOAT, None)], initializers=[shape])
    s = mlx_session(model)
    with pytest.raises(Exception, match=r"node 'huge_fill' \(ConstantOfShape\)"):
        s.run(None, {"x": np.ones(1, np.float32)})
