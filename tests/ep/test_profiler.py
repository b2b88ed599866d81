"""The EP's part in ORT's profiler (src/ep/profiler.c): with enable_profiling, every Run of an MLX
group is an event in ORT's profile (category Kernel), named after the fused node, inside the time
of ORT's own event for that node, with the group's path and whether the Run traced."""
import json

import numpy as np

import onnxruntime as ort
import onnxruntime_ep_mlx as mlx
from mlx_harness import two_group_model


def profile(tmp_path, runs, profiling=True):
    so = mlx.session_options({"device": "cpu", "stats_file": str(tmp_path / "stats.json")})
    so.enable_profiling = profiling
    so.profile_file_prefix = str(tmp_path / "profile")
    s = ort.InferenceSession(two_group_model().SerializeToString(), so)
    x = np.ones((2, 3), np.float32)
    for _ in range(runs):
        s.run(None, {"x": x, "y": x})
    path = s.end_profiling() if profiling else None
    del s
    stats = json.loads((tmp_path / "stats.json").read_text())
    return (json.loads(open(path).read()) if path else None), stats


def test_each_group_run_is_an_event_inside_ort_node_event(tmp_path):
    events, stats = profile(tmp_path, runs=3)
    ours = [e for e in events if e.get("args", {}).get("ep") == "MLXExecutionProvider"]
    groups = {g["name"]: g for g in stats["groups"]}
    assert len(groups) == 2
    for name, g in groups.items():
        mine = sorted((e for e in ours if e["name"] == name), key=lambda e: e["ts"])
        assert len(mine) == g["runs"] == 3
        assert all(e["ph"] == "X" and e["cat"] == "Kernel" for e in mine)
        assert [e["args"]["traced"] for e in mine].count("true") == g["traces"]
        assert mine[0]["args"]["traced"] == "true"  # the first Run traces
        compiled = [e for e in mine if e["args"]["path"] == "compiled"]
        assert len(compiled) == g["compiled_runs"]
        assert all(e["args"]["nodes"] == str(g["nodes"]) for e in mine)
        # each inside one of ORT's events for the fused node ("<node>_kernel_time")
        node_events = [e for e in events if e.get("cat") == "Node"
                       and e["name"] == name + "_kernel_time"]
        assert len(node_events) == 3
        for e in mine:
            assert any(n["ts"] <= e["ts"] and e["ts"] + e["dur"] <= n["ts"] + n["dur"] + 1
                       for n in node_events), (e, node_events)


def test_io_binding_runs_with_the_version_25_ep_table(tmp_path):
    """Offering CreateProfiler makes the EP declare ORT API version 25, whose OrtEp table also
    has Sync (left NULL, optional): IOBinding's synchronisation must still work."""
    so = mlx.session_options({"device": "cpu"})
    s = ort.InferenceSession(two_group_model().SerializeToString(), so)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = s.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_cpu_input("y", x)
    b.bind_output("out")
    b.synchronize_inputs()
    s.run_with_iobinding(b)
    b.synchronize_outputs()
    np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], ((x + x) * x + x) * x, rtol=1e-6)
