"""Discovery of HotSpot JVMs by the hsperfdata watch: inotify on /tmp/hsperfdata_* of the
host and of containers' roots. JVMs started after the mount are known within moments, without
their maps being read (a JVM run with -XX:-UsePerfData is the control: only maps know it), a
container's JVM once its namespace was seen, and none once it exits. Ground truth: the JVMs the
tests start, their perf data files, and files planted by the tests."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import read, wait_for

IDLE = """public class Idle {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(600_000);
    }
}
"""
# Small, quick JVMs: the machine is shared.
JAVA = ["java", "-Xmx32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
NOBODY = 65534
KNOWN_WITHIN_S = 3


@pytest.fixture(scope="module")
def idle(scratch):
    """The folder of Idle.class, readable by every user."""
    out = scratch / "idle"
    out.mkdir()
    (out / "Idle.java").write_text(IDLE)
    subprocess.run(["javac", "-d", str(out), str(out / "Idle.java")], check=True)
    os.chmod(out, 0o755)
    os.chmod(out / "Idle.class", 0o644)
    return out


class Java:
    """A JVM running Idle; prefix runs it under unshare (and sh). pid is the java process on
    the host: the one started or its first java descendant."""

    def __init__(self, idle, *flags, prefix=()):
        self.proc = subprocess.Popen([*prefix, *JAVA, *flags, "-cp", str(idle), "Idle"],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid
        while read(f"/proc/{self.pid}/comm").strip() != "java":
            self.pid = int(read(f"/proc/{self.pid}/task/{self.pid}/children").split()[0])

    def kill(self, sig=signal.SIGKILL):
        """Signals the JVM and waits for it. Once what was started is reaped, the JVM is gone
        (unshare --fork waits for its child) and its pid may be another process's."""
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
        self.proc.wait(timeout=20)


def watched(daemon):
    """The JVMs the daemon's watch knows, and its status, checking that the count and the
    list agree."""
    st = daemon.status()
    count = int(st["jvms"].split()[0])
    pids = set() if st["jvm_pids"] == "none" else {int(p) for p in st["jvm_pids"].split()}
    assert count == len(pids), st
    assert "hsperfdata watch on" in st["jvms"], st["jvms"]
    return pids, st


def wait_known(daemon, pid, timeout=KNOWN_WITHIN_S):
    wait_for(lambda: pid in watched(daemon)[0], timeout, f"the watch to know JVM {pid}", 0.02)


def wait_gone(daemon, pid):
    wait_for(lambda: pid not in watched(daemon)[0], KNOWN_WITHIN_S,
             f"the watch to forget JVM {pid}", 0.02)


def assert_jvm(daemon, pid, found_by):
    """targets/<pid>/status says runtime: jvm and how, and jvm/ is listed."""
    status = daemon.status(pid)
    assert status["runtime"] == "jvm" and status["jvm_found_by"] == found_by, status
    assert "jvm" in os.listdir(daemon.target(pid))


def hsperf_file(pid, nspid=None, root="", user="root"):
    return Path(f"{root}/tmp/hsperfdata_{user}/{nspid or pid}")


def test_jvm_started_after_mount_is_known_by_its_perf_data(daemon, idle):
    before, _ = watched(daemon)
    j = Java(idle)
    try:
        assert j.pid not in before
        assert hsperf_file(j.pid).is_file()  # the JVM made its file: what the watch sees
        start = time.monotonic()
        wait_known(daemon, j.pid)
        print(f"known {1000 * (time.monotonic() - start):.0f} ms after the JVM said ready")
        assert_jvm(daemon, j.pid, "hsperfdata")
    finally:
        j.kill()


def test_jvm_without_perf_data_is_found_by_its_maps_only(daemon, idle):
    """The control: without a perf data file the watch never counts it, yet it is a JVM."""
    j = Java(idle, "-XX:-UsePerfData")
    try:
        assert not hsperf_file(j.pid).exists()
        time.sleep(1.5)
        assert j.pid not in watched(daemon)[0]
        assert_jvm(daemon, j.pid, "maps")
    finally:
        j.kill()


def test_exited_jvms_leave_the_set(daemon, idle):
    """A JVM that exits removes its file; a killed one leaves it behind, and still goes."""
    clean, killed = Java(idle), Java(idle)
    try:
        wait_known(daemon, clean.pid)
        wait_known(daemon, killed.pid)
        clean.kill(signal.SIGTERM)
        assert not hsperf_file(clean.pid).exists()
        wait_gone(daemon, clean.pid)
        killed.kill(signal.SIGKILL)
        assert hsperf_file(killed.pid).exists()  # stale: only the exit itself tells
        wait_gone(daemon, killed.pid)
    finally:
        clean.kill()
        killed.kill()
        hsperf_file(killed.pid).unlink(missing_ok=True)


def test_planted_file_is_not_believed(daemon, idle, workloads):
    """A file named after a live process that is no JVM, in a new hsperfdata folder, and
    written to: the process does not have it mapped, so it stays native (an enable would
    otherwise send it the attach's SIGQUIT)."""
    other = workloads.start("/bin/sleep", 60).pid
    folder = Path(f"/tmp/hsperfdata_aperture-e2e-{os.getpid()}")
    folder.mkdir()
    try:
        j = Java(idle)
        try:
            (folder / str(other)).write_bytes(b"\0" * 32768)
            with open(folder / str(other), "r+b") as f:
                f.write(b"x")
            wait_known(daemon, j.pid)  # the watch is working meanwhile
            time.sleep(1)
            assert other not in watched(daemon)[0]
            status = daemon.status(other)
            assert status["runtime"] == "native"
            assert "jvm_found_by" not in status
            assert "jvm" not in os.listdir(daemon.target(other))
        finally:
            j.kill()
    finally:
        shutil.rmtree(folder)


CONTAINER = """exec 3<"$1/Idle.class"
mount -t tmpfs tmpfs /tmp || exit 1
mkdir /tmp/c && cat <&3 >/tmp/c/Idle.class && chmod 755 /tmp/c
{java} -cp /tmp/c Idle >/dev/null &
touch /tmp/mounted
while [ ! -e /tmp/go ]; do sleep 0.05; done
exec setpriv --reuid={nobody} --regid={nobody} --clear-groups {java} -cp /tmp/c Idle
"""


def test_container_jvm_with_its_own_tmp_is_known_once_its_namespace_is_seen(daemon, idle):
    """Own pid and mount namespaces and a private tmpfs on /tmp: the JVM's file exists only
    in that root, under its namespace pid. First JVM: started before the daemon saw the
    namespace, unknown until targets/ is listed. Second JVM: started later as another user,
    so its hsperfdata folder is new too; it is known with no listing at all."""
    script = CONTAINER.format(java=" ".join(JAVA), nobody=NOBODY)
    proc = subprocess.Popen(["unshare", "--fork", "--pid", "--mount", "--mount-proc",
                             "sh", "-c", script, "sh", str(idle)])
    try:
        sh = wait_for(lambda: read(f"/proc/{proc.pid}/task/{proc.pid}/children").split(), 5,
                      "unshare's child")
        sh = int(sh[0])
        root = f"/proc/{sh}/root"
        wait_for(lambda: os.path.exists(f"{root}/tmp/mounted"), 10, "the private /tmp")
        first = int(wait_for(lambda: read(f"/proc/{sh}/task/{sh}/children").split(), 10,
                             "the first JVM")[0])
        nspid = read(f"/proc/{first}/status").split("NSpid:")[1].split("\n")[0].split()
        assert len(nspid) == 2 and nspid[1] != str(first)  # really in its own namespace
        wait_for(lambda: hsperf_file(first, nspid[1], root).is_file(), 15,
                 "the first JVM's perf data file")
        assert not hsperf_file(first, nspid[1]).exists()  # not in the host's /tmp
        time.sleep(1)
        assert first not in watched(daemon)[0]
        assert_jvm(daemon, first, "maps")

        os.listdir(daemon.mnt / "targets")
        wait_known(daemon, first)
        assert_jvm(daemon, first, "hsperfdata")

        Path(f"{root}/tmp/go").touch()
        wait_for(lambda: read(f"/proc/{sh}/comm").strip() == "java", 10, "the second JVM")
        wait_for(lambda: hsperf_file(sh, 1, root, "nobody").is_file(), 15,
                 "the second JVM's perf data file")
        wait_known(daemon, sh)
        assert_jvm(daemon, sh, "hsperfdata")

        os.kill(sh, signal.SIGKILL)  # the namespace's init: every process in it goes
        wait_gone(daemon, sh)
        wait_gone(daemon, first)
    finally:
        try:
            os.kill(proc.pid, signal.SIGKILL)
            children = read(f"/proc/{proc.pid}/task/{proc.pid}/children").split()
            for c in children:
                os.kill(int(c), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
        proc.wait()


def test_namespace_pid_that_is_also_a_host_process(daemon, idle, workloads):
    """A JVM in its own pid namespace sharing the host's /tmp names its file after its
    namespace pid, which here is made the pid of a live host process too (ns_last_pid): the
    watch must take the process that has the file mapped, not the host's namesake."""
    other = workloads.start("/bin/sleep", 60).pid
    j = Java(idle, prefix=["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                           f'echo {other - 1} >/proc/sys/kernel/ns_last_pid; "$@" & wait',
                           "sh"])
    try:
        nspid = read(f"/proc/{j.pid}/status").split("NSpid:")[1].split("\n")[0].split()
        assert nspid == [str(j.pid), str(other)]
        assert hsperf_file(j.pid, other).is_file()
        wait_known(daemon, j.pid)
        assert other not in watched(daemon)[0]
        assert daemon.status(other)["runtime"] == "native"
    finally:
        j.kill()


def test_lost_events_are_made_up_for_by_a_rescan(daemon, idle):
    """With the daemon stopped, more files appear than the kernel queues events for, then a
    JVM starts: its events are lost (the queue overflowed), and only the rescan that follows
    the overflow can find it."""
    queue = int(read("/proc/sys/fs/inotify/max_queued_events"))
    _, st = watched(daemon)
    rescans, folders = int(st["jvm_watch_rescans"]), int(st["jvm_watch_folders"])
    folder = Path(f"/tmp/hsperfdata_aperture-e2e-flood-{os.getpid()}")
    folder.mkdir()
    j = None
    try:
        wait_for(lambda: int(watched(daemon)[1]["jvm_watch_folders"]) > folders, 10,
                 "the new folder to be watched")
        daemon.proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(queue + 100):
                os.close(os.open(folder / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
            j = Java(idle)
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        wait_known(daemon, j.pid, 10)
        assert int(watched(daemon)[1]["jvm_watch_rescans"]) > rescans
    finally:
        if j:
            j.kill()
        shutil.rmtree(folder)
