"""JVM collection against real JVMs (OpenJDK 17), with programs javac compiles here: attach
from C, thread dumps, deadlocks as jstack reports them, busy threads, and the ways an attach
fails. One JVM with known threads serves most tests."""
import errno
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import OTHER_UID, REPO, parse_status, read, wait_for, write, write_errno

JAVA_SRC = REPO / "tests" / "workloads" / "java"
THREAD_NAMES = {"mon-a", "mon-b", "juc-a", "juc-b", "spinner", "holder", "waiter", "idle-1"}


@pytest.fixture(scope="module")
def classes(scratch):
    """The workloads' classes, readable by every user."""
    out = scratch / "classes"
    out.mkdir()
    subprocess.run(["javac", "-d", str(out), *map(str, JAVA_SRC.glob("*.java"))], check=True)
    for p in [out, *out.iterdir()]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return out


class Jvm:
    """A java process running one of the workloads; prefix runs it under setpriv or
    unshare. pid is the JVM's own pid on the host."""

    def __init__(self, classes, main, *flags, prefix=()):
        self.proc = subprocess.Popen([*prefix, "java", *flags, "-cp", str(classes), main],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = wait_for(self._java_pid, 10, f"{main}'s JVM to start")

    def _java_pid(self):
        """The java process: the one we started, or its child under unshare --fork."""
        candidates = [self.proc.pid]
        try:
            candidates += [int(c) for c in
                           read(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").split()]
        except OSError:
            return None
        for pid in candidates:
            try:
                if "/libjvm.so" in read(f"/proc/{pid}/maps"):
                    return pid
            except OSError:
                pass
        return None

    def wait_ready(self):
        assert self.proc.stdout.readline().strip() == "ready"
        return self

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, line):
        assert self.proc.stdout.readline().strip() == line

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


@pytest.fixture(scope="module")
def jvm(classes):
    j = Jvm(classes, "Threads").wait_ready()
    yield j
    j.kill()


def jvm_status(daemon, pid):
    return parse_status(read(daemon.target(pid) / "jvm" / "status"))


def enable_and_attach(daemon, pid, timeout=20):
    write(daemon.target(pid) / "enable", "1")
    st = wait_for(lambda: (lambda s: s if s["state"] != "attaching" else None)(
        jvm_status(daemon, pid)), timeout, f"the attach to {pid} to end")
    assert st["state"] == "attached", f"attach failed: {st}"
    return st


@pytest.fixture(scope="module")
def attached(daemon, jvm):
    enable_and_attach(daemon, jvm.pid)
    return jvm


def threads_file(daemon, pid, name):
    return read(daemon.target(pid) / "threads" / name)


def parse_deadlocks(text):
    """jstack's deadlock report into [{thread: (kind, lock hash, lock class, holder)}]."""
    cycles = []
    for block in text.split("Found one Java-level deadlock:\n")[1:]:
        head = block.split("Java stack information")[0]
        cycle = {}
        for m in re.finditer(r'^"(.+)":\n  (waiting to lock monitor|waiting for ownable '
                             r'synchronizer) <0x([0-9a-f]+)>,? \(a (\S+)\),\n'
                             r'  which is held by "(.+)"$', head, re.M):
            kind = "monitor" if "monitor" in m[2] else "synchronizer"
            cycle[m[1]] = (kind, m[3], m[4], m[5])
        cycles.append(cycle)
    return cycles


def test_jvm_folder_only_for_jvms(daemon, jvm, workloads):
    other = workloads.start("/bin/sleep", 60).pid
    assert "jvm" in os.listdir(daemon.target(jvm.pid))
    assert "jvm" not in os.listdir(daemon.target(other))
    assert not (daemon.target(other) / "jvm").exists()
    assert daemon.status(jvm.pid)["runtime"] == "jvm"
    assert daemon.status(other)["runtime"] == "native"


def test_deadlocks_name_exactly_the_deadlocked_threads_and_their_locks(daemon, attached):
    cycles = parse_deadlocks(threads_file(daemon, attached.pid, "deadlocks"))
    by_names = {frozenset(c): c for c in cycles}
    assert set(by_names) == {frozenset({"mon-a", "mon-b"}), frozenset({"juc-a", "juc-b"})}
    mon, juc = by_names[frozenset({"mon-a", "mon-b"})], by_names[frozenset({"juc-a", "juc-b"})]
    assert mon["mon-a"][3] == "mon-b" and mon["mon-b"][3] == "mon-a"
    assert juc["juc-a"][3] == "juc-b" and juc["juc-b"][3] == "juc-a"
    assert {v[:1] + v[2:3] for v in mon.values()} == {("monitor", "java.lang.Object")}
    assert {v[:1] + v[2:3] for v in juc.values()} == {
        ("synchronizer", "java.util.concurrent.locks.ReentrantLock$NonfairSync")}
    # Each waits for the lock the other holds: check against the holders' own dump.
    dump = {t["name"]: t for t in json.loads(threads_file(daemon, attached.pid, "dump"))["threads"]}
    for name, (kind, lock, _, holder) in {**mon, **juc}.items():
        held = (dump[holder]["locked_monitors"] if kind == "monitor"
                else dump[holder]["locked_synchronizers"])
        assert lock in {h["identity_hash"] for h in held}, (name, lock, dump[holder])
    # jstack agrees on who is deadlocked.
    js = subprocess.run(["jstack", str(attached.pid)], capture_output=True, text=True,
                        timeout=30).stdout
    jstack_names = set(re.findall(r'^"(.+)":\n  (?:waiting to lock monitor|waiting for ownable)',
                                  js, re.M))
    assert jstack_names == {"mon-a", "mon-b", "juc-a", "juc-b"}


def test_deadlocks_json(daemon, attached):
    doc = json.loads(threads_file(daemon, attached.pid, "deadlocks.json"))
    cycles = [{t["name"]: t for t in c["threads"]} for c in doc["deadlocks"]]
    assert sorted(sorted(c) for c in cycles) == [["juc-a", "juc-b"], ["mon-a", "mon-b"]]
    for c in cycles:
        for name, t in c.items():
            assert t["lock_owner"]["name"] in c and t["lock_owner"]["name"] != name
            assert t["waits_for"] == ("monitor" if name.startswith("mon") else
                                      "ownable_synchronizer")


def test_dump_has_every_thread_with_its_native_tid(daemon, attached):
    doc = json.loads(threads_file(daemon, attached.pid, "dump"))
    threads = {t["name"]: t for t in doc["threads"]}
    assert THREAD_NAMES <= set(threads)
    for name in THREAD_NAMES:
        t = threads[name]
        comm = read(f"/proc/{attached.pid}/task/{t['tid']}/comm").strip()
        assert comm == name, (name, t["tid"], comm)
        assert t["daemon"] is True and t["cpu_time_ns"] >= 0
    assert threads["spinner"]["state"] == "RUNNABLE"
    assert threads["spinner"]["stack"][0]["method"] == "spin"
    # waiter is blocked on the monitor holder holds: no deadlock, but a lock and its owner.
    waiter, holder = threads["waiter"], threads["holder"]
    assert waiter["state"] == "BLOCKED" and waiter["lock_owner"]["name"] == "holder"
    assert waiter["lock"]["identity_hash"] in {
        m["identity_hash"] for m in holder["locked_monitors"]}
    assert holder["stack"][holder["locked_monitors"][0]["stack_depth"]]["method"] == \
        "holdAndSleep"


def jvm_busy(daemon, pid):
    """threads/busy of a JVM: its '#' lines and rows {name, tid, cpu_ms, evidence, stack},
    busiest first; stack: the row's Java frames as "Class.method", leaf first."""
    header, rows = [], []
    for line in threads_file(daemon, pid, "busy").splitlines():
        if line.startswith("#"):
            header.append(line)
        elif line.startswith("\tat "):
            rows[-1]["stack"].append(line.split()[1].split("(")[0])
        elif line.startswith("\t"):
            continue
        else:
            tid, name, cpu_ms, _, evidence = re.match(r'(\d+) "(.+)" (\S+) (\S+) (\S+)$',
                                                      line).groups()
            rows.append({"name": name, "tid": int(tid), "cpu_ms": float(cpu_ms),
                         "evidence": evidence, "stack": []})
    return header, rows


def test_spinning_thread_tops_busy(daemon, attached):
    time.sleep(1)
    _, rows = jvm_busy(daemon, attached.pid)
    assert rows[0]["name"] == "spinner" and rows[0]["evidence"] == "thread_cpu"
    assert rows[0]["cpu_ms"] > 20 and rows[0]["stack"][0] == "Threads.spin"
    assert read(f"/proc/{attached.pid}/task/{rows[0]['tid']}/comm").strip() == "spinner"
    # Stacks only for the few busiest: the idle threads' are not asked for.
    assert len([r for r in rows if r["stack"]]) <= 5
    assert not next(r for r in rows if r["name"] == "idle-1")["stack"]


# slow: the window's C code runs under the sanitizers in test_waits.py's native twin, the
# JVM's busy rows in test_spinning_thread_tops_busy.
@pytest.mark.slow
def test_busy_ranks_java_threads_over_the_targets_window(daemon, classes):
    """early-spin spins ~5 s, then late-spin ~2.5 s: over the last 2 s late-spin was the busy
    one (early-spin drops out), since enable early-spin was."""
    j = Jvm(classes, "Switch").wait_ready()
    try:
        enable_and_attach(daemon, j.pid)
        time.sleep(5)
        j.send("switch")
        j.expect("switched")
        time.sleep(2.5)
        write(daemon.target(j.pid) / "window", "2")
        header, rows = jvm_busy(daemon, j.pid)
        assert "window_s 2)" in header[0], header
        span = float(header[0].split("the last ")[1].split()[0])
        # The per-second sample nearest 2 s ago; the daemon's loop may run late while it
        # names a JVM's many new frames.
        assert 1.4 <= span <= 3.0, header
        by_name = {r["name"]: r for r in rows}
        assert rows[0]["name"] == "late-spin", rows[:3]
        assert rows[0]["evidence"] == "thread_cpu" and "Switch.spinWhile" in rows[0]["stack"]
        # On a loaded 2-core machine, late-spin ran for at least a quarter of the span.
        assert rows[0]["cpu_ms"] >= 0.25 * span * 1e3, rows[0]
        assert by_name["early-spin"]["cpu_ms"] <= rows[0]["cpu_ms"] / 4, rows[:3]

        write(daemon.target(j.pid) / "window", "0")
        header, rows = jvm_busy(daemon, j.pid)
        assert "window_s 0, since enable or reset" in header[0], header
        by_name = {r["name"]: r for r in rows}
        assert rows[0]["name"] == "early-spin", rows[:3]
        assert by_name["late-spin"]["cpu_ms"] > 0, rows[:3]
    finally:
        j.kill()


def test_disable_then_enable_reuses_the_agent(daemon, attached):
    write(daemon.target(attached.pid) / "enable", "0")
    wait_for(lambda: jvm_status(daemon, attached.pid)["state"] == "detached", 5, "detach")
    assert threads_file(daemon, attached.pid, "deadlocks") == ""
    maps = read(f"/proc/{attached.pid}/maps")
    agents = set(re.findall(r"\S*aperture-jvm-agent\S*\.so", maps))
    assert len(agents) == 1
    enable_and_attach(daemon, attached.pid)
    assert set(re.findall(r"\S*aperture-jvm-agent\S*\.so",
                          read(f"/proc/{attached.pid}/maps"))) == agents
    assert "Found 2 deadlocks." in threads_file(daemon, attached.pid, "deadlocks")
    # Off and on at once: the agent's ending session doesn't make the new attach fail.
    write(daemon.target(attached.pid) / "enable", "0")
    enable_and_attach(daemon, attached.pid)
    assert "Found 2 deadlocks." in threads_file(daemon, attached.pid, "deadlocks")


def test_attach_disabled_says_so_and_native_profile_goes_on(daemon, classes):
    j = Jvm(classes, "Threads", "-XX:+DisableAttachMechanism").wait_ready()
    try:
        write(daemon.target(j.pid) / "enable", "1")
        st = wait_for(lambda: (lambda s: s if s["state"] == "failed" else None)(
            jvm_status(daemon, j.pid)), 10, "the attach to fail")
        assert "attach disabled" in st["reason"] and "DisableAttachMechanism" in st["reason"]
        assert "jvm: failed: attach disabled" in read(daemon.target(j.pid) / "status")
        daemon.wait_samples(j.pid, 20)
        assert threads_file(daemon, j.pid, "deadlocks") == ""
        # No SIGQUIT was sent: the JVM would have printed a thread dump.
        assert not os.path.exists(f"/proc/{j.pid}/root/tmp/.java_pid{j.pid}")
    finally:
        j.kill()


def test_jvm_of_another_user_attaches(daemon, classes):
    j = Jvm(classes, "Threads", prefix=["setpriv", f"--reuid={OTHER_UID}",
                                        f"--regid={OTHER_UID}", "--clear-groups"]).wait_ready()
    try:
        enable_and_attach(daemon, j.pid)
        assert len(parse_deadlocks(threads_file(daemon, j.pid, "deadlocks"))) == 2
    finally:
        j.kill()


def test_jvm_in_its_own_pid_and_mount_namespace_attaches(daemon, classes):
    j = Jvm(classes, "Threads",
            prefix=["unshare", "--pid", "--fork", "--mount-proc"]).wait_ready()
    try:
        nspid = read(f"/proc/{j.pid}/status").split("NSpid:")[1].split("\n")[0].split()
        assert len(nspid) == 2 and nspid[1] != str(j.pid)  # really in its own namespace
        enable_and_attach(daemon, j.pid)
        assert len(parse_deadlocks(threads_file(daemon, j.pid, "deadlocks"))) == 2
    finally:
        j.kill()


def test_jvm_exiting_during_attach(daemon, classes):
    """A stopped JVM never answers; it dies while the attach waits. Readers stay fast."""
    j = Jvm(classes, "Threads").wait_ready()
    try:
        os.kill(j.pid, signal.SIGSTOP)
        write(daemon.target(j.pid) / "enable", "1")
        time.sleep(0.5)
        t0 = time.monotonic()
        assert jvm_status(daemon, j.pid)["state"] == "attaching"
        # Until the agent answers, threads/ shows what the kernel shows (the native views).
        assert threads_file(daemon, j.pid, "dump").startswith("Native thread dump")
        assert time.monotonic() - t0 < 1
        os.kill(j.pid, signal.SIGKILL)
        j.proc.wait()
        st = wait_for(lambda: (lambda s: s if "jvm: failed" in s else None)(
            read(daemon.target(j.pid) / "status")), 15, "the attach to end")
        assert "jvm: failed: the JVM exited during attach" in st
    finally:
        j.kill()


def test_jvm_exiting_during_collection(daemon, classes):
    j = Jvm(classes, "Threads").wait_ready()
    try:
        enable_and_attach(daemon, j.pid)
        j.kill()
        # The JVM session and the target each see the exit on their own, in either order.
        st = wait_for(lambda: (lambda s: s if "jvm: failed" in s and
                               parse_status(s)["state"] == "exited" else None)(
            read(daemon.target(j.pid) / "status")), 5, "the session and the target to end")
        assert "jvm: failed: the JVM exited during collection" in st
        assert daemon.proc.poll() is None
    finally:
        j.kill()


@pytest.fixture(scope="module")
def hot(daemon, classes):
    j = Jvm(classes, "Hot").wait_ready()
    enable_and_attach(daemon, j.pid)
    wait_events(daemon, j.pid)
    yield j
    j.kill()


def wait_events(daemon, pid):
    """jvm/status once the agent has said which events it could turn on."""
    return wait_for(lambda: (lambda s: s if s["alloc"] != "off" else None)(
        jvm_status(daemon, pid)), 5, "events to start")


def folded_by_leaf(text):
    """{leaf frame without its _[j] mark: total} of a folded file."""
    totals = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        leaf = stack.split(";")[-1].removesuffix("_[j]")
        totals[leaf] = totals.get(leaf, 0) + int(count)
    return totals


def test_allocation_heavy_method_tops_alloc(daemon, hot):
    jvm_dir = daemon.target(hot.pid) / "jvm"
    st = jvm_status(daemon, hot.pid)
    assert st["alloc"].startswith("on, one sample per 524288 bytes")
    wait_for(lambda: read(jvm_dir / "alloc.folded"), 10, "allocation samples")
    time.sleep(2)
    # Samples first: bytes read later can only have grown.
    by_objects = folded_by_leaf(read(jvm_dir / "alloc_objects.folded"))
    by_bytes = folded_by_leaf(read(jvm_dir / "alloc.folded"))
    assert max(by_bytes, key=by_bytes.get) == "Hot.allocateBig"
    assert max(by_objects, key=by_objects.get) == "Hot.allocateBig"
    # Bytes are the sampled sizes: 64 KiB arrays, about one sample per 512 KiB.
    assert by_bytes["Hot.allocateBig"] >= 64 * 1024 * by_objects["Hot.allocateBig"]
    stack = next(l for l in read(jvm_dir / "alloc.folded").splitlines() if "allocateBig" in l)
    frames = stack.rpartition(" ")[0].split(";")
    assert frames[0] == "allocator"
    assert [f.removesuffix("_[j]") for f in frames[-2:]] == ["Hot.allocate", "Hot.allocateBig"]
    assert not any("0x" in f for f in frames), "hidden classes' addresses are dropped"


# slow: the bound is the agent's (never sanitized); the daemon's side of alloc samples runs
# under the sanitizers in test_allocation_heavy_method_tops_alloc.
@pytest.mark.slow
def test_allocation_sampling_rate_is_bounded_and_estimates_stay_right(daemon, hot):
    """The allocator allocates gigabytes a second: at one sample per 512 KiB that would be
    thousands of stack walks a second. The agent samples less often and counts each sample
    for more, so samples times the interval still match the bytes the JVM counted."""
    jvm_dir = daemon.target(hot.pid) / "jvm"
    st = wait_for(lambda: (lambda s: s if "now one per" in s["alloc"] else None)(
        jvm_status(daemon, hot.pid)), 10, "the sampling rate bound")
    now, scale = re.search(r"now one per (\d+) \(at most 1000 samples/s\), each counting as "
                           r"(\d+)$", st["alloc"]).groups()
    assert int(now) == 524288 * int(scale) and int(scale) >= 2, st["alloc"]

    def sampled():
        return sum(int(l.rpartition(" ")[2]) for l in
                   read(jvm_dir / "alloc_objects.folded").splitlines()
                   if l.startswith("allocator;"))
    # Both reads lag the JVM by about the same part of a drain second, which cancels out.
    hot.send("bytes")
    s0, b0 = sampled(), int(hot.proc.stdout.readline())
    time.sleep(5)
    hot.send("bytes")
    s1, b1 = sampled(), int(hot.proc.stdout.readline())
    # Thousands of samples: the estimate's own error is a few %; 30 % covers a drain landing
    # between the two reads of one end and HotSpot's sampler overshooting by part of an object.
    assert 0.7 <= (s1 - s0) * 524288 / (b1 - b0) <= 1.3, (s1 - s0, b1 - b0)


def test_contended_block_tops_monitors(daemon, hot):
    jvm_dir = daemon.target(hot.pid) / "jvm"
    assert jvm_status(daemon, hot.pid)["monitors"] == "on"
    wait_for(lambda: read(jvm_dir / "monitors.folded"), 10, "monitor contention")
    time.sleep(1)
    stacks = read(jvm_dir / "monitors.folded").splitlines()
    by_leaf = folded_by_leaf("\n".join(stacks))
    assert max(by_leaf, key=by_leaf.get) == "Hot.contended"
    threads = {l.split(";")[0] for l in stacks if "Hot.contended" in l}
    assert threads <= {"contender-1", "contender-2", "contender-3"} and len(threads) >= 2
    # Each holds the lock ~2 ms: waiting is measured in microseconds, not events.
    assert by_leaf["Hot.contended"] > 2000


# slow: the sampling is the agent's (never sanitized); the daemon's side of monitor samples
# runs under the sanitizers in test_contended_block_tops_monitors.
@pytest.mark.slow
def test_juc_lock_waits_are_sampled_and_synchronized_stays_exact(daemon, classes):
    """Locks times its own waits for 4 s: three threads on a ReentrantLock, two on a
    synchronized block, and a Condition and a CountDownLatch waiter that wait on no lock."""
    j = Jvm(classes, "Locks").wait_ready()
    try:
        enable_and_attach(daemon, j.pid)
        st = wait_events(daemon, j.pid)
        assert st["juc"].startswith("on, sampled (approximate): every 100 ms"), st
        j.send("go")
        truth = dict(j.proc.stdout.readline().split() for _ in range(2))
        j.expect("done")
        time.sleep(2.5)  # two drains
        text = read(daemon.target(j.pid) / "jvm" / "monitors.folded")
    finally:
        j.kill()
    waited = {"juc": 0, "sync": 0}
    for line in text.splitlines():
        stack, _, us = line.rpartition(" ")
        frames = [f.removesuffix("_[j]") for f in stack.split(";")]
        kind = frames[0].split("-")[0]
        assert kind in waited, line  # nothing from the Condition's or the latch's waiter
        if kind == "juc":
            assert frames[-1] == "java.util.concurrent.locks.ReentrantLock$NonfairSync_[approx]"
            assert "Locks.jucWait" in frames and "java.util.concurrent.locks.LockSupport.park" \
                in frames, line
        else:
            assert frames[-1] == "Locks.syncWait" and "[approx]" not in line, line
        waited[kind] += int(us)
    # Sampled: each wait is over- or under-counted by less than one 100 ms look, and those
    # errors cancel out: ~120 waits of 5-120 ms put one standard deviation near
    # 100 ms * sqrt(120 / 6) = 0.45 s, about 6 % of the ~7 s waited. 20 % leaves room for
    # late looks on a loaded machine.
    assert 0.8 <= waited["juc"] / int(truth["juc"]) <= 1.2, (waited, truth)
    # Exact: the events bracket the wait, inside the program's own timing of it.
    assert 0.85 <= waited["sync"] / int(truth["sync"]) <= 1.02, (waited, truth)


def test_disable_stops_events_and_gives_back_the_solo_capability(daemon, hot):
    """The re-enabled session gets the solo allocation capability again: the first one gave it
    back (two environments can't hold it at once)."""
    jvm_dir = daemon.target(hot.pid) / "jvm"
    write(daemon.target(hot.pid) / "enable", "0")
    wait_for(lambda: jvm_status(daemon, hot.pid)["state"] == "detached", 5, "detach")
    before = read(jvm_dir / "alloc.folded")
    time.sleep(1.5)
    assert read(jvm_dir / "alloc.folded") == before
    enable_and_attach(daemon, hot.pid)
    st = wait_events(daemon, hot.pid)
    assert st["alloc"].startswith("on")
    wait_for(lambda: read(jvm_dir / "alloc.folded") != before, 10, "new allocation samples")


def test_jvm_attach_0_profiles_a_jvm_natively_and_loads_nothing_into_it(daemon, classes):
    """For a JVM where no code may be loaded: no attach (no SIGQUIT, no agent in its maps),
    native profiling as for any process, and jvm/status says why."""
    path = daemon.mnt / "config" / "jvm_attach"
    assert read(path) == "1\n"
    assert write_errno(path, "2") == errno.ERANGE
    assert "jvm_attach" in daemon.status()["last_error"]
    j = Jvm(classes, "Threads").wait_ready()
    try:
        write(path, "0")
        write(daemon.target(j.pid) / "enable", "1")
        daemon.wait_samples(j.pid, 20)
        st = jvm_status(daemon, j.pid)
        assert st["state"] == "off" and "config/jvm_attach is 0" in st["reason"], st
        assert "aperture-jvm-agent" not in read(f"/proc/{j.pid}/maps")
        assert not os.path.exists(f"/proc/{j.pid}/root/tmp/.java_pid{j.pid}")
        write(daemon.target(j.pid) / "enable", "0")
        write(path, "1")
        enable_and_attach(daemon, j.pid)
        assert "aperture-jvm-agent" in read(f"/proc/{j.pid}/maps")
    finally:
        write(path, "1")
        j.kill()


def test_alloc_interval_is_a_validated_setting(daemon):
    path = daemon.mnt / "config" / "jvm_alloc_interval_bytes"
    assert read(path) == "524288\n"
    assert write_errno(path, "12") == errno.ERANGE
    assert "jvm_alloc_interval_bytes" in daemon.status()["last_error"]
    assert read(path) == "524288\n"


SOLO_AGENT = r"""
#include <jvmti.h>
JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	static jvmtiEnv *jvmti;
	jvmtiCapabilities caps = { .can_generate_sampled_object_alloc_events = 1 };

	if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK)
		return 1;
	return (*jvmti)->AddCapabilities(jvmti, &caps) == JVMTI_ERROR_NONE ? 0 : 2;
}
"""


def test_solo_capability_held_by_another_agent(daemon, classes, scratch):
    src, lib = scratch / "solo.c", scratch / "libsolo.so"
    src.write_text(SOLO_AGENT)
    inc = "/usr/lib/jvm/java-17-openjdk-amd64/include"
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{inc}", f"-I{inc}/linux", "-o", str(lib),
                    str(src)], check=True)
    j = Jvm(classes, "Hot", f"-agentpath:{lib}").wait_ready()
    try:
        enable_and_attach(daemon, j.pid)
        st = wait_events(daemon, j.pid)
        assert st["alloc"] == ("unavailable: another JVMTI agent holds the solo capability "
                               "can_generate_sampled_object_alloc_events")
        assert st["monitors"] == "on"
        wait_for(lambda: read(daemon.target(j.pid) / "jvm" / "monitors.folded"), 10,
                 "monitor contention still collected")
    finally:
        j.kill()
