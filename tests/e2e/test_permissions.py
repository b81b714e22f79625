"""--allow-other: a user reaches its own processes' targets and nobody else's, and the modes
and owners `ls -l` shows say so."""
import errno
import json
import os
import stat
import subprocess
import sys

import pytest

from helpers import OTHER_UID, read

DENIED = (errno.EACCES, errno.EPERM)

# Runs as the other user: each (op, path[, value]) becomes the errno it ended with (0: ok).
PROBE = r"""
import json, os, sys
def attempt(op, path, value=None):
    try:
        if op == "read":
            with open(path) as f:
                f.read()
        elif op == "write":
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, value.encode())
            finally:
                os.close(fd)
        elif op == "list":
            os.listdir(path)
        return 0
    except OSError as e:
        return e.errno
print(json.dumps([attempt(*op) for op in json.loads(sys.argv[1])]))
"""


def as_other(*ops):
    cmd = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
           sys.executable, "-c", PROBE, json.dumps([[op, str(path), *rest]
                                                     for op, path, *rest in ops])]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


@pytest.fixture
def root_pid(workloads):
    return workloads.start("/bin/sleep", 60).pid


@pytest.fixture
def own_pid(workloads):
    return workloads.start("cpu_split", uid=OTHER_UID).pid


def test_other_user_cannot_touch_a_root_process(daemon, root_pid):
    t = daemon.target(root_pid)
    results = as_other(("read", t / "status"), ("read", t / "cpu.folded"),
                       ("read", t / "cpu.top"), ("read", t / "enable"),
                       ("write", t / "enable", "1"), ("write", t / "reset", "1"),
                       ("list", t))
    assert all(r in DENIED for r in results), results
    assert read(t / "enable") == "0\n", "the denied enable changed the state"
    assert daemon.status(root_pid)["state"] == "disabled"


def test_user_controls_its_own_process(daemon, own_pid):
    t = daemon.target(own_pid)
    assert as_other(("write", t / "enable", "1"), ("read", t / "enable"),
                    ("read", t / "status"), ("list", t)) == [0, 0, 0, 0]
    assert daemon.status(own_pid)["state"] == "enabled"
    daemon.wait_samples(own_pid, 20)
    # What the user reads is the profile itself, not an empty file.
    out = subprocess.run(["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}",
                          "--clear-groups", "cat", str(t / "cpu.folded")],
                         check=True, capture_output=True, text=True).stdout
    assert out and all(line.startswith("cpu_split;") for line in out.splitlines())
    assert as_other(("read", t / "cpu.top"), ("write", t / "reset", "1")) == [0, 0]


def test_tree_wide_files(daemon):
    m = daemon.mnt
    assert as_other(("read", m / "status"), ("read", m / "README"),
                    ("read", m / "config" / "frequency_hz"), ("list", m / "targets")) \
        == [0, 0, 0, 0]
    assert as_other(("write", m / "config" / "frequency_hz", "123"))[0] in DENIED
    assert read(m / "config" / "frequency_hz") != "123\n"


MODES = {"enable": "-rw-------", "collectors": "-rw-------", "status": "-r--------", "reset": "-rw-------",
         "cpu.folded": "-r--------", "cpu.top": "-r--------", "cpu.json": "-r--------",
         "cpu.pprof": "-r--------", "cpu.svg": "-r--------", "flame.svg": "-r--------",
         "window": "-rw-------", "baseline": "-rw-------", "diff.folded": "-r--------",
         "diff.svg": "-r--------", "offcpu.folded": "-r--------", "offcpu.top": "-r--------",
         "offcpu.json": "-r--------", "offcpu.pprof": "-r--------", "offcpu.svg": "-r--------",
         "blocking.json": "-r--------", "threads": "dr-x------",
         "locks.folded": "-r--------", "locks.top": "-r--------", "locks.json": "-r--------",
         "locks.pprof": "-r--------", "locks.svg": "-r--------", "syscalls.json": "-r--------"}


def ls_ln(path):
    """`ls -ln` of a directory as {name: (mode string, uid, gid)}."""
    out = subprocess.run(["ls", "-ln", str(path)], check=True, capture_output=True,
                         text=True).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        mode, _, uid, gid, *_, name = line.split()
        rows[name] = (mode, int(uid), int(gid))
    return rows


def test_ls_shows_matching_modes_and_owners(daemon, root_pid, own_pid):
    for pid, uid in ((root_pid, 0), (own_pid, OTHER_UID)):
        st = os.stat(daemon.target(pid))
        assert (stat.filemode(st.st_mode), st.st_uid, st.st_gid) == ("dr-x------", uid, uid)
        assert ls_ln(daemon.target(pid)) == {n: (m, uid, uid) for n, m in MODES.items()}
    top = ls_ln(daemon.mnt)
    assert top["status"] == ("-r--r--r--", 0, 0) and top["targets"][0] == "dr-xr-xr-x"
