"""pytest configuration: make the checkout's tests/ importable for the shared harness, and switch
the path trial off (ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL=1) so that a group's compiled/eager run
counts are deterministic; tests/test_plan_compile.py switches it back on to test the trial."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL", "1")
