"""Helpers shared by the bench parts: process CPU and memory from /proc, the gated workload,
and an aperture daemon on a private mount point."""
import os
import random
import re
import signal
import statistics
import subprocess
import tempfile
import time

RESULT = re.compile(r"RESULT wall=([\d.]+) user=([\d.]+) sys=([\d.]+)")


def task_cpu_s(pid):
    """On-CPU time of every live thread of pid, in seconds, from schedstat (nanoseconds).
    /proc/<pid>/stat counts in 10 ms ticks, too coarse for a few seconds of a quiet daemon."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended between listdir and open
    return total / 1e9


def status_kb(pid, key):
    """A `key: N kB` line of /proc/<pid>/status (VmHWM, VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def fds_of_kind(pid, *kinds):
    """How many fds pid holds whose link names one of kinds ("perf_event", "bpf-link",
    "bpf-prog"...), -1 if there is no such process: a tracer started as PID is attached once
    it holds its perf events or BPF links."""
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            n += any(k in target for k in kinds)
    except FileNotFoundError:
        return -1
    return n


def holds_perf_events(pid):
    """How many perf_event fds pid holds (the BPF program or ring buffer of a profiler is
    bound to them right after it opens them)."""
    return fds_of_kind(pid, "perf_event")


def bpf_prog_stats(pid):
    """(run_cnt, run_time_ns) summed over the perf_event BPF programs pid holds, from its
    fds' fdinfo; times count only while kernel.bpf_stats_enabled is 1."""
    progs = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            info = dict(l.split(":\t", 1) for l in
                        read_text(f"/proc/{pid}/fdinfo/{fd}").splitlines() if ":\t" in l)
        except OSError:
            continue
        if info.get("prog_type", "").strip() == "7" and "run_cnt" in info:  # perf_event
            progs[info["prog_id"]] = (int(info["run_cnt"]), int(info["run_time_ns"]))
    return tuple(map(sum, zip((0, 0), *progs.values())))


def set_bpf_stats(on):
    """kernel.bpf_stats_enabled makes the kernel time every BPF program run (a few tens of
    ns each): on only while BPF time is measured, never while slowdown is. Returns the old
    value."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    old = read_text(path).strip() == "1"
    with open(path, "w") as f:
        f.write("1" if on else "0")
    return old


def stop(proc, sig, timeout):
    """Sends sig to proc and waits up to timeout seconds for it to end, then SIGKILLs it."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kill_all(procs):
    """SIGKILLs and reaps every process of procs, and empties the list."""
    for p in procs:
        p.kill()
        p.wait()
    procs.clear()


def wait_until(cond, timeout, step=0.01):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def median_diff_ci(a, b, n=4000, seed=1):
    """95 % bootstrap interval of median(a) - median(b), a and b resampled independently:
    how far apart two medians of noisy ratios may really be."""
    rng = random.Random(seed)
    diffs = sorted(statistics.median(rng.choices(a, k=len(a))) -
                   statistics.median(rng.choices(b, k=len(b))) for _ in range(n))
    return diffs[int(0.025 * n)], diffs[int(0.975 * n) - 1]


def read_text(path):
    with open(path) as f:
        return f.read()


class Gated:
    """A workload started blocked at its gate (bench.h), so a profiler can attach by PID
    before the measured phase; release() starts the phase, finish() parses RESULT."""

    def __init__(self, argv, tmp, tag):
        self.gate = os.path.join(tmp, f"gate-{tag}")
        self.errpath = os.path.join(tmp, f"err-{tag}")
        os.mkfifo(self.gate)
        env = dict(os.environ, BENCH_GATE=self.gate)
        with open(self.errpath, "w") as err:
            self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        self.pid = self.proc.pid

    def release(self):
        with open(self.gate, "w") as f:  # blocks until the workload opens its end
            f.write("g")

    def finish(self, timeout=300):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"workload {self.pid} timed out")
        m = RESULT.search(read_text(self.errpath))
        if not m:
            raise RuntimeError(f"no RESULT from workload: {read_text(self.errpath)[-500:]}")
        os.unlink(self.gate)
        return {"wall": float(m.group(1)), "self_cpu": float(m.group(2)) + float(m.group(3))}


def folded_stats(text):
    """(lines, sum of counts) of folded text; the count is the last token of a line."""
    lines = [l for l in text.splitlines() if l.strip()]
    return len(lines), sum(int(l.rsplit(None, 1)[1]) for l in lines)


class Daemon:
    """`aperture mount --foreground` on a fresh temporary mount point."""

    def __init__(self, binary, env=None):
        self.binary = binary
        self.mnt = tempfile.mkdtemp(prefix="aperture-bench-")
        self.log = open(os.path.join(tempfile.gettempdir(), "aperture-bench-daemon.log"), "a")
        self.proc = subprocess.Popen([binary, "mount", "--foreground", self.mnt],
                                     stdout=self.log, stderr=self.log,
                                     env=dict(os.environ, **(env or {})))
        self.pid = self.proc.pid
        if not wait_until(lambda: os.path.ismount(self.mnt), 10):
            self.stop()
            raise RuntimeError(f"aperture did not mount {self.mnt}; see {self.log.name}")

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def status(self, pid=None):
        """The `key: value` lines of status (or of targets/<pid>/status) as a dict."""
        text = read_text(self.path("targets", str(pid), "status") if pid else self.path("status"))
        return dict(l.split(": ", 1) for l in text.splitlines() if ": " in l)

    def samples(self):
        return int(self.status()["samples"])

    def set_hz(self, hz):
        if read_text(self.path("config", "frequency_hz")).strip() != str(hz):
            with open(self.path("config", "frequency_hz"), "w") as f:
                f.write(str(hz))

    def write_enable(self, pid, value="1"):
        """Writes enable and returns how long the write took: the attach latency (the
        target enters the BPF map; the first target also opens the perf events)."""
        t0 = time.monotonic()
        with open(self.path("targets", str(pid), "enable"), "w") as f:
            f.write(value)
        return time.monotonic() - t0

    def cpu_s(self):
        return task_cpu_s(self.pid)

    def hwm_kb(self):
        return status_kb(self.pid, "VmHWM")

    def rss_kb(self):
        return status_kb(self.pid, "VmRSS")

    def stop(self):
        """SIGTERM: the daemon unmounts and detaches its BPF programs itself."""
        stop(self.proc, signal.SIGTERM, 10)
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], check=False)
        try:
            os.rmdir(self.mnt)
        except OSError:
            pass
        self.log.close()
