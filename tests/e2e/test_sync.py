"""Fleet sync end to end: node daemons, each in its own network namespace, push to one real
aggregator in another (veth pairs, 10.200.N.0/24 only inside the namespaces this module
makes). Ground truth: each node's own cpu.folded of a workload with a known CPU split; once a
node has shipped every second of it, the aggregator's copy must be the same to the sample,
through an aggregator killed and restarted, a node killed and restarted with batches in its
spool, a replayed batch and a spool too small for an outage."""
import calendar
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clickhouse import ClickHouse
from helpers import (APERTURE, WORKLOADS, Daemon, parse_folded, parse_status, read, wait_for,
                     write, write_errno)
from test_jvm import JAVA_SRC, Jvm, enable_and_attach
from test_waits import Waits, block_for

TAG = f"aps{os.getpid() % 100000}"
AGG_NS = f"{TAG}a"
PORT = 18040
TOKENS = {"n1": "tok-n1-secret", "n2": "tok-n2-secret", "n3": "tok-n3-secret"}
READ_TOKEN = "tok-read-all"
HZ = 99


def ns_path(ns):
    return f"/run/netns/{ns}"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def make_link(n):
    """Namespace TAG-nN, joined to the aggregator's by a veth pair: 10.200.N.2 <-> .1."""
    ns, here, there = f"{TAG}n{n}", f"{TAG}n{n}", f"{TAG}a{n}"
    ip("netns", "add", ns)
    ip("link", "add", here, "type", "veth", "peer", "name", there)
    ip("link", "set", here, "netns", ns)
    ip("link", "set", there, "netns", AGG_NS)
    ip("-n", AGG_NS, "addr", "add", f"10.200.{n}.1/24", "dev", there)
    ip("-n", ns, "addr", "add", f"10.200.{n}.2/24", "dev", here)
    ip("-n", AGG_NS, "link", "set", there, "up")
    ip("-n", ns, "link", "set", here, "up")
    ip("-n", ns, "link", "set", "lo", "up")
    return ns


class Aggregator:
    """`aperture aggregate` in the aggregator's namespace, with one store for its life
    (restarts included): a SQLite file, or a ClickHouse database when given its URL. The
    test reads and posts with curl from inside that namespace."""

    def __init__(self, workdir, port=PORT, tls=None, store=None):
        """tls: (cert, key) files: https, the same cert being the client's CA."""
        self.dir = Path(workdir)
        self.port, self.tls = port, tls
        self.store = store or f"sqlite:{self.dir / f'agg-{port}.db'}"
        self.proc = None
        (self.dir / "tokens").write_text(
            "".join(f"{t} node {n}\n" for n, t in TOKENS.items()) + f"{READ_TOKEN} read *\n")

    def start(self):
        with open(self.dir / "agg.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["nsenter", f"--net={ns_path(AGG_NS)}", str(APERTURE), "aggregate",
                 "--listen", f"0.0.0.0:{self.port}", "--store", self.store,
                 "--tokens", str(self.dir / "tokens"),
                 *(["--tls-cert", str(self.tls[0]), "--tls-key", str(self.tls[1])]
                   if self.tls else [])], stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.curl("/status")[0] == 200, 10, "the aggregator to answer")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def curl(self, path, token=READ_TOKEN, post=None):
        """(HTTP status, body bytes); status 0 when nothing answers."""
        cmd = ["nsenter", f"--net={ns_path(AGG_NS)}", "curl", "-s", "-m", "10",
               "-o", "-", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {token}",
               *(["--cacert", str(self.tls[0])] if self.tls else [])]
        if post:
            cmd += ["-H", "Content-Type: application/x-aperture-batch", "-H",
                    "Content-Encoding: gzip", "-H", "X-Aperture-Batch-Version: 1",
                    "--data-binary", f"@{post}"]
        scheme = "https" if self.tls else "http"
        out = subprocess.run(cmd + [f"{scheme}://127.0.0.1:{self.port}{path}"],
                             capture_output=True).stdout
        body, _, code = out.rpartition(b"\n")
        return int(code or 0), body

    def folded(self, path):
        code, body = self.curl(path)
        assert code == 200, f"GET {path}: {code} {body[:300]!r}"
        return parse_folded(body.decode())


class Node(Daemon):
    """A node daemon in namespace ns, syncing to the aggregator as name."""

    def __init__(self, scratch, name, ns, n, url=None, extra=(), spool=None):
        self.name, self.ns, self.n = name, ns, n
        self.spool = scratch / (spool or f"spool-{name}")
        self.token_file = scratch / f"token-{name}"
        self.token_file.write_text(TOKENS[name] + "\n")
        super().__init__(scratch / f"mnt-{name}", scratch / f"{name}.log",
                         prefix=["nsenter", f"--net={ns_path(ns)}"],
                         args=["--sync", url or f"http://10.200.{n}.1:{PORT}", "--node", name,
                               "--token-file", str(self.token_file), "--spool-dir",
                               str(self.spool), *extra])

    def start(self):
        self.mnt.mkdir(exist_ok=True)
        super().start()
        write(self.mnt / "config" / "sync_interval_s", "1")
        return self

    def sync(self):
        return parse_status(read(self.mnt / "status"))

    def shipped_all(self, since):
        """Every second before `since` + 1 is in a batch the aggregator acknowledged."""
        st = self.sync()
        until = st["sync_shipped_until"]
        return (until != "never" and
                calendar.timegm(time.strptime(until, "%Y-%m-%dT%H:%M:%SZ")) > since and
                st["sync_spool_batches"] == "0" and st["sync"] == "ok")

    def shipped_to_spool(self, since):
        until = self.sync()["sync_shipped_until"]
        return until != "never" and calendar.timegm(
            time.strptime(until, "%Y-%m-%dT%H:%M:%SZ")) > since


# ClickHouse behind the same node code: slow, left out of the sanitizer rerun, which drives
# the ClickHouse store's code in test_aggregate.py[clickhouse] and the node's here on SQLite.
@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("clickhouse", marks=pytest.mark.slow)])
def store_kind(request):
    """Every test of the module runs against both stores of the aggregator."""
    return request.param


@pytest.fixture(scope="module")
def scratch(store_kind, tmp_path_factory):
    """conftest's scratch, one per store: spools, mounts and workloads start afresh."""
    d = tmp_path_factory.mktemp(f"sync-{store_kind}")
    os.chmod(d, 0o755)
    return d


@pytest.fixture(scope="module")
def fleet(scratch, store_kind):
    """The aggregator's namespace and nodes n1, n2 in theirs; n3's namespace for later. The
    aggregator's store is SQLite, or ClickHouse started in the aggregator's namespace."""
    subprocess.run(["ip", "netns", "add", AGG_NS], check=True)
    ip("-n", AGG_NS, "link", "set", "lo", "up")
    nss = [make_link(n) for n in (1, 2, 3)]
    ch = None
    nodes = {}
    try:
        if store_kind == "clickhouse":
            ch = ClickHouse(scratch / "clickhouse",
                            prefix=["nsenter", f"--net={ns_path(AGG_NS)}"]).start()
        agg = Aggregator(scratch, store=ch.url("fleet") if ch else None)
        agg.start()
        nodes = {f"n{n}": Node(scratch, f"n{n}", nss[n - 1], n).start() for n in (1, 2)}
        yield agg, nodes
        for node in nodes.values():
            assert node.proc.poll() is None, f"{node.name} died:\n{node.log_text()}"
            node.stop()
    finally:
        for node in nodes.values():
            node.kill()
        if "agg" in locals():
            agg.kill()
        if ch:
            ch.remove()
        for ns in nss + [AGG_NS]:
            subprocess.run(["ip", "netns", "del", ns], check=False)


def node_side_only(store_kind):
    """What a test checks is the node's or its own aggregator's, not the fleet store's: once
    (on SQLite) is enough, and keeps the suite short."""
    if store_kind == "clickhouse":
        pytest.skip("checks the node side; run against the SQLite store")


def workload(workloads, scratch, comm):
    """cpu_split under its own name: the aggregator's service of it is that comm."""
    path = scratch / comm
    if not path.exists():
        shutil.copy(WORKLOADS / "cpu_split", path)
    return workloads.start(str(path), 60)


# Samples a profile gets before it is stopped: a real profile, also on a busy machine where
# a workload gets a fraction of a CPU.
SAMPLES = 50


def wait_samples(node, procs):
    wait_for(lambda: all(node.samples(p.pid) >= SAMPLES for p in procs), 30,
             f"{SAMPLES} samples of each workload on {node.name}")


def profile_for(node, procs):
    """Enables procs on node until each has SAMPLES samples, then disables them; returns the
    time after."""
    for p in procs:
        write(node.target(p.pid) / "enable", "1")
    wait_samples(node, procs)
    for p in procs:
        write(node.target(p.pid) / "enable", "0")
    return time.time()


def total(stacks):
    return sum(stacks.values())


def check_mirrored(agg, node, pid):
    """The node's file, final, equals the aggregator's copy; returns it."""
    mine = node.folded(pid)
    theirs = agg.folded(f"/nodes/{node.name}/targets/{pid}/cpu.folded")
    assert theirs == mine, (f"{node.name} pid {pid}: node {total(mine)} samples, aggregator "
                            f"{total(theirs)}")
    return mine


def sum_folded(*profiles):
    out = {}
    for p in profiles:
        for stack, n in p.items():
            out[stack] = out.get(stack, 0) + n
    return out


def profile_on_n1_and_n2(fleet, workloads, scratch, comm):
    """comm started twice, once profiled by n1 and once by n2: {node name: process}."""
    _, nodes = fleet
    procs = {name: workload(workloads, scratch, comm) for name in ("n1", "n2")}
    for name, p in procs.items():
        write(nodes[name].target(p.pid) / "enable", "1")
    return procs


def stop_and_check_mirrored(fleet, procs, comm):
    """Disables procs once each has SAMPLES samples; once their nodes shipped every second,
    the aggregator's copy of each equals the node's own file, and the service comm is their
    sum."""
    agg, nodes = fleet
    for name, p in procs.items():
        wait_samples(nodes[name], [p])
    for name, p in procs.items():
        write(nodes[name].target(p.pid) / "enable", "0")
    after = time.time()
    wait_for(lambda: all(nodes[name].shipped_all(after) for name in procs), 40,
             "the nodes to ship every second")
    mine = [check_mirrored(agg, nodes[name], p.pid) for name, p in procs.items()]
    # Latest-state files too: the status, deadlocks and system call statistics as last sent.
    for name, p in procs.items():
        for f in ("status", "threads/deadlocks", "syscalls.json"):
            code, body = agg.curl(f"/nodes/{name}/targets/{p.pid}/{f}")
            assert (code, body.decode()) == (200, read(nodes[name].target(p.pid) / f)), f
    assert all(total(f) >= SAMPLES for f in mine), [total(f) for f in mine]
    assert agg.folded(f"/services/{comm}/cpu.folded") == sum_folded(*mine)


def test_each_node_mirrored_and_a_service_is_the_sum_of_its_nodes(fleet, workloads, scratch):
    agg, nodes = fleet
    procs = profile_on_n1_and_n2(fleet, workloads, scratch, "sync_mirror")
    time.sleep(2)  # a few seconds, a few batches
    stop_and_check_mirrored(fleet, procs, "sync_mirror")
    code, body = agg.curl("/nodes/n1/status")
    assert code == 200 and b"batches" in body, body
    st = nodes["n1"].sync()
    assert st["sync_batches_sent"] != "0" and st["sync_last_success"] != "never", st
    assert st["sync_batches_dropped"] == "0" and st["sync_batches_rejected"] == "0", st


def test_aggregator_killed_while_nodes_profile_loses_nothing(fleet, workloads, scratch):
    agg, nodes = fleet
    n1, n2 = nodes["n1"], nodes["n2"]
    procs = profile_on_n1_and_n2(fleet, workloads, scratch, "sync_outage")
    time.sleep(1)
    agg.kill()
    try:
        wait_for(lambda: n1.sync()["sync"].startswith("retrying: ") and
                 int(n1.sync()["sync_spool_batches"]) >= 3, 15, "n1 to spool batches")
        time.sleep(5)  # ~10 s down in all, the nodes profiling on
        assert int(n2.sync()["sync_spool_batches"]) >= 3, n2.sync()
        assert int(n1.sync()["sync_lag_s"]) >= 3, n1.sync()
    finally:
        agg.start()
    stop_and_check_mirrored(fleet, procs, "sync_outage")
    assert n1.sync()["sync_batches_dropped"] == "0"


def test_node_killed_sends_its_spool_once_after_restart_and_a_replay_counts_once(
        fleet, workloads, scratch):
    agg, nodes = fleet
    n1 = nodes["n1"]
    w = workload(workloads, scratch, "sync_restart")
    agg.kill()
    try:
        after = profile_for(n1, [w])
        wait_for(lambda: n1.shipped_to_spool(after), 15, "n1 to spool every second")
        mine = n1.folded(w.pid)
        assert total(mine) >= SAMPLES, total(mine)
        spooled = sorted(n1.spool.glob("*.batch"))
        assert len(spooled) >= 2, spooled
        replay = scratch / "replay.batch"
        shutil.copy(spooled[-1], replay)
        n1.kill()  # SIGKILL: the profile in memory is gone, the spool is on disk
    finally:
        agg.start()
    n1.start()
    wait_for(lambda: n1.sync()["sync_spool_batches"] == "0" and
             int(n1.sync()["sync_batches_sent"]) >= len(spooled), 30, "the old spool to go")
    path = f"/nodes/n1/targets/{w.pid}/cpu.folded"
    assert agg.folded(path) == mine
    # The node's batch, POSTed again by hand: acknowledged as a duplicate, counted once.
    code, body = agg.curl("/v1/batches", token=TOKENS["n1"], post=replay)
    assert code == 200 and b"duplicate" in body, (code, body)
    assert agg.folded(path) == mine


def test_spool_too_small_drops_the_oldest_counted_and_the_rest_is_exact(
        fleet, workloads, scratch, store_kind):
    """n3's spool is 1 MiB, and an earlier run left a batch of 1 MiB less 4 KiB in it that
    sorts last (created in the far future) and that the aggregator refuses (not gzip): so a
    short outage overflows the spool, and the batch refused shows a permanent 4xx handled."""
    node_side_only(store_kind)
    agg, nodes = fleet
    n3 = Node(scratch, "n3", f"{TAG}n3", 3)
    n3.spool.mkdir()
    (n3.spool / "999999999999-0123456789abcdef0123456789abcdef-00000000000000000001.batch"
     ).write_bytes(b"not a batch" * (((1 << 20) - 4096) // 11))
    w = workload(workloads, scratch, "sync_drop")
    agg.kill()
    try:
        n3.start()
        write(n3.mnt / "config" / "sync_spool_mb", "1")
        write(n3.target(w.pid) / "enable", "1")
        wait_for(lambda: int(n3.sync()["sync_batches_dropped"]) >= 3, 30, "drops")
        write(n3.target(w.pid) / "enable", "0")
        after = time.time()
        wait_for(lambda: n3.shipped_to_spool(after), 15, "n3 to spool every second")
    finally:
        agg.start()
    wait_for(lambda: n3.sync()["sync_spool_batches"] == "0", 30, "n3's spool to empty")
    st = n3.sync()
    mine = total(n3.folded(w.pid))
    theirs = total(agg.folded(f"/nodes/n3/targets/{w.pid}/cpu.folded"))
    dropped = int(st["sync_dropped_cpu_samples"])
    assert dropped > 0 and theirs == mine - dropped, (mine, theirs, st)
    assert st["sync_oldest_dropped"] != "none", st
    assert st["sync_batches_rejected"] == "1" and "HTTP 400" in st["sync_last_error"], st
    assert st["sync_rejected_by_answer"] == "400=1", st
    code, body = agg.curl("/nodes/n3/status")
    assert code == 200 and b"batches_dropped: " in body and b"batches_dropped: 0\n" not in body
    n3.stop()


def test_sync_settings_are_checked(fleet, store_kind):
    node_side_only(store_kind)
    _, nodes = fleet
    cfg = nodes["n2"].mnt / "config"
    for value in ("ftp://x", "http://", "http://a b", "x", "http://h\u00e9te"):
        assert write_errno(cfg / "sync", value) == 22, value
    assert "config/sync" in nodes["n2"].sync()["last_error"]
    assert read(cfg / "sync").startswith("http://10.200.2.1:")
    for key, value in (("sync_interval_s", "0"), ("sync_interval_s", "31"),
                       ("sync_spool_mb", "0")):
        assert write_errno(cfg / key, value) == 34, (key, value)
    write(cfg / "sync", "\n")  # what `echo > config/sync` writes: off
    wait_for(lambda: nodes["n2"].sync()["sync"] == "off", 5, "sync off")
    write(cfg / "sync", f"http://10.200.2.1:{PORT}")
    wait_for(lambda: nodes["n2"].sync()["sync"] == "ok", 5, "sync on again")


def test_https_with_the_aggregators_own_ca(fleet, workloads, scratch, store_kind):
    """An aggregator with a self-signed certificate: a node given it with --sync-ca syncs;
    a node that trusts only the system's CAs keeps its batches and says why."""
    node_side_only(store_kind)
    _, nodes = fleet
    cert, key = scratch / "cert.pem", scratch / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=aperture-test", "-addext",
                    "subjectAltName=IP:10.200.3.1,IP:10.200.2.1,IP:127.0.0.1"],
                   check=True, capture_output=True)
    tls = Aggregator(scratch, port=PORT + 1, tls=(cert, key))
    tls.start()
    n3 = Node(scratch, "n3", f"{TAG}n3", 3, url=f"https://10.200.3.1:{PORT + 1}",
              extra=["--sync-ca", str(cert)], spool="spool-n3-tls")
    try:
        n3.start()
        w = workload(workloads, scratch, "sync_tls")
        after = profile_for(n3, [w])
        wait_for(lambda: n3.shipped_all(after), 20, "n3 to sync over https")
        mine = n3.folded(w.pid)
        assert total(mine) >= SAMPLES
        assert tls.folded(f"/nodes/n3/targets/{w.pid}/cpu.folded") == mine
        n3.stop()
        # n2 knows no such CA: its batches wait in its spool, and status says why.
        n2 = nodes["n2"]
        write(n2.mnt / "config" / "sync", f"https://10.200.2.1:{PORT + 1}")
        wait_for(lambda: n2.sync()["sync"].startswith("retrying: ") and
                 "certificate" in n2.sync()["sync"].lower(), 15, "n2 to refuse the certificate")
        assert int(n2.sync()["sync_spool_batches"]) >= 1
        write(n2.mnt / "config" / "sync", f"http://10.200.2.1:{PORT}")
        wait_for(lambda: n2.sync()["sync"] == "ok" and n2.sync()["sync_spool_batches"] == "0",
                 15, "n2 back on http")
    finally:
        n3.kill()
        tls.kill()


def test_a_jvms_profiles_and_thread_snapshots_mirrored(fleet, scratch):
    """Hot.java: an allocating thread and three threads contending for one monitor. Its cpu,
    alloc, alloc_objects and monitors profiles arrive exactly; its thread dump and JVM
    status as they were while it was profiled."""
    agg, nodes = fleet
    n1 = nodes["n1"]
    classes = scratch / "classes"
    subprocess.run(["javac", "-d", str(classes), str(JAVA_SRC / "Hot.java")], check=True)
    jvm = Jvm(classes, "Hot").wait_ready()
    try:
        enable_and_attach(n1, jvm.pid)
        jdir = n1.target(jvm.pid) / "jvm"
        wait_for(lambda: read(jdir / "alloc.folded") and read(jdir / "monitors.folded"), 15,
                 "allocation and monitor samples")
        write(n1.target(jvm.pid) / "enable", "0")
        after = time.time()
        wait_for(lambda: n1.shipped_all(after), 20, "n1 to ship every second")
        for f in ("cpu.folded", "jvm/alloc.folded", "jvm/alloc_objects.folded",
                  "jvm/monitors.folded"):
            mine = parse_folded(read(n1.target(jvm.pid) / f))
            assert total(mine) > 0, f
            assert agg.folded(f"/nodes/n1/targets/{jvm.pid}/{f}") == mine, f
        code, body = agg.curl(f"/nodes/n1/targets/{jvm.pid}/threads/dump")
        assert code == 200 and b'"allocator"' in body, body[:300]
        code, body = agg.curl(f"/nodes/n1/targets/{jvm.pid}/jvm/status")
        assert code == 200 and b"state: attached" in body, body[:300]
    finally:
        jvm.kill()


def test_off_cpu_time_and_blocking_events_mirrored(fleet, workloads):
    """A Tokio-named worker blocked 3 x 60 ms: the off-CPU profile arrives exactly, and the
    blocking events each once."""
    agg, nodes = fleet
    n2 = nodes["n2"]
    w = Waits(workloads, "block")
    target = n2.target(w.pid)
    if (target / "collectors").exists():  # collectors chosen per target: off-CPU too
        write(target / "collectors", "cpu offcpu")
    write(target / "enable", "1")
    wait_for(lambda: json.loads(read(target / "blocking.json"))["workers"]["watching"], 5,
             "the worker to be watched")
    for _ in range(3):
        block_for(w, 0.06)
    wait_for(lambda: json.loads(read(target / "blocking.json"))["events_total"] >= 3, 5,
             "three blocking events")
    write(target / "enable", "0")
    after = time.time()
    wait_for(lambda: n2.shipped_all(after), 20, "n2 to ship every second")
    mine = parse_folded(read(target / "offcpu.folded"))
    assert total(mine) > 150_000, total(mine)  # microseconds: 3 x 60 ms and more
    assert agg.folded(f"/nodes/n2/targets/{w.pid}/offcpu.folded") == mine
    code, body = agg.curl(f"/nodes/n2/targets/{w.pid}/blocking.json")
    assert code == 200, body
    theirs = json.loads(body)["events"]
    assert theirs == json.loads(read(target / "blocking.json"))["events"] and len(theirs) >= 3
