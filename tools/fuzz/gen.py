"""Case generation: a table of per-operator generators (arity, attributes, valid shapes), chained
2-4 deep so that compiled groups form. Which operators and input dtypes are fuzzed comes from the
registry (registry.py); a generator only knows how to build a valid node for a given input.

A generator is fn(b, x, op) -> output names, or None when it cannot take input x (nothing is
added then). Output shapes and dtypes come from ONNX shape inference, so generators need not
compute them; a node whose output shape inference cannot pin down ends the chain.
"""
from __future__ import annotations

import collections
import copy
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import shape_inference

from . import case as C

GEN_ERRORS = collections.Counter()
CAP = 1 << 20  # elements per tensor: huge outputs are a known crash, not what we fuzz for
FLOATS = {"float32", "float16", "float64"}
INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
SIGNED = {"int8", "int16", "int32", "int64"}
NUMERIC = FLOATS | INTS
ALL = NUMERIC | {"bool"}
# How often a case starts with each dtype (where the op claims it): float32 mostly.
DTYPE_WEIGHT = {"float32": 10, "int64": 1.5, "int32": 1.5, "float16": 1.2, "bool": 1.5,
                "float64": 0.4, "int8": 0.3, "uint8": 0.3}
OPSETS = [(11, 1), (13, 2), (17, 2), (18, 3), (21, 2)]


class Reject(Exception):
    """The generator cannot build a node for this input."""


class Val:
    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)

    @property
    def rank(self):
        return len(self.shape)


class Builder:
    def __init__(self, rng, opset, max_dim=None):
        self.rng, self.opset, self.max_dim = rng, opset, max_dim
        self.case = {"opset": opset, "nodes": [], "inputs": [], "inits": [], "values": {},
                     "data_seed": int(rng.integers(1 << 31))}
        self.count = 0

    # --- randomness -------------------------------------------------------------------------
    def p(self, prob):
        return self.rng.random() < prob

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def int(self, lo, hi):  # inclusive
        return int(self.rng.integers(lo, hi + 1))

    def dim(self):
        d = self._dim()
        return min(d, self.max_dim) if self.max_dim is not None else d

    def _dim(self):
        r = self.rng.random()
        if r < 0.05:
            return 0
        if r < 0.25:
            return 1
        if r < 0.85:
            return self.int(2, 8)
        return self.int(9, 33)

    def shape(self, rank, cap=20000):
        for _ in range(20):
            s = tuple(self.dim() for _ in range(rank))
            if C.numel(s) <= cap:
                return s
        return tuple(min(d, 2) for d in s)

    def axis(self, rank):
        return self.int(-rank, rank - 1)

    def bcast(self, shape):
        """A shape that broadcasts with `shape` (either way)."""
        keep = self.int(0, len(shape)) if self.p(0.4) else len(shape)
        out = list(shape[len(shape) - keep:])
        for i, d in enumerate(out):
            if self.p(0.25):
                out[i] = 1
            elif d == 1 and self.p(0.3):
                out[i] = self.int(2, 5)
        if len(out) < 4 and self.p(0.15):
            out = [self.int(1, 3)] + out
        if C.numel(out) * max(1, C.numel(shape)) > CAP * 4:
            out = [1] * len(out)
        return tuple(out)

    # --- graph building ---------------------------------------------------------------------
    def fresh(self, p):
        self.count += 1
        return f"{p}{self.count}"

    def input(self, dtype, shape, fill=None):
        name = self.fresh("in")
        self.case["inputs"].append({"name": name, "dtype": dtype, "shape": list(shape),
                                    "fill": fill})
        self.case["values"][name] = [dtype, list(shape)]
        return name

    def const(self, values, dtype="int64"):
        a = np.asarray(values, dtype=dtype)
        name = self.fresh("c")
        self.case["inits"].append({"name": name, "dtype": dtype, "shape": list(a.shape),
                                   "values": a.ravel().tolist()})
        self.case["values"][name] = [dtype, list(a.shape)]
        return name

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.fresh("t") for _ in range(n_out)]
        # JSON-able plain values; an empty list has no ONNX attribute type, so it is left out
        attrs = {k: (np.asarray(v).tolist() if isinstance(v, (list, tuple, np.generic)) else v)
                 for k, v in attrs.items() if v is not None and not (isinstance(v, list) and not v)}
        self.case["nodes"].append({"op": op, "domain": "", "name": f"n{len(self.case['nodes'])}",
                                   "inputs": list(inputs), "outputs": outs, "attrs": attrs})
        return outs

    def infer(self):
        """dtype and shape of every value, by ONNX shape inference (None shape: not known)."""
        m = C.build_model(self.case, outputs=[])
        try:
            m = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        except Exception:
            return False
        for vi in m.graph.value_info:
            t = vi.type.tensor_type
            if t.elem_type not in C.FROM_ONNX:
                continue
            shape = None
            if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                shape = [d.dim_value for d in t.shape.dim]
            self.case["values"][vi.name] = [C.FROM_ONNX[t.elem_type], shape]
        return True


def in_dtype(b, dtype, shape, **fill):
    return Val(b.input(dtype, shape, fill or None), dtype, shape)


# ================================ generators ===============================================

UNARY_ATTRS = {
    "Elu": lambda b: {"alpha": float(b.choice([1.0, 0.5, 2.0]))},
    "Selu": lambda b: {"alpha": 1.67, "gamma": 1.05} if b.p(0.5) else {},
    "Celu": lambda b: {"alpha": float(b.choice([1.0, 0.7]))},
    "LeakyRelu": lambda b: {"alpha": float(b.choice([0.01, 0.2, -0.5]))},
    "ThresholdedRelu": lambda b: {"alpha": float(b.choice([1.0, 0.3, -0.2]))},
    "HardSigmoid": lambda b: {"alpha": 0.3, "beta": 0.4} if b.p(0.5) else {},
    "Gelu": lambda b: {"approximate": b.choice(["none", "tanh"])},
    "Shrink": lambda b: {"lambd": float(b.choice([0.5, 1.0])), "bias": float(b.choice([0.0, 0.3]))},
    "IsInf": lambda b: {"detect_positive": b.int(0, 1), "detect_negative": b.int(0, 1)},
}


def g_unary(b, x, op):
    return b.node(op, [x.name], **UNARY_ATTRS.get(op, lambda b: {})(b))


def g_dropout(b, x, op):
    return b.node(op, [x.name], n_out=2 if b.p(0.3) else 1)


def other(b, x, **fill):
    return in_dtype(b, x.dtype, b.bcast(x.shape), **fill).name


def g_binary(b, x, op):
    fill = {}
    attrs = {}
    if op in ("Div", "Mod") and x.dtype in INTS:
        fill = {"kind": "int", "nonzero": True,
                "low": 1 if x.dtype.startswith("u") else -6, "high": 6}
    if op == "Mod":
        attrs["fmod"] = 1 if x.dtype in FLOATS else b.int(0, 1)
    if op == "Pow":
        fill = {"kind": "int", "low": 0, "high": 3} if x.dtype in INTS else {"low": -2, "high": 3}
    y = other(b, x, **fill)
    ins = [x.name, y] if (op in ("Div", "Mod", "Pow") or b.p(0.7)) else [y, x.name]
    return b.node(op, ins, **attrs)


def g_variadic(b, x, op):
    ins = [x.name] + [other(b, x) for _ in range(b.int(0, 2))]
    b.rng.shuffle(ins)
    return b.node(op, ins)


def g_bitshift(b, x, op):
    y = other(b, x, kind="int", low=0, high=int(np.dtype(x.dtype).itemsize * 8 - 1))
    return b.node(op, [x.name, y], direction=b.choice(["LEFT", "RIGHT"]))


def g_prelu(b, x, op):
    keep = b.int(0, x.rank)
    s = tuple(d if b.p(0.6) else 1 for d in x.shape[x.rank - keep:])
    return b.node(op, [x.name, in_dtype(b, x.dtype, s).name])


def g_where(b, x, op):
    c = in_dtype(b, "bool", b.bcast(x.shape)).name
    y = other(b, x)
    return b.node(op, [c, x.name, y] if b.p(0.5) else [c, y, x.name])


def g_clip(b, x, op):
    lo, hi = (-1, 1) if x.dtype in FLOATS else (-3, 4)
    if x.dtype.startswith("u"):
        lo = 1
    if b.opset < 11:
        return b.node(op, [x.name], min=float(lo), max=float(hi))
    ins = [x.name, b.const(lo, x.dtype) if b.p(0.7) else "", b.const(hi, x.dtype) if b.p(0.7) else ""]
    while ins[-1] == "":
        ins.pop()
    return b.node(op, ins)


def reduce_axes_as_input(b, op):
    return b.opset >= (13 if op == "ReduceSum" else 18)


def g_reduce(b, x, op):
    r = x.rank
    attrs = {"keepdims": b.int(0, 1)} if b.p(0.8) else {}
    axes = None
    if r and b.p(0.75):
        k = b.int(1, r)
        axes = [int(a) for a in b.rng.choice(r, size=k, replace=False)]
        axes = [a - r if b.p(0.3) else a for a in axes]
    ins = [x.name]
    if reduce_axes_as_input(b, op):
        if b.p(0.3):
            attrs["noop_with_empty_axes"] = b.int(0, 1)
        if axes is not None:
            ins.append(b.const(axes))
        elif b.p(0.2):
            ins.append(b.const(np.zeros(0, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    return b.node(op, ins, **attrs)


def g_arg(b, x, op):
    if x.rank == 0:
        raise Reject
    attrs = {"axis": b.axis(x.rank), "keepdims": b.int(0, 1)}
    if b.opset >= 12 and b.p(0.4):
        attrs["select_last_index"] = b.int(0, 1)
    return b.node(op, [x.name], **attrs)


def g_softmax(b, x, op):
    if x.rank == 0:
        raise Reject
    return b.node(op, [x.name], axis=b.axis(x.rank) if b.p(0.7) else None)


def g_cumsum(b, x, op):
    if x.rank == 0:
        raise Reject
    return b.node(op, [x.name, b.const(b.axis(x.rank), b.choice(["int64", "int32"]))],
                  exclusive=b.int(0, 1) if b.p(0.5) else None,
                  reverse=b.int(0, 1) if b.p(0.5) else None)


def g_topk(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    d = x.shape[ax]
    attrs = {"axis": ax}
    if b.opset >= 11:
        attrs.update(largest=b.int(0, 1), sorted=1)
    k = b.int(0, d)
    if b.opset >= 10:
        return b.node(op, [x.name, b.const([k])], n_out=2, **attrs)
    return b.node(op, [x.name], n_out=2, k=k, **attrs)


# --- shape ops -------------------------------------------------------------------------------

def factor_shape(b, n):
    """A random shape with n elements."""
    if n == 0:
        s = [b.int(0, 3) for _ in range(b.int(1, 3))]
        s[b.int(0, len(s) - 1)] = 0
        return s
    out, rest = [], n
    for _ in range(b.int(0, 3)):
        divs = [d for d in range(1, min(rest, 64) + 1) if rest % d == 0]
        d = b.choice(divs)
        out.append(d)
        rest //= d
    out.append(rest)
    b.rng.shuffle(out)
    return out


def g_reshape(b, x, op):
    n = C.numel(x.shape)
    s = factor_shape(b, n)
    if n and b.p(0.4):
        s[b.int(0, len(s) - 1)] = -1
    if b.p(0.3):  # 0 copies the input's dim at that position
        for i in range(min(len(s), x.rank)):
            if s[i] == x.shape[i] and b.p(0.5) and x.shape[i] != 0:
                s[i] = 0
    allowzero = None
    if b.opset >= 14 and 0 in s and b.p(0.3) and -1 not in s and C.numel(s) == n:
        allowzero = 1
    return b.node(op, [x.name, b.const(s)], allowzero=allowzero)


def g_transpose(b, x, op):
    perm = [int(v) for v in b.rng.permutation(x.rank)]
    return b.node(op, [x.name], perm=perm if b.p(0.8) else None)


def g_squeeze(b, x, op):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    axes = [i - x.rank if b.p(0.4) else i for i in ones if b.p(0.7)]
    if not axes and b.p(0.5) or not ones:
        axes = None
    if axes is None:
        return b.node(op, [x.name])
    if b.opset >= 13:
        return b.node(op, [x.name, b.const(axes)])
    return b.node(op, [x.name], axes=axes)


def g_unsqueeze(b, x, op):
    k = b.int(1, 2)
    if x.rank + k > 6:
        raise Reject
    out_r = x.rank + k
    axes = [int(a) for a in b.rng.choice(out_r, size=k, replace=False)]
    axes = [a - out_r if b.p(0.4) else a for a in axes]
    if b.opset >= 13:
        return b.node(op, [x.name, b.const(axes)])
    return b.node(op, [x.name], axes=axes)


def g_flatten(b, x, op):
    lo = -x.rank if b.opset >= 11 else 0
    return b.node(op, [x.name], axis=b.int(lo, x.rank))


def g_concat(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    ins = [x.name]
    for _ in range(b.int(1, 2)):
        s = list(x.shape)
        s[ax] = b.choice([0, 1, 2, 3, x.shape[ax]])
        ins.append(in_dtype(b, x.dtype, s).name)
    b.rng.shuffle(ins)
    return b.node(op, ins, axis=ax)


def g_split(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    d = x.shape[ax]
    if b.opset >= 18 and b.p(0.4):
        n = b.int(1, 4)
        if d < n:
            raise Reject
        return b.node(op, [x.name], n_out=n, axis=ax, num_outputs=n)
    k = b.int(1, 3)
    cuts = sorted(int(c) for c in b.rng.integers(0, d + 1, size=k - 1))
    sizes = [e - s for s, e in zip([0] + cuts, cuts + [d])]
    if b.p(0.3):  # equal parts
        if k == 0 or d % k:
            raise Reject
        return b.node(op, [x.name], n_out=k, axis=ax)
    if b.opset >= 13:
        return b.node(op, [x.name, b.const(sizes)], n_out=k, axis=ax)
    return b.node(op, [x.name], n_out=k, axis=ax, split=sizes)


def g_slice(b, x, op):
    if x.rank == 0:
        raise Reject
    k = b.int(1, x.rank)
    axes = [int(a) for a in b.rng.choice(x.rank, size=k, replace=False)]
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        st = b.choice([1, 1, 1, 2, -1, -2]) if b.opset >= 10 else 1
        s = b.int(-d - 2, d + 2)
        e = b.choice([b.int(-d - 2, d + 2), 2**31 - 1 if st > 0 else -(2**31), d])
        starts.append(s), ends.append(e), steps.append(st)
    axes = [a - x.rank if b.p(0.3) else a for a in axes]
    if b.opset < 10:
        return b.node(op, [x.name], starts=starts, ends=ends, axes=axes)
    ins = [x.name, b.const(starts), b.const(ends), b.const(axes)]
    if b.p(0.7):
        ins.append(b.const(steps))
    return b.node(op, ins)


def indices(b, d, shape, unique=False):
    """int64 indices into a dim of size d, some negative."""
    if d == 0:
        raise Reject
    if unique:
        n = C.numel(shape)
        if n > d:
            raise Reject
        v = b.rng.permutation(d)[:n]
    else:
        v = b.rng.integers(0, d, size=shape)
    v = np.where(b.rng.random(np.shape(v)) < 0.3, v - d, v)
    return np.asarray(v, np.int64).reshape(shape)


def g_gather(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    ishape = b.shape(b.int(0, 2), cap=64)
    return b.node(op, [x.name, b.const(indices(b, x.shape[ax], ishape))], axis=ax)


def g_gather_elements(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    s = list(x.shape)
    s[ax] = b.int(1, 4)
    return b.node(op, [x.name, b.const(indices(b, x.shape[ax], s))], axis=ax)


def g_gather_nd(b, x, op):
    if x.rank == 0:
        raise Reject
    bd = b.int(0, min(1, x.rank - 1)) if b.opset >= 12 else 0
    k = b.int(1, x.rank - bd)
    lead = list(x.shape[:bd]) + [b.int(1, 3) for _ in range(b.int(0, 1))]
    cols = [indices(b, x.shape[bd + j], lead + [1]) for j in range(k)]
    idx = np.concatenate(cols, axis=-1)
    return b.node(op, [x.name, b.const(idx)], batch_dims=bd if bd else None)


def scatter_reduction(b, x):
    opts = ["none"]
    if b.opset >= 16:
        opts += ["add", "mul"]
    if b.opset >= 18:
        opts += ["max", "min"]
    return b.choice(opts)


def g_scatter_elements(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    d = x.shape[ax]
    red = scatter_reduction(b, x) if op == "ScatterElements" else "none"
    s = list(x.shape)
    s[ax] = b.int(0, min(d, 3))
    # one index list per position along the other axes, distinct along the axis (with "none",
    # duplicates make the winner unspecified)
    idx = np.moveaxis(np.zeros(s, np.int64), ax, -1)
    if idx.size:
        flat = idx.reshape(-1, s[ax])
        for row in flat:
            row[:] = indices(b, d, (s[ax],), unique=True)
        idx = flat.reshape(idx.shape)
    idx = np.moveaxis(idx, -1, ax)
    upd = in_dtype(b, x.dtype, s).name
    return b.node(op, [x.name, b.const(idx), upd], axis=ax,
                  reduction=red if red != "none" or b.p(0.2) and b.opset >= 16 else None)


def g_scatter_nd(b, x, op):
    if x.rank == 0:
        raise Reject
    k = b.int(1, x.rank)
    space = [x.shape[j] for j in range(k)]
    total = C.numel(space)
    if total == 0:
        raise Reject
    n = b.int(0, min(total, 4))
    flat = b.rng.permutation(total)[:n]
    idx = np.stack(np.unravel_index(flat, space), axis=-1).astype(np.int64) if n else \
        np.zeros((0, k), np.int64)
    idx = np.where(b.rng.random(idx.shape) < 0.3, idx - np.array(space), idx)
    lead = [n] if b.p(0.7) else ([1, n] if b.p(0.5) else [n, 1][:1])
    idx = idx.reshape(lead + [k])
    upd = in_dtype(b, x.dtype, lead + list(x.shape[k:])).name
    red = scatter_reduction(b, x)
    return b.node(op, [x.name, b.const(idx), upd], reduction=None if red == "none" else red)


def g_expand(b, x, op):
    s = list(x.shape)
    for i, d in enumerate(s):
        if d == 1 and b.p(0.5):
            s[i] = b.int(2, 4)
        elif b.p(0.2):
            s[i] = 1
    if b.p(0.3):
        s = [b.int(1, 3)] + s
    if C.numel(s) > CAP:
        raise Reject
    return b.node(op, [x.name, b.const(s)])


def g_tile(b, x, op):
    reps = [b.choice([1, 1, 2, 3, 0]) for _ in range(x.rank)]
    return b.node(op, [x.name, b.const(reps)])


def g_pad(b, x, op):
    r = x.rank
    if r == 0:
        raise Reject
    modes = ["constant", "reflect", "edge"] + (["wrap"] if b.opset >= 19 else [])
    mode = b.choice(modes)
    pads = [b.choice([0, 0, 1, 2, -1]) for _ in range(2 * r)]
    if mode != "constant":
        for i in range(2 * r):
            d = x.shape[i % r]
            if d == 0:
                pads[i] = 0
            elif mode == "reflect":
                pads[i] = min(pads[i], d - 1)
            elif mode == "wrap":
                pads[i] = min(pads[i], d)
    if b.opset < 11:
        return b.node(op, [x.name], mode=mode, pads=pads, value=0.5 if b.p(0.3) else None)
    ins = [x.name, b.const(pads)]
    if mode == "constant" and b.p(0.4):
        ins.append(b.const(1 if x.dtype not in ("bool",) else True, x.dtype))
    return b.node(op, ins, mode=mode)


def g_depth_to_space(b, x, op):
    if x.rank != 4:
        raise Reject
    bs = b.int(1, 3)
    if op == "DepthToSpace":
        if x.shape[1] % (bs * bs):
            raise Reject
        return b.node(op, [x.name], blocksize=bs,
                      mode=b.choice(["DCR", "CRD"]) if b.opset >= 11 else None)
    if x.shape[2] % bs or x.shape[3] % bs:
        raise Reject
    return b.node(op, [x.name], blocksize=bs)


def g_trilu(b, x, op):
    if x.rank < 2:
        raise Reject
    ins = [x.name] + ([b.const(b.int(-3, 3))] if b.p(0.7) else [])
    return b.node(op, ins, upper=b.int(0, 1))


def g_cast(b, x, op):
    to = b.choice(["float32", "float16", "int32", "int64", "bool", "float64", "int8", "uint8"])
    if x.dtype in FLOATS and to in INTS | {"bool"} and b.p(0.5):
        return None  # float->int casts of out-of-range values are undefined; kept rarer
    return b.node(op, [x.name], to=C.ONNX_T[to])


def g_shape(b, x, op):
    attrs = {}
    if op == "Shape" and b.opset >= 15 and b.p(0.4):
        attrs = {"start": b.int(-x.rank - 1, x.rank), "end": b.int(-x.rank - 1, x.rank + 1)}
    return b.node(op, [x.name], **attrs)


def g_nonzero(b, x, op):
    return b.node(op, [x.name])


def g_compress(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank) if b.p(0.7) else None
    n = x.shape[ax] if ax is not None else C.numel(x.shape)
    c = in_dtype(b, "bool", (b.int(0, n),)).name
    return b.node(op, [x.name, c], axis=ax)


def g_unique(b, x, op):
    ax = b.axis(x.rank) if x.rank and b.p(0.4) else None
    return b.node(op, [x.name], n_out=b.int(1, 4), axis=ax, sorted=b.int(0, 1))


def g_onehot(b, x, op):
    if x.dtype not in INTS:
        raise Reject
    depth = b.const(b.int(1, 6), b.choice(["int64", "int32", "float32"]))
    vals = b.const([0, 3], "float32")
    return b.node(op, [x.name, depth, vals], axis=b.int(-x.rank - 1, x.rank))


def g_eyelike(b, x, op):
    if x.rank != 2:
        raise Reject
    return b.node(op, [x.name], k=b.int(-3, 3))


def g_reverse_sequence(b, x, op):
    if x.rank < 2:
        raise Reject
    ba, ta = (0, 1) if b.p(0.5) else (1, 0)
    n, t = x.shape[ba], x.shape[ta]
    lens = b.const(b.rng.integers(0, t + 1, size=n), "int64")
    return b.node(op, [x.name, lens], batch_axis=ba, time_axis=ta)


# --- linear algebra / NN ---------------------------------------------------------------------

def g_matmul(b, x, op):
    if x.rank == 0:
        raise Reject
    k = x.shape[-1]
    n = b.int(1, 16) if b.p(0.9) else 0
    if b.p(0.2):
        s = (k,)
    else:
        batch = list(x.shape[:-2])
        if batch and b.p(0.5):
            batch = [1 if b.p(0.3) else d for d in batch][b.int(0, len(batch)):]
        s = tuple(batch) + (k, n)
    y = in_dtype(b, x.dtype, s) if b.p(0.5) else Val(
        b.const(b.rng.uniform(-1, 1, s) if x.dtype in FLOATS else b.rng.integers(-3, 4, s),
                x.dtype), x.dtype, s)
    return b.node(op, [x.name, y.name] if b.p(0.85) or x.rank < 2 else [y.name, x.name])


def g_gemm(b, x, op):
    if x.rank != 2:
        raise Reject
    ta, tb = b.int(0, 1), b.int(0, 1)
    m, k = (x.shape[1], x.shape[0]) if ta else x.shape
    n = b.int(1, 12)
    bmat = in_dtype(b, x.dtype, (n, k) if tb else (k, n)).name
    ins = [x.name, bmat]
    if b.opset < 11 or b.p(0.7):
        ins.append(in_dtype(b, x.dtype, b.choice([(m, n), (n,), (1, n), (m, 1), ()])).name)
    return b.node(op, ins, transA=ta or None, transB=tb or None,
                  alpha=float(b.choice([1.0, 0.5])) if b.p(0.3) else None,
                  beta=float(b.choice([1.0, 2.0])) if b.p(0.3) else None)


def spatial(b, x, lo=3, hi=5):
    if not lo <= x.rank <= hi:
        raise Reject
    return x.rank - 2


def g_conv(b, x, op):
    sd = spatial(b, x)
    c = x.shape[1]
    group = b.choice([g for g in (1, 2, c) if g and c % g == 0] or [1])
    m = group * b.int(1, 3)
    ks = [b.int(1, 3) for _ in range(sd)]
    w = b.const(b.rng.uniform(-1, 1, [m, c // group] + ks), x.dtype)
    ins = [x.name, w] + ([b.const(b.rng.uniform(-1, 1, [m]), x.dtype)] if b.p(0.5) else [])
    attrs = {"group": group if group > 1 else None, "kernel_shape": ks if b.p(0.5) else None,
             "strides": [b.int(1, 2) for _ in range(sd)] if b.p(0.4) else None,
             "dilations": [b.int(1, 2) for _ in range(sd)] if b.p(0.3) else None}
    if b.p(0.2):
        attrs["auto_pad"] = b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
    elif b.p(0.5):
        attrs["pads"] = [b.int(0, 2) for _ in range(2 * sd)]
    return b.node(op, ins, **attrs)


def g_pool(b, x, op):
    sd = spatial(b, x)
    ks = [b.int(1, 3) for _ in range(sd)]
    attrs = {"kernel_shape": ks,
             "strides": [b.int(1, 2) for _ in range(sd)] if b.p(0.5) else None}
    if b.p(0.5):
        attrs["pads"] = [b.int(0, k - 1) for k in ks] * 2
    if op in ("MaxPool", "AveragePool") and b.opset >= 10 and b.p(0.3):
        attrs["ceil_mode"] = 1
    if (op == "MaxPool" and b.opset >= 10 or b.opset >= 19 and op in ("AveragePool", "LpPool")
            or op == "LpPool" and b.opset >= 18) and b.p(0.3):
        attrs["dilations"] = [b.int(1, 2) for _ in range(sd)]
    if op == "AveragePool" and b.p(0.4):
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = b.choice([1, 2, 3])
    return b.node(op, [x.name], **attrs)


def g_global_pool(b, x, op):
    spatial(b, x)
    return b.node(op, [x.name], p=b.choice([1, 2]) if op == "GlobalLpPool" else None)


def g_resize(b, x, op):
    if x.rank < 1 or b.opset < 11:
        raise Reject
    # ORT's CPU kernel interpolates linear/cubic over 2-D or 4-D (outer scales 1) inputs only,
    # so other ranks get nearest (the oracle could not check them)
    mode = b.choice(["nearest", "linear", "cubic"]) if x.rank in (2, 4) else "nearest"
    # ORT's CPU kernel interpolates (bi)linear/cubic over the last two dims only
    scaled = range(max(0, x.rank - 2), x.rank)
    scales = [float(b.choice([0.5, 1.0, 1.5, 2.0, 3.0])) if i in scaled else 1.0
              for i in range(x.rank)]
    attrs = {"mode": mode,
             "coordinate_transformation_mode": b.choice(
                 ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])}
    if mode == "nearest":
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if b.p(0.5):
        ins = [x.name, "", b.const(scales, "float32")]
    else:
        sizes = [max(1, int(d * s)) if i in scaled else d for i, (d, s) in enumerate(zip(x.shape, scales))]
        ins = [x.name, "", "", b.const(sizes)]
    if C.numel(x.shape) * 9 > CAP:
        raise Reject
    return b.node(op, ins, **attrs)


def g_layernorm(b, x, op):
    if x.rank == 0:
        raise Reject
    ax = b.axis(x.rank)
    s = x.shape[ax:] if ax >= 0 else x.shape[x.rank + ax:]
    ins = [x.name, in_dtype(b, x.dtype, s).name]
    if b.p(0.5):
        ins.append(in_dtype(b, x.dtype, s).name)
    return b.node(op, ins, axis=ax, epsilon=1e-5)


def g_channel_norm(b, x, op):
    if x.rank < 2 or x.rank > 5:
        raise Reject
    c = x.shape[1]
    ins = [x.name, in_dtype(b, x.dtype, (c,)).name, in_dtype(b, x.dtype, (c,)).name]
    if op == "BatchNormalization":
        ins += [in_dtype(b, x.dtype, (c,)).name, in_dtype(b, x.dtype, (c,), low=0.5, high=2).name]
    return b.node(op, ins, epsilon=1e-5)


def g_lpnorm(b, x, op):
    if x.rank == 0:
        raise Reject
    return b.node(op, [x.name], axis=b.axis(x.rank), p=b.choice([1, 2]))


def g_einsum(b, x, op):
    letters = "abcd"[:x.rank]
    perm = "".join(b.rng.permutation(list(letters))) if letters else ""
    return b.node(op, [x.name], equation=f"{letters}->{perm[:b.int(0, len(perm))]}")


def g_castlike(b, x, op):
    to = b.choice(["float32", "float16", "int32", "int64", "bool", "float64"])
    if x.dtype in FLOATS and to in INTS | {"bool"}:
        return None
    return b.node(op, [x.name, b.const(np.zeros(1), to)])


def g_constant_of_shape(b, x, op):
    if x.dtype != "int64" or x.rank != 1 or x.shape[0] > 4:
        raise Reject
    # x is a computed shape (a Shape output) or an input: its values must be small and >= 0
    if not any(n["op"] == "Shape" and x.name in n["outputs"] for n in b.case["nodes"]):
        raise Reject
    v = b.choice([None, 1.5, 2])
    attrs = {}
    if v is not None:  # a tensor attribute, kept JSON-able (case.attr_value builds it)
        attrs["value"] = {"tensor": "float32" if v == 1.5 else "int64", "values": [v]}
    return b.node(op, [x.name], **attrs)


def g_range(b, x, op):
    if x.rank != 0 or x.dtype not in ("float32", "int32", "int64"):
        raise Reject
    lim = b.const(b.int(-5, 12), x.dtype)
    delta = b.const(b.choice([1, 2, -1, 3]), x.dtype)
    return b.node(op, [x.name, lim, delta])


def g_mvn(b, x, op):
    if x.rank < 1:
        raise Reject
    axes = sorted({int(a) for a in b.rng.choice(x.rank, size=b.int(1, x.rank), replace=True)})
    return b.node(op, [x.name], axes=axes if b.p(0.6) or x.rank != 4 else None)


def g_groupnorm(b, x, op):
    if x.rank < 3 or x.shape[1] == 0:
        raise Reject
    c = x.shape[1]
    g = b.choice([d for d in range(1, c + 1) if c % d == 0])
    # opset 21 takes per-channel scale/bias; opset 18 per-group
    n = c if b.opset >= 21 else g
    return b.node(op, [x.name, in_dtype(b, x.dtype, (n,)).name, in_dtype(b, x.dtype, (n,)).name],
                  num_groups=g, epsilon=1e-5)


def g_lrn(b, x, op):
    if x.rank < 3:
        raise Reject
    return b.node(op, [x.name], size=b.choice([1, 3, 5]), alpha=1e-3, beta=0.75, bias=1.0)


def g_conv_transpose(b, x, op):
    sd = spatial(b, x)
    c = x.shape[1]
    group = b.choice([g for g in (1, 2) if g and c % g == 0] or [1])
    m = b.int(1, 3)
    ks = [b.int(1, 3) for _ in range(sd)]
    w = b.const(b.rng.uniform(-1, 1, [c, m] + ks), x.dtype)
    ins = [x.name, w] + ([b.const(b.rng.uniform(-1, 1, [m * group]), x.dtype)] if b.p(0.5) else [])
    attrs = {"group": group if group > 1 else None,
             "strides": [b.int(1, 2) for _ in range(sd)] if b.p(0.4) else None,
             "dilations": [b.int(1, 2) for _ in range(sd)] if b.p(0.3) else None}
    if b.p(0.4):
        attrs["pads"] = [b.int(0, 1) for _ in range(2 * sd)]
    return b.node(op, ins, **attrs)


def g_center_crop_pad(b, x, op):
    if x.rank == 0:
        raise Reject
    k = b.int(1, x.rank)
    axes = sorted(int(a) for a in b.rng.choice(x.rank, size=k, replace=False))
    shape = [max(0, x.shape[a] + b.int(-3, 3)) for a in axes]
    return b.node(op, [x.name, b.const(shape)], axes=axes if k < x.rank or b.p(0.5) else None)


def g_quantize(b, x, op):
    scale = b.const(float(b.choice([0.05, 0.1, 0.5])), "float32" if op == "DequantizeLinear"
                    else x.dtype)
    if op == "DequantizeLinear":
        return b.node(op, [x.name, scale, b.const(b.int(0, 5), x.dtype)])
    zp = b.const(b.int(0, 5) if b.p(0.5) else 0, b.choice(["uint8", "int8"]))
    return b.node(op, [x.name, scale, zp])


@dataclass
class Gen:
    fn: object
    dtypes: set = field(default_factory=lambda: set(ALL))
    min_rank: int = 0
    max_rank: int = 4
    exact: bool = False      # the same inputs give the same bits on both sides
    discrete: bool = False   # tiny input differences flip the output: only after exact nodes
    start_ranks: tuple = None


GENS = {}


def reg(ops, fn, **kw):
    for op in ops.split():
        GENS[op] = Gen(fn, **kw)


reg("Exp Sqrt Erf Atan Sinh Cosh Asinh Tanh Sigmoid Softplus Softsign "
    "Elu Selu Celu HardSigmoid HardSwish Mish Gelu", g_unary, dtypes=FLOATS)
# ill-conditioned: a rounding difference upstream grows without bound near their poles and
# branch edges, so (like discrete ops) they only follow nodes that are exact on both sides
reg("Log Reciprocal Sin Cos Tan Asin Acos Acosh Atanh", g_unary, dtypes=FLOATS, discrete=True)
reg("Relu LeakyRelu ThresholdedRelu Shrink", g_unary, dtypes=FLOATS | SIGNED, exact=True)
reg("Neg Abs", g_unary, dtypes=NUMERIC, exact=True)
reg("Floor Ceil Round Sign IsNaN IsInf", g_unary, dtypes=NUMERIC, exact=True, discrete=True)
reg("Not", g_unary, dtypes={"bool"}, exact=True)
reg("BitwiseNot", g_unary, dtypes=INTS, exact=True)
reg("Identity", g_unary, exact=True)
reg("Dropout", g_dropout, dtypes=FLOATS, exact=True)
reg("Add Sub Mul", g_binary, dtypes=NUMERIC)
reg("Div Pow Mod", g_binary, dtypes=NUMERIC, discrete=True)
reg("Max Min", g_variadic, dtypes=NUMERIC, exact=True)
reg("Sum Mean", g_variadic, dtypes=FLOATS)
reg("Equal Less Greater LessOrEqual GreaterOrEqual", g_binary, dtypes=ALL, exact=True,
    discrete=True)
reg("And Or Xor", g_binary, dtypes={"bool"}, exact=True)
reg("BitwiseAnd BitwiseOr BitwiseXor", g_binary, dtypes=INTS, exact=True)
reg("BitShift", g_bitshift, dtypes={"uint8", "uint16", "uint32", "uint64"}, exact=True)
reg("PRelu", g_prelu, dtypes=FLOATS | {"int32", "int64"})
reg("Where", g_where, exact=True)
reg("Clip", g_clip, dtypes=NUMERIC, exact=True)
reg("ReduceSum ReduceMean ReduceProd ReduceL1 ReduceL2 ReduceLogSumExp ReduceSumSquare", g_reduce,
    dtypes=NUMERIC)
# integer log-sums convert -inf/NaN to integers (undefined), so floats only
reg("ReduceLogSum", g_reduce, dtypes=FLOATS, discrete=True)
reg("ReduceMax ReduceMin", g_reduce, dtypes=ALL, exact=True)
reg("ArgMax ArgMin", g_arg, dtypes=NUMERIC, exact=True, discrete=True, min_rank=1)
reg("Softmax LogSoftmax", g_softmax, dtypes=FLOATS, min_rank=1)
reg("Hardmax", g_softmax, dtypes=FLOATS, min_rank=1, exact=True, discrete=True)
reg("CumSum", g_cumsum, dtypes=NUMERIC, min_rank=1)
reg("TopK", g_topk, dtypes=NUMERIC, min_rank=1, exact=True, discrete=True)
reg("Reshape", g_reshape, exact=True)
reg("Transpose", g_transpose, exact=True)
reg("Squeeze", g_squeeze, exact=True)
reg("Unsqueeze", g_unsqueeze, exact=True)
reg("Flatten", g_flatten, exact=True)
reg("Concat", g_concat, exact=True, min_rank=1)
reg("Split", g_split, exact=True, min_rank=1)
reg("Slice", g_slice, exact=True, min_rank=1)
reg("Gather", g_gather, exact=True, min_rank=1)
reg("GatherElements", g_gather_elements, exact=True, min_rank=1)
reg("GatherND", g_gather_nd, exact=True, min_rank=1)
reg("ScatterElements Scatter", g_scatter_elements, exact=True, min_rank=1)
reg("ScatterND", g_scatter_nd, exact=True, min_rank=1)
reg("Expand", g_expand, exact=True)
reg("Tile", g_tile, exact=True)
reg("Pad", g_pad, exact=True, min_rank=1)
reg("DepthToSpace SpaceToDepth", g_depth_to_space, exact=True, min_rank=4, start_ranks=(4,))
reg("Trilu", g_trilu, exact=True, min_rank=2)
reg("Cast", g_cast, exact=True, discrete=True)
reg("Shape Size", g_shape, exact=True)
reg("NonZero", g_nonzero, exact=True, discrete=True)
reg("Compress", g_compress, exact=True, min_rank=1)
reg("Unique", g_unique, dtypes=NUMERIC, exact=True, discrete=True)
reg("OneHot", g_onehot, dtypes=INTS, exact=True)
reg("EyeLike", g_eyelike, exact=True, min_rank=2, max_rank=2, start_ranks=(2,))
reg("ReverseSequence", g_reverse_sequence, exact=True, min_rank=2)
reg("MatMul", g_matmul, dtypes=FLOATS | {"int32", "int64"}, min_rank=1)
reg("Gemm", g_gemm, dtypes=FLOATS | {"int32", "int64"}, min_rank=2, max_rank=2,
    start_ranks=(2,))
reg("Conv", g_conv, dtypes=FLOATS, min_rank=3, start_ranks=(3, 4, 5))
reg("MaxPool", g_pool, dtypes=FLOATS, min_rank=3, exact=True, start_ranks=(3, 4, 5))
reg("AveragePool LpPool", g_pool, dtypes=FLOATS, min_rank=3, start_ranks=(3, 4, 5))
reg("GlobalMaxPool", g_global_pool, dtypes=FLOATS, min_rank=3, exact=True, start_ranks=(3, 4))
reg("GlobalAveragePool GlobalLpPool", g_global_pool, dtypes=FLOATS, min_rank=3,
    start_ranks=(3, 4))
reg("Resize", g_resize, dtypes=FLOATS, min_rank=1)
reg("LayerNormalization RMSNormalization", g_layernorm, dtypes=FLOATS, min_rank=1)
reg("InstanceNormalization BatchNormalization", g_channel_norm, dtypes=FLOATS, min_rank=2,
    max_rank=5, start_ranks=(3, 4))
reg("LpNormalization", g_lpnorm, dtypes=FLOATS, min_rank=1)
reg("Einsum", g_einsum, dtypes=FLOATS)
reg("CastLike", g_castlike, exact=True, discrete=True)
reg("ConstantOfShape", g_constant_of_shape, dtypes={"int64"}, exact=True, min_rank=1, max_rank=1)
reg("Range", g_range, dtypes={"float32", "int32", "int64"}, exact=True, max_rank=0)
# epsilon 1e-9: on a constant slice a rounding difference upstream is multiplied by ~3e4
reg("MeanVarianceNormalization", g_mvn, dtypes=FLOATS, min_rank=1, discrete=True)
reg("GroupNormalization", g_groupnorm, dtypes=FLOATS, min_rank=3, start_ranks=(3, 4))
# ORT's CPU LRN takes 4-D input only (the spec any rank from 3)
reg("LRN", g_lrn, dtypes=FLOATS, min_rank=4, max_rank=4, start_ranks=(4,))
reg("ConvTranspose", g_conv_transpose, dtypes=FLOATS, min_rank=3, start_ranks=(3, 4))
reg("CenterCropPad", g_center_crop_pad, exact=True, min_rank=1)
reg("QuantizeLinear", g_quantize, dtypes={"float32"}, discrete=True)
reg("DequantizeLinear", g_quantize, dtypes={"int8", "uint8", "int32"})


# ================================ chains ===================================================

def pick_opset(rng):
    ops, w = zip(*OPSETS)
    w = np.array(w, float)
    return int(rng.choice(ops, p=w / w.sum()))


def pool(reg_, opset):
    """{op: dtypes we may feed it} for every generated op the registry claims at `opset`."""
    out = {}
    for op, g in GENS.items():
        dts = reg_.dtypes(op, opset) & g.dtypes
        if dts:
            out[op] = dts
    return out


def weighted_dtype(b, dts):
    dts = sorted(dts)
    w = np.array([DTYPE_WEIGHT.get(d, 0.05) for d in dts])
    return dts[int(b.rng.choice(len(dts), p=w / w.sum()))]


def try_apply(b, op, x):
    snap = copy.deepcopy(b.case)
    count = b.count
    try:
        outs = GENS[op].fn(b, x, op)
    except Reject:
        outs = None
    except Exception as e:  # a generator's own bug: counted in the summary, the case goes on
        GEN_ERRORS[f"{op}: {e!r}"[:120]] += 1
        outs = None
    if outs:
        ok = b.infer()
        vals = [b.case["values"].get(o) for o in outs]
        if ok and all(v and (v[1] is None or C.numel(v[1]) <= CAP) for v in vals):
            return outs
    b.case, b.count = snap, count
    return None


def generate(reg_, seed, index, max_nodes=4, ops=None, max_dim=None, opset=None):
    """Case `index` of run `seed`. ops: force this op sequence (the minimiser shrinks shapes by
    regenerating the same chain)."""
    rng = np.random.default_rng([seed, index])
    opset = pick_opset(rng) if opset is None else opset
    b = Builder(rng, opset, max_dim)
    avail = pool(reg_, opset)
    if not avail:
        return None
    if ops:
        if ops[0] not in avail:
            return None
        first = ops[0]
    else:
        first = sorted(avail)[int(rng.integers(len(avail)))]
    g = GENS[first]
    dt = weighted_dtype(b, avail[first])
    rank = b.choice(g.start_ranks) if g.start_ranks else b.int(g.min_rank, g.max_rank)
    shape = b.shape(rank)
    # now and then NaN/inf/-0 in a float input: their handling is specified too
    x = Val(b.input(dt, shape, {"specials": True} if dt in FLOATS and b.p(0.05) else None), dt,
            shape)
    outs = try_apply(b, first, x)
    if not outs:
        return None
    exact = g.exact
    # mostly chains of 2-4 (compiled groups form), now and then a single node
    n_nodes = len(ops) if ops else (1 if b.p(0.1) else b.int(2, max_nodes))
    for step in range(1, n_nodes):
        dt, shape = b.case["values"][outs[0]]
        if shape is None:
            break
        x = Val(outs[0], dt, shape)
        cands = [op for op, dts in avail.items() if dt in dts and
                 GENS[op].min_rank <= len(shape) <= GENS[op].max_rank and
                 (exact or not GENS[op].discrete)]
        if ops:
            cands = [ops[step]] if ops[step] in cands else []
        got = None
        for _ in range(8):
            if not cands:
                break
            op = cands[int(rng.integers(len(cands)))]
            got = try_apply(b, op, x)
            if got:
                exact = exact and GENS[op].exact
                break
        if not got:
            break
        outs = got
    case = b.case
    case["seed"], case["index"] = seed, index
    return case
