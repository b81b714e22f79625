#!/usr/bin/python3
"""Throughput of real servers while profiled: PostgreSQL 15 under `pgbench -S` and nginx under
wrk, both on loopback, against their own baseline.

    sudo bench/servers.py [--aperture build/aperture] [--rounds 3] [--seconds 6] [--only A,B]

Configurations, taking turns round by round so that a drift of the machine lands on all
alike: baseline; aperture cpu-only (a bare enable) at 99 and 999 Hz; `perf record -e
cpu-clock -g` at the same rates; aperture with every collector (cpu offcpu syscalls locks) at
99 Hz; aperture with only syscalls, only locks, only offcpu; BCC's `syscount -L -c` and a
bpftrace program that times every system call of the server's processes (children of its
first process) as the syscalls collector does. The figure is, per configuration, the median over rounds of its throughput / the
baseline of the same round, with the smallest and largest round.

nginx (2 workers, a 612-byte static page): the profiler attaches to the master and workers
before wrk starts (`wrk -t2 -c32 -dSECONDS`). PostgreSQL: pgbench's connections each get a
new backend process, so the profiler attaches one second into the run (`pgbench -S -c4 -j2
-P1`) to every backend, and tps is the mean of pgbench's per-second reports from the third
second on. Results go to bench/results/servers-<date>.{txt,json}."""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Daemon, fds_of_kind, holds_perf_events, stop, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_PORT, NGINX_PORT = 55432, 18080
EVERY = "cpu offcpu syscalls locks"
# bpftrace's equivalent of the syscalls collector (count, time and a latency histogram per
# system call) for the server's processes: children of the server's first process, as
# syscount's -c.
BT_SYSCALLS = ("tracepoint:raw_syscalls:sys_enter /curtask->real_parent->tgid == {ppid}/ "
               "{{ @s[tid] = nsecs; }} tracepoint:raw_syscalls:sys_exit /@s[tid]/ "
               "{{ @ns[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }}")
# Debian's nginx and postgres have no frame pointers: config/unwind auto (the default) unwinds
# them from a copy of the stack (dwarf), where perf -g walks frame pointers; "fp" rows compare
# like with like. (name, tool, aperture's collectors or the tool's argv, unwind, Hz)
CONFIGS = [("baseline", None, None, None, None),
           ("aperture cpu 99 Hz", "aperture", "cpu", "auto", 99),
           ("aperture cpu 999 Hz", "aperture", "cpu", "auto", 999),
           ("aperture cpu 99 Hz, unwind fp", "aperture", "cpu", "fp", 99),
           ("aperture cpu 999 Hz, unwind fp", "aperture", "cpu", "fp", 999),
           ("perf -g 99 Hz", "perf", None, None, 99),
           ("perf -g 999 Hz", "perf", None, None, 999),
           ("aperture every collector 99 Hz", "aperture", EVERY, "auto", 99),
           ("aperture syscalls only", "aperture", "syscalls", "auto", 99),
           ("aperture locks only", "aperture", "locks", "auto", 99),
           ("aperture offcpu only", "aperture", "offcpu", "auto", 99),
           ("BCC syscount -L", "tool", ["syscount-bpfcc", "-L", "-c", "{ppid}"], None, None),
           ("bpftrace syscall latency", "tool", ["bpftrace", "-e", BT_SYSCALLS], None, None)]


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class Profiler:
    """Attaches one configuration to pids (children of ppid, but for nginx's master);
    detach() ends it."""

    def __init__(self, config, daemon, tmp):
        _, self.kind, self.what, self.unwind, self.hz = config
        self.d, self.tmp = daemon, tmp
        self.pids, self.proc = [], None

    def attach(self, ppid, pids):
        self.pids = pids
        if self.kind == "perf":
            self.proc = subprocess.Popen(
                ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-F", str(self.hz), "-o",
                 os.path.join(self.tmp, "perf.data"), "-p", ",".join(map(str, pids))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_until(lambda: holds_perf_events(self.proc.pid), 10)
        elif self.kind == "tool":
            self.proc = subprocess.Popen([a.format(ppid=ppid) for a in self.what],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not wait_until(lambda: fds_of_kind(self.proc.pid, "bpf-link", "bpf_link",
                                                "perf_event") > 0, 60, 0.05):
                raise RuntimeError(f"{self.what[0]} did not attach")
            time.sleep(0.5)  # the rest of its probes
        elif self.kind:
            self.d.set_hz(self.hz)
            with open(self.d.path("config", "collectors"), "w") as f:
                f.write(self.what)
            with open(self.d.path("config", "unwind"), "w") as f:
                f.write(self.unwind)
            for pid in pids:
                try:
                    self.d.write_enable(pid)
                except OSError:
                    pass  # a backend that just ended

    def detach(self):
        if self.proc:
            stop(self.proc, signal.SIGINT, 30)
        elif self.kind:
            for pid in self.pids:
                try:
                    self.d.write_enable(pid, "0")
                except OSError:
                    pass


class Nginx:
    name = "nginx under wrk"
    unit = "requests/s"

    def __init__(self, tmp, seconds):
        self.tmp, self.seconds = tmp, seconds
        root = os.path.join(tmp, "www")
        os.makedirs(os.path.join(tmp, "logs"), exist_ok=True)
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("x" * 611 + "\n")
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 2; daemon off; pid {tmp}/nginx.pid;
error_log {tmp}/logs/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; server {{ listen 127.0.0.1:{NGINX_PORT}; root {root}; }} }}
""")
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp])
        wait_until(lambda: len(children(self.proc.pid)) == 2, 10)

    def run(self, prof):
        prof.attach(self.proc.pid, [self.proc.pid] + children(self.proc.pid))
        time.sleep(0.5)
        out = subprocess.run(["wrk", "-t2", "-c32", f"-d{self.seconds}s",
                              f"http://127.0.0.1:{NGINX_PORT}/"],
                             capture_output=True, text=True).stdout
        prof.detach()
        return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Postgres:
    name = "PostgreSQL 15, pgbench -S"
    unit = "tps"

    def __init__(self, tmp, seconds):
        self.seconds = seconds
        self.data = os.path.join(tmp, "pgdata")
        os.makedirs(self.data)
        shutil.chown(self.data, "postgres")
        self.su([f"{PG_BIN}/initdb", "-D", self.data, "-A", "trust"])
        self.proc = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", f"{PG_BIN}/postgres", "-D", self.data, "-p",
             str(PG_PORT), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.su(["pg_isready", "-h", "127.0.0.1", "-p", str(PG_PORT)],
                                   check=False) == 0, 20, 0.2)
        self.su(["pgbench", "-i", "-q", "-s", "10", "-h", "127.0.0.1", "-p", str(PG_PORT),
                 "postgres"])

    @staticmethod
    def su(argv, check=True):
        return subprocess.run(["runuser", "-u", "postgres", "--"] + argv, check=check,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode

    def run(self, prof):
        pg = subprocess.Popen(["runuser", "-u", "postgres", "--", "pgbench", "-S", "-c4", "-j2",
                               "-P1", "-T", str(self.seconds + 2), "-h", "127.0.0.1", "-p",
                               str(PG_PORT), "postgres"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        prof.attach(self.proc.pid, children(self.proc.pid))
        err = pg.communicate()[1]
        prof.detach()
        tps = [float(m.group(2)) for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps",
                                                       err) if float(m.group(1)) >= 3]
        return statistics.mean(tps)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", default=os.path.join(HERE, "..", "build", "aperture"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--servers", default="nginx,postgres")
    ap.add_argument("--only", help="comma-separated configuration names (baseline is kept)")
    args = ap.parse_args()
    configs = [c for c in CONFIGS if not args.only or c[0] == "baseline" or
               c[0] in args.only.split(",")]
    tmp = tempfile.mkdtemp(prefix="aperture-servers-")
    os.chmod(tmp, 0o755)
    daemon = Daemon(os.path.abspath(args.aperture))
    results, lines = {}, []
    try:
        for kind in args.servers.split(","):
            server = (Nginx if kind == "nginx" else Postgres)(tmp, args.seconds)
            runs = {c[0]: [] for c in configs}
            try:
                for r in range(args.rounds):
                    order = configs if r % 2 == 0 else configs[::-1]
                    for config in order:
                        runs[config[0]].append(server.run(Profiler(config, daemon, tmp)))
            finally:
                server.stop()
            lines.append(f"{server.name}: {args.rounds} rounds of {args.seconds} s, "
                         f"configurations alternating, {os.cpu_count()} CPUs")
            lines.append("  (unwind auto picks dwarf for these binaries, which keep no frame "
                         "pointers; perf -g and the fp rows walk frame pointers)")
            lines.append(f"{'configuration':34} {server.unit:>12} {'ratio (min-max)':>22}")
            results[kind] = {}
            for name in runs:
                ratios = [a / b for a, b in zip(runs[name], runs["baseline"])]
                med = statistics.median(ratios)
                lines.append(f"{name:34} {statistics.median(runs[name]):12.0f} "
                             f"{med:8.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
                results[kind][name] = {"runs": runs[name], "ratios": ratios, "median": med}
            lines.append("")
    finally:
        daemon.stop()
    text = "\n".join(lines)
    print(text)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"servers-{stamp}.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(HERE, "results", f"servers-{stamp}.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
