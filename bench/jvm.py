#!/usr/bin/python3
"""The JVM collector's two figures, one run (needs root, a JDK, and build/aperture):

1. enable-to-first-deadlock-report: from `echo 1 > enable` on a JVM with a monitor and a
   ReentrantLock deadlock to the first non-empty threads/deadlocks, against `jstack <pid>`'s
   wall time; also a warm re-read of threads/deadlocks.
2. the agent's overhead on a Java throughput workload with every collector on (cpu sampling,
   threads/busy read once a second, allocation sampling, monitor contention, JIT tracking,
   the j.u.c lock-wait sampler):
   three settings: the target disabled (off), enabled with config/jvm_attach 0 (native:
   cpu, off-CPU, locks, system calls, nothing in the JVM), and enabled with every JVM
   collector on (full). The profiled JVM and a control JVM that is never profiled share
   CPU 0 (one worker each, a fixed heap), so both see the same host; the profiled JVM's
   operations per JVM CPU second (and per second) are taken as a ratio to the control's.
   ROUNDS (default 6) rounds of off, native, full, full, native, off, each phase measured
   for 5 s after 2 s to settle, after 15 s of warm-up; the median of the rounds' ratios
   and a bootstrap 95 % interval over rounds; the daemon's CPU as a share of the JVM's CPU
   time (on a machine the JVM keeps busy it comes out of the JVM's); the agent's own
   threads' CPU (aperture-agent: requests and drains; aperture-juc: the j.u.c sampler);
   one threads/busy read's time. BUSY_READS=0 leaves threads/busy unread.

Writes bench/results/jvm-<date>.{json,txt}."""
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

from common import Daemon, median, read_text, task_cpu_s, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
APERTURE = os.environ.get("APERTURE", os.path.join(TOP, "build", "aperture"))


def javac(out):
    srcs = [os.path.join(TOP, "tests", "workloads", "java", "Threads.java"),
            os.path.join(HERE, "workloads", "Throughput.java")]
    subprocess.run(["javac", "-d", out, *srcs], check=True)


def start_java(classes, main, flags=(), args=(), pin=None):
    p = subprocess.Popen([*(["taskset", "-c", pin] if pin else []), "java", *flags, "-cp",
                          classes, main, *args], stdout=subprocess.PIPE, text=True)
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


def round_ci(ratios, n=4000, seed=1):
    """Median of per-round ratios and a bootstrap 95 % interval over rounds: each round is its
    own ABBA block, so a slow drift of the shared machine cancels inside it."""
    rng = random.Random(seed)
    meds = sorted(median(rng.choices(ratios, k=len(ratios))) for _ in range(n))
    return median(ratios), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


class Counter:
    """A Throughput JVM on CPU 0 and the operations it reports, with their times."""

    def __init__(self, classes):
        # One worker, a JVM sized for the one CPU it may use, a fixed heap.
        self.p = start_java(classes, "Throughput",
                            ("-XX:ActiveProcessorCount=1", "-Xms1g", "-Xmx1g"), ("1",),
                            pin="0")
        self.counts, self.lock = [], threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            with self.lock:
                self.counts.append((time.monotonic(), int(line)))

    def ops(self, t0, t1):
        with self.lock:
            return sum(c for t, c in self.counts if t0 < t <= t1)

    def stop(self):
        self.p.kill()
        self.p.wait()


# off: the target disabled; native: enabled with config/jvm_attach 0 (cpu, off-CPU, locks,
# system calls; nothing in the JVM); full: enabled with every JVM collector on too.
SETTINGS = ("off", "native", "full")


def overhead(d, classes, rounds, busy_reads, phase_s=5, settle_s=2, warmup_s=15):
    # This host changes speed by up to 2x from one minute to the next, and its two CPUs
    # differ: a second, never-profiled JVM sharing one CPU with the profiled one sees the same
    # host, and the profiled JVM's work is measured as a ratio to it (one JVM alone: phases
    # of the same setting differ by 10-40 %; two on one CPU: their ratio by 0.4 %).
    prof, ctl = Counter(classes), Counter(classes)
    pid = prof.p.pid
    time.sleep(warmup_s)
    # Per phase and setting: the ratio of ops per second, and of ops per JVM CPU second.
    ops, work = {k: [] for k in SETTINGS}, {k: [] for k in SETTINGS}
    agent_share, daemon_per_jvm, busy_ms = {}, {k: [] for k in SETTINGS}, []
    status = ""
    # Each round visits the settings forth and back (off, native, full, full, native, off):
    # a JVM still warming up, or a slow drift of the host, favours none of them.
    # Each phase is measured after settle_s: the steady state, not a switch's first moments
    # (an attach replays the JIT's methods to the agent; a detach may deoptimize code).
    for setting in (SETTINGS + SETTINGS[::-1]) * rounds:
        d.write_enable(pid, "0")
        if setting != "off":
            with open(d.path("config", "jvm_attach"), "w") as f:
                f.write("1" if setting == "full" else "0")
            d.write_enable(pid)
        if setting == "full":
            wait_until(lambda: "alloc: on" in read_text(
                d.path("targets", str(pid), "jvm", "status")), 20)
        time.sleep(settle_s)
        if setting == "full":
            status = read_text(d.path("targets", str(pid), "jvm", "status"))
        t0, dcpu0, agent0 = time.monotonic(), d.cpu_s(), agent_cpu_s(pid)
        cpu0 = (task_cpu_s(pid), task_cpu_s(ctl.p.pid))
        # busy threads once a second, as `watch cat threads/busy` would read them
        while time.monotonic() - t0 < phase_s:
            if setting == "full" and busy_reads:
                r0 = time.monotonic()
                read_text(d.path("targets", str(pid), "threads", "busy"))
                busy_ms.append((time.monotonic() - r0) * 1e3)
            time.sleep(1)
        t1, dcpu1, agent1 = time.monotonic(), d.cpu_s(), agent_cpu_s(pid)
        cpu = (task_cpu_s(pid) - cpu0[0], task_cpu_s(ctl.p.pid) - cpu0[1])
        if setting == "full":
            for name, s in agent1.items():
                agent_share.setdefault(name, []).append(100 * (s - agent0.get(name, 0)) / cpu[0])
        daemon_per_jvm[setting].append(100 * (dcpu1 - dcpu0) / cpu[0])
        n = (prof.ops(t0, t1), ctl.ops(t0, t1))
        ops[setting].append(n[0] / n[1])
        # Work per CPU second, the agent's threads, signals and the sampling interrupt
        # included (this kernel charges interrupts to the task they interrupt).
        work[setting].append((n[0] / cpu[0]) / (n[1] / cpu[1]))
    d.write_enable(pid, "0")
    with open(d.path("config", "jvm_attach"), "w") as f:
        f.write("1")
    # One full dump (locks included: HotSpot walks the heap for j.u.c. owners), timed.
    d.write_enable(pid)
    wait_until(lambda: "state: attached" in read_text(
        d.path("targets", str(pid), "jvm", "status")), 20)
    t0 = time.monotonic()
    read_text(d.path("targets", str(pid), "threads", "dump"))
    dump_ms = (time.monotonic() - t0) * 1e3
    prof.stop()
    ctl.stop()

    def compare(phases, a, b):
        """1 - a/b per round (each setting's two phases summed), median and 95 % CI, in %."""
        ratios = [(phases[a][2 * r] + phases[a][2 * r + 1]) /
                  (phases[b][2 * r] + phases[b][2 * r + 1]) for r in range(rounds)]
        mid, lo, hi = round_ci(ratios)
        return {"pct": 100 * (1 - mid), "ci95_pct": [100 * (1 - hi), 100 * (1 - lo)]}
    out = {"rounds": rounds, "phase_s": phase_s, "settle_s": settle_s, "busy_reads": busy_reads,
           "ratio_ops_per_s": ops,
           "ratio_ops_per_cpu_s": work, "jvm_status_while_on": status, "dump_ms": dump_ms,
           "agent_cpu_pct_of_jvm_cpu": {k: median(v) for k, v in agent_share.items()},
           "busy_read_ms_median": median(busy_ms)}
    for a, b in (("full", "off"), ("native", "off"), ("full", "native")):
        in_jvm = compare(work, a, b)
        daemon = median(daemon_per_jvm[a]) - median(daemon_per_jvm[b])
        out[f"{a}_vs_{b}"] = {
            "in_jvm": in_jvm, "ops": compare(ops, a, b),
            "daemon_cpu_pct_of_jvm_cpu": daemon,
            # On a machine the JVM keeps busy, the daemon's CPU comes out of the JVM's.
            "overhead_pct": 100 * (1 - (1 - in_jvm["pct"] / 100) * (1 - daemon / 100))}
    return out


def main():
    classes = tempfile.mkdtemp(prefix="aperture-bench-java-")
    javac(classes)
    d = Daemon(APERTURE)
    try:
        res = {"deadlocks": deadlock_latency(d, classes),
               "overhead": overhead(d, classes, int(os.environ.get("ROUNDS", "6")),
                                    os.environ.get("BUSY_READS", "1") != "0")}
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
            f" jstack {dl['jstack_ms']:.0f} ms\n" +
            "".join(f"{label}: {c['overhead_pct']:.1f} %: the JVM does {c['in_jvm']['pct']:.1f} %"
                    f" less work per CPU second (95 % CI {c['in_jvm']['ci95_pct'][0]:.1f} .."
                    f" {c['in_jvm']['ci95_pct'][1]:.1f} %; ops/s against the control"
                    f" {c['ops']['pct']:.1f} %, CI {c['ops']['ci95_pct'][0]:.1f} .."
                    f" {c['ops']['ci95_pct'][1]:.1f} %) and the daemon uses"
                    f" {c['daemon_cpu_pct_of_jvm_cpu']:.2f} % of the JVM's CPU time more\n"
                    for label, c in (("the agent's overhead (every JVM collector on vs"
                                      " config/jvm_attach 0)", ov["full_vs_native"]),
                                     ("enable's whole overhead, every collector on",
                                      ov["full_vs_off"]),
                                     ("native profiling only (config/jvm_attach 0)",
                                      ov["native_vs_off"]))) +
            f"({ov['rounds']} rounds of {ov['phase_s']} s phases after {ov['settle_s']} s to settle,"
            f" medians of the rounds' ratios; threads/busy read once a second:"
            f" {'yes' if ov['busy_reads'] else 'no (BUSY_READS=0)'})\n"
            f"one threads/dump of that JVM (locks included): {ov['dump_ms']:.0f} ms\n"
            f"the agent's threads, median share of the JVM's CPU time while on: " +
            ", ".join(f"{k} {v:.2f} %" for k, v in sorted(ov["agent_cpu_pct_of_jvm_cpu"].items())) +
            (f"; one threads/busy read: {ov['busy_read_ms_median']:.1f} ms (median)\n"
             if ov["busy_reads"] else "\n"))
    with open(out + ".txt", "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
