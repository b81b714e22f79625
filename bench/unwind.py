#!/usr/bin/python3
"""Whole stacks without frame pointers: aperture (config/unwind auto) side by side with
`perf record --call-graph dwarf` and `perf record -g`.

1. Completeness: the share of samples whose stack reaches main, on workloads built as
   distributions build (tests/workloads: nofp, GCC -O2 -fomit-frame-pointer; templates, g++
   -O2; Debian's python3.11 with python3.11-dbg, whose main is one `jmp Py_BytesMain`).
2. Cost at 99 Hz on nofp: the target's slowdown (rounds per second and per CPU second of the
   target, against unprofiled runs taken in turn), and the profiler's CPU per sample: the
   daemon's from enable to one read of cpu.folded; perf's `record` plus the `perf script`
   that unwinds and names its samples (perf defers that work to report time).

usage: sudo bench/unwind.py --aperture build/aperture --workloads build/tests/workloads
Writes bench/results/unwind-<date>.{json,txt}.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, median, task_cpu_s  # noqa: E402

PY_LOOP = "def f(n):\n  return n if n < 2 else f(n - 1) + f(n - 2)\nwhile True: f(20)\n"


def workloads(wdir, seconds):
    """name -> (argv, the frame that means "reached main")."""
    return {
        "nofp (gcc -O2 -fomit-frame-pointer)": ([f"{wdir}/nofp", str(seconds)], "main"),
        "templates (g++ -O2)": ([f"{wdir}/templates", str(seconds)], "main"),
        "python3.11 (Debian, -dbg)": (["/usr/bin/python3.11", "-c", PY_LOOP], "Py_BytesMain"),
    }


def aperture_stacks(daemon, argv, seconds):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    time.sleep(0.2)
    daemon.write_enable(proc.pid)
    time.sleep(seconds)
    daemon.write_enable(proc.pid, "0")
    text = open(daemon.path("targets", str(proc.pid), "cpu.folded")).read()
    proc.kill()
    proc.wait()
    stacks = []
    for line in text.splitlines():
        frames, count = line.rsplit(" ", 1)
        stacks.append((frames.split(";"), int(count)))
    return stacks


def perf_script_stacks(data):
    """Samples of a perf.data as (frames, 1), frame names without offsets."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                         text=True).stdout
    stacks, cur = [], []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if cur:
                stacks.append((cur, 1))
            cur = []
            continue
        parts = line.split(None, 1)
        cur.append(parts[1].split("+0x")[0] if len(parts) > 1 else "[unknown]")
    return stacks


def perf_stacks(mode, argv, seconds, hz, tmp):
    data = os.path.join(tmp, "perf.data")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    time.sleep(0.2)
    callgraph = ["--call-graph", "dwarf"] if mode == "dwarf" else ["-g"]
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), *callgraph,
                    "-p", str(proc.pid), "-o", data, "--", "sleep", str(seconds)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.kill()
    proc.wait()
    return perf_script_stacks(data)


def reached(stacks, frame):
    total = sum(n for _, n in stacks)
    return sum(n for f, n in stacks if frame in f) / total if total else float("nan"), total


def completeness(args, tmp):
    rows = {}
    daemon = Daemon(args.aperture)
    try:
        daemon.set_hz(args.hz)
        for name, (argv, main) in workloads(args.workloads, args.seconds + 5).items():
            rows[name] = {
                "aperture": reached(aperture_stacks(daemon, argv, args.seconds), main),
                "perf --call-graph dwarf": reached(
                    perf_stacks("dwarf", argv, args.seconds, args.hz, tmp), main),
                "perf -g": reached(perf_stacks("fp", argv, args.seconds, args.hz, tmp), main),
            }
    finally:
        daemon.stop()
    return rows


def start(argv, env):
    """Starts the workload: (process, start time)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    return proc, t0


def finish(proc, t0):
    """Waits for the workload's end: (rounds, wall s, CPU s of the workload)."""
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = status
    rounds = int(out.split("rounds=")[1])
    return rounds, time.monotonic() - t0, ru.ru_utime + ru.ru_stime


def cost(args, tmp):
    env = dict(os.environ, NOFP_REPORT="1")
    argv = [f"{args.workloads}/nofp", str(args.cost_seconds)]
    runs = {"baseline": [], "aperture": [], "perf --call-graph dwarf": []}
    per_sample = {"aperture": [], "perf --call-graph dwarf": []}
    daemon = Daemon(args.aperture)
    try:
        daemon.set_hz(99)
        for rnd in range(args.pairs):
            order = list(runs)
            if rnd % 2:
                order.reverse()
            for cfg in order:
                proc, t0 = start(argv, env)
                if cfg == "aperture":
                    cpu0, s0 = daemon.cpu_s(), daemon.samples()
                    daemon.write_enable(proc.pid)
                    rounds, wall, cpu = finish(proc, t0)
                    time.sleep(1.2)  # the last drain
                    open(daemon.path("targets", str(proc.pid), "cpu.folded")).read()
                    n = daemon.samples() - s0
                    per_sample[cfg].append((daemon.cpu_s() - cpu0) / max(n, 1))
                elif cfg == "baseline":
                    rounds, wall, cpu = finish(proc, t0)
                else:
                    data = os.path.join(tmp, "perf.data")
                    rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F",
                                            "99", "--call-graph", "dwarf", "-p",
                                            str(proc.pid), "-o", data],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    rounds, wall, cpu = finish(proc, t0)
                    _, _, rec_ru = os.wait4(rec.pid, 0)
                    rec.returncode = 0
                    t = os.times()
                    n = len(perf_script_stacks(data))
                    t2 = os.times()
                    script_cpu = (t2.children_user - t.children_user +
                                  t2.children_system - t.children_system)
                    per_sample[cfg].append((rec_ru.ru_utime + rec_ru.ru_stime + script_cpu) /
                                           max(n, 1))
                runs[cfg].append((rounds / wall, rounds / cpu))
    finally:
        daemon.stop()
    base_wall = median([w for w, _ in runs["baseline"]])
    base_cpu = median([c for _, c in runs["baseline"]])
    out = {}
    for cfg in ("aperture", "perf --call-graph dwarf"):
        out[cfg] = {
            "slowdown_wall": base_wall / median([w for w, _ in runs[cfg]]),
            "slowdown_cpu": base_cpu / median([c for _, c in runs[cfg]]),
            "profiler_cpu_us_per_sample": 1e6 * median(per_sample[cfg]),
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aperture", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--hz", type=int, default=499, help="for completeness")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--cost-seconds", type=float, default=3)
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        comp = completeness(args, tmp)
        costs = cost(args, tmp)
    lines = [f"Share of samples reaching main ({args.hz} Hz, {args.seconds:g} s each)", ""]
    lines.append(f"{'workload':40} {'aperture':>16} {'perf dwarf':>16} {'perf -g':>16}")
    for name, row in comp.items():
        cells = [f"{v[0]:6.1%} of {v[1]:5d}" for v in row.values()]
        lines.append(f"{name:40} " + " ".join(f"{c:>16}" for c in cells))
    lines += ["", f"Cost at 99 Hz on nofp ({args.pairs} rounds of {args.cost_seconds:g} s, "
              "medians; slowdown = unprofiled rate / profiled rate)", ""]
    lines.append(f"{'profiler':26} {'slowdown wall':>14} {'slowdown cpu':>13} "
                 f"{'profiler CPU/sample':>20}")
    for cfg, r in costs.items():
        lines.append(f"{cfg:26} {r['slowdown_wall']:14.3f} {r['slowdown_cpu']:13.3f} "
                     f"{r['profiler_cpu_us_per_sample']:17.0f} us")
    text = "\n".join(lines) + "\n"
    print(text)
    stamp = time.strftime("%Y-%m-%dT%H%M%S", time.gmtime())
    res = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    with open(os.path.join(res, f"unwind-{stamp}.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(res, f"unwind-{stamp}.json"), "w") as f:
        json.dump({"completeness": {k: {p: {"share": v[0], "samples": v[1]}
                                        for p, v in row.items()} for k, row in comp.items()},
                   "cost_99hz": costs}, f, indent=1)


if __name__ == "__main__":
    main()
