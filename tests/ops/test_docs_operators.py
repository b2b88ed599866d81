"""docs/OPERATORS.md is generated from the registry; this fails when it is stale."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_operators_md_is_current():
    dump = ROOT / "build" / "registry_dump"
    assert dump.exists(), "build/registry_dump is built by `make build`"
    fresh = subprocess.run([str(dump)], capture_output=True, text=True, check=True).stdout
    committed = (ROOT / "docs" / "OPERATORS.md").read_text()
    assert fresh == committed, "docs/OPERATORS.md is stale: run `make operators`"
