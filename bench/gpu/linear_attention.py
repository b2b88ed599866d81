"""LinearAttention's fused GPU scan (src/ops/ssm_attention_cuda.c) against the composed path, and
what it buys: a correctness grid, one-node timings and the hybrid decoder.

    python3 bench/gpu/linear_attention.py                  # all parts, on the GPU
    python3 bench/gpu/linear_attention.py --part check     # (a) only; exits 1 on any failure
    python3 bench/gpu/linear_attention.py --part check --device cpu --quick   # the harness, on CPU

(a) check: a sample of rules x GQA (Hq < H, Hq = H, Hq > H) x decay (per head, per key dim) x
    state_window {0, 1, 3, 8} x dk {32, 64, 100, 128, 256, 257, 384, 512} x {float32, float16,
    bfloat16} x T {1, 2, 33, 128}: every (dk, dtype) pair twice, with T and the other axes (and
    dv, B, key heads, beta's form, past present or not, a scale attribute, a second node so the
    group compiles keyed instead of running eagerly) drawn by fixed-seed permutations so every
    value of every axis appears several times; plus the ai.onnx form with a float32 state under
    float16 queries, and strong decay over T=128. Each model runs on the MLX EP twice in this
    process: as is (the fused kernel) and in a session created with
    ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN=1 set (the EP reads it at session creation: the
    composed path). Outputs and present states must agree within a per-dtype bound on
    max|a - b| / max(1, max|b|), and the EP's verbose summary must name the path each took:
    "fused GPU scan" for T > 1 (T == 1 is composed by design: see LA_FAST_MIN_T in
    src/ops/ssm_attention.c), "composed" with the switch. On a failure the float64 NumPy
    recurrence says which side is off. Runs with MLX_ENABLE_TF32=0 (MLX's CUDA matmuls otherwise
    use TF32, which the composed path's per-step matmuls would show as ~1e-3 differences
    unrelated to the kernel). Most of its time is NVRTC compiling kernels (ours per dtype and
    dk/32; MLX's fused ones for the keyed groups); about 3 minutes on an H200.
(b) time: one LinearAttention node (gated_delta, float32, B=1, H=16, dk=dv=128, past state), T in
    1 (decode: composed either way), 128, 512: median ms of 20 runs after warm-up, fused vs
    composed vs ORT's CPU provider. Session.run wall time, so the EP's copies of inputs and
    states between host and device are included (they dominate: see (b2)). One node is a group
    of one, which runs eagerly (not compiled).
(b2) kernel: the same kernel launched directly through mlx.core with its inputs already on the
    device (skipped where mlx's Python package or CUDA is missing): its own time per call and
    per step, and a NumPy-in/NumPy-out round trip for comparison.
(c) decoder: bench/hybrid_decoder.py at its realistic size (hidden 2048, 16 heads, dk=dv=128,
    3 GatedDeltaNet layers + 1 attention layer; KV cache 512 so that T=512 fits) at T = 1, 128,
    512: median ms (2 warm-up, 5 runs), fused vs composed vs CPU, as a markdown table.
Parts (b), (b2) and (c) leave TF32 at MLX's default (on), as a deployment would.

Each part runs in a child process of this script (MLX reads MLX_ENABLE_TF32 once per process).
Needs onnxruntime, numpy, onnx and this package importable, ONNXRUNTIME_EP_MLX_LIBRARY pointing at
the plugin built against MLX's CUDA backend, and CUDA_HOME for MLX's run-time kernel compiler.
bfloat16 goes through raw uint16 OrtValues, so ml_dtypes is not needed.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SWITCH = "ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN"
FUSED, COMPOSED = "fused GPU scan", "composed"
FAST_MIN_T = 2  # LA_FAST_MIN_T in src/ops/ssm_attention.c: shorter inputs are composed

RULES = ["linear", "gated", "delta", "gated_delta"]
GQA = {"Hq<H": (2, 4), "Hq=H": (2, 2), "Hq>H": (4, 2)}  # (q heads, state heads)
DECAYS = ["H", "Hdk"]
WINDOWS = [0, 1, 3, 8]
DKS = [32, 64, 100, 128, 256, 257, 384, 512]
DTYPES = ["float32", "float16", "bfloat16"]
TS = [1, 2, 33, 128]
# max|fused - composed| / max(1, max|composed|): float32 differs by summation order only; the
# half types round the carried state every step, so one flipped rounding can carry on.
TOL = {"float32": 2e-4, "float16": 1e-2, "bfloat16": 5e-2}


# --- bfloat16 without ml_dtypes ------------------------------------------------------------------
def bf16_bits(a):
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)


def bf16_float(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to(a, dtype):
    """a (float64) rounded through dtype and back."""
    if dtype == "float32":
        return a.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float64)
    return bf16_float(bf16_bits(a.astype(np.float32))).astype(np.float64)


# --- models, feeds, sessions ---------------------------------------------------------------------
def la_model(c):
    """A LinearAttention model for config dict c (optionally followed by a Neg, so the group has
    two nodes and compiles keyed on shape instead of running eagerly)."""
    from onnx import TensorProto as TP
    from onnx import helper
    et = {"float32": TP.FLOAT, "float16": TP.FLOAT16, "bfloat16": TP.BFLOAT16}
    dt, st = et[c["dtype"]], et[c.get("state_dtype", c["dtype"])]
    b, t, hq, hk, h, dk, dv, w = (c[k] for k in ("b", "t", "hq", "hk", "h", "dk", "dv", "window"))
    rule = c["rule"]
    sshape = ([w] if w else []) + [b, h, dk, dv]
    ins = [helper.make_tensor_value_info("q", dt, [b, t, hq * dk]),
           helper.make_tensor_value_info("k", dt, [b, t, hk * dk]),
           helper.make_tensor_value_info("v", dt, [b, t, h * dv])]
    names = ["q", "k", "v", "", "", ""]
    if c["past"]:
        ins.append(helper.make_tensor_value_info("past", st, sshape))
        names[3] = "past"
    if rule in ("gated", "gated_delta"):
        ins.append(helper.make_tensor_value_info(
            "decay", dt, [b, t, h if c["decay"] == "H" else h * dk]))
        names[4] = "decay"
    if rule in ("delta", "gated_delta"):
        ins.append(helper.make_tensor_value_info("beta", dt, [b, t, h if c["beta"] == "H" else 1]))
        names[5] = "beta"
    while names[-1] == "":
        names.pop()
    attrs = dict(q_num_heads=hq, kv_num_heads=h, update_rule=rule)
    if w:
        attrs["state_window"] = w
    if c.get("scale"):
        attrs["scale"] = c["scale"]
    domain = c.get("domain", "com.microsoft")
    out = "o" if c.get("second_node") else "out"
    nodes = [helper.make_node("LinearAttention", names, [out, "present"], name="la",
                              domain=domain, **attrs)]
    if c.get("second_node"):
        nodes.append(helper.make_node("Neg", ["o"], ["out"], name="neg"))
    graph = helper.make_graph(nodes, "la", ins, [helper.make_tensor_value_info("out", dt, None),
                                                helper.make_tensor_value_info("present", st, None)])
    opsets = [helper.make_opsetid("", 27 if domain == "" else 17)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 11 if domain == "" else 10
    return m.SerializeToString()


def la_feeds(c, seed):
    """float32 values (already rounded to the input dtype) per input name. Keys ~ N(0, 1/dk), so
    beta |k|^2 stays below 2 and the delta rule is stable over long T."""
    r = np.random.default_rng(seed)
    b, t, hq, hk, h, dk, dv = (c[k] for k in ("b", "t", "hq", "hk", "h", "dk", "dv"))
    f = {"q": r.standard_normal((b, t, hq * dk)),
         "k": r.standard_normal((b, t, hk * dk)) / np.sqrt(dk),
         "v": r.standard_normal((b, t, h * dv))}
    if c["past"]:
        w = c["window"]
        f["past"] = 0.5 * r.standard_normal(([w] if w else []) + [b, h, dk, dv])
    if c["rule"] in ("gated", "gated_delta"):
        f["decay"] = -r.random((b, t, h if c["decay"] == "H" else h * dk)) * c.get("decay_scale",
                                                                                  0.5)
    if c["rule"] in ("delta", "gated_delta"):
        f["beta"] = r.random((b, t, h if c["beta"] == "H" else 1))
    out = {}
    for name, a in f.items():
        dt = c.get("state_dtype", c["dtype"]) if name == "past" else c["dtype"]
        out[name] = round_to(np.asarray(a, np.float64), dt).astype(np.float32)
    return out


def ort_inputs(feeds, c):
    """OrtValues in the model's dtypes."""
    import onnxruntime as ort
    from onnx import TensorProto as TP
    vals = {}
    for name, a in feeds.items():
        dt = c.get("state_dtype", c["dtype"]) if name == "past" else c["dtype"]
        if dt == "bfloat16":
            vals[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bf16_bits(a),
                                                                         TP.BFLOAT16)
        else:
            vals[name] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a.astype(dt)))
    return vals


def to_float(v):
    """An output OrtValue as a float64 numpy array (bfloat16 read from its raw bits)."""
    if v.data_type() == "tensor(bfloat16)":
        shape = v.shape()
        n = int(np.prod(shape))
        if n == 0:
            return np.zeros(shape)
        raw = (ctypes.c_uint16 * n).from_address(v.data_ptr())
        return bf16_float(np.frombuffer(raw, np.uint16).copy()).reshape(shape).astype(np.float64)
    return np.asarray(v.numpy(), np.float64)


class StderrCapture:
    """Sends fd 2 (where the EP writes its partition report and summary) to a temporary file."""

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.tmp = tempfile.TemporaryFile(mode="w+")
        os.dup2(self.tmp.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        self.text = self.tmp.read()
        self.tmp.close()
        return False


def quiet():
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3  # ORT's CPU TensorScatter warns on every run otherwise
    return so


def mlx_session(model, device, composed, verbose=True):
    """A session with every node on the MLX EP (no CPU fallback); composed=True creates it with
    the scan switched off."""
    import onnxruntime as ort

    import onnxruntime_ep_mlx as mlx
    opts = {"device": device}
    if verbose:
        opts["verbose"] = "1"
    so = mlx.session_options(opts, quiet())
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    old = os.environ.pop(SWITCH, None)
    if composed:
        os.environ[SWITCH] = "1"
    try:
        return ort.InferenceSession(model, so)
    finally:
        os.environ.pop(SWITCH, None)
        if old is not None:
            os.environ[SWITCH] = old


def node_paths(text):
    """{node name: path} from the EP's verbose session summary."""
    out = {}
    for line in text.splitlines():
        if "     node '" in line and "): " in line:
            name = line.split("node '", 1)[1].split("'", 1)[0]
            out[name] = line.rsplit("): ", 1)[1].strip()
    return out


def group_paths(text):
    return [line.split(", path ", 1)[1].split(" ", 1)[0]
            for line in text.splitlines() if " nodes, path " in line]




def run_mlx_once(model, c, feeds, device, composed):
    """(outputs as float64 arrays, the LinearAttention node's path, the group paths)."""
    with StderrCapture() as cap:
        s = mlx_session(model, device, composed)
        names = [o.name for o in s.get_outputs()]
        outs = [to_float(v) for v in s.run_with_ort_values(names, ort_inputs(feeds, c))]
        del s
        gc.collect()
    return outs, node_paths(cap.text).get("la", "(no path noted)"), group_paths(cap.text)


# --- NumPy reference (float64, the carried state rounded like the EP) ----------------------------
def la_ref(f, c):
    hq, h, rule, w = c["hq"], c["h"], c["rule"], c["window"]
    q, k, v = (np.asarray(f[n], np.float64) for n in ("q", "k", "v"))
    b, t, _ = q.shape
    dk, dv = c["dk"], c["dv"]
    hk = k.shape[2] // dk
    scale = c.get("scale") or 1 / np.sqrt(dk)
    sdt = c.get("state_dtype", c["dtype"])
    carry = "float32" if (dk > 256 and "bfloat16" in (c["dtype"], sdt)) else sdt
    q, k, v = q.reshape(b, t, hq, dk), k.reshape(b, t, hk, dk), v.reshape(b, t, h, dv)
    past = f.get("past")
    s = np.zeros((b, h, dk, dv)) if past is None else np.asarray(past[-1] if w else past,
                                                                 np.float64)
    ho = max(hq, h)
    out = np.zeros((b, t, ho, dv))
    kept = []
    for step in range(t):
        kt = np.repeat(k[:, step], h // hk, axis=1)
        if rule in ("gated", "gated_delta"):
            g = np.asarray(f["decay"][:, step], np.float64)
            g = g[:, :, None, None] if g.shape[-1] == h else g.reshape(b, h, dk, 1)
            s = s * np.exp(g)
        if rule in ("delta", "gated_delta"):
            r = np.einsum("bhk,bhkv->bhv", kt, s)
            bt = np.asarray(f["beta"][:, step], np.float64)[:, :, None]
            d = bt * (v[:, step] - r)
        else:
            d = v[:, step]
        s = s + kt[..., None] * d[:, :, None, :]
        if hq >= h:
            o = np.einsum("bhgk,bhkv->bhgv", q[:, step].reshape(b, h, hq // h, dk), s)
        else:
            o = np.einsum("bhk,bhkv->bhv", np.repeat(q[:, step], h // hq, axis=1), s)
        out[:, step] = scale * o.reshape(b, ho, dv)
        s = round_to(s, carry)
        kept.append(s)
    if not w:
        present = s
    else:
        present = np.stack([np.zeros((b, h, dk, dv))] * max(0, w - t) + kept[-w:])
    out = out.reshape(b, t, ho * dv)
    if c.get("second_node"):
        out = -out
    return [out, present]


def rel_err(a, b):
    if a.shape != b.shape:
        return float("inf")
    if not a.size:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# --- (a) correctness grid ------------------------------------------------------------------------
def grid(quick=False):
    rng = np.random.default_rng(2024)
    pairs = [(dk, dt) for _ in range(2) for dk in DKS for dt in DTYPES]
    n = len(pairs)

    def spread(values):  # each value equally often, in a fixed random order
        idx = rng.permutation(n)
        return [values[i % len(values)] for i in idx]

    rules, gqas, decays, windows = spread(RULES), spread(list(GQA)), spread(DECAYS), spread(WINDOWS)
    ts = spread(TS)
    betas, pasts, seconds = spread(["H", "1"]), spread([True, True, True, False]), \
        spread([False] * 7 + [True])
    dvs, bs, hk_full, scales = spread([16, 33, 64]), spread([1, 2]), spread([True, False]), \
        spread([0.0, 0.0, 0.0, 0.37])
    configs = []
    for i, (dk, dt) in enumerate(pairs):
        t = ts[i]
        hq, h = GQA[gqas[i]]
        hk = h if hk_full[i] else h // 2
        configs.append(dict(rule=rules[i], gqa=gqas[i], hq=hq, h=h, hk=hk, decay=decays[i],
                            beta=betas[i], window=windows[i], dk=dk, dv=dvs[i], dtype=dt, t=t,
                            b=bs[i], past=pasts[i], second_node=seconds[i], scale=scales[i]))
    # the ai.onnx form with a float32 state under float16 queries (a state dtype of its own)
    configs.append(dict(rule="gated_delta", gqa="Hq>H", hq=4, h=2, hk=2, decay="Hdk", beta="H",
                        window=0, dk=128, dv=64, dtype="float16", state_dtype="float32", t=33,
                        b=1, past=True, second_node=False, scale=0.0, domain=""))
    # strong decay and unnormalised keys, long T (no shortcut may assume normalised keys)
    configs.append(dict(rule="gated", gqa="Hq=H", hq=2, h=2, hk=2, decay="Hdk", beta="H",
                        window=3, dk=64, dv=32, dtype="float32", t=128, b=2, past=True,
                        second_node=True, scale=0.0, decay_scale=8.0))
    if quick:  # every 4th, and the two above
        configs = configs[:-2][::4] + configs[-2:]
    return configs


def part_check(args) -> int:
    os.environ.setdefault("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")  # the ai.onnx opset-27 case
    configs = grid(args.quick)
    on_gpu = args.device == "gpu"
    print(f"(a) correctness: {len(configs)} configurations on {args.device}, fused vs composed; "
          f"MLX_ENABLE_TF32={os.environ.get('MLX_ENABLE_TF32')}")
    hdr = (f"{'#':>3} {'rule':<11} {'gqa':<4} {'dec':<3} {'W':>1} {'dk':>3} {'dv':>2} "
           f"{'dtype':<8} {'T':>3} {'B':>1} {'past':<4} {'grp':<5} {'fused path':<14} "
           f"{'err out':>8} {'err state':>9} {'tol':>6} {'s':>4}  result")
    print(hdr)
    failures, not_taken, t0 = 0, 0, time.time()
    for i, c in enumerate(configs):
        t1 = time.time()
        model = la_model(c)
        feeds = la_feeds(c, seed=i)
        try:
            fused, fpath, fgroups = run_mlx_once(model, c, feeds, args.device, composed=False)
            comp, cpath, _ = run_mlx_once(model, c, feeds, args.device, composed=True)
        except Exception as e:  # a run that fails is a failure of this configuration
            failures += 1
            print(f"{i:>3} {c['rule']:<11} dk={c['dk']} {c['dtype']} T={c['t']}: ERROR "
                  f"{str(e).splitlines()[0][:200]}")
            continue
        errs = [rel_err(a, b) for a, b in zip(fused, comp)]
        tol = TOL[c["dtype"]]
        ok = all(e <= tol for e in errs)
        notes = []
        if cpath != COMPOSED:
            ok = False
            notes.append(f"composed run took '{cpath}'")
        want = FUSED if c["t"] >= FAST_MIN_T else COMPOSED
        if fpath != want:
            if on_gpu:
                ok = False
                notes.append(f"fused run took '{fpath}'")
            else:
                not_taken += 1
        if not ok:
            failures += 1
            ref = la_ref(feeds, c)
            notes.append("vs float64 reference: fused out %.2g state %.2g, composed out %.2g "
                         "state %.2g" % (rel_err(fused[0], ref[0]), rel_err(fused[1], ref[1]),
                                         rel_err(comp[0], ref[0]), rel_err(comp[1], ref[1])))
        shown = fpath if fpath == want else "not taken" if not on_gpu else fpath
        grp = (fgroups[0] if fgroups else "?")[:5]
        dts = c["dtype"] + ("/" + c["state_dtype"] if "state_dtype" in c else "")
        print(f"{i:>3} {c['rule']:<11} {c['gqa']:<4} {c['decay']:<3} {c['window']:>1} "
              f"{c['dk']:>3} {c['dv']:>2} {dts:<8} {c['t']:>3} {c['b']:>1} "
              f"{'yes' if c['past'] else 'no':<4} {grp:<5} {shown:<14} {errs[0]:>8.1e} "
              f"{errs[1]:>9.1e} {tol:>6.0e} {time.time() - t1:>4.1f}  "
              f"{'PASS' if ok else 'FAIL'}{'  ' + '; '.join(notes) if notes else ''}",
              flush=True)
    took = time.time() - t0
    print(f"(a) {len(configs) - failures}/{len(configs)} passed, {failures} failed"
          + (f"; fused path not taken in {not_taken} (device cpu: expected)" if not on_gpu
             else "") + f"; T == 1 is composed by design; {took:.0f} s")
    return 1 if failures else 0


# --- (b) one node, timed -------------------------------------------------------------------------
def timed(session, names, vals, warmup, runs):
    for _ in range(warmup):
        session.run_with_ort_values(names, vals)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run_with_ort_values(names, vals)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def part_time(args) -> int:
    import onnxruntime as ort
    print(f"(b) one LinearAttention node (gated_delta, float32, B=1, H=16, dk=dv=128, past state):"
          f" median ms of {args.runs} runs after {args.warmup} warm-up, on {args.device}")
    rows = []
    for t in (1, 128, 512):
        c = dict(rule="gated_delta", gqa="Hq=H", hq=16, h=16, hk=16, decay="H", beta="H",
                 window=0, dk=128, dv=128, dtype="float32", t=t, b=1, past=True)
        model, feeds = la_model(c), la_feeds(c, seed=t)
        vals = ort_inputs(feeds, c)
        names = ["out", "present"]
        cpu = ort.InferenceSession(model, quiet(), providers=["CPUExecutionProvider"])
        row = {"T": t, "cpu": timed(cpu, names, vals, args.warmup, args.runs)}
        for key, composed in (("fused", False), ("composed", True)):
            with StderrCapture() as cap:
                s = mlx_session(model, args.device, composed)
                row[key] = timed(s, names, vals, args.warmup, args.runs)
                del s
                gc.collect()
            row[key + "_path"] = node_paths(cap.text).get("la", "?")
            row[key + "_group"] = ",".join(group_paths(cap.text))
        rows.append(row)
        print(f"  T={t}: done", flush=True)
    print()
    print("| T | ORT CPU ms | MLX composed ms | MLX fused ms | composed/fused | CPU/fused | "
          "fused run's path | group path |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['T']} | {r['cpu']:.3f} | {r['composed']:.3f} | {r['fused']:.3f} | "
              f"{r['composed'] / r['fused']:.2f}x | {r['cpu'] / r['fused']:.2f}x | "
              f"{r['fused_path']} | {r['fused_group']} |")
    print("(session.run wall time; at T = 1 both sessions compose, by design)")
    print()
    return 0


# --- (b2) the kernel alone, through MLX's Python API ---------------------------------------------
def kernel_strings():
    """la_cuda_header and la_cuda_source, read from the C file that holds them."""
    import ast
    import re
    text = (ROOT / "src" / "ops" / "ssm_attention_cuda.c").read_text()
    out = {}
    for name in ("la_cuda_header", "la_cuda_source"):
        body = text.split(f"const char {name}[] =", 1)[1].split(";\n", 1)[0]
        out[name] = "".join(ast.literal_eval(m) for m in re.findall(r'"(?:[^"\\]|\\.)*"', body))
    return out["la_cuda_header"], out["la_cuda_source"]


def part_kernel(args) -> int:
    """The fused kernel launched directly with mlx.core (inputs already on the device), to
    separate the kernel's own time from the EP's per-run overhead (input and output copies)."""
    try:
        import mlx.core as mx
    except ImportError as e:
        print(f"(b2) skipped: mlx's Python package is not importable ({e})")
        return 0
    if args.device != "gpu" or not mx.cuda.is_available():
        print("(b2) skipped: needs MLX's CUDA backend")
        return 0
    header, source = kernel_strings()
    kern = mx.fast.cuda_kernel(name="linear_attention_scan",
                               input_names=["q", "k", "v", "past", "decay", "beta", "params"],
                               output_names=["out", "present"], source=source, header=header)
    print("(b2) the fused kernel alone (mlx.core, inputs resident on the GPU; gated_delta, "
          "float32, B=1, H=16, dk=dv=128): mean ms of 20 back-to-back launches, one sync")
    print("| T | kernel ms | us per step | numpy->MLX->kernel->numpy ms | max rel err vs float64 |")
    print("|---:|---:|---:|---:|---:|")
    for t in (1, 128, 512):
        c = dict(rule="gated_delta", hq=16, h=16, hk=16, decay="H", beta="H", window=0, dk=128,
                 dv=128, dtype="float32", t=t, b=1, past=True)
        f = la_feeds(c, seed=t)
        b, h, dk, dv = 1, 16, 128, 128
        scale = np.float32(1 / np.sqrt(dk)).view(np.int32)
        params = np.array([b, t, h, h, h, dk, dv, 1, 1, 1, 0, h, 1 | 4 | 8, scale], np.int32)
        names = ["q", "k", "v", "past", "decay", "beta"]
        par = mx.array(params)  # made once, as a compiled group keeps its constants

        def launch(arrs):
            return kern(inputs=arrs + [par],
                        output_shapes=[(b, t, h * dv), (b, h, dk, dv)],
                        output_dtypes=[mx.float32, mx.float32], grid=(32 * b * h * dv, 1, 1),
                        threadgroup=(128, 1, 1), template=[("NPL", (dk + 31) // 32)],
                        stream=mx.gpu)
        dev = [mx.array(f[n]) for n in names]
        mx.eval(dev + [par])
        got = launch(dev)
        mx.eval(got)
        ref = la_ref(f, c)
        err = max(rel_err(np.array(g, np.float64), r) for g, r in zip(got, ref))
        n = 20
        mx.synchronize()
        t0 = time.perf_counter()
        outs = [launch(dev) for _ in range(n)]
        mx.eval(outs)
        mx.synchronize()
        kms = (time.perf_counter() - t0) * 1e3 / n
        trips = []
        for _ in range(5):
            t0 = time.perf_counter()
            o = launch([mx.array(f[n_]) for n_ in names])
            np.array(o[0]), np.array(o[1])
            trips.append((time.perf_counter() - t0) * 1e3)
        print(f"| {t} | {kms:.3f} | {kms * 1e3 / t:.2f} | {statistics.median(trips):.3f} | "
              f"{err:.1e} |")
    print()
    return 0


# --- (c) the hybrid decoder ----------------------------------------------------------------------
def part_decoder(args) -> int:
    import onnxruntime as ort
    from dataclasses import replace
    sys.path.insert(0, str(ROOT / "bench"))
    import hybrid_decoder as hd
    cfg = replace(hd.SIZES["realistic"], cache=512)
    model = hd.build(cfg).SerializeToString()
    runs, warmup = args.decoder_runs, 2
    print(f"(c) hybrid decoder, realistic size (hidden {cfg.hidden}, {cfg.la_heads} heads, "
          f"dk=dv={cfg.dk}, {cfg.layers} layers, cache {cfg.cache}), batch 1: median ms of {runs} "
          f"runs after {warmup} warm-up, on {args.device}")
    cpu = ort.InferenceSession(model, quiet(), providers=["CPUExecutionProvider"])
    rows = []
    for t in (1, 128, 512):
        feeds = hd.feeds(cfg, 1, t, 0)
        row = {"T": t}
        ts = []
        for _ in range(warmup):
            ref = cpu.run(None, feeds)
        for _ in range(runs):
            t0 = time.perf_counter()
            ref = cpu.run(None, feeds)
            ts.append((time.perf_counter() - t0) * 1e3)
        row["cpu"] = statistics.median(ts)
        for key, composed in (("fused", False), ("composed", True)):
            with StderrCapture() as cap:
                s = mlx_session(model, args.device, composed)
                ts = []
                for _ in range(warmup):
                    out = s.run(None, feeds)
                for _ in range(runs):
                    t0 = time.perf_counter()
                    out = s.run(None, feeds)
                    ts.append((time.perf_counter() - t0) * 1e3)
                del s
                gc.collect()
            row[key] = statistics.median(ts)
            row[key + "_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(out, ref))
            paths = set(p for n, p in node_paths(cap.text).items())
            row[key + "_paths"] = ", ".join(sorted(paths))
        rows.append(row)
        print(f"  T={t}: done", flush=True)
    print()
    print("| T | ORT CPU ms | MLX composed ms | MLX fused ms | composed/fused | CPU/fused | "
          "max abs diff vs CPU (fused, composed) | fused run's LinearAttention paths |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['T']} | {r['cpu']:.2f} | {r['composed']:.2f} | {r['fused']:.2f} | "
              f"{r['composed'] / r['fused']:.2f}x | {r['cpu'] / r['fused']:.2f}x | "
              f"{r['fused_diff']:.2g}, {r['composed_diff']:.2g} | {r['fused_paths']} |")
    print()
    return 0


PARTS = {"check": part_check, "time": part_time, "kernel": part_kernel, "decoder": part_decoder}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["all", *PARTS], default="all")
    p.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--quick", action="store_true", help="(a): every 4th configuration only")
    p.add_argument("--runs", type=int, default=20, help="(b): timed runs")
    p.add_argument("--warmup", type=int, default=3, help="(b): warm-up runs")
    p.add_argument("--decoder-runs", type=int, default=5, help="(c): timed runs")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return PARTS[args.part](args)
    parts = list(PARTS) if args.part == "all" else [args.part]
    status = 0
    for part in parts:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if part == "check":
            env["MLX_ENABLE_TF32"] = "0"
        cmd = [sys.executable, __file__, "--child", "--part", part, "--device", args.device,
               "--runs", str(args.runs), "--warmup", str(args.warmup),
               "--decoder-runs", str(args.decoder_runs)] + (["--quick"] if args.quick else [])
        rc = subprocess.run(cmd, env=env).returncode
        if rc:
            print(f"part {part}: exit status {rc}", flush=True)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
