"""Differential fuzzer CLI (`make fuzz`).

    python tools/fuzz/run.py --seed S --cases N [--workers K] [--out DIR] [--timeout T]
    python tools/fuzz/run.py --replay build/fuzz/<tag>/case.json

Generates N cases from seed S (case i is a function of (S, i) alone), runs each on ORT's CPU
provider and on the MLX EP in three modes, prints a summary, writes a minimised reproducer for
every failure signature under DIR, and exits 1 when any case failed.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz import case as C  # noqa: E402
from fuzz import driver, gen, minimize, registry  # noqa: E402


def _generate_block(reg, seed, indices, conn):
    conn.send([gen.generate(reg, seed, i) for i in indices])
    conn.close()


def _generated(reg, seed, indices):
    """Cases for `indices`, generated in a forked child: ONNX's shape inference, which the
    generator runs, aborts the process on some graphs (a failed std::clamp assertion in its
    C++; seen on seed 600, case 728). None when the child died."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_generate_block, args=(reg, seed, indices, send))
    child.start()
    send.close()
    try:
        got = receive.recv()
    except EOFError:
        got = None
    child.join()
    return got


def make_cases(reg, seed, n, start=0, block=500):
    """Cases [start, start+n) of `seed`. A block whose generation died is generated again one
    case at a time, and a case that kills the generator is left out (and said so)."""
    cases = []
    for b in range(start, start + n, block):
        indices = list(range(b, min(b + block, start + n)))
        got = _generated(reg, seed, indices)
        if got is None:
            got = []
            for i in indices:
                one = _generated(reg, seed, [i])
                if one is None:
                    print(f"seed {seed} case {i}: ONNX shape inference aborted; left out",
                          file=sys.stderr)
                got += one or []
        cases += [c for c in got if c]
    return cases


def fuzz(seed, n, workers=2, timeout=60.0, start=0, modes=driver.MODES, progress=None,
         dump=None):
    """Runs cases [start, start+n) of `seed`. Returns (reg, cases, {(seed, index): verdicts})."""
    reg = registry.Registry(registry.load(dump))
    cases = make_cases(reg, seed, n, start)
    jobs = [{"id": c["index"], "case": c, "modes": list(modes)} for c in cases]
    raw = driver.run_jobs(jobs, workers=workers, timeout=timeout, on_result=progress)
    verdicts = {}
    for c in cases:
        v = driver.verdict(c, raw[c["index"]])
        v["cpu"] = raw[c["index"]].get("cpu", {})
        verdicts[key(c)] = v
    return reg, cases, verdicts


def key(c):
    return (c["seed"], c["index"])


def failures(cases, verdicts, skip_known=False):
    out = []
    for c in cases:
        for mode in driver.MODES:
            v = verdicts[key(c)].get(mode)
            if v and v["status"] in driver.FAILS and not (skip_known and v.get("known")):
                out.append((c, mode, v))
    return out


def summary(reg, seeds, cases, verdicts, elapsed):
    lines = []
    per_mode = {m: collections.Counter() for m in driver.MODES}
    cpu = collections.Counter()
    claimed = nodes = all_on_mlx = any_on_mlx = 0
    covered = collections.Counter()
    for c in cases:
        v = verdicts[key(c)]
        cpu[v["cpu"].get("kind", v["cpu"].get("status", "?"))] += 1
        for m in driver.MODES:
            if m in v:
                per_mode[m][v[m]["status"]] += 1
        r = v.get("compiled", {})
        claimed += r.get("claimed", 0)
        nodes += r.get("nodes", 0)
        if r.get("nodes") and r.get("claimed") == r.get("nodes"):
            all_on_mlx += 1
        if r.get("claimed"):
            any_on_mlx += 1
        declined = {d[0] for d in r.get("declined", [])}
        for n in c["nodes"]:
            if n["op"] not in declined:
                covered[n["op"]] += 1
    claimed_ops = {op for d, op in reg.ops if d == "ai.onnx"}
    generated = set(gen.GENS)
    lines.append(f"seeds {seeds}: {len(cases)} cases in {elapsed:.0f} s "
                 f"(CPU oracle: {dict(cpu)})")
    for m in driver.MODES:
        lines.append(f"  {m:9s} " + ", ".join(f"{k} {n}" for k, n in sorted(per_mode[m].items())))
    fails = failures(cases, verdicts)
    by = collections.Counter(v["status"] for _, _, v in fails)
    lines.append(f"failures: {len(fails)} (crashes {by['crash']}, hangs {by['hang']}, wrong "
                 f"answers {by['mismatch']}, leftover-memory answers (CPU rejects the input) "
                 f"{by['invalid_accepted']}, EP errors on valid input {by['ep_error']}); "
                 f"of them known: {sum(1 for *_, v in fails if v.get('known'))}")
    lines.append(f"on MLX: {claimed}/{nodes} nodes claimed; {all_on_mlx}/{len(cases)} cases wholly"
                 f" on MLX, {any_on_mlx} with at least one node")
    lines.append(f"ops covered (claimed in some case): {len(covered)}/{len(claimed_ops)}")
    lines.append("not fuzzed (no generator): " + " ".join(sorted(claimed_ops - generated)))
    if gen.GEN_ERRORS:
        lines.append(f"generator errors (cases built without that node): {dict(gen.GEN_ERRORS)}")
    never = sorted(generated & claimed_ops - set(covered))
    if never:
        lines.append("generated but never claimed here: " + " ".join(never))
    return "\n".join(lines), fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, action="append",
                    help="run seed (repeatable; default 1)")
    ap.add_argument("--cases", type=int, default=200, help="cases per seed")
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case and mode")
    ap.add_argument("--out", default=str(driver.ROOT / "build" / "fuzz"))
    ap.add_argument("--minimize", type=int, default=12,
                    help="minimise at most this many failure signatures (0: none)")
    ap.add_argument("--skip-known", action="store_true",
                    help="failures matching known.KNOWN do not fail the run")
    ap.add_argument("--dump", help="registry_dump to read the registry from "
                    "(default build/registry_dump)")
    ap.add_argument("--replay", help="run one case.json and print its verdicts")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.replay:
        case = json.loads(Path(a.replay).read_text())
        raw = driver.run_jobs([{"id": 0, "case": case, "modes": list(driver.MODES)}],
                              timeout=a.timeout)[0]
        print(C.describe(case))
        print("cpu:", raw.get("cpu"))
        for m, v in driver.verdict(case, raw).items():
            print(f"{m}: {v}")
        return 0
    seeds = a.seed or [1]
    t0 = time.monotonic()
    cases, verdicts = [], {}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    reg = None

    count = [0, time.monotonic()]

    def progress(job_id, res):
        if res.get("mode") == driver.MODES[-1]:
            count[0] += 1
            if time.monotonic() - count[1] > 30:  # a sign of life on long runs
                count[1] = time.monotonic()
                print(f"  ... {count[0]} cases done, {time.monotonic() - t0:.0f} s",
                      file=sys.stderr, flush=True)
        if a.verbose and res.get("status") in driver.FAILS:
            print(f"  case {job_id} {res['mode']}: {res['status']} {res.get('detail') or ''}",
                  flush=True)

    for s in seeds:
        reg, cs, vs = fuzz(s, a.cases, a.workers, a.timeout, a.start, progress=progress,
                           dump=a.dump)
        cases += cs
        verdicts.update(vs)
    text, fails = summary(reg, seeds, cases, verdicts, time.monotonic() - t0)
    # one reproducer per signature (status, mode, op chain), minimised
    seen = {}
    repro_lines = []
    for c, mode, v in fails:
        sig = (v["status"], tuple(n["op"] for n in c["nodes"]))
        tag = f"{v['status']}-s{c['seed']}-c{c['index']}-{mode}"
        if sig in seen:
            continue
        small, res = c, v
        if len(seen) < a.minimize:
            small, r2 = minimize.minimize(reg, c, mode, v["status"], timeout=a.timeout)
            res = dict(r2, known=v.get("known")) if r2 else v
        seen[sig] = tag
        d, line = minimize.write_repro(out, small, mode, res, tag)
        repro_lines.append(f"  {d}: {line}")
    print(text)
    if repro_lines:
        print(f"reproducers ({len(repro_lines)} signatures) under {out}:")
        print("\n".join(repro_lines))
    (out / "summary.txt").write_text(text + "\n" + "\n".join(repro_lines) + "\n")
    counted = [f for f in fails if not (a.skip_known and f[2].get("known"))]
    return 1 if counted else 0


if __name__ == "__main__":
    sys.exit(main())
