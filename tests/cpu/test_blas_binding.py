"""Which library serves MLX's matrix products (src/cpu/blas_binding.c). The plugin exports its own
cblas_sgemm (src/cpu/sgemm/sgemm.c), which libmlx binds to when the plugin loads libmlx. Each case runs
a MatMul in a child process with a given import order and reads what the EP reports: the library
in the verbose log, and a warning through ORT's logger when MLX was loaded first and kept the
wheel's reference BLAS. Importing onnxruntime_ep_mlx first loads the plugin, so a later
`import mlx.core` is harmless. ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM=1 hands the products to OpenBLAS."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from mlx_harness import make_model

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: the harness
WARNING = "MLX was loaded before this plugin"

pytestmark = pytest.mark.cpu_device


PLUGIN = "libonnxruntime_ep_mlx"


def run_child(tmp_path, first_imports, env_extra=None):
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       [("a", TP.FLOAT, [32, 48]), ("b", TP.FLOAT, [48, 16])],
                       [("y", TP.FLOAT, None)])
    path = tmp_path / "mm.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "y.npy"
    code = textwrap.dedent(f"""
        {first_imports}
        import sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options({{"device": "cpu"}})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({str(path)!r}, so)
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((32, 48), np.float32), rng.standard_normal((48, 16), np.float32)
        np.save({str(out)!r}, s.run(None, {{"a": a, "b": b}})[0] - a @ b)
        print("openblas mapped:", "libopenblas" in open("/proc/self/maps").read())
    """)
    env = dict(os.environ, ONNXRUNTIME_EP_MLX_VERBOSE="1", **(env_extra or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert np.abs(np.load(out)).max() < 1e-4  # ran, and right, whichever BLAS served it
    blas = [line for line in r.stderr.splitlines() if "] BLAS: " in line]
    assert len(blas) == 1, r.stderr[-3000:]
    return blas[0], r.stderr, "openblas mapped: True" in r.stdout


def serving(line):
    return line.split(" use ")[1].split(",")[0]


def test_plugin_first_binds_the_plugins_sgemm(tmp_path):
    line, err, _ = run_child(tmp_path, "")
    assert PLUGIN in serving(line) and "the plugin's own sgemm" in line, line
    assert WARNING not in err


def test_no_own_sgemm_hands_products_to_openblas(tmp_path):
    line, err, openblas = run_child(tmp_path, "", {"ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM": "1"})
    if not openblas:
        pytest.skip("plugin built without OpenBLAS (make OPENBLAS=)")
    assert "the plugin hands sgemm to OpenBLAS" in line, line
    assert WARNING not in err


def test_mlx_first_keeps_reference_blas_and_warns(tmp_path):
    line, err, _ = run_child(tmp_path, "import mlx.core")
    assert PLUGIN not in serving(line) and "openblas" not in serving(line), line
    assert WARNING in line
    # the warning also reaches ORT's log at its default severity, not only the verbose log
    assert any(WARNING in l and "[W:onnxruntime" in l for l in err.splitlines()), err[-3000:]


def test_package_import_before_mlx_keeps_the_plugins_sgemm(tmp_path):
    line, err, _ = run_child(tmp_path, "import sys; sys.path.insert(0, %r); "
                                       "import onnxruntime_ep_mlx; import mlx.core" % HERE)
    assert PLUGIN in serving(line), line
    assert WARNING not in err
