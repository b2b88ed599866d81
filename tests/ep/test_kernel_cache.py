"""MLX's kernel cache folder (the kernel_cache_dir option, ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR) and
the run record's account of the first Run (cold_start, kernel_cache, the groups' first_run_*).
MLX's CUDA backend reads MLX_PTX_CACHE_DIR once per process, and the EP sets it only on the
user's opt-in, so every case runs in a child process of its own, and reads the variable there
through libc's getenv (os.environ is a snapshot taken when Python started)."""
import json
import os
import subprocess
import sys

from mlx_harness import TESTS

CHILD = r"""
import contextlib, ctypes, io, json, sys, numpy as np
from onnx import TensorProto as TP, helper
from mlx_harness import make_model, mlx_session
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
sessions, runs = json.loads(sys.argv[1]), int(sys.argv[2])
# one group of three elementwise nodes: compiled, so MLX fuses them into one kernel it compiles
nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
         helper.make_node("Mul", ["s", "b"], ["m"], name="mul"),
         helper.make_node("Tanh", ["m"], ["c"], name="tanh")]
model = make_model(nodes, [("a", TP.FLOAT, ["N", 3]), ("b", TP.FLOAT, [3])],
                   [("c", TP.FLOAT, None)])
results = []
for i, opts in enumerate(sessions):
    record = "%s.%d.json" % (sys.argv[3], i)
    printed = io.StringIO()  # ORT's Python layer prints the EP's error before raising its own
    try:
        with contextlib.redirect_stdout(printed):
            s = mlx_session(model, provider_options=dict(opts, stats_file=record))
    except Exception as e:
        results.append({"error": printed.getvalue() + str(e)})
        continue
    for _ in range(runs):
        s.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)})
    del s
    var = libc.getenv(b"MLX_PTX_CACHE_DIR")
    results.append({"error": None, "MLX_PTX_CACHE_DIR": var and var.decode(),
                    "record": json.load(open(record))})
print("RESULTS " + json.dumps(results))
"""


def run_child(tmp_path, sessions, env=None, runs=1):
    """The sessions' results in one child process: per session its creation error, or the run
    record and MLX_PTX_CACHE_DIR as the process has it after the session. env: variables set
    (None: removed) on top of this process's, without MLX_PTX_CACHE_DIR and the EP's variable."""
    full = {k: v for k, v in os.environ.items()
            if k not in ("MLX_PTX_CACHE_DIR", "ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR")}
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full["PYTHONPATH"] = os.pathsep.join(
        [str(TESTS)] + [p for p in full.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sessions), str(runs),
                        str(tmp_path / "record")], capture_output=True, text=True, env=full)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULTS ")][-1]
    return json.loads(line[len("RESULTS "):])


def test_without_the_option_mlx_ptx_cache_dir_stays_unset(tmp_path):
    [res] = run_child(tmp_path, [{}])
    assert res["error"] is None and res["MLX_PTX_CACHE_DIR"] is None
    cache = res["record"]["kernel_cache"]
    assert cache["ptx_folder_source"] == "mlx default"
    assert cache["ptx_folder"].endswith("/ptx") and "/mlx/" in cache["ptx_folder"]
    assert cache["kernel_cache_dir_not_applied"] is None


def test_option_sets_mlx_ptx_cache_dir_to_the_folder_it_makes(tmp_path):
    folder = tmp_path / "a" / "b" / "kernels"
    [res] = run_child(tmp_path, [{"kernel_cache_dir": str(folder)}])
    assert res["error"] is None
    assert folder.is_dir()
    assert res["MLX_PTX_CACHE_DIR"] == str(folder.resolve())
    cache = res["record"]["kernel_cache"]
    assert cache["ptx_folder"] == str(folder.resolve())
    assert cache["ptx_folder_source"] == "option"
    assert cache["kernel_cache_dir_not_applied"] is None


def test_env_variable_applies_and_the_option_wins_over_it(tmp_path):
    by_env, by_option = tmp_path / "env", tmp_path / "option"
    env = {"ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR": str(by_env)}
    [res] = run_child(tmp_path, [{}], env=env)
    assert res["MLX_PTX_CACHE_DIR"] == str(by_env.resolve())
    assert res["record"]["kernel_cache"]["ptx_folder_source"] == \
        "env ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR"
    by_env.rmdir()
    [res] = run_child(tmp_path, [{"kernel_cache_dir": str(by_option)}], env=env)
    assert res["MLX_PTX_CACHE_DIR"] == str(by_option.resolve())
    assert res["record"]["kernel_cache"]["ptx_folder_source"] == "option"
    assert not by_env.exists()


def test_tilde_is_expanded_from_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    [res] = run_child(tmp_path, [{"kernel_cache_dir": "~/.cache/onnxruntime-ep-mlx"}],
                      env={"HOME": str(home)})
    folder = home / ".cache" / "onnxruntime-ep-mlx"
    assert folder.is_dir() and res["MLX_PTX_CACHE_DIR"] == str(folder.resolve())


def test_users_own_mlx_ptx_cache_dir_stays(tmp_path):
    mine, option = tmp_path / "mine", tmp_path / "option"
    [res] = run_child(tmp_path, [{"kernel_cache_dir": str(option)}],
                      env={"MLX_PTX_CACHE_DIR": str(mine)})
    assert res["error"] is None and res["MLX_PTX_CACHE_DIR"] == str(mine)
    cache = res["record"]["kernel_cache"]
    assert cache["ptx_folder"] == str(mine) and cache["ptx_folder_source"] == "MLX_PTX_CACHE_DIR"
    assert cache["kernel_cache_dir_not_applied"]
    assert not option.exists()  # not applied, so not made
    # the same folder as the user's: nothing to report
    [res] = run_child(tmp_path, [{"kernel_cache_dir": str(tmp_path)}],
                      env={"MLX_PTX_CACHE_DIR": str(tmp_path)})
    assert res["record"]["kernel_cache"]["kernel_cache_dir_not_applied"] is None


def test_a_second_folder_in_one_process_is_reported_not_applied(tmp_path):
    """MLX reads MLX_PTX_CACHE_DIR once per process: the first session's folder stays."""
    first, second = tmp_path / "first", tmp_path / "second"
    results = run_child(tmp_path, [{"kernel_cache_dir": str(first)},
                                   {"kernel_cache_dir": str(second)},
                                   {"kernel_cache_dir": str(first)},
                                   {}])
    assert [r["error"] for r in results] == [None] * 4
    assert all(r["MLX_PTX_CACHE_DIR"] == str(first.resolve()) for r in results)
    caches = [r["record"]["kernel_cache"] for r in results]
    assert [c["ptx_folder"] for c in caches] == [str(first.resolve())] * 4
    assert [c["ptx_folder_source"] for c in caches] == ["option"] * 4
    notes = [c["kernel_cache_dir_not_applied"] for c in caches]
    assert notes[0] is None and notes[1] and notes[2] is None and notes[3] is None
    assert not second.exists()


def test_uncreatable_or_unusable_folder_fails_session_creation(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    under_file = blocker / "kernels"
    results = run_child(tmp_path, [{"kernel_cache_dir": str(under_file)},
                                   {"kernel_cache_dir": "~nobody/kernels"},
                                   {"kernel_cache_dir": ""}])
    under, tilde, empty = (r["error"] for r in results)
    assert under and f"kernel_cache_dir='{under_file}'" in under and "not a folder" in under
    assert tilde and "kernel_cache_dir='~nobody/kernels'" in tilde
    assert empty and "kernel_cache_dir is empty" in empty
    [res] = run_child(tmp_path, [{}], env={"ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR": str(under_file)})
    assert res["error"] and \
        f"ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR='{under_file}'" in res["error"]
    # a failed creation changes nothing in the process
    failed, after = run_child(tmp_path, [{"kernel_cache_dir": str(under_file)}, {}])
    assert failed["error"] and after["error"] is None and after["MLX_PTX_CACHE_DIR"] is None


def first_run_parts_hold(record):
    """Each first-Run part is non-negative and they fit in the first Run, per group and summed."""
    cold = record["cold_start"]
    parts = [(cold["first_run_ns"], cold["first_run_tracing_ns"], cold["first_run_evaluation_ns"])]
    parts += [(g["first_run_ns"], g["first_run_tracing_ns"], g["first_run_evaluation_ns"])
              for g in record["groups"]]
    for first, tracing, evaluation in parts:
        assert first > 0 and tracing >= 0 and evaluation > 0
        assert tracing + evaluation <= first
    assert cold["first_run_ns"] == sum(g["first_run_ns"] for g in record["groups"])
    assert cold["path_trial_eager_runs_ns"] == \
        sum(g["path_trial_eager_runs_ns"] for g in record["groups"])


def test_report_says_where_the_first_run_went(tmp_path):
    """A cold kernel cache, then a warm one, in two processes: the device's kernel folder (on the
    CPU device MLX's folder under TMPDIR, on the GPU the kernel_cache_dir folder; both empty at
    first) gains the fused kernel's files during the first Run, whose evaluation is where MLX
    compiled it; the second process finds it and compiles nothing."""
    env = {"TMPDIR": str(tmp_path / "tmp"), "ONNXRUNTIME_EP_MLX_NO_HOST_MATH": "1",
           "ONNXRUNTIME_EP_MLX_NO_COMPILE": None, "ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL": None}
    (tmp_path / "tmp").mkdir()
    options = [{"kernel_cache_dir": str(tmp_path / "kernels")}]
    [cold] = run_child(tmp_path, options, env=env, runs=12)
    [warm] = run_child(tmp_path, options, env=env, runs=12)
    for res in (cold, warm):
        record = res["record"]
        first_run_parts_hold(record)
        [group] = record["groups"]
        assert group["path"] == "shapeless" and group["traces"] >= 1
        assert group["trial"]["decided"] and record["cold_start"]["path_trial_eager_runs_ns"] > 0
        cache = record["kernel_cache"]
        device = record["device"]
        expected = str((tmp_path / "kernels").resolve()) if device == "gpu" else \
            str(tmp_path / "tmp" / "mlx")
        assert cache["device_folder"].startswith(expected)
    cold_cache, warm_cache = cold["record"]["kernel_cache"], warm["record"]["kernel_cache"]
    assert cold_cache["device_folder_files_before_first_run"] == 0
    gained = cold_cache["device_folder_files_gained_in_first_run"]
    assert gained > 0
    assert len(os.listdir(cold_cache["device_folder"])) == gained
    assert warm_cache["device_folder_files_before_first_run"] == gained
    assert warm_cache["device_folder_files_gained_in_first_run"] == 0
    # compiling the kernel (the C++ compiler, or NVRTC) costs far more than loading it
    cold_eval = cold["record"]["cold_start"]["first_run_evaluation_ns"]
    warm_eval = warm["record"]["cold_start"]["first_run_evaluation_ns"]
    assert warm_eval * 2 < cold_eval


def test_a_session_that_never_ran_has_no_counts(tmp_path):
    """The kernel files are counted around the groups' first Runs: none ran, so no counts."""
    [res] = run_child(tmp_path, [{}], runs=0)
    cache = res["record"]["kernel_cache"]
    assert cache["device_folder_files_before_first_run"] is None
    assert cache["device_folder_files_gained_in_first_run"] is None
    assert res["record"]["cold_start"]["first_run_ns"] == 0
