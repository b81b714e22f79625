"""An exited process keeps a readable, symbolized profile for retain_exited_s, and every
ordinary reader (cat, cp, tar, rsync, Python, shutil's sendfile) gets the same bytes."""
import errno
import os
import shutil
import subprocess
import tarfile
import threading
import time

import pytest

from helpers import (Workloads, errno_of, parse_folded, read, user_frames, wait_for, write,
                     write_errno)

FILES = ["enable", "status", "cpu.folded", "cpu.top", "cpu.json", "cpu.pprof", "cpu.svg",
         "flame.svg", "offcpu.folded", "offcpu.top", "blocking.json", "locks.json",
         "syscalls.json"]
# An exited process has no threads left: threads/ holds its (empty) views only.
# offcpu.* must have something to show.
COLLECTORS = "cpu offcpu"
THREAD_FILES = ["threads", "threads/busy", "threads/dump", "threads/deadlocks",
                "threads/deadlocks.json"]


@pytest.fixture(scope="module")
def exited(daemon):
    """The pid of a cpu_split that ran 2 s profiled and exited: its files no longer change."""
    write(daemon.mnt / "config" / "retain_exited_s", "300")
    # 499 Hz: enough samples even when other work on the machine leaves it little CPU.
    daemon.set_frequency(499)
    w = Workloads()
    try:
        proc = w.start("cpu_split", 2)
        write(daemon.target(proc.pid) / "enable", "1")
        assert proc.wait(timeout=10) == 0
    finally:
        w.stop_all()
    wait_for(lambda: daemon.status(proc.pid)["state"] == "exited", 5, "state: exited")
    daemon.final_samples(proc.pid)
    return proc.pid


def cat(path):
    return subprocess.run(["cat", str(path)], check=True, capture_output=True).stdout


def test_exited_profile_stays_readable_and_symbolized(daemon, exited):
    status = daemon.status(exited)
    assert status["state"] == "exited" and "retained_until" in status
    assert str(exited) in os.listdir(daemon.mnt / "targets")
    stacks = daemon.folded(exited)
    total = sum(stacks.values())
    assert total > 50 and int(status["samples"]) == total
    b_via_a = sum(n for f, n in stacks.items() if user_frames(f)[-3:] == ("main", "a", "b"))
    assert b_via_a >= 0.5 * total, "names must survive the exit"
    assert not any("cpu_split+" in fr for f in stacks for fr in f)
    assert write_errno(daemon.target(exited) / "enable", "1") == errno.ESRCH


@pytest.mark.parametrize("name", FILES)
def test_stat_size_is_what_a_read_gets(daemon, exited, name):
    path = daemon.target(exited) / name
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        data = f.read()
    assert size == len(data) > 0


@pytest.mark.parametrize("name", FILES)
def test_cp_and_shutil_copy_what_cat_reads(daemon, exited, name, tmp_path):
    path = daemon.target(exited) / name
    expected = cat(path)
    subprocess.run(["cp", str(path), str(tmp_path / "cp")], check=True)
    shutil.copyfile(path, tmp_path / "shutil")  # sendfile: stops at stat's size
    with open(path, "rb") as f:
        python = f.read()
    assert (tmp_path / "cp").read_bytes() == expected
    assert (tmp_path / "shutil").read_bytes() == expected
    assert python == expected


def test_tar_round_trip(daemon, exited, tmp_path):
    target = daemon.target(exited)
    archive = tmp_path / "profile.tar"
    # The whole directory: every file, reset included, must be readable and complete.
    subprocess.run(["tar", "-C", str(target), "-cf", str(archive), "."], check=True)
    subprocess.run(["tar", "-C", str(tmp_path), "-xf", str(archive)], check=True)
    assert (tmp_path / "reset").read_bytes() == b""
    for name in FILES:
        assert (tmp_path / name).read_bytes() == cat(target / name), name
    with tarfile.open(archive) as tar:
        assert sorted(n[2:] for n in tar.getnames() if n != ".") == \
            sorted(os.listdir(target) + THREAD_FILES[1:])


@pytest.mark.skipif(not shutil.which("rsync"), reason="rsync is not installed")
def test_rsync_copies_what_cat_reads(daemon, exited, tmp_path):
    target = daemon.target(exited)
    subprocess.run(["rsync", "-a", f"{target}/", f"{tmp_path}/"], check=True)
    subprocess.run(["cp", "-r", str(target), str(tmp_path / "cp_r")], check=True)
    for name in FILES:
        assert (tmp_path / "cp_r" / name).read_bytes() == cat(target / name), name
        assert (tmp_path / name).read_bytes() == cat(target / name), name


def test_shutil_copies_a_live_view_whole(daemon, workloads, tmp_path):
    """A live profile changes between renders: the stat size and the bytes read must still
    belong to one snapshot, or sendfile cuts the copy short (or copies nothing at size 0)."""
    pid = workloads.start("cpu_split").pid
    write(daemon.target(pid) / "enable", "1")
    daemon.wait_samples(pid, 100)
    path = daemon.target(pid) / "cpu.folded"
    for i in range(5):
        copy = tmp_path / f"copy{i}"
        shutil.copyfile(path, copy)
        assert parse_folded(copy.read_text()), "shutil copied an empty file"
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            assert len(f.read()) == size
        time.sleep(0.3)


def test_exited_target_goes_after_retention(daemon, workloads, exited):
    """Last in this module: it shortens the retention that `exited` relies on."""
    write(daemon.mnt / "config" / "retain_exited_s", "2")
    proc = workloads.start("cpu_split", 0.5)
    write(daemon.target(proc.pid) / "enable", "1")
    proc.wait(timeout=5)
    wait_for(lambda: daemon.status(proc.pid)["state"] == "exited", 5, "state: exited")
    gone_from = time.monotonic()
    wait_for(lambda: errno_of(read, daemon.target(proc.pid) / "status") == errno.ENOENT,
             6, "the exited target to go")
    assert time.monotonic() - gone_from >= 0.5, "dropped before retain_exited_s"
    assert str(proc.pid) not in os.listdir(daemon.mnt / "targets")
    assert errno_of(read, daemon.target(exited) / "cpu.folded") == errno.ENOENT


def test_stat_and_read_in_different_threads_share_a_snapshot(daemon, workloads):
    """FUSE names the calling thread, not the process: a stat in one thread and the open in
    another must still hand over one snapshot, or a threaded copier gets a size that does
    not match its bytes. A snapshot's render time is its mtime."""
    pid = workloads.start("cpu_split").pid
    write(daemon.target(pid) / "enable", "1")
    daemon.wait_samples(pid, 50)
    path = daemon.target(pid) / "cpu.folded"
    seen = {}
    t = threading.Thread(target=lambda: seen.update(st=os.stat(path)))
    t.start()
    t.join()
    time.sleep(0.1)  # a fresh render now would carry a later mtime
    with open(path, "rb") as f:
        opened = os.fstat(f.fileno())
        data = f.read()
    assert opened.st_mtime_ns == seen["st"].st_mtime_ns, "the open rendered afresh"
    assert len(data) == seen["st"].st_size
