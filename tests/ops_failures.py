"""Shared checks for nodes that must fail a run: the EP turns a run-time check (or a translator's
refusal) into an ORT RUNTIME_EXCEPTION whose text names the node, and the session keeps working,
so the next run with valid input matches ORT's CPU provider (or a given reference)."""
import re

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

import mlx_harness as harness

# What ORT's CPU provider raises for bad input (its kernels use both codes).
CPU_ERRORS = (Fail, InvalidArgument, RuntimeException)


def names_node(node, op):
    return rf"node '{re.escape(node)}' \({op}\)"


def cpu_rejects(model, feeds):
    with pytest.raises(CPU_ERRORS):
        harness.cpu_session(model).run(None, feeds)


def rejects_then_runs(model, bad, good, node="n", op=None, expected=None, cpu_errs=True,
                      rtol=1e-6, atol=1e-6):
    """The MLX session fails `bad` naming the node (as ORT's CPU provider does, when cpu_errs),
    then runs `good` to ORT's CPU answer (or `expected`) on the same session."""
    op = op or model.graph.node[0].op_type
    if cpu_errs:
        cpu_rejects(model, bad)
    s = harness.mlx_session(model)
    assert set(harness.assignment(s).values()) == {harness.EP}
    with pytest.raises(RuntimeException, match=names_node(node, op)):
        s.run(None, bad)
    got = s.run(None, good)
    want = expected if expected is not None else harness.cpu_session(model).run(None, good)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def mlx_outputs(model, feeds):
    """Runs on the MLX EP with every node placed there (no CPU fallback); returns the outputs."""
    outs, placed = harness.run_on_mlx(model, feeds)
    assert set(placed.values()) == {harness.EP}, placed
    return outs
