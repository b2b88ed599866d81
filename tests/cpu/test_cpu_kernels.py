"""MLX's kernel cache folder and the AVX2 opt-in (src/cpu/kernel_cache.c). Each case runs in a
child process with its own TMPDIR, so MLX's kernel cache starts empty there. By default the EP
writes nothing into that folder and deletes nothing from it: after a session has run on the CPU
device it holds only what MLX itself wrote. With ONNXRUNTIME_EP_MLX_AVX2_KERNELS=1 (the user's
opt-in) the header is written where MLX's kernel compiler looks, the kernels it builds use
256-bit registers, and the results keep the same bits (contraction into fma stays off)."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import make_model

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: the harness
HAS_AVX2 = all(f in open("/proc/cpuinfo").read().split() for f in ("avx2", "fma", "f16c")) \
    if os.path.exists("/proc/cpuinfo") else False

pytestmark = pytest.mark.cpu_device


def erf_softmax_model():
    return make_model([helper.make_node("Erf", ["x"], ["e"], name="erf"),
                       helper.make_node("Mul", ["e", "x"], ["m"], name="mul"),
                       helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)],
                      [("x", TP.FLOAT, [64, 256])], [("y", TP.FLOAT, None)])


def run_child(tmp_path, name, env, model=None, stale=()):
    """Runs `model` (Erf, Mul, Softmax by default) on the MLX EP in a child process whose kernel
    cache starts empty but for `stale` files; returns the output, stderr and the TMPDIR."""
    model = model or erf_softmax_model()
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / f"{name}.npy"
    tmp = tmp_path / f"{name}-tmp"
    tmp.mkdir()
    for item in stale:  # a path (filled with a line) or (path, text)
        rel, text = item if isinstance(item, tuple) else (item, "built by an earlier header")
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    code = textwrap.dedent(f"""
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options({{"device": "cpu"}})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({str(path)!r}, so)
        x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32) * 3
        np.save({str(out)!r}, s.run(None, {{"x": x}})[0])
    """)
    # keyed, and erf and softmax composed (not host kernels): MLX compiles kernels
    full = dict(os.environ, TMPDIR=str(tmp), ONNXRUNTIME_EP_MLX_VERBOSE="1",
                ONNXRUNTIME_EP_MLX_NO_SHAPELESS="1", ONNXRUNTIME_EP_MLX_NO_HOST_MATH="1", **env)
    full.pop("TMP", None), full.pop("TEMP", None), full.pop("TEMPDIR", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert r.returncode == 0, r.stderr[-3000:]
    return np.load(out), r.stderr, tmp


def kernel_libs(tmp):
    return [p for p in tmp.rglob("*.so")]


OPT_IN = {"ONNXRUNTIME_EP_MLX_AVX2_KERNELS": "1"}


def mlx_wrote_only(tmp):
    """The files under tmp/mlx, each one MLX's kernel compiler writes (lib<kernel>.so and
    <kernel>.cpp in mlx/<version>/cpu/); the first other file found, if any."""
    cpu = tmp / "mlx" / mlx_version() / "cpu"
    for p in (tmp / "mlx").rglob("*"):
        if p.is_dir():
            if p not in (tmp / "mlx", cpu.parent, cpu):
                return p
        elif p.parent != cpu or not (p.suffix == ".cpp" or
                                     (p.name.startswith("lib") and p.suffix == ".so")):
            return p
    return None


def test_kernel_cache_left_to_mlx_by_default(tmp_path):
    cpu = f"mlx/{mlx_version()}/cpu"
    stale = [f"{cpu}/libOldKernel_contiguous.so", f"{cpu}/OldKernel_contiguous.cpp"]
    got, _, tmp = run_child(tmp_path, "default", {}, stale=stale)
    assert kernel_libs(tmp)  # MLX compiled kernels there
    assert mlx_wrote_only(tmp) is None, mlx_wrote_only(tmp)
    assert all((tmp / p).read_text() == "built by an earlier header" for p in stale)  # untouched
    if shutil.which("objdump"):  # MLX's own flags: SSE2 code from the PyPI wheel
        assert sum(map(ymm, kernel_libs(tmp))) == 0


def test_avx2_opt_in_same_bits(tmp_path):
    got, _, tmp = run_child(tmp_path, "on", OPT_IN)
    same, _, tmp_off = run_child(tmp_path, "off", {})
    np.testing.assert_array_equal(got, same)  # the same bits with and without AVX2 kernels
    assert not list(tmp_off.rglob("compiled_preamble.h"))
    assert kernel_libs(tmp) and kernel_libs(tmp_off)  # MLX compiled kernels in both caches
    headers = list(tmp.rglob("mlx/backend/cpu/compiled_preamble.h"))
    if not HAS_AVX2:
        assert not headers
        return
    assert len(headers) == 1 and 'target("avx2,fma,f16c")' in headers[0].read_text()
    assert 'fp-contract=off' in headers[0].read_text()
    if shutil.which("objdump"):
        assert sum(map(ymm, kernel_libs(tmp))) > 0 and sum(map(ymm, kernel_libs(tmp_off))) == 0
        # every contiguous loop is vectorised, those with a floor or a select included (they
        # stay scalar unless FP operations are known not to trap and math not to set errno)
        contiguous = [p for p in kernel_libs(tmp) if p.name.endswith("_contiguous.so")]
        assert contiguous and all(ymm(p) for p in contiguous), \
            [p.name for p in contiguous if not ymm(p)]


def ymm(lib):
    """How often a kernel library's code names a 256-bit register."""
    return subprocess.run(["objdump", "-d", str(lib)], capture_output=True,
                          text=True).stdout.count("%ymm")


def mlx_version():
    import mlx.core
    return mlx.core.__version__


@pytest.mark.skipif(not HAS_AVX2, reason="the header is written on CPUs with AVX2 only")
def test_kernels_built_before_the_header_are_rebuilt(tmp_path):
    cpu = f"mlx/{mlx_version()}/cpu"
    stale = [f"{cpu}/libOldKernel_contiguous.so", f"{cpu}/OldKernel_contiguous.cpp",
             f"{cpu}/keep.txt"]
    _, err, tmp = run_child(tmp_path, "stale", OPT_IN, stale=stale)
    assert list(tmp.rglob("compiled_preamble.h"))
    assert not (tmp / stale[0]).exists() and not (tmp / stale[1]).exists()
    assert (tmp / stale[2]).exists()  # only MLX's kernel files are removed
    assert kernel_libs(tmp)  # and MLX built its own again
    # the same flags written by another install (another include path): kernels are kept
    header = next(tmp.rglob("compiled_preamble.h")).read_text()
    flags = header[:header.index("#include")]
    other = [(f"{cpu}/mlx/backend/cpu/compiled_preamble.h",
              flags + '#include "/elsewhere/mlx/backend/cpu/compiled_preamble.h"\n'),
             (stale[0], "built under the same flags")]
    _, err, tmp2 = run_child(tmp_path, "same-flags", OPT_IN, stale=other)
    assert (tmp2 / stale[0]).exists()
    assert next(tmp2.rglob("compiled_preamble.h")).read_text() == header  # this install's


def test_deep_composition_compiles_to_contiguous_kernels(tmp_path):
    """GELU as ONNX exporters write it, with Erf composed from about 60 elementwise operations
    on the CPU device: deeper than MLX fuses (11). MLX's own cut would land on the broadcast of
    a scalar and send the kernel above it through the strided loop, which g++ leaves scalar;
    the bridge cuts at values instead (src/mlx/), so every kernel MLX builds is
    contiguous, and the result still matches ORT's CPU provider."""
    inits = [helper.make_tensor(n, TP.FLOAT, [], [v])
             for n, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, [64, 256])], [("y", TP.FLOAT, None)],
                       initializers=inits)
    got, err, tmp = run_child(tmp_path, "gelu", {}, model=model)
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32) * 3
    import onnxruntime as ort
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # long kernel names are shortened to a hash, so the layout is read from the sources
    sources = {p.name: p.read_text() for p in tmp.rglob("*.cpp")}
    assert len(sources) >= 4, list(sources)  # the composition was fused, in several kernels
    assert not [n for n, text in sources.items() if "_strided_" in text], list(sources)
