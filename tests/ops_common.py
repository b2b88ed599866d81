"""Helpers shared by the per-family operator tests (tests/ops/test_*.py), on top of the harness.

`check` runs one model built for a given dtype on MLX and compares it with ORT's CPU provider,
with tolerances that loosen for float16/bfloat16. ORT's CPU provider lacks most bfloat16
kernels, so for bfloat16 the reference is the same model built for float32, run on CPU with the
same (bfloat16-rounded) input values, and MLX's output is compared after upcasting.

`check_declined` proves a declined node stays on CPU, that the EP's partition report gives the
expected reason, and that the outputs still match CPU.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import mlx_harness as harness

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
FLOATS = [F32, F16, BF16]


def elem(dtype):
    dtype = np.dtype(dtype)
    return TensorProto.BFLOAT16 if dtype == BF16 else harness.onnx_type(dtype)


def tol(dtype, scale=1.0):
    """(rtol, atol) for results of dtype; scale loosens them for long compositions."""
    dtype = np.dtype(dtype)
    base = {F32: (1e-5, 1e-6), F16: (2e-3, 2e-3), BF16: (2e-2, 2e-2)}.get(dtype, (0, 0))
    return base[0] * scale, base[1] * scale


def _is_float(a):
    return np.asarray(a).dtype.kind == "f" or np.asarray(a).dtype == BF16


def _compare(got, ref, rtol, atol):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape, f"shape {g.shape} != {r.shape}"
        if np.asarray(r).dtype.kind in "biu":
            assert g.dtype == r.dtype, f"dtype {g.dtype} != {r.dtype}"
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(r, np.float32),
                                       rtol=rtol, atol=atol)


def check(build, feeds, dtype, rtol=None, atol=None, scale=1.0):
    """build(elem_type) -> model. Float arrays in feeds are cast to dtype (the rest is passed
    as is). Asserts every node ran on MLX; returns the MLX outputs."""
    dtype = np.dtype(dtype)
    drt, dat = tol(dtype, scale)
    rtol = drt if rtol is None else rtol
    atol = dat if atol is None else atol
    cast = {k: (v.astype(dtype) if _is_float(v) else v) for k, v in feeds.items()}
    if dtype != BF16:
        got, _, _ = harness.check_against_cpu(build(elem(dtype)), cast, rtol=rtol, atol=atol)
        return got
    model = build(TensorProto.BFLOAT16)
    ref_feeds = {k: (v.astype(np.float32) if _is_float(v) else v) for k, v in cast.items()}
    ref = harness.cpu_session(build(TensorProto.FLOAT)).run(None, ref_feeds)
    got, placed = run_bf16_on_mlx(model, cast, [r.shape for r in ref])
    for node in model.graph.node:
        where = placed.get(node.name)
        assert where == harness.EP, f"node {node.name!r} ran on {where}"
    _compare(got, ref, rtol, atol)
    return got


def _ortvalue(a):
    a = np.require(a, requirements="C")  # unlike ascontiguousarray, keeps a 0-d array 0-d
    if a.dtype == BF16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16),
                                                                TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def run_bf16_on_mlx(model, feeds, out_shapes):
    """Runs a model with bfloat16 inputs/outputs on MLX (no CPU fallback). ORT's Python API does
    not convert bfloat16 numpy arrays, so values travel as OrtValues over uint16 buffers bound
    with IOBinding; out_shapes (taken from the float32 reference run) size the output buffers.
    Returns (outputs as numpy arrays, assignment)."""
    s = harness.mlx_session(model)
    io = s.io_binding()
    keep = [(k, _ortvalue(v)) for k, v in feeds.items()]
    for k, ov in keep:
        io.bind_ortvalue_input(k, ov)
    outs = []
    for o, shape in zip(model.graph.output, out_shapes):
        t = o.type.tensor_type.elem_type
        np_t = BF16 if t == TensorProto.BFLOAT16 else helper.tensor_dtype_to_np_dtype(t)
        buf = np.zeros(shape, np_t)
        ov = _ortvalue(buf)
        io.bind_ortvalue_output(o.name, ov)
        outs.append((buf, ov))
    s.run_with_iobinding(io)
    return [b for b, _ in outs], harness.assignment(s)


def check_declined(model, feeds, node, reason, tmp_path, rtol=1e-5, atol=1e-6):
    """Asserts `node` is declined with `reason` (a substring of the report's text), runs on
    ORT's CPU provider, and the session's outputs match a CPU-only run (feeds None: the model is
    not run, for nodes ORT's CPU kernel rejects as well). Returns the reason."""
    report = tmp_path / "partition.json"
    s = harness.mlx_session(model, allow_cpu=True, provider_options={"report_file": str(report)})
    placed = harness.assignment(s)
    assert placed.get(node) == "CPUExecutionProvider", f"{node!r} ran on {placed.get(node)}"
    declined = {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}
    assert node in declined, f"{node!r} not in the report's declines: {declined}"
    assert reason in declined[node], f"reason {declined[node]!r} lacks {reason!r}"
    if feeds is None:
        return declined[node]
    got = s.run(None, feeds)
    ref = harness.cpu_session(model).run(None, feeds)
    _compare(got, ref, rtol, atol)
    return declined[node]


def check_ref(model, feeds, expected, rtol=1e-5, atol=1e-6):
    """For types ORT's CPU provider has no kernel for: runs on MLX (every node must be claimed)
    and compares with reference arrays computed in numpy (dtypes must match exactly)."""
    got, placed = harness.run_on_mlx(model, feeds)
    for node in model.graph.node:
        where = placed.get(node.name)
        assert where == harness.EP, f"node {node.name!r} ran on {where}"
    for g, r in zip(got, expected):
        assert g.dtype == r.dtype, f"dtype {g.dtype} != {r.dtype}"
    _compare(got, expected, rtol, atol)
    return got


def declined_reasons(model, tmp_path):
    """{node: reason} from the partition report, whether or not ORT's CPU provider can run the
    declined node (when it cannot, the session fails after the report is written)."""
    report = tmp_path / "partition.json"
    try:
        harness.mlx_session(model, allow_cpu=True, provider_options={"report_file": str(report)})
    except Exception:
        pass
    return {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}


def declines_without_cpu_kernel(model, tmp_path, match):
    """For a node ORT's CPU provider cannot run either: session creation fails (with `match`),
    but the partition report, written while partitioning, still names the declines.
    Returns {node name: reason}."""
    import pytest

    report = tmp_path / "partition.json"
    with pytest.raises(Exception, match=match):
        harness.mlx_session(model, allow_cpu=True, provider_options={"report_file": str(report)})
    return {d["name"]: d["reason"] for d in json.loads(report.read_text())["declined"]}


def check_compiled(model, feed_sets, path="shapeless", rtol=1e-5, atol=1e-6):
    """Runs one MLX session on several feed sets (e.g. different batch sizes through symbolic
    dims), compares each run with ORT's CPU provider, then reads the EP's run record (written
    when the session is released) and asserts the single fused group took `path` with every run
    compiled and no fallback to eager translation. Runs whose inputs hold a zero-size dim are
    expected eager on every compiled path (src/plan/run.c: MLX's shapeless replay mis-broadcasts
    empty dims, and its CUDA compiled kernels fault on them). Returns the group's record."""
    rec = harness.Recorded(model)
    cpu = harness.cpu_session(model)
    for feeds in feed_sets:
        _compare(rec.session.run(None, feeds), cpu.run(None, feeds), rtol, atol)
    group = harness.only_group(rec.close())
    empty = sum(1 for f in feed_sets if any(np.asarray(v).size == 0 for v in f.values()))
    runs = len(feed_sets) - empty
    assert group["path"] == path and not group["turned_eager"], group
    assert (group["compiled_runs"], group["eager_runs"], group["fallbacks"]) == (runs, empty, 0), \
        group
    return group


def wide(dtype):
    """The type ORT's CPU provider runs for data-movement references: float32 for floats,
    int64 for integers and bool."""
    dtype = np.dtype(dtype)
    return F32 if dtype in FLOATS else np.dtype(np.int64)


def check_wide(build, feeds, dtype, data=(), rtol=0.0, atol=0.0, via=None):
    """For data-movement ops whose ORT CPU kernels lack some dtypes: runs build(elem(dtype)) on
    MLX (every node must be claimed) and compares with ORT's CPU provider running
    build(elem(wide(dtype))) on the same values. Feeds named in `data` are cast to dtype (and
    from there to the wide type, so both runs see identical values); reference outputs whose
    declared type differs between the two models are cast back to dtype. via: the wide type to
    use instead (e.g. float32 for kernels ORT has only for floats; small integers are exact).
    Returns the MLX outputs."""
    dtype = np.dtype(dtype)
    w = wide(dtype) if via is None else np.dtype(via)
    model, ref_model = build(elem(dtype)), build(elem(w))
    got_feeds = {k: (v.astype(dtype) if k in data else v) for k, v in feeds.items()}
    ref_feeds = {k: (v.astype(w) if k in data else v) for k, v in got_feeds.items()}
    ref = harness.cpu_session(ref_model).run(None, ref_feeds)
    if dtype == BF16:
        got, placed = run_bf16_on_mlx(model, got_feeds, [r.shape for r in ref])
    else:
        got, placed = harness.run_on_mlx(model, got_feeds)
    for node in model.graph.node:
        assert placed.get(node.name) == harness.EP, f"node {node.name!r} ran on {placed.get(node.name)}"
    outs = zip(model.graph.output, ref_model.graph.output)
    ref = [r.astype(dtype) if a.type.tensor_type.elem_type != b.type.tensor_type.elem_type else r
           for r, (a, b) in zip(ref, outs)]
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape, f"shape {g.shape} != {r.shape}"
        assert np.asarray(g).dtype == np.asarray(r).dtype, f"dtype {g.dtype} != {r.dtype}"
        if _is_float(r):
            np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(r, np.float32),
                                       rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, r)
    return got
