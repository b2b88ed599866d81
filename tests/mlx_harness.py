"""Shared test machinery: build one-off ONNX models, run them on the MLX EP and on ORT's CPU
provider with the same inputs, and prove which provider ran each node.

Output equality alone cannot tell a claimed node from a declined one (ORT's CPU provider would
compute the same answer), so `run_on_mlx` records ORT's graph assignment and, unless told which
nodes may stay on CPU, disables CPU fallback so that session creation fails if any node is left.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import onnxruntime_ep_mlx as mlx

EP = mlx.EP_NAME
TESTS = os.path.dirname(os.path.abspath(__file__))  # this folder: children import the harness


def make_model(nodes, inputs, outputs, initializers=(), opset=17, domains=None, ir_version=None):
    """inputs/outputs: lists of (name, onnx elem type, shape) or ValueInfoProtos."""
    def vi(x):
        return x if isinstance(x, onnx.ValueInfoProto) else helper.make_tensor_value_info(*x)
    inits = [i if isinstance(i, onnx.TensorProto) else numpy_helper.from_array(i[1], i[0])
             for i in initializers]
    graph = helper.make_graph(list(nodes), "test", [vi(i) for i in inputs],
                              [vi(o) for o in outputs], inits)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v)
                                                 for d, v in (domains or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir_version or min(onnx.IR_VERSION, 10)
    return model


def two_group_model():
    """add0, mul0 (MLX) -> Cast to string and back (declined: MLX holds no strings) -> add1, mul1
    (MLX): two fused groups with ORT's CPU provider between them."""
    t = TensorProto
    nodes = [helper.make_node("Add", ["x", "y"], ["s0"], name="add0"),
             helper.make_node("Mul", ["s0", "y"], ["s"], name="mul0"),
             helper.make_node("Cast", ["s"], ["s_str"], to=t.STRING, name="tostr"),
             helper.make_node("Cast", ["s_str"], ["p"], to=t.FLOAT, name="fromstr"),
             helper.make_node("Add", ["p", "y"], ["p1"], name="add1"),
             helper.make_node("Mul", ["p1", "y"], ["out"], name="mul1")]
    return make_model(nodes, [("x", t.FLOAT, [2, 3]), ("y", t.FLOAT, [2, 3])],
                      [("out", t.FLOAT, [2, 3])])


def _bytes(model):
    return model if isinstance(model, (bytes, str)) else model.SerializeToString()


def cpu_session(model, optimize=True):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(_bytes(model), so, providers=["CPUExecutionProvider"])


# Tests of CPU-device behaviour (float64, the CPU convolution forms) carry
# @pytest.mark.cpu_device; conftest.py then pins their sessions to device=cpu through this, so
# they hold on a machine whose MLX has a GPU (where the EP's default device is the GPU).
PINNED_OPTIONS = {}


def mlx_session(model, allow_cpu=False, provider_options=None, optimize=True):
    """optimize=False: ORT's own graph optimisations off, so the EP sees the nodes as written."""
    options = {**PINNED_OPTIONS, **(provider_options or {})}
    so = mlx.session_options(options or None)
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if not allow_cpu:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return ort.InferenceSession(_bytes(model), so)


def assignment(session):
    """{node name: provider} for every node ORT placed."""
    placed = {}
    for sub in session.get_provider_graph_assignment_info():
        for node in sub.get_nodes():
            placed[node.name] = sub.ep_name
    return placed


class Recorded:
    """An all-MLX session (no CPU fallback unless allow_cpu) that writes the EP's run record:
    the JSON the stats_file option writes when ORT releases the EP (src/ep/stats.c: per group
    its path, the node that decided it, run and cache counts, and per noted node the path its
    translation took, as src/plan/node_path.h's identifiers). Run `session`, then `close()`
    (hold no other reference to the session) returns the parsed record."""

    def __init__(self, model, allow_cpu=False, provider_options=None, optimize=True):
        import os
        import tempfile
        fd, self.path = tempfile.mkstemp(suffix=".json", prefix="mlx-stats-")
        os.close(fd)
        try:
            self.session = mlx_session(model, allow_cpu,
                                       {**(provider_options or {}), "stats_file": self.path},
                                       optimize=optimize)
        except BaseException:
            os.unlink(self.path)
            raise

    def close(self):
        import gc
        import json
        import os
        try:
            del self.session
            gc.collect()  # the record is written when ORT releases the EP
            with open(self.path) as f:
                return json.load(f)
        finally:
            os.unlink(self.path)


def run_with_stats(model, feeds, runs=1, provider_options=None, optimize=True):
    """Runs `model` on the MLX EP `runs` times (no CPU fallback) and returns (outputs of the
    last run, the EP's run record; see Recorded)."""
    rec = Recorded(model, provider_options=provider_options, optimize=optimize)
    got = [rec.session.run(None, feeds) for _ in range(runs)][-1]
    return got, rec.close()


def run_with_paths(model, feeds, optimize=True, provider_options=None):
    """Runs `model` on ORT's CPU provider and on the MLX EP (no CPU fallback); returns
    (MLX outputs, CPU outputs, the EP's run record), whose node paths `node_paths` reads.
    optimize=False: both sessions see the nodes as written (ORT's graph optimisations off)."""
    ref = cpu_session(model, optimize).run(None, feeds)
    got, record = run_with_stats(model, feeds, provider_options=provider_options,
                                 optimize=optimize)
    return got, ref, record


def _path(p):
    return (p["path"], p["kernel"], tuple(p["folds"]))


def node_paths(record):
    """{node name: (path, kernel, folds)} over every group of a run record, for the nodes whose
    translation noted a path (src/plan/node_path.h): path is host_kernel, epilogue, inside,
    mlx_fused or composed; kernel a short id ("softmax", "conv_im2col") or None; folds a tuple
    of what the kernel took in ("bias", "scale", "mask", "residual", "merge_heads")."""
    return {name: _path(p) for g in record["groups"] for name, p in g["node_paths"].items()}


def node_path(record, name):
    """(path, kernel, folds) of node `name`, or None when it noted no path."""
    return node_paths(record).get(name)


def op_paths(record, op):
    """The (path, kernel, folds) of every noted node of type `op` (for nodes ORT made itself,
    whose names the test does not know)."""
    return [_path(p) for g in record["groups"] for p in g["node_paths"].values()
            if p["op"] == op]


def host(kernel, *folds):
    """A node path: one host kernel of its own (CPU device)."""
    return ("host_kernel", kernel, tuple(folds))


def run_recorded(model, shapes, env=None):
    """Runs `model` (input x) once per shape in a child process (the environment switches are
    read once per process); returns the fused groups of the EP's run record."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"compile-{os.getpid()}.onnx")
    stats = path[:-len(".onnx")] + ".json"
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    code = textwrap.dedent(f"""
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {TESTS!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options({{"stats_file": {stats!r}}})
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({path!r}, so)
        ref = ort.InferenceSession({path!r}, providers=["CPUExecutionProvider"])
        for shape in {shapes!r}:
            x = (np.random.default_rng(len(shape)).random(shape, dtype=np.float32) - 0.5)
            got, want = s.run(None, {{"x": x}})[0], ref.run(None, {{"x": x}})[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        del s
    """)
    full_env = dict(os.environ, ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL="1")
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env)
    os.unlink(path)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(stats) as f:
        groups = json.load(f)["groups"]
    os.unlink(stats)
    assert groups
    return groups


def counts(g, *names):
    """The group's counters, e.g. counts(g, "compiled_runs", "fallbacks")."""
    return tuple(g[n] for n in names)


def only_group(record):
    """The record's single fused group (asserting there is exactly one)."""
    groups = record["groups"]
    assert len(groups) == 1, groups
    return groups[0]


def run_on_mlx(model, feeds, allow_cpu=False, provider_options=None):
    s = mlx_session(model, allow_cpu, provider_options)
    return s.run(None, feeds), assignment(s)


def check_against_cpu(model, feeds, rtol=1e-5, atol=1e-6, on_cpu=()):
    """Runs on MLX and on CPU, asserts every node except `on_cpu` names ran on MLX and that the
    outputs match. Returns (mlx outputs, cpu outputs, assignment)."""
    got, placed = run_on_mlx(model, feeds, allow_cpu=bool(on_cpu))
    names = [n.name for n in (model.graph.node if hasattr(model, "graph") else [])]
    for name in names:
        want = "CPUExecutionProvider" if name in on_cpu else EP
        assert placed.get(name) == want, f"node {name!r} ran on {placed.get(name)}, not {want}"
    ref = cpu_session(model).run(None, feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype, f"dtype {g.dtype} != {r.dtype}"
        assert g.shape == r.shape, f"shape {g.shape} != {r.shape}"
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g.astype(np.float32), r.astype(np.float32), rtol=rtol,
                                       atol=atol)
    return got, ref, placed


NP_TO_ONNX = {np.dtype(k): v for k, v in {
    np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int8: TensorProto.INT8,
    np.int16: TensorProto.INT16, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
    np.uint8: TensorProto.UINT8, np.uint16: TensorProto.UINT16, np.uint32: TensorProto.UINT32,
    np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL, np.float64: TensorProto.DOUBLE,
}.items()}


def onnx_type(dtype):
    return NP_TO_ONNX[np.dtype(dtype)]


def rand(shape, dtype=np.float32, low=-2.0, high=2.0, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else int(low) * 3
        return rng.integers(lo, int(high) * 3 + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
