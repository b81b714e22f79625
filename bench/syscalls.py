#!/usr/bin/python3
"""Slowdown of a system call storm and of a futex storm under aperture's syscalls.json /
locks.json collection and under the peers that answer the same questions:

  getppid storm (sys_storm N):  strace -c, perf trace -s, BCC syscount -L
  futex storm (futex_storm T I): bpftrace timing futex waits by user stack (as
                                 /work/shared/peers/bt_futex.sh)

Each profiler attaches by PID to a workload blocked at its gate (bench.h), so attach time is
not slowdown. Figures: wall = measured-phase wall time profiled / unprofiled, cpu = the
workload's own user+sys profiled / unprofiled (where in-kernel tracing cost lands; steadier
than wall on a shared machine). Medians over --runs runs, each profiled run paired with a
baseline run right before it. Writes bench/results/<date>-syscalls.{json,txt}.

usage: bench/syscalls.py --aperture BUILD/aperture --workloads DIR [--runs N]"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, Gated, median, read_text, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETTLE_S = 0.3
BT_FUTEX = ("tracepoint:syscalls:sys_enter_futex /pid == {pid} && ((args->op & 127) == 0 || "
            "(args->op & 127) == 9)/ {{ @s[tid] = nsecs; }} "
            "tracepoint:syscalls:sys_exit_futex /@s[tid]/ {{ @wait_ns[ustack] = "
            "sum(nsecs - @s[tid]); @n = count(); delete(@s[tid]); }}")


def default_sigint():
    # A child of a non-interactive shell may inherit SIGINT ignored; BCC prints on SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class External:
    """A tool started per run with the workload's pid; attached once ready() says so."""

    def __init__(self, name, argv, ready, stop_signal=signal.SIGINT):
        self.name, self.argv, self.ready, self.stop_signal = name, argv, ready, stop_signal

    def attach(self, pid, tmp):
        self.out = os.path.join(tmp, "tool.out")
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen([a.format(pid=pid) for a in self.argv], stdout=out,
                                         stderr=subprocess.STDOUT, preexec_fn=default_sigint)
        if not wait_until(lambda: self.proc.poll() is None and self.ready(self, pid), 90, 0.05):
            self.proc.kill()
            raise RuntimeError(f"{self.name} did not attach: {read_text(self.out)[-400:]}")

    def finish(self):
        if wait_until(lambda: self.proc.poll() is not None, 2, 0.05):
            return read_text(self.out)
        self.proc.send_signal(self.stop_signal)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return read_text(self.out)


def traced(tool, pid):
    """strace attached: the target's TracerPid is set."""
    for line in read_text(f"/proc/{pid}/status").splitlines():
        if line.startswith("TracerPid:"):
            return line.split()[1] != "0"
    return False


def holds_bpf_or_perf(tool, pid):
    """A BPF tool is attached once it holds a BPF link or perf event fd (raw tracepoints
    are links; tracepoints through perf events)."""
    try:
        for fd in os.listdir(f"/proc/{tool.proc.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{tool.proc.pid}/fd/{fd}")
            except OSError:
                continue
            if "bpf-link" in target or "perf_event" in target or "bpf_link" in target:
                return True
    except FileNotFoundError:
        pass
    return False


def printed(text):
    return lambda tool, pid: text in read_text(tool.out)


class Aperture:
    def __init__(self, daemon):
        self.d, self.name = daemon, "aperture"

    def attach(self, pid, tmp):
        self.pid = pid
        self.d.write_enable(pid)

    def finish(self):
        self.d.write_enable(self.pid, "0")  # final at once
        return read_text(self.d.path("targets", str(self.pid), "syscalls.json"))


class ApertureIdle:
    """The floor: aperture's programs attached (another process is enabled) while the
    workload itself is not enabled. What is left is the kernel's cost of running system
    calls with sys_enter/sys_exit tracepoints attached at all: every tracer of them pays it."""

    def __init__(self, daemon):
        self.d, self.name = daemon, "floor: tracepoints, no target"

    def attach(self, pid, tmp):
        self.other = subprocess.Popen(["sleep", "600"])
        self.d.write_enable(self.other.pid)

    def finish(self):
        self.d.write_enable(self.other.pid, "0")
        self.other.kill()
        self.other.wait()
        return "getppid futex (not collected: the floor)"


def run(workload, profiler, tmp, tag):
    w = Gated(workload, tmp, tag)
    try:
        if profiler:
            profiler.attach(w.pid, tmp)
            time.sleep(SETTLE_S)
        w.release()
        rec = w.finish()
    except BaseException:
        w.proc.kill()
        raise
    if profiler:
        rec["output"] = profiler.finish()
    return rec


def check(output, expect):
    """Whether the tool saw the storm: its output names one of expect (a tool that attached
    too late or not at all would make a slowdown look small)."""
    return any(e in output for e in expect)


def measure(workload, profilers, runs, tmp, expect):
    rows = []
    for p in profilers:
        pairs = []
        for i in range(runs):
            base = run(workload, None, tmp, f"b{len(rows)}{i}")
            prof = run(workload, p, tmp, f"p{len(rows)}{i}")
            pairs.append((base, prof))
        outputs = [pr["output"] for _, pr in pairs]
        rows.append({
            "profiler": p.name, "runs": runs,
            "base_wall_s": median([b["wall"] for b, _ in pairs]),
            "prof_wall_s": median([pr["wall"] for _, pr in pairs]),
            "wall_ratio": median([pr["wall"] / b["wall"] for b, pr in pairs]),
            "cpu_ratio": median([pr["self_cpu"] / b["self_cpu"] for b, pr in pairs]),
            "saw_calls": all(check(o, expect) for o in outputs),
            "output_tail": outputs[-1][-600:],
        })
        print(f"  {p.name:<28} wall x{rows[-1]['wall_ratio']:.2f}  cpu x"
              f"{rows[-1]['cpu_ratio']:.2f}", file=sys.stderr, flush=True)
    return rows


def table(title, rows):
    out = [title, f"{'profiler':<30}{'wall ratio':>11}{'cpu ratio':>11}{'base wall':>11}"
                  f"{'saw it':>8}"]
    for r in rows:
        out.append(f"{r['profiler']:<30}{r['wall_ratio']:>11.2f}{r['cpu_ratio']:>11.2f}"
                   f"{r['base_wall_s']:>10.3f}s{'yes' if r['saw_calls'] else 'NO':>8}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1000000)
    args = ap.parse_args()
    daemon = Daemon(args.aperture)
    # System calls and lock waits are collected only when chosen.
    with open(daemon.path("config", "collectors"), "w") as f:
        f.write("cpu syscalls locks")
    tmp = tempfile.mkdtemp(prefix="aperture-bench-sys-")
    try:
        storm = [os.path.join(args.workloads, "sys_storm"), str(args.calls)]
        print("getppid storm", file=sys.stderr)
        sys_rows = measure(storm, [
            ApertureIdle(daemon),
            Aperture(daemon),
            External("perf trace -s", ["perf", "trace", "-s", "-p", "{pid}"], holds_bpf_or_perf),
            External("bcc syscount -L", ["syscount-bpfcc", "-L", "-p", "{pid}"],
                     printed("Tracing syscalls")),
            External("strace -c", ["strace", "-c", "-p", "{pid}"], traced),
        ], args.runs, tmp, ("getppid",))
        futex = [os.path.join(args.workloads, "futex_storm"), "4", "200000"]
        print("futex storm", file=sys.stderr)
        futex_rows = measure(futex, [
            ApertureIdle(daemon),
            Aperture(daemon),
            External("bpftrace futex waits", ["bpftrace", "-e", BT_FUTEX], printed("Attaching")),
        ], args.runs, tmp, ("futex", "@n:"))
    finally:
        daemon.stop()
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    text = table(f"System call storm: {args.calls} getppid calls, medians of {args.runs} "
                 f"paired runs (commit {commit}, {os.cpu_count()} CPUs, load "
                 f"{os.getloadavg()[0]:.1f})", sys_rows)
    text += [""] + table("Futex storm: 4 threads x 200000 mutex lock/unlock", futex_rows)
    print("\n".join(text))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    base = os.path.join(HERE, "results", f"{stamp}-syscalls")
    with open(base + ".txt", "w") as f:
        f.write("\n".join(text) + "\n")
    with open(base + ".json", "w") as f:
        json.dump({"commit": commit, "date": stamp, "syscalls": sys_rows,
                   "futex": futex_rows}, f, indent=1)


if __name__ == "__main__":
    main()
