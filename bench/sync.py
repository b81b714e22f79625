#!/usr/bin/env python3
"""What remote sync costs a node, per profiled process at 99 Hz: bytes on the wire per
minute against one gzip'd pprof per target per interval (what Pyroscope's and Parca's agents
send; the node's own cpu.pprof of the same seconds stands in), the node CPU its sync threads
use per minute, and the lag from a sample being taken to it being readable on the aggregator.

    sudo bench/sync.py                 # build/aperture; BENCH_SYNC_S=60 seconds per workload
    APERTURE=/path/aperture BENCH_SYNC_S=30 bench/sync.py

One node daemon and one aggregator (--insecure, SQLite in a temporary directory) on
127.0.0.1; each workload runs alone, enabled for BENCH_SYNC_S seconds at 99 Hz with the default
sync interval (10 s). Every interval the bench reads the target's cpu.pprof over the last
interval (its window file set to the interval), the stand-in for a pprof agent's upload of
that interval. Every 0.5 s it reads the node's sample count of the target and the aggregator's
(the sum of its cpu.folded): a sample counted on the node at t0 and first seen on the
aggregator at t1 has lag t1 - t0 (t0 is up to 1 s after the sample was taken: the node drains
once a second). The table goes to stdout and to bench/results/sync-<date>.txt."""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
APERTURE = Path(os.environ.get("APERTURE", REPO / "build" / "aperture"))
WORKLOADS = APERTURE.parent / "tests" / "workloads"
SECONDS = int(os.environ.get("BENCH_SYNC_S", "60"))
INTERVAL = 10
POLL = 0.5

PY_BUSY = """
import json, re
def parse(n):
    doc = [{"id": i, "name": "item%d" % i, "tags": ["a", "b", str(i % 7)]} for i in range(n)]
    return json.loads(json.dumps(doc))
def scan(text):
    return len(re.findall(r"[a-z]+[0-9]", text))
while True:
    d = parse(300)
    scan(" ".join(x["name"] for x in d))
    sorted(d, key=lambda x: (x["tags"][2], -x["id"]))
"""

WORKLOADS_RUN = [
    ("cpu_split (4 stacks)", [str(WORKLOADS / "cpu_split")]),
    ("xz -9 (real C program)", ["sh", "-c", "exec xz -T1 -9 -c < /dev/urandom > /dev/null"]),
    ("python3 json/re/sort", [sys.executable, "-c", PY_BUSY]),
]


def read(path):
    with open(path) as f:
        return f.read()


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def status(path):
    return dict(line.split(": ", 1) for line in read(path).splitlines() if ": " in line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_cpu_s(pid, names):
    """On-CPU seconds of pid's threads whose comm is in names (schedstat, ns)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if read(f"/proc/{pid}/task/{tid}/comm").strip() in names:
                total += int(read(f"/proc/{pid}/task/{tid}/schedstat").split()[0])
        except OSError:
            pass
    return total / 1e9


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def agg_total(url, node, pid):
    try:
        with urllib.request.urlopen(f"{url}/nodes/{node}/targets/{pid}/cpu.folded",
                                    timeout=5) as r:
            return sum(int(line.rsplit(" ", 1)[1]) for line in r.read().decode().splitlines()
                       if line)
    except OSError:
        return 0


def lags(node_obs, agg_obs):
    """Per sample rank k: first time the aggregator had >= k minus first time the node had."""
    out = []
    j = 0
    prev = 0
    for t_agg, a in agg_obs:
        if a <= prev:
            continue
        # every rank in (prev, a] became readable at t_agg; 50 of them stand for all
        for k in range(prev + 1, a + 1, max(1, (a - prev) // 50)):
            while j < len(node_obs) and node_obs[j][1] < k:
                j += 1
            if j < len(node_obs):
                out.append(t_agg - node_obs[j][0])
        prev = a
    return out


def run_one(mnt, url, node, daemon_pid, label, cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    pid = proc.pid
    target = mnt / "targets" / str(pid)
    write(target / "window", str(INTERVAL))
    before = status(mnt / "status")
    cpu0 = thread_cpu_s(daemon_pid, {"sync-build", "sync-upload"})
    write(target / "enable", "1")
    t0 = time.monotonic()
    node_obs, agg_obs, pprof_bytes = [], [], []
    next_pprof = t0 + INTERVAL
    while time.monotonic() - t0 < SECONDS:
        now = time.monotonic()
        node_obs.append((now, int(status(target / "status")["samples"])))
        agg_obs.append((now, agg_total(url, node, pid)))
        if now >= next_pprof:
            with open(target / "cpu.pprof", "rb") as f:
                pprof_bytes.append(len(f.read()))
            next_pprof += INTERVAL
        time.sleep(POLL)
    write(target / "enable", "0")
    final = int(status(target / "status")["samples"])
    # Until the aggregator has every sample: the tail of the lag.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = time.monotonic()
        a = agg_total(url, node, pid)
        agg_obs.append((now, a))
        if a >= final:
            break
        time.sleep(POLL)
    node_obs.append((time.monotonic(), final))
    cpu1 = thread_cpu_s(daemon_pid, {"sync-build", "sync-upload"})
    after = status(mnt / "status")
    proc.kill()
    proc.wait()
    minutes = SECONDS / 60
    sent = int(after["sync_bytes_sent"]) - int(before["sync_bytes_sent"])
    batches = int(after["sync_batches_sent"]) - int(before["sync_batches_sent"])
    lag = lags(node_obs, agg_obs)
    return {
        "workload": label,
        "samples": final,
        "aggregator_samples": agg_obs[-1][1],
        "sync_bytes_per_min": sent / minutes,
        "sync_batches": batches,
        "pprof_bytes_per_min": sum(pprof_bytes) / len(pprof_bytes) * (60 / INTERVAL)
        if pprof_bytes else 0,
        "pprof_uploads": len(pprof_bytes),
        "sync_cpu_ms_per_min": (cpu1 - cpu0) * 1000 / (SECONDS / 60 + 0.0),
        "lag_median_s": statistics.median(lag) if lag else None,
        "lag_max_s": max(lag) if lag else None,
    }


def main():
    if os.geteuid():
        raise SystemExit("run as root")
    work = Path(tempfile.mkdtemp(prefix="aperture-bench-sync-"))
    mnt = work / "mnt"
    mnt.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    agg = subprocess.Popen([str(APERTURE), "aggregate", "--listen", f"127.0.0.1:{port}",
                            "--store", f"sqlite:{work / 'agg.db'}", "--insecure"],
                           stdout=subprocess.DEVNULL, stderr=open(work / "agg.log", "w"))
    daemon = subprocess.Popen([str(APERTURE), "mount", "--foreground", "--sync", url,
                               "--node", "bench", "--spool-dir", str(work / "spool"), str(mnt)],
                              stdout=subprocess.DEVNULL, stderr=open(work / "node.log", "w"))
    rows = []
    try:
        wait_for(lambda: (mnt / "status").exists() and
                 status(mnt / "status").get("sync") == "ok", 15, "the node to sync")
        for label, cmd in WORKLOADS_RUN:
            if shutil.which(cmd[0]) or Path(cmd[0]).exists():
                rows.append(run_one(mnt, url, "bench", daemon.pid, label, cmd))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=20)
        agg.send_signal(signal.SIGTERM)
        agg.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"sync, {SECONDS} s per workload at 99 Hz, interval {INTERVAL} s "
             f"({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})", "",
             "| workload | samples (node = aggregator) | aperture sync bytes/min | gzip'd pprof "
             "per interval, bytes/min | ratio | sync CPU ms/min | lag median / max s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["sync_bytes_per_min"] / r["pprof_bytes_per_min"] if r["pprof_bytes_per_min"] \
            else float("nan")
        same = "=" if r["samples"] == r["aggregator_samples"] else \
            f"!= {r['aggregator_samples']}"
        lag = (f"{r['lag_median_s']:.1f} / {r['lag_max_s']:.1f}" if r["lag_median_s"] is not None
               else "n/a")
        lines.append(f"| {r['workload']} | {r['samples']} {same} | {r['sync_bytes_per_min']:.0f} | "
                     f"{r['pprof_bytes_per_min']:.0f} | {ratio:.2f} | "
                     f"{r['sync_cpu_ms_per_min']:.1f} | {lag} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results" / f"sync-{time.strftime('%Y-%m-%dT%H%M%S', time.gmtime())}"
    out.with_suffix(".txt").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
