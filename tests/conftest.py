"""pytest configuration: make the checkout's tests/ importable for the shared harness, and switch
the path trial off (ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL=1) so that a group's compiled/eager run
counts are deterministic; tests/plan/test_compile.py switches it back on to test the trial.
Tests marked cpu_device run their sessions on MLX's CPU device whatever MLX's default is."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_device: sessions run on MLX's CPU device (float64, "
                                       "CPU-only kernel forms)")


@pytest.fixture(autouse=True)
def _pin_cpu_device(request, monkeypatch):
    if request.node.get_closest_marker("cpu_device"):
        import mlx_harness
        monkeypatch.setattr(mlx_harness, "PINNED_OPTIONS", {"device": "cpu"})
