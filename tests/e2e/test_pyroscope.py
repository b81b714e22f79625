"""Pyroscope's push API on the aggregator: a Node.js program profiled by the npm
@pyroscope/nodejs client (pprof, gzip'd, as the client sends it) shows its hot function under
services/<app>/; folded pushes land exactly as sent, counted once each; bad metadata is 400,
an unknown token 401, a read token 403, an unusable profile 422, as Pyroscope answers.
Grafana Alloy's push RPC (connect, protobuf) with messages built by Debian's python3-protobuf
from our .proto, compiled by Debian's protoc. pyroscope-java's JFR, with a recording the JDK's
own Flight Recorder wrote of a program whose hot method the test knows."""
import gzip
import importlib
import json
import os
import subprocess
import sys
import time
import urllib.parse

import pytest

from fleet import Aggregator, folded
from helpers import REPO, parse_status

NODE_MODULES = "/usr/local/lib/aperture-tests/node_modules"
TOKENS = {"push": "tok-pyro-push", "read": "tok-pyro-read"}


@pytest.fixture(scope="module")
def agg(scratch):
    a = Aggregator(scratch, tokens=f"{TOKENS['push']} node pyroscope\n{TOKENS['read']} read *\n")
    a.start()
    yield a
    a.stop()


def ingest(agg, body, token=TOKENS["push"], headers=None, **params):
    return agg.request("POST", "/ingest?" + urllib.parse.urlencode(params), body, token,
                       headers)[:2]


def test_folded_pushes_land_exactly_under_their_service(agg):
    now = int(time.time())
    body = b"main;work;hot 70\nmain;work;cold 30\n"
    for _ in range(2):
        code, reply = ingest(agg, body, name="shop.cpu{env=prod,region=eu}", format="folded",
                             sampleRate="100", spyName="gospy", **{"from": now, "until": now + 10})
        assert code == 200, reply
    got = folded(agg.get("/services/shop/cpu.folded", TOKENS["read"])[1])
    assert got == {"shop;main;work;hot": 140, "shop;main;work;cold": 60}
    # the series is a target of the token's node, its labels kept
    code, listing = agg.get("/nodes/pyroscope/targets/", TOKENS["read"])
    assert code == 200 and b'"dir"' in listing
    # an alloc profile goes under its own type
    code, _ = ingest(agg, b"main;alloc_here 4096\n", name="shop.alloc_space{env=prod,region=eu}",
                     format="folded", **{"from": now})
    assert code == 200
    assert folded(agg.get("/services/shop/alloc.folded", TOKENS["read"])[1]) == {
        "shop;main;alloc_here": 4096}


def test_pyroscope_status_codes(agg):
    now = int(time.time())
    ok = {"format": "folded", "from": now}
    assert ingest(agg, b"a 1\n", name="", **ok)[0] == 400          # no name
    assert ingest(agg, b"a 1\n", name="x/y.cpu", **ok)[0] == 400   # not a file name
    assert ingest(agg, b"a 1\n", name="x.cpu{k}", **ok)[0] == 400  # a label without =
    assert ingest(agg, b"a 1\n", name="x.cpu", format="folded", **{"from": "soon"})[0] == 400
    assert ingest(agg, b"a 1\n", name="x.cpu", format="jfr")[0] == 400
    assert ingest(agg, b"a;b x\n", name="x.cpu", **ok)[0] == 422    # no count
    assert ingest(agg, b"a 1\n", name="x.inuse_space", **ok)[0] == 422
    assert ingest(agg, b"garbage", name="x.cpu", format="pprof")[0] == 422
    assert ingest(agg, b"a 1\n", token="nope", name="x.cpu", **ok)[0] == 401
    assert ingest(agg, b"a 1\n", token=TOKENS["read"], name="x.cpu", **ok)[0] == 403
    code, _ = ingest(agg, b"a 1\n", name="x.cpu", format="folded", **{"from": now - 30 * 86400})
    assert code == 400  # outside retention
    # nothing of the refused pushes was kept
    assert agg.get("/services/x/cpu.folded", TOKENS["read"])[0] == 404


def test_pprof_as_multipart_form_field(agg):
    """pyroscope-go and Alloy send pprof as the multipart field `profile`."""
    r = subprocess.run(["node", "-e", """
const { Profile, ValueType, Sample, Location, Line, Function: Fn, StringTable } = require('pprof-format');
const st = new StringTable();
const fn = (id, name) => new Fn({ id, name: st.dedup(name) });
const loc = (id, f) => new Location({ id, line: [new Line({ functionId: f })] });
const p = new Profile({ sampleType: [new ValueType({ type: st.dedup('samples'), unit: st.dedup('count') }),
                                     new ValueType({ type: st.dedup('cpu'), unit: st.dedup('nanoseconds') })],
  function: [fn(1, 'main'), fn(2, 'leaf')], location: [loc(1, 1), loc(2, 2)],
  sample: [new Sample({ locationId: [2, 1], value: [42, 420000000] })], stringTable: st });
process.stdout.write(Buffer.from(p.encode()).toString('base64'));
"""], capture_output=True, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    assert r.returncode == 0, r.stderr
    import base64
    pprof = gzip.compress(base64.b64decode(r.stdout))
    boundary = "aperture-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"profile\"; "
            f"filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + pprof + f"\r\n--{boundary}--\r\n".encode()
    code, reply = ingest(agg, body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
                         name="goapp.cpu", **{"from": int(time.time())})
    assert code == 200, reply
    assert folded(agg.get("/services/goapp/cpu.folded", TOKENS["read"])[1]) == {
        "goapp;main;leaf": 42}


@pytest.mark.skipif(not os.path.isdir(f"{NODE_MODULES}/@pyroscope/nodejs"),
                    reason="@pyroscope/nodejs (deploy/setup.sh) is needed")
def test_the_nodejs_client_shows_its_hot_function_under_services(agg):
    r = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "pyroscope_push.cjs"),
                        agg.url, TOKENS["push"], "4"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, NODE_PATH=NODE_MODULES,
                                            DEBUG="pyroscope*"))
    assert r.returncode == 0, r.stderr
    code, top = agg.get("/services/webapp-push/cpu.top", TOKENS["read"])
    assert code == 200, (top, r.stderr[-2000:])
    rows = [l.split() for l in top.decode().splitlines() if not l.startswith("#")]
    # the hottest function by self is the one the program spins in (its share depends on
    # how much CPU the machine gave it: the client's profile is of wall-clock time)
    assert "hotSpinFunction" in rows[0][-1], top.decode()
    status = parse_status(agg.get("/status", TOKENS["read"])[1].decode())
    assert int(status["batches_applied"]) >= 2


@pytest.fixture(scope="module")
def pb(scratch):
    """Python classes for the push RPC (aggregate/pyroscope_push.proto) and pprof
    (views/profile.proto), generated by protoc: a protobuf library that is not ours."""
    out = scratch / "pb"
    out.mkdir()
    for d, f in (("aggregate", "pyroscope_push.proto"), ("views", "profile.proto")):
        subprocess.run(["protoc", f"--proto_path={REPO / d}", f"--python_out={out}", f],
                       check=True)
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("pyroscope_push_pb2"), importlib.import_module("profile_pb2")
    finally:
        sys.path.remove(str(out))


def pprof(profile_pb2, samples, types=(("samples", "count"), ("cpu", "nanoseconds"))):
    """A pprof profile of samples {(root, ..., leaf): [values]} at now."""
    p = profile_pb2.Profile()
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)
    for t, u in types:
        p.sample_type.add(type=s(t), unit=s(u))
    ids = {}
    for stack, values in samples.items():
        for name in stack:
            if name not in ids:
                ids[name] = len(ids) + 1
                p.function.add(id=ids[name], name=s(name))
                p.location.add(id=ids[name]).line.add(function_id=ids[name])
        p.sample.add(location_id=[ids[n] for n in reversed(stack)], value=values)
    p.string_table.extend(strings)
    p.time_nanos = time.time_ns()
    return p.SerializeToString()


def push(agg, body, token=TOKENS["push"], headers=None):
    h = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1", **(headers or {})}
    code, data, r = agg.request("POST", "/push.v1.PusherService/Push", body, token, h)
    return code, data, r.getheader("Content-Type")


def push_request(push_pb2, series):
    rq = push_pb2.PushRequest()
    for labels, profiles in series:
        s = rq.series.add()
        for k, v in labels.items():
            s.labels.add(name=k, value=v)
        for raw in profiles:
            s.samples.add(raw_profile=raw, ID="")
    return rq.SerializeToString()


def test_alloy_push_rpc_lands_exactly_and_refuses_what_it_cannot_use(agg, pb):
    push_pb2, profile_pb2 = pb
    cpu = pprof(profile_pb2, {("main", "work", "hot"): [70, 700000000],
                              ("main", "work", "cold"): [30, 300000000]})
    goroutines = pprof(profile_pb2, {("main", "wait"): [5]}, types=(("goroutine", "count"),))
    body = push_request(push_pb2, [
        ({"__name__": "process_cpu", "service_name": "alloyapp", "env": "prod",
          "__session_id__": "a1"}, [gzip.compress(cpu)]),
        # a type Aperture keeps nothing of: skipped, the rest stored
        ({"__name__": "goroutine", "service_name": "alloyapp"}, [goroutines])])
    code, data, ctype = push(agg, body)
    assert code == 200 and ctype == "application/proto" and data == b"", data
    # the whole body gzip'd, as connect's Content-Encoding: the same once more
    code, data, _ = push(agg, gzip.compress(body), headers={"Content-Encoding": "gzip"})
    assert code == 200, data
    assert folded(agg.get("/services/alloyapp/cpu.folded", TOKENS["read"])[1]) == {
        "alloyapp;main;work;hot": 140, "alloyapp;main;work;cold": 60}
    status = agg.get("/nodes/pyroscope/targets/", TOKENS["read"])[1]
    pids = [e["name"] for e in json.loads(status)["entries"]]
    statuses = [agg.get(f"/nodes/pyroscope/targets/{p}/status", TOKENS["read"])[1].decode()
                for p in pids]
    assert sum("comm: alloyapp" in s for s in statuses) == 1, statuses

    # refused: connect's error JSON with the matching status, and nothing stored
    def refused(code, data, want_code, want):
        err = json.loads(data)
        assert code == want_code and err["code"] == want and err["message"], (code, data)
    refused(*push(agg, b"\xff\xff\xff\x0f")[:2], 400, "invalid_argument")
    bad_sample = push_request(push_pb2, [
        ({"__name__": "process_cpu", "service_name": "badpush"}, [cpu]),
        ({"__name__": "process_cpu", "service_name": "badpush2"}, [b"not a pprof"])])
    refused(*push(agg, bad_sample)[:2], 400, "invalid_argument")
    no_service = push_request(push_pb2, [({"__name__": "process_cpu"}, [cpu])])
    refused(*push(agg, no_service)[:2], 400, "invalid_argument")
    refused(*push(agg, body, token=None)[:2], 401, "unauthenticated")
    refused(*push(agg, body, token="nope")[:2], 401, "unauthenticated")
    refused(*push(agg, body, token=TOKENS["read"])[:2], 403, "permission_denied")
    for svc in ("badpush", "badpush2"):
        assert agg.get(f"/services/{svc}/cpu.folded", TOKENS["read"])[0] == 404
    assert folded(agg.get("/services/alloyapp/cpu.folded", TOKENS["read"])[1]) == {
        "alloyapp;main;work;hot": 140, "alloyapp;main;work;cold": 60}


# Known split: hot() does three times the work of cold(); exits after argv[0] ms, and the
# JDK's Flight Recorder writes its recording then.
JFR_SPLIT = """
public class JfrSplit {
    static volatile long sink;
    static long spin(long n) { long x = 1; for (long i = 0; i < n; i++) x = x * 31 + i; return x; }
    static void hot() { sink = spin(3_000_000); }
    static void cold() { sink = spin(1_000_000); }
    public static void main(String[] a) {
        long end = System.nanoTime() + Long.parseLong(a[0]) * 1_000_000L;
        while (System.nanoTime() < end) { hot(); cold(); }
    }
}
"""


def test_pyroscope_java_jfr_counts_every_execution_sample(agg, scratch):
    src = scratch / "jfr"
    src.mkdir()
    (src / "JfrSplit.java").write_text(JFR_SPLIT)
    subprocess.run(["javac", "-d", str(src), str(src / "JfrSplit.java")], check=True)
    rec = src / "rec.jfr"
    subprocess.run(["java", f"-XX:StartFlightRecording=filename={rec},settings=profile",
                    "-cp", str(src), "JfrSplit", "2000"], check=True, capture_output=True,
                   timeout=60)
    # the JDK's own count of the events
    summary = subprocess.run(["jfr", "summary", str(rec)], check=True, capture_output=True,
                             text=True).stdout
    samples = int(next(l.split()[1] for l in summary.splitlines()
                       if l.split()[:1] == ["jdk.ExecutionSample"]))
    assert samples >= 50, summary
    # as pyroscope-java sends it: multipart, the recording in field jfr
    boundary = "aperture-jfr"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + rec.read_bytes() + \
        f"\r\n--{boundary}--\r\n".encode()
    code, reply = ingest(agg, body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
                         name="javaapp{env=test}", format="jfr", **{"from": int(time.time())})
    assert code == 200, reply
    stacks = folded(agg.get("/services/javaapp/cpu.folded", TOKENS["read"])[1])
    assert sum(stacks.values()) == samples, (sum(stacks.values()), samples)
    hot = sum(n for s, n in stacks.items() if "JfrSplit.hot" in s.split(";"))
    assert hot > samples / 2, stacks
    assert all(s.startswith("javaapp;") for s in stacks), stacks
    # a recording cut short is refused, clearly, and nothing of it kept
    code, reply = ingest(agg, rec.read_bytes()[:len(rec.read_bytes()) // 2], name="javacut",
                         format="jfr")
    assert code == 400 and b"JFR" in reply, reply
    assert agg.get("/services/javacut/cpu.folded", TOKENS["read"])[0] == 404
