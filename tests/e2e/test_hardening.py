"""Hardening (issue 15): one write() is one value or nothing, every live process can be
profiled (one whose leader exited, one whose maps we may not read), the tree's names are not
made or removed from outside, and values follow one rule everywhere."""
import concurrent.futures
import errno
import os
import subprocess
import time

import pytest

from helpers import Daemon, errno_of, parse_folded, read, user_frames, wait_for, write, write_errno

MIB = 2 ** 20


def write_bytes(path, data):
    """One write() of data; returns the count it answered (raises OSError on failure)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture
def config(daemon):
    """config/, with every setting a test changes put back afterwards."""
    c = daemon.mnt / "config"
    before = {name: read(c / name) for name in ("demangle", "lock_stacks", "frequency_hz",
                                                "debug_dirs", "workers", "unwind")}
    yield c
    for name, value in before.items():
        write(c / name, value)


# The three reproductions: each wrote a value through a later piece of one write().
def test_a_write_longer_than_max_write_fails_whole_and_changes_nothing(daemon, config):
    assert read(config / "demangle") == "1\n"
    e = errno_of(write_bytes, config / "demangle", b"0" * (MIB - 1) + b"5")
    assert e == errno.EFBIG, "a short count or success would mean a piece was applied"
    assert read(config / "demangle") == "1\n"
    assert "at most 4096 bytes" in daemon.status()["last_error"]

    dd = subprocess.run(f"printf '%01048577d' 5 | dd of={config / 'demangle'} bs=1048577",
                        shell=True, capture_output=True, text=True)
    assert dd.returncode != 0 and "File too large" in dd.stderr, dd.stderr
    assert read(config / "demangle") == "1\n"

    write(config / "lock_stacks", "5")
    e = errno_of(write_bytes, config / "lock_stacks",
                 b"0" * (MIB - 1) + b"3" + b"0" * 99 + b"4")
    assert e == errno.EFBIG
    assert read(config / "lock_stacks") == "5\n"


def test_values_at_the_bound_and_repeated_writes_on_one_open(daemon, config):
    # A value of 4096 bytes is read as a value (here: too long a number), 4097 is not one.
    assert write_errno(config / "frequency_hz", "9" * 4096) == errno.ERANGE
    assert errno_of(write_bytes, config / "frequency_hz", b"9" * 4097) == errno.EFBIG
    # `exec 3>file; echo 7 >&3; echo 8 >&3`: each write() is a value, at the offset where the
    # last one ended; a write anywhere else is no value.
    fd = os.open(config / "lock_stacks", os.O_WRONLY)
    try:
        assert os.write(fd, b"7\n") == 2
        assert os.write(fd, b"8\n") == 2
        assert read(config / "lock_stacks") == "8\n"
        assert errno_of(os.pwrite, fd, b"9", 100) == errno.EINVAL
        assert read(config / "lock_stacks") == "8\n"
        assert "offset 100" in daemon.status()["last_error"]
    finally:
        os.close(fd)
    # A write of nothing is nothing: the kernel answers it without asking the daemon.
    assert write_bytes(config / "lock_stacks", b"") == 0
    assert read(config / "lock_stacks") == "8\n"


def test_one_rule_for_numbers_everywhere(daemon, config, workloads):
    sleeper = workloads.start("/bin/sleep", 60).pid
    zeros = "0" * 5000 + "5"
    assert write_errno(config / "lock_stacks", zeros[-4000:]) == errno.EINVAL
    assert write_errno(config / "lock_stacks", "05") == errno.EINVAL
    assert write_errno(config / "frequency_hz", "099") == errno.EINVAL
    assert write_errno(daemon.target(sleeper) / "enable", "01") == errno.EINVAL
    assert write_errno(daemon.target(sleeper) / "enable", "030s") == errno.EINVAL
    assert write_errno(daemon.target(sleeper) / "window", "010") == errno.EINVAL
    write(config / "demangle", "0")
    assert read(config / "demangle") == "0\n"


def test_debug_dirs_refuse_an_empty_entry_wherever_it_is(daemon, config):
    for value in ("/tmp:", "/tmp::/usr", ":/tmp"):
        assert write_errno(config / "debug_dirs", value) == errno.EINVAL, value
        assert read(config / "debug_dirs") == "\n"
    write(config / "debug_dirs", "/tmp:/usr")
    assert read(config / "debug_dirs") == "/tmp:/usr\n"
    write(config / "debug_dirs", "\n")


def test_workers_refuses_invalid_utf8(daemon, config):
    for value in (b"\xff\xfeworker", b"w\xc3", b"\xed\xa0\x80"):
        assert errno_of(write_bytes, config / "workers", value) == errno.EINVAL, value
        assert read(config / "workers") == "\n"
    assert "UTF-8" in daemon.status()["last_error"]
    write_bytes(config / "workers", "wörker".encode())
    assert read(config / "workers") == "wörker\n"
    write(config / "workers", "\n")


def test_names_are_not_made_or_removed_from_outside(daemon, workloads):
    mnt = daemon.mnt
    sleeper = workloads.start("/bin/sleep", 60).pid
    target = daemon.target(sleeper)
    attempts = {
        "mkdir": lambda: os.mkdir(mnt / "x"),
        "mkdir in a target": lambda: os.mkdir(target / "x"),
        "rm": lambda: os.unlink(mnt / "status"),
        "rm in a target": lambda: os.unlink(target / "cpu.folded"),
        "rmdir": lambda: os.rmdir(mnt / "config"),
        "mv": lambda: os.rename(mnt / "status", mnt / "status2"),
        "ln": lambda: os.link(mnt / "status", mnt / "status2"),
        "ln -s": lambda: os.symlink("/tmp", mnt / "link"),
        "mknod": lambda: os.mkfifo(mnt / "fifo"),
        "create": lambda: os.close(os.open(mnt / "new", os.O_WRONLY | os.O_CREAT, 0o644)),
        "create in a target": lambda: os.close(os.open(target / "new",
                                                       os.O_WRONLY | os.O_CREAT, 0o644)),
    }
    for what, attempt in attempts.items():
        assert errno_of(attempt) == errno.EPERM, what
    assert sorted(os.listdir(mnt)) == ["README", "config", "metrics", "status", "targets", "version"]


def test_a_zombie_is_refused_like_an_exited_process(daemon):
    proc = subprocess.Popen(["true"])
    try:
        wait_for(lambda: read(f"/proc/{proc.pid}/stat").rsplit(")", 1)[1].split()[0] == "Z",
                 5, "the child to be a zombie")
        assert write_errno(daemon.target(proc.pid) / "enable", "1") == errno.ESRCH
        status = daemon.status(proc.pid)
        assert status["cpu"] == "off" and status["state"] != "enabled", status
        assert "is gone" in status["last_error"]
    finally:
        proc.wait()


@pytest.mark.parametrize("unwind", ["fp", "dwarf"])
def test_a_process_whose_leader_exited_is_profiled(daemon, config, workloads, unwind):
    """main calls pthread_exit and a worker burns on: /proc/PID/maps is empty, the worker's
    own directory shows the address space."""
    write(config / "unwind", unwind)
    pid = workloads.start("leader_exits", 30).pid
    wait_for(lambda: len(os.listdir(f"/proc/{pid}/task")) == 2
             and read(f"/proc/{pid}/maps") == "", 5, "the leader to exit")
    write(daemon.target(pid) / "enable", "1")
    daemon.wait_samples(pid, 60, timeout=40)
    stacks = daemon.folded(pid)
    status = daemon.status(pid)
    write(daemon.target(pid) / "enable", "0")
    total = sum(stacks.values())
    named = sum(n for f, n in stacks.items()
                if user_frames(f)[-3:] == ("start_thread", "worker", "spin_in_worker")
                or user_frames(f)[-2:] == ("start_thread", "worker"))
    assert status["last_error"] == "none", status
    assert named > 0.9 * total, stacks
    assert not any("[unknown]" in f for f in stacks), stacks


def test_a_process_whose_maps_are_unreadable_is_profiled_unnamed(daemon):
    """pid 1 here answers EACCES to /proc/1/maps, even to root: it is alive, so it is
    enabled, and status says why its frames have no names."""
    if errno_of(read, "/proc/1/maps") not in (errno.EACCES, errno.EPERM):
        pytest.skip("/proc/1/maps is readable here")
    enable = daemon.target(1) / "enable"
    write(enable, "1")
    try:
        status = daemon.status(1)
        assert status["state"] == "enabled"
        assert status["cpu"].startswith("running"), status
        assert "/proc/1/maps: Permission denied" in status["last_error"], status
        assert "[unknown]" in status["last_error"]
    finally:
        write(enable, "0")


def test_busy_of_never_enabled_processes_never_waits(daemon, workloads):
    """threads/busy of a process that was never enabled reads each thread's CPU time since
    it started, once: stat and open (what grep -r, du and ls -lR do to every file) answer at
    once. It sampled for 250 ms at each, 28 s for 111 processes."""
    sleepers = [workloads.start("/bin/sleep", 60).pid for _ in range(20)]
    spinner = workloads.start("cpu_other", 60).pid
    time.sleep(1.5)
    t0 = time.monotonic()
    grep = subprocess.run(["grep", "-r", "-c", "threads of",
                           *(str(daemon.target(p) / "threads") for p in sleepers)],
                          capture_output=True, text=True)
    took = time.monotonic() - t0
    assert grep.returncode == 0, grep.stderr
    assert grep.stdout.count("/busy:1") == len(sleepers), grep.stdout
    assert took < 3, f"grep -r over {len(sleepers)} processes took {took:.1f} s"

    text = read(daemon.target(spinner) / "threads" / "busy")
    assert "since each thread started" in text and "thread's age" in text, text
    rows = [line.split() for line in text.splitlines() if not line.startswith("#")]
    # The truth from /proc: CPU time over age, as the spinner was at the read.
    tick = os.sysconf("SC_CLK_TCK")
    fields = read(f"/proc/{spinner}/stat").rsplit(")", 1)[1].split()
    age = float(read("/proc/uptime").split()[0]) - int(fields[19]) / tick
    truth = 100 * (int(fields[11]) + int(fields[12])) / tick / age
    assert rows[0][3] == str(spinner) and truth > 5, text
    assert float(rows[0][0]) == pytest.approx(truth, abs=max(5, truth / 5)), (truth, text)
    assert int(rows[0][1]) == int(rows[0][2]) > 0, "since start, recent is the total"
    idle = read(daemon.target(sleepers[0]) / "threads" / "busy")
    assert float(idle.splitlines()[-1].split()[0]) < 5, idle


def rss_kib(pid):
    for line in read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_memory_budget_holds_totals_stay_exact_and_memory_goes_back(scratch, workloads):
    """Targets with ever-new stacks under a 1 MiB budget: the store stops telling new stacks
    apart at the budget and counts them in THREAD;[other stacks], every sample still
    counted; when the targets are gone, the daemon is back near a fresh one's RSS. The
    new stacks are off-CPU ones (many_stacks sleeping at every path): thousands a second
    whatever CPU a loaded machine spares, where CPU samples would take minutes."""
    d = Daemon(scratch / "mem", scratch / "mem.log").start()
    try:
        # Fresh, but having served reads, a few at once: FUSE's worker threads, the render
        # threads and the code of every view paged in, as in any daemon readers have used;
        # and having profiled one process once, so that what any first enable pages in (the
        # collectors' code, libdw's, kallsyms read at the first kernel name and dropped with
        # the last target) is in both figures.
        paths = ["status", "metrics", "targets/1/status", "targets/1/threads/busy"] * 8
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: read(d.mnt / p), paths))
        write(d.mnt / "config" / "retain_exited_s", "0")
        write(d.mnt / "config" / "collectors", "cpu offcpu")
        first = workloads.start("many_stacks", 80, 2, "sleep").pid
        write(d.target(first) / "enable", "1")
        wait_for(lambda: "_[k]" in read(d.target(first) / "offcpu.folded"), 10,
                 "kernel frames named")
        write(d.target(first) / "enable", "0")
        workloads.stop_all()
        wait_for(lambda: d.status()["store_bytes"] == "0", 10, "the first target to go")
        fresh = rss_kib(d.proc.pid)
        write(d.mnt / "config" / "memory_mb", "1")
        write(d.mnt / "config" / "frequency_hz", "999")
        pids = [workloads.start("many_stacks", 80, 2, "sleep").pid,
                workloads.start("many_stacks", 80).pid]
        for pid in pids:
            write(d.target(pid) / "enable", "1")
        wait_for(lambda: int(d.status()["store_bytes"]) >= 2 ** 20, 40,
                 "the budget to be reached", interval=0.5)
        wait_for(lambda: "[other stacks]" in read(d.target(pids[0]) / "offcpu.folded"), 10,
                 "new stacks past the budget")
        time.sleep(1)
        store = int(d.status()["store_bytes"])
        # New stacks stopped at the budget; the seconds of known ones go on a little.
        assert store < 1.25 * 2 ** 20, store
        for pid in pids:
            write(d.target(pid) / "enable", "0")
        time.sleep(1.3)  # a stopped profile is final once the drain after the stop ran
        for pid in pids:
            stacks = d.folded(pid)
            assert sum(stacks.values()) == d.samples(pid), "totals stay exact"
            assert all(len(f) == 2 for f in stacks if f[-1] == "[other stacks]")
        off = parse_folded(read(d.target(pids[0]) / "offcpu.folded"))
        other = [f for f in off if f[-1] == "[other stacks]"]
        assert other and all(len(f) == 2 for f in other), other
        assert len(off) < 16384, "the budget stopped new stacks"

        workloads.stop_all()
        wait_for(lambda: d.status()["store_bytes"] == "0", 10, "the targets to be dropped")
        # ASan's allocator keeps freed memory in quarantine on purpose: no RSS to compare.
        # Measured 12-18 % above fresh here: code of our libraries paged in, threads FUSE
        # started for the reads. Without dropping the idle symbol files, fixed malloc
        # thresholds and the drains' buffers going with the last target: 2.4x fresh.
        if "ASAN_OPTIONS" not in os.environ:
            try:
                wait_for(lambda: rss_kib(d.proc.pid) < 1.20 * fresh, 20, "RSS to come back")
            except AssertionError:
                raise AssertionError(f"RSS {rss_kib(d.proc.pid)} KiB after the targets, "
                                     f"{fresh} KiB fresh")
        d.stop()
    finally:
        d.kill()
