"""The aggregator's page in headless Chromium (tests/e2e/web.cjs, playwright-core driving
Debian's chromium), against a real aggregator fed by a real node on loopback: cpu_split (b
does 70 % of the work, c 30 %, both in burn, inlined) and a deadlocked `waits deadlock`
profiled on the node, and a service whose two seconds the test posts itself (grow: 10 then
90 samples, shrink: 90 then 10) for compare. The same page served by the node's own daemon
(`--http` on loopback). Screenshots in build/test-output/web/."""
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from fleet import Aggregator, batch, free_port, syncing_node
from helpers import BUILD, Daemon, parse_folded, parse_status, read, wait_for, write
from test_waits import Waits

NODE_MODULES = "/usr/local/lib/aperture-tests/node_modules"
OUT = BUILD / "test-output" / "web"
TOKENS = {"node": "tok-web-node", "cmp": "tok-web-cmp", "read": "tok-web-read"}

pytestmark = pytest.mark.skipif(
    not os.path.isdir(f"{NODE_MODULES}/playwright-core") or not os.path.exists("/usr/bin/chromium"),
    reason="playwright-core (deploy/setup.sh) and /usr/bin/chromium are needed")


@pytest.fixture(scope="module")
def fleet(scratch):
    agg = Aggregator(scratch, tokens=f"{TOKENS['node']} node web1\n{TOKENS['cmp']} node cmp\n"
                                     f"{TOKENS['read']} read *\n").start()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    port = free_port()
    try:
        with syncing_node(agg, scratch, "web1", TOKENS["node"],
                          ["--http", f"127.0.0.1:{port}"]) as node:
            node.http = f"http://127.0.0.1:{port}"
            yield agg, node
    finally:
        agg.stop()


def test_page_lists_profiles_zooms_searches_compares_and_refuses_a_wrong_token(
        fleet, workloads, scratch):
    agg, node = fleet
    split = workloads.start("cpu_split", 30)
    dead = Waits(workloads, "deadlock")
    write(node.target(split.pid) / "enable", "1")
    write(node.target(dead.pid) / "enable", "1")
    dead.send(b"\n")
    dead.expect("locked")

    def mirrored():
        code, body = agg.get(f"/nodes/web1/targets/{split.pid}/cpu.folded", TOKENS["read"])
        code2, dl = agg.get(f"/nodes/web1/targets/{dead.pid}/threads/deadlocks", TOKENS["read"])
        stacks = parse_folded(body.decode()) if code == 200 else {}
        b = sum(n for s, n in stacks.items() if "b" in s)
        return code2 == 200 and b"locker-a" in dl and b >= 50
    wait_for(mirrored, 30, "the node's profile and deadlock at the aggregator")

    # compare's ground truth: two seconds of service cmpsvc
    t1, t2 = int(time.time()) - 120, int(time.time()) - 60
    code, _ = agg.post(batch("cmp", "c" * 32, 1, [{
        "pid": 7, "comm": "cmpsvc", "profiles": {"cpu": {
            t1: {("cmpsvc", "main", "grow"): 10, ("cmpsvc", "main", "shrink"): 90},
            t2: {("cmpsvc", "main", "grow"): 90, ("cmpsvc", "main", "shrink"): 10}}}}]),
        TOKENS["cmp"])
    assert code == 200

    cfg = {"url": agg.url, "token": TOKENS["read"], "node": "web1", "pid": split.pid,
           "hot": "b", "deadlock_pid": dead.pid, "out": str(OUT),
           "compare_hash": f"#p=/services/cmpsvc&view=compare&range=custom&from={t2}"
                           f"&until={t2}&brange=custom&bfrom={t1}&buntil={t1}"}
    (scratch / "web.json").write_text(json.dumps(cfg))
    r = subprocess.run(["node", str(os.path.dirname(__file__) + "/web.cjs"),
                        str(scratch / "web.json")], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NODE_PATH=NODE_MODULES))
    seen = json.loads(r.stdout or "{}")
    assert r.returncode == 0 and not seen["errors"], (seen.get("errors"), r.stderr[-2000:])

    # the node and its target, listed
    assert "web1" in seen["nav"] and f"pid {split.pid}" in seen["nav"]
    # cpu flame graph: all the work is in burn (inlined into b and c: burn_[i]), the top
    # function by self; b's total is its share of the profile as the aggregator has it
    assert seen["flame_state"] == "ready" and seen["frames"] > 3
    assert seen["top"][0][0] == "burn_[i]", seen["top"]
    # a click zoomed to b: the frame spans the graph's width
    assert "z=cpu_split" in seen["zoom_hash"], seen["zoom_hash"]
    assert seen["zoom_width"] > 0.95 * seen["flame_width"], seen
    # the search's share is b's share of the profile, as the aggregator's own file says
    stacks = parse_folded(agg.get(f"/nodes/web1/targets/{split.pid}/cpu.folded?last=3600",
                                  TOKENS["read"])[1].decode())
    share = 100 * sum(n for s, n in stacks.items() if "b" in s) / sum(stacks.values())
    b_row = [r for r in seen["top"] if r[0] == "b"][0]
    assert abs(float(b_row[2].split("(")[1].rstrip("%)")) - share) < 5, (b_row, share)
    got = float(seen["matched"].split("Matched: ")[1].split("%")[0])
    assert abs(got - share) < 5, (seen["matched"], share)
    assert seen["link_matched"].startswith("Matched:"), "a link shows the same search"
    # compare: grow is red (it grew from 10 % to 90 %), shrink is blue
    assert seen["compare_state"] == "ready"
    colours = {f["name"]: f["bg"] for f in seen["compare"]}

    def rgb(s):
        return [int(x) for x in s[s.index("(") + 1:s.index(")")].split(",")[:3]]
    r_, g_, b_ = rgb(colours["grow"])
    assert r_ > 200 and b_ < 150, colours
    r_, g_, b_ = rgb(colours["shrink"])
    assert b_ > 200 and r_ < 150, colours
    # threads: the deadlock names both threads
    assert "locker-a" in seen["deadlocks"] and "locker-b" in seen["deadlocks"], seen["deadlocks"]
    # the download is the folded file shown
    assert seen["download_name"].endswith(".cpu.folded")
    assert sum(parse_folded(seen["download"]).values()) > 0
    # a wrong token: unauthorized, and not a frame nor a function name on the page
    assert seen["bad_state"] == "unauthorized" and seen["bad_frames"] == 0
    assert "Unauthorized" in seen["bad_text"] and "cpu_split" not in seen["bad_text"]
    for name in ("1-nav", "2-flame", "3-zoomed", "4-search", "5-compare", "6-threads",
                 "7-unauthorized"):
        assert (OUT / f"{name}.png").stat().st_size > 1000


def run_page(cfg, scratch, name):
    (scratch / name).write_text(json.dumps(cfg))
    r = subprocess.run(["node", str(os.path.dirname(__file__) + "/web.cjs"), str(scratch / name)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NODE_PATH=NODE_MODULES))
    seen = json.loads(r.stdout or "{}")
    assert r.returncode == 0 and not seen["errors"], (seen.get("errors"), r.stderr[-2000:])
    return seen


def test_the_node_serves_the_page_over_its_own_tree(fleet, workloads, scratch):
    """The node's daemon, --http on 127.0.0.1: the page lists it as one node with its target,
    draws the target's flame graph (burn, inlined into b and c, the hot function) and its
    folded download is the node's own cpu.folded, sample for sample."""
    _, node = fleet
    split = workloads.start("cpu_split", 30)
    write(node.target(split.pid) / "enable", "1")
    wait_for(lambda: sum(n for s, n in parse_folded(read(node.target(split.pid) / "cpu.folded"))
                         .items() if "b" in s) >= 50, 30, "samples of b on the node")
    # stopped (past "stopping": its data final), so the page and the file show the same
    write(node.target(split.pid) / "enable", "0")
    wait_for(lambda: parse_status(read(node.target(split.pid) / "status"))["state"] ==
             "disabled", 10, "the target's collection to stop")
    truth = parse_folded(read(node.target(split.pid) / "cpu.folded"))
    seen = run_page({"url": node.http, "node": "web1", "pid": split.pid, "node_page": True,
                     "out": str(OUT)}, scratch, "web-node.json")
    assert "web1" in seen["nav"] and f"pid {split.pid}" in seen["nav"], seen["nav"]
    assert seen["flame_state"] == "ready" and seen["top"][0][0] == "burn_[i]", seen["top"]
    assert {"b", "c", "burn_[i]"} <= set(seen["flame_names"]), seen["flame_names"][:20]
    assert parse_folded(seen["download"]) == truth
    assert (OUT / "node-flame.png").stat().st_size > 1000


def test_the_nodes_listener_asks_a_token_when_given_tokens(scratch):
    """--http-tokens: stack data only for a token that reads this node; /metrics and the
    page's files without one."""
    (scratch / "http-tokens").write_text("tok-all read *\ntok-n2 node web2\ntok-n3 node web3\n")
    (scratch / "tokmnt").mkdir()
    port = free_port()
    d = Daemon(scratch / "tokmnt", scratch / "tok.log",
               args=["--node", "web2", "--http", f"127.0.0.1:{port}", "--http-tokens",
                     str(scratch / "http-tokens")]).start()

    def code(path, token=None):
        rq = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                    headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(rq, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
    try:
        assert code("/nodes/") == 401 and code("/nodes/", "nope") == 401
        assert code("/nodes/web2/status", "tok-n3") == 403
        assert code("/nodes/", "tok-all") == 200 and code("/nodes/web2/status", "tok-n2") == 200
        assert code("/metrics") == 200 and code("/ui/app.js") == 200
        d.stop()
    finally:
        d.kill()
