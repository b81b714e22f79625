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

With --before OTHER/aperture (an older build, say) each case runs with both binaries in
turn, alternating which goes first, and the table gives their figures side by side. RSS is
broken down from /proc/PID/smaps: BPF maps (ring buffers the kernel allocated, counted in
RSS once mapped, a ring's data twice), anonymous memory (heaps, arenas, stacks) and files.

usage: bench/memory.py --aperture BUILD/aperture --workloads DIR [--seconds S]
                       [--before OTHER/aperture] [--counts 1,20,200]"""
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


def rss_breakdown_kb(pid):
    """pid's RSS by kind of mapping: BPF maps (ring buffers the kernel allocated, counted in
    RSS as soon as they are mapped, twice for a ring buffer's data, which is mapped twice),
    anonymous memory (heap, malloc arenas, thread stacks), and files (libraries, ELF and
    debug files read for symbols)."""
    kb = {"bpf": 0, "anon": 0, "file": 0}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if "-" in line.split(None, 1)[0] and not line[0].isupper():
                fields = line.split()
                name = fields[5] if len(fields) > 5 else ""
                kind = ("bpf" if name == "anon_inode:bpf-map" else
                        "file" if name.startswith("/") else "anon")
            elif line.startswith("Rss:"):
                kb[kind] += int(line.split()[1])
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
            "drops": int(st.get("drops", 0)), "dwarf_samples": int(st.get("dwarf_samples", 0)),
            "rss_kinds_kb": rss_breakdown_kb(d.pid),
            "memory_mb": int(open(d.path("config", "memory_mb")).read()),
        }
        kill_all(procs)
        write(d.path("config", "retain_exited_s"), "0")
        wait_until(lambda: d.status()["targets_exited"] == "0" and
                   d.status()["store_bytes"] == "0", 15, step=0.2)
        time.sleep(1)
        out["rss_after_kb"] = d.rss_kb()
        out["rss_after_kinds_kb"] = rss_breakdown_kb(d.pid)
        return out
    finally:
        kill_all(procs)
        d.stop()


def mb(kb):
    return f"{kb / 1024:.1f}"


# The table's columns after targets and stacks: (heading, figure of one run).
COLUMNS = [
    ("samples (dwarf, dropped)", lambda r: f"{r['samples']} ({r.get('dwarf_samples', '?')}, "
                                           f"{r.get('drops', '?')})"),
    ("daemon CPU", lambda r: f"{r['cpu_pct']:.2f} %"),
    ("RSS end", lambda r: f"{mb(r['rss_kb'])} MB"),
    ("BPF maps / anon / files", lambda r: " / ".join(mb(r["rss_kinds_kb"][k])
                                                     for k in ("bpf", "anon", "file"))),
    ("peak RSS", lambda r: f"{mb(r['hwm_kb'])} MB"),
    ("store", lambda r: f"{r['store_bytes'] / 2**20:.1f} MB"),
    ("RSS after drop (fresh)", lambda r: f"{mb(r['rss_after_kb'])} MB ({mb(r['fresh_kb'])})"),
]


def table(rows):
    """One line per case; with two binaries, theirs side by side (before -> after)."""
    labels = list(dict.fromkeys(r["binary"] for r in rows))
    cases = list(dict.fromkeys((r["targets"], r["workload"]) for r in rows))
    by = {(r["binary"], r["targets"], r["workload"]): r for r in rows}
    lines = [f"Figures: {' -> '.join(labels)}", "",
             "| targets | stacks | " + " | ".join(h for h, _ in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for n, w in cases:
        kind = "few (spin)" if w == "spin" else "ever-new (paths)"
        runs = [by[(b, n, w)] for b in labels if (b, n, w) in by]
        lines.append(f"| {n} | {kind} | " +
                     " | ".join(" -> ".join(f(r) for r in runs) for _, f in COLUMNS) + " |")
    last = [r for r in rows if r["binary"] == labels[-1]]
    twenty = [r for r in last if r["targets"] == 20 and r["workload"] == "spin"]
    peak = max(r["hwm_kb"] for r in last) / 1024
    lines.append("")
    lines.append(f"Peak RSS of every case ({labels[-1]}): {peak:.1f} MB against the "
                 f"OpenTelemetry eBPF profiler's published ceiling of {OTEL_CEILING_MB} MB.")
    if twenty:
        lines.append(f"20 ordinary targets ({labels[-1]}): {mb(twenty[0]['rss_kb'])} MB at the "
                     f"end, {mb(twenty[0]['hwm_kb'])} MB peak, against our goal of "
                     f"{GOAL_MB_20} MB.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", required=True)
    ap.add_argument("--workloads", required=True, help="directory holding spin and paths")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--counts", default="1,20,200")
    ap.add_argument("--before", help="another aperture binary, run beside --aperture")
    args = ap.parse_args()
    binaries = [("before", args.before), ("after", args.aperture)] if args.before else \
        [("aperture", args.aperture)]
    rows = []
    for i, (n, w) in enumerate((n, w) for n in map(int, args.counts.split(","))
                               for w in ("spin", "paths")):
        # Alternating which goes first, so a drift of the machine lands on both alike.
        for label, binary in (binaries if i % 2 == 0 else binaries[::-1]):
            row = one_case(binary, os.path.join(args.workloads, w), n, args.seconds)
            row["binary"] = label
            rows.append(row)
            print(json.dumps(row), flush=True)
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
