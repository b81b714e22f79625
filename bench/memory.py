#!/usr/bin/python3
"""The daemon's memory and CPU with 1, 20 and 200 targets enabled, with few stacks (`spin`, a
fixed six-frame call tree) and with ever-new stacks (`paths`, 16,384 distinct call paths
visited in turn), against the OpenTelemetry eBPF profiler's published ceiling (250 MB) and
our goal (under 50 MB with 20 ordinary targets).

Each case gets a fresh daemon at 99 Hz and its default config/memory_mb. The targets are
CPU-bound and niced, so on a small machine they share its cores: the samples per second are
the cores' worth whatever the number of targets (the figures say how many there were). The
daemon's CPU is its threads' on-CPU time over the case's wall time. After each case the
targets are killed and dropped (retain_exited_s 0) and the RSS is read again: what the
daemon hands back. Cases run one after the other, few then many stacks for each count.

usage: bench/memory.py --aperture BUILD/aperture --workloads DIR [--seconds S]"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, kill_all, status_kb, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OTEL_CEILING_MB = 250
GOAL_MB_20 = 50


def bpf_map_rss_kb(pid):
    """RSS of pid's mappings of BPF maps: ring buffers the kernel allocated, counted in RSS
    (twice for a ring buffer's data, which is mapped twice) as soon as they are mapped."""
    kb, in_map = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if "-" in line.split(None, 1)[0] and not line[0].isupper():
                in_map = line.rstrip().endswith("anon_inode:bpf-map")
            elif in_map and line.startswith("Rss:"):
                kb += int(line.split()[1])
    return kb


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def one_case(binary, workload, ntargets, seconds):
    d = Daemon(binary)
    procs = []
    try:
        d.set_hz(99)
        fresh_kb = d.rss_kb()
        procs = [subprocess.Popen(["nice", "-n", "19", workload], stdout=subprocess.DEVNULL)
                 for _ in range(ntargets)]
        time.sleep(0.5)  # exec'd, so enable reads the workload's mappings
        for p in procs:
            d.write_enable(p.pid)
        cpu0, samples0, t0 = d.cpu_s(), d.samples(), time.monotonic()
        rss_at = {}
        while time.monotonic() - t0 < seconds:
            time.sleep(min(10, seconds - (time.monotonic() - t0)))
            rss_at[round(time.monotonic() - t0)] = d.rss_kb()
        wall = time.monotonic() - t0
        st = d.status()
        out = {
            "targets": ntargets, "workload": os.path.basename(workload), "seconds": wall,
            "samples": d.samples() - samples0, "cpu_pct": 100 * (d.cpu_s() - cpu0) / wall,
            "fresh_kb": fresh_kb, "rss_kb": d.rss_kb(), "hwm_kb": status_kb(d.pid, "VmHWM"),
            "store_bytes": int(st.get("store_bytes", 0)), "rss_over_time_kb": rss_at,
            "bpf_map_rss_kb": bpf_map_rss_kb(d.pid),
            "memory_mb": int(open(d.path("config", "memory_mb")).read()),
        }
        kill_all(procs)
        write(d.path("config", "retain_exited_s"), "0")
        wait_until(lambda: d.status()["targets_exited"] == "0" and
                   d.status()["store_bytes"] == "0", 15, step=0.2)
        time.sleep(1)
        out["rss_after_kb"] = d.rss_kb()
        return out
    finally:
        kill_all(procs)
        d.stop()


def table(rows):
    lines = ["| targets | stacks | samples | daemon CPU | RSS end | of which BPF maps | "
             "peak RSS | store | RSS after drop (fresh) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = "few (spin)" if r["workload"] == "spin" else "ever-new (paths)"
        lines.append(
            f"| {r['targets']} | {kind} | {r['samples']} | {r['cpu_pct']:.2f} % | "
            f"{r['rss_kb'] / 1024:.1f} MB | {r['bpf_map_rss_kb'] / 1024:.1f} MB | "
            f"{r['hwm_kb'] / 1024:.1f} MB | "
            f"{r['store_bytes'] / 2**20:.1f} MB | {r['rss_after_kb'] / 1024:.1f} MB "
            f"({r['fresh_kb'] / 1024:.1f}) |")
    twenty = [r for r in rows if r["targets"] == 20 and r["workload"] == "spin"]
    peak = max(r["hwm_kb"] for r in rows) / 1024
    lines.append("")
    lines.append(f"Peak RSS of every case: {peak:.1f} MB against the OpenTelemetry eBPF "
                 f"profiler's published ceiling of {OTEL_CEILING_MB} MB.")
    if twenty:
        lines.append(f"20 ordinary targets: {twenty[0]['hwm_kb'] / 1024:.1f} MB peak against "
                     f"our goal of {GOAL_MB_20} MB.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", required=True)
    ap.add_argument("--workloads", required=True, help="directory holding spin and paths")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--counts", default="1,20,200")
    args = ap.parse_args()
    rows = []
    for n in map(int, args.counts.split(",")):
        for w in ("spin", "paths"):
            rows.append(one_case(args.aperture, os.path.join(args.workloads, w), n,
                                 args.seconds))
            print(json.dumps(rows[-1]), flush=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    text = table(rows)
    print(text)
    base = os.path.join(HERE, "results", f"memory-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    with open(base + ".txt", "w") as f:
        f.write(f"{args.seconds:.0f} s per case\n\n{text}\n")


if __name__ == "__main__":
    main()
