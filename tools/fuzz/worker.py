"""The child process: reads jobs (one JSON line each: {"id", "case", "modes", "cpu"}) on stdin,
runs each case on ORT's CPU provider and on the MLX EP in the asked modes, and writes one JSON
line per step on its protocol pipe. Before each step it writes {"begin": mode}, so when the
process dies by a signal or hangs the parent knows which case and mode it was on.

Native code may print on fd 1, so the protocol gets a private duplicate of fd 1 and fd 1 itself
is pointed at stderr.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback

# The EP reads its A/B switches from the environment when a session creates it (src/ep/options.c).
MODES = {"compiled": {}, "keyed": {"ONNXRUNTIME_EP_MLX_NO_SHAPELESS": "1"},
         "eager": {"ONNXRUNTIME_EP_MLX_NO_COMPILE": "1"}}
SWITCHES = ("ONNXRUNTIME_EP_MLX_NO_SHAPELESS", "ONNXRUNTIME_EP_MLX_NO_COMPILE")

# dtype: (rtol, atol, tolerance relative to the output's largest magnitude)
TOL = {"float32": (1e-3, 1e-4, 1e-4), "float64": (1e-6, 1e-8, 1e-8),
       "float16": (1e-2, 1e-2, 1e-2), "bfloat16": (5e-2, 5e-2, 5e-2)}


def compare(got, ref, names):
    """None when equal (by dtype tolerance); else a short reason."""
    import numpy as np
    if len(got) != len(ref):
        return f"{len(got)} outputs, CPU gives {len(ref)}"
    for name, g, r in zip(names, got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if g.dtype != r.dtype:
            return f"{name}: dtype {g.dtype}, CPU {r.dtype}"
        if g.shape != r.shape:
            return f"{name}: shape {list(g.shape)}, CPU {list(r.shape)}"
        if g.dtype.kind not in "fc":
            if not np.array_equal(g, r):
                bad = int(np.sum(g != r))
                i = np.argwhere(g != r)[0]
                return (f"{name}: {bad}/{g.size} differ, first at {i.tolist()}: {g[tuple(i)]!r} vs "
                        f"CPU {r[tuple(i)]!r}")
            continue
        rtol, atol, ntol = TOL.get(str(g.dtype), TOL["float32"])
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        fin = np.isfinite(r64)
        scale = float(np.max(np.abs(r64[fin]))) if fin.any() else 0.0
        with np.errstate(invalid="ignore"):
            close = np.isclose(g64, r64, rtol=rtol, atol=atol + ntol * scale, equal_nan=True)
        close |= (g64 == r64)  # infinities of one sign
        if not close.all():
            i = np.argwhere(~close)[0]
            return (f"{name}: {int((~close).sum())}/{g.size} differ, first at {i.tolist()}: "
                    f"{g64[tuple(i)]!r} vs CPU {r64[tuple(i)]!r}")
    return None


def nonfinite_only(got, ref):
    """Whether every element that differs (by compare's tolerance) has a NaN or an infinity on
    one side: a disagreement about non-finite values only, not about numbers."""
    import numpy as np
    if len(got) != len(ref):
        return False
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape or g.dtype != r.dtype:
            return False
        if g.dtype.kind not in "fc":
            if not np.array_equal(g, r):
                return False
            continue
        rtol, atol, ntol = TOL.get(str(g.dtype), TOL["float32"])
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        fin = np.isfinite(r64)
        scale = float(np.max(np.abs(r64[fin]))) if fin.any() else 0.0
        with np.errstate(invalid="ignore"):
            close = np.isclose(g64, r64, rtol=rtol, atol=atol + ntol * scale, equal_nan=True)
        close |= (g64 == r64)
        bad = ~close
        if (bad & np.isfinite(g64) & np.isfinite(r64)).any():
            return False
    return True


def nonfinite_inside(case, feeds, opts, ort):
    """Whether ORT's CPU provider sees a NaN or an infinity in a value that one node of the case
    computes and another reads (a NaN made inside the graph, such as Pow of a negative base):
    None when that cannot be told."""
    import numpy as np
    from fuzz import case as C
    outs = set(C.graph_outputs(case))
    inner = [o for n in case["nodes"] for o in n["outputs"] if o and o not in outs]
    if not inner:
        return False
    try:
        model = C.build_model(case, outputs=inner, typed_outputs=False).SerializeToString()
        vals = ort.InferenceSession(model, opts(), providers=["CPUExecutionProvider"]).run(
            None, feeds)
    except Exception:
        return None
    return any(np.asarray(v).dtype.kind == "f" and not np.isfinite(np.asarray(v)).all()
               for v in vals if v is not None)


def classify_cpu_error(msg):
    """ORT's CPU provider lacking a kernel is no verdict on the input; anything else is."""
    for s in ("Could not find an implementation", "NOT_IMPLEMENTED", "not implemented",
              "is not supported with", "data type is not supported",
              "_inlfunc_", "bound to different types"):  # ORT's function expansions
        if s in msg:
            return "no_kernel"
    return "invalid"


def reference_check(model, feeds, got, ref, names):
    """A second opinion on a mismatch: ONNX's own reference implementation (onnx.reference).
    Returns "ep" when the EP's answer matches it, "cpu" when ORT's does, None when neither or
    it cannot run the model."""
    try:
        from onnx.reference import ReferenceEvaluator
        import onnx
        want = ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
    except Exception:
        return None
    if compare(got, want, names) is None:
        return "ep"
    return "cpu" if compare(ref, want, names) is None else "neither"


def main():
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is counted, not dumped
    # One core per worker (FUZZ_CPU, set by the driver): the EP's thread pool then has no
    # helper threads to spin while a Run holds it, which on a shared 2-core machine made two
    # workers' pools fight for the cores (tens of times slower).
    if os.environ.get("FUZZ_CPU"):
        os.sched_setaffinity(0, {int(os.environ["FUZZ_CPU"])})
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import numpy as np
    import onnxruntime as ort

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import onnxruntime_ep_mlx as mlx
    from fuzz import case as C

    ort.set_default_logger_severity(3)
    report = os.path.join(tempfile.mkdtemp(prefix="fuzz-worker-"), "report.json")

    def emit(**kw):
        proto.write(json.dumps(kw) + "\n")

    def opts():
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return so

    for line in sys.stdin:
        job = json.loads(line)
        case = job["case"]
        try:
            model = C.build_model(case).SerializeToString()
            feeds = C.feeds(case)
            names = C.graph_outputs(case)
        except Exception as e:  # a generator bug, not an EP one
            emit(id=job["id"], mode="build", status="build_error", detail=repr(e)[:300])
            emit(id=job["id"], done=True)
            continue
        ref, cpu_err = None, None
        if job.get("cpu", True):
            emit(id=job["id"], begin="cpu")
            try:
                ref = ort.InferenceSession(model, opts(), providers=["CPUExecutionProvider"]).run(
                    None, feeds)
                emit(id=job["id"], mode="cpu", status="ok")
            except Exception as e:
                cpu_err = str(e)
                emit(id=job["id"], mode="cpu", status="error", kind=classify_cpu_error(cpu_err),
                     detail=cpu_err[:400])
        # else: ORT's CPU provider crashed on this case earlier; no oracle, crashes still count
        for mode in job["modes"]:
            for k in SWITCHES:
                os.environ.pop(k, None)
            os.environ.update(MODES[mode])
            emit(id=job["id"], begin=mode)
            res = {"id": job["id"], "mode": mode}
            try:
                if os.path.exists(report):
                    os.remove(report)
                so = mlx.session_options({"report_file": report}, base=opts())
                sess = ort.InferenceSession(model, so)
                try:
                    rep = json.load(open(report))
                    res.update(claimed=rep.get("claimed", 0), nodes=rep.get("nodes", 0),
                               declined=[[d["op"], d["reason"][:160]] for d in rep.get("declined", [])])
                except Exception:
                    res.update(claimed=0, nodes=len(case["nodes"]))
                got = sess.run(None, feeds)
                # a second run takes the compiled variant from the cache (shapeless or keyed)
                again = sess.run(None, feeds)
                del sess
                res["out_sizes"] = [int(np.asarray(g).size) for g in got]
                if ref is not None:
                    why, differs = compare(got, ref, names), got
                    if why is None:
                        why2, differs = compare(again, ref, names), again
                        why = f"second run: {why2}" if why2 else None
                    res.update(status="mismatch" if why else "ok", detail=why)
                    if why:
                        res["nonfinite_only"] = nonfinite_only(differs, ref)
                        if res["nonfinite_only"]:
                            res["nonfinite_inside"] = nonfinite_inside(case, feeds, opts, ort)
                        ref_says = reference_check(model, feeds, got, ref, names)
                        if ref_says:
                            res["reference"] = ref_says
                            res["detail"] += f" (onnx.reference agrees with: {ref_says})"
                elif cpu_err is not None and classify_cpu_error(cpu_err) == "invalid":
                    res.update(status="invalid_accepted",
                               detail=f"CPU provider: {cpu_err[:300]}")
                else:
                    res.update(status="no_oracle")
            except Exception as e:
                msg = str(e)
                if ref is not None:
                    # the EP's message comes after ORT's long node name
                    res.update(status="ep_error", detail=msg[-400:])
                else:
                    res.update(status="both_error", detail=msg[:200])
            except BaseException:
                res.update(status="worker_error", detail=traceback.format_exc()[-400:])
            emit(**res)
        for k in SWITCHES:
            os.environ.pop(k, None)
        emit(id=job["id"], done=True)


if __name__ == "__main__":
    main()
