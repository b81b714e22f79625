"""The source line running at every level of a stack, on a C program built here: main calls
hot() from a known line and hot() spins in a known loop; outer() spins in an always_inline
function. The node's cpu.pprof has a location per (function, line): the callers' lines are
their call instructions', the leaves' lines are inside their loops, each Function still says
where it is defined; cpu.folded has each frame sequence once, as before. Through sync, the
aggregator's pprof has the same locations and counts."""
import gzip
import importlib.util
import sqlite3
import subprocess
import time

import pytest

from clickhouse import ClickHouse
from fleet import Aggregator, batch, folded, syncing_node
from helpers import REPO, read, wait_for

HZ = 499

SOURCE = r"""
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void hot(double until) /* HOT_DEF */
{
	while (now() < until) { /* HOT_LOOP */
		for (unsigned long i = 0; i < 200000; i++)
			sink += i;
	} /* HOT_END */
}

static inline __attribute__((always_inline)) void spin(double until) /* SPIN_DEF */
{
	while (now() < until) { /* SPIN_LOOP */
		for (unsigned long i = 0; i < 200000; i++)
			sink ^= i;
	} /* SPIN_END */
}

__attribute__((noinline)) void outer(double until) /* OUTER_DEF */
{
	spin(until); /* CALL_SPIN */
	sink++;
}

int main(int argc, char **argv) /* MAIN_DEF */
{
	double end = now() + atof(argv[1]);

	while (now() < end) {
		hot(now() + 0.02); /* CALL_HOT */
		outer(now() + 0.02); /* CALL_OUTER */
	}
	return (int)(sink & 1);
}
"""


def line(marker):
    return next(i for i, text in enumerate(SOURCE.splitlines(), 1) if f"/* {marker} */" in text)


@pytest.fixture(scope="module")
def lines_prog(scratch):
    src = scratch / "lines.c"
    src.write_text(SOURCE)
    exe = scratch / "lines"
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(src)],
                   check=True)
    return exe


@pytest.fixture(scope="module")
def profile_pb2(scratch):
    """Google's protobuf runtime with Python code protoc generates from views/profile.proto."""
    subprocess.run(["protoc", f"--python_out={scratch}", f"--proto_path={REPO / 'views'}",
                    "profile.proto"], check=True)
    spec = importlib.util.spec_from_file_location("profile_pb2", scratch / "profile_pb2.py")
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    return pb


def decode(pb, data):
    """[(count, [(function, line, start_line), ...] leaf first)] of a gzip'd pprof."""
    p = pb.Profile()
    p.ParseFromString(gzip.decompress(data))
    s = p.string_table
    functions = {f.id: f for f in p.function}
    locations = {}
    for loc in p.location:
        assert len(loc.line) == 1
        f = functions[loc.line[0].function_id]
        locations[loc.id] = (s[f.name], loc.line[0].line, f.start_line)
    assert len(set(locations.values())) == len(locations), "one location per function and line"
    return [(sm.value[0], [locations[i] for i in sm.location_id]) for sm in p.sample]


def location_counts(samples):
    """{(function, line): samples in which it is}."""
    out = {}
    for count, frames in samples:
        for key in set((f, ln) for f, ln, _ in frames):
            out[key] = out.get(key, 0) + count
    return out


def check_lines(samples):
    """The program's ground truth in a decoded pprof."""
    def at(frames, name):
        """The line running in the function name, None if it is not in frames."""
        return next((f[1] for f in frames if f[0] == name), None)

    in_hot = [(n, fr) for n, fr in samples if at(fr, "hot") is not None]
    in_spin = [(n, fr) for n, fr in samples if at(fr, "spin_[i]") is not None]
    hot_n, spin_n = sum(n for n, _ in in_hot), sum(n for n, _ in in_spin)
    assert hot_n > 100 and spin_n > 100, (hot_n, spin_n)

    def share(group, total, predicate):
        return sum(n for n, fr in group if predicate(fr)) / total

    # main runs its call of hot(); hot runs a line of its loop
    assert share(in_hot, hot_n, lambda fr: at(fr, "main") == line("CALL_HOT")) >= 0.9
    assert share(in_hot, hot_n, lambda fr: line("HOT_LOOP") <= at(fr, "hot")
                 <= line("HOT_END")) >= 0.9, location_counts(in_hot)
    # the inlined spin(): outer runs the call that was inlined, spin a line of its loop
    assert share(in_spin, spin_n, lambda fr: at(fr, "outer") == line("CALL_SPIN")) >= 0.9
    assert share(in_spin, spin_n, lambda fr: at(fr, "main") == line("CALL_OUTER")) >= 0.9
    assert share(in_spin, spin_n, lambda fr: line("SPIN_LOOP") <= at(fr, "spin_[i]")
                 <= line("SPIN_END")) >= 0.9, location_counts(in_spin)
    # and each function still says where it is defined
    for name, marker in [("main", "MAIN_DEF"), ("hot", "HOT_DEF"), ("outer", "OUTER_DEF"),
                         ("spin_[i]", "SPIN_DEF")]:
        starts = {f[2] for _, fr in samples for f in fr if f[0] == name}
        assert starts == {line(marker)}, (name, starts)


def test_pprof_has_the_line_running_at_every_level(daemon, workloads, lines_prog,
                                                   profile_pb2):
    daemon.set_frequency(HZ)
    pid = workloads.start(lines_prog, 30).pid
    daemon.profile(pid, 1000)
    target = daemon.target(pid)
    samples = decode(profile_pb2, (target / "cpu.pprof").read_bytes())
    check_lines(samples)
    # the folded view tells frame sequences apart, not lines: each once, the same total
    folded = read(target / "cpu.folded").splitlines()
    stacks = [text.rsplit(" ", 1)[0] for text in folded]
    assert len(stacks) == len(set(stacks))
    assert sum(int(text.rsplit(" ", 1)[1]) for text in folded) == sum(n for n, _ in samples)
    assert len(samples) > len(stacks), "lines tell the samples of one stack apart"


def pprof_samples(samples):
    """{frames, leaf first, with lines and start lines: count} of decoded samples."""
    out = {}
    for count, frames in samples:
        out[tuple(frames)] = out.get(tuple(frames), 0) + count
    return out


@pytest.fixture(scope="module", params=["sqlite", "clickhouse"])
def store(request, scratch):
    """A store URL maker for the aggregator: a SQLite file, or a database of a ClickHouse
    server started for the module."""
    server = ClickHouse(scratch / "clickhouse").start() if request.param == "clickhouse" else None
    yield (lambda d: server.url(d.name)) if server else (lambda d: f"sqlite:{d}/agg.db")
    if server:
        server.remove()


def test_the_aggregator_shows_the_nodes_lines(store, scratch, workloads, lines_prog,
                                              profile_pb2):
    """Through sync to an aggregator: its pprof of the target has the node's locations,
    lines and counts."""
    work = scratch / f"sync{len(list(scratch.glob('sync*')))}"
    work.mkdir()
    agg = Aggregator(work, tokens="tok-lines-node node lines1\ntok-lines-read read *\n",
                     store=store(work))
    agg.start()
    try:
        with syncing_node(agg, work, "lines1", "tok-lines-node") as node:
            node.set_frequency(HZ)
            pid = workloads.start(lines_prog, 30).pid
            node.profile(pid, 600)
            mine = decode(profile_pb2, (node.target(pid) / "cpu.pprof").read_bytes())
            total = sum(n for n, _ in mine)
            path = f"/nodes/lines1/targets/{pid}"

            def shipped():
                status, body = agg.get(path + "/cpu.folded", "tok-lines-read")
                return status == 200 and sum(folded(body).values()) == total
            wait_for(shipped, 20, "every sample at the aggregator")
            status, body = agg.get(path + "/cpu.pprof", "tok-lines-read")
            assert status == 200
            theirs = decode(profile_pb2, body)
            assert pprof_samples(theirs) == pprof_samples(mine)
            check_lines(theirs)
    finally:
        agg.stop()


def with_lines(b, lines):
    """b with lines on each of its stacks."""
    for st in b.stacks:
        st.lines.extend(lines)
    return b


def test_sqlite_store_of_version_1_upgraded(scratch, profile_pb2):
    """A store made before stacks had lines (user_version 0, no stacks.lines): the
    aggregator adds the column, says version 2, reads what was stored, and keeps the lines of
    what comes next; a batch whose lines are not one per frame is refused, nothing stored."""
    d = scratch / "upgrade"
    d.mkdir()
    tokens = "tok-up node n1\ntok-up-read read *\n"
    a = Aggregator(d, tokens=tokens).start()
    stack = ("app", "main", "work")
    now = int(time.time())
    try:
        assert a.post(batch("n1", "boot-u", 1, [dict(pid=4, profiles={"cpu": {now - 30: {
            stack: 6}}})]), "tok-up")[0] == 200
        a.stop()
        with sqlite3.connect(a.db) as db:
            db.execute("ALTER TABLE stacks DROP COLUMN lines")
            db.execute("PRAGMA user_version = 0")
        a.start()
        with sqlite3.connect(a.db) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (2,)
            assert "lines" in [c[1] for c in db.execute("PRAGMA table_info(stacks)")]
        path = "/nodes/n1/targets/4"
        assert folded(a.get(path + "/cpu.folded", "tok-up-read")[1]) == {"app;main;work": 6}
        assert a.post(with_lines(batch("n1", "boot-u", 2, [dict(pid=4, profiles={"cpu": {
            now - 20: {stack: 4}}})]), [0, 12, 34]), "tok-up")[0] == 200
        status, body = a.post(with_lines(batch("n1", "boot-u", 3, [dict(pid=4, profiles={
            "cpu": {now - 10: {stack: 9}}})]), [12, 34]), "tok-up")
        assert status == 400 and b"2 lines for 3 frames" in body, body
        assert folded(a.get(path + "/cpu.folded", "tok-up-read")[1]) == {"app;main;work": 10}
        got = pprof_samples(decode(profile_pb2, a.get(path + "/cpu.pprof", "tok-up-read")[1]))
        assert got == {(("work", 34, 0), ("main", 12, 0)): 4,
                       (("work", 0, 0), ("main", 0, 0)): 6}, got
    finally:
        a.stop()
