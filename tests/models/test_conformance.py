"""ONNX backend conformance, fast subset: conformance/run.py over the op families the EP claims
today must show no regression against conformance/expectations.tsv (a case not listed there must
pass). The full run is `make conformance`."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("add", "mul", "sub", "div", "pow", "abs", "neg", "exp", "log", "sqrt", "reciprocal",
            "erf", "equal", "less", "greater", "not", "where")
SUBSET = rf"^test_({'|'.join(FAMILIES)})"


def test_no_regression_on_claimed_families(tmp_path):
    out = tmp_path / "conformance.json"
    r = subprocess.run([sys.executable, str(ROOT / "conformance" / "run.py"), "--filter", SUBSET,
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert out.is_file(), r.stdout + r.stderr
    summary = json.loads(out.read_text())["summary"]
    assert summary["passed"] > 0, r.stdout
    assert not summary["regressions"], "\n".join(
        line for line in r.stdout.splitlines() if line.startswith("REGRESSION"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == (
        f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped")
