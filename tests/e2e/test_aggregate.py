"""The aggregator: batches built here with known counts, POSTed to a real `aperture aggregate`
on loopback, read back over HTTP and its FUSE mount."""
import gzip
import json
import os
import signal
import subprocess
import time

import pytest

from clickhouse import ClickHouse
from fleet import Aggregator, batch, encode, folded, HEADERS
from helpers import APERTURE, read, write

TOKENS = """# the test's tokens
n1tok node n1
n2tok node n2
alltok read *
n1read read node:n1
svcread read service:checkout
"""

NOW = int(time.time())
A = ("app", "main", "work")
B = ("app", "main", "idle")


def target(pid, counts, ptype="cpu", **kw):
    return dict(pid=pid, profiles={ptype: counts}, **kw)


def totals(agg):
    status = agg.get("/status", "alltok")[1].decode()
    return dict(line.split(": ", 1) for line in status.splitlines())["samples_stored"]


class Stores:
    """Fresh stores of one kind: a SQLite file per directory, or a database per aggregator
    on one ClickHouse server started for the module."""

    def __init__(self, kind, scratch):
        self.kind = kind
        self.scratch = scratch
        self.server = ClickHouse(scratch / "clickhouse").start() if kind == "clickhouse" else None
        self.n = 0

    def dir(self, name):
        d = self.scratch / f"{name}-{self.kind}"
        d.mkdir()
        return d

    def url(self, d):
        self.n += 1
        return self.server.url(f"agg{self.n}") if self.server else f"sqlite:{d}/agg.db"


@pytest.fixture(scope="module", params=["sqlite", "clickhouse"])
def stores(request, scratch):
    s = Stores(request.param, scratch)
    yield s
    if s.server:
        s.server.remove()


@pytest.fixture(scope="module")
def agg(stores):
    d = stores.dir("main")
    a = Aggregator(d, TOKENS, mount=d / "aggmnt", store=stores.url(d)).start()
    yield a
    a.stop()


def test_counts_over_http_and_fuse_and_services(agg):
    """Two nodes, known counts: each target's cpu.folded has exactly them, over HTTP and in
    the mounted tree byte for byte, and the service's is their sum."""
    b1 = batch("n1", "boot-a", 1, [target(100, {NOW - 30: {A: 30, B: 10}, NOW - 29: {A: 5}},
                                          comm="web", labels={"service": "checkout"})])
    b2 = batch("n2", "boot-b", 1, [target(200, {NOW - 20: {A: 7, B: 3}}, comm="web2",
                                          labels={"service": "checkout"})])
    assert agg.post(b1, "n1tok") == (200, b'{"status":"applied","samples":45}')
    assert agg.post(b2, "n2tok")[0] == 200
    status, body = agg.get("/nodes/n1/targets/100/cpu.folded", "alltok")
    assert status == 200
    assert folded(body) == {"app;main;work": 35, "app;main;idle": 10}
    fuse = (agg.mount / "nodes/n1/targets/100/cpu.folded").read_bytes()
    assert fuse == body
    assert sorted(os.listdir(agg.mount / "nodes")) == ["n1", "n2"]
    svc = agg.get("/services/checkout/cpu.folded", "alltok")[1]
    assert folded(svc) == {"app;main;work": 42, "app;main;idle": 13}
    assert (agg.mount / "services/checkout/cpu.folded").read_bytes() == svc
    # every rendering answers, with its content type; a range that ended renders the same
    # bytes every time (the open one says "up to now")
    write(agg.mount / "nodes/n1/targets/100/window", f"{NOW - 100}..{NOW}")
    for name, ctype in [("cpu.top", "text/plain"), ("cpu.json", "application/json"),
                        ("flame.svg", "image/svg+xml"), ("cpu.pprof", "application/octet-stream"),
                        ("syscalls.json", "application/json"), ("status", "text/plain")]:
        status, data, r = agg.request("GET", f"/nodes/n1/targets/100/{name}?from={NOW - 100}"
                                      f"&until={NOW}", token="alltok")
        assert status == 200 and r.getheader("Content-Type").startswith(ctype), name
        assert (agg.mount / "nodes/n1/targets/100" / name).read_bytes() == data, name
    write(agg.mount / "nodes/n1/targets/100/window", "all")
    listing = agg.get("/nodes/n1/targets/100", "alltok")[1]
    assert b'"name":"cpu.folded","type":"file"' in listing
    assert b'"enable"' not in listing  # no controls on a mirror


def test_duplicates_out_of_order_and_restart(stores):
    """Seqs 3, 1, 2, then 1 again: each counts once; after SIGKILL and a restart a replay is
    still a duplicate and the totals are what they were."""
    d = stores.dir("restart")
    a = Aggregator(d, TOKENS, store=stores.url(d)).start()
    try:
        batches = {seq: batch("n1", "boot-r", seq, [target(300, {NOW - 10 - seq: {A: seq}})])
                   for seq in (1, 2, 3)}
        for seq in (3, 1, 2):
            assert a.post(batches[seq], "n1tok")[1].startswith(b'{"status":"applied"')
        assert a.post(batches[1], "n1tok") == (200, b'{"status":"duplicate"}')
        assert folded(a.get("/nodes/n1/targets/300/cpu.folded", "alltok")[1]) == \
            {"app;main;work": 6}
        a.stop(signal.SIGKILL)
        a.start()
        for seq in (1, 2, 3):
            assert a.post(batches[seq], "n1tok") == (200, b'{"status":"duplicate"}')
        assert folded(a.get("/nodes/n1/targets/300/cpu.folded", "alltok")[1]) == \
            {"app;main;work": 6}
        status = a.get("/nodes/n1/status", "alltok")[1].decode()
        assert "batches: 3\n" in status and "duplicates: 4\n" in status
    finally:
        a.stop()


def test_concurrent_copies_count_once(agg):
    """Twelve clients at once, each sending the same three batches: one copy of each is
    applied, whichever group commit it lands in; the others are duplicates."""
    import threading
    bodies = [encode(batch("n2", "boot-c", seq, [target(800, {NOW - 40 - seq: {A: seq}})]))
              for seq in (1, 2, 3)]
    answers = []

    def client():
        for body in bodies:
            answers.append(agg.post(body, "n2tok")[1])
    threads = [threading.Thread(target=client) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(a.startswith(b'{"status":"applied"') for a in answers) == 3
    assert answers.count(b'{"status":"duplicate"}') == 33
    assert folded(agg.get("/nodes/n2/targets/800/cpu.folded", "alltok")[1]) == \
        {"app;main;work": 6}


def test_latest_state_and_every_file(agg):
    """Texts and statistics are the latest batch's, whatever order batches arrive in; the
    JVM's profiles, syscalls, locks and blocking events come through the same views."""
    def jvm(seq, status, with_data):
        t = target(900, {NOW - 8: {("java", "Alloc.run"): 4096}}, ptype="alloc", comm="java",
                   has_jvm=True, status=status, jvm_status=f"jvm {status}\n",
                   deadlocks=f"deadlock {status}\n")
        if with_data:
            t["sys"] = [dict(kind=0, a=0, b=0, count=7, total_ns=7000, max_ns=2000,
                             hist=[0] * 10 + [7]),
                        dict(kind=1, addr=0x1234, a=5, holder="holder-thread",
                             stack="java;Lock.wait", count=2, total_ns=3000000, max_ns=2000000)]
            t["blocking"] = [dict(time_ns=(NOW - 8) * 10**9, dur_us=50000, tid=901,
                                  thread="worker", stack=("java", "Sleep.run"))]
        return batch("n1", "boot-j", seq, [t])
    assert agg.post(jvm(2, "second", True), "n1tok")[0] == 200
    assert agg.post(jvm(1, "first", False), "n1tok")[0] == 200  # late, older
    base = "/nodes/n1/targets/900"
    get = lambda p: agg.get(base + p, "alltok")[1]
    assert get("/status") == b"second"
    assert get("/jvm/status") == b"jvm second\n"
    assert get("/threads/deadlocks") == b"deadlock second\n"
    assert folded(get("/jvm/alloc.folded")) == {"java;Alloc.run": 8192}
    calls = json.loads(get("/syscalls.json"))["syscalls"]
    assert [(c["name"], c["count"], c["max_ns"]) for c in calls] == [("read", 7, 2000)]
    assert b"holder-thread" in get("/locks.json")
    assert b"Sleep.run" in get("/blocking.json") and b"worker" in get("/blocking.json")
    assert (agg.mount / "nodes/n1/targets/900/jvm/alloc.folded").read_bytes() == \
        get("/jvm/alloc.folded")
    assert b'"jvm"' in agg.get(base, "alltok")[1]
    assert b'"jvm"' not in agg.get("/nodes/n1/targets/100", "alltok")[1]


def test_a_reused_pid_shows_its_newest_incarnation(agg):
    old = target(1200, {NOW - 50: {A: 9}}, start_time=100, comm="old")
    new = target(1200, {NOW - 20: {B: 2}}, start_time=5000, comm="new")
    assert agg.post(batch("n2", "boot-p", 1, [old]), "n2tok")[0] == 200
    assert agg.post(batch("n2", "boot-p", 2, [new]), "n2tok")[0] == 200
    assert folded(agg.get("/nodes/n2/targets/1200/cpu.folded", "alltok")[1]) == \
        {"app;main;idle": 2}
    # each is its own service's, by comm
    assert folded(agg.get("/services/old/cpu.folded", "alltok")[1]) == {"app;main;work": 9}


def test_tokens(agg):
    b = batch("n1", "boot-t", 1, [target(400, {NOW - 5: {A: 1}})])
    assert agg.post(b, None)[0] == 401
    assert agg.post(b, "wrong")[0] == 401
    assert agg.post(b, "n2tok")[0] == 403          # another node's name
    assert agg.post(b, "alltok")[0] == 403         # a read token does not upload
    assert agg.get("/nodes/n1/targets", None)[0] == 401
    assert agg.get("/nodes/n1/targets", "wrong")[0] == 401
    status, body = agg.get("/nodes/n2/targets/200/cpu.folded", "n1read")
    assert status == 403 and b"app" not in body
    assert agg.get("/nodes/n1/targets/100/cpu.folded", "n1read")[0] == 200
    assert b'"n2"' not in agg.get("/nodes", "n1read")[1]
    assert b'"n1"' in agg.get("/nodes", "n1read")[1]
    assert agg.get("/services/checkout/cpu.folded", "n1read")[0] == 403
    assert agg.get("/services/checkout/cpu.folded", "svcread")[0] == 200
    assert agg.get("/nodes/n1/status", "svcread")[0] == 403
    assert agg.get("/nodes/n1/status", "n1tok")[0] == 200  # a node reads its own


def test_bad_input_is_refused_and_stores_nothing(agg):
    before = totals(agg)
    good = batch("n1", "boot-bad", 1, [target(500, {NOW - 5: {A: 1}})])
    raw = good.SerializeToString()
    old = batch("n1", "boot-bad", 2, [target(500, {NOW - 8 * 86400: {A: 1}})])
    future = batch("n1", "boot-bad", 3, [target(500, {NOW + 7200: {A: 1}})])
    deep = batch("n1", "boot-bad", 4, [target(500, {NOW - 5: {tuple(f"f{i}" for i in
                                                                   range(2000)): 1}})])
    v2 = batch("n1", "boot-bad", 5, [target(500, {NOW - 5: {A: 1}})], version=2)
    badtype = batch("n1", "boot-bad", 6, [target(500, {NOW - 5: {A: 1}}, ptype="nope")])
    bomb = gzip.compress(b"\0" * (80 << 20))
    dotdot = batch("..", "boot-bad", 7, [target(500, {NOW - 5: {A: 1}})])
    cases = [
        (b"not gzip at all", HEADERS, 400),
        (encode(good)[:-12], HEADERS, 400),                        # truncated
        (gzip.compress(raw[:-3] + b"\xff\xff\xff"), HEADERS, 400),  # corrupt protobuf
        (encode(good), dict(HEADERS, **{"X-Aperture-Batch-Version": "2"}), 415),
        (encode(v2), HEADERS, 415),
        (bomb, HEADERS, 413),
        (encode(old), HEADERS, 400),
        (encode(future), HEADERS, 400),
        (encode(deep), HEADERS, 413),
        (encode(badtype), HEADERS, 400),
        (encode(dotdot), HEADERS, 400),                              # not a file name
    ]
    for body, headers, code in cases:
        status, reply = agg.post(body, "n1tok", headers)
        assert status == code, (code, reply)
        assert reply.startswith(b'{"error":"'), reply
    # a body said to be past the limit is answered before it is read (curl waits for
    # "100 Continue" and gets the 413 instead)
    big = agg.dir / "big.body"
    big.write_bytes(b"x" * (33 << 20))
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "--data-binary", f"@{big}",
                          "-H", "Authorization: Bearer n1tok", "-H",
                          "Content-Type: application/x-aperture-batch",
                          "-H", "Content-Encoding: gzip", agg.url + "/v1/batches"],
                         capture_output=True, timeout=60)
    assert out.stdout.endswith(b"\n413") and b'"error"' in out.stdout, out
    assert totals(agg) == before
    assert agg.get("/nodes/n1/targets/500/cpu.folded", "alltok")[0] == 404
    # and it keeps serving
    assert agg.post(good, "n1tok")[0] == 200
    assert agg.get("/nodes/n1/targets/500/cpu.folded", "alltok")[1] == b"app;main;work 1\n"


def test_time_ranges(agg):
    now = int(time.time())  # the module's NOW may be minutes old (two stores)
    b = batch("n2", "boot-w", 1, [target(600, {now - 300: {A: 4}, now - 10: {B: 2}})])
    assert agg.post(b, "n2tok")[0] == 200
    path = "/nodes/n2/targets/600/cpu.folded"
    assert folded(agg.get(path, "alltok")[1]) == {"app;main;work": 4, "app;main;idle": 2}
    assert folded(agg.get(path + "?last=60", "alltok")[1]) == {"app;main;idle": 2}
    assert folded(agg.get(f"{path}?from={now - 400}&until={now - 200}", "alltok")[1]) == \
        {"app;main;work": 4}
    assert agg.get(path + "?last=999999999", "alltok")[0] == 400
    assert agg.get(path + f"?from={now}&until={now - 1}", "alltok")[0] == 400
    for view in ("cpu.json", "cpu.svg", "cpu.pprof", "cpu.top"):  # open ends render too
        assert agg.get(path.replace("cpu.folded", view) + f"?from={now - 100}", "alltok")[0] == 200
        assert agg.get(path.replace("cpu.folded", view) + f"?until={now}", "alltok")[0] == 200
    window = agg.mount / "nodes/n2/targets/600/window"
    assert read(window) == "all\n"
    write(window, "60")
    assert folded((agg.mount / "nodes/n2/targets/600/cpu.folded").read_text()) == \
        {"app;main;idle": 2}
    write(window, "all")
    assert read(window) == "all\n"


def test_retention_deletes_old_days(stores):
    """Seconds two days old are kept under 7 days' retention, and deleted by the retention
    pass of an aggregator restarted with 1 day."""
    d = stores.dir("retention")
    a = Aggregator(d, TOKENS, store=stores.url(d)).start()
    try:
        b = batch("n1", "boot-old", 1, [target(700, {NOW - 2 * 86400: {A: 3}, NOW - 5: {B: 1}})])
        assert a.post(b, "n1tok")[0] == 200
        path = "/nodes/n1/targets/700/cpu.folded"
        assert folded(a.get(path, "alltok")[1]) == {"app;main;work": 3, "app;main;idle": 1}
        a.stop()
        a.start(["--retention-days", "1"])
        assert folded(a.get(path, "alltok")[1]) == {"app;main;idle": 1}
        # and what retention no longer keeps is refused, not stored
        assert a.post(batch("n1", "boot-old", 2, [target(700, {NOW - 2 * 86400: {A: 1}})]),
                      "n1tok")[0] == 400
    finally:
        a.stop()


def test_fetch_client_and_https(agg):
    token = agg.dir / "read.token"
    token.write_text("alltok\n")
    out = subprocess.run([str(APERTURE), "fetch", "--token-file", str(token), agg.url,
                          "/nodes/n1/targets/100/cpu.folded"], capture_output=True, check=True)
    assert out.stdout == agg.get("/nodes/n1/targets/100/cpu.folded", "alltok")[1]
    bad = subprocess.run([str(APERTURE), "fetch", agg.url, "/nodes"], capture_output=True)
    assert bad.returncode == 1 and b"401" in bad.stderr
    d = agg.dir / "tls"
    d.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True)
    a = Aggregator(d, TOKENS, extra=["--tls-cert", str(d / "cert.pem"),
                                     "--tls-key", str(d / "key.pem")]).start()
    try:
        url = f"https://127.0.0.1:{a.port}"
        out = subprocess.run([str(APERTURE), "fetch", "--token-file", str(token),
                              "--cacert", str(d / "cert.pem"), url, "/status"],
                             capture_output=True)
        assert out.returncode == 0, out.stderr
        assert b"(https)" in out.stdout
        plain = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                "-H", "Authorization: Bearer alltok",
                                "--cacert", str(d / "cert.pem"), url + "/nodes"],
                               capture_output=True)
        assert plain.stdout == b"200"
    finally:
        a.stop()


def test_insecure_says_so_and_the_page_lists(scratch):
    """--insecure warns on stderr and in status; / in a browser is a page over the API that
    lists the services and every node's targets."""
    d = scratch / "insecure"
    d.mkdir()
    a = Aggregator(d).start()
    try:
        assert a.post(batch("any", "boot-i", 1, [target(77, {NOW - 5: {A: 1}}, comm="svc")]),
                      None)[0] == 200
        assert b"auth: OFF" in a.get("/status", None)[1]
        assert b"WARNING: --insecure" in a.log.read_bytes()
        dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                              "--virtual-time-budget=5000", "--dump-dom", a.url + "/"],
                             capture_output=True, timeout=60).stdout.decode()
        assert '<h3>services</h3><a>svc</a><h3>node any</h3><a>pid 77</a>' in dom
    finally:
        a.stop()
