#!/usr/bin/python3
"""Latency of `cat enable` of one target while 200 others are disabled, one after another.

    sudo bench/disable_latency.py [--aperture build/aperture] [--targets 200]

A disable drains the target's last data, which waits for the kernel (an RCU grace period per
map swapped); it used to hold the registry's lock meanwhile, and every reader of any target
waited (issue 15: 56 ms, at most 119 ms, for `cat enable`; 13.4 s to disable 200 targets).
For the collectors a bare enable gets (cpu) and for every collector: the time to disable them
all, the median disable, and the reader's latency (median, p99, max) meanwhile. Results go to
bench/results/disable-<date>.{txt,json}."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def run(daemon, n, collectors):
    with open(daemon.path("config", "collectors"), "w") as f:
        f.write(collectors)
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(n + 1)]
    reader, targets = procs[0].pid, procs[1:]
    try:
        for p in targets:
            daemon.write_enable(p.pid)
        time.sleep(1.5)
        latencies, disables, done = [], [], threading.Event()

        def read_enable():
            path = daemon.path("targets", str(reader), "enable")
            while not done.is_set():
                t = time.monotonic()
                with open(path) as f:
                    f.read()
                latencies.append(time.monotonic() - t)
        thread = threading.Thread(target=read_enable)
        thread.start()
        t0 = time.monotonic()
        for p in targets:
            disables.append(daemon.write_enable(p.pid, "0"))
        total = time.monotonic() - t0
        done.set()
        thread.join()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    latencies.sort()
    return {"collectors": collectors, "targets": n, "disable_all_s": total,
            "disable_median_ms": statistics.median(disables) * 1e3,
            "read_median_ms": statistics.median(latencies) * 1e3,
            "read_p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1e3,
            "read_max_ms": latencies[-1] * 1e3, "reads": len(latencies)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", default=os.path.join(HERE, "..", "build", "aperture"))
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--configs", default="cpu,cpu offcpu syscalls locks",
                    help="config/collectors values to time, comma-separated (\"cpu,cpu "
                         "offcpu,cpu syscalls,cpu locks\": what each collector adds)")
    args = ap.parse_args()
    daemon = Daemon(os.path.abspath(args.aperture))
    try:
        results = [run(daemon, args.targets, c) for c in args.configs.split(",")]
    finally:
        daemon.stop()
    lines = [f"`cat enable` of one target while {args.targets} others are disabled in turn",
             f"{'collectors':28} {'all disabled':>12} {'one disable':>12} "
             f"{'cat enable: median':>19} {'p99':>8} {'max':>8}"]
    for r in results:
        lines.append(f"{r['collectors']:28} {r['disable_all_s']:11.2f}s "
                     f"{r['disable_median_ms']:10.1f}ms {r['read_median_ms']:17.2f}ms "
                     f"{r['read_p99_ms']:6.2f}ms {r['read_max_ms']:6.2f}ms")
    text = "\n".join(lines)
    print(text)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    with open(os.path.join(HERE, "results", f"disable-{stamp}.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(HERE, "results", f"disable-{stamp}.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
