#!/usr/bin/python3
"""The aggregator's ingest rate and memory with many simulated nodes.

A real profile is recorded first (`aperture record` of the many_stacks workload at 99 Hz), and
its stacks make the batches: each simulated node sends, per 10 s interval, TARGETS targets
whose seconds hold that profile's stacks and counts (99 samples a second per target, spread
over the recorded stacks as recorded). Every node has its own name, token, boot id and seqs,
as real nodes would. All bodies are encoded before the clock starts; CONNS client threads
with keep-alive connections post them; the figures are batches/s and samples/s from the
first post to the last answer, the aggregator's peak RSS (VmHWM), the SQLite file's size, and
then the time of one GET of a target's cpu.folded and of a service's (every node's target).

    sudo bench/aggregate.py [NODES...]       # default: 100 1000
Environment: ROUNDS (intervals per node; default 3,000 batches in all), TARGETS (2), CONNS (16), AGG_THREADS
(the aggregator's --threads, 4).
"""
import json
import os
import sys
import tempfile
import threading
import time
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from fleet import Aggregator, batch, encode, HEADERS  # noqa: E402
from common import status_kb  # noqa: E402

APERTURE = Path(os.environ.get("APERTURE", REPO / "build" / "aperture"))
ROUNDS = int(os.environ.get("ROUNDS", 0))  # 0: 3,000 batches whatever the fleet size
TARGETS = int(os.environ.get("TARGETS", 2))
CONNS = int(os.environ.get("CONNS", 16))
INTERVAL_S = 10
HZ = 99


def record_profile(tmp):
    out = Path(tmp) / "rec"
    subprocess.run([str(APERTURE), "record", "-F", str(HZ), "-o", str(out), "--",
                    str(REPO / "build" / "tests" / "workloads" / "many_stacks"), "3"],
                   check=True, capture_output=True)
    stacks = {}
    for line in (out / "cpu.folded").read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        stacks[tuple(stack.split(";"))] = int(n)
    return stacks


def seconds_of(stacks, start):
    """INTERVAL_S seconds of HZ samples each, drawn from the recorded stacks in proportion."""
    total = sum(stacks.values())
    items = sorted(stacks.items(), key=lambda kv: -kv[1])
    secs = {}
    for s in range(INTERVAL_S):
        counts, left = {}, HZ
        for i, (st, n) in enumerate(items):
            share = max(1, round(HZ * n / total)) if left > 0 else 0
            share = min(share, left)
            if share:
                counts[st] = share
                left -= share
        secs[start + s] = counts
    return secs


def fleet_bodies(nodes, rounds, stacks, targets=TARGETS):
    """rounds x nodes encoded batches, the last round ending now: [(node index, body)], and
    the samples they hold. Node i is node<i> with its own boot id; services svc0, svc1..."""
    now = int(time.time()) - rounds * INTERVAL_S - 5
    bodies, samples = [], 0
    for r in range(rounds):
        for i in range(nodes):
            ts = [dict(pid=1000 + t, comm=f"svc{t}", labels={"service": f"svc{t}"},
                       profiles={"cpu": seconds_of(stacks, now + r * INTERVAL_S)})
                  for t in range(targets)]
            b = batch(f"node{i}", f"{i:032x}", r + 1, ts)
            samples += sum(c for t in b.targets for p in t.profiles for s in p.seconds
                           for c in s.counts)
            bodies.append((i, encode(b)))
    return bodies, samples


def run(nodes, stacks, tmp):
    d = Path(tmp) / f"agg{nodes}"
    d.mkdir()
    tokens = "".join(f"tok{i} node node{i}\n" for i in range(nodes)) + "readtok read *\n"
    agg = Aggregator(d, tokens, extra=["--threads", os.environ.get("AGG_THREADS", "4")]).start()
    rounds = ROUNDS or max(1, 3000 // nodes)
    bodies, samples = fleet_bodies(nodes, rounds, stacks)
    bodies = [(f"tok{i}", body) for i, body in bodies]
    failures, lock = [], threading.Lock()
    queue = list(reversed(bodies))

    def worker():
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", agg.port, timeout=120)
        while True:
            with lock:
                if not queue:
                    break
                token, body = queue.pop()
            c.request("POST", "/v1/batches", body, dict(HEADERS, Authorization=f"Bearer {token}"))
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                with lock:
                    failures.append((r.status, data))
        c.close()

    threads = [threading.Thread(target=worker) for _ in range(CONNS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    result = dict(nodes=nodes, rounds=rounds, batches=len(bodies), samples=samples, wall_s=round(wall, 2),
                  batches_per_s=round(len(bodies) / wall, 1),
                  samples_per_s=round(samples / wall),
                  bytes_per_batch=round(sum(len(b) for _, b in bodies) / len(bodies)),
                  rss_peak_mb=round(status_kb(agg.proc.pid, "VmHWM") / 1024, 1),
                  rss_mb=round(status_kb(agg.proc.pid, "VmRSS") / 1024, 1),
                  db_mb=round(sum(p.stat().st_size for p in d.glob("agg.db*")) / 2**20, 1),
                  failures=len(failures))
    # what reads cost after the load: one target, and a service merged over every node
    for name, path in [("read_target_ms", "/nodes/node0/targets/1000/cpu.folded"),
                       ("read_service_ms", "/services/svc0/cpu.folded")]:
        t1 = time.monotonic()
        status, body = agg.get(path, "readtok")
        result[name] = round((time.monotonic() - t1) * 1000, 1)
        assert status == 200 and body, (path, status)
    agg.stop()
    if failures:
        result["first_failure"] = str(failures[0])[:200]
    return result


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1000]
    with tempfile.TemporaryDirectory() as tmp:
        stacks = record_profile(tmp)
        print(f"recorded profile: {len(stacks)} distinct stacks, "
              f"depth {min(map(len, stacks))}..{max(map(len, stacks))}")
        results = [run(n, stacks, tmp) for n in sizes]
    print(f"{'nodes':>6} {'batches':>8} {'samples':>9} {'wall s':>7} {'batch/s':>8} "
          f"{'samples/s':>10} {'B/batch':>8} {'RSS MB':>7} {'peak MB':>8} {'db MB':>6} "
          f"{'read ms':>7} {'svc ms':>8}")
    for r in results:
        print(f"{r['nodes']:>6} {r['batches']:>8} {r['samples']:>9} {r['wall_s']:>7} "
              f"{r['batches_per_s']:>8} {r['samples_per_s']:>10} {r['bytes_per_batch']:>8} "
              f"{r['rss_mb']:>7} {r['rss_peak_mb']:>8} {r['db_mb']:>6} "
              f"{r['read_target_ms']:>7} {r['read_service_ms']:>8}"
              + (f"  FAILURES {r['failures']}: {r.get('first_failure')}" if r["failures"]
                 else ""))
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results" / f"aggregate-{stamp}.json"
    out.write_text(json.dumps(dict(targets=TARGETS, conns=CONNS,
                                   results=results), indent=1) + "\n")


if __name__ == "__main__":
    main()
