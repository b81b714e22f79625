#!/usr/bin/python3
"""The page's time to a drawn flame graph for a service with 1 hour of 100 nodes (SQLite).

bench/aggregate.py's load (a recorded many_stacks profile, 99 samples a second per target, 2
targets per node, one batch per node per 10 s) fills an aggregator with HOURS of NODES nodes,
then headless Chromium (Debian's, through playwright-core) opens the page at a service with
the range `last hour`, RUNS times, each in a fresh browser profile: the figure is the time from
navigation start to the flame graph and its table drawn (the page's `apertureDrawn` mark),
beside the aggregator's own time to answer the service's cpu.folded for the same range.

    sudo bench/web.py            # NODES=100 HOURS=1 RUNS=3
The filled store is kept in DB_DIR (default /var/tmp/aperture-bench-web) and reused by the
next run with the same NODES and HOURS, since filling takes minutes. Its seconds are then
older: the page and the query ask for the hour the store holds (from..until), not `last`.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from aggregate import INTERVAL_S, record_profile, seconds_of  # noqa: E402
from fleet import Aggregator, HEADERS, batch, encode  # noqa: E402
from helpers import wait_for  # noqa: E402

NODES = int(os.environ.get("NODES", 100))
HOURS = float(os.environ.get("HOURS", 1))
RUNS = int(os.environ.get("RUNS", 3))
DB_DIR = Path(os.environ.get("DB_DIR", "/var/tmp/aperture-bench-web"))
CONNS = 8
NODE_MODULES = "/usr/local/lib/aperture-tests/node_modules"

MEASURE = r"""
const { chromium } = require("playwright-core");
(async () => {
  const [url, token, dir, range] = process.argv.slice(1);
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: "/usr/bin/chromium",
    headless: true, viewport: { width: 1500, height: 900 }, args: ["--headless", "--no-sandbox",
    "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"] });
  const page = await ctx.newPage();
  await page.goto(url + "/ui/app.css");
  await page.evaluate((t) => localStorage.setItem("aperture-token", t), token);
  await page.goto(url + "/#p=/services/svc0&" + range);
  await page.waitForFunction(() => window.apertureDrawn ||
    document.querySelector("main").dataset.state === "error", null, { timeout: 600000 });
  const r = await page.evaluate(() => ({ drawn_ms: window.apertureDrawn,
    state: document.querySelector("main").dataset.state,
    message: document.getElementById("message").textContent,
    frames: document.querySelectorAll("#flame .fr").length }));
  process.stdout.write(JSON.stringify(r));
  await ctx.close();
})();
"""


def fill(agg, stacks, start):
    rounds = int(HOURS * 3600 / INTERVAL_S)
    queue, lock, failures = [], threading.Lock(), []
    done = threading.Event()

    def producer():
        for r in range(rounds):
            secs = seconds_of(stacks, start + r * INTERVAL_S)
            for i in range(NODES):
                targets = [dict(pid=1000 + t, comm=f"svc{t}", labels={"service": f"svc{t}"},
                                profiles={"cpu": secs}) for t in range(2)]
                body = encode(batch(f"node{i}", f"{i:032x}", r + 1, targets))
                while True:
                    with lock:
                        if len(queue) < 2000:
                            queue.append((f"tok{i}", body))
                            break
                    time.sleep(0.01)
        done.set()

    def worker():
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", agg.port, timeout=120)
        while True:
            with lock:
                item = queue.pop(0) if queue else None
            if not item:
                if done.is_set():
                    with lock:
                        if not queue:
                            break
                time.sleep(0.01)
                continue
            c.request("POST", "/v1/batches", item[1],
                      dict(HEADERS, Authorization=f"Bearer {item[0]}"))
            r = c.getresponse()
            r.read()
            if r.status != 200:
                failures.append(r.status)
        c.close()

    threads = [threading.Thread(target=producer)] + [threading.Thread(target=worker)
                                                       for _ in range(CONNS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rounds * NODES, failures


def main():
    DB_DIR.mkdir(parents=True, exist_ok=True)
    marker = DB_DIR / "filled.json"
    tokens = "".join(f"tok{i} node node{i}\n" for i in range(NODES)) + "tokread read *\n"
    agg = Aggregator(DB_DIR, tokens)
    have = json.loads(marker.read_text()) if marker.exists() else {}
    if have.get("nodes") != NODES or have.get("hours") != HOURS:
        for p in DB_DIR.glob("agg.db*"):
            p.unlink()
        marker.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            stacks = record_profile(tmp)
        start = int(time.time()) - int(HOURS * 3600) - 5
        agg.start()
        t0 = time.monotonic()
        batches, failures = fill(agg, stacks, start)
        have = dict(nodes=NODES, hours=HOURS, start=start, batches=batches,
                    failures=len(failures), fill_s=round(time.monotonic() - t0, 1),
                    stacks=len(stacks))
        marker.write_text(json.dumps(have))
        print(f"filled: {have}", flush=True)
    else:
        try:
            agg.start()
        except AssertionError:  # a big store's retention pass runs before it listens
            wait_for(agg._ready, 900, "the aggregator to open its store")
    rng = f"from={have['start']}&until={have['start'] + int(HOURS * 3600) + 10}"
    server, page = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(RUNS):  # alternating: the aggregator's answer, then the page
            req = urllib.request.Request(agg.url + "/services/svc0/cpu.folded?" + rng,
                                         headers={"Authorization": "Bearer tokread"})
            t = time.monotonic()
            body = urllib.request.urlopen(req, timeout=900).read()
            server.append(time.monotonic() - t)
            print(f"run {i}: aggregator {server[-1]:.3f} s ({len(body)} bytes)", flush=True)
            r = subprocess.run(["node", "-e", MEASURE, agg.url, "tokread", f"{tmp}/ud{i}",
                                "range=custom&" + rng], capture_output=True, text=True,
                               timeout=900, env=dict(os.environ, NODE_PATH=NODE_MODULES))
            if r.returncode or not r.stdout:
                raise SystemExit(f"the page run failed: {r.stderr[-2000:]}")
            page.append(json.loads(r.stdout))
            print(f"run {i}: page {page[-1]}", flush=True)
    db_mb = sum(p.stat().st_size for p in DB_DIR.glob("agg.db*")) / 2**20
    agg.stop()
    med = lambda v: sorted(v)[len(v) // 2]
    result = dict(have, db_mb=round(db_mb, 1), folded_bytes=len(body),
                  server_folded_s=[round(s, 3) for s in server],
                  page_drawn_s=[round(p["drawn_ms"] / 1000, 3) for p in page],
                  frames=page[0]["frames"])
    print(f"{NODES} nodes x {HOURS} h ({have['batches']} batches, {result['db_mb']} MB SQLite)")
    print(f"service cpu.folded over the hour: aggregator answers in {med(server):.3f} s "
          f"(median of {RUNS}); page opened to flame graph drawn: "
          f"{med(result['page_drawn_s']):.3f} s (median; target < 2 s), {result['frames']} "
          f"frames drawn")
    out = HERE / "results" / f"web-{time.strftime('%Y-%m-%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
