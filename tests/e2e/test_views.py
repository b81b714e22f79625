"""Every view of a live target agrees with its cpu.folded (same total, same stacks): cpu.json
(d3-flame-graph's tree), cpu.pprof (read by two decoders of profile.proto: npm's
pprof-format, and Google's protobuf runtime with our .proto), cpu.svg and flame.svg (frame by
frame); and flame.svg works in a real browser: headless Chromium opens it from disk, a click
zooms, a search shows the matched share. The browser's screenshot is saved where the test
prints (build/test-output/flame-browser.png)."""
import gzip
import importlib.util
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from helpers import BUILD, REPO, Workloads, parse_folded, write

FAST_HZ = 499
SAMPLES = 1000
VIEWS = ["cpu.folded", "cpu.json", "cpu.pprof", "cpu.svg", "flame.svg"]
NODE_MODULES = Path(os.environ.get("APERTURE_NODE_MODULES",
                                   "/usr/local/lib/aperture-tests/node_modules"))
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def frozen(daemon):
    """cpu_split profiled for SAMPLES samples, then disabled: (pid, folded stacks, {view:
    bytes}), every view read from the same final profile."""
    w = Workloads()
    try:
        daemon.set_frequency(FAST_HZ)
        pid = w.start("cpu_split").pid
        write(daemon.target(pid) / "enable", "1")
        daemon.wait_samples(pid, SAMPLES, timeout=30)
        write(daemon.target(pid) / "enable", "0")
        daemon.final_samples(pid)
        files = {name: (daemon.target(pid) / name).read_bytes() for name in VIEWS}
        return pid, parse_folded(files["cpu.folded"].decode()), files
    finally:
        w.stop_all()


def prefix_total(stacks, path):
    return sum(n for frames, n in stacks.items() if frames[:len(path)] == path)


def test_json_agrees_with_folded(frozen):
    pid, stacks, files = frozen
    doc = json.loads(files["cpu.json"])
    total = sum(stacks.values())
    assert doc["title"] == f"cpu: cpu_split (pid {pid})"
    assert doc["unit"] == "samples" and doc["total"] == total
    assert doc["period"] == {"type": "cpu", "unit": "nanoseconds", "value": 10**9 // FAST_HZ}
    window = doc["window"]
    assert window["seconds"] == 0
    since, until = (datetime.strptime(window[k], "%Y-%m-%dT%H:%M:%SZ")
                    .replace(tzinfo=timezone.utc) for k in ("since", "until"))
    assert since <= until <= datetime.now(timezone.utc)

    got = {}

    def walk(node, path):
        kids = node["children"]
        names = [k["name"].encode() for k in kids]
        assert names == sorted(names) and len(set(names)) == len(names), \
            f"children of {path} must be unique and in name order"
        own = node["value"] - sum(k["value"] for k in kids)
        assert own >= 0, f"{path}: children hold more than the node"
        if own:
            got[path] = own
        for k in kids:
            walk(k, path + (k["name"],))
    assert doc["tree"]["name"] == "all" and doc["tree"]["value"] == total
    walk(doc["tree"], ())
    assert got == stacks


def pprof_stacks(samples):
    """{(thread, root, ..., leaf): count} from decoded samples (frames leaf first)."""
    out = {}
    for s in samples:
        key = (s["thread"],) + tuple(reversed(s["frames"]))
        out[key] = out.get(key, 0) + s["values"][0]
    return out


def test_pprof_read_by_pprof_format(frozen):
    """npm's pprof-format knows profile.proto's field numbers without our .proto."""
    _, stacks, files = frozen
    assert (NODE_MODULES / "pprof-format").is_dir(), \
        f"pprof-format is not installed in {NODE_MODULES} (deploy/setup.sh installs it)"
    path = BUILD / "test-output" / "cpu.pprof"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(files["cpu.pprof"])
    r = subprocess.run(["node", REPO / "tests" / "e2e" / "pprof_decode.cjs", path],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["types"] == [["samples", "count"], ["cpu", "nanoseconds"]]
    assert doc["periodType"] == ["cpu", "nanoseconds"] and doc["period"] == 10**9 // FAST_HZ
    assert all(s["values"][1] == s["values"][0] * doc["period"] for s in doc["samples"])
    assert pprof_stacks(doc["samples"]) == stacks


def test_pprof_read_by_protobuf(frozen, tmp_path):
    """Google's protobuf runtime, with Python code protoc generates from views/profile.proto."""
    _, stacks, files = frozen
    subprocess.run(["protoc", f"--python_out={tmp_path}", f"--proto_path={REPO / 'views'}",
                    "profile.proto"], check=True)
    spec = importlib.util.spec_from_file_location("profile_pb2", tmp_path / "profile_pb2.py")
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    p = pb.Profile()
    p.ParseFromString(gzip.decompress(files["cpu.pprof"]))
    s = p.string_table
    assert s[0] == ""
    functions = {f.id: s[f.name] for f in p.function}
    locations = {loc.id: [functions[line.function_id] for line in loc.line] for loc in p.location}
    samples = [{"thread": s[sm.label[0].str], "values": list(sm.value),
                "frames": [f for i in sm.location_id for f in locations[i]]} for sm in p.sample]
    assert all(s[sm.label[0].key] == "thread" for sm in p.sample)
    assert pprof_stacks(samples) == stacks
    assert p.time_nanos > 0 and p.duration_nanos >= 0


def svg_frames(data):
    """The flame graph's frames, parsed as XML: [(path from the root, samples, width)]."""
    root = ET.fromstring(data)
    base = float(re.search(r"base: ([\d.]+)", root.find(f"{SVG}script").text).group(1))
    frames, path = [], []
    for g in root.find(f".//{SVG}g[@id='frames']"):
        title = g.find(f"{SVG}title").text
        name, _, rest = title.rpartition(" (")
        samples = int(re.match(r"(\d+) samples", rest).group(1))
        rect = g.find(f"{SVG}rect")
        depth = round((base - float(rect.get("y"))) / 16)
        path[depth:] = [name]
        frames.append((tuple(path), samples, float(rect.get("width"))))
    return frames


def test_svg_agrees_with_folded(frozen):
    pid, stacks, files = frozen
    total = sum(stacks.values())
    frames = svg_frames(files["cpu.svg"])
    assert frames[0] == (("all",), total, 1180.0)
    for path, samples, width in frames:
        if re.fullmatch(r"\[\d+ narrow frames\]", path[-1]):
            continue
        assert samples == prefix_total(stacks, path[1:]), f"{path} in cpu.svg"
        assert abs(width - 1180 * samples / total) <= 0.06, f"{path}'s width"
    # every stack holding at least a pixel's share is drawn to its leaf
    drawn = {path[1:] for path, _, _ in frames}
    for stack, n in stacks.items():
        if prefix_total(stacks, stack) * 1180 / total >= 1:
            assert stack in drawn, f"{stack} is missing from cpu.svg"
    text = files["cpu.svg"].decode()
    assert f"Flame graph: cpu: cpu_split (pid {pid})" in text
    assert f": {total} samples</text>" in text
    # flame.svg is the same picture
    assert svg_frames(files["flame.svg"]) == frames


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1220,600"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    yield driver
    driver.quit()


def test_flame_graph_in_browser(frozen, browser):
    from selenium.webdriver.common.by import By

    _, stacks, files = frozen
    total = sum(stacks.values())
    out = BUILD / "test-output"
    out.mkdir(exist_ok=True)
    svg = out / "flame.svg"
    svg.write_bytes(files["flame.svg"])
    browser.get(svg.as_uri())

    def frame(name):
        for g in browser.find_elements(By.CSS_SELECTOR, "#frames > g"):
            if g.find_element(By.TAG_NAME, "title").get_attribute("textContent") \
                    .startswith(name + " ("):
                return g.find_element(By.TAG_NAME, "rect")
        raise AssertionError(f"no frame {name} in flame.svg")

    b, c = frame("b"), frame("c")
    width_b = float(b.get_attribute("width"))
    assert width_b < 1000, "b should not fill the graph before zooming"
    b.click()
    assert float(b.get_attribute("width")) == 1180.0, "a click on b zooms to b"
    assert not c.is_displayed(), "c is outside b: hidden while zoomed"
    assert browser.find_element(By.ID, "reset").is_displayed()
    assert browser.find_element(By.ID, "details").text.startswith("b (")

    browser.find_element(By.ID, "search").click()
    prompt = browser.switch_to.alert
    prompt.send_keys("^c$")
    prompt.accept()
    in_c = sum(n for frames, n in stacks.items() if "c" in frames[1:])
    matched = browser.find_element(By.ID, "matched").text
    assert matched.startswith(f"Matched: {100 * in_c / total:.1f}% ({in_c} of {total})"), matched
    shot = out / "flame-browser.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")

    browser.find_element(By.ID, "reset").click()
    assert float(b.get_attribute("width")) == width_b, "Reset Zoom restores the graph"
    assert c.is_displayed()


ODD = ("t<1>;a\"b\\c;x&y<z>'q' 1\n"
       "t<1>;\u00e9t\u00e9;\u20ac\U0001f525 2\n"
       "t<1>;]]>;</script><script>alert(1)</script> 3\n"
       "t<1>;sp  ace  4\n")


def render(fmt, text, *args):
    return subprocess.run([BUILD / "aperture", "render", fmt, *args], input=text.encode(),
                          capture_output=True, check=False)


def test_render_command_with_odd_names(tmp_path):
    """`aperture render` with names that need escaping: a real XML parser, a real JSON
    parser and pprof-format read the same stacks back."""
    stacks = parse_folded(ODD)
    total = sum(stacks.values())
    svg = render("svg", ODD, "--title", "odd <&>")
    assert svg.returncode == 0, svg.stderr
    frames = svg_frames(svg.stdout)
    assert frames[0][:2] == (("all",), total)
    assert {path[1:] for path, _, _ in frames if path[1:] in stacks} == set(stacks)
    assert b"Flame graph: odd &lt;&amp;&gt;" in svg.stdout

    doc = json.loads(render("json", ODD).stdout)
    got = {}

    def walk(node, path):
        own = node["value"] - sum(k["value"] for k in node["children"])
        if own:
            got[path] = own
        for k in node["children"]:
            walk(k, path + (k["name"],))
    walk(doc["tree"], ())
    assert got == stacks

    pprof = tmp_path / "odd.pprof"
    pprof.write_bytes(render("pprof", ODD, "--hz", "99").stdout)
    r = subprocess.run(["node", REPO / "tests" / "e2e" / "pprof_decode.cjs", pprof],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    assert r.returncode == 0, r.stderr
    assert pprof_stacks(json.loads(r.stdout)["samples"]) == stacks

    assert render("folded", ODD).stdout.decode() == "".join(sorted(ODD.splitlines(True)))


def test_render_command_rejects_bad_input():
    r = render("svg", "a;b 1\nno count here\n")
    assert r.returncode == 1 and r.stdout == b""
    assert b"line 2" in r.stderr
    assert render("png", "a 1\n").returncode == 2
