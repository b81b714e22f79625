"""Whole stacks without frame pointers: CFI unwinding of GCC -O2 code, truncation marked at
the root, inlined and demangled C++ frames, a stripped binary named from a debug directory,
and a stock Debian interpreter named from its debug package."""
import errno
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from helpers import read, user_frames, wait_for, write, write_errno

HZ = 499


@pytest.fixture(autouse=True)
def sampling(daemon):
    daemon.set_frequency(HZ)
    yield
    write(daemon.mnt / "config" / "unwind", "auto")
    write(daemon.mnt / "config" / "demangle", "1")


def profile(daemon, workloads, name, *args, samples=1000):
    """Profiles a workload until it has samples, then disables it: its final stacks, and
    its status while it was enabled."""
    return daemon.profile(workloads.start(name, *args).pid, samples)


def mostly_named(status):
    """Status reports most user frames named. Only most: the first samples of a just-started
    workload can land while the loader is still mapping libraries (many of them under ASan's
    slower daemon on a loaded machine). Each test checks its named stacks sample by sample."""
    return float(status["frames_named"].rstrip("%")) > 50


def share(stacks, predicate):
    total = sum(stacks.values())
    return sum(n for f, n in stacks.items() if predicate(user_frames(f, inlined=True))) / total


# burn() is inlined into both leaves: DWARF says so.
INNER = ("main", "outer", "middle", "inner", "burn_[i]")
LEAF = ("main", "side", "leaf", "burn_[i]")


def nofp_path(frames):
    """The workload's own frames from main down, if the stack reaches main."""
    return frames[frames.index("main"):] if "main" in frames else None


def test_gcc_without_frame_pointers_reaches_main(daemon, workloads):
    stacks, status = profile(daemon, workloads, "nofp", 60)
    assert status["unwind"] == "dwarf", "auto must pick CFI for a binary without frame pointers"
    assert mostly_named(status), status["frames_named"]
    reached = share(stacks, lambda f: nofp_path(f) is not None)
    assert reached >= 0.99, f"only {reached:.1%} of samples reach main"
    # Right nesting: every sample in the workload's functions is on one of its two paths.
    inner = share(stacks, lambda f: "inner" in f)
    leaf = share(stacks, lambda f: "leaf" in f)
    assert share(stacks, lambda f: nofp_path(f) == INNER) \
        == pytest.approx(inner, abs=0.005)
    assert share(stacks, lambda f: nofp_path(f) == LEAF) \
        == pytest.approx(leaf, abs=0.005)
    assert inner + leaf > 0.9
    assert inner / (inner + leaf) == pytest.approx(0.75, abs=0.06)
    assert not any("[truncated]" in f for f in stacks)


def test_frame_pointer_walks_do_not_reach_main_there(daemon, workloads):
    """The control: the same binary with config/unwind fp loses main, so the test above
    proves the CFI unwinder, not the workload."""
    write(daemon.mnt / "config" / "unwind", "fp")
    stacks, status = profile(daemon, workloads, "nofp", 60, samples=500)
    assert status["unwind"] == "fp"
    assert share(stacks, lambda f: nofp_path(f) is not None) < 0.5


# Above main in every whole stack of a Debian 12 program: glibc's start-up frames.
START = ("_start", "__libc_start_main", "__libc_start_call_main", "main")


def is_suffix_of_a_whole_recursion(frames):
    """frames, root first, are the leaf end of START + recurse... + inner: a stack cut short
    keeps its leafmost frames. A cut stack near the limit still holds main (it lost only
    _start, say), and that is right: it was cut."""
    frames = list(frames)
    while frames and frames[-1] in ("inner", "burn_[i]"):
        frames.pop()
    while frames and frames[-1] == "recurse":
        frames.pop()
    return tuple(frames) == START[len(START) - len(frames):] if frames else True


def test_deep_recursion_is_marked_truncated(daemon, workloads):
    """Nearly all the time is spent 300 calls deep, past the 127 frames kept: those stacks
    say so at their root, and what they show is right. Samples caught on the way down or
    up at a shallower depth are whole, or, within a few calls of the limit, cut and marked:
    which of them a run catches is chance, so each is checked for what it is."""
    stacks, _ = profile(daemon, workloads, "nofp", 60, 300, samples=500)
    cut = {f: n for f, n in stacks.items() if user_frames(f)[0] == "[truncated]"}
    assert sum(cut.values()) > 0.9 * sum(stacks.values())
    for frames in cut:
        assert len(user_frames(frames)) >= 128, f"cut short of the limit: {frames}"
        assert "_start" not in frames, f"marked but whole: {frames}"
        assert is_suffix_of_a_whole_recursion(user_frames(frames)[1:]), frames
    for frames in set(stacks) - set(cut):
        # Whole: rooted at the entry point. The loader's and libc's start-up stacks, caught
        # before main, are whole too.
        assert user_frames(frames)[:1] == ("_start",), \
            f"neither whole nor marked truncated: {frames}"


@pytest.mark.parametrize("extra", [0, 1])
def test_truncation_marker_at_the_exact_depth_limit(daemon, workloads, extra):
    """A stack of exactly 127 addresses is whole, unmarked; one more and the walk keeps the
    127 leafmost, marked, and main is among them (only _start is lost). The issue's flaky
    failure was the second kind, caught on the way down a deeper recursion."""
    depth = 127 - len(START) - 1 + extra  # 4 start-up frames, 122 recurse, inner
    stacks, _ = profile(daemon, workloads, "nofp", 60, depth, samples=200)
    full = (*START[extra:], *["recurse"] * depth, "inner", "burn_[i]")
    want = ("[truncated]", *full) if extra else full
    assert share(stacks, lambda f: f == want) > 0.9, \
        sorted(stacks.items(), key=lambda kv: -kv[1])[:2]


def roots_of_main(stacks):
    """Samples by the frames above main, for the stacks that reach it."""
    roots = {}
    for frames, n in stacks.items():
        user = user_frames(frames)
        if "main" in user:
            root = user[:user.index("main")]
            roots[root] = roots.get(root, 0) + n
    return roots


def test_auto_fp_verdict_roots_each_call_path_once(daemon, workloads):
    """cpu_split keeps frame pointers: auto judges its first 128 samples from CFI, then hands
    it to the kernel's walk, which ends at __libc_start_call_main (glibc's start-up has no
    frame pointers). The judged samples wait for the verdict and go in as that walk would
    have seen them: one root for main, and not one sample lost."""
    daemon.set_frequency(997)
    pid = workloads.start("cpu_split", 30).pid
    write(daemon.target(pid) / "enable", "1")
    wait_for(lambda: daemon.status(pid)["unwind"] == "fp", 20, "auto to choose fp")
    # The held samples went in with the verdict.
    at_verdict = daemon.samples(pid)
    assert at_verdict >= 128
    daemon.wait_samples(pid, at_verdict + 300)
    write(daemon.target(pid) / "enable", "0")
    total = daemon.final_samples(pid)
    stacks = daemon.folded(pid)
    assert sum(stacks.values()) == total
    roots = roots_of_main(stacks)
    assert list(roots) == [("__libc_start_call_main",)], roots
    assert sum(roots.values()) > 0.9 * total


def test_auto_held_samples_count_in_the_second_they_were_taken(daemon, workloads):
    """At 49 Hz the verdict comes at the drain two seconds after the first held sample, short
    of 128: held until then, the samples still go in at their own seconds, so the last
    second's window holds only that second's, not all of them."""
    daemon.set_frequency(49)
    pid = workloads.start("cpu_split", 30).pid
    write(daemon.target(pid) / "enable", "1")
    try:
        wait_for(lambda: daemon.status(pid)["unwind"] == "fp", 20, "auto to choose fp")
        write(daemon.target(pid) / "window", "1")
        recent = sum(daemon.folded(pid).values())
        total = daemon.samples(pid)
    finally:
        write(daemon.target(pid) / "window", "0")
        write(daemon.target(pid) / "enable", "0")
    assert total >= 20
    assert 0 < recent < total, (recent, total)


def kernel_samples(daemon):
    """Samples the kernel took of enabled targets, daemon-wide."""
    text = read(daemon.mnt / "metrics")
    return int(re.search(r"^aperture_cpu_samples_total (\d+)$", text, re.M).group(1))


def test_auto_disable_before_the_verdict_loses_nothing(daemon, workloads):
    """At 49 Hz, 20 samples come in well under a second, short of the 128 judged: they wait
    for a verdict that does not come, out of the profile, and the disable adds them as
    unwound. Every sample the kernel took is in the profile."""
    daemon.set_frequency(49)
    pid = workloads.start("cpu_split", 30).pid
    before = kernel_samples(daemon)
    write(daemon.target(pid) / "enable", "1")
    wait_for(lambda: kernel_samples(daemon) - before >= 20, 15, "20 samples")
    status = daemon.status(pid)
    write(daemon.target(pid) / "enable", "0")
    total = daemon.final_samples(pid)
    assert status["unwind"] == "dwarf" and status["samples"] == "0", status
    assert total == kernel_samples(daemon) - before >= 20
    roots = roots_of_main(daemon.folded(pid))
    assert list(roots) == [START[:3]], roots


def test_auto_dwarf_verdict_roots_at_start(daemon, workloads):
    """The other verdict: nofp stays in dwarf mode, and its judged samples go in as unwound,
    rooted at _start like every later one."""
    daemon.set_frequency(997)
    stacks, status = daemon.profile(workloads.start("nofp", 60).pid, 400)
    assert status["unwind"] == "dwarf"
    roots = roots_of_main(stacks)
    assert list(roots) == [START[:3]], roots
    assert sum(roots.values()) > 0.9 * sum(stacks.values())


def test_walks_reach_main_through_a_library_loaded_since(daemon, workloads):
    """dlopen_late burns a second in its own code, so the unwinder reads its mappings then,
    and then burns in its own code again, called back from a library it loads only now and
    that keeps no frame pointers. The sampled pc is in a module known, the return address
    into the library is not: the mappings are read again for it, and the walks reach main."""
    write(daemon.mnt / "config" / "unwind", "dwarf")
    pid = workloads.start("dlopen_late", 1, 60).pid
    write(daemon.target(pid) / "enable", "1")
    wait_for(lambda: "libcall.so" in read(f"/proc/{pid}/maps"), 15, "libcall.so to be loaded")
    daemon.wait_samples(pid, daemon.samples(pid) + 300)
    write(daemon.target(pid) / "enable", "0")
    daemon.final_samples(pid)
    stacks = daemon.folded(pid)
    late = {f: n for f, n in stacks.items() if user_frames(f)[-1:] == ("late",)}
    assert sum(late.values()) >= 200, stacks
    # Without the library's CFI, libdw's frame-pointer guess past lib_call skips main.
    assert share(late, lambda f: f == (*START, "lib_call", "late", "burn_[i]")) > 0.95, \
        sorted(late.items(), key=lambda kv: -kv[1])[:3]


def test_cpp_names_are_demangled_with_inlined_frames(daemon, workloads):
    stacks, _ = profile(daemon, workloads, "templates", 60, samples=500)
    run = "work::Engine<unsigned long>::run(unsigned long)"
    mix = "unsigned long work::mix<unsigned long>(unsigned long)_[i]"

    def inlined_in_run(f):
        return any(a.startswith(run) and b == mix for a, b in zip(f, f[1:]))
    # The loop's own instructions (counter, compare) are run's; the xorshifts are mix's.
    assert share(stacks, inlined_in_run) > 0.6
    assert share(stacks, lambda f: f[-1] == mix or f[-1].startswith(run)) > 0.97
    assert share(stacks, lambda f: "main" in f) > 0.99


def test_raw_names_when_demangling_is_off(daemon, workloads):
    write(daemon.mnt / "config" / "demangle", "0")
    assert read(daemon.mnt / "config" / "demangle") == "0\n"
    stacks, _ = profile(daemon, workloads, "templates", 60, samples=200)
    assert share(stacks, lambda f: any(x.startswith("_ZN4work6EngineImE3runEm") for x in f)) \
        > 0.8


def test_unwind_setting_is_validated(daemon):
    config = daemon.mnt / "config"
    assert read(config / "unwind") == "auto\n"
    assert write_errno(config / "unwind", "frames") == errno.EINVAL
    assert "unwind" in daemon.status()["last_error"]
    write(config / "unwind", "dwarf\n")
    assert read(config / "unwind") == "dwarf\n"
    assert write_errno(config / "demangle", "2") == errno.ERANGE


def fresh_nofp(path):
    """nofp built anew with a build id of its own: the daemon caches parsed files by build
    id, and a copy of the workload other tests ran would be named from that cache."""
    bid = secrets.token_hex(20)
    src = Path(__file__).resolve().parents[1] / "workloads"
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-fno-optimize-sibling-calls",
                    f"-Wl,--build-id=0x{bid}", "-I", str(src), "-o", str(path),
                    str(src / "nofp.c")], check=True)
    return bid


def stripped(path, debug_file=None):
    """Strips path, moving its debug info to debug_file if given."""
    if debug_file:
        debug_file.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["objcopy", "--only-keep-debug", str(path), str(debug_file)],
                       check=True)
    subprocess.run(["objcopy", "--strip-all", str(path)], check=True)
    assert "no symbols" in subprocess.run(["nm", str(path)], capture_output=True,
                                          text=True).stderr


def test_stripped_binary_named_from_debug_dirs(daemon, workloads, tmp_path):
    # The control: stripped, its debug file nowhere to be found.
    alone = tmp_path / "nofp-alone"
    fresh_nofp(alone)
    stripped(alone, tmp_path / "elsewhere" / "alone.debug")
    stacks, status = profile(daemon, workloads, str(alone), 60, samples=200)
    assert share(stacks, lambda f: "middle" in f) == 0
    assert share(stacks, lambda f: any(x.startswith("nofp-alone+0x") for x in f)) > 0.9

    binary, debug = tmp_path / "nofp-stripped", tmp_path / "debug"
    bid = fresh_nofp(binary)
    stripped(binary, debug / ".build-id" / bid[:2] / f"{bid[2:]}.debug")
    config = daemon.mnt / "config" / "debug_dirs"
    assert write_errno(config, "relative/dir") == errno.EINVAL
    assert write_errno(config, f"{tmp_path}/missing") == errno.EINVAL
    assert "missing is not a directory" in daemon.status()["last_error"]
    write(config, f"{tmp_path}:{debug}\n")
    try:
        assert read(config) == f"{tmp_path}:{debug}\n"
        stacks, status = profile(daemon, workloads, str(binary), 60, samples=500)
    finally:
        write(config, "\n")
    assert read(config) == "\n"
    assert mostly_named(status), status["frames_named"]
    assert share(stacks, lambda f: nofp_path(f) in (INNER, LEAF)) > 0.9


@pytest.mark.skipif(not Path("/usr/bin/python3.11").exists(), reason="needs python3.11")
def test_debian_python_named_from_its_debug_package(daemon, workloads):
    """python3.11 as Debian ships it: no frame pointers, no .symtab; python3.11-dbg's
    build-id file names its static functions (run_mod is not exported) and its DWARF the
    functions inlined into them (pymain_run_python into Py_RunMain, LTO). Its main
    is one `jmp Py_BytesMain` (objdump): no frame of main is ever on the stack, so
    Py_BytesMain is where "reaching main" shows, as in perf."""
    daemon.set_frequency(199)
    loop = "def f(n):\n  return n if n < 2 else f(n - 1) + f(n - 2)\nwhile True: f(20)\n"
    stacks, status = profile(daemon, workloads, "/usr/bin/python3.11", "-c", loop,
                             samples=600)
    assert status["unwind"] == "dwarf"
    assert share(stacks, lambda f: f[:4] == ("_start", "__libc_start_main",
                                            "__libc_start_call_main", "Py_BytesMain")) > 0.97
    assert share(stacks, lambda f: any(x.startswith("run_mod") for x in f)) > 0.97
    assert share(stacks, lambda f: "pymain_run_python_[i]" in f) > 0.97
    assert share(stacks, lambda f: "_PyEval_EvalFrameDefault" in f) > 0.9


def test_minidebuginfo_names_a_stripped_binary(daemon, workloads, tmp_path):
    """.gnu_debugdata, as Fedora builds it: the function symbols that .dynsym lacks, in an
    xz-compressed ELF inside the stripped binary, and nothing on disk besides."""
    binary, mini = tmp_path / "nofp-mini", tmp_path / "mini"
    fresh_nofp(binary)

    def symbols(*args):
        out = subprocess.run(["nm", *args, "--format=posix", "--defined-only", str(binary)],
                             capture_output=True, text=True, check=True).stdout
        return {line.split()[0] for line in out.splitlines()
                if not args or line.split()[1] in "Tt"}
    keep = tmp_path / "keep"
    keep.write_text("\n".join(sorted(symbols() - symbols("-D"))) + "\n")
    run = lambda *cmd: subprocess.run([str(c) for c in cmd], check=True)  # noqa: E731
    run("objcopy", "--only-keep-debug", binary, tmp_path / "debug")
    run("objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
        f"--keep-symbols={keep}", tmp_path / "debug", mini)
    run("strip", "--strip-all", "-R", ".comment", binary)
    run("xz", mini)
    run("objcopy", f"--add-section=.gnu_debugdata={mini}.xz", binary)
    assert "no symbols" in subprocess.run(["nm", str(binary)], capture_output=True,
                                          text=True).stderr
    stacks, status = profile(daemon, workloads, str(binary), 60, samples=300)
    assert mostly_named(status), status["frames_named"]
    # No DWARF in MiniDebugInfo: no inlined frames, the functions themselves are named.
    assert share(stacks, lambda f: nofp_path(f) in (INNER[:-1], LEAF[:-1])) > 0.9


def test_process_in_its_own_mount_namespace_unwinds(daemon, workloads, tmp_path):
    """A container's view: its executable sits on a tmpfs mounted only in its own mount
    namespace, so the path in its maps names nothing here. The unwinder reads the file
    through /proc/PID/map_files, as the names are read."""
    binary, hidden = tmp_path / "nofp-ns", tmp_path / "hidden"
    fresh_nofp(binary)
    hidden.mkdir()
    script = (f"mount -t tmpfs none {hidden} && cp {binary} {hidden}/nofp-ns && "
              f"exec {hidden}/nofp-ns 60")
    stacks, _ = profile(daemon, workloads, "/usr/bin/unshare", "--mount", "--propagation",
                        "private", "/bin/sh", "-c", script, samples=500)
    assert not (hidden / "nofp-ns").exists()  # really not there from here
    ours = {f: n for f, n in stacks.items() if f[0] == "nofp-ns"}
    assert sum(ours.values()) > 300
    assert share(ours, lambda f: nofp_path(f) in (INNER, LEAF)) > 0.95
