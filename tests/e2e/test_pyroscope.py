"""Pyroscope's push API on the aggregator: a Node.js program profiled by the npm
@pyroscope/nodejs client (pprof, gzip'd, as the client sends it) shows its hot function under
services/<app>/; folded pushes land exactly as sent, counted once each; bad metadata is 400,
an unknown token 401, a read token 403, an unusable profile 422, as Pyroscope answers."""
import gzip
import os
import subprocess
import time
import urllib.parse

import pytest

from fleet import Aggregator, folded
from helpers import parse_status

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
