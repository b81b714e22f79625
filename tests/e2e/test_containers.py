"""The tree as a container sees it: a "pod" (an app container and a sidecar sharing its PID
namespace, as shareProcessNamespace makes them) where the sidecar mounts the tree's parent
directory with rslave propagation, finds the app under its pod pid, enables it and reads the
app's known CPU split; it cannot see or enable a process outside the pod. And a daemon
restarted under the sidecar's feet: its next read works."""
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers import parse_folded, parse_status, read, samples_in, user_frames, \
    wait_for, write
from podman import BUSYBOX, containers, pod_image_built, podman_ok, shared_parent  # noqa: F401

TREE = "/aperture/mnt"  # the tree inside the sidecar: the parent directory is /aperture
# busybox cat copies with sendfile(): each open tells the kernel its size (fs/ops.c).
CAT = "cat"


@pytest.fixture(scope="module")
def parent(scratch):
    path = scratch / "parent"
    undo = shared_parent(path)
    yield path
    undo()


@pytest.fixture(scope="module")
def rules_file(scratch):
    path = scratch / "rules"
    path.write_text("# none yet\n")
    return path


@pytest.fixture(scope="module")
def daemon_mnt(parent):
    return parent / "mnt"


@pytest.fixture(scope="module")
def daemon_args(rules_file):
    return ["--rules", str(rules_file)]


@pytest.fixture(autouse=True)
def fast_sampling(daemon):
    """The app gets little CPU on a busy machine: sample it often."""
    daemon.set_frequency(997)


def ns_of(pid):
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


def nspid(status_path):
    for line in Path(status_path).read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError(f"no NSpid in {status_path}")


def pod_pids(host_pid):
    """Host pid -> pod pid of every process in host_pid's PID namespace, from the host."""
    ns = ns_of(host_pid)
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if ns_of(d.name) == ns:
                    out[int(d.name)] = nspid(d / "status")
            except OSError:
                pass
    return out


@pytest.fixture
def pod(containers, parent, daemon):
    """(app container, sidecar container, the app's host pid); the app runs cpu_split, one
    thread, so that on a busy machine its main thread gets what CPU the app gets."""
    app = containers.start(cmd=["/app/cpu_split", "0"])
    side = containers.start("--pid", f"container:{app}", "-v", f"{parent}:/aperture:rslave",
                            cmd=["/bin/busybox", "sleep", "600"])
    return app, side, containers.pid(app)


def test_sidecar_sees_its_pod_by_pod_pids_and_profiles_the_app(containers, pod, daemon,
                                                               workloads):
    app, side, app_host = pod
    outsider = workloads.start("cpu_split").pid
    expected = pod_pids(app_host)
    assert expected[app_host] == 1, f"the app is its pod's pid 1: {expected}"
    assert outsider not in expected
    out = containers.sh(side, f"ls {TREE}/targets; echo --; ls {TREE}/targets/1/threads").stdout
    shown, threads = (set(part.split()) for part in out.split("--"))
    # The pod's processes by their pod pids; besides them only the shell and ls of this exec.
    assert {str(p) for p in expected.values()} <= shown, (shown, expected)
    assert len(shown - {str(p) for p in expected.values()}) <= 2, (shown, expected)
    assert str(app_host) not in shown and str(outsider) not in shown
    # The host sees every process, by host pid.
    host_view = set(os.listdir(daemon.mnt / "targets"))
    assert {str(app_host), str(outsider)} <= host_view
    # Threads by their pod tids: its one thread is 1 there, not its host tid.
    assert "1" in threads and str(app_host) not in threads, threads

    assert daemon.status(app_host)["state"] == "disabled"
    containers.sh(side, f"echo 1 > {TREE}/targets/1/enable")
    st = daemon.status(app_host)
    assert st["state"] == "enabled" and st["enabled_by"] == "user", "the sidecar enabled it"
    # Who it is: the container's cgroup and id, as podman named them.
    full_id = containers.run_id(app)
    assert st["container_id"] == full_id and full_id in st["cgroup"], st

    def split():
        r = containers.sh(side, f"{CAT} {TREE}/targets/1/cpu.folded")
        stacks = parse_folded(r.stdout)
        in_b = samples_in(stacks, lambda f: "b" in user_frames(f))
        in_c = samples_in(stacks, lambda f: "c" in user_frames(f))
        return in_b + in_c >= 100 and (in_b, in_c)
    try:
        in_b, in_c = wait_for(split, 50, "100 samples of the app's b and c", interval=1)
    except AssertionError:
        raise AssertionError(read(daemon.target(app_host) / "status"))
    share = 100 * in_b / (in_b + in_c)
    assert 58 <= share <= 82, f"b's share of b+c is {share:.1f} %, expected 70 +- 12"

    # Outside the pod: not there, by its host pid, for reading or for enabling.
    r = containers.sh(side, f"{CAT} {TREE}/targets/{outsider}/status", check=False)
    assert r.returncode != 0 and "No such file" in r.stderr, r
    r = containers.sh(side, f"echo 1 > {TREE}/targets/{outsider}/enable", check=False)
    assert r.returncode != 0, r
    assert daemon.status(outsider)["state"] == "disabled"


def test_same_name_means_the_right_process_to_each_reader(containers, pod, daemon):
    """targets/1 is the pod's app to the sidecar and init to the host, read one after the
    other: no cached lookup hands one reader the other's process."""
    app, side, app_host = pod
    for _ in range(3):
        inside = parse_status(containers.sh(side, f"{CAT} {TREE}/targets/1/status").stdout)
        host = daemon.status(1)
        assert inside["comm"] == "cpu_split" and int(inside["pid"]) == app_host, inside
        assert host["comm"] != "cpu_split" and host["pid"] == "1", host


def test_daemon_restart_under_a_reading_sidecar(containers, pod, daemon, rules_file):
    """The sidecar mounted the parent directory with rslave: after the daemon restarts, its
    next read sees the new tree, and the rules (--rules) enable again what they enabled."""
    app, side, app_host = pod
    before = read(daemon.mnt / "status")
    assert "uptime_s" in containers.sh(side, f"{CAT} {TREE}/status").stdout
    rules_file.write_text(f"# the app of the pod\ncontainer={containers.run_id(app)[:12]}* "
                          f"enable\n")
    daemon.stop()
    daemon.start()
    st = wait_for(lambda: (s := daemon.status(app_host))["state"] == "enabled" and s, 5,
                  "the rules to enable the app again")
    assert st["enabled_by"] == "rule 2", st
    assert read(daemon.mnt / "status") != before
    r = containers.sh(side, f"{CAT} {TREE}/status; ls {TREE}/targets", timeout=10)
    assert "uptime_s" in r.stdout and "\n1\n" in f"\n{r.stdout}", r.stdout


def test_busybox_cat_reads_what_each_open_rendered(daemon):
    """busybox cat copies with sendfile(), which the kernel (6.5 to 6.18) serves from the
    page cache up to the size it knows, 0 after a lookup: every open must tell it. Files
    looked up afresh (status, a target's), and a control file over several pages as it grows
    and shrinks."""
    def busybox_cat(path):
        return subprocess.run([str(BUSYBOX), "cat", str(path)], capture_output=True,
                              text=True, check=True).stdout

    def keys(text):
        return [line.partition(": ")[0] for line in text.splitlines()]
    for path in (daemon.mnt / "status", daemon.target(1) / "status"):
        out = busybox_cat(path)
        assert out.endswith("\n") and keys(out) == keys(read(path)), out
    rules = daemon.mnt / "config" / "rules"
    try:
        for text in ("# x\n" * 2300, "# short\n", "# y\n" * 1300):
            fd = os.open(rules, os.O_WRONLY | os.O_TRUNC)
            try:  # one open, writes of 2000 bytes: the later ones append
                for i in range(0, len(text), 2000):
                    os.write(fd, text[i:i + 2000].encode())
            finally:
                os.close(fd)
            assert busybox_cat(rules) == text
    finally:
        write(rules, "# none yet\n")


@pytest.mark.parametrize("qos", ["burstable", "besteffort", "guaranteed"])
def test_pod_uid_and_qos_class_from_a_kubelet_cgroup(containers, daemon, qos):
    """A container podman puts where the kubelet's cgroupfs driver puts a pod's containers
    (/kubepods[/<qos>]/pod<uid>/, no level for Guaranteed): its status names the pod uid, the
    QoS class and the container id podman reports. (The systemd driver's
    kubepods-<qos>-pod<uid>.slice names are refused by podman's cgroupfs manager: unit tests
    only.)"""
    uid = str(uuid.uuid4())
    parent = f"/kubepods/pod{uid}" if qos == "guaranteed" else f"/kubepods/{qos}/pod{uid}"
    name = containers.start("--cgroup-parent", parent, cmd=["/bin/busybox", "sleep", "600"])
    pid = containers.pid(name)
    write(daemon.target(pid) / "enable", "1")
    st = daemon.status(pid)
    full_id = containers.run_id(name)
    assert st["state"] == "enabled", st
    assert st["cgroup"].startswith(parent + "/") and full_id in st["cgroup"], st
    assert st["container_id"] == full_id, st
    assert st["pod_uid"] == uid, st
    assert st["qos_class"] == {"burstable": "Burstable", "besteffort": "BestEffort",
                               "guaranteed": "Guaranteed"}[qos], st
