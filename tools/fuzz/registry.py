"""What the EP claims, read from the registry itself (build/registry_dump --json), so a new row
is fuzzed as soon as it exists (and one without a generator shows up as "not fuzzed")."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import onnx.defs

ROOT = Path(__file__).resolve().parents[2]


def load(dump=None):
    dump = dump or ROOT / "build" / "registry_dump"
    return json.loads(subprocess.run([str(dump), "--json"], check=True, capture_output=True,
                                     text=True).stdout)


class Registry:
    def __init__(self, rows):
        self.rows = rows
        self.ops = sorted({(r["domain"], r["op"]) for r in rows})

    def since(self, op, opset, domain="ai.onnx"):
        try:
            return onnx.defs.get_schema(op, opset, "" if domain == "ai.onnx" else domain).since_version
        except Exception:
            return None

    def dtypes(self, op, opset, domain="ai.onnx"):
        """Input-0 dtypes the registry claims for `op` in a model of `opset` (empty: none)."""
        sv = self.since(op, opset, domain)
        if sv is None:
            return set()
        for r in self.rows:
            if r["domain"] == domain and r["op"] == op and r["since_min"] <= sv <= r["since_max"]:
                return set(r["dtypes"])
        return set()
