"""ONNX backend conformance for the MLX execution provider (`make conformance`): every case of
onnx's on-disk backend test data (suites node, pytorch-converted, pytorch-operator, simple and
light) is run in an ONNX Runtime session with the MLX EP and CPU fallback disabled, so a case
passes only when the EP claims every node and every output of every data set matches the
reference within the tolerance onnx's own backend runner uses for that case (rtol 1e-3, atol 1e-7
unless the case's data.json says otherwise; shapes, dtypes and values compared as onnx compares
them, NaN equal to NaN). Anything else is recorded with its reason: failed-claim (the declines from
the EP's partition report), failed-numeric (largest differences), error (the exception text),
crash (the worker process died) or timeout. Cases run in a small pool of worker processes that
are replaced when one dies or overruns, so one bad case cannot stop the run. The result is a
per-operator table ending in `N passed, N failed, N skipped`, checked against
conformance/expectations.tsv (one `case<TAB>outcome<TAB>reason` row per case not expected to
pass; outcome `skipped` there means not run by design): the exit status is non-zero when a case
expected to pass does not. `--update-expectations` rewrites that file from the results,
`--filter REGEX` runs a subset and `--json PATH` writes every result for machines.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import re
import sys
import tempfile
import time
from collections import Counter, deque
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = Path(__file__).resolve().parent / "expectations.tsv"
DATA_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple", "light")
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test: the default of every case without a data.json

PASSED, SKIPPED = "passed", "skipped"
FAILED_CLAIM, FAILED_NUMERIC, ERROR = "failed-claim", "failed-numeric", "error"
CRASH, TIMEOUT = "crash", "timeout"
TASKS_PER_WORKER = 500  # a worker is replaced after this many cases, bounding any leak
STARTUP_S = 120         # a worker that is not ready by then (imports, EP registration) aborts
REASON_MAX = 300        # characters of a reason kept in expectations.tsv
SUB_BYTE = {onnx.TensorProto.INT4, onnx.TensorProto.UINT4, onnx.TensorProto.INT2,
            onnx.TensorProto.UINT2, onnx.TensorProto.FLOAT4E2M1}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    suite: str
    op: str       # the table's row: the node's op type, or the suite for whole-model suites
    model: str    # path of the .onnx file
    rtol: float = RTOL
    atol: float = ATOL


# ---------------------------------------------------------------- discovery (parent process)

def tolerance(case_dir: Path) -> tuple[float, float]:
    """rtol/atol as onnx's loader reads them: a data.json beside the model may override."""
    meta = case_dir / "data.json"
    if not meta.is_file():
        return RTOL, ATOL
    data = json.loads(meta.read_text())
    return data.get("rtol", RTOL), data.get("atol", ATOL)


def op_name(model_path: Path) -> str:
    """The op type of a single-node model (domain-qualified outside ai.onnx)."""
    model = onnx.load(str(model_path), load_external_data=False)
    node = model.graph.node[-1]
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def node_case_op(case_dir: Path) -> str:
    """An expanded case (the op's function body) is tabled under the op it expands."""
    base = re.sub(r"_expanded(_ver\d+)?$", "", case_dir.name)
    if base != case_dir.name and (case_dir.parent / base / "model.onnx").is_file():
        return op_name(case_dir.parent / base / "model.onnx")
    return op_name(case_dir / "model.onnx")


def light_cases() -> list[Case]:
    """light/light_NAME.onnx, known to onnx as test_NAME with its tolerance in real/test_NAME."""
    cases = []
    for model in sorted((DATA_DIR / "light").glob("light_*.onnx")):
        name = "test_" + model.stem[len("light_"):]
        rtol, atol = tolerance(DATA_DIR / "real" / name)
        cases.append(Case(name, "light", "light", str(model), rtol, atol))
    return cases


def suite_cases(suite: str) -> list[Case]:
    if suite == "light":
        return light_cases()
    cases = []
    for case_dir in sorted(p for p in (DATA_DIR / suite).iterdir() if (p / "model.onnx").is_file()):
        op = node_case_op(case_dir) if suite == "node" else suite
        cases.append(Case(case_dir.name, suite, op, str(case_dir / "model.onnx"),
                          *tolerance(case_dir)))
    return cases


def discover(pattern: str | None) -> list[Case]:
    rx = re.compile(pattern) if pattern else None
    cases = []
    for suite in SUITES:
        for case in suite_cases(suite):
            if rx is None or rx.search(case.name) or rx.search(f"{case.suite}/{case.name}"):
                cases.append(case)
    return cases


# ---------------------------------------------------------------- one case (worker process)

def load_value(path: Path, type_proto: onnx.TypeProto):
    """A tensor, sequence (list) or optional read from a .pb, as onnx's runner reads it."""
    data = path.read_bytes()
    if type_proto.HasField("sequence_type"):
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if type_proto.HasField("optional_type"):
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller feeds: graph inputs that are not initializers, in order."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def light_data_set(case: Case, model: onnx.ModelProto):
    """onnx's runner feeds light models arange(n)/n and compares with light_NAME_output_i.pb."""
    from onnx.backend.test.runner import Runner
    feeds = {x.name: Runner.generate_dummy_data(x, seed=0, name=case.name, random=False)
             for x in graph_inputs(model)}
    stem = Path(case.model).with_suffix("")
    expected = [load_value(Path(f"{stem}_output_{i}.pb"), o.type)
                for i, o in enumerate(model.graph.output)]
    return [(feeds, expected)]


def data_sets(case: Case, model: onnx.ModelProto):
    """[(feeds, expected outputs)] for every test_data_set_N of the case."""
    if case.suite == "light":
        return light_data_set(case, model)
    inputs, outputs = graph_inputs(model), list(model.graph.output)
    sets = []
    for d in sorted(Path(case.model).parent.glob("test_data_set_*")):
        n_in, n_out = len(list(d.glob("input_*.pb"))), len(list(d.glob("output_*.pb")))
        feeds = {inputs[i].name: load_value(d / f"input_{i}.pb", inputs[i].type)
                 for i in range(n_in)}
        expected = [load_value(d / f"output_{i}.pb", outputs[i].type) for i in range(n_out)]
        sets.append((feeds, expected))
    return sets


def diff_summary(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """How many elements fail the tolerance and the largest absolute and relative differences
    (equal values, NaN against NaN included, differ by 0; a NaN difference counts as inf)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where((g == w) | (np.isnan(g) & np.isnan(w)), 0.0, np.abs(g - w))
        err = np.nan_to_num(err, nan=np.inf, posinf=np.inf)
        rel = np.where(err == 0, 0.0, np.nan_to_num(err / np.abs(w), nan=np.inf, posinf=np.inf))
    return (f"{int(bad.sum())} of {bad.size} elements differ, max abs diff {err.max():.3g}, "
            f"max rel diff {rel.max():.3g} (rtol {rtol:g}, atol {atol:g})")


def mismatch(got, want, rtol: float, atol: float, where: str) -> str | None:
    """None when `got` matches `want` as onnx's assert_similar_outputs decides, else why not."""
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)) or len(got) != len(want):
            return f"{where}: sequence differs in kind or length"
        for j, (g, w) in enumerate(zip(got, want)):
            why = mismatch(g, w, rtol, atol, f"{where}[{j}]")
            if why:
                return why
        return None
    if want is None or got is None:
        return None if got is None and want is None else f"{where}: optional presence differs"
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{where}: shape {got.shape} != expected {want.shape}"
    if want.dtype == object:
        return None if np.array_equal(got, want) else f"{where}: strings differ"
    if got.dtype != want.dtype:
        return f"{where}: dtype {got.dtype} != expected {want.dtype}"
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError:
        return f"{where}: {diff_summary(got, want, rtol, atol)}"
    return None


def clean_error(text: str) -> str:
    """ORT's exception text without its code prefix, kernel preamble and C++ source location."""
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^Non-zero status code returned while running .*? Status Message: ", "", text,
                  flags=re.S)
    text = re.sub(r"/onnxruntime_src/\S+:\d+ .*?\) ", "", text)
    return text.strip()


def claim_reason(report_path: Path) -> str | None:
    """The EP's declines as `Op: reason` (distinct, in order), or None if it declined nothing."""
    if not report_path.is_file() or not report_path.stat().st_size:
        return None
    declined = json.loads(report_path.read_text()).get("declined", [])
    reasons = dict.fromkeys(f"{d['op']}: {d['reason']}" for d in declined)
    return "; ".join(reasons) or None


def cpu_placed_nodes(model_bytes: bytes) -> str:
    """Names the nodes ORT left on CPU though the EP declined none (a session with fallback on)."""
    import onnxruntime as ort
    import onnxruntime_ep_mlx as mlx
    so = mlx.session_options()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = ort.InferenceSession(model_bytes, so)
    left = [f"{n.op_type} {n.name!r}" for sub in sess.get_provider_graph_assignment_info()
            if sub.ep_name != mlx.EP_NAME for n in sub.get_nodes()]
    return "ORT placed on CPU without a decline: " + ", ".join(left)


def mlx_session(model_bytes: bytes, report_path: Path):
    import onnxruntime as ort
    import onnxruntime_ep_mlx as mlx
    so = mlx.session_options({"report_file": str(report_path)})
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return ort.InferenceSession(model_bytes, so)


def open_session(model_bytes: bytes, report_path: Path):
    """(session, None) or (None, (outcome, reason)) when session creation fails."""
    try:
        return mlx_session(model_bytes, report_path), None
    except Exception as e:  # noqa: BLE001 - any failure here is the case's outcome
        text = str(e)
        if "fallback to CPU EP has been explicitly disabled" not in text:
            return None, (ERROR, f"session: {clean_error(text)}")
        reason = claim_reason(report_path)
        if reason is None:
            try:
                reason = cpu_placed_nodes(model_bytes)
            except Exception as e2:  # noqa: BLE001
                reason = f"session with CPU fallback also failed: {clean_error(str(e2))}"
        return None, (FAILED_CLAIM, reason)


def is_raw(value) -> bool:
    """An ml_dtypes tensor (bfloat16, float8, int4...): ORT's numpy conversion does not know it."""
    return isinstance(value, np.ndarray) and value.dtype.type.__module__ == "ml_dtypes"


def sub_byte_bits(elem: int) -> int:
    return 2 if elem in (onnx.TensorProto.INT2, onnx.TensorProto.UINT2) else 4


def raw_ortvalue(array: np.ndarray):
    """An OrtValue typed by the array's ONNX element type: over the array's own memory, or for
    sub-byte types (ORT packs them, lowest bits first; ml_dtypes holds one value a byte) a new
    one holding the packed values (see unpack_ortvalue for reading one back)."""
    import ctypes
    import onnxruntime as ort
    elem = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    if elem in SUB_BYTE:
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem)
        bits = sub_byte_bits(elem)
        codes = np.ascontiguousarray(array).view(np.uint8).ravel() & ((1 << bits) - 1)
        per = 8 // bits
        codes = np.concatenate([codes, np.zeros((-codes.size) % per, np.uint8)]).reshape(-1, per)
        packed = np.zeros(codes.shape[0], np.uint8)
        for j in range(per):
            packed |= (codes[:, j] << (j * bits)).astype(np.uint8)
        if packed.size:
            ctypes.memmove(value.data_ptr(), packed.ctypes.data, value.tensor_size_in_bytes())
        return value
    bits = array.view(np.dtype(f"u{array.dtype.itemsize}"))
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, elem)


def unpack_ortvalue(value, like: np.ndarray) -> np.ndarray:
    """A sub-byte OrtValue's values as an array of like's dtype and shape."""
    import ctypes
    elem = onnx.helper.np_dtype_to_tensor_dtype(like.dtype)
    bits = sub_byte_bits(elem)
    n = value.tensor_size_in_bytes()
    packed = np.frombuffer(ctypes.string_at(value.data_ptr(), n), np.uint8) if n else \
        np.zeros(0, np.uint8)
    per = 8 // bits
    codes = np.stack([(packed >> (j * bits)) & ((1 << bits) - 1) for j in range(per)], axis=1)
    codes = codes.ravel()[:like.size].astype(np.uint8)
    signed = elem in (onnx.TensorProto.INT4, onnx.TensorProto.INT2)
    if signed:
        codes = np.where(codes >= (1 << (bits - 1)), codes.astype(np.int16) - (1 << bits),
                         codes).astype(np.int8)
        return codes.astype(like.dtype).reshape(like.shape)
    if elem == onnx.TensorProto.FLOAT4E2M1:
        return codes.view(like.dtype).reshape(like.shape)
    return codes.astype(like.dtype).reshape(like.shape)


def run_session(sess, feeds: dict, expected: list) -> list:
    """sess.run, or through an IOBinding when an input or output is a raw tensor: inputs are
    bound as typed OrtValues, such outputs into arrays preallocated with the expected shape."""
    if not any(map(is_raw, [*feeds.values(), *expected])):
        return sess.run(None, feeds)
    binding = sess.io_binding()
    for name, value in feeds.items():
        if is_raw(value):
            binding.bind_ortvalue_input(name, raw_ortvalue(value))
        else:
            binding.bind_cpu_input(name, value)
    raw_out, sub_out = {}, {}
    for i, out in enumerate(sess.get_outputs()):
        want = expected[i] if i < len(expected) else None
        if is_raw(want):
            raw_out[i] = np.empty(want.shape, want.dtype)
            value = raw_ortvalue(raw_out[i])
            if onnx.helper.np_dtype_to_tensor_dtype(want.dtype) in SUB_BYTE:
                sub_out[i] = value
            binding.bind_ortvalue_output(out.name, value)
        else:
            binding.bind_output(out.name)
    sess.run_with_iobinding(binding)
    values = binding.get_outputs()
    for i, value in sub_out.items():
        raw_out[i] = unpack_ortvalue(value, raw_out[i])
    return [raw_out[i] if i in raw_out else values[i].numpy() for i in range(len(values))]


def run_case(case: Case, tmp: Path) -> tuple[str, str]:
    """(outcome, reason) for one case; reason is '' when it passed."""
    try:
        model_bytes = Path(case.model).read_bytes()
        model = onnx.load_from_string(model_bytes)
        sets = data_sets(case, model)
    except Exception as e:  # noqa: BLE001
        return ERROR, f"loading the case: {e}"
    report_path = tmp / "report.json"
    report_path.unlink(missing_ok=True)
    sess, failure = open_session(model_bytes, report_path)
    if failure:
        return failure
    names = [o.name for o in sess.get_outputs()]
    for k, (feeds, expected) in enumerate(sets):
        try:
            got = run_session(sess, feeds, expected)
        except Exception as e:  # noqa: BLE001
            return ERROR, f"run (data set {k}): {clean_error(str(e))}"
        if len(got) < len(expected):
            return FAILED_NUMERIC, f"data set {k}: {len(got)} outputs, expected {len(expected)}"
        for i, want in enumerate(expected):
            why = mismatch(got[i], want, case.rtol, case.atol, f"data set {k} output {names[i]!r}")
            if why:
                return FAILED_NUMERIC, why
    return PASSED, ""


def worker_loop(conn) -> None:
    """Worker process: receive Case fields, send back (outcome, reason, seconds), until None."""
    sys.path.insert(0, str(ROOT / "python"))
    import onnxruntime as ort
    import onnxruntime_ep_mlx as mlx
    ort.set_default_logger_severity(4)  # the expected session failures would log as errors
    mlx.register_execution_provider_library()
    conn.send("ready")
    with tempfile.TemporaryDirectory(prefix="mlx-conformance-") as tmp:
        while (fields := conn.recv()) is not None:
            start = time.monotonic()
            outcome, reason = run_case(Case(**fields), Path(tmp))
            conn.send((outcome, reason, round(time.monotonic() - start, 3)))


# ---------------------------------------------------------------- the pool (parent process)

class Worker:
    """One worker process: starting (until it says it is ready), idle, or running `case`."""

    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_loop, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.ready, self.case, self.started, self.done = False, None, time.monotonic(), 0

    def submit(self, case: Case) -> None:
        self.case, self.started = case, time.monotonic()
        self.conn.send(dataclasses.asdict(case))

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def receive(self) -> tuple[str, str, float] | None:
        """The running case's (outcome, reason, seconds), a crash if the process died instead,
        or None for the start-up message."""
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            if not self.ready:
                raise RuntimeError(f"a worker process died while starting (exit code {code})")
            return CRASH, f"worker died (exit code {code}{signal_name(code)})", self.elapsed()
        if not self.ready:
            self.ready = True
            return None
        self.done += 1
        return tuple(message)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def signal_name(code: int | None) -> str:
    import signal
    if code is None or code >= 0:
        return ""
    try:
        return f", {signal.Signals(-code).name}"
    except ValueError:
        return ""


def run_cases(cases: list[Case], workers: int, timeout: float, on_result) -> dict:
    """{case name: (outcome, reason, seconds)}; on_result(case, outcome, reason) as each ends.
    The timeout counts from a case's hand-over to a ready worker; a worker that crashed or
    overran is replaced, as is one that has run TASKS_PER_WORKER cases."""
    ctx = mp.get_context("spawn")  # not fork: the parent has ORT and MLX (threads) loaded
    pending, results = deque(cases), {}
    pool = [Worker(ctx) for _ in range(min(workers, len(cases)))]

    def finish(w: Worker, result: tuple[str, str, float]) -> Worker | None:
        """Records the result; returns the worker to keep in the pool (maybe a new one)."""
        outcome, reason, _ = results[w.case.name] = result
        on_result(w.case, outcome, reason)
        w.case = None
        if outcome in (CRASH, TIMEOUT) or w.done >= TASKS_PER_WORKER:
            w.stop(kill=outcome == TIMEOUT)
            return Worker(ctx) if pending else None
        return w

    while pending or any(w.case for w in pool):
        for w in pool:
            if w.ready and w.case is None and pending:
                w.submit(pending.popleft())
        deadlines = [w.started + (timeout if w.ready else STARTUP_S) for w in pool
                     if w.case or not w.ready]
        wait_s = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        ready = mpc.wait([w.conn for w in pool] + [w.proc.sentinel for w in pool], wait_s)
        for i, w in enumerate(pool):
            if w.conn in ready or w.proc.sentinel in ready:
                result = w.receive()
                if result is not None:  # a case's result, or the death of an idle worker
                    pool[i] = finish(w, result) if w.case else None
            elif not w.ready and time.monotonic() - w.started >= STARTUP_S:
                raise RuntimeError(f"a worker process did not start within {STARTUP_S} s")
            elif w.case and time.monotonic() - w.started >= timeout:
                pool[i] = finish(w, (TIMEOUT, f"no result within {timeout:g} s", w.elapsed()))
        pool = [w for w in pool if w]
    for w in pool:
        w.stop()
    return results


# ---------------------------------------------------------------- expectations and reports

def one_line(text: str, limit: int = REASON_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_expectations(path: Path) -> dict[str, tuple[str, str]]:
    """{case: (outcome, reason)} from the TSV; '#' lines are comments."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, outcome, reason = (line.split("\t", 2) + ["", ""])[:3]
                rows[name] = (outcome, reason)
    return rows


def write_expectations(path: Path, rows: dict[str, tuple[str, str]]) -> None:
    header = ("# ONNX backend cases that do not pass on the MLX EP (conformance/run.py).\n"
              "# case<TAB>outcome<TAB>reason; a case not listed is expected to pass; outcome\n"
              "# 'skipped' means not run by design. Rewrite with: run.py --update-expectations\n")
    body = "".join(f"{name}\t{outcome}\t{one_line(reason)}\n"
                   for name, (outcome, reason) in sorted(rows.items()))
    path.write_text(header + body)


def updated_expectations(old: dict, results: dict) -> dict:
    """Rows for the cases run now replace theirs; rows of cases not run (filtered) stay."""
    rows = {n: r for n, r in old.items() if n not in results or r[0] == SKIPPED}
    for name, (outcome, reason, _) in results.items():
        if outcome not in (PASSED, SKIPPED):
            rows[name] = (outcome, reason)
    return rows


def operator_table(cases: list[Case], results: dict) -> str:
    counts: dict[str, Counter] = {}
    for case in cases:
        outcome = results[case.name][0]
        kind = outcome if outcome in (PASSED, SKIPPED) else "failed"
        counts.setdefault(case.op, Counter())[kind] += 1
    width = max([len("operator")] + [len(op) for op in counts])
    lines = [f"{'operator':<{width}}  passed  failed  skipped"]
    for op in sorted(counts, key=str.lower):
        c = counts[op]
        lines.append(f"{op:<{width}}  {c[PASSED]:>6}  {c['failed']:>6}  {c[SKIPPED]:>7}")
    return "\n".join(lines)


def write_json(path: str, cases: list[Case], results: dict, summary: dict) -> None:
    rows = [{**dataclasses.asdict(c), "outcome": results[c.name][0],
             "reason": results[c.name][1], "seconds": results[c.name][2]} for c in cases]
    Path(path).write_text(json.dumps({"summary": summary, "cases": rows}, indent=1) + "\n")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].splitlines()[0])
    p.add_argument("--filter", metavar="REGEX",
                   help="run only cases whose name (or suite/name) matches (re.search)")
    p.add_argument("--json", metavar="PATH", help="write every case's result here")
    p.add_argument("--update-expectations", action="store_true",
                   help="rewrite the expectations file from these results")
    p.add_argument("--expectations", type=Path, default=EXPECTATIONS)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    p.add_argument("-v", "--verbose", action="store_true", help="print each case that fails")
    return p.parse_args(argv)


# onnx 1.22 ships cases stamped with opset 27, one past the newest opset ONNX Runtime 1.31 calls
# released; ORT loads them only with this switch (it refuses them otherwise, before any EP is
# asked). Set before any worker starts so every session sees it.
os.environ.setdefault("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")


def check_library() -> str | None:
    """Why the EP cannot be loaded (every case would fail the same way), or None. A relative
    $ONNXRUNTIME_EP_MLX_LIBRARY is made absolute first: ORT would resolve it against its own
    folder."""
    lib = os.environ.get("ONNXRUNTIME_EP_MLX_LIBRARY")
    if lib:
        os.environ["ONNXRUNTIME_EP_MLX_LIBRARY"] = os.path.abspath(lib)
    sys.path.insert(0, str(ROOT / "python"))
    try:
        import onnxruntime_ep_mlx as mlx
        return None if mlx.ep_devices() else f"{mlx.EP_NAME} offers no device"
    except Exception as e:  # noqa: BLE001
        return f"cannot load the MLX EP: {e}"


def progress(total: int, verbose: bool):
    done = [0]

    def on_result(case: Case, outcome: str, reason: str) -> None:
        done[0] += 1
        if verbose and outcome != PASSED:
            print(f"{case.name}: {outcome}: {one_line(reason, 200)}", file=sys.stderr)
        elif outcome in (CRASH, TIMEOUT):
            print(f"{case.name}: {outcome}: {reason}", file=sys.stderr)
        if done[0] % 250 == 0 or done[0] == total:
            print(f"[{done[0]}/{total}]", file=sys.stderr, flush=True)
    return on_result


def verdict(results: dict, expected: dict) -> tuple[list[str], list[str]]:
    """(regressions: not passing and not listed, newly passing: passing but listed)."""
    regressions = sorted(n for n, r in results.items()
                         if r[0] not in (PASSED, SKIPPED) and n not in expected)
    newly = sorted(n for n, r in results.items() if r[0] == PASSED and n in expected)
    return regressions, newly


def summary(results: dict, regressions: list, newly: list, wall: float) -> dict:
    by_outcome = Counter(r[0] for r in results.values())
    passed, skipped = by_outcome[PASSED], by_outcome[SKIPPED]
    return {"passed": passed, "failed": len(results) - passed - skipped, "skipped": skipped,
            "by_outcome": dict(sorted(by_outcome.items())), "regressions": regressions,
            "unexpectedly_passing": newly, "wall_s": round(wall, 1)}


def print_report(cases: list[Case], results: dict, s: dict, workers: int) -> None:
    print(operator_table(cases, results))
    print()
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in s["by_outcome"].items()))
    for name in s["unexpectedly_passing"]:
        print(f"unexpectedly passing — update expectations: {name}")
    for name in s["regressions"]:
        print(f"REGRESSION: {name}: {results[name][0]}: {one_line(results[name][1], 200)}")
    print(f"wall time {s['wall_s']:.1f} s with {workers} worker(s)")


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = check_library()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    start = time.monotonic()
    cases = discover(args.filter)
    expected = read_expectations(args.expectations)
    skipped = {c.name: (SKIPPED, expected[c.name][1], 0.0)
               for c in cases if expected.get(c.name, ("",))[0] == SKIPPED}
    to_run = [c for c in cases if c.name not in skipped]
    try:
        results = {**skipped, **run_cases(to_run, args.workers, args.timeout,
                                          progress(len(to_run), args.verbose))}
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 2
    regressions, newly = verdict(results, expected)
    s = summary(results, regressions, newly, time.monotonic() - start)
    print_report(cases, results, s, args.workers)
    if args.update_expectations:
        write_expectations(args.expectations, updated_expectations(expected, results))
        print(f"wrote {args.expectations}")
    if args.json:
        write_json(args.json, cases, results, s)
    print(f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped")
    return 1 if regressions and not args.update_expectations else 0


if __name__ == "__main__":
    sys.exit(main())
