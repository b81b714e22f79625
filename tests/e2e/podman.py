"""Real containers for the container tests: images built by buildah FROM scratch holding
static binaries, run by podman with runc (crun refuses this machine's hybrid cgroups) and
ulimits below the hard limits (podman's defaults exceed them). No registry is used."""
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers import WORKLOADS, wait_for

PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
RUN = [*PODMAN, "run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
BUSYBOX = Path("/bin/busybox")
POD_IMAGE = "localhost/aperture-test-pod:latest"
PROBE_IMAGE = "localhost/aperture-test-probe:latest"


def run(*cmd, check=True, timeout=60):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def build_image(name, files, cmd=None):
    """An image FROM scratch holding files ({path in image: host file}); returns its name."""
    ctr = run("buildah", "from", "scratch").stdout.strip()
    try:
        for dest, src in files.items():
            run("buildah", "copy", "--chmod", "0755", ctr, str(src), dest)
        if cmd:
            run("buildah", "config", "--cmd", " ".join(cmd), ctr)
        run("buildah", "commit", "--quiet", "--rm", ctr, name)
    except BaseException:
        run("buildah", "rm", ctr, check=False)
        raise
    return name


def pod_image():
    """busybox (the sidecar's shell) and the static cpu_split (the app)."""
    return build_image(POD_IMAGE, {"/bin/busybox": BUSYBOX,
                                   "/app/cpu_split": WORKLOADS / "cpu_split_static"})


def usable():
    """Why podman cannot run a container here, or None: the only reason to skip."""
    if not shutil.which("podman") or not shutil.which("buildah") or not BUSYBOX.exists():
        return "podman, buildah or busybox-static is not installed (deploy/setup.sh)"
    try:
        probe = build_image(PROBE_IMAGE, {"/bin/busybox": BUSYBOX})
        p = run(*RUN, "--rm", probe, "/bin/busybox", "true", check=False)
    except (AssertionError, subprocess.TimeoutExpired) as e:
        return f"podman cannot build or run a FROM scratch image here: {e}"
    if p.returncode:
        return f"podman cannot run a container here: {p.stderr.strip()}"
    return None


class Containers:
    """Starts detached containers and removes every one of them at the end."""

    def __init__(self):
        self.names = []

    def start(self, *args, image=POD_IMAGE, cmd=()):
        name = f"aperture-test-{uuid.uuid4().hex[:8]}"
        run(*RUN, "-d", "--name", name, *args, image, *cmd)
        self.names.append(name)
        wait_for(lambda: self.pid(name), 10, f"container {name} to run")
        return name

    def pid(self, name):
        """The host pid of the container's first process (0 while it is not running)."""
        p = run(*PODMAN, "inspect", "--format", "{{.State.Pid}}", name, check=False)
        return int(p.stdout.strip() or 0) if p.returncode == 0 else 0

    def run_id(self, name):
        return run(*PODMAN, "inspect", "--format", "{{.Id}}", name).stdout.strip()

    def sh(self, name, script, check=True, timeout=30):
        """Runs a busybox shell script in the container; returns the finished process."""
        return run(*PODMAN, "exec", name, "/bin/busybox", "sh", "-c", script, check=check,
                   timeout=timeout)

    def remove_all(self):
        """Newest first: podman refuses to remove a container another one shares a PID
        namespace with (the app of a sidecar), and a left-over app burns CPU for ever."""
        for name in reversed(self.names):
            p = run(*PODMAN, "rm", "-f", "-t", "0", name, check=False, timeout=120)
            assert p.returncode == 0, f"podman rm {name}: {p.stderr}"
        self.names.clear()


@pytest.fixture(scope="module")
def podman_ok():
    why = usable()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def pod_image_built(podman_ok):
    pod_image()


@pytest.fixture
def containers(pod_image_built):
    c = Containers()
    yield c
    c.remove_all()


def shared_parent(path):
    """A directory bind-mounted on itself and made rshared, as the kubelet makes a hostPath
    with Bidirectional propagation: mounts made under it reach containers that mounted it
    with rslave (HostToContainer). Returns a function that undoes it."""
    path.mkdir(exist_ok=True)
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    subprocess.run(["mount", "--make-rshared", str(path)], check=True)
    return lambda: subprocess.run(["umount", "-l", str(path)], check=False)
