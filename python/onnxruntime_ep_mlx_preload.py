"""Import order that does not matter, for the installed wheel, when the user asks for it. The
wheel puts onnxruntime_ep_mlx_preload.pth into site-packages, and Python runs its one line at
start-up: install() below. Unless ONNXRUNTIME_EP_MLX_PRELOAD=1 is set it does nothing at all.
With it, it adds an import hook (no file read, no library loaded): the first time anything
imports mlx.core, the hook loads the plugin library before MLX's, so that libmlx binds its
cblas_sgemm to the plugin's own product (src/cpu/sgemm/), as it does when onnxruntime_ep_mlx is
imported first; otherwise `import mlx` before `import onnxruntime_ep_mlx` leaves MLX's CPU matrix
products on the reference BLAS of the mlx-cpu wheel (src/cpu/blas_binding.c detects that and
says so at session creation, naming this switch). It is an opt-in because it changes every
program of the environment that imports mlx.core, ONNX Runtime or not: their float32 CPU matrix
products then run on the plugin's sgemm. The hook never makes an import fail. A checkout's
development install (make build) does not use it.
"""
import os
import sys

_LIB_NAME = "libonnxruntime_ep_mlx.so"


def _load_plugin():
    try:
        import ctypes
        import importlib.util
        lib = os.environ.get("ONNXRUNTIME_EP_MLX_LIBRARY")
        if not lib:
            spec = importlib.util.find_spec("onnxruntime_ep_mlx")  # finds it, runs nothing
            if spec is None or not spec.submodule_search_locations:
                return
            lib = os.path.join(list(spec.submodule_search_locations)[0], _LIB_NAME)
        if os.path.isfile(lib):
            ctypes.CDLL(lib)
    except Exception:  # noqa: BLE001 (an import of mlx must not fail because of this hook)
        pass


class _BeforeMLX:
    """A meta path finder that only watches: it loads the plugin when mlx.core is about to be
    imported, removes itself, and lets the ordinary finders import it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "mlx.core":
            try:
                sys.meta_path.remove(_BeforeMLX)
            except ValueError:
                pass
            _load_plugin()
        return None


def install():
    if (os.environ.get("ONNXRUNTIME_EP_MLX_PRELOAD") != "1"
            or not sys.platform.startswith("linux")
            or "mlx.core" in sys.modules or _BeforeMLX in sys.meta_path):
        return
    sys.meta_path.insert(0, _BeforeMLX)
