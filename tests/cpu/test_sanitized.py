"""Host kernels and their pattern matchers under AddressSanitizer and UndefinedBehaviorSanitizer.
The plugin is relinked from the build's objects with src/ops/fusion_match.c (the matchers)
and src/cpu/math.c recompiled instrumented (-fno-sanitize-recover: the first finding ends the
process), and a child process runs through it what the fuzzers found: MiniLM's Gelu spelled in
five nodes (hp_gelu_input read f[3] of a 3-entry array before checking h == k) and a softmax
whose logit stands 200 above the rest (exp8n shifted a signed exponent into the sign bit).
Skipped where the compiler has no sanitizer runtime or the build's objects are missing."""
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENTED = ["src/ops/fusion_match.c", "src/cpu/math.c"]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def make_var(name, **overrides):
    """A variable of the Makefile, as its recipes would see it (nothing is built)."""
    args = [f"{k}={v}" for k, v in overrides.items()]
    r = subprocess.run(["make", "--no-print-directory", "--eval=print-%: ; @echo $($*)", *args,
                        f"print-{name}"], cwd=ROOT, capture_output=True, text=True, check=True)
    return shlex.split(r.stdout)


@pytest.fixture(scope="module")
def sanitized_library(tmp_path_factory):
    runtimes = [subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                               text=True).stdout.strip()
                for name in ("libasan.so", "libstdc++.so.6")]
    if not all(os.path.isabs(p) and os.path.exists(p) for p in runtimes):
        pytest.skip("the compiler has no AddressSanitizer runtime")
    # ASan's runtime first; libstdc++ with it, so that its __cxa_throw interceptor finds the
    # real one when ORT throws (else ASan aborts on ORT's first C++ exception)
    preload = " ".join(runtimes)
    # the objects the Makefile links (a glob would also take those of sources since moved)
    objs = [str(ROOT / o) for o in make_var("OBJS")]
    if not all(os.path.exists(o) for o in objs):
        pytest.skip("no build objects (make build first)")
    out = tmp_path_factory.mktemp("sanitized")
    cflags = make_var("ALL_CFLAGS", CFLAGS=shlex.join(["-O1", "-g"] + SAN))
    replaced = []
    for src in INSTRUMENTED:
        obj = out / (Path(src).stem + ".o")
        subprocess.run(["cc", *cflags, "-c", src, "-o", str(obj)], cwd=ROOT, check=True,
                       capture_output=True)
        replaced.append(str(ROOT / "build" / src.replace(".c", ".o")))
        objs.append(str(obj))
    objs = [o for o in objs if o not in replaced]
    lib = out / "libonnxruntime_ep_mlx.so"
    subprocess.run(["c++", "-o", str(lib), *objs, *SAN, *make_var("LDFLAGS_LIB")], cwd=ROOT,
                   check=True, capture_output=True)
    return lib, preload


CHILD = textwrap.dedent("""
    import numpy as np
    from onnx import TensorProto as TP, helper
    import mlx_harness as H

    opts = {"device": "cpu"}
    # Gelu in five nodes, the factors in each order the matcher tries
    for order in (0, 1):
        nodes = [helper.make_node("Div", ["x", "s2"], ["d"], name="div"),
                 helper.make_node("Erf", ["d"], ["e"], name="erf"),
                 helper.make_node("Add", ["e", "one"], ["a"], name="add"),
                 helper.make_node("Mul", ["x", "a"] if order else ["a", "x"], ["m"], name="mul1"),
                 helper.make_node("Mul", ["m", "half"] if order else ["half", "m"], ["y"],
                                  name="mul2")]
        m = H.make_model(nodes, [("x", TP.FLOAT, [4, 64])], [("y", TP.FLOAT, None)],
                         initializers=[("s2", np.array(np.sqrt(2), np.float32)),
                                       ("one", np.array(1, np.float32)),
                                       ("half", np.array(0.5, np.float32))])
        x = H.rand((4, 64))
        got = H.mlx_session(m, provider_options=opts).run(None, {"x": x})[0]
        want = H.cpu_session(m).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # softmax with one logit 200 above the rest (every other lane underflows exp)
    m = H.make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)],
                     [("x", TP.FLOAT, [3, 40])], [("y", TP.FLOAT, None)], opset=13)
    x = np.zeros((3, 40), np.float32)
    x[:, 5] = 200.0
    x[1] -= 90.0
    got = H.mlx_session(m, provider_options=opts).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, H.cpu_session(m).run(None, {"x": x})[0])
    print("OK")
""")


def test_host_kernels_clean_under_sanitizers(sanitized_library):
    lib, preload = sanitized_library
    env = {**os.environ, "LD_PRELOAD": preload, "ASAN_OPTIONS": "detect_leaks=0",
           "UBSAN_OPTIONS": "print_stacktrace=1", "ONNXRUNTIME_EP_MLX_LIBRARY": str(lib),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT / "tests")])}
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    findings = [ln for ln in r.stderr.splitlines()
                if "runtime error" in ln or "AddressSanitizer" in ln]
    assert r.returncode == 0 and r.stdout.strip().endswith("OK") and not findings, \
        (findings or r.stderr[-3000:])
