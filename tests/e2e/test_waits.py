"""Off-CPU time, blocked workers and threads/: tests/workloads/waits.c waits in ways the test
controls (how long it sleeps, when its reads return, which mutexes its threads take), so
totals, durations, lock addresses and holders are checked against what the test knows."""
import datetime
import errno
import json
import os
import subprocess
import time

import pytest

from helpers import (WORKLOADS, errno_of, parse_folded, parse_status, read, user_frames,
                     wait_for, write, write_errno)

US = 1_000_000
# Off-CPU time, system calls and lock waits are collected only when chosen.
COLLECTORS = "cpu offcpu syscalls locks"


class Waits:
    """One `waits MODE` process with its stdin and stdout piped to the test."""

    def __init__(self, workloads, mode):
        self.proc = subprocess.Popen([str(WORKLOADS / "waits"), mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0)
        workloads.procs.append(self.proc)
        self.pid = self.proc.pid
        self.expect("ready")

    def send(self, data):
        self.proc.stdin.write(data)

    def expect(self, line):
        """Reads a line, checks its first word, returns the rest."""
        got = self.proc.stdout.readline().decode().strip()
        word, _, rest = got.partition(" ")
        assert word == line, f"waits said {got!r}, expected {line!r}"
        return rest

    def tid_named(self, name):
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            if read(f"/proc/{self.pid}/task/{tid}/comm").strip() == name:
                return int(tid)
        raise AssertionError(f"no thread {name} in {self.pid}")


def enable(daemon, pid, value="1"):
    write(daemon.target(pid) / "enable", value)


def offcpu(daemon, pid):
    return parse_folded(read(daemon.target(pid) / "offcpu.folded"))


def us_under(stacks, *frames):
    """Microseconds of the stacks whose user frames include all of frames."""
    return sum(n for f, n in stacks.items() if all(x in user_frames(f) for x in frames))


def config(daemon, name, value):
    write(daemon.mnt / "config" / name, str(value))


@pytest.fixture
def defaults(daemon):
    yield
    config(daemon, "offcpu_min_us", 1)
    config(daemon, "blocking_threshold_ms", 5)
    config(daemon, "workers", "")


def sleep_five_times(daemon, workloads):
    """Runs the sleeper's 5 x 200 ms with its target enabled; returns its final offcpu and
    the wall time of the sleeps as the sleeper measured it (us)."""
    w = Waits(workloads, "sleep")
    enable(daemon, w.pid)
    w.send(b"\n")
    slept_us = int(w.expect("done"))
    enable(daemon, w.pid, "0")  # drains: the profile is final
    return offcpu(daemon, w.pid), slept_us


def test_offcpu_sleeps_total_one_second(daemon, workloads, defaults):
    stacks, wall_us = sleep_five_times(daemon, workloads)
    slept = {f: n for f, n in stacks.items() if "raw_nanosleep" in f}
    assert slept, f"no stack through raw_nanosleep in {stacks}"
    for frames in slept:
        assert frames[0] == "sleeper", f"first frame must be the thread: {frames}"
        assert user_frames(frames)[-3:] == ("sleep_loop", "raw_nanosleep", "raw_syscall3")
        assert "hrtimer_nanosleep_[k]" in frames and frames[-1] == "__schedule_[k]", frames
    total = sum(slept.values())
    # 1 s asked; on a busy machine each wake-up may wait for a CPU, which is off-CPU time too:
    # the sleeper's own clock says how long the five sleeps really took.
    offcpu_status = {k: v for k, v in daemon.status().items() if "offcpu" in k or "lost" in k}
    assert 0.9 * US <= total and abs(total - wall_us) <= 0.1 * wall_us, \
        f"{total} us off CPU in nanosleep; the sleeps took {wall_us} us (1 s asked); " \
        f"{offcpu_status}; {stacks}"
    assert wall_us <= 1.5 * US, f"the machine is too busy to tell: sleeps took {wall_us} us"


def test_offcpu_min_us_drops_shorter_waits_in_the_kernel(daemon, workloads, defaults):
    config(daemon, "offcpu_min_us", 300_000)  # longer than each 200 ms sleep
    stacks, _ = sleep_five_times(daemon, workloads)
    assert us_under(stacks, "raw_nanosleep") == 0, stacks
    assert write_errno(daemon.mnt / "config" / "offcpu_min_us", "1e3") == errno.EINVAL
    assert "offcpu_min_us" in daemon.status()["last_error"]


ROUND_TRIPS = 20000  # waits.c's pingpong


def test_short_waits_walk_no_stacks(daemon, workloads, defaults):
    """Stacks are walked only for waits that are kept: 40,000 waits of microseconds under a
    1 ms minimum walk next to none where the kernel has sched_exit_tp, where without it (the
    stacks taken at switch-out, test_waits_at_switch_out.py) every one is walked."""
    config(daemon, "offcpu_min_us", 1000)
    w = Waits(workloads, "pingpong")
    enable(daemon, w.pid)
    before = daemon.status()
    w.send(b"\n")
    w.expect("done")
    after = daemon.status()
    walks, kept = (int(after[k]) - int(before[k]) for k in ("offcpu_stack_walks",
                                                            "offcpu_waits"))
    # The pinger's wait for the line is kept, and a wake-up may wait over 1 ms for a CPU.
    assert kept < 200, f"{kept} of the ping-pong's waits were 1 ms or longer: too busy to tell"
    if after["offcpu_stacks_at"] == "switch-in":
        assert walks <= kept, f"{walks} stack walks for {kept} kept waits"
    else:
        assert walks >= ROUND_TRIPS, f"{walks} stack walks at switch-out for 40,000 waits"
    # Those kept are the two threads' (a preempted one may be anywhere in its loop; the
    # sleep tests check stacks to the microsecond).
    time.sleep(1.5)  # a drain or more
    stacks = offcpu(daemon, w.pid)
    assert {f[0] for f in stacks} <= {"pinger", "ponger"}, stacks


def blocking(daemon, pid):
    return json.loads(read(daemon.target(pid) / "blocking.json"))


def block_for(w, seconds):
    """The worker's read returns now, then blocks for seconds until the next byte."""
    w.send(b"a")
    w.expect("got")
    time.sleep(seconds)
    w.send(b"b")
    w.expect("got")


def test_blocking_worker_event(daemon, workloads, defaults):
    w = Waits(workloads, "block")
    worker = w.tid_named("tokio-runtime-w")
    enable(daemon, w.pid)
    # The daemon finds workers once a second: wait until it watches this one.
    found = blocking(daemon, w.pid)
    assert found["workers"]["tids"] == [worker] and found["workers"]["watching"], found
    assert found["workers"]["found_by"] == "tokio thread name"
    assert found["units"]["duration_us"] == "microseconds" and found["threshold_ms"] == 5
    blocked_at = time.time()
    block_for(w, 0.05)
    doc = wait_for(lambda: blocking(daemon, w.pid)["events_total"] >= 1 and
                   blocking(daemon, w.pid), 5, "a blocking event")
    assert doc["events_total"] == len(doc["events"]) == 1, doc
    ev = doc["events"][0]
    # When the worker went off CPU, in UTC: between the test's asking it to block and now.
    when = datetime.datetime.strptime(ev["time"].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
    when = when.replace(tzinfo=datetime.timezone.utc).timestamp()
    assert blocked_at - 1 <= when <= time.time(), f"off CPU at {ev['time']}, asked at {blocked_at}"
    assert ev["tid"] == worker and ev["thread"] == "tokio-runtime-w", ev
    assert 45_000 <= ev["duration_us"] <= 150_000, f"blocked ~50 ms, event says {ev}"
    assert ev["reason"] == "slept", ev
    user = [f for f in ev["stack"] if not f.endswith("_[k]")]
    assert user[-3:] == ["worker_main", "raw_read", "raw_syscall3"], ev["stack"]
    assert "vfs_read_[k]" in ev["stack"], ev["stack"]

    # Above the threshold only: a 50 ms block is no event at 200 ms (the wait for the next
    # "a", as long as the test takes, may be one).
    config(daemon, "blocking_threshold_ms", 200)
    block_for(w, 0.05)
    time.sleep(1.5)
    later = blocking(daemon, w.pid)["events"][1:]
    assert all(e["duration_us"] >= 200_000 for e in later), later


def test_workers_by_config_prefix_and_validation(daemon, workloads, defaults):
    w = Waits(workloads, "busy")
    config(daemon, "workers", "spin")
    doc = blocking(daemon, w.pid)
    assert doc["workers"] == {"tids": [w.tid_named("spinner")], "watching": False,
                              "found_by": "config/workers prefix", "name_prefix": "spin"}
    assert write_errno(daemon.mnt / "config" / "workers", "a" * 16) == errno.EINVAL
    assert read(daemon.mnt / "config" / "workers") == "spin\n"


def test_disabled_target_collects_nothing(daemon, workloads, defaults):
    s = Waits(workloads, "sleep")
    b = Waits(workloads, "block")
    s.send(b"\n")
    s.expect("done")
    block_for(b, 0.05)
    time.sleep(1.5)  # a drain or more
    assert read(daemon.target(s.pid) / "offcpu.folded") == ""
    assert blocking(daemon, b.pid)["events_total"] == 0
    assert parse_status(read(daemon.target(s.pid) / "status"))["collector_offcpu"] == "off"


def symbol_address(pid, binary, symbol):
    """Where symbol of the PIE binary is in process pid: nm's offset plus the load base."""
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    offset = next(int(line.split()[0], 16) for line in out.splitlines()
                  if line.split()[-1] == symbol)
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if fields[-1] == str(binary) and int(fields[2], 16) == 0:
                return int(fields[0].split("-")[0], 16) + offset
    raise AssertionError(f"{binary} not mapped in {pid}")


def test_deadlock_found_with_threads_locks_and_stacks(daemon, workloads):
    w = Waits(workloads, "deadlock")
    enable(daemon, w.pid)  # so the user stacks are recorded as the threads block
    w.send(b"\n")
    w.expect("locked")
    threads = daemon.target(w.pid) / "threads"
    text = wait_for(lambda: read(threads / "deadlocks"), 5, "the deadlock to show")
    a, b = w.tid_named("locker-a"), w.tid_named("locker-b")
    m1, m2 = (symbol_address(w.pid, WORKLOADS / "waits", m) for m in ("m1", "m2"))
    assert text.startswith("Found one native deadlock:"), text
    assert (f'"locker-a" tid={a}:\n  waiting to lock mutex {m2:#x}, which is held by '
            f'"locker-b" tid={b}\n') in text, text
    assert (f'"locker-b" tid={b}:\n  waiting to lock mutex {m1:#x}, which is held by '
            f'"locker-a" tid={a}\n') in text, text

    doc = json.loads(read(threads / "deadlocks.json"))
    (cycle,) = doc["deadlocks"]
    by_name = {t["name"]: t for t in cycle}
    assert set(by_name) == {"locker-a", "locker-b"}
    for name, own, other, lock in (("locker-a", "a_main", "b_main", m2),
                                   ("locker-b", "b_main", "a_main", m1)):
        t = by_name[name]
        assert t["waiting_for"]["mutex"] == f"{lock:#x}"
        assert t["waiting_for"]["held_by_name"] == ({"locker-a", "locker-b"} - {name}).pop()
        assert own in t["user_stack"] and other not in t["user_stack"], t["user_stack"]
        # glibc's lock wait is the leaf (with what was inlined into it, if debug info says)
        assert "__lll_lock_wait" in t["user_stack"][-2:], t["user_stack"]
        assert "futex_wait_[k]" in t["kernel_stack"], t["kernel_stack"]
        assert f"\tat {own}\n" in text


def test_no_deadlock_is_an_empty_file(daemon, workloads):
    w = Waits(workloads, "contended")
    threads = daemon.target(w.pid) / "threads"
    holder, waiter = w.tid_named("holder"), w.tid_named("waiter")
    # Proves the wait-for analysis ran: the waiter's mutex and its holder are seen ...
    wait_for(lambda: f'which is held by "holder" tid={holder}' in read(threads / "dump"), 5,
             "the waiter to block on the holder's mutex")
    assert f'"waiter" tid={waiter}' in read(threads / "dump")
    # ... and a wait without a cycle is no deadlock.
    assert read(threads / "deadlocks") == ""
    assert read(threads / "deadlocks.json") == ""
    assert os.stat(threads / "deadlocks").st_size == 0


def test_thread_directories_and_busy(daemon, workloads):
    w = Waits(workloads, "busy")
    threads = daemon.target(w.pid) / "threads"
    tids = sorted(int(t) for t in os.listdir(f"/proc/{w.pid}/task"))
    listed = sorted(int(n) for n in os.listdir(threads) if n.isdigit())
    assert listed == tids
    names = {read(threads / str(t) / "name").strip() for t in tids}
    assert names == {"waits", "spinner", "idler"}
    idler = w.tid_named("idler")
    # Just started, the idler may still be on its way to its sleep.
    wait_for(lambda: read(threads / str(idler) / "state") == "S (sleeping)\n", 5,
             "the idler to sleep")
    assert sorted(os.listdir(threads / str(idler))) == ["cpu_us", "name", "state"]
    # Inode numbers are distinct and stable per (pid, tid, file).
    inos = {os.stat(threads / str(t) / "name").st_ino for t in tids}
    assert len(inos) == len(tids)
    assert os.stat(threads / str(idler) / "..").st_ino == os.stat(threads).st_ino
    # A thread of another process is not a thread of this one.
    assert errno_of(os.stat, threads / str(os.getpid())) == errno.ENOENT

    # Never enabled, busy counts each thread's CPU since it started: let the spinner spin.
    spinner = threads / str(w.tid_named("spinner")) / "cpu_us"
    wait_for(lambda: int(read(spinner)) >= 50000, 5, "the spinner to spin 50 ms")
    rows = [line.split() for line in read(threads / "busy").splitlines()
            if not line.startswith("#")]
    assert rows[0][4] == "spinner", rows
    assert "since each thread started" in read(threads / "busy")  # never enabled
    assert int(read(threads / str(w.tid_named("spinner")) / "cpu_us")) > 0


def busy(daemon, pid):
    """threads/busy's header lines and {thread name: recent_us}, busiest first."""
    lines = read(daemon.target(pid) / "threads" / "busy").splitlines()
    rows = [line.split() for line in lines if not line.startswith("#")]
    return [line for line in lines if line.startswith("#")], {r[4]: int(r[1]) for r in rows}


def test_busy_ranks_by_cpu_over_the_targets_window(daemon, workloads):
    """spin-a spins ~5 s, then spin-b spins ~2.5 s: over the last 2 s spin-b was the busy
    one, since enable spin-a was."""
    w = Waits(workloads, "switch")
    enable(daemon, w.pid)
    time.sleep(5)
    w.send(b"\n")
    w.expect("switched")
    time.sleep(2.5)
    write(daemon.target(w.pid) / "window", "2")
    header, rows = busy(daemon, w.pid)
    assert "window_s 2" in header[0] and "of history" in header[0], header
    span = float(header[0].split("over the last ")[1].split()[0])
    assert 1.4 <= span <= 2.6, header  # the per-second sample nearest 2 s ago
    assert list(rows)[0] == "spin-b", (header, rows)
    # spin-a stopped before the window began; spin-b spun through it (on a loaded 2-core
    # machine, for at least a quarter of it).
    assert rows["spin-b"] >= 0.25 * span * US and rows["spin-a"] <= rows["spin-b"] / 4, rows

    write(daemon.target(w.pid) / "window", "0")
    header, rows = busy(daemon, w.pid)
    assert "window_s 0, since enable or reset" in header[0], header
    assert list(rows)[0] == "spin-a", (header, rows)
    assert rows["spin-a"] >= 1.3 * rows["spin-b"] > 0, rows
