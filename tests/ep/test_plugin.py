"""The plugin as ORT sees it: exported symbols, registration, devices, provider options, and the
verbose diagnostics printed at session creation and teardown."""
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxruntime_ep_mlx as mlx
from mlx_harness import TESTS, check_against_cpu, make_model, mlx_session


def add_model():
    return make_model([helper.make_node("Add", ["a", "b"], ["c"], name="add0")],
                      [("a", TP.FLOAT, ["N", 3]), ("b", TP.FLOAT, [3])], [("c", TP.FLOAT, None)])


def test_library_exports_only_the_entry_points():
    """ORT's two, and the cblas_sgemm libmlx binds to (src/cpu/sgemm/sgemm.c)."""
    out = subprocess.run(["nm", "-D", "--defined-only", mlx.library_path()], capture_output=True,
                         text=True, check=True).stdout
    names = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert names == ["CreateEpFactories", "ReleaseEpFactory", "cblas_sgemm"]


def test_registration_is_idempotent_and_offers_a_cpu_device():
    mlx.register_execution_provider_library()
    mlx.register_execution_provider_library()
    devices = mlx.ep_devices()
    assert devices, "the MLX EP offers no device"
    cpu = [d for d in devices if d.device.type == ort.OrtHardwareDeviceType.CPU]
    assert cpu and cpu[0].ep_vendor == "onnxruntime-ep-mlx"
    assert cpu[0].ep_metadata["mlx_device"] == "cpu"
    assert cpu[0].ep_metadata["mlx_version"].startswith("0.")


def test_session_runs_on_mlx_with_dynamic_batch():
    for n in (1, 4):
        a = np.random.default_rng(n).random((n, 3), dtype=np.float32)
        b = np.arange(3, dtype=np.float32)
        check_against_cpu(add_model(), {"a": a, "b": b})


@pytest.mark.parametrize("device", ["cpu"])
def test_device_option_is_accepted(device):
    s = mlx_session(add_model(), provider_options={"device": device})
    a = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(s.run(None, {"a": a, "b": a[0]})[0], a + 1)


@pytest.mark.parametrize("key,value,message", [
    ("device", "tpu", "device='tpu' is not one of cpu, gpu"),
    ("verbose", "yes", "verbose='yes' is not 0 or 1"),
    ("cpu_cache_mb", "-5", "cpu_cache_mb='-5' is not a whole number of MiB"),
    ("cpu_cache_mb", "1g", "cpu_cache_mb='1g' is not a whole number of MiB"),
])
def test_bad_provider_option_is_a_clear_error(key, value, message, capsys):
    # ORT's Python layer prints the EP's error and retries on CPU, which CPU-fallback=0 refuses.
    with pytest.raises(Exception):
        mlx_session(add_model(), provider_options={key: value})
    assert message in capsys.readouterr().out


@pytest.mark.cpu_device
def test_cpu_buffer_cache_is_raised_never_lowered(tmp_path):
    """MLX's CPU build keeps 32 MiB of freed buffers by default; the EP raises that (cpu_cache_mb,
    default 1024) so large Runs reuse their buffers instead of faulting in fresh pages. A child
    process each, since the limit is process-wide: the default, a larger value, a smaller one
    after a larger (never lowered) and 0 (MLX's own limit left alone). MLX's CUDA build starts
    from its memory limit, far above these, which the EP then leaves as it is."""
    model = tmp_path / "add.onnx"
    model.write_bytes(add_model().SerializeToString())

    def limits(*option_sets):
        """The limit each session's run record reports (None: the EP left MLX's alone)."""
        records = [str(tmp_path / f"stats-{i}.json") for i in range(len(option_sets))]
        code = (
            "import numpy as np, sys; sys.path.insert(0, %r)\n"
            "from mlx_harness import mlx_session\n"
            "for opts, rec in zip(%r, %r):\n"
            "    s = mlx_session(%r, provider_options=dict(opts, stats_file=rec, device='cpu'))\n"
            "    s.run(None, {'a': np.ones((2, 3), np.float32), 'b': np.ones(3, np.float32)})\n"
            "    del s\n"
            % (TESTS, option_sets, records, str(model)))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return [json.loads(open(rec).read())["cpu_cache_limit_mb"] for rec in records]

    [default] = limits({})
    has_gpu = any(d.ep_metadata.get("mlx_device") == "gpu" for d in mlx.ep_devices())
    assert default == 1024 or (default > 2048 and has_gpu)
    bigger, smaller = limits({"cpu_cache_mb": "2048"}, {"cpu_cache_mb": "64"})
    assert bigger == max(2048, default) and smaller == bigger
    assert limits({"cpu_cache_mb": "0"}) == [None]


def test_gpu_option_without_gpu_backend_is_refused(capsys):
    if any(d.ep_metadata.get("mlx_device") == "gpu" for d in mlx.ep_devices()):
        pytest.skip("this MLX build has a GPU backend")
    with pytest.raises(Exception):
        mlx_session(add_model(), provider_options={"device": "gpu"})
    assert "no GPU backend" in capsys.readouterr().out


def test_verbose_prints_partition_report_and_session_summary(tmp_path):
    model = tmp_path / "add.onnx"
    model.write_bytes(add_model().SerializeToString())
    code = (
        "import numpy as np, sys; sys.path.insert(0, %r)\n"
        "from mlx_harness import mlx_session\n"
        "s = mlx_session(%r)\n"
        "s.run(None, {'a': np.ones((2, 3), np.float32), 'b': np.ones(3, np.float32)})\n"
        "del s\n" % (TESTS, str(model)))
    env = dict(os.environ, ONNXRUNTIME_EP_MLX_VERBOSE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "partition: 1 of 1 nodes claimed, 1 fused group(s)" in r.stderr
    assert "session summary: 1 fused group(s) on " in r.stderr
    assert "runs 1 (failed 0" in r.stderr and "path eager" in r.stderr
