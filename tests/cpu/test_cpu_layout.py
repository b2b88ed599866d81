"""Operand layout for MLX's fused CPU kernels (src/mlx/layout.cpp). MLX runs a
fused kernel through its contiguous, vectorised loop only when every operand that is not a
scalar is contiguous in the output's shape; otherwise through its strided loop, which g++ leaves
scalar. Two common ONNX patterns used to miss it, and each case here fails if they do again:
an activation applied to a convolution's channels-first view of a channels-last result (the
bridge now computes it on the result beneath and transposes back), and a [1]-shaped constant
(counted as a full operand unless it has no dimensions; the bridge makes it rank 0). A third, an
attention mask broadcast over heads and rows, is a true broadcast: the Add copies it out to the
full shape first (src/ops/elementwise.c). Each case
runs in a child process with its own TMPDIR, so MLX's kernel cache starts empty and lists
exactly the kernels this model needed; results are checked against ORT's CPU provider."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from mlx_harness import make_model

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: the harness
pytestmark = pytest.mark.cpu_device


def kernels_built(tmp_path, model, shape):
    """Runs the model (input x of `shape`) on the MLX EP's CPU device, compiled keyed on shapes,
    in a child process; returns the names of the fused kernels MLX built."""
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = textwrap.dedent(f"""
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options({{"device": "cpu"}})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({str(path)!r}, so)
        ref = ort.InferenceSession({str(path)!r}, providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).standard_normal({shape!r}).astype(np.float32)
        for _ in range(2):
            np.testing.assert_allclose(s.run(None, {{"x": x}})[0], ref.run(None, {{"x": x}})[0],
                                       rtol=1e-5, atol=1e-5)
    """)
    env = dict(os.environ, TMPDIR=str(tmp), ONNXRUNTIME_EP_MLX_NO_SHAPELESS="1",
               ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL="1")
    for k in ("TMP", "TEMP", "TEMPDIR"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [p.name for p in tmp.rglob("*.cpp")]


def const(name, value, shape):
    return numpy_helper.from_array(np.full(shape, value, np.float32), name)


def activation_chain(first_input, scale_shape):
    """x * scale + shift, then x * clip(x + 3, 0, 6) / 6 as exporters write HardSwish."""
    return [helper.make_node("Mul", ["scale", first_input], ["m"]),
            helper.make_node("Add", ["m", "shift"], ["a"]),
            helper.make_node("Add", ["a", "three"], ["a3"]),
            helper.make_node("Clip", ["a3", "zero", "six"], ["c"]),
            helper.make_node("Mul", ["a", "c"], ["p"]),
            helper.make_node("Div", ["p", "six"], ["y"])], \
        [const("scale", 1.25, scale_shape), const("shift", -0.5, scale_shape),
         const("three", 3, scale_shape), const("zero", 0, []), const("six", 6, [])]


@pytest.mark.parametrize("scale_shape", [[], [1]], ids=["rank0", "rank1"])
def test_one_element_constants_keep_the_contiguous_loop(tmp_path, scale_shape):
    nodes, inits = activation_chain("x", scale_shape)
    model = make_model(nodes, [("x", TP.FLOAT, [2, 8, 6, 10])], [("y", TP.FLOAT, None)],
                       initializers=inits)
    built = kernels_built(tmp_path, model, (2, 8, 6, 10))
    assert built and not [k for k in built if "_strided_" in k], built


@pytest.mark.parametrize("group,kernel", [(16, 3), (1, 1)], ids=["depthwise", "pointwise"])
def test_activation_after_a_convolution_runs_in_memory_order(tmp_path, group, kernel):
    """The convolution's result is channels-last; the activation reads the channels-first view
    of it. Both of these convolution forms write contiguous results with the bias inside. The
    convolution is returned too, so the chain is MLX's fused kernel, not the convolution
    kernel's epilogue (src/cpu/chain.c), and too small for a host kernel of its own."""
    c = 16
    rng = np.random.default_rng(1)
    nodes, inits = activation_chain("h", [1])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], group=group,
                              pads=[kernel // 2] * 4)] + nodes
    inits += [numpy_helper.from_array(rng.standard_normal((c, c // group, kernel, kernel))
                                      .astype(np.float32), "w"),
              numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")]
    model = make_model(nodes, [("x", TP.FLOAT, [1, c, 12, 20])],
                       [("y", TP.FLOAT, None), ("h", TP.FLOAT, None)], initializers=inits)
    built = kernels_built(tmp_path, model, (1, c, 12, 20))
    assert built and not [k for k in built if "_strided_" in k], built


def test_attention_mask_is_copied_out_before_its_add(tmp_path):
    """scores / 8 + mask, mask [1, 1, 1, T] over scores [1, H, T, T], then Relu: one fused kernel
    that would read the mask through its strided loop."""
    mask = np.where(np.arange(128) < 100, 0.0, -1e4).astype(np.float32).reshape(1, 1, 1, 128)
    nodes = [helper.make_node("Div", ["x", "eight"], ["d"]),
             helper.make_node("Add", ["d", "mask"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, [1, 4, 128, 128])], [("y", TP.FLOAT, None)],
                       initializers=[const("eight", 8, []),
                                     numpy_helper.from_array(mask, "mask")])
    built = kernels_built(tmp_path, model, (1, 4, 128, 128))
    assert built and not [k for k in built if "_strided_" in k], built


# Reductions of a convolution's channels-first view run on the channels-last array beneath, over
# the axes mapped through the permutation (src/mlx/layout.cpp, mx_reduce); the result is transposed
# back, or its axes dropped. Each case against ORT's CPU provider, every node on MLX: an axis
# mapped wrongly reduces other elements or leaves another shape.
REDUCE_CASES = [
    ("GlobalAveragePool", {}, None),
    ("ReduceMean", dict(axes=[2, 3], keepdims=1), None),
    ("ReduceMean", dict(axes=[-1], keepdims=0), None),
    ("ReduceMax", dict(axes=[1, -2], keepdims=0), None),
    ("ReduceLogSumExp", dict(axes=[1], keepdims=1), None),
    ("ReduceSum", dict(keepdims=0), [3, 1]),
    ("ReduceSum", dict(keepdims=1), [0, 2]),
]


@pytest.mark.parametrize("op,attrs,axes", REDUCE_CASES,
                         ids=[f"{c[0]}-{c[1].get('axes', c[2])}-{c[1].get('keepdims', 1)}"
                              for c in REDUCE_CASES])
def test_reduction_of_a_convolution_runs_beneath_its_view(op, attrs, axes):
    from mlx_harness import check_against_cpu
    rng = np.random.default_rng(2)
    inputs = ["h"] + (["axes"] if axes is not None else [])
    inits = [numpy_helper.from_array(rng.standard_normal((12, 6, 3, 3)).astype(np.float32), "w")]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node(op, inputs, ["y"], **attrs)]
    model = make_model(nodes, [("x", TP.FLOAT, [2, 6, 5, 7])], [("y", TP.FLOAT, None)],
                       initializers=inits)
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    check_against_cpu(model, {"x": x}, rtol=1e-5, atol=1e-5)


# An elementwise operation on a convolution's channels-first view and an operand that
# broadcasts against it (src/mlx/layout.cpp) runs on the channels-last array
# beneath, the other operand taken through the inverse permutation: a squeeze-and-excitation
# scale (itself a transposed view), a per-channel constant, constants broadcast along height or
# width. Against ORT's CPU provider, every node on MLX; an operand permuted wrongly multiplies
# other elements.
BROADCAST_CASES = {
    "squeeze-excite": None,
    "per-channel": (1, 12, 1, 1),
    "along-height": (1, 1, 5, 1),
    "channel-and-width": (1, 12, 1, 7),
}


@pytest.mark.parametrize("case", list(BROADCAST_CASES))
def test_broadcast_operand_after_a_convolution_runs_beneath_its_view(case):
    from mlx_harness import check_against_cpu
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((12, 6, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((8, 12, 1, 1)).astype(np.float32), "w2")]
    # the Relu keeps ORT from folding a constant Mul into the convolution's weights
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["h"])]
    if case == "squeeze-excite":
        nodes += [helper.make_node("GlobalAveragePool", ["h"], ["g"]),
                  helper.make_node("Sigmoid", ["g"], ["s"])]
    else:
        inits.append(numpy_helper.from_array(
            rng.standard_normal(BROADCAST_CASES[case]).astype(np.float32), "s"))
    nodes += [helper.make_node("Mul", ["h", "s"], ["m"]),
              helper.make_node("Conv", ["m", "w2"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, [2, 6, 5, 7])], [("y", TP.FLOAT, None)],
                       initializers=inits)
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    check_against_cpu(model, {"x": x}, rtol=1e-4, atol=1e-4)
