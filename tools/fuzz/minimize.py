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


def fails_same(case, mode, status, timeout):
    res = driver.run_jobs([{"id": 0, "case": case, "modes": [mode]}], workers=1,
                          timeout=timeout)[0]
    v = driver.verdict(case, res).get(mode)
    return v is not None and v["status"] == status, v


def size(case):
    return (len(case["nodes"]), sum(C.numel(i["shape"]) for i in case["inputs"]))


def minimize(reg, case, mode, status, timeout=60.0, budget=16):
    best, best_res = case, None
    tries = 0

    def attempt(c):
        nonlocal best, best_res, tries
        if c is None or tries >= budget or size(c) >= size(best):
            return False
        tries += 1
        ok, res = fails_same(c, mode, status, timeout)
        if ok:
            best, best_res = c, res
        return ok

    for k in range(1, len(case["nodes"])):
        if attempt(truncate_end(best, k)):
            break
    for k in range(len(best["nodes"]) - 1, 0, -1):
        if attempt(drop_start(best, k)):
            break
    chain = [n["op"] for n in best["nodes"]]
    for max_dim in (4, 2, 1):
        for sub in range(3):
            c = gen.generate(reg, case["seed"], case["index"] * 1000 + 100 + sub * 10 + max_dim,
                             ops=chain, max_dim=max_dim, opset=case["opset"])
            if c and [n["op"] for n in c["nodes"]] == chain and attempt(c):
                break
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
