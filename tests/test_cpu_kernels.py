"""MLX's fused CPU kernels built for AVX2 (src/mlx/cpu_kernels.c). Each case runs in a child
process with its own TMPDIR, so MLX's kernel cache starts empty there: with the feature on, the
header is written where MLX's kernel compiler looks and the kernels it builds use 256-bit
registers; with ONNXRUNTIME_EP_MLX_NO_AVX2_KERNELS=1 nothing is written; and both give the same
bits (contraction into fma stays off)."""
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

HERE = os.path.dirname(os.path.abspath(__file__))
HAS_AVX2 = all(f in open("/proc/cpuinfo").read().split() for f in ("avx2", "fma", "f16c")) \
    if os.path.exists("/proc/cpuinfo") else False

pytestmark = pytest.mark.cpu_device


def run_child(tmp_path, name, env):
    model = make_model([helper.make_node("Erf", ["x"], ["e"], name="erf"),
                        helper.make_node("Mul", ["e", "x"], ["m"], name="mul"),
                        helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)],
                       [("x", TP.FLOAT, [64, 256])], [("y", TP.FLOAT, None)])
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / f"{name}.npy"
    tmp = tmp_path / f"{name}-tmp"
    tmp.mkdir()
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
    full = dict(os.environ, TMPDIR=str(tmp), ONNXRUNTIME_EP_MLX_VERBOSE="1",
                ONNXRUNTIME_EP_MLX_NO_SHAPELESS="1", **env)  # keyed: MLX compiles kernels
    full.pop("TMP", None), full.pop("TEMP", None), full.pop("TEMPDIR", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert r.returncode == 0, r.stderr[-3000:]
    return np.load(out), r.stderr, tmp


def kernel_libs(tmp):
    return [p for p in tmp.rglob("*.so")]


def test_avx2_kernels_same_bits_and_kill_switch(tmp_path):
    got, err, tmp = run_child(tmp_path, "on", {})
    same, err_off, tmp_off = run_child(tmp_path, "off", {"ONNXRUNTIME_EP_MLX_NO_AVX2_KERNELS": "1"})
    np.testing.assert_array_equal(got, same)  # the same bits with and without AVX2 kernels
    assert "CPU kernels" not in err_off
    assert not list(tmp_off.rglob("compiled_preamble.h"))
    assert kernel_libs(tmp) and kernel_libs(tmp_off)  # MLX compiled kernels in both caches
    headers = list(tmp.rglob("mlx/backend/cpu/compiled_preamble.h"))
    if not HAS_AVX2:
        assert "CPU kernels: as MLX builds them: the CPU lacks AVX2" in err, err[-2000:]
        assert not headers
        return
    assert "CPU kernels: built for AVX2/FMA/F16C" in err, err[-2000:]
    assert len(headers) == 1 and 'target("avx2,fma,f16c")' in headers[0].read_text()
    assert 'fp-contract=off' in headers[0].read_text()
    if shutil.which("objdump"):
        def ymm(libs):
            return sum(subprocess.run(["objdump", "-d", str(p)], capture_output=True,
                                      text=True).stdout.count("%ymm") for p in libs)
        assert ymm(kernel_libs(tmp)) > 0 and ymm(kernel_libs(tmp_off)) == 0
