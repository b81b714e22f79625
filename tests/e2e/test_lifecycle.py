"""The daemon's life: the command line, the README's demo (a daemon that forks into the
background), recovery of a mount left stale by SIGKILL, and a clean SIGINT shutdown (SIGTERM
is proven by every module's daemon fixture)."""
import errno
import os
import signal
import subprocess

from helpers import (APERTURE, BUILD, REPO, Daemon, bpf_ids, bpf_object, errno_of, mounted,
                     wait_for, write)


def test_help_and_version():
    help_ = subprocess.run([APERTURE, "--help"], capture_output=True, text=True)
    assert help_.returncode == 0 and "aperture mount" in help_.stdout
    version = subprocess.run([APERTURE, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("aperture")
    assert subprocess.run([APERTURE, "bogus"], capture_output=True).returncode == 2


def test_the_readmes_demo_runs_a_daemon_in_the_background(scratch):
    """deploy/demo.sh mounts without --foreground: the daemon forks after it is set up, and
    what it mapped before (perf rings are not copied into a child) must not be used after.
    The demo's program spends 70 % of its time in main -> a -> b and 30 % in main -> c; its
    kernel frames (system calls, the timer) are named in the forked daemon."""
    mnt = scratch / "demo-mnt"
    env = dict(os.environ, APERTURE=str(APERTURE), DEMO=str(BUILD / "tests/workloads/cpu_split"))
    try:
        demo = subprocess.run([str(REPO / "deploy/demo.sh"), str(mnt)], capture_output=True,
                              text=True, timeout=60, env=env)
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
        folded = demo.stdout.split("cpu.folded (flamegraph.pl reads it as is):\n", 1)[1]
        counts = {}
        for line in folded.split("\n\n", 1)[0].splitlines():
            stack, n = line.rsplit(" ", 1)
            counts[stack.split(";", 1)[1]] = counts.get(stack.split(";", 1)[1], 0) + int(n)
        ab = sum(n for s, n in counts.items() if "main;a;b;" in s)
        c = sum(n for s, n in counts.items() if "main;c;" in s)
        assert ab + c > 100 and 0.6 < ab / (ab + c) < 0.8, counts
        assert "samples:" in demo.stdout
        # The daemon lived through it and still serves the tree.
        assert errno_of(os.stat, mnt / "status") == 0
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        wait_for(lambda: not mounted(mnt), 10, "the demo's daemon to unmount")


def test_sigkill_leaves_a_stale_mount_that_a_restart_recovers(scratch, workloads):
    mnt, log = scratch / "mnt", scratch / "daemon.log"
    first = Daemon(mnt, log).start()
    try:
        progs, links = bpf_ids(first.proc.pid)
        first.proc.kill()
        first.proc.wait()
        assert mounted(mnt)
        assert errno_of(os.stat, mnt) == errno.ENOTCONN
        ls = subprocess.run(["ls", str(mnt)], capture_output=True, text=True)
        assert "Transport endpoint is not connected" in ls.stderr
        # Even a killed daemon's BPF objects go with its file descriptors.
        wait_for(lambda: not any(bpf_object("prog", i) for i in progs) and
                 not any(bpf_object("link", i) for i in links), 5, "the dead daemon's BPF")
    except BaseException:
        first.kill()  # also clears the stale mount: only when the test already failed
        raise

    second = Daemon(mnt, log)
    try:
        second.start()
        assert "recovered" in second.log_text()
        assert "targets_enabled" in second.status()
        assert errno_of(os.stat, mnt) == 0
        # Stop while sampling, so the perf event links are attached too.
        pid = workloads.start("cpu_split").pid
        write(second.target(pid) / "enable", "1")
        second.wait_samples(pid, 10)
        links = bpf_ids(second.proc.pid)[1]
        assert "perf_event" in {bpf_object("link", i)["type"] for i in links}
        second.stop(signal.SIGINT)
    finally:
        second.kill()
