"""The EP's diagnostics go through ORT's logger (src/ep/log.c), so the session's
log_severity_level governs them: the partition summary and session summary at INFO, each declined
node at VERBOSE, a slow first Run at WARNING. Each case runs in a child process, as ORT's default
logger is process-wide. The assertions read only stable markers: the EP's tag, the message kind
(partition / declined / session summary / first Run) and the names of the nodes and groups."""
import json
import os
import re
import subprocess
import sys

from mlx_harness import TESTS

TAG = "[MLXExecutionProvider]"

CHILD = r"""
import sys, numpy as np, onnxruntime as ort
import onnxruntime_ep_mlx as mlx
from mlx_harness import two_group_model
severity, options = int(sys.argv[1]), eval(sys.argv[2])
model = two_group_model()
so = mlx.session_options({"device": "cpu", **options})
if severity >= 0:
    so.log_severity_level = severity
s = ort.InferenceSession(model.SerializeToString(), so)
x = np.ones((2, 3), np.float32)
for _ in range(2):
    s.run(None, {"x": x, "y": x})
del s
"""


def run_child(severity, options=None, env=None):
    """stderr of a child that builds the split model (two MLX groups around two declined Casts)
    at this log_severity_level (-1: ORT's default), runs it twice and ends the session."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(TESTS)] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p])
    full_env.pop("ONNXRUNTIME_EP_MLX_VERBOSE", None)
    r = subprocess.run([sys.executable, "-c", CHILD, str(severity), repr(options or {})],
                       capture_output=True, text=True, env=full_env)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stderr.splitlines() if TAG in line]


MARKERS = {"partition": re.compile(re.escape(TAG) + r" partition:"),
           "declined": re.compile(re.escape(TAG) + r" +declined "),
           "summary": re.compile(re.escape(TAG) + r" session summary:"),
           "group": re.compile(re.escape(TAG) + r" group "),
           "first_run": re.compile(re.escape(TAG) + r" group .*first Run took")}


def kinds(lines):
    """Which of the EP's message kinds appear among the lines."""
    return {k for k, m in MARKERS.items() if any(m.search(line) for line in lines)}


def of_kind(lines, kind):
    return [line for line in lines if MARKERS[kind].search(line)]


def test_verbose_severity_shows_partition_declines_and_summary():
    lines = run_child(0)
    assert {"partition", "declined", "summary", "group"} <= kinds(lines)
    declined = of_kind(lines, "declined")
    assert any("Cast 'tostr'" in line for line in declined)
    assert any("Cast 'fromstr'" in line for line in declined)
    # they came through ORT's sink at their severities (ORT tags a line [I:onnxruntime...] for
    # INFO, [V:... for VERBOSE), not through the verbose option's prints
    for kind in ("partition", "summary", "group"):
        assert all("[I:onnxruntime" in line for line in of_kind(lines, kind)), kind
    assert all("[V:onnxruntime" in line for line in declined)


def test_info_severity_shows_summaries_but_not_declines():
    found = kinds(run_child(1))
    assert {"partition", "summary", "group"} <= found
    assert "declined" not in found


def test_default_severity_shows_none_of_them():
    found = kinds(run_child(-1))
    assert not found & {"partition", "declined", "summary", "group", "first_run"}
    found = kinds(run_child(2))
    assert not found & {"partition", "declined", "summary", "group", "first_run"}


def test_verbose_option_still_prints_at_error_severity():
    """verbose=1 keeps its own stderr report (tools parse it) whatever ORT's severity."""
    lines = run_child(3, {"verbose": "1"})
    assert {"partition", "declined", "summary"} <= kinds(lines)
    assert not any(":onnxruntime" in line for line in of_kind(lines, "partition"))


def test_slow_first_run_warns_at_default_severity(tmp_path):
    stats = tmp_path / "stats.json"
    lines = run_child(-1, {"stats_file": str(stats)},
                      env={"ONNXRUNTIME_EP_MLX_SLOW_FIRST_RUN_MS": "0"})
    warned = of_kind(lines, "first_run")
    assert all("[W:onnxruntime" in line for line in warned)
    record = json.loads(stats.read_text())
    names = [g["name"] for g in record["groups"]]
    assert len(names) == 2
    # one warning per group, for its first Run only
    for name in names:
        assert sum(f"'{name}'" in line for line in warned) == 1, warned
    for g in record["groups"]:
        assert g["runs"] == 2
        assert 0 < g["first_run_ns"]
        assert g["trace_ns"] <= g["first_run_ns"]
        if g["traces"]:
            assert g["trace_ns"] > 0


def test_fast_first_run_does_not_warn():
    assert "first_run" not in kinds(run_child(0))
