"""A case is a plain JSON-able dict, so the parent can hand it to a worker on a pipe, write it
next to a reproducer and edit it while minimising:
  opset, nodes [{op, domain, name, inputs, outputs, attrs}], inputs [{name, dtype, shape, fill}],
  inits [{name, dtype, shape, values}], values {name: [dtype, shape|None]}, data_seed.
Graph outputs are every node output no other node reads (so TopK's indices or a Split's pieces
are checked too). Feeds are drawn from data_seed here, identically in every process."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

ONNX_T = {"float32": TP.FLOAT, "float16": TP.FLOAT16, "float64": TP.DOUBLE, "bfloat16": TP.BFLOAT16,
          "int8": TP.INT8, "int16": TP.INT16, "int32": TP.INT32, "int64": TP.INT64,
          "uint8": TP.UINT8, "uint16": TP.UINT16, "uint32": TP.UINT32, "uint64": TP.UINT64,
          "bool": TP.BOOL}
FROM_ONNX = {v: k for k, v in ONNX_T.items()}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def graph_outputs(case):
    read = {i for n in case["nodes"] for i in n["inputs"]}
    outs = []
    for n in case["nodes"]:
        outs += [o for o in n["outputs"] if o and o not in read and o not in outs]
    return outs


def attr_value(v):
    """A case attribute as ONNX takes it: a tensor attribute is kept in the case (JSON) as
    {"tensor": dtype, "values": [...]}, everything else as it is."""
    if isinstance(v, dict) and "tensor" in v:
        return numpy_helper.from_array(np.array(v["values"], dtype=v["tensor"]))
    return v


def build_model(case, outputs=None, typed_outputs=True):
    """The ModelProto of a case. outputs: names to expose (default: graph_outputs)."""
    nodes = [helper.make_node(n["op"], n["inputs"], n["outputs"], name=n["name"],
                              domain=n.get("domain", ""),
                              **{k: attr_value(v) for k, v in n["attrs"].items()})
             for n in case["nodes"]]
    used = {i for n in case["nodes"] for i in n["inputs"]}
    inputs = [helper.make_tensor_value_info(i["name"], ONNX_T[i["dtype"]], i["shape"])
              for i in case["inputs"] if i["name"] in used]
    inits = [numpy_helper.from_array(np.array(t["values"], dtype=t["dtype"]).reshape(t["shape"]),
                                     t["name"]) for t in case["inits"] if t["name"] in used]
    outs = []
    for o in (graph_outputs(case) if outputs is None else outputs):
        dt, shape = case["values"].get(o, (None, None))
        if typed_outputs and dt is not None:
            outs.append(helper.make_tensor_value_info(o, ONNX_T[dt], shape))
        else:
            outs.append(helper.make_empty_tensor_value_info(o))
    graph = helper.make_graph(nodes, "fuzz", inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case["opset"])])
    model.ir_version = 10
    return model


def fill(rng, dtype, shape, spec):
    """Random data for one graph input, as its `fill` spec says."""
    dtype = np.dtype(dtype)
    kind = (spec or {}).get("kind", "default")
    if kind == "values":
        return np.array(spec["values"], dtype=dtype).reshape(shape)
    if dtype == np.bool_:
        return rng.random(shape) < spec.get("p", 0.5) if spec else rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = (spec.get("low"), spec.get("high")) if kind == "int" else (None, None)
        if lo is None:
            lo, hi = (0, 10) if dtype.kind == "u" else (-6, 6)
        a = rng.integers(lo, hi + 1, size=shape).astype(dtype)
        if spec and spec.get("nonzero"):
            a[a == 0] = 1
        return a
    lo, hi = (spec.get("low", -2.0), spec.get("high", 2.0)) if spec else (-2.0, 2.0)
    a = rng.uniform(lo, hi, size=shape).astype(dtype)
    if spec and spec.get("nonzero"):
        a[np.abs(a) < 0.05] = 0.5
    if spec and spec.get("specials") and a.size:
        k = rng.integers(1, 4)
        idx = rng.integers(0, a.size, size=k)
        a.reshape(-1)[idx] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=k)
    return a


def feeds(case):
    out = {}
    for k, i in enumerate(case["inputs"]):
        rng = np.random.default_rng([case["data_seed"], k])
        out[i["name"]] = fill(rng, i["dtype"], tuple(i["shape"]), i.get("fill"))
    used = {i for n in case["nodes"] for i in n["inputs"]}
    return {k: v for k, v in out.items() if k in used}


def describe(case):
    """One line: opset, then each node with its main input's shape and dtype."""
    parts = []
    for n in case["nodes"]:
        x = n["inputs"][0] if n["inputs"] else ""
        dt, shape = case["values"].get(x, ("?", None))
        attrs = ",".join(f"{k}={v}" for k, v in sorted(n["attrs"].items()))
        parts.append(f"{n['op']}({dt}{list(shape) if shape is not None else '?'}"
                     f"{';' + attrs if attrs else ''})")
    return f"opset {case['opset']}: " + " -> ".join(parts)
