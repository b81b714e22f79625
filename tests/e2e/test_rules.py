"""config/rules: a rule by exe enables a process started after it and status names the rule;
an explicit `echo 0 > enable` beats the rule; a rule with a duration expires; set labels;
config/max_targets bounds what rules enable, and says so; a bad rule set changes nothing.
Each test's program is a copy of cpu_split under a path of its own, so its rules match
nothing else on the machine."""
import errno
import os
import shutil
import subprocess
import time
import uuid

import pytest

from helpers import (WORKLOADS, read, samples_in, user_frames, wait_for, write,
                     write_errno)


@pytest.fixture
def program(scratch):
    """A private copy of cpu_split; yields (path, start function)."""
    d = scratch / f"rules-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    exe = d / "cpu_split"
    shutil.copy(WORKLOADS / "cpu_split", exe)
    procs = []

    def start(*args):
        p = subprocess.Popen([str(exe), *map(str, args)])
        procs.append(p)
        return p.pid
    yield exe, start
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def rules(daemon):
    path = daemon.mnt / "config" / "rules"
    yield path
    write(path, "\n")


def status(daemon, pid):
    return daemon.status(pid)


def test_exe_rule_enables_a_later_process_and_user_disable_wins(daemon, program, rules):
    exe, start = program
    write(rules, f"# profile the checkout service\ncomm=nothing-runs-this set a=b\n"
                 f"exe={exe} enable\nexe={exe.parent}/* set service=checkout\n")
    assert read(rules).splitlines()[2] == f"exe={exe} enable"
    pid = start()
    st = wait_for(lambda: (s := status(daemon, pid))["state"] == "enabled" and s, 5,
                  "the rule to enable a new process")
    assert st["enabled_by"] == "rule 3", st
    assert st["labels"] == "service=checkout", st
    assert st["cgroup"].startswith("/"), st
    daemon.wait_samples(pid, 5)

    write(daemon.target(pid) / "enable", "0")
    assert status(daemon, pid)["state"] == "disabled"
    # Neither the once-a-second pass nor rewriting the rules enables it again.
    time.sleep(2.2)
    write(rules, f"exe={exe} enable\n")
    st = status(daemon, pid)
    assert st["state"] == "disabled" and st["enabled_by"].startswith("none"), st

    # A process the rule enabled goes when no rule enables it any more; the user's stays.
    other, mine = start(), start()
    wait_for(lambda: status(daemon, other)["state"] == "enabled", 5, "the rule")
    write(daemon.target(mine) / "enable", "1")
    assert status(daemon, mine)["enabled_by"] == "user"
    write(rules, "\n")
    assert status(daemon, other)["state"] == "disabled"
    assert status(daemon, mine)["state"] == "enabled"


def test_a_rule_enables_a_short_process_at_its_exec(daemon, program, rules):
    """A 400 ms program started after the rule is profiled from its exec: its samples cover
    at least 85 % of the CPU time it used (its own rusage), which a once-a-second /proc poll
    misses most of; status says the rule and how new processes are found."""
    exe, _ = program
    hz = 499
    daemon.set_frequency(hz)
    try:
        write(rules, f"exe={exe} enable\n")
        top = daemon.status()
        assert top["rules_new_processes"].startswith("exec watch"), top
        p = subprocess.Popen([str(exe), "0.4"])
        _, code, usage = os.wait4(p.pid, 0)
        p.returncode = code
        cpu_s = usage.ru_utime + usage.ru_stime
        st = status(daemon, p.pid)
        assert st["enabled_by"] == "rule 1", st
        wait_for(lambda: status(daemon, p.pid)["state"] == "exited", 5, "the exit noted")
        samples = daemon.final_samples(p.pid)
        stacks = daemon.folded(p.pid)
    finally:
        daemon.set_frequency(99)
    assert samples >= 0.85 * cpu_s * hz, (samples, cpu_s, st)
    b = samples_in(stacks, lambda f: "b" in user_frames(f))
    c = samples_in(stacks, lambda f: "c" in user_frames(f))
    assert b + c >= 0.8 * samples and 0.5 < b / (b + c) < 0.9, stacks  # 70 %: 3 sigma at 50
    assert int(daemon.status()["rules_exec_events"]) > 0


def test_without_the_exec_watch_the_poll_enables_and_status_says_so(scratch, program):
    """Where the watch cannot attach (forced here by APERTURE_RULES_POLL), the once-a-second
    /proc poll still enables a process started after the rule, and status says which."""
    from helpers import Daemon

    exe, start = program
    node = Daemon(scratch / f"mnt-poll-{exe.parent.name}", scratch / "poll.log",
                  env={"APERTURE_RULES_POLL": "1"})
    try:
        node.start()
        write(node.mnt / "config" / "rules", f"exe={exe} enable\n")
        assert node.status()["rules_new_processes"] == "/proc polled every second"
        pid = start()
        st = wait_for(lambda: (s := node.status(pid))["state"] == "enabled" and s, 5,
                      "the poll to enable a new process")
        assert st["enabled_by"] == "rule 1", st
        assert "rules_exec_events" not in node.status()
        node.stop()
    finally:
        node.kill()


def test_rule_with_a_duration_expires(daemon, program, rules):
    exe, start = program
    pid = start()
    write(rules, f"exe={exe} enable for=2s\n")
    st = status(daemon, pid)  # applied to running processes when written
    assert st["state"] == "enabled" and st["enabled_by"] == "rule 1", st
    wait_for(lambda: status(daemon, pid)["state"] == "expired", 5, "the enable to expire")
    time.sleep(1.5)  # the once-a-second pass does not renew it
    assert status(daemon, pid)["state"] == "expired"


def test_rule_collectors_plug_into_the_target_set(daemon, program, rules):
    exe, start = program
    pid = start()
    write(rules, f"exe={exe} enable collectors=cpu,offcpu\n")
    assert read(daemon.target(pid) / "collectors").split() == ["cpu", "offcpu"]
    assert status(daemon, pid)["state"] == "enabled"


def test_max_targets_bounds_a_rule_and_says_so(daemon, program, rules):
    exe, start = program
    pids = [start() for _ in range(3)]
    write(daemon.mnt / "config" / "max_targets", "2")
    try:
        # Every other target of this daemon is disabled: two enabled at most.
        write(rules, f"exe={exe} enable\n")
        states = [status(daemon, p)["state"] for p in pids]
        assert sorted(states) == ["disabled", "enabled", "enabled"], states
        top = read(daemon.mnt / "status")
        assert "rules_bounded: 1 (config/max_targets 2 reached)" in top, top
        assert "config/max_targets (2)" in top
    finally:
        write(rules, "\n")
        write(daemon.mnt / "config" / "max_targets", "256")


@pytest.mark.parametrize("bad", ["enable please", "comm=x enabel", "uid=me enable",
                                 "comm=x enable for=forever", "comm=x set service",
                                 "comm=x enable collectors=gpu", "label=x enable"])
def test_bad_rules_change_nothing(daemon, rules, bad):
    write(rules, "comm=nothing-runs-this disable\n")
    assert write_errno(rules, f"# ok\n{bad}\n") == errno.EINVAL
    assert read(rules) == "comm=nothing-runs-this disable\n"
    assert "config/rules: line 2: " in read(daemon.mnt / "status")


def test_node_labels(daemon, program):
    exe, start = program
    pid = start()
    labels = daemon.mnt / "config" / "labels"
    try:
        write(labels, "cluster=prod zone=eu-1\n")
        assert status(daemon, pid)["labels"] == "cluster=prod zone=eu-1"
        assert write_errno(labels, "cluster=prod zone") == errno.EINVAL
        assert read(labels) == "cluster=prod zone=eu-1\n"
    finally:
        write(labels, "")


def test_labels_travel_with_sync_and_name_the_service(scratch, program):
    """A node started with --rules that label and enable a program ships it to an aggregator
    (on loopback) as the service its `service` label names, not by its comm."""
    from fleet import Aggregator
    from helpers import Daemon

    exe, start = program
    service = f"checkout-{exe.parent.name}"
    rules = scratch / f"rules-{exe.parent.name}"
    rules.write_text(f"exe={exe} set service={service} team=pay\nexe={exe} enable\n")
    agg_dir = scratch / f"agg-{exe.parent.name}"
    agg_dir.mkdir()
    agg = Aggregator(agg_dir).start()
    token = scratch / "node-token"
    token.write_text("unused\n")
    node = Daemon(scratch / f"mnt-{exe.parent.name}", scratch / "sync-node.log",
                  args=["--rules", str(rules), "--sync", agg.url, "--node", "k8s-e2e",
                        "--token-file", str(token), "--spool-dir", str(agg_dir / "spool")])
    try:
        node.start()
        write(node.mnt / "config" / "sync_interval_s", "1")
        pid = start()
        wait_for(lambda: node.status(pid)["state"] == "enabled", 5, "the rule")
        assert node.status(pid)["labels"] == f"service={service} team=pay"

        def shipped():
            code, body = agg.get(f"/services/{service}/cpu.folded", None)
            return code == 200 and "cpu_split" in body.decode()
        wait_for(shipped, 30, f"services/{service}/ on the aggregator", interval=0.5)
        code, body = agg.get(f"/nodes/k8s-e2e/targets/{pid}/status", None)
        assert code == 200 and f"labels: service={service} team=pay" in body.decode()
        code, body = agg.get("/services/cpu_split/cpu.folded", None)
        assert code == 404, "the service label wins over the comm"
    finally:
        try:
            node.stop()
        finally:
            node.kill()
            agg.stop()
