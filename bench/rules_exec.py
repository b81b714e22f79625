#!/usr/bin/python3
"""Rules and new processes: the exec watch (a BPF program on the exec and fork tracepoints)
against the /proc poll it replaces (APERTURE_RULES_POLL=1), one daemon at a time, the two
taking turns round by round (the order flips each round).

    sudo bench/rules_exec.py [--aperture build/aperture] [--rounds 3] [--rate 200]

- exec-to-enabled: a program a rule (`exe=PATH enable`) names is started; the time from just
  before the spawn to its status first saying `enabled` (read in a loop, every 1 ms). Includes
  the fork and exec; median and p99 over every trial of the mode.
- daemon CPU at an exec storm: --rate execs per second of /bin/true (posix_spawn, reaped at
  once) for --seconds, with the same rule in place (nothing matches /bin/true: the common
  case of a node whose rules name a few services); the daemon's on-CPU time (schedstat of all
  its threads) per second, beside the same with no execs (idle).
Results go to bench/results/rules-exec-<date>.{txt,json}."""
import argparse
import json
import random
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, read_text, task_cpu_s  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("watch", "poll")


def start_daemon(binary, mode):
    if mode == "poll":
        os.environ["APERTURE_RULES_POLL"] = "1"
    try:
        return Daemon(binary)
    finally:
        os.environ.pop("APERTURE_RULES_POLL", None)


def latency_s(d, program):
    time.sleep(random.random())  # a random phase against the poll's second
    t0 = time.monotonic()
    pid = os.posix_spawn(program, [program, "5"], os.environ)
    try:
        while True:
            try:
                text = read_text(d.path("targets", str(pid), "status"))
                if "\nstate: enabled\n" in "\n" + text:
                    return time.monotonic() - t0
            except OSError:
                pass
            if time.monotonic() - t0 > 5:
                return float("inf")
            time.sleep(0.001)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def cpu_per_s(d, seconds, rate):
    """The daemon's CPU ms per second over seconds, spawning rate /bin/true per second."""
    spawned, c0, t0 = 0, task_cpu_s(d.pid), time.monotonic()
    while (now := time.monotonic()) - t0 < seconds:
        if rate and spawned < (now - t0) * rate:
            pid = os.posix_spawn("/bin/true", ["/bin/true"], os.environ)
            os.waitpid(pid, 0)
            spawned += 1
        else:
            time.sleep(0.0005)
    return 1e3 * (task_cpu_s(d.pid) - c0) / (time.monotonic() - t0), spawned


def one_round(binary, mode, program, trials, seconds, rate):
    d = start_daemon(binary, mode)
    try:
        with open(d.path("config", "rules"), "w") as f:
            f.write(f"exe={program} enable\n")
        how = d.status()["rules_new_processes"]
        lat = [latency_s(d, program) for _ in range(trials)]
        time.sleep(1.1)  # the enables' first drains out of the way
        idle, _ = cpu_per_s(d, seconds, 0)
        storm, spawned = cpu_per_s(d, seconds, rate)
        st = d.status()
        return {"mode": mode, "how": how, "latency_s": lat, "idle_cpu_ms_s": idle,
                "storm_cpu_ms_s": storm, "execs_s": spawned / seconds,
                "exec_events": int(st.get("rules_exec_events", 0)),
                "exec_lost": int(st.get("rules_exec_lost", 0)),
                "passes": int(st["rules_passes"])}
    finally:
        d.stop()


def p99(xs):
    xs = sorted(xs)
    return xs[int(0.99 * (len(xs) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", default=os.path.join(HERE, "..", "build", "aperture"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=10, help="latency trials per round")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rate", type=int, default=200, help="execs per second of the storm")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="aperture-rules-bench-")
    program = os.path.join(tmp, "sleep")
    shutil.copy("/bin/sleep", program)
    runs = []
    try:
        for r in range(args.rounds):
            for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                runs.append(one_round(os.path.abspath(args.aperture), mode, program,
                                      args.trials, args.seconds, args.rate))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for mode in MODES:
        rs = [r for r in runs if r["mode"] == mode]
        lat = [x for r in rs for x in r["latency_s"]]
        summary[mode] = {
            "how": rs[0]["how"], "trials": len(lat),
            "latency_median_ms": 1e3 * statistics.median(lat), "latency_p99_ms": 1e3 * p99(lat),
            "idle_cpu_ms_s": statistics.median(r["idle_cpu_ms_s"] for r in rs),
            "storm_cpu_ms_s": statistics.median(r["storm_cpu_ms_s"] for r in rs),
            "execs_s": statistics.median(r["execs_s"] for r in rs),
            "exec_lost": sum(r["exec_lost"] for r in rs)}
    w, p = summary["watch"], summary["poll"]
    lines = [f"rules: a new process enabled at its exec (watch) or by the 1 s /proc poll; "
             f"{args.rounds} rounds, alternating",
             f"{'':22} {'watch':>10} {'poll':>10} {'watch/poll':>11}",
             f"{'exec->enabled median':22} {w['latency_median_ms']:8.1f}ms "
             f"{p['latency_median_ms']:8.1f}ms {w['latency_median_ms'] / p['latency_median_ms']:11.3f}",
             f"{'exec->enabled p99':22} {w['latency_p99_ms']:8.1f}ms {p['latency_p99_ms']:8.1f}ms "
             f"{w['latency_p99_ms'] / p['latency_p99_ms']:11.3f}",
             f"{'daemon CPU, idle':22} {w['idle_cpu_ms_s']:6.2f}ms/s {p['idle_cpu_ms_s']:6.2f}ms/s "
             f"{w['idle_cpu_ms_s'] / max(p['idle_cpu_ms_s'], 1e-9):11.2f}",
             f"{'daemon CPU, ' + str(round(w['execs_s'])) + ' exec/s':22} "
             f"{w['storm_cpu_ms_s']:6.2f}ms/s {p['storm_cpu_ms_s']:6.2f}ms/s "
             f"{w['storm_cpu_ms_s'] / max(p['storm_cpu_ms_s'], 1e-9):11.2f}",
             f"events lost by the watch's ring: {w['exec_lost']}",
             f"watch: {w['how']}", f"poll: {p['how']}"]
    text = "\n".join(lines)
    print(text)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    with open(os.path.join(HERE, "results", f"rules-exec-{stamp}.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(HERE, "results", f"rules-exec-{stamp}.json"), "w") as f:
        json.dump({"summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
