"""How a Run's inputs cross into MLX. On the CPU device MLX works on ORT's buffers in place; on the
GPU MLX reads each input when it evaluates it, through its own loader, straight into device memory
(src/mlx/host_io.cpp). ONNXRUNTIME_EP_MLX_READ_INPUTS=1 (read at session creation) puts the CPU
device on the GPU's path, so these tests check that path here: every element type MLX holds, rank 0
to 5, empty inputs, inputs fed to several groups, and repeated Runs with new values in the same
buffers, each against ORT's CPU provider with the nodes proven to have run on MLX."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

from mlx_harness import check_against_cpu, make_model, onnx_type

SWITCH = "ONNXRUNTIME_EP_MLX_READ_INPUTS"


@pytest.fixture
def read_inputs():
    os.environ[SWITCH] = "1"
    try:
        yield
    finally:
        del os.environ[SWITCH]


def identity_model(dtype, shape):
    """y = x + x and z = x: the Add reads the input as MLX loaded it; the Identity returns it."""
    t = onnx_type(np.dtype(dtype))
    op = "Or" if dtype == np.bool_ else "Add"
    nodes = [helper.make_node(op, ["x", "x"], ["y"], name="twice"),
             helper.make_node("Identity", ["x"], ["z"], name="same")]
    return make_model(nodes, [helper.make_tensor_value_info("x", t, list(shape))],
                      [helper.make_tensor_value_info("y", t, list(shape)),
                       helper.make_tensor_value_info("z", t, list(shape))], opset=17)


def values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.uint16, np.uint32, np.uint64, np.bool_])
def test_every_element_type_crosses(read_inputs, dtype):
    check_against_cpu(identity_model(dtype, (3, 5)), {"x": values(dtype, (3, 5), 1)})


@pytest.mark.parametrize("shape", [(), (7,), (1, 1), (2, 3, 4), (2, 1, 3, 1, 5), (0, 4), (3, 0)])
def test_every_rank_and_empty_inputs_cross(read_inputs, shape):
    check_against_cpu(identity_model(np.float32, shape), {"x": values(np.float32, shape, 2)})


def test_a_large_input_crosses_whole(read_inputs):
    """Large enough that a reader that stopped early, or read the header's bytes as data, shows."""
    x = values(np.float32, (2, 3, 256, 257), 3)
    got, _, _ = check_against_cpu(identity_model(np.float32, x.shape), {"x": x})
    np.testing.assert_array_equal(got[1], x)


def test_new_values_in_the_same_buffer_are_read_each_run(read_inputs):
    """The loader reads when MLX evaluates: a Run must see the buffer's values of that Run."""
    import onnxruntime_ep_mlx  # noqa: F401  (registers the EP for the harness session)
    from mlx_harness import mlx_session
    model = identity_model(np.float32, (4, 4))
    s = mlx_session(model)
    x = values(np.float32, (4, 4), 4)
    for k in range(3):
        x[...] = k * 10 + np.arange(16, dtype=np.float32).reshape(4, 4)
        y, z = s.run(None, {"x": x})
        np.testing.assert_array_equal(z, x)
        np.testing.assert_array_equal(y, x + x)


def test_an_input_read_by_two_groups(read_inputs):
    """An input that feeds MLX nodes on both sides of a CPU-provider node: two groups each load it."""
    t = TensorProto.FLOAT
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Sub", ["a", "x"], ["b"], name="second")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", t, [2, 6])],
                       [helper.make_tensor_value_info("b", t, [2, 6])], opset=17)
    check_against_cpu(model, {"x": values(np.float32, (2, 6), 5)})
