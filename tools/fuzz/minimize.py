"""Shrinks a failing case while it keeps failing the same way (same status in the same mode):
drop nodes from the chain's end, then from its start (the cut value becomes a graph input), then
regenerate the same operator chain with smaller dims. Writes the reproducer files."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from . import case as C
from . import driver, gen


def truncate_end(case, k):
    c = copy.deepcopy(case)
    c["nodes"] = c["nodes"][:k]
    return c


def drop_start(case, k):
    c = copy.deepcopy(case)
    first = c["nodes"][k]
    x = first["inputs"][0]
    dt, shape = c["values"].get(x, (None, None))
    if shape is None or any(i["name"] == x for i in c["inputs"]):
        return None
    c["nodes"] = c["nodes"][k:]
    c["inputs"].append({"name": x, "dtype": dt, "shape": shape, "fill": None})
    # initializers and inputs the remaining nodes do not read are dropped by build_model
    return c


def size(case):
    return (len(case["nodes"]), sum(C.numel(i["shape"]) for i in case["inputs"]))


def smallest_failing(cands, mode, status, timeout):
    """Runs every candidate in one batch of worker jobs (a worker lives through many) and
    returns the smallest that fails with `status` in `mode`, with its verdict, or (None, None)."""
    cands = [c for c in cands if c is not None]
    if not cands:
        return None, None
    jobs = [{"id": i, "case": c, "modes": [mode]} for i, c in enumerate(cands)]
    raw = driver.run_jobs(jobs, workers=2, timeout=timeout)
    hits = []
    for i, c in enumerate(cands):
        v = driver.verdict(c, raw[i]).get(mode)
        if v is not None and v["status"] == status:
            hits.append((size(c), i, c, v))
    if not hits:
        return None, None
    _, _, c, v = min(hits, key=lambda h: h[:2])
    return c, v


def minimize(reg, case, mode, status, timeout=60.0):
    """Three batched stages: cut the chain's end, cut its start, regenerate the same op chain
    with dims capped at 4, 2 and 1 (a few variants each)."""
    best, best_res = case, None
    stages = [
        lambda c: [truncate_end(c, k) for k in range(1, len(c["nodes"]))],
        lambda c: [drop_start(c, k) for k in range(1, len(c["nodes"]))],
        lambda c: [gen.generate(reg, case["seed"], case["index"] * 1000 + 100 + sub * 10 + md,
                                ops=[n["op"] for n in c["nodes"]], max_dim=md,
                                opset=case["opset"])
                   for md in (4, 2, 1) for sub in range(3)],
    ]
    for stage in stages:
        chain = [n["op"] for n in best["nodes"]]
        cands = [c for c in stage(best) if c is not None and size(c) < size(best)]
        if stage is stages[2]:
            cands = [c for c in cands if [n["op"] for n in c["nodes"]] == chain]
        c, v = smallest_failing(cands, mode, status, timeout)
        if c is not None:
            best, best_res = c, v
    return best, best_res


def write_repro(out, case, mode, res, tag):
    d = Path(out) / tag
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.onnx").write_bytes(C.build_model(case).SerializeToString())
    np.savez(d / "inputs.npz", **C.feeds(case))
    (d / "case.json").write_text(json.dumps(case))
    env = {"compiled": "", "keyed": "ONNXRUNTIME_EP_MLX_NO_SHAPELESS=1 ",
           "eager": "ONNXRUNTIME_EP_MLX_NO_COMPILE=1 "}[mode]
    line = (f"{res['status']} in mode {mode} ({env.strip() or 'default'}): {C.describe(case)}"
            f" | {res.get('detail') or ''}"
            + (f" | known: {res['known']}" if res.get("known") else ""))
    (d / "README.txt").write_text(
        line + "\nreplay: " + env + "python tools/fuzz/run.py --replay " + str(d / "case.json")
        + "\n")
    return d, line
