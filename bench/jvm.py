#!/usr/bin/python3
"""The JVM collector's two figures, one run (needs root, a JDK, and build/aperture):

1. enable-to-first-deadlock-report: from `echo 1 > enable` on a JVM with a monitor and a
   ReentrantLock deadlock to the first non-empty threads/deadlocks, against `jstack <pid>`'s
   wall time; also a warm re-read of threads/deadlocks.
2. the agent's overhead on a Java throughput workload with every collector on (cpu sampling,
   threads/busy read once a second, allocation sampling, monitor contention, JIT tracking,
   the j.u.c lock-wait sampler):
   operations per 250 ms with the target disabled vs enabled, ROUNDS (default 2) rounds of 4
   phases of 5 s in ABBA order after 10 s of warm-up in one JVM, medians and a bootstrap 95 % interval of the difference; also the CPU the
   agent's own threads used (aperture-agent: requests and drains; aperture-juc: the sampler)
   as a share of one CPU, and one threads/busy read's time.

Writes bench/results/jvm-<date>.{json,txt}."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from common import Daemon, median, median_diff_ci, read_text, task_cpu_s, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
APERTURE = os.environ.get("APERTURE", os.path.join(TOP, "build", "aperture"))


def javac(out):
    srcs = [os.path.join(TOP, "tests", "workloads", "java", "Threads.java"),
            os.path.join(HERE, "workloads", "Throughput.java")]
    subprocess.run(["javac", "-d", out, *srcs], check=True)


def start_java(classes, main):
    p = subprocess.Popen(["java", "-cp", classes, main], stdout=subprocess.PIPE, text=True)
    return p


def deadlock_latency(d, classes):
    p = start_java(classes, "Threads")
    assert p.stdout.readline().strip() == "ready"
    deadlocks = d.path("targets", str(p.pid), "threads", "deadlocks")
    t0 = time.monotonic()
    d.write_enable(p.pid)
    assert wait_until(lambda: "Found 2 deadlocks." in read_text(deadlocks), 30, 0.005)
    first = time.monotonic() - t0
    t0 = time.monotonic()
    read_text(deadlocks)
    warm = time.monotonic() - t0
    t0 = time.monotonic()
    js = subprocess.run(["jstack", str(p.pid)], capture_output=True, text=True).stdout
    jstack = time.monotonic() - t0
    assert "Found 2 deadlocks." in js
    attach_ms = int(d.status(p.pid).get("jvm", "0") and
                    read_text(d.path("targets", str(p.pid), "jvm", "status"))
                    .split("attach_ms: ")[1].split()[0])
    p.kill()
    p.wait()
    return {"enable_to_first_report_ms": first * 1e3, "attach_ms": attach_ms,
            "warm_reread_ms": warm * 1e3, "jstack_ms": jstack * 1e3}


def agent_cpu_s(pid):
    """CPU seconds of the agent's threads in pid, by thread name (schedstat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            if comm.startswith("aperture-"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    out[comm] = out.get(comm, 0) + int(f.read().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def overhead(d, classes, rounds, phase_s=5, warmup_s=10):
    p = start_java(classes, "Throughput")
    counts, lock = [], threading.Lock()

    def reader():
        for line in p.stdout:
            with lock:
                counts.append((time.monotonic(), int(line)))
    threading.Thread(target=reader, daemon=True).start()
    time.sleep(warmup_s)
    phases = []
    per_cpu = {False: [], True: []}
    agent_share, busy_ms = {}, []
    # ABBA order: a JVM still warming up favours neither side.
    for on in (False, True, True, False) * rounds:
        if on:
            d.write_enable(p.pid)
            wait_until(lambda: "alloc: on" in read_text(
                d.path("targets", str(p.pid), "jvm", "status")), 20)
            status = read_text(d.path("targets", str(p.pid), "jvm", "status"))
        t0, cpu0, agent0 = time.monotonic(), task_cpu_s(p.pid), agent_cpu_s(p.pid)
        # busy threads once a second, as `watch cat threads/busy` would read them
        while time.monotonic() - t0 < phase_s:
            if on:
                r0 = time.monotonic()
                read_text(d.path("targets", str(p.pid), "threads", "busy"))
                busy_ms.append((time.monotonic() - r0) * 1e3)
            time.sleep(1)
        t1, cpu1, agent1 = time.monotonic(), task_cpu_s(p.pid), agent_cpu_s(p.pid)
        if on:
            for name, s in agent1.items():
                agent_share.setdefault(name, []).append(
                    100 * (s - agent0.get(name, 0)) / (t1 - t0))
        if on:
            d.write_enable(p.pid, "0")
        with lock:
            phases.append((on, [c for t, c in counts if t0 + 0.5 < t <= t1]))
            # Work per CPU second of the JVM: steadier than throughput on a shared machine.
            per_cpu[on].append(sum(c for t, c in counts if t0 < t <= t1) / (cpu1 - cpu0))
    # One full dump (locks included: HotSpot walks the heap for j.u.c. owners), timed.
    d.write_enable(p.pid)
    wait_until(lambda: "state: attached" in read_text(
        d.path("targets", str(p.pid), "jvm", "status")), 20)
    t0 = time.monotonic()
    read_text(d.path("targets", str(p.pid), "threads", "dump"))
    dump_ms = (time.monotonic() - t0) * 1e3
    p.kill()
    p.wait()
    off = [c for on, cs in phases if not on for c in cs]
    on = [c for on, cs in phases if on for c in cs]
    lo, hi = median_diff_ci([x / median(off) for x in on], [x / median(off) for x in off])
    cpu_off, cpu_on = median(per_cpu[False]), median(per_cpu[True])
    return {"ops_per_cpu_s_off": cpu_off, "ops_per_cpu_s_on": cpu_on,
            "cpu_overhead_pct": 100 * (1 - cpu_on / cpu_off), "phases": per_cpu,
            "ops_per_250ms_off": median(off), "ops_per_250ms_on": median(on),
            "overhead_pct": 100 * (1 - median(on) / median(off)),
            "overhead_ci95_pct": [-100 * hi, -100 * lo], "intervals": [len(off), len(on)],
            "jvm_status_while_on": status, "dump_ms": dump_ms,
            "agent_cpu_pct_of_one_cpu": {k: median(v) for k, v in agent_share.items()},
            "busy_read_ms_median": median(busy_ms)}


def main():
    classes = tempfile.mkdtemp(prefix="aperture-bench-java-")
    javac(classes)
    d = Daemon(APERTURE)
    try:
        res = {"deadlocks": deadlock_latency(d, classes),
               "overhead": overhead(d, classes, int(os.environ.get("ROUNDS", "2")))}
    finally:
        d.stop()
    stamp = time.strftime("%Y-%m-%dT%H%M%S", time.gmtime())
    out = os.path.join(HERE, "results", f"jvm-{stamp}")
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=2, default=str)
    dl, ov = res["deadlocks"], res["overhead"]
    text = (f"JVM collector, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
            f"enable -> first threads/deadlocks report: {dl['enable_to_first_report_ms']:.0f} ms"
            f" (attach {dl['attach_ms']} ms); warm re-read {dl['warm_reread_ms']:.0f} ms;"
            f" jstack {dl['jstack_ms']:.0f} ms\n"
            f"throughput overhead, every JVM collector on: {ov['overhead_pct']:.1f} % "
            f"(95 % CI {ov['overhead_ci95_pct'][0]:.1f} .. {ov['overhead_ci95_pct'][1]:.1f} %;"
            f" median ops/250ms off {ov['ops_per_250ms_off']:.0f}, on {ov['ops_per_250ms_on']:.0f};"
            f" {ov['intervals'][0]}+{ov['intervals'][1]} intervals)\n"
            f"work per JVM CPU second, every JVM collector on: {ov['cpu_overhead_pct']:.1f} % less"
            f" (medians of {len(ov['phases'][False])} phases each: {ov['ops_per_cpu_s_off']:.0f} vs {ov['ops_per_cpu_s_on']:.0f})\n"
            f"one threads/dump of that JVM (locks included): {ov['dump_ms']:.0f} ms\n"
            f"the agent's threads, median share of one CPU while on: " +
            ", ".join(f"{k} {v:.2f} %" for k, v in sorted(ov["agent_cpu_pct_of_one_cpu"].items())) +
            f"; one threads/busy read: {ov['busy_read_ms_median']:.1f} ms (median)\n")
    with open(out + ".txt", "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
