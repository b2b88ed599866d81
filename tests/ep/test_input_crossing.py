"""How a Run's inputs and a plan's constants cross into MLX. On the CPU device MLX works on ORT's
buffers in place; on the GPU MLX reads each input when it evaluates it, through its own loader,
straight into device memory, and each constant the same way at plan build, small ones keeping
their bytes for host reads (src/mlx/host_io.cpp). ONNXRUNTIME_EP_MLX_GPU_CROSSING=1 (read at
session creation) puts the CPU device on the GPU's path, so these tests check that path here:
every element type MLX holds, rank 0 to 5, empty inputs, inputs fed to several groups, repeated
Runs with new values in the same buffers, constants small and large, read on the host (a Reshape's
shape) and by kernels, each against ORT's CPU provider with the nodes proven to have run on
MLX."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlx_harness import check_against_cpu, make_model, onnx_type

SWITCH = "ONNXRUNTIME_EP_MLX_GPU_CROSSING"


@pytest.fixture
def gpu_crossing():
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
def test_every_element_type_crosses(gpu_crossing, dtype):
    check_against_cpu(identity_model(dtype, (3, 5)), {"x": values(dtype, (3, 5), 1)})


@pytest.mark.parametrize("shape", [(), (7,), (1, 1), (2, 3, 4), (2, 1, 3, 1, 5), (0, 4), (3, 0)])
def test_every_rank_and_empty_inputs_cross(gpu_crossing, shape):
    check_against_cpu(identity_model(np.float32, shape), {"x": values(np.float32, shape, 2)})


def test_a_large_input_crosses_whole(gpu_crossing):
    """Large enough that a reader that stopped early, or read the header's bytes as data, shows."""
    x = values(np.float32, (2, 3, 256, 257), 3)
    got, _, _ = check_against_cpu(identity_model(np.float32, x.shape), {"x": x})
    np.testing.assert_array_equal(got[1], x)


def test_new_values_in_the_same_buffer_are_read_each_run(gpu_crossing):
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


def test_an_input_read_by_two_groups(gpu_crossing):
    """An input that feeds MLX nodes on both sides of a CPU-provider node: two groups each load it."""
    t = TensorProto.FLOAT
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Sub", ["a", "x"], ["b"], name="second")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", t, [2, 6])],
                       [helper.make_tensor_value_info("b", t, [2, 6])], opset=17)
    check_against_cpu(model, {"x": values(np.float32, (2, 6), 5)})


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_])
def test_constants_of_every_size_and_type_cross(gpu_crossing, dtype):
    """A small constant (kept for host reads) and a large one (over 64 KiB: device only), both
    read by a kernel, and a shape constant the Reshape's translator reads on the host."""
    t = onnx_type(np.dtype(dtype))
    small = values(dtype, (4, 8), 6)
    large = values(dtype, (160, 128), 7)  # 20,480 elements: over 64 KiB for 4-byte types
    op = "Or" if dtype == np.bool_ else "Add"
    nodes = [helper.make_node(op, ["x", "small"], ["a"], name="with_small"),
             helper.make_node("Reshape", ["a", "shape"], ["b"], name="reshaped"),
             helper.make_node(op, ["y", "large"], ["c"], name="with_large")]
    inits = [numpy_helper.from_array(small, "small"), numpy_helper.from_array(large, "large"),
             numpy_helper.from_array(np.array([8, 4], np.int64), "shape")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", t, [4, 8]),
                               helper.make_tensor_value_info("y", t, [160, 128])],
                       [helper.make_tensor_value_info("b", t, [8, 4]),
                        helper.make_tensor_value_info("c", t, [160, 128])], inits, opset=17)
    check_against_cpu(model, {"x": values(dtype, (4, 8), 8), "y": values(dtype, (160, 128), 9)})


def test_a_model_runs_alike_on_both_paths(gpu_crossing):
    """A whole model (MatMul weights, layer norms, Gelu, softmax: MiniLM's shapes at one layer's
    size) on the GPU's path against ORT's CPU provider."""
    rng = np.random.default_rng(10)
    t = TensorProto.FLOAT
    w1 = rng.standard_normal((64, 256)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((256, 64)).astype(np.float32) * 0.1
    gamma = np.ones(64, np.float32)
    beta = np.zeros(64, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="up"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["d"], name="down"),
             helper.make_node("Add", ["d", "x"], ["s"], name="residual"),
             helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], name="norm",
                              axis=-1, epsilon=1e-5),
             helper.make_node("Softmax", ["y"], ["p"], name="softmax", axis=-1)]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", t, [2, 16, 64])],
                       [helper.make_tensor_value_info("p", t, [2, 16, 64])], inits, opset=17)
    check_against_cpu(model, {"x": rng.standard_normal((2, 16, 64)).astype(np.float32)},
                      rtol=1e-4, atol=1e-5)
