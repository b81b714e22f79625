#!/usr/bin/python3
"""The aggregator's ClickHouse store against its SQLite store, from one run.

1. Ingest: the same replayed batches (bench/aggregate.py's: a recorded profile's stacks, 99
   samples a second per target, one batch per node per 10 s) POSTed by CONNS clients to an
   aggregator on SQLite, then to one on ClickHouse (100 nodes), and in the other order for
   1,000 nodes: samples/s, and bytes on disk per sample (the SQLite file with its WAL;
   ClickHouse's parts of the database as they stand, then after OPTIMIZE ... FINAL).
2. Query: one hour of NODES_Q nodes x 20 targets at 99 Hz (20 services, one target of each
   per node), loaded straight into ClickHouse with INSERT ... SELECT (loading it through the
   aggregator would take longer than the bench may), then GET /services/svc0/cpu.folded for
   the hour through the aggregator REPS times: median and p95, with ClickHouse's own share of
   each from system.query_log.
3. Scale-out: the 1,000 nodes' batches spread over 1, 2 and 4 aggregator processes on one
   ClickHouse (each node always to the same one), total samples/s.

    sudo bench/clickhouse.py
Environment: NODES_Q (100), STACKS_PER_S (distinct stacks per target-second, 20), REPS (20),
INGEST_NODES (100,1000), CONNS (16), AGG_THREADS (each aggregator's --threads, 16: as many as clients, so batches
arriving together can share a group), SKIP (parts to skip: ingest,query,scale).
"""
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
from aggregate import fleet_bodies, record_profile  # noqa: E402
from clickhouse import ClickHouse  # noqa: E402
from fleet import Aggregator, HEADERS  # noqa: E402

CONNS = int(os.environ.get("CONNS", 16))
NODES_Q = int(os.environ.get("NODES_Q", 100))
STACKS_PER_S = int(os.environ.get("STACKS_PER_S", 20))
REPS = int(os.environ.get("REPS", 20))
AGG_THREADS = os.environ.get("AGG_THREADS", "16")
SKIP = set(os.environ.get("SKIP", "").split(","))
INGEST_NODES = [int(n) for n in os.environ.get("INGEST_NODES", "100,1000").split(",")]
TARGETS = 2
BATCHES = 3000


def make_bodies(nodes, stacks):
    return fleet_bodies(nodes, max(1, BATCHES // nodes), stacks, TARGETS)


def post_all(aggs, bodies):
    """POSTs every body, node i's to aggs[i % len(aggs)], from CONNS threads; the wall time."""
    queue, lock, failures = list(reversed(bodies)), threading.Lock(), []

    def worker():
        conns = {}
        while True:
            with lock:
                if not queue:
                    break
                node, body = queue.pop()
            agg = aggs[node % len(aggs)]
            c = conns.setdefault(agg.port, http.client.HTTPConnection("127.0.0.1", agg.port,
                                                                       timeout=300))
            c.request("POST", "/v1/batches", body, HEADERS)
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                with lock:
                    failures.append((r.status, data[:200]))
        for c in conns.values():
            c.close()
    threads = [threading.Thread(target=worker) for _ in range(CONNS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    assert not failures, failures[:3]
    return wall


def ch_bytes(ch, db):
    return int(ch.query(f"SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '{db}'"
                        " AND active"))


def ingest(ch, tmp, nodes, stacks, order):
    bodies, samples = make_bodies(nodes, stacks)
    out = dict(nodes=nodes, batches=len(bodies), samples=samples)
    for kind in order:
        d = Path(tmp) / f"ingest-{kind}-{nodes}"
        d.mkdir()
        db = f"ingest{nodes}"
        agg = Aggregator(d, store=ch.url(db) if kind == "clickhouse" else None,
                         extra=["--threads", AGG_THREADS]).start()
        wall = post_all([agg], bodies)
        agg.stop()
        out[f"{kind}_samples_per_s"] = round(samples / wall)
        if kind == "sqlite":
            size = sum(p.stat().st_size for p in d.glob("agg.db*"))
        else:
            size = ch_bytes(ch, db)
            for table in ("samples", "stacks", "batches", "targets"):
                ch.query(f"OPTIMIZE TABLE {db}.{table} FINAL", timeout=600)
            out["clickhouse_bytes_per_sample_merged"] = round(ch_bytes(ch, db) / samples, 3)
        out[f"{kind}_bytes_per_sample"] = round(size / samples, 3)
    return out


def load_hour(ch, db, stacks, start):
    """One hour of NODES_Q nodes x 20 targets, STACKS_PER_S stacks a second summing to 99,
    with the batches (one per node per 10 s) that make those rows count."""
    ch.query(f"CREATE DATABASE IF NOT EXISTS {db}")
    items = sorted(stacks.items(), key=lambda kv: -kv[1])
    rows = []
    for k, (st, _) in enumerate(items):
        rows.append(json.dumps(dict(seen=start + 3600, hash=k + 1, names=list(st),
                                    files=[""] * len(st), lines=[0] * len(st),
                                    modules=[""] * len(st), build_ids=[""] * len(st))))
    nstacks = len(items)
    weights = [99 // STACKS_PER_S + (1 if k < 99 % STACKS_PER_S else 0)
               for k in range(STACKS_PER_S)]
    ch.query_body(f"INSERT INTO {db}.stacks FORMAT JSONEachRow", "\n".join(rows))
    n = NODES_Q * 20 * 3600 * STACKS_PER_S
    t0 = time.monotonic()
    ch.query(f"""INSERT INTO {db}.samples SELECT {start} + s AS sec,
        concat('svc', toString(t)) AS service, 0, concat('node', toString(nd)),
        nd * 100 + t + 1, (s * 7 + nd * 13 + t * 3 + k * 11) % {nstacks} + 1,
        {weights}[k + 1], nd * 1000000 + intDiv(s, 10) + 1
        FROM (SELECT number % {STACKS_PER_S} AS k, intDiv(number, {STACKS_PER_S}) % 3600 AS s,
              intDiv(number, {STACKS_PER_S * 3600}) % 20 AS t,
              intDiv(number, {STACKS_PER_S * 3600 * 20}) AS nd FROM numbers({n}))""",
             timeout=3600)
    ch.query(f"""INSERT INTO {db}.batches (node, boot_id, seq, attempt, marked, received,
        bord, min_sec, max_sec, samples) SELECT concat('node', toString(nd)), 'boot',
        b + 1, nd * 1000000 + b + 1, 1, {start + 3600}, 1, {start} + b * 10,
        {start} + b * 10 + 9, 20 * 99 * 10
        FROM (SELECT number % 360 AS b, intDiv(number, 360) AS nd FROM numbers({NODES_Q * 360}))""")
    ch.query(f"""INSERT INTO {db}.targets (node, pid, target, service, comm, state, ver,
        last_seen) SELECT concat('node', toString(nd)), 1000 + t, nd * 100 + t + 1,
        concat('svc', toString(t)), concat('svc', toString(t)), 'enabled', 1, {start + 3600}
        FROM (SELECT number % 20 AS t, intDiv(number, 20) AS nd FROM numbers({NODES_Q * 20}))""")
    load_s = time.monotonic() - t0
    return n, load_s, NODES_Q * 3600 * 99


def query(ch, tmp, stacks):
    db = "hour"
    start = (int(time.time()) // 3600 - 2) * 3600
    d = Path(tmp) / "query"
    d.mkdir()
    agg = Aggregator(d, store=ch.url(db)).start()  # creates the schema
    rows, load_s, want = load_hour(ch, db, stacks, start)
    path = f"/services/svc0/cpu.folded?from={start}&until={start + 3599}"
    times = []
    for _ in range(REPS):
        t0 = time.monotonic()
        status, body = agg.get(path, None)
        times.append(time.monotonic() - t0)
        assert status == 200, body[:300]
        total = sum(int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines())
        assert total == want, (total, want)
    agg.stop()
    time.sleep(1.5)  # query_log flushes every 0.5 s
    log = ch.query("SELECT substring(query, 1, 22), quantileExact(0.5)(query_duration_ms),"
                   " max(read_rows), max(memory_usage) FROM system.query_log WHERE type = 2"
                   " AND query LIKE 'SELECT % FORMAT JSONCompact' AND event_time >="
                   " now() - 600 AND (query LIKE '%samples%svc0%' OR query LIKE"
                   " '%FROM stacks WHERE hash IN%') GROUP BY substring(query, 1, 22)")
    parts = {}
    for line in log.strip().splitlines():
        name, ms, read, mem = line.split("\t")
        parts[name] = dict(median_ms=float(ms), read_rows=int(read), memory_mb=round(
            int(mem) / 2**20, 1))
    times.sort()
    return dict(nodes=NODES_Q, targets_per_node=20, rows_loaded=rows,
                load_s=round(load_s, 1), rows_per_query=rows // 20,
                samples_per_query=want, reps=REPS,
                median_ms=round(statistics.median(times) * 1000),
                p95_ms=round(times[max(0, int(len(times) * 0.95) - 1)] * 1000),
                clickhouse=parts,
                disk_mb=round(ch_bytes(ch, db) / 2**20, 1))


def scale(ch, tmp, stacks):
    bodies, samples = make_bodies(1000, stacks)
    out = {}
    for n in (1, 2, 4):
        aggs = []
        for i in range(n):
            d = Path(tmp) / f"scale{n}-{i}"
            d.mkdir()
            aggs.append(Aggregator(d, store=ch.url(f"scale{n}"),
                                   extra=["--threads", AGG_THREADS]).start())
        wall = post_all(aggs, bodies)
        for a in aggs:
            a.stop()
        out[f"{n}_aggregators_samples_per_s"] = round(samples / wall)
    return out


def main():
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        stacks = record_profile(tmp)
        print(f"recorded profile: {len(stacks)} distinct stacks")
        ch = ClickHouse(Path(tmp) / "clickhouse", log_queries=True).start()
        try:
            if "ingest" not in SKIP:
                orders = [("sqlite", "clickhouse"), ("clickhouse", "sqlite")]
                results["ingest"] = [ingest(ch, tmp, n, stacks, orders[i % 2])
                                     for i, n in enumerate(INGEST_NODES)]
                for r in results["ingest"]:
                    print(json.dumps(r))
            if "query" not in SKIP:
                results["query"] = query(ch, tmp, stacks)
                print(json.dumps(results["query"]))
            if "scale" not in SKIP:
                results["scale"] = scale(ch, tmp, stacks)
                print(json.dumps(results["scale"]))
        finally:
            ch.remove()
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results" / f"clickhouse-{stamp}.json"
    out.write_text(json.dumps(dict(conns=CONNS, results=results), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
