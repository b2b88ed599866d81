"""Which library serves MLX's matrix products (src/cpu/blas_binding.c). The plugin exports its own
cblas_sgemm (src/cpu/sgemm/sgemm.c), which libmlx binds to when the plugin loads libmlx. Each case runs
a MatMul in a child process with a given import order and reads what the EP records: the run
record's `blas` (as_built: the library is the build's choice; own_sgemm: the plugin's product), and
a warning at ORT's default severity when MLX was loaded first and kept the wheel's reference BLAS.
Importing onnxruntime_ep_mlx first loads the plugin, so a later `import mlx.core` is harmless.
ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM=1 hands the products to OpenBLAS. (Installed from the wheel, an
import hook makes the order not matter: scripts/wheel_check.sh tests that.)"""
import json
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

pytestmark = pytest.mark.cpu_device


PLUGIN = "libonnxruntime_ep_mlx"


def run_child(tmp_path, first_imports, env_extra=None):
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       [("a", TP.FLOAT, [32, 48]), ("b", TP.FLOAT, [48, 16])],
                       [("y", TP.FLOAT, None)])
    path = tmp_path / "mm.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "y.npy"
    record = tmp_path / "record.json"
    code = textwrap.dedent(f"""
        {first_imports}
        import gc, sys, numpy as np, onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        import onnxruntime_ep_mlx as mlx
        so = mlx.session_options({{"device": "cpu", "stats_file": {str(record)!r}}})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession({str(path)!r}, so)
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((32, 48), np.float32), rng.standard_normal((48, 16), np.float32)
        np.save({str(out)!r}, s.run(None, {{"a": a, "b": b}})[0] - a @ b)
        print("openblas mapped:", "libopenblas" in open("/proc/self/maps").read())
        del s
        gc.collect()  # the run record is written when ORT releases the EP
    """)
    env = dict(os.environ, **(env_extra or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert np.abs(np.load(out)).max() < 1e-4  # ran, and right, whichever BLAS served it
    blas = json.loads(record.read_text())["blas"]
    # the slow binding is also said at ORT's default severity (a warning line from the EP)
    warned = any("[W:onnxruntime" in line and "MLXExecutionProvider" in line
                 for line in r.stderr.splitlines())
    return blas, warned, "openblas mapped: True" in r.stdout


def test_plugin_first_binds_the_plugins_sgemm(tmp_path):
    blas, warned, _ = run_child(tmp_path, "")
    assert blas["as_built"] and blas["own_sgemm"], blas
    assert PLUGIN in blas["note"], blas
    assert not warned


def test_no_own_sgemm_hands_products_to_openblas(tmp_path):
    blas, warned, openblas = run_child(tmp_path, "", {"ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM": "1"})
    if not openblas:
        pytest.skip("plugin built without OpenBLAS (make OPENBLAS=)")
    assert blas["as_built"] and not blas["own_sgemm"], blas
    assert not warned


def test_mlx_first_keeps_reference_blas_and_warns(tmp_path):
    blas, warned, _ = run_child(tmp_path, "import mlx.core")
    assert not blas["as_built"], blas
    # the warning reaches ORT's log at its default severity, not only the verbose log
    assert warned


def test_package_import_before_mlx_keeps_the_plugins_sgemm(tmp_path):
    blas, warned, _ = run_child(tmp_path, "import sys; sys.path.insert(0, %r); "
                                          "import onnxruntime_ep_mlx; import mlx.core" % HERE)
    assert blas["as_built"] and blas["own_sgemm"], blas
    assert not warned
