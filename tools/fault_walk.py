"""Fault injection walk: for N = 1, 2, ..., makes the Nth guarded call into the MLX bridge fail
(ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL=N, counted from the EP's creation), then creates a session and
runs it twice. Every outcome must be one of:
  - an ORT error raised by session creation or the first Run that carries the injected failure and
    names the EP and the node or group it hit; after a failed Run the session must still give the
    CPU provider's answer on the next Run;
  - the CPU provider's answer (the failure hit a path with a fallback, such as a compiled call
    that falls back to eager translation).
The walk ends after `quiet` consecutive N whose runs met no injected failure (N past the last
bridge call). Usable as a module (walk()) and from the command line on the benchmark models."""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

ENV = "ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL"
# What an error must name: the node, the constant, the input or the group it hit.
NAMED = re.compile(r"MLXExecutionProvider: (Compile '[^']*': |evaluating )?(node|constant|input|group) '")



def _same(got, want, rtol, atol):
    return len(got) == len(want) and all(
        g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        for g, w in zip(got, want))


def _failed(summary, n, where, error):
    """Counts an error raised at `where` ('creation' or 'run'): it must carry the injected
    failure and name what it hit, else it is a problem. Returns whether it was the injection."""
    msg = str(error)
    injected = "injected failure" in msg
    if not injected or not NAMED.search(msg):
        summary["problems"].append((n, where, msg[-400:]))
    summary[f"{where}_errors"] += injected
    return injected


def walk(model_bytes, feeds, make_session, reference, start=1, stride=1, quiet=40, limit=100000,
         rtol=1e-4, atol=1e-5):
    """Returns a summary dict; 'problems' lists every outcome that broke the rules."""
    summary = {"points": 0, "creation_errors": 0, "run_errors": 0, "recovered": 0,
               "problems": []}
    clean = 0
    n = start
    while clean < quiet and n < limit:
        os.environ[ENV] = str(n)
        injected = False
        try:
            try:
                s = make_session(model_bytes)
            except Exception as e:  # creation failed: it must be ours, named
                injected = _failed(summary, n, "creation", e)
                continue
            finally:
                os.environ.pop(ENV, None)
            for _ in range(2):  # the failure may fall in the first Run or the second
                try:
                    if not _same(s.run(None, feeds), reference, rtol, atol):
                        summary["problems"].append((n, "wrong answer", ""))
                except Exception as e:
                    injected = _failed(summary, n, "run", e)
                    break
            if injected:  # the session stays usable
                try:
                    if _same(s.run(None, feeds), reference, rtol, atol):
                        summary["recovered"] += 1
                    else:
                        summary["problems"].append((n, "wrong answer after", ""))
                except Exception as e:
                    summary["problems"].append((n, "unusable after", str(e)[-400:]))
            del s
        finally:
            summary["points"] += 1
            clean = 0 if injected else clean + 1
            n += stride
    summary["last"] = n - stride
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", help="a benchmark model (bench/models.py), by part of its name")
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--start", type=int, default=1)
    ap.add_argument("--quiet", type=int, default=40)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
    import models  # the benchmark's models: files from the pinned packages
    import onnxruntime as ort

    import onnxruntime_ep_mlx as mlx
    name = next(k for k in models.CASES if args.case.lower() in k.lower())
    model, feeds = models.CASES[name]()
    if isinstance(model, str):
        with open(model, "rb") as f:
            model = f.read()
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)

    def make(b):
        return ort.InferenceSession(b, mlx.session_options())
    summary = walk(model, feeds, make, reference, args.start, args.stride, args.quiet)
    print(name, summary)
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
