"""Metrics: a node's (`aperture mount --http`, GET /metrics, the tree's metrics file) and the
aggregator's (GET /metrics with a read token) pass `promtool check metrics`; a real Prometheus
(Debian's), started on loopback with a config this test writes, scrapes both, and its query
API returns the samples counters, no more than the daemons counted. The alert rules in deploy/
pass `promtool check rules` and their unit tests."""
import json
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from fleet import Aggregator, free_port, syncing_node
from helpers import REPO, parse_status, read, wait_for, write

TOKENS = {"node": "tok-met-node", "read": "tok-met-read"}


def promtool(*args, stdin=None):
    return subprocess.run(["promtool", *args], input=stdin, capture_output=True, text=True)


def test_alert_rules_check_and_their_unit_tests_pass():
    r = promtool("check", "rules", str(REPO / "deploy" / "aperture-alerts.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["promtool", "test", "rules", "aperture-alerts.test.yml"],
                       cwd=REPO / "deploy", capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


@pytest.fixture(scope="module")
def fleet(scratch):
    agg = Aggregator(scratch, tokens=f"{TOKENS['node']} node met1\n{TOKENS['read']} read *\n")
    agg.start()
    port = free_port()
    try:
        with syncing_node(agg, scratch, "met1", TOKENS["node"],
                          ["--http", f"127.0.0.1:{port}"]) as node:
            node.http = f"http://127.0.0.1:{port}"
            yield agg, node
    finally:
        agg.stop()


def get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def test_prometheus_scrapes_a_node_and_the_aggregator(fleet, workloads, scratch):
    agg, node = fleet
    split = workloads.start("cpu_split", 30)
    write(node.target(split.pid) / "enable", "1")
    wait_for(lambda: int(parse_status(read(node.mnt / "status"))["samples"]) > 20, 10,
             "samples on the node")
    wait_for(lambda: parse_status(agg.get("/nodes/met1/status", TOKENS["read"])[1].decode())
             .get("samples", "0") != "0", 10, "samples at the aggregator")

    node_text = get(node.http + "/metrics")
    tree_text = read(node.mnt / "metrics")
    agg_text = get(agg.url + "/metrics", TOKENS["read"])
    assert "aperture_cpu_samples_total" in node_text and "aperture_cpu_samples_total" in tree_text
    for text in (node_text, tree_text, agg_text):
        r = promtool("check", "metrics", stdin=text)
        assert r.returncode == 0, r.stdout + r.stderr + text
    # the aggregator's metrics need a token like the rest of its tree
    with pytest.raises(urllib.error.HTTPError) as e:
        get(agg.url + "/metrics")
    assert e.value.code == 401

    port = free_port()
    (scratch / "read-token").write_text(TOKENS["read"])
    (scratch / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: node
    static_configs: [{{targets: ["{node.http[7:]}"]}}]
  - job_name: aggregator
    authorization: {{credentials_file: "{scratch / 'read-token'}"}}
    static_configs: [{{targets: ["127.0.0.1:{agg.port}"]}}]
""")
    prom = subprocess.Popen(["prometheus", f"--config.file={scratch / 'prometheus.yml'}",
                             f"--storage.tsdb.path={scratch / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(scratch / "prom.log", "wb"))

    def query(q):
        try:
            doc = json.loads(get(f"http://127.0.0.1:{port}/api/v1/query?" +
                                 urllib.parse.urlencode({"query": q})))
        except OSError:
            return None
        res = doc["data"]["result"]
        return float(res[0]["value"][1]) if res else None
    try:
        node_samples = wait_for(lambda: query('aperture_cpu_samples_total{job="node"}'), 30,
                                "Prometheus to scrape the node")
        agg_samples = wait_for(lambda: query('aperture_aggregate_samples_total'
                                             '{job="aggregator"}'), 30,
                               "Prometheus to scrape the aggregator")
        assert query('up{job="node"}') == 1 and query('up{job="aggregator"}') == 1
        assert query('aperture_aggregate_node_last_batch_timestamp_seconds{node="met1"}') > \
            time.time() - 60
    finally:
        prom.terminate()
        prom.wait(timeout=20)
    # what Prometheus holds is what the daemons counted, at some earlier moment
    assert 0 < node_samples <= int(parse_status(read(node.mnt / "status"))["samples"])
    assert 0 < agg_samples <= float(
        [l for l in get(agg.url + "/metrics", TOKENS["read"]).splitlines()
         if l.startswith("aperture_aggregate_samples_total ")][0].split()[1])
