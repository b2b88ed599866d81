"""onnxruntime-ep-mlx: run ONNX models on Apple's MLX through ONNX Runtime's plugin EP interface.

This package locates the plugin library (inside the installed wheel, or a checkout's build/),
registers it with ONNX Runtime (once per process), and builds SessionOptions that place the MLX
execution provider ahead of ORT's CPU provider. Importing it loads the plugin library at once,
so that a later `import mlx` finds MLX already bound to the BLAS the plugin was built with (the
plugin warns when MLX came first; installed from the wheel, onnxruntime_ep_mlx_preload makes the
order not matter). The CLI (`python -m onnxruntime_ep_mlx`) lives in __main__.py.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import onnxruntime as ort

EP_NAME = "MLXExecutionProvider"
REGISTRATION_NAME = "MLXExecutionProvider"
_LIB_NAME = "libonnxruntime_ep_mlx.so"
_registered = False
_load_error: OSError | None = None  # why the early load failed, for a plainer message later


def _version() -> str:
    """The wheel's version (_version.py, written by setup.py), else the checkout's
    src/ep/ep_types.h, the one place the version is written."""
    try:
        from ._version import __version__ as v
        return v
    except ImportError:
        import re
        header = Path(__file__).resolve().parents[2] / "src" / "ep" / "ep_types.h"
        m = re.search(r'#define EP_VERSION "([^"]+)"', header.read_text()) \
            if header.is_file() else None
        return m.group(1) if m else "unknown"


__version__ = _version()


def library_path() -> str:
    """Path of the plugin library: $ONNXRUNTIME_EP_MLX_LIBRARY, else the one inside this
    package (an installed wheel), else the checkout's build/."""
    env = os.environ.get("ONNXRUNTIME_EP_MLX_LIBRARY")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    candidates += [here / _LIB_NAME, here.parent.parent / "build" / _LIB_NAME]
    for c in candidates:
        if c.is_file():
            return str(c)
    raise FileNotFoundError(
        f"{_LIB_NAME} not found (looked in {', '.join(map(str, candidates))}); in a checkout, "
        "run `make build`")


def _load_early() -> None:
    """Loads the plugin (and through it libmlx, bound to the plugin's BLAS) before anyone imports
    mlx; ORT's own load of the same path later finds it loaded. Quiet when it is not built yet."""
    global _load_error
    try:
        ctypes.CDLL(library_path())
    except OSError as e:
        _load_error = e


def register_execution_provider_library() -> None:
    """Registers the plugin with ONNX Runtime; calling it again does nothing."""
    global _registered
    if _registered:
        return
    if _load_error is not None and "libmlx" in str(_load_error):
        try:
            from ._version import mlx_version as v
        except ImportError:
            v = "<the mlx version>"
        raise RuntimeError(
            f"{_LIB_NAME} cannot load MLX ({_load_error}). MLX's library comes with its backend "
            f"package: pip install mlx-cpu=={v} (mlx-cuda-13=={v} on NVIDIA GPUs), or install "
            "this package's wheel or folder with its [cpu] or [cuda13] extra")
    try:
        ort.register_execution_provider_library(REGISTRATION_NAME, library_path())
    except Exception as e:  # registered earlier in this process by someone else
        if "already registered" not in str(e).lower():
            raise
    _registered = True


def ep_devices(device: str | None = None) -> list:
    """The OrtEpDevices this EP offers (optionally only those for 'cpu' or 'gpu')."""
    register_execution_provider_library()
    found = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if device is not None:
        found = [d for d in found if d.ep_metadata.get("mlx_device") == device] or found[:1]
    return found


def session_options(provider_options: dict | None = None,
                    base: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """SessionOptions with the MLX EP appended (ORT's CPU provider takes what it declines).

    provider_options: e.g. {"device": "cpu"}; keys are documented in the README.
    """
    so = base if base is not None else ort.SessionOptions()
    opts = {k: str(v) for k, v in (provider_options or {}).items()}
    devices = ep_devices()
    if not devices:
        raise RuntimeError(f"{EP_NAME} offers no device on this machine")
    so.add_provider_for_devices(devices[:1], opts)
    return so


_load_early()

__all__ = ["EP_NAME", "__version__", "library_path", "register_execution_provider_library",
           "ep_devices",
           "session_options"]
