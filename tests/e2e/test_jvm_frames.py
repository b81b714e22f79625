"""Java frames in cpu.folded for a stock JVM (no -XX:+PreserveFramePointer): method names in
their real nesting, from the agent's AsyncGetCallTrace walks matched to the BPF samples by
thread and time. Ground truth: CpuTree's thread "cpu-tree" runs work(), which spends 3/4 of
its time in heavy() and 1/4 in light(), both in spin()."""
import pytest

from helpers import wait_for, write
from test_jvm import Jvm, classes, enable_and_attach, jvm_status  # noqa: F401 (fixture)

HEAVY = ["CpuTree.work", "CpuTree.heavy", "CpuTree.spin"]
LIGHT = ["CpuTree.work", "CpuTree.light", "CpuTree.spin"]


def java_names(frames):
    """A stack's frames after the thread's name, without the JIT mark."""
    return [f[:-4] if f.endswith("_[j]") else f for f in frames[1:]]


def on_path(frames, path):
    """Thread.run is the root, and path is a run of frames ending at the last Java one."""
    names = [n for n in java_names(frames) if not n.endswith("_[k]")]
    return bool(names) and names[0] == "java.lang.Thread.run" and \
        names[-len(path):] == path


def profile(daemon, j, samples=300):
    """j's stacks after its agent walks Java stacks, up to its disable."""
    enable_and_attach(daemon, j.pid)
    wait_for(lambda: jvm_status(daemon, j.pid)["java_frames"].startswith("on"), 10,
             "Java frames to be on")
    # Samples of the attach itself came before the agent could walk any stack.
    write(daemon.target(j.pid) / "reset", "1")
    daemon.wait_samples(j.pid, samples, timeout=30)
    write(daemon.target(j.pid) / "enable", "0")
    daemon.final_samples(j.pid)
    return daemon.folded(j.pid)


@pytest.fixture
def cpu_tree(classes):  # noqa: F811
    j = Jvm(classes, "CpuTree").wait_ready()
    yield j
    j.kill()


def test_hot_java_method_is_named_under_its_caller(daemon, cpu_tree):
    stacks = profile(daemon, cpu_tree)
    tree = {f: n for f, n in stacks.items() if f[0] == "cpu-tree"}
    total = sum(tree.values())
    heavy = sum(n for f, n in tree.items() if on_path(f, HEAVY))
    light = sum(n for f, n in tree.items() if on_path(f, LIGHT))
    assert total >= 200, stacks
    # Nearly every sample of the thread, the last second's before the disable included, has
    # its Java frames, rooted at Thread.run (98-99 % here; a walk the JVM refuses, as in a
    # GC, leaves one as unwound). Without the agent's walks: none.
    assert (heavy + light) / total > 0.9, sorted(tree.items(), key=lambda kv: -kv[1])[:5]
    assert heavy / (heavy + light) == pytest.approx(0.75, abs=0.06)
    # The hot methods are JIT-compiled and say so.
    assert any(f[-1] == "CpuTree.spin_[j]" for f in tree)


def test_without_the_agent_the_jit_code_is_anonymous(daemon, classes):  # noqa: F811
    """The control: the same workload with attach disabled has no Java names, so the test
    above proves the agent's walks, not the workload."""
    j = Jvm(classes, "CpuTree", "-XX:+DisableAttachMechanism").wait_ready()
    try:
        write(daemon.target(j.pid) / "enable", "1")
        daemon.wait_samples(j.pid, 100, timeout=30)
        stacks = daemon.folded(j.pid)
    finally:
        j.kill()
    tree = {f: n for f, n in stacks.items() if f[0] == "cpu-tree"}
    assert tree
    assert not any("CpuTree.spin" in x for f in tree for x in f)
    assert all(any(x.startswith("[anon]+0x") for x in f) for f in tree)


def test_jvm_in_its_own_pid_namespace_gets_java_frames(daemon, classes):  # noqa: F811
    """The agent sees its namespace's thread ids; the samples carry the host's."""
    j = Jvm(classes, "CpuTree", prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    j.wait_ready()
    try:
        stacks = profile(daemon, j, samples=200)
    finally:
        j.kill()
    tree = {f: n for f, n in stacks.items() if f[0] == "cpu-tree"}
    named = sum(n for f, n in tree.items() if on_path(f, HEAVY) or on_path(f, LIGHT))
    assert named / sum(tree.values()) > 0.9
