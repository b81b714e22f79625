#!/usr/bin/python3
"""What tracing system calls and lock waits costs per call, aperture's syscalls and locks
collectors side by side with the tools a user would pick instead:

  getppid storm (sys_storm N):      BCC syscount (counts) and syscount -L (and latency),
                                    bpftrace 'tracepoint:raw_syscalls:sys_enter /pid==X/
                                    {@[args->id]=count()}'; --slow-peers adds strace -c and
                                    perf trace -s (40-160x: minutes per run)
  futex waits (futex_waits N):      N FUTEX_WAIT calls that return at once; bpftrace timing
                                    futex waits by user stack (/work/shared/peers/bt_futex.sh);
                                    BCC's klockstat (kernel locks, kprobes: fails here)

(A contended futex storm is no measure of per-call cost: how many threads end up waiting in
futex changes 7-fold from run to run, and tracing, by slowing the holder, changes it too.)

Each tool attaches by PID to a workload blocked at its gate (bench.h), so attach time is not
slowdown. A round runs every configuration once, each paired with a baseline run (ABBA: the
order of the pair and of the configurations flips every round), so a drift of the machine
lands on all alike. Per pair: ns per call = (profiled - baseline) CPU time of the workload
(user+sys, where in-kernel tracing cost lands) / calls; the table gives medians and each
tool's ns per call over aperture's. Counts: what each tool reported for the storm's system
call in each run, against the N the workload made. Writes
bench/results/<date>-syscalls.{json,txt}.

usage: bench/syscalls.py --aperture BUILD/aperture --workloads DIR [--runs N] [--slow-peers]"""
import argparse
import datetime
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, Gated, fds_of_kind, median, read_text, stop, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETTLE_S = 0.3
RUN_TAGS = itertools.count()  # each run's gate fifo has a name of its own
BT_SYSCALLS = "tracepoint:raw_syscalls:sys_enter /pid=={pid}/ {{@[args->id]=count()}}"
BT_FUTEX = ("tracepoint:syscalls:sys_enter_futex /pid == {pid} && ((args->op & 127) == 0 || "
            "(args->op & 127) == 9)/ {{ @s[tid] = nsecs; }} "
            "tracepoint:syscalls:sys_exit_futex /@s[tid]/ {{ @wait_ns[ustack] = "
            "sum(nsecs - @s[tid]); @n = count(); delete(@s[tid]); }}")


def syscall_nr(name):
    """The architecture's number of a system call, from the kernel's uapi header."""
    for header in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
                   "/usr/include/asm/unistd_64.h"):
        if os.path.exists(header):
            m = re.search(rf"#define __NR_{name}\s+(\d+)", read_text(header))
            if m:
                return int(m.group(1))
    raise RuntimeError(f"no number for {name}")


def default_sigint():
    # A child of a non-interactive shell may inherit SIGINT ignored; BCC prints on SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def first_int(pattern):
    """A count parser: the first group of pattern in the tool's output, or None."""
    def parse(text):
        m = re.search(pattern, text, re.M)
        return int(m.group(1)) if m else None
    return parse


class External:
    """A tool started per run with the workload's pid; attached once ready() says so; count()
    reads what it counted of the storm's call from its output."""

    def __init__(self, name, argv, ready, count, stop_signal=signal.SIGINT):
        self.name, self.argv, self.ready, self.count = name, argv, ready, count
        self.stop_signal = stop_signal

    def attach(self, pid, tmp):
        self.out = os.path.join(tmp, "tool.out")
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen([a.format(pid=pid) for a in self.argv], stdout=out,
                                         stderr=subprocess.STDOUT, preexec_fn=default_sigint)
        if not wait_until(lambda: self.proc.poll() is None and self.ready(self, pid), 90, 0.05):
            self.proc.kill()
            self.proc.wait()
            lines = [l for l in read_text(self.out).splitlines() if l.strip()]
            raise RuntimeError(lines[-1] if lines else "no output")

    def finish(self):
        if not wait_until(lambda: self.proc.poll() is not None, 2, 0.05):
            stop(self.proc, self.stop_signal, 60)
        return self.count(read_text(self.out))


def traced(tool, pid):
    """strace attached: the target's TracerPid is set."""
    for line in read_text(f"/proc/{pid}/status").splitlines():
        if line.startswith("TracerPid:"):
            return line.split()[1] != "0"
    return False


def holds_bpf_or_perf(tool, pid):
    """A BPF tool is attached once it holds a BPF link or perf event fd (raw tracepoints
    are links; tracepoints through perf events)."""
    return fds_of_kind(tool.proc.pid, "bpf-link", "bpf_link", "perf_event") > 0


def printed(text):
    return lambda tool, pid: text in read_text(tool.out)


def bpftrace_ready(tool, pid):
    return printed("Attaching")(tool, pid) and holds_bpf_or_perf(tool, pid)


class Aperture:
    """The workload enabled with one collector (syscalls or locks) besides cpu."""

    def __init__(self, daemon, collector, count):
        self.d, self.collector, self.count = daemon, collector, count
        self.name = f"aperture {collector}"

    def attach(self, pid, tmp):
        self.pid = pid
        with open(self.d.path("targets", str(pid), "collectors"), "w") as f:
            f.write("cpu " + self.collector)
        self.d.write_enable(pid)

    def finish(self):
        try:
            self.d.write_enable(self.pid, "0")  # final at once
        except ProcessLookupError:
            # the daemon saw the exit first: final once the record says so
            wait_until(lambda: self.d.status(self.pid).get("state") == "exited", 5, 0.05)
        return self.count(self.d, self.pid)


class ApertureFloor:
    """The floor: aperture's programs attached (another process has the collector) while
    the workload itself is not enabled. What is left is the kernel's cost of running system
    calls with tracepoints attached at all: every tracer of them pays it."""

    def __init__(self, daemon, collector):
        self.d, self.collector = daemon, collector
        self.name = f"floor: {collector} on, no target"

    def attach(self, pid, tmp):
        self.other = subprocess.Popen(["sleep", "600"])
        with open(self.d.path("targets", str(self.other.pid), "collectors"), "w") as f:
            f.write("cpu " + self.collector)
        self.d.write_enable(self.other.pid)

    def finish(self):
        self.d.write_enable(self.other.pid, "0")
        self.other.kill()
        self.other.wait()
        return None


def aperture_calls(name):
    def count(d, pid):
        doc = json.loads(read_text(d.path("targets", str(pid), "syscalls.json")))
        return sum(c["count"] for c in doc["syscalls"] if c["name"] == name)
    return count


def aperture_lock_waits(d, pid):
    doc = json.loads(read_text(d.path("targets", str(pid), "locks.json")))
    return sum(lock["waits"] for lock in doc["locks"])


def run(workload, profiler, tmp):
    w = Gated(workload, tmp, str(next(RUN_TAGS)))
    try:
        if profiler:
            profiler.attach(w.pid, tmp)
            time.sleep(SETTLE_S)
        w.release()
        rec = w.finish()
    except BaseException:
        w.proc.kill()
        w.proc.wait()
        raise
    if profiler:
        rec["count"] = profiler.finish()
    return rec


def measure(workload, calls, expect, profilers, runs, tmp):
    """Rounds of every profiler, each run paired with a baseline; expect: the count each tool
    must report (None: not known in advance)."""
    pairs = {p.name: [] for p in profilers}
    failed = {}
    for r in range(runs):
        order = profilers if r % 2 == 0 else profilers[::-1]
        for p in order:
            if p.name in failed:
                continue
            try:
                if r % 2 == 0:
                    base = run(workload, None, tmp)
                    prof = run(workload, p, tmp)
                else:
                    prof = run(workload, p, tmp)
                    base = run(workload, None, tmp)
            except RuntimeError as e:
                failed[p.name] = str(e)
                print(f"  {p.name}: did not run: {e}", file=sys.stderr, flush=True)
                continue
            pairs[p.name].append((base, prof))
    rows = []
    for p in profilers:
        ps = pairs[p.name]
        counts = [pr.get("count") for _, pr in ps]
        rows.append({
            "profiler": p.name, "pairs": len(ps), "failed": failed.get(p.name),
            "ns_per_call": median([(pr["self_cpu"] - b["self_cpu"]) / calls * 1e9
                                   for b, pr in ps]),
            "cpu_ratio": median([pr["self_cpu"] / b["self_cpu"] for b, pr in ps]),
            "wall_ratio": median([pr["wall"] / b["wall"] for b, pr in ps]),
            "base_ns_per_call": median([b["self_cpu"] / calls * 1e9 for b, _ in ps]),
            "counts": counts,
            "exact": None if expect is None or counts[:1] == [None] else
            sum(c == expect for c in counts),
        })
        r = rows[-1]
        print(f"  {p.name:<30} {r['ns_per_call']:8.0f} ns/call  cpu x{r['cpu_ratio']:.2f}  "
              f"counts {counts}", file=sys.stderr, flush=True)
    return rows


def table(title, rows, unit):
    ref = next((r for r in rows if r["profiler"].startswith("aperture") and r["pairs"]), None)
    out = [title, f"{'':<32}{unit:>13}{'/ aperture':>11}{'cpu ratio':>11}{'wall ratio':>11}"
                  f"  counts exact"]
    for r in rows:
        if r["failed"]:
            out.append(f"{r['profiler']:<32}did not run: {r['failed'][:90]}")
            continue
        exact = "-" if r["exact"] is None else f"{r['exact']}/{r['pairs']}"
        rel = r["ns_per_call"] / ref["ns_per_call"] if ref and ref["ns_per_call"] > 0 else 0
        out.append(f"{r['profiler']:<32}{r['ns_per_call']:>13.0f}{rel:>11.2f}"
                   f"{r['cpu_ratio']:>11.2f}{r['wall_ratio']:>11.2f}  {exact}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--calls", type=int, default=1000000)
    ap.add_argument("--slow-peers", action="store_true",
                    help="also strace -c and perf trace -s on the getppid storm")
    args = ap.parse_args()
    n, nr = args.calls, syscall_nr("getppid")
    daemon = Daemon(args.aperture)
    tmp = tempfile.mkdtemp(prefix="aperture-bench-sys-")
    try:
        storm = [os.path.join(args.workloads, "sys_storm"), str(n)]
        peers = [
            ApertureFloor(daemon, "syscalls"),
            Aperture(daemon, "syscalls", aperture_calls("getppid")),
            External("bcc syscount", ["syscount-bpfcc", "-p", "{pid}"],
                     printed("Tracing syscalls"), first_int(r"^getppid\s+(\d+)")),
            External("bcc syscount -L", ["syscount-bpfcc", "-L", "-p", "{pid}"],
                     printed("Tracing syscalls"), first_int(r"^getppid\s+(\d+)")),
            External("bpftrace raw_syscalls count", ["bpftrace", "-e", BT_SYSCALLS],
                     bpftrace_ready, first_int(rf"^@\[{nr}\]: (\d+)")),
        ]
        if args.slow_peers:
            peers += [
                External("strace -c", ["strace", "-c", "-p", "{pid}"], traced,
                         first_int(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?getppid$")),
                External("perf trace -s", ["perf", "trace", "-s", "-p", "{pid}"],
                         holds_bpf_or_perf, first_int(r"^\s+getppid\s+(\d+)")),
            ]
        print("getppid storm", file=sys.stderr)
        sys_rows = measure(storm, n, n, peers, args.runs, tmp)

        lock_peers = [
            ApertureFloor(daemon, "locks"),
            Aperture(daemon, "locks", aperture_lock_waits),
            External("bpftrace futex waits", ["bpftrace", "-e", BT_FUTEX], bpftrace_ready,
                     first_int(r"^@n: (\d+)")),
            External("bcc klockstat", ["klockstat-bpfcc", "-p", "{pid}"], printed("Tracing"),
                     lambda text: None),
        ]
        waits = [os.path.join(args.workloads, "futex_waits"), str(n)]
        print("futex waits", file=sys.stderr)
        wait_rows = measure(waits, n, n, lock_peers, args.runs, tmp)
    finally:
        daemon.stop()
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    text = table(f"getppid storm: {n} calls, medians of {args.runs} rounds (commit {commit}, "
                 f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})", sys_rows,
                 "ns per call")
    text += [""] + table(f"futex waits: {n} FUTEX_WAIT calls returning EAGAIN", wait_rows,
                         "ns per call")
    print("\n".join(text))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    base = os.path.join(HERE, "results", f"{stamp}-syscalls")
    with open(base + ".txt", "w") as f:
        f.write("\n".join(text) + "\n")
    with open(base + ".json", "w") as f:
        json.dump({"commit": commit, "date": stamp, "calls": n, "syscalls": sys_rows,
                   "futex_waits": wait_rows}, f, indent=1)


if __name__ == "__main__":
    main()
