"""The aggregator's ClickHouse store against a real clickhouse-server started here: exact
totals across a SIGKILL of ClickHouse mid-ingest, one count for a batch sent to two
aggregators sharing it, day partitions dropped by retention, bounded queries that say they
are partial, and clear errors at start. (test_aggregate.py runs its tests on both stores.)"""
import http.client
import signal
import subprocess
import threading
import time

import pytest

from clickhouse import ClickHouse
from fleet import Aggregator, batch, encode, folded, HEADERS
from helpers import APERTURE

NOW = int(time.time())
A = ("app", "main", "work")


def target(pid, counts, **kw):
    return dict(pid=pid, profiles={"cpu": counts}, **kw)


@pytest.fixture(scope="module")
def ch(scratch):
    server = ClickHouse(scratch / "clickhouse").start()
    yield server
    server.remove()


def status_of(agg):
    text = agg.get("/status", None)[1].decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


def post_until_acked(agg, body, seen):
    """POSTs body as a node's spool does: again after a 503 (noting its Retry-After) or a
    refused connection, until it is acknowledged."""
    while True:
        try:
            status, data, r = agg.request("POST", "/v1/batches", body, None, HEADERS)
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
            continue
        if status == 200:
            return data
        assert status == 503 and r.getheader("Retry-After"), (status, data)
        seen.append(data)
        time.sleep(0.1)


def test_clickhouse_killed_mid_ingest_totals_exact(ch, scratch):
    """A node's batches keep coming while ClickHouse is SIGKILLed and restarted: the
    aggregator answers 503 + Retry-After meanwhile (reads 503 too, /status still answers),
    the sender retries, and afterwards every stack's total is exactly what was sent."""
    d = scratch / "kill"
    d.mkdir()
    a = Aggregator(d, store=ch.url("kill")).start()
    sent, refused, acks = {}, [], []
    bodies = []
    for seq in range(1, 41):
        targets = []
        for pid in range(10, 14):
            counts = {NOW - 200 + seq: {A + (f"f{seq % 7}",): seq, A: pid}}
            targets.append(target(pid, counts, comm="svc"))
            for stack, n in counts[NOW - 200 + seq].items():
                sent[";".join(stack)] = sent.get(";".join(stack), 0) + n
        bodies.append(encode(batch("n1", "boot-k", seq, targets)))

    def sender():
        for body in bodies:
            acks.append(post_until_acked(a, body, refused))
    try:
        t = threading.Thread(target=sender)
        t.start()
        while len(acks) < 10:
            time.sleep(0.01)
        ch.stop(signal.SIGKILL)
        down = a.get("/services/svc/cpu.folded", None)
        assert down[0] == 503 and b"the store failed" in down[1], down
        assert "store_error: " in a.get("/status", None)[1].decode()
        time.sleep(1)
        ch.start()
        t.join(120)
        assert not t.is_alive()
        assert refused, "ClickHouse was down and nothing was refused"
        assert all(x.startswith(b'{"status":"applied"') for x in acks), acks
        assert folded(a.get("/services/svc/cpu.folded", None)[1]) == sent
        assert status_of(a)["batches_stored"] == "40"
        # a replay of everything now changes nothing
        for body in bodies[:5]:
            assert a.post(body, None) == (200, b'{"status":"duplicate"}')
        assert folded(a.get("/services/svc/cpu.folded", None)[1]) == sent
    finally:
        a.stop()


def test_two_aggregators_share_one_clickhouse(ch, scratch):
    """The same batch replayed to two aggregators on one database counts once in both;
    sent to both at once from many clients, it still counts once."""
    d1, d2 = scratch / "two-a", scratch / "two-b"
    d1.mkdir()
    d2.mkdir()
    a1 = Aggregator(d1, store=ch.url("shared")).start()
    a2 = Aggregator(d2, store=ch.url("shared")).start()
    try:
        b = batch("n1", "boot-s", 1, [target(50, {NOW - 30: {A: 7}}, comm="shared")])
        assert a1.post(b, None)[1].startswith(b'{"status":"applied"')
        assert a2.post(b, None) == (200, b'{"status":"duplicate"}')
        answers = []
        bodies = [encode(batch("n1", "boot-s", seq, [target(50, {NOW - 30 + seq: {A: seq}},
                                                           comm="shared")]))
                  for seq in (2, 3, 4)]

        def client(agg):
            for body in bodies:
                answers.append(agg.post(body, None)[1])
        threads = [threading.Thread(target=client, args=(agg,)) for agg in (a1, a2) * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(x.startswith(b'{"status":"') for x in answers), answers
        assert sum(x.startswith(b'{"status":"applied"') for x in answers) >= 3
        want = {"app;main;work": 7 + 2 + 3 + 4}
        # what a crash mid-apply leaves: an attempt's rows without its mark; never counted
        ch.query("INSERT INTO shared.samples SELECT sec, service, type, node, target, stack,"
                 " count * 100, 12345 FROM shared.samples")
        ch.query("INSERT INTO shared.blocking SELECT * FROM shared.blocking")
        for agg in (a1, a2):
            assert folded(agg.get("/nodes/n1/targets/50/cpu.folded", None)[1]) == want
            assert folded(agg.get("/services/shared/cpu.folded", None)[1]) == want
            assert status_of(agg)["batches_stored"] == "4"
    finally:
        a1.stop()
        a2.stop()


def test_retention_drops_day_partitions(ch, scratch):
    """Seconds two days old live in their own day partition, in samples and in its
    rollups; an aggregator restarted with one day's retention neither returns them nor
    keeps their partitions."""
    d = scratch / "days"
    d.mkdir()
    a = Aggregator(d, store=ch.url("days") + "?roll_every=1").start()
    old_day = (NOW - 2 * 86400) // 86400
    parts = ("SELECT DISTINCT partition FROM system.parts WHERE database = 'days' AND"
             " table = '{}' AND active ORDER BY partition")
    tables = ("samples", "samples_1m", "samples_1h", "bucket_marks", "rolls")
    try:
        for seq, sec, n in ((1, NOW - 2 * 86400, 3), (2, NOW - 5, 1)):
            assert a.post(batch("n1", "boot-d", seq, [target(9, {sec: {A: n}})]), None)[0] == 200
        deadline = time.monotonic() + 30
        while not all(str(old_day) in ch.query(parts.format(t)).split() for t in tables):
            assert time.monotonic() < deadline, "the old day was not rolled"
            time.sleep(0.2)
        a.stop()
        a.start(["--retention-days", "1"])
        assert folded(a.get("/nodes/n1/targets/9/cpu.folded", None)[1]) == {"app;main;work": 1}
        for t in tables:
            assert str(old_day) not in ch.query(parts.format(t)).split(), t
        assert ch.query(parts.format("samples")).split() == [str((NOW - 5) // 86400)]
        assert "store_table_samples: rows 1," in a.get("/status", None)[1].decode()
    finally:
        a.stop()


def test_queries_past_a_limit_say_partial(ch, scratch):
    """Past max_stacks the heaviest stacks are kept and one frame says how much was left
    out; past max_rows_to_read the answer comes back bounded and says so."""
    d = scratch / "limits"
    d.mkdir()
    counts = {A + (f"s{i}",): n for i, n in enumerate((50, 40, 30, 20, 10))}
    a = Aggregator(d, store=ch.url("limits") + "?max_stacks=2").start()
    try:
        assert a.post(batch("n1", "boot-l", 1, [target(5, {NOW - 9: counts})]), None)[0] == 200
        assert folded(a.get("/nodes/n1/targets/5/cpu.folded", None)[1]) == {
            "app;main;work;s0": 50, "app;main;work;s1": 40,
            "[partial: only the heaviest 2 stacks]": 60}
        a.stop()
        a.store = ch.url("limits") + "?max_rows_to_read=1"
        a.start()
        text = a.get("/nodes/n1/targets/5/cpu.folded", None)[1].decode()
        assert "[partial: the query stopped at its limit of 1 rows or 10 s] 1" in text
    finally:
        a.stop()


def test_clear_errors_at_start(ch, scratch):
    """No server, a newer schema, a table that is not ours: the aggregator says which and
    exits 1."""
    def start(url):
        return subprocess.run([str(APERTURE), "aggregate", "--insecure", "--listen",
                               "127.0.0.1:0", "--store", url], capture_output=True, timeout=30)
    out = start("clickhouse://127.0.0.1:1/x")
    assert out.returncode == 1 and b"ClickHouse at http://127.0.0.1:1/" in out.stderr, out
    ch.query("CREATE DATABASE newer")
    ch.query("CREATE TABLE newer.schema_version (version UInt32, applied UInt32)"
             " ENGINE = TinyLog")
    ch.query("INSERT INTO newer.schema_version VALUES (99, 0)")
    out = start(ch.url("newer"))
    assert out.returncode == 1 and b"schema version 99, newer than this" in out.stderr, out
    ch.query("CREATE DATABASE foreign")
    ch.query("CREATE TABLE foreign.samples (sec UInt32, x String) ENGINE = TinyLog")
    out = start(ch.url("foreign"))
    assert out.returncode == 1 and b"table foreign.samples is not this" in out.stderr, out
    out = start(ch.url("bad-name"))
    assert out.returncode == 1 and b"letters, digits and _" in out.stderr, out


def test_clickhouse_stalled_at_insert_then_retried(ch, scratch):
    """ClickHouse stopped (SIGSTOP) while a batch is applied: past the store's timeout the
    node gets 503 + Retry-After; whatever the server then finishes of that attempt, the
    retry leaves the batch counted once."""
    d = scratch / "stall"
    d.mkdir()
    a = Aggregator(d, store=ch.url("stall") + "?timeout=1").start()
    try:
        assert a.post(batch("n1", "boot-t", 1, [target(3, {NOW - 9: {A: 2}})]), None)[0] == 200
        b = encode(batch("n1", "boot-t", 2, [target(3, {NOW - 8: {A: 5}})]))
        ch.proc.send_signal(signal.SIGSTOP)
        try:
            status, data, r = a.request("POST", "/v1/batches", b, None, HEADERS)
        finally:
            ch.proc.send_signal(signal.SIGCONT)
        assert status == 503 and r.getheader("Retry-After"), (status, data)
        assert a.post(b, None)[0] == 200
        assert a.post(b, None) == (200, b'{"status":"duplicate"}')
        assert folded(a.get("/nodes/n1/targets/3/cpu.folded", None)[1]) == {"app;main;work": 7}
    finally:
        a.stop()


STALE = ("SELECT count() FROM (SELECT res, bucket, count() AS n FROM {db}.bucket_marks GROUP BY"
         " res, bucket) ANY LEFT JOIN (SELECT res, bucket, max(marks) AS rolled FROM"
         " {db}.rolls GROUP BY res, bucket) USING (res, bucket) WHERE n != rolled")


def wait_rolled(ch, db):
    """Until every minute and hour with a mark has a roll that saw all its marks."""
    deadline = time.monotonic() + 30
    while ch.query(STALE.format(db=db)).strip() != "0":
        assert time.monotonic() < deadline, "buckets still not rolled"
        time.sleep(0.2)


def test_rollups_read_exactly_the_raw_table(ch, scratch):
    """A service over whole hours and minutes read through the rollups (aggregator a)
    equals the raw table's read (b, roll_every=0) and what was sent: a duplicate, an
    attempt cut short and a racing attempt that lost are counted once, before and after
    their buckets are rolled again; rows planted in the rolls show the reads used them."""
    h0 = (NOW // 3600 - 3) * 3600
    da, db_ = scratch / "roll-a", scratch / "roll-b"
    da.mkdir()
    db_.mkdir()
    a = Aggregator(da, store=ch.url("roll") + "?roll_every=1").start()
    b = Aggregator(db_, store=ch.url("roll") + "?roll_every=0").start()
    secs = [[h0 - 30, h0 + 5, h0 + 100], [h0 + 1800, h0 + 3599], [h0 + 3610, h0 + 3670,
                                                                    h0 + 3725]]
    sent = {}
    try:
        for seq, group in enumerate(secs, 1):
            counts = {}
            for k, sec in enumerate(group):
                counts[sec] = {A + (f"f{k}",): seq * 10 + k, A: 1}
                for stack, n in counts[sec].items():
                    sent[";".join(stack)] = sent.get(";".join(stack), 0) + n
            body = encode(batch("n1", "boot-r", seq, [target(7, counts, comm="rolled")]))
            assert a.post(body, None)[1].startswith(b'{"status":"applied"')
        assert a.post(body, None) == (200, b'{"status":"duplicate"}')
        # an attempt cut short (rows, no mark), and a complete one that lost the race
        ch.query("INSERT INTO roll.samples SELECT sec, service, type, node, target, stack,"
                 " count * 100, 12345 FROM roll.samples")
        ch.query("INSERT INTO roll.samples SELECT sec, service, type, node, target, stack,"
                 " count, 777 FROM roll.samples WHERE attempt = (SELECT attempt FROM"
                 " roll.batches WHERE seq = 1)")
        ch.query("INSERT INTO roll.batches (node, boot_id, seq, attempt, marked, min_sec,"
                 " max_sec) SELECT node, boot_id, seq, 777, marked + 1, min_sec, max_sec"
                 " FROM roll.batches WHERE seq = 1")
        path = f"/services/rolled/cpu.folded?from={h0 - 45}&until={h0 + 3730}"
        for restart in (False, True):
            if restart:  # its sweep at start rolls what the racing mark made stale
                a.stop()
                a.start()
            else:
                time.sleep(1.5)
            if restart:
                wait_rolled(ch, "roll")
            assert folded(a.get(path, None)[1]) == sent
            assert folded(b.get(path, None)[1]) == sent
            cut = f"/services/rolled/cpu.folded?from={h0 + 50}&until={h0 + 3680}"
            assert folded(a.get(cut, None)[1]) == folded(b.get(cut, None)[1])
        fresh = ("SELECT min(roll) FROM roll.rolls WHERE res = {res} AND bucket = {b} AND"
                 " marks = (SELECT max(marks) FROM roll.rolls WHERE res = {res} AND"
                 " bucket = {b})")  # the roll readers take
        for table, res, bucket, n in (("samples_1h", 3600, h0, 1000),
                                      ("samples_1m", 60, h0 + 3600, 100)):
            ch.query(f"INSERT INTO roll.{table} SELECT bucket, service, type, stack, {n},"
                     f" roll FROM roll.{table} WHERE bucket = {bucket} AND roll = ("
                     + fresh.format(res=res, b=bucket) + ") LIMIT 1")
        total = sum(folded(a.get(path, None)[1]).values())
        assert total == sum(sent.values()) + 1100
        assert folded(b.get(path, None)[1]) == sent
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("version", [1, 2])
def test_older_schema_upgraded(ch, scratch, version):
    """A database of schema 1 (no bucket_marks, no stacks.at_lines) or 2 (no at_lines): the
    aggregator adds what is missing, fills bucket_marks from the marks already there,
    records version 3, reads what was stored before, and keeps the lines of what comes next
    apart from the same frames without lines."""
    db = f"up{version}"
    d = scratch / db
    d.mkdir()
    a = Aggregator(d, store=ch.url(db) + "?roll_every=0").start()
    try:
        assert a.post(batch("n1", "boot-u", 1, [target(4, {NOW - 99: {A: 6}})]), None)[0] == 200
        a.stop()
        older = [f"DROP TABLE {db}.bucket_marks_mv", f"DROP TABLE {db}.bucket_marks"] \
            if version == 1 else []
        for sql in older + [f"ALTER TABLE {db}.stacks DROP COLUMN at_lines",
                            f"DROP TABLE {db}.schema_version",
                            f"CREATE TABLE {db}.schema_version (version UInt32, applied UInt32)"
                            " ENGINE = TinyLog",
                            f"INSERT INTO {db}.schema_version VALUES ({version}, 0)"]:
            ch.query(sql)
        a.start()
        assert ch.query(f"SELECT max(version) FROM {db}.schema_version") == "3\n"
        assert folded(a.get("/nodes/n1/targets/4/cpu.folded", None)[1]) == {"app;main;work": 6}
        b = batch("n1", "boot-u", 2, [target(4, {NOW - 98: {A: 4}})])
        b.stacks[0].lines.extend([0, 12, 34])
        assert a.post(b, None)[0] == 200
        assert folded(a.get("/nodes/n1/targets/4/cpu.folded", None)[1]) == {"app;main;work": 10}
        assert ch.query(f"SELECT at_lines FROM {db}.stacks FINAL ORDER BY length(at_lines)") \
            == "[]\n[0,12,34]\n"
    finally:
        a.stop()
