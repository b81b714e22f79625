"""Control files: bad values fail the write() itself and change nothing, missing pids are
ENOENT, and targets/ lists processes the way /proc does."""
import errno
import os
import subprocess

import pytest

from helpers import errno_of, read, wait_for, write, write_errno

# Each bad value with the errno the tree documents. "\n" is what `echo "" > enable` writes;
# a write of zero bytes never reaches a FUSE daemon (the kernel answers it with 0).
BAD_ENABLE = [("2", errno.EINVAL), ("yes", errno.EINVAL), ("1 1", errno.EINVAL),
              ("\n", errno.EINVAL), ("-1s", errno.EINVAL), ("0s", errno.ERANGE),
              ("8d", errno.ERANGE)]
BAD_FREQUENCY = [("abc", errno.EINVAL), ("0", errno.ERANGE), ("-5", errno.EINVAL),
                 ("1000000", errno.ERANGE)]


@pytest.fixture
def sleeper(workloads):
    """A live process that costs no CPU."""
    return workloads.start("/bin/sleep", 60).pid


@pytest.mark.parametrize("initial", ["0", "1"])
def test_bad_enable_values(daemon, sleeper, initial):
    enable = daemon.target(sleeper) / "enable"
    write(enable, initial)
    before = daemon.status(sleeper)
    for value, expected in BAD_ENABLE:
        assert write_errno(enable, value) == expected, f"enable {value!r}"
        status = daemon.status(sleeper)
        assert read(enable) == f"{initial}\n", f"enable {value!r} changed the state"
        for key in ("state", "since", "expires", "samples"):
            assert status[key] == before[key], f"enable {value!r} changed {key}"
        assert f'"{value.strip()}"' in status["last_error"], status["last_error"]
    assert write_errno(enable, "1\n") == 0, "a trailing newline is fine"


def test_bad_frequency_values(daemon):
    freq = daemon.mnt / "config" / "frequency_hz"
    write(freq, "123")
    for value, expected in BAD_FREQUENCY:
        assert write_errno(freq, value) == expected, f"frequency_hz {value!r}"
        assert read(freq) == "123\n", f"frequency_hz {value!r} changed the setting"
        status = daemon.status()
        assert status["frequency_hz"] == "123"
        assert f'"{value}"' in status["last_error"], status["last_error"]
    write(freq, "99")


def dead_pid():
    """A pid that was just used and is now free."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_missing_pid_is_enoent(daemon):
    target = daemon.target(dead_pid())
    assert write_errno(target / "enable", "1") == errno.ENOENT
    for name in ("enable", "status", "cpu.folded", "cpu.top"):
        assert errno_of(read, target / name) == errno.ENOENT, name
    assert errno_of(os.listdir, target) == errno.ENOENT
    assert target.name not in os.listdir(daemon.mnt / "targets")


def test_targets_lists_processes_not_threads(daemon, workloads):
    pid = workloads.start("cpu_split", 0, 2, 0).pid
    wait_for(lambda: len(os.listdir(f"/proc/{pid}/task")) == 3, 5, "cpu_split's threads")
    tasks = {t for t in os.listdir(f"/proc/{pid}/task") if t != str(pid)}
    listed = set(os.listdir(daemon.mnt / "targets"))
    procs = {e for e in os.listdir("/proc") if e.isdigit()}
    assert str(pid) in listed and str(os.getpid()) in listed
    assert not tasks & listed, "threads are not listed"
    # Processes come and go between the two listings; the rest must agree.
    assert len(listed ^ procs) <= 5, f"differences from /proc: {listed ^ procs}"
    assert sorted(os.listdir(daemon.target(pid))) == \
        ["baseline", "blocking.json", "collectors", "cpu.folded", "cpu.json", "cpu.pprof", "cpu.svg",
         "cpu.top", "diff.folded", "diff.svg", "enable", "flame.svg", "locks.folded",
         "locks.json", "locks.pprof", "locks.svg", "locks.top", "offcpu.folded",
         "offcpu.json", "offcpu.pprof", "offcpu.svg", "offcpu.top", "reset", "status",
         "syscalls.json", "threads", "window"]
