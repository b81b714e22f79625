"""Time windows and differential profiles, against switch_ab: a workload that burns in a
until it gets SIGUSR1, then in b. A window that starts after the switch must hold only b;
window 0 holds both; a baseline kept before the switch holds only a."""
import errno
import json
import re
import signal
import time
import xml.etree.ElementTree as ET

import pytest

from helpers import parse_folded, read, user_frames, wait_for, write, write_errno

HZ = 499
WINDOW = 2


@pytest.fixture(autouse=True)
def fast_sampling(daemon):
    write(daemon.mnt / "config" / "frequency_hz", str(HZ))
    yield
    write(daemon.mnt / "config" / "window_s", "0")


def functions(stacks):
    """{leaf-side function of interest: samples} for a and b."""
    out = {"a": 0, "b": 0}
    for frames, n in stacks.items():
        for name in out:
            if name in user_frames(frames):
                out[name] += n
    return out


def names_in(node):
    """Every frame name in a cpu.json tree (or its top-level object)."""
    names = {node["name"]} if "name" in node else set()
    for child in node.get("children", []):
        names |= names_in(child)
    return names | (names_in(node["tree"]) if "tree" in node else set())


def folded_now(daemon, pid):
    return functions(daemon.folded(pid))


@pytest.fixture
def switched(daemon, workloads):
    """switch_ab profiled for ~1 s of a, switched to b, then run until the last second of a
    is older than WINDOW + 1 s (a drain lands a second's samples in the bucket of the second
    it runs in, up to a second late). Returns its pid."""
    proc = workloads.start("switch_ab")
    write(daemon.target(proc.pid) / "enable", "1")
    wait_for(lambda: folded_now(daemon, proc.pid)["a"] >= HZ // 2, 15, "samples of a")
    proc.send_signal(signal.SIGUSR1)
    time.sleep(WINDOW + 2.5)
    return proc.pid


def test_short_window_shows_only_what_runs_now(daemon, switched):
    target = daemon.target(switched)
    assert read(target / "window") == "global\n"
    everything = folded_now(daemon, switched)
    assert everything["a"] >= HZ // 2 and everything["b"] > 0, everything

    write(target / "window", str(WINDOW))
    assert read(target / "window") == f"{WINDOW}\n"
    recent = folded_now(daemon, switched)
    assert recent["a"] == 0, f"a stopped running before the window: {recent}"
    assert recent["b"] >= 20, f"b runs all through the window: {recent}"
    top = read(target / "cpu.top")
    assert " a\n" not in top and " b\n" in top, top
    # The views that say what they cover say the window.
    tree = json.loads(read(target / "cpu.json"))
    assert tree["window"]["seconds"] == WINDOW
    assert "b" in names_in(tree) and "a" not in names_in(tree)
    assert daemon.status(switched)["window_s"] == f"{WINDOW} (own)"

    # The target's own 0 overrides a global window; "global" follows config again.
    write(daemon.mnt / "config" / "window_s", str(WINDOW))
    write(target / "window", "0")
    assert folded_now(daemon, switched)["a"] == everything["a"]
    write(target / "window", "global\n")
    assert read(target / "window") == "global\n"
    assert daemon.status(switched)["window_s"] == f"{WINDOW} (global)"
    assert folded_now(daemon, switched)["a"] == 0
    write(daemon.mnt / "config" / "window_s", "0")
    assert folded_now(daemon, switched)["a"] == everything["a"]


def test_bad_window_values(daemon, workloads):
    pid = workloads.start("/bin/sleep", 60).pid
    window = daemon.target(pid) / "window"
    write(window, "5")
    for value, expected in [("601", errno.ERANGE), ("-1", errno.EINVAL),
                            ("globalx", errno.EINVAL), ("5 s", errno.EINVAL),
                            ("\n", errno.EINVAL)]:
        assert write_errno(window, value) == expected, value
        assert read(window) == "5\n", f"window {value!r} changed it"
        assert f'"{value.strip()}"' in daemon.status(pid)["last_error"]
    config = daemon.mnt / "config" / "window_s"
    assert write_errno(config, "601") == errno.ERANGE
    assert "601" in daemon.status()["last_error"]
    assert write_errno(config, "x") == errno.EINVAL
    assert read(config) == "0\n"
    write(config, "600")
    assert read(config) == "600\n"


def parse_diff(text):
    """diff.folded into {stack: (base, now)}, checking every line parses."""
    assert text.endswith("\n")
    out = {}
    for line in text.splitlines():
        stack, base, now = line.rsplit(" ", 2)
        assert base.isdigit() and now.isdigit(), line
        out[tuple(stack.split(";"))] = (int(base), int(now))
    return out


def test_diff_against_a_baseline(daemon, workloads):
    proc = workloads.start("switch_ab")
    target = daemon.target(proc.pid)
    write(target / "enable", "1")
    assert read(target / "baseline") == "0\n"
    assert read(target / "diff.folded") == "" and read(target / "diff.svg") == ""
    assert daemon.status(proc.pid)["baseline"] == "none"

    wait_for(lambda: folded_now(daemon, proc.pid)["a"] >= HZ // 2, 15, "samples of a")
    write(target / "baseline", "1")
    assert read(target / "baseline") == "1\n"
    kept = int(daemon.status(proc.pid)["baseline_samples"])
    assert kept >= HZ // 2
    proc.send_signal(signal.SIGUSR1)
    time.sleep(WINDOW + 2.5)

    # Now over a window that starts after the switch: a went from all to nothing, b from
    # nothing to all; the baseline stays what it was.
    write(target / "window", str(WINDOW))
    diff = parse_diff(read(target / "diff.folded"))
    assert sum(base for base, _ in diff.values()) == kept
    for stack, (base, now) in diff.items():
        frames = user_frames(stack)
        if "a" in frames:
            assert now == 0, (stack, base, now)
        if "b" in frames:
            assert base == 0, (stack, base, now)
    grew = sum(now for stack, (_, now) in diff.items() if "b" in user_frames(stack))
    assert grew >= 20, diff
    svg = read(target / "diff.svg")
    ET.fromstring(svg)
    # The picture is of now (a is gone from it); b is there, new since the baseline.
    assert "Differential flame graph" in svg
    assert re.search(r">b \(\d+ samples, [\d.]+%, base 0, \+", svg), "b grew from 0"

    # Window 0, frozen: the now column is cpu.folded, stack for stack.
    write(target / "window", "0")
    write(target / "enable", "0")
    daemon.final_samples(proc.pid)
    now_stacks = {s: now for s, (_, now) in parse_diff(read(target / "diff.folded")).items()
                  if now}
    assert now_stacks == daemon.folded(proc.pid)

    assert write_errno(target / "baseline", "2") == errno.EINVAL
    assert '"2"' in daemon.status(proc.pid)["last_error"]
    assert read(target / "baseline") == "1\n"
    write(target / "baseline", "0")
    assert read(target / "baseline") == "0\n"
    assert read(target / "diff.folded") == "" and read(target / "diff.svg") == ""
