"""Two small lists the verdicts consult.

ORACLE_EXCEPTIONS: where ORT's CPU provider departs from the ONNX spec, the spec wins; each entry
turns a mismatch (or a CPU failure) that only the oracle's fault explains into "oracle".

KNOWN: EP bugs the fuzzer found that are not fixed yet. The CI slice
(tests/ops/test_fuzz_slice.py) skips cases they match, and `make fuzz` labels them; remove an entry with its fix. Each entry is
(predicate on (case, result), issue text); a predicate sees the case dict and the mode's result.
"""
from __future__ import annotations

import re

REDUCES = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def ops(case):
    return [n["op"] for n in case["nodes"]]


def in_shape(case, node):
    return case["values"].get(node["inputs"][0], (None, None))[1] if node["inputs"] else None


def has_zero_dim(shape):
    return shape is not None and 0 in shape


def empty_reduce(case, res):
    return any(n["op"] in REDUCES and has_zero_dim(in_shape(case, n)) for n in case["nodes"])


def int_div(case, res):
    return any(n["op"] in ("Div", "Mod") and case["values"][n["inputs"][0]][0] in
               ("int8", "int16", "int32", "int64") for n in case["nodes"])


def ep_failed_op(res):
    """The op type of the node the EP's error names ("node 'n2' (GlobalAveragePool): ...")."""
    m = re.search(r"node '[^']*' \((\w+)\)", res.get("detail") or "")
    return m.group(1) if m else None


def cpu_failed_op(res):
    """The op type of the node ORT's CPU provider failed in ("running MatMul node")."""
    m = re.search(r"running (\w+) node", res.get("detail") or "")
    return m.group(1) if m else None


def empty_arg(case, res):
    return any(n["op"] in ("ArgMax", "ArgMin") and has_zero_dim(in_shape(case, n))
               for n in case["nodes"])


ORACLE_EXCEPTIONS = [
    # Where ONNX's reference implementation (onnx.reference) computes the EP's answer, ORT's
    # CPU provider is the one off (seen: float16 linear Resize giving NaN, ReduceMin/ReduceMax
    # dropping NaN where the spec's numpy semantics propagate it).
    (lambda case, res: res["status"] == "mismatch" and res.get("reference") == "ep",
     "onnx.reference agrees with the EP"),
    # Inputs seeded with NaN/inf (5% of float cases): where the spec says nothing of them
    # (interpolation weights of 0 times inf, NaN in min/max windows), ORT's CPU provider, ONNX's
    # reference and MLX each pick their own answer; only ArgMax/ArgMin's NaN rule is checked.
    (lambda case, res: res["status"] == "mismatch" and any(
        (i.get("fill") or {}).get("specials") for i in case["inputs"]) and not any(
        n["op"] in ("ArgMax", "ArgMin") for n in case["nodes"]),
     "NaN/inf inputs where the spec leaves the answer open"),
    # NaN/inf made inside the graph (Pow of a negative base, Log of 0) reaching a node where the
    # spec leaves them open, as above: only when every differing element is non-finite on one
    # side (seen: linear Resize, whose zero-weight tap is left out here where ORT multiplies a
    # NaN by 0; seed 600 case 582).
    (lambda case, res: res["status"] == "mismatch" and res.get("nonfinite_only") and
     res.get("nonfinite_inside") and not any(n["op"] in ("ArgMax", "ArgMin")
                                             for n in case["nodes"]),
     "NaN/inf made inside the graph where the spec leaves the answer open"),
    # MaxPool and GlobalMaxPool over a window holding NaN: the spec says nothing; ORT's CPU
    # kernels skip the NaN (a comparison that is false), the EP propagates it as MLX's maximum,
    # numpy's max and the EP's own ReduceMax (the spec's numpy semantics) do, so that
    # GlobalMaxPool and ReduceMax over the same axes agree.
    (lambda case, res: res["status"] == "mismatch" and res.get("nonfinite_only") and any(
        n["op"] in ("MaxPool", "GlobalMaxPool") for n in case["nodes"]),
     "MaxPool NaN: ORT skips it, the EP propagates it (spec silent)"),
    # ORT's float16 Clip-11 leaves +-inf unclamped where the spec's default bounds (the type's
    # lowest and highest values, 65504) clamp them, as its Clip-12 and later do.
    (lambda case, res: res["status"] == "mismatch" and res.get("nonfinite_only") and
     case["opset"] == 11 and any(n["op"] == "Clip" and case["values"][n["inputs"][0]][0] ==
                                 "float16" for n in case["nodes"]),
     "ORT CPU: float16 Clip-11 keeps infinities (spec: type's limits)"),
    # ORT's CPU ArgMax/ArgMin over a tensor with a zero-size dim and a negative axis keeps the
    # input's shape: an empty answer where the spec's output shape may be empty too (a
    # mismatch) or hold elements, each an index into the empty axis, which the EP rejects.
    # A node after it may then fail on ORT's CPU provider only (seed 900 case 1251: a MatMul).
    (lambda case, res: empty_arg(case, res) and (res["status"] == "mismatch" or (
        res["status"] == "ep_error" and "has no index to return" in (res.get("detail") or ""))
        or (res["status"] == "invalid_accepted" and cpu_failed_op(res) not in (
            None, "ArgMax", "ArgMin"))),
     "ORT CPU: ArgMax/ArgMin over empty tensors mis-shaped"),
    # ORT's CPU Resize interpolates linear/cubic over 2-D or the inner dims of 4-D only; the
    # spec defines every rank.
    # An answer of empty tensors holds no values, so none can come from unwritten memory; ORT's
    # CPU kernels reject some zero-size inputs (MaxPool with no channels, LayerNormalization
    # over an empty axis) where the spec's shape rules give an empty result.
    (lambda case, res: res["status"] == "invalid_accepted" and res.get("out_sizes") is not None
     and not any(res["out_sizes"]), "ORT CPU rejects a zero-size input the EP answers emptily"),
    # ORT's CPU LayerNormalization rejects a zero-size normalised extent; the spec's result is
    # the empty tensor (whatever is concatenated to it afterwards).
    (lambda case, res: res["status"] == "invalid_accepted" and "LayerNormalization" in (
        res.get("detail") or "") and "must be at least 1, got 0" in (res.get("detail") or ""),
     "ORT CPU: LayerNormalization over an empty extent rejected"),
    (lambda case, res: res["status"] == "invalid_accepted" and any(
        n["op"] == "Resize" for n in case["nodes"]) and "only supports" in (res.get("detail") or ""),
     "ORT CPU: Resize linear/cubic rank limits (spec defines all ranks)"),
    # ORT's CPU reductions over an empty axis keep it in the output shape (or fail) where the
    # spec removes it (keepdims=0) and defines the reduction's identity as the value.
    # The node after such a reduction then sees another shape on each side: the EP may fail
    # it where ORT's CPU provider answers (seed 1 case 1786: ReduceL1 -> GlobalAveragePool of
    # [1, 1, 1, 0], which ORT's mis-shaped [0, 1, 1, 0] lets through).
    (lambda case, res: empty_reduce(case, res) and (
        res["status"] in ("mismatch", "invalid_accepted") or (
            res["status"] == "ep_error" and ep_failed_op(res) not in REDUCES)),
     "ORT CPU: reductions over empty tensors mis-shaped"),
    # ORT's CPU Conv with no input channels can leave its output unwritten (seed 900 case 1160:
    # NaN from an earlier buffer in 1001 of 1440 elements after a CumSum, in one mode of three);
    # the spec's sums of nothing are zero plus the bias, which the EP answers.
    (lambda case, res: res["status"] == "mismatch" and any(
        n["op"] in ("Conv", "ConvTranspose") and (in_shape(case, n) or [1, 1])[1:2] == [0]
        for n in case["nodes"]),
     "ORT CPU: Conv with no input channels leaves its output unwritten"),
    # ORT's CPU ReduceProd over integers saturates on overflow (INT64_MAX); the spec says nothing
    # of overflow, and the EP wraps as numpy's prod and C's unsigned arithmetic do (seed 800
    # case 1370).
    (lambda case, res: res["status"] == "mismatch" and any(
        n["op"] == "ReduceProd" for n in case["nodes"]) and re.search(
        r"vs CPU np\.int\d+\((9223372036854775807|-9223372036854775808|2147483647|"
        r"-2147483648)\)", res.get("detail") or ""),
     "ORT CPU: integer ReduceProd saturates on overflow (spec silent; the EP wraps)"),
    # ORT's CPU Pad in edge/reflect/wrap mode rejects an axis that negative pads crop to nothing
    # even where nothing is padded onto it; the spec's answer is then an empty tensor (seed 700
    # case 1274: the Pad's output is empty, another output of the graph is not).
    (lambda case, res: res["status"] == "invalid_accepted" and "zero effective input extent" in (
        res.get("detail") or "") and all(
        0 in (case["values"].get(n["outputs"][0], (None, None))[1] or [1])
        for n in case["nodes"] if n["op"] == "Pad"),
     "ORT CPU: Pad rejects an axis cropped to nothing (spec: an empty output)"),
    # ORT's CPU integer Div/Mod traps (SIGFPE) on INT_MIN / -1; the oracle run is then absent.
    (lambda case, res: res.get("cpu_crashed") and int_div(case, res),
     "ORT CPU: integer INT_MIN/-1 division crashes"),
]


def first_match(rows, case, res):
    """The text of the first (predicate, text) row whose predicate holds; a predicate that fails
    on a case it was not written for counts as not holding."""
    for pred, text in rows:
        try:
            if pred(case, res):
                return text
        except Exception:
            pass
    return None


def oracle_exception(case, res):
    return first_match(ORACLE_EXCEPTIONS, case, res)


KNOWN = [
    # Found by this fuzzer and not fixed yet: each entry is one bug, with a minimal repro in the
    # fuzzer's report; remove it with the fix. (None open.)
]


def known_issue(case, res):
    return first_match(KNOWN, case, res)
