"""What the end-to-end tests share: the daemon, the workloads, and reading the tree."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("APERTURE_BUILD", REPO / "build"))
APERTURE = BUILD / "aperture"
WORKLOADS = BUILD / "tests" / "workloads"
# A uid with no account and no processes of its own: setpriv needs no useradd.
OTHER_UID = 4242


def wait_for(predicate, timeout, what, interval=0.1):
    """Polls predicate until it returns something true, and returns that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def read(path):
    with open(path) as f:
        return f.read()


def write(path, value):
    """One write() of value, as `echo -n value > path` does; raises OSError on failure."""
    fd = os.open(path, os.O_WRONLY)
    try:
        data = value.encode()
        assert os.write(fd, data) == len(data)
    finally:
        os.close(fd)


def errno_of(fn, *args):
    """The errno fn(*args) fails with, or 0."""
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0


def write_errno(path, value):
    return errno_of(write, path, value)


def parse_status(text):
    """`key: value` lines into a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        assert sep, f"status line without ': ': {line!r}"
        out[key] = value
    return out


def parse_folded(text):
    """cpu.folded into {stack (tuple of frames): count}, checking every line parses."""
    assert text == "" or text.endswith("\n"), "folded output must end in a newline"
    stacks = {}
    for line in text.splitlines():
        stack, sep, count = line.rpartition(" ")
        assert sep and stack and count.isdigit(), f"malformed folded line: {line!r}"
        frames = tuple(stack.split(";"))
        assert len(frames) >= 2 and all(frames), f"empty frame in {line!r}"
        assert frames not in stacks, f"stack listed twice: {line!r}"
        stacks[frames] = int(count)
    return stacks


def user_frames(frames, inlined=False):
    """The frames below the thread name that are not kernel frames: the calls, without the
    functions inlined into them (_[i]) unless inlined."""
    return tuple(f for f in frames[1:]
                 if not f.endswith("_[k]") and (inlined or not f.endswith("_[i]")))


def samples_in(stacks, predicate):
    return sum(n for frames, n in stacks.items() if predicate(frames))


def bpf_ids(pid):
    """The BPF program and link ids process pid holds open, from its fdinfo."""
    progs, links = set(), set()
    fdinfo = Path(f"/proc/{pid}/fdinfo")
    for entry in fdinfo.iterdir():
        try:
            text = entry.read_text()
        except OSError:
            continue
        progs.update(int(m) for m in re.findall(r"^prog_id:\s+(\d+)", text, re.M))
        links.update(int(m) for m in re.findall(r"^link_id:\s+(\d+)", text, re.M))
    return progs, links


def bpf_object(kind, ident):
    """bpftool's description of prog or link ident, or None if it no longer exists."""
    r = subprocess.run(["bpftool", "-j", kind, "show", "id", str(ident)],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def mounted(mnt):
    """Whether an aperture FUSE mount sits at mnt (read from mountinfo, which never hangs)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[4] == str(mnt) and fields[sep + 1] == "fuse.aperture":
                return True
    return False


def default_interrupts():
    """A shell without job control starts `tests/run &` with SIGINT ignored, and the daemon
    inherits that: libfuse, like most daemons, leaves an ignored SIGINT ignored. The tests
    that stop it with SIGINT need the signal's default disposition back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def threads_of(pid):
    """Where each thread of pid is: name, state and kernel wait channel, and user stacks when
    gdb is at hand. For a test failure's message."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        try:
            comm = (task / "comm").read_text().strip()
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            lines.append(f"{task.name} {comm} {state} {(task / 'wchan').read_text()}")
        except OSError:
            pass
    if shutil.which("gdb"):
        lines.append(subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex",
                                     "thread apply all bt 12"], capture_output=True,
                                    text=True, timeout=60).stdout[-6000:])
    return "\n".join(lines)


class Daemon:
    """build/aperture serving a mount point, in the foreground, with --allow-other; args are
    more options of `aperture mount`, prefix a command it runs under (e.g. nsenter)."""

    live = set()  # started and not yet stopped, for conftest's watchdog

    def __init__(self, mnt, log, env=None, args=(), prefix=()):
        self.mnt = Path(mnt)
        self.log = Path(log)
        self.env = dict(os.environ, **(env or {}))
        self.args, self.prefix = list(args), list(prefix)
        self.proc = None

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.prefix, APERTURE, "mount", "--foreground", "--allow-other", *self.args,
                 str(self.mnt)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env,
                preexec_fn=default_interrupts)
        Daemon.live.add(self)
        try:
            wait_for(self._ready, 10, f"aperture to mount {self.mnt}")
        except AssertionError:
            self.kill()
            raise AssertionError(f"daemon did not come up; its log:\n{self.log_text()}")
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}:\n"
                                 f"{self.log_text()}")
        if not mounted(self.mnt):
            return False
        try:
            return "uptime_s" in read(self.mnt / "status")
        except OSError:
            return False

    def log_text(self):
        return self.log.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        """Stops the daemon with sig and checks it unmounted and let go of its BPF programs."""
        progs, links = bpf_ids(self.proc.pid)
        names = {bpf_object("prog", i)["name"] for i in progs}
        # Proves the check below looks at the right objects: these are loaded while we run.
        assert {"cpu_sample", "cpu_exec"} <= names, f"daemon's BPF programs: {names}"
        self.proc.send_signal(sig)
        Daemon.live.discard(self)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            where = threads_of(self.proc.pid)
            self.kill()
            raise AssertionError(f"daemon ignored {sig.name} for 10 s; its threads:\n{where}\n"
                                 f"its log:\n{self.log_text()[-3000:]}")
        assert rc == 0, f"daemon exited {rc} on {sig.name}:\n{self.log_text()}"
        assert not mounted(self.mnt), f"{self.mnt} still mounted after {sig.name}"

        def left():
            return ([f"prog {i}" for i in progs if bpf_object("prog", i)] +
                    [f"link {i}" for i in links if bpf_object("link", i)])
        # The kernel frees a closed perf event's program after an RCU grace period.
        try:
            wait_for(lambda: not left(), 5, "BPF objects to go")
        except AssertionError:
            raise AssertionError(f"BPF objects still loaded after {sig.name}: {left()}")

    def kill(self):
        """SIGKILL, then clears a mount the dead daemon left behind."""
        Daemon.live.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if mounted(self.mnt):
            subprocess.run(["umount", "-l", str(self.mnt)], check=False)

    def target(self, pid):
        return self.mnt / "targets" / str(pid)

    def status(self, pid=None):
        return parse_status(read(self.target(pid) / "status" if pid else self.mnt / "status"))

    def folded(self, pid):
        return parse_folded(read(self.target(pid) / "cpu.folded"))

    def samples(self, pid):
        return int(self.status(pid)["samples"])

    def wait_samples(self, pid, n, timeout=15):
        """Waits until pid's profile holds at least n samples."""
        wait_for(lambda: self.samples(pid) >= n, timeout, f"{n} samples of {pid}")

    def final_samples(self, pid):
        """A stopped target's profile is final as soon as its state says it stopped (the
        daemon drains the kernel's last samples first): returns its sample count after
        checking that no drain adds to it."""
        first = self.samples(pid)
        time.sleep(1.3)  # longer than the 1 s between drains
        assert self.samples(pid) == first, f"{pid}'s profile changed after it stopped"
        return first

    def profile(self, pid, samples, timeout=40):
        """Enables pid until its profile holds samples, then disables it: its final stacks,
        and its status while it was enabled."""
        write(self.target(pid) / "enable", "1")
        self.wait_samples(pid, samples, timeout=timeout)
        status = self.status(pid)
        write(self.target(pid) / "enable", "0")
        self.final_samples(pid)
        return self.folded(pid), status

    def set_frequency(self, hz):
        write(self.mnt / "config" / "frequency_hz", str(hz))


class Workloads:
    """Starts workload programs and makes sure none outlives the test."""

    def __init__(self):
        self.procs = []

    def start(self, name, *args, uid=None):
        """Starts a workload by name, or any program by absolute path, as uid if given."""
        cmd = [str(WORKLOADS / name), *map(str, args)]
        if uid is not None:
            cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
        proc = subprocess.Popen(cmd)
        self.procs.append(proc)
        if uid is not None:
            # setpriv execs the workload: the pid is the workload's once its comm says so.
            wait_for(lambda: read(f"/proc/{proc.pid}/comm").strip() == Path(name).name[:15], 5,
                     f"{name} to start under setpriv")
        return proc

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.procs.clear()


class Gated:
    """A workload that says a first line, then runs a round for each line it reads and says
    "done" and what it measured."""

    def __init__(self, workloads, name, *args):
        self.proc = subprocess.Popen([str(WORKLOADS / name), *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        workloads.procs.append(self.proc)
        self.pid = self.proc.pid
        self.first_line = self.proc.stdout.readline().strip()

    def round(self):
        """Runs a round: what the workload said after "done"."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["done"], line
        return line[1:]
