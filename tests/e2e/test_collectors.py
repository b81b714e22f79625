"""Choosing collectors: a bare enable profiles on-CPU time only and attaches no system-call or
context-switch program (checked in the kernel, by the daemon's own BPF links); each
collector switched on and off while a target is enabled collects exactly while it is on;
bad sets are refused; a new enable is a new profile; and a disable, which waits for the
kernel, holds up no reader of another target."""
import errno
import json
import re
import subprocess
import threading
import time

from helpers import (Gated, bpf_ids, bpf_object, parse_status, read, wait_for, write,
                     write_errno)

ALL = "cpu offcpu syscalls locks jvm"
# Programs whose attachment costs processes beyond the target: every system call of the
# node (sys_enter/sys_exit, the futex tracepoints) or every context switch (sched_switch).
NODE_WIDE = {"sys_enter", "sys_exit", "futex_enter", "futex_exit", "futex_waitv_enter",
             "futex_waitv_exit", "lock_begin", "lock_end", "offcpu_switch"}


def attached_programs(daemon):
    """Names of the BPF programs the daemon has attached now: those its links hold."""
    _, links = bpf_ids(daemon.proc.pid)
    names = set()
    for ident in links:
        link = bpf_object("link", ident)
        prog = link and bpf_object("prog", link["prog_id"])
        if prog:
            names.add(prog["name"])
    return names


def status(daemon, pid):
    return parse_status(read(daemon.target(pid) / "status"))


def set_collectors(daemon, pid, words):
    write(daemon.target(pid) / "collectors", words)


def offcpu_us(daemon, pid):
    text = read(daemon.target(pid) / "offcpu.folded")
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines())


def calls(daemon, pid, name):
    doc = json.loads(read(daemon.target(pid) / "syscalls.json"))
    return sum(c["count"] for c in doc["syscalls"] if c["name"] == name)


def lock_waits(daemon, pid):
    doc = json.loads(read(daemon.target(pid) / "locks.json"))
    return sum(lock["waits"] for lock in doc["locks"])


def test_bare_enable_is_cpu_only_and_attaches_nothing_node_wide(daemon, workloads):
    assert read(daemon.mnt / "config" / "collectors") == "cpu jvm\n"
    w = Gated(workloads, "sys_calls", 1000, 0, 0)
    write(daemon.target(w.pid) / "enable", "1")
    st = status(daemon, w.pid)
    assert (st["collectors"], st["collector_cpu"], st["collector_offcpu"],
            st["collector_syscalls"], st["collector_locks"], st["collector_jvm"]) == \
        ("cpu jvm", "on", "off", "off", "off", "off: not a JVM")
    assert "cpu_sample" in attached_programs(daemon)
    # Another test's targets may have had them a moment ago: their exit is seen each second.
    wait_for(lambda: not attached_programs(daemon) & NODE_WIDE, 5,
             "no program attached node-wide")
    w.round()
    time.sleep(0.5)  # off CPU, waiting on stdin
    w.round()
    time.sleep(1.2)  # a drain
    assert read(daemon.target(w.pid) / "offcpu.folded") == ""
    assert json.loads(read(daemon.target(w.pid) / "syscalls.json"))["syscalls"] == []
    assert json.loads(read(daemon.target(w.pid) / "locks.json"))["locks"] == []
    assert not attached_programs(daemon) & NODE_WIDE


def test_each_collector_collects_only_while_on(daemon, workloads):
    """sys_calls makes 1000 getppid calls a round, and its main thread waits off CPU on
    stdin between rounds for as long as the test waits."""
    w = Gated(workloads, "sys_calls", 1000, 0, 0)
    write(daemon.target(w.pid) / "enable", "1")
    set_collectors(daemon, w.pid, "cpu,offcpu syscalls")
    st = status(daemon, w.pid)
    assert st["collector_offcpu"].startswith("on (costs the whole node: ")
    assert st["collector_syscalls"].startswith("on (costs the whole node: ")
    assert {"offcpu_switch", "sys_enter", "sys_exit"} <= attached_programs(daemon)
    w.round()  # its next wait on stdin begins with the collector on
    time.sleep(0.5)
    w.round()
    wait_for(lambda: calls(daemon, w.pid, "getppid") == 2000, 5, "2000 getppid calls")
    on_us = wait_for(lambda: (lambda us: us >= 0.45e6 and us)(offcpu_us(daemon, w.pid)), 5,
                     "half a second off CPU")
    # Off: what they collected stays, final when the write returns; nothing is added.
    set_collectors(daemon, w.pid, "cpu")
    on_us = offcpu_us(daemon, w.pid)
    time.sleep(0.5)
    w.round()
    time.sleep(1.2)
    assert offcpu_us(daemon, w.pid) == on_us
    assert calls(daemon, w.pid, "getppid") == 2000
    st = status(daemon, w.pid)
    assert (st["collectors"], st["collector_offcpu"], st["collector_syscalls"]) == \
        ("cpu", "off", "off")
    # The node-wide programs go once no target needs them (the next drain detaches them).
    wait_for(lambda: not attached_programs(daemon) & NODE_WIDE, 5, "programs detached")
    # On again: collects again, into the same profile.
    set_collectors(daemon, w.pid, "syscalls cpu")
    w.round()
    wait_for(lambda: calls(daemon, w.pid, "getppid") == 3000, 5, "1000 more calls")


def test_locks_alone_time_futex_waits_without_sys_enter(daemon, workloads):
    rounds, hold_ms = 5, 50
    off = Gated(workloads, "lock_holder", rounds, hold_ms)
    write(daemon.target(off.pid) / "enable", "1")
    off.round()
    on = Gated(workloads, "lock_holder", rounds, hold_ms)
    write(daemon.target(on.pid) / "enable", "1")
    set_collectors(daemon, on.pid, "cpu locks")
    assert {"futex_enter", "futex_exit"} <= attached_programs(daemon)
    # Locks ride on the futex calls' own tracepoints, not on every system call.
    wait_for(lambda: not attached_programs(daemon) & {"sys_enter", "sys_exit", "offcpu_switch"},
             5, "only the futex programs")
    on.round()
    wait_for(lambda: lock_waits(daemon, on.pid) >= rounds, 5, f"{rounds} waits")
    assert json.loads(read(daemon.target(on.pid) / "syscalls.json"))["syscalls"] == []
    assert lock_waits(daemon, off.pid) == 0
    assert read(daemon.target(off.pid) / "locks.folded") == ""


def test_bad_sets_are_refused_and_change_nothing(daemon, workloads):
    pid = workloads.start("cpu_split", 30).pid
    target = daemon.target(pid)
    set_collectors(daemon, pid, "offcpu,cpu\n")
    assert read(target / "collectors") == "cpu offcpu\n"
    for bad in ["\n", "cpu,bogus", "cpu;offcpu", "CPU", "cpu offcpu extra", ","]:
        assert write_errno(target / "collectors", bad) == errno.EINVAL, bad
        assert read(target / "collectors") == "cpu offcpu\n"
        assert "collectors: " in status(daemon, pid)["last_error"]
        assert write_errno(daemon.mnt / "config" / "collectors", bad) == errno.EINVAL, bad
        assert read(daemon.mnt / "config" / "collectors") == "cpu jvm\n"
        assert "config/collectors" in daemon.status()["last_error"]
    set_collectors(daemon, pid, "all")
    assert read(target / "collectors") == ALL + "\n"
    # config/collectors is what a new enable gets; a target's own set wins over it.
    other = workloads.start("cpu_split", 30).pid
    write(daemon.mnt / "config" / "collectors", "cpu syscalls")
    try:
        assert read(daemon.target(other) / "collectors") == "cpu syscalls\n"
        write(daemon.target(other) / "enable", "1")
        write(target / "enable", "1")
        assert status(daemon, other)["collector_syscalls"].startswith("on")
        assert status(daemon, pid)["collector_offcpu"].startswith("on")
        # A change of config/collectors leaves enabled targets as they are.
        write(daemon.mnt / "config" / "collectors", "cpu")
        assert status(daemon, other)["collector_syscalls"].startswith("on")
    finally:
        write(daemon.mnt / "config" / "collectors", "cpu jvm")


def window_since(daemon, pid):
    """The `since` of cpu.top's header and of cpu.json's window."""
    top = read(daemon.target(pid) / "cpu.top").splitlines()[0]
    doc = json.loads(read(daemon.target(pid) / "cpu.json"))
    return re.search(r"since (\S+)", top).group(1), doc["window"]["since"]


def test_a_new_enable_is_a_new_profile(daemon, workloads):
    w = Gated(workloads, "sys_calls", 1000, 0, 0)
    target = daemon.target(w.pid)
    set_collectors(daemon, w.pid, "cpu syscalls")
    write(target / "enable", "1")
    first = status(daemon, w.pid)["since"]
    w.round()
    wait_for(lambda: calls(daemon, w.pid, "getppid") == 1000, 5, "1000 getppid calls")
    write(target / "enable", "0")
    assert calls(daemon, w.pid, "getppid") == 1000  # kept after the disable
    time.sleep(1.1)  # the next enable begins in another second
    write(target / "enable", "1")
    st = status(daemon, w.pid)
    assert st["since"] > first and st["profile_since"] == st["since"]
    assert json.loads(read(target / "syscalls.json"))["syscalls"] == []
    w.round()
    wait_for(lambda: calls(daemon, w.pid, "getppid") == 1000, 5, "1000 calls, not 2000")
    time.sleep(1.2)
    assert calls(daemon, w.pid, "getppid") == 1000
    # Enabled already: the same profile goes on.
    write(target / "enable", "1")
    assert status(daemon, w.pid)["since"] == st["since"]
    assert calls(daemon, w.pid, "getppid") == 1000


def test_new_profile_starts_from_zero_samples_and_since_agrees(daemon, workloads):
    pid = workloads.start("cpu_split", 30).pid
    write(daemon.target(pid) / "enable", "1")
    daemon.wait_samples(pid, 60, timeout=40)  # a second of CPU: slow on a loaded machine
    first_since = status(daemon, pid)["since"]
    write(daemon.target(pid) / "enable", "0")
    first = daemon.final_samples(pid)
    write(daemon.target(pid) / "enable", "1")
    # Before the first drain of the new enable, or right after it: far below the first.
    assert daemon.samples(pid) < first / 2
    daemon.wait_samples(pid, 10, timeout=40)
    st = status(daemon, pid)
    assert st["since"] > first_since
    # status, cpu.top and cpu.json all say the profile began at the second enable.
    assert (st["profile_since"], *window_since(daemon, pid)) == (st["since"],) * 3


def metrics(daemon):
    """The node's metrics file, checked by promtool: {(name, labels): value}."""
    text = read(daemon.mnt / "metrics")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr + text
    rows = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            rows[key] = float(value)
    return rows


def test_metrics_list_every_collector_and_follow_what_is_on(daemon, workloads):
    """Each collector of the daemon's list has its state in the node's metrics, from the
    collector interface; the syscalls collector's count grows by the calls made."""
    w = Gated(workloads, "sys_calls", 1000, 0, 0)
    write(daemon.target(w.pid) / "enable", "1")
    set_collectors(daemon, w.pid, "cpu syscalls")
    m = metrics(daemon)
    for name in ALL.split():
        assert m[f'aperture_collector_up{{collector="{name}"}}'] == 1, name
        assert f'aperture_collector_attach_failures_total{{collector="{name}"}}' in m, name
    assert m['aperture_collector_active{collector="cpu"}'] == 1
    assert m['aperture_collector_active{collector="syscalls"}'] == 1
    # Another test's targets may have had it a moment ago: their exit is seen each second.
    wait_for(lambda: metrics(daemon)['aperture_collector_active{collector="offcpu"}'] == 0, 5,
             "offcpu inactive")
    before = m["aperture_syscalls_timed_total"]
    w.round()
    wait_for(lambda: calls(daemon, w.pid, "getppid") == 1000, 5, "1000 getppid calls")
    assert metrics(daemon)["aperture_syscalls_timed_total"] - before >= 1000
    write(daemon.target(w.pid) / "enable", "0")
    wait_for(lambda: metrics(daemon)['aperture_collector_active{collector="syscalls"}'] == 0,
             5, "syscalls inactive once no target has it")


def test_a_disable_holds_up_no_reader_of_another_target(daemon, workloads):
    """A disable drains the target's last data, which waits for the kernel (an RCU grace
    period per swapped map, tens of ms with every collector), in state "stopping". A reader
    of another target must not wait for it: its read completes between two reads of the
    stopping target that both say "stopping". Held up, a reader would only ever see the
    state the disable ends in."""
    procs = [workloads.start("cpu_split", 30) for _ in range(8)]
    for p in procs:
        set_collectors(daemon, p.pid, "cpu offcpu syscalls locks")
        write(daemon.target(p.pid) / "enable", "1")
    time.sleep(1.2)
    other = workloads.start("cpu_split", 30).pid
    read_during_stop = 0
    for p in procs:
        disable = threading.Thread(target=write, args=(daemon.target(p.pid) / "enable", "0"))
        disable.start()
        while disable.is_alive():
            if status(daemon, p.pid)["state"] != "stopping":
                continue
            assert read(daemon.target(other) / "enable") == "0\n"
            read_during_stop += status(daemon, p.pid)["state"] == "stopping"
        disable.join()
        assert status(daemon, p.pid)["state"] == "disabled"
    assert read_during_stop > 0, "no read of another target completed during a disable"
