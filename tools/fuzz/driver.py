"""Runs cases through worker processes and turns their lines into verdicts.

A worker that dies (a signal) or goes silent past the timeout (a hang) is charged to the case and
mode it had begun; a fresh worker then picks up that case's remaining modes and goes on.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import known

ROOT = Path(__file__).resolve().parents[2]
MODES = ("compiled", "keyed", "eager")
FAILS = ("crash", "hang", "mismatch", "invalid_accepted", "ep_error")


def worker_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("ONNXRUNTIME_EP_MLX_LIBRARY", str(ROOT / "build" / "libonnxruntime_ep_mlx.so"))
    env.setdefault("OMP_NUM_THREADS", "1")
    # compiled mode should stay compiled: no timing trial that could move a group to eager
    env["ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL"] = "1"
    for k in ("ONNXRUNTIME_EP_MLX_NO_SHAPELESS", "ONNXRUNTIME_EP_MLX_NO_COMPILE"):
        env.pop(k, None)
    return env


class Worker:
    def __init__(self, sel, cpu=None, quiet=True):
        env = worker_env()
        if cpu is not None:
            env["FUZZ_CPU"] = str(cpu)
        self.cpu = cpu
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(Path(__file__).with_name("worker.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None, env=env,
            start_new_session=True, text=True, bufsize=1)
        self.sel = sel
        self.buf = ""
        self.job = None       # the job it runs
        self.begun = None     # the step it began last
        self.since = time.monotonic()
        sel.register(self.proc.stdout, selectors.EVENT_READ, self)

    def send(self, job):
        self.job, self.begun, self.since = job, None, time.monotonic()
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.close()

    def close(self):
        try:
            self.sel.unregister(self.proc.stdout)
        except (KeyError, ValueError):
            pass
        self.proc.wait()


def run_jobs(jobs, workers=2, timeout=60.0, on_result=None, pin_cpus=True):
    """jobs: [{"id", "case", "modes"}]. Returns {id: {"cpu": line, mode: result}}."""
    results = {j["id"]: {} for j in jobs}
    pending = list(reversed(jobs))
    sel = selectors.DefaultSelector()
    cpus = sorted(os.sched_getaffinity(0))
    pin = pin_cpus and len(cpus) > 1
    pool = [Worker(sel, cpus[i % len(cpus)] if pin else None)
            for i in range(min(workers, len(jobs)))]
    for w in pool:
        if pending:
            w.send(pending.pop())

    def record(job_id, res):
        results[job_id][res["mode"]] = res
        if on_result:
            on_result(job_id, res)

    def restart(w, status, detail):
        """Charge the begun step to the case, then go on with its remaining modes."""
        job = w.job
        step = w.begun or (job["modes"][0] if job["modes"] else "cpu")
        pool.remove(w)
        nw = Worker(sel, w.cpu)
        pool.append(nw)
        if step == "cpu":
            results[job["id"]]["cpu"] = {"mode": "cpu", "status": "error", "kind": "crash",
                                         "detail": detail}
            rest = dict(job, cpu=False)
        else:
            record(job["id"], {"id": job["id"], "mode": step, "status": status, "detail": detail,
                               "cpu_crashed": not job.get("cpu", True)})
            done = [m for m in job["modes"] if m in results[job["id"]]]
            rest = dict(job, modes=[m for m in job["modes"] if m not in done])
        if rest["modes"]:
            nw.send(rest)
        elif pending:
            nw.send(pending.pop())
        else:
            nw.job = None

    while any(w.job for w in pool):
        events = sel.select(timeout=1.0)
        for key, _ in events:
            w = key.data
            if w not in pool:
                continue
            data = os.read(w.proc.stdout.fileno(), 1 << 16).decode(errors="replace")
            if not data:  # the worker died
                w.close()
                rc = w.proc.returncode
                sig = -rc if rc and rc < 0 else None
                detail = (f"killed by {signal.Signals(sig).name}" if sig else f"exited with {rc}")
                if w.job:
                    restart(w, "crash", detail)
                else:
                    pool.remove(w)
                continue
            w.buf += data
            while "\n" in w.buf:
                line, w.buf = w.buf.split("\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                w.since = time.monotonic()
                if "begin" in msg:
                    w.begun = msg["begin"]
                elif msg.get("done"):
                    w.job, w.begun = None, None
                    if pending:
                        w.send(pending.pop())
                elif msg.get("mode") == "cpu":
                    results[msg["id"]]["cpu"] = msg
                else:
                    record(msg["id"], msg)
        now = time.monotonic()
        for w in list(pool):
            if w.job and now - w.since > timeout:
                w.kill()
                restart(w, "hang", f"no answer in {timeout:.0f} s")
    for w in pool:
        w.proc.stdin.close()
        w.close()
    return results


def verdict(case, res_by_mode):
    """Per mode: the result with status refined by the known lists; returns {mode: result}."""
    cpu = res_by_mode.get("cpu", {})
    out = {}
    for mode in MODES:
        res = res_by_mode.get(mode)
        if res is None:
            continue
        res = dict(res)
        if cpu.get("kind") == "crash":
            res["cpu_crashed"] = True
            if res["status"] in ("no_oracle", "both_error", "ep_error"):
                res["status"] = "no_oracle"
        if res["status"] in FAILS:
            why = known.oracle_exception(case, res)
            if why:
                res["status"], res["oracle"] = "oracle", why
            else:
                res["known"] = known.known_issue(case, res)
        out[mode] = res
    return out
