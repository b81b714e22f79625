#!/usr/bin/python3
"""The aggregator's ClickHouse store against its SQLite store, from one run.

1. Ingest: the same replayed batches (bench/aggregate.py's: a recorded profile's stacks, 99
   samples a second per target, one batch per node per 10 s) POSTed by CONNS clients to an
   aggregator on SQLite, then to one on ClickHouse (100 nodes), and in the other order for
   1,000 nodes: samples/s, and bytes on disk per sample (the SQLite file with its WAL;
   ClickHouse's parts of the database as they stand, then after OPTIMIZE ... FINAL).
2. Query: HOURS_Q (25: a day ending early still has data throughout) hours of NODES_Q
   (100) nodes at 99 Hz, SERVICES_Q (1) services with one target on each node,
   STACKS_PER_S stacks a second, written straight into ClickHouse with INSERT ... SELECT
   from numbers() (the store's own path would take hours here), the batches' marks too
   (the store's view copies them into bucket_marks); then an aggregator started on it
   rolls every minute and hour (timed). GET /services/svc0/cpu.folded over
   the last 1, 6 and 24 hours, and 24 hours ending 1234 s earlier (QUERY_HOURS), through
   that aggregator (rollups) and one with roll_every=0 (the raw table), alternating: median
   and p95, each answer's total checked and the two answers compared; rows read from
   system.query_log; bytes on disk per table.
3. Scale-out: the 1,000 nodes' batches spread over 1, 2 and 4 aggregator processes on one
   ClickHouse (each node always to the same one), total samples/s.

    sudo bench/clickhouse.py
Environment: NODES_Q (100), SERVICES_Q (1), HOURS_Q (25), QUERY_HOURS (1,6,24,24@1234: H@S
ends S seconds early), STACKS_PER_S (distinct stacks per target-second, 10), REPS (20; the
raw reads of 6 and 24 h fewer), INGEST_NODES (100,1000), CONNS (16), AGG_THREADS (each
aggregator's --threads, 16: as many as clients, so batches arriving together can share a
group), SKIP (parts to skip: ingest,query,scale).
"""
import http.client
import json
import math
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
from fleet import Aggregator, HEADERS, folded  # noqa: E402

CONNS = int(os.environ.get("CONNS", 16))
NODES_Q = int(os.environ.get("NODES_Q", 100))
SERVICES_Q = int(os.environ.get("SERVICES_Q", 1))
HOURS_Q = int(os.environ.get("HOURS_Q", 25))
# "H@S": H hours ending S seconds before the data's end (not on a minute or hour)
QUERY_HOURS = [tuple(int(x) for x in (h + "@0").split("@")[:2])
               for h in os.environ.get("QUERY_HOURS", "1,6,24,24@1234").split(",")]
STACKS_PER_S = int(os.environ.get("STACKS_PER_S", 10))
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


def load_hours(ch, db, stacks, start):
    """HOURS_Q hours of NODES_Q nodes x SERVICES_Q targets (one per service), STACKS_PER_S
    stacks a second summing to 99, with the batches (one per node per 10 s) that make those
    rows count (their marks reach bucket_marks through the store's view)."""
    ch.query(f"CREATE DATABASE IF NOT EXISTS {db}")
    items = sorted(stacks.items(), key=lambda kv: -kv[1])
    rows = []
    secs = HOURS_Q * 3600
    for k, (st, _) in enumerate(items):
        rows.append(json.dumps(dict(seen=start + secs, hash=k + 1, names=list(st),
                                    files=[""] * len(st), lines=[0] * len(st),
                                    modules=[""] * len(st), build_ids=[""] * len(st))))
    nstacks = len(items)
    weights = [99 // STACKS_PER_S + (1 if k < 99 % STACKS_PER_S else 0)
               for k in range(STACKS_PER_S)]
    ch.query_body(f"INSERT INTO {db}.stacks FORMAT JSONEachRow", "\n".join(rows))
    n = NODES_Q * SERVICES_Q * secs * STACKS_PER_S
    t0 = time.monotonic()
    ch.query(f"""INSERT INTO {db}.samples SELECT {start} + s AS sec,
        concat('svc', toString(t)) AS service, 0, concat('node', toString(nd)),
        nd * 100 + t + 1, (s * 7 + nd * 13 + t * 3 + k * 11) % {nstacks} + 1,
        {weights}[k + 1], nd * 1000000 + intDiv(s, 10) + 1
        FROM (SELECT number % {STACKS_PER_S} AS k, intDiv(number, {STACKS_PER_S}) % {secs} AS s,
              intDiv(number, {STACKS_PER_S * secs}) % {SERVICES_Q} AS t,
              intDiv(number, {STACKS_PER_S * secs * SERVICES_Q}) AS nd FROM numbers({n}))""",
             timeout=7200)
    ch.query(f"""INSERT INTO {db}.batches (node, boot_id, seq, attempt, marked, received,
        bord, min_sec, max_sec, samples) SELECT concat('node', toString(nd)), 'boot',
        b + 1, nd * 1000000 + b + 1, 1, {start + secs}, 1, {start} + b * 10,
        {start} + b * 10 + 9, {SERVICES_Q} * 99 * 10
        FROM (SELECT number % {secs // 10} AS b, intDiv(number, {secs // 10}) AS nd
              FROM numbers({NODES_Q * secs // 10}))""", timeout=600)
    ch.query(f"""INSERT INTO {db}.targets (node, pid, target, service, comm, state, ver,
        last_seen) SELECT concat('node', toString(nd)), 1000 + t, nd * 100 + t + 1,
        concat('svc', toString(t)), concat('svc', toString(t)), 'enabled', 1, {start + secs}
        FROM (SELECT number % {SERVICES_Q} AS t, intDiv(number, {SERVICES_Q}) AS nd
              FROM numbers({NODES_Q * SERVICES_Q}))""")
    load_s = time.monotonic() - t0
    return n, load_s


STALE = ("SELECT count() FROM (SELECT res, bucket, count() AS n FROM {db}.bucket_marks GROUP BY"
         " res, bucket) ANY LEFT JOIN (SELECT res, bucket, max(marks) AS rolled FROM"
         " {db}.rolls GROUP BY res, bucket) USING (res, bucket) WHERE n != rolled")


def table_bytes(ch, db):
    out = {}
    for line in ch.query(f"SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts"
                         f" WHERE database = '{db}' AND active GROUP BY table").splitlines():
        table, rows, size = line.split("\t")
        out[table] = dict(rows=int(rows), mb=round(int(size) / 2**20, 2))
    return out


def ch_reads(ch, since):
    """What the ClickHouse queries since `since` (unix s) read: the profile query's rows
    and time, and all of the request's queries' rows."""
    time.sleep(1.2)  # query_log flushes every 0.5 s
    rows = ch.query("SELECT query LIKE 'SELECT stack, sum(count) AS n FROM (%', read_rows,"
                    " read_bytes, query_duration_ms FROM system.query_log WHERE type = 2 AND"
                    f" event_time >= {since} AND query NOT LIKE '%system.query_log%'")
    out = dict(read_rows_all=0)
    for line in rows.splitlines():
        main, read, nbytes, ms = (int(x) for x in line.split("\t"))
        out["read_rows_all"] += read
        if main:
            out.update(read_rows=read, read_mb=round(nbytes / 2**20, 1), clickhouse_ms=ms)
    return out


def get(agg, path):
    """A GET with a long timeout: a day read from the raw table takes a while here."""
    c = http.client.HTTPConnection("127.0.0.1", agg.port, timeout=1800)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def query(ch, tmp, stacks):
    db = "day"
    start = (int(time.time()) // 3600 - HOURS_Q - 2) * 3600
    roll = Aggregator(Path(tmp) / "query-roll", store=ch.url(db) + "?roll_every=5")
    raw = Aggregator(Path(tmp) / "query-raw",
                     store=ch.url(db) + "?roll_every=0&max_execution_time=600")
    for agg in (roll, raw):
        agg.dir.mkdir()
    raw.start()  # creates the schema
    rows, load_s = load_hours(ch, db, stacks, start)
    out = dict(nodes=NODES_Q, services=SERVICES_Q, hours=HOURS_Q, stacks_per_s=STACKS_PER_S,
               rows_loaded=rows, load_s=round(load_s, 1))
    print(json.dumps(out), flush=True)
    t0 = time.monotonic()
    roll.start()  # its sweep at start finds every bucket stale and rolls it
    while ch.query(STALE.format(db=db)).strip() != "0":
        time.sleep(1)
    out["roll_s"] = round(time.monotonic() - t0, 1)
    out["tables"] = table_bytes(ch, db)
    print(json.dumps(out), flush=True)
    out["ranges"] = []
    for hours, early in QUERY_HOURS:
        until = start + HOURS_Q * 3600 - 1 - early
        frm = until + 1 - hours * 3600
        path = f"/services/svc0/cpu.folded?from={frm}&until={until}"
        want = NODES_Q * (until - max(frm, start) + 1) * 99
        reps = dict(rollup=REPS, raw=REPS if hours <= 1 else max(3, REPS * 2 // hours))
        times = dict(rollup=[], raw=[])
        answers = {}
        for i in range(max(reps.values())):
            for name, agg in (("rollup", roll), ("raw", raw)) if i % 2 else (("raw", raw),
                                                                             ("rollup", roll)):
                if i >= reps[name]:
                    continue
                t1 = time.monotonic()
                status, body = get(agg, path)
                times[name].append(time.monotonic() - t1)
                assert status == 200, body[:300]
                answers[name] = folded(body)
                assert sum(answers[name].values()) == want, (name, hours, want)
        assert answers["rollup"] == answers["raw"], "the rollups' answer is not the raw one"
        r = dict(hours=hours, ends_early_s=early, samples=want)
        for name, agg in (("rollup", roll), ("raw", raw)):
            ts = sorted(times[name])
            since = int(time.time()) + 1  # query_log's times are whole seconds
            time.sleep(since + 0.05 - time.time())
            get(agg, path)
            r[name] = dict(reps=len(ts), median_ms=round(statistics.median(ts) * 1000),
                           p95_ms=round(ts[max(0, math.ceil(len(ts) * 0.95) - 1)] * 1000),
                           **ch_reads(ch, since))
        print(json.dumps(r), flush=True)
        out["ranges"].append(r)
    roll.stop()
    raw.stop()
    return out


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
