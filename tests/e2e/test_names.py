"""Names as good as perf's, on real programs built here: `config/unwind auto` gives a Rust
release binary whole stacks, V8's perf map names JIT code, a BPF program loaded after the
daemon started is named after itself, a sample in a PLT stub reads memcpy@plt with its
callers, glibc's names carry no symbol version, and Go's inlined functions are frames."""
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import (APERTURE, REPO, WORKLOADS, parse_folded, read, user_frames, wait_for,
                     write)

HZ = 499
SRC = REPO / "tests" / "workloads"


@pytest.fixture(autouse=True)
def sampling(daemon):
    daemon.set_frequency(HZ)
    write(daemon.mnt / "config" / "unwind", "auto")


def share(stacks, predicate):
    return sum(n for f, n in stacks.items() if predicate(f)) / sum(stacks.values())


@pytest.fixture(scope="module")
def rust_split(scratch):
    """tests/workloads/rust built as cargo builds a release: no frame pointers in the crate's
    own code, whatever its precompiled std has."""
    if not shutil.which("cargo"):
        pytest.skip("cargo is not installed (deploy/setup.sh installs it)")
    src = scratch / "rust"
    shutil.copytree(SRC / "rust", src)
    subprocess.run(["cargo", "build", "--release", "--offline", "--quiet"], cwd=src,
                   check=True, timeout=120)
    return src / "target" / "release" / "rust_split"


def rust_path(frames):
    """The workload's own frames from its main down, if the stack reaches it."""
    user = user_frames(frames)
    return user[user.index("rust_split::main"):] if "rust_split::main" in user else None


def test_unwind_auto_gives_a_rust_release_binary_whole_stacks(daemon, workloads, rust_split):
    pid = workloads.start(rust_split, 30).pid
    stacks, status = daemon.profile(pid, 1000)
    assert status["unwind"] == "dwarf", \
        "frame-pointer walks break in the crate's code: auto must have chosen CFI"
    assert share(stacks, lambda f: rust_path(f) is not None) >= 0.99
    # The known split: heavy() calls spin() for 3 times as many rounds as light().
    heavy = share(stacks, lambda f: (rust_path(f) or ())[1:4] ==
                  ("rust_split::work", "rust_split::heavy", "rust_split::spin"))
    light = share(stacks, lambda f: (rust_path(f) or ())[1:4] ==
                  ("rust_split::work", "rust_split::light", "rust_split::spin"))
    assert heavy + light > 0.9, [rust_path(f) for f in stacks][:4]
    assert 0.65 < heavy / (heavy + light) < 0.85, (heavy, light)


def test_unwind_auto_keeps_frame_pointers_where_they_are_whole(daemon, workloads):
    """The control: a program whose time is in code with frame pointers stays on the cheap
    walk."""
    pid = workloads.start("cpu_split", 30).pid
    write(daemon.target(pid) / "enable", "1")
    wait_for(lambda: daemon.status(pid)["unwind"] == "fp", 20, "auto to choose fp")
    write(daemon.target(pid) / "enable", "0")


def test_record_takes_unwind(tmp_path, rust_split):
    def reaches_main(mode):
        out = tmp_path / mode
        r = subprocess.run([str(APERTURE), "record", "-F", str(HZ), "--unwind", mode, "-o",
                            str(out), "--", str(rust_split), "1.5"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return share(parse_folded((out / "cpu.folded").read_text()),
                     lambda f: rust_path(f) is not None)

    assert reaches_main("fp") < 0.5
    assert reaches_main("dwarf") > 0.95
    r = subprocess.run([str(APERTURE), "record", "--unwind", "orc", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 125 and "--unwind orc: fp, dwarf or auto" in r.stderr


def child_of(pid):
    return wait_for(lambda: read(f"/proc/{pid}/task/{pid}/children").split(), 10,
                    f"{pid}'s child")[0]


def test_perf_map_names_jit_code_in_the_targets_namespace(daemon, workloads):
    """node in pid and mount namespaces of its own, with a /tmp only it sees: V8 writes
    /tmp/perf-1.map there, 1 being node's pid in its namespace."""
    if not shutil.which("node"):
        pytest.skip("node is not installed (deploy/setup.sh installs it)")
    # The script is opened before the mount: the checkout may itself be under /tmp.
    script = (f"exec 3< {SRC / 'node' / 'hot.js'} && mount -t tmpfs none /tmp && cd /tmp && "
              f"exec node --perf-basic-prof - 30 <&3 3<&-")
    unshare = workloads.start("/usr/bin/unshare", "--pid", "--fork", "--kill-child",
                              "--mount", "--mount-proc", "--propagation", "private", "sh",
                              "-c", script)
    pid = int(child_of(unshare.pid))
    wait_for(lambda: read(f"/proc/{pid}/comm").strip() == "node", 10, "node to start")
    assert not Path(f"/tmp/perf-{pid}.map").exists() and not Path("/tmp/perf-1.map").exists()
    # Profiled from when V8 has compiled the hot function: before, node is still starting up.
    jit_map = Path(f"/proc/{pid}/root/tmp/perf-1.map")
    wait_for(lambda: jit_map.exists() and "hotPrimeCount" in jit_map.read_text(), 20,
             "V8 to compile hotPrimeCount")
    stacks, status = daemon.profile(pid, 500)
    hot = share(stacks, lambda f: any("hotPrimeCount" in x and x.endswith("_[j]")
                                      for x in f))
    assert hot > 0.5, sorted(stacks.items(), key=lambda kv: -kv[1])[:5]
    assert float(status["frames_named"].rstrip("%")) > 90


def test_bpf_program_loaded_after_start_is_named(daemon, workloads):
    """bpf_late loads a raw tracepoint program now, long after the daemon read kallsyms,
    and spends most of its time in it; its frames must carry its own name, not that of an
    older program or symbol nearby."""
    proc = subprocess.Popen([str(WORKLOADS / "bpf_late"), "30"], stdout=subprocess.PIPE,
                            text=True)
    workloads.procs.append(proc)
    name = proc.stdout.readline().strip()
    assert name.startswith("bpf_prog_") and name.endswith("_late_burn")
    stacks, _ = daemon.profile(proc.pid, 300)
    ours = share(stacks, lambda f: f"{name}_[k]" in f)
    assert ours > 0.5, [(";".join(f), n) for f, n in sorted(stacks.items(), key=lambda kv: -kv[1])[:3]]


def test_plt_stub_keeps_its_stack_and_names(daemon, workloads):
    pid = workloads.start("plt_calls", 30).pid
    stacks, status = daemon.profile(pid, 1000)
    # memcpy runs in libc, which has no frame pointers: whole stacks need CFI.
    assert status["unwind"] == "dwarf"
    in_plt = {f: n for f, n in stacks.items() if user_frames(f)[-1:] == ("memcpy@plt",)}
    assert sum(in_plt.values()) >= 5, "expected samples in the stub"
    for frames in in_plt:
        assert user_frames(frames)[-3:] == ("main", "copy_loop", "memcpy@plt"), frames
    # glibc's names without their symbol versions.
    assert share(stacks, lambda f: "__libc_start_main" in f) > 0.95
    assert not [x for f in stacks for x in f if "@GLIBC" in x]


@pytest.fixture(scope="module")
def go_inline(scratch):
    if not shutil.which("go"):
        pytest.skip("go is not installed (deploy/setup.sh installs golang-go)")
    out = scratch / "go"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "GOCACHE": str(out / "cache"),
           "GOPATH": str(out / "gopath"), "GO111MODULE": "off"}
    subprocess.run(["go", "build", "-o", str(out / "inline"), str(SRC / "go" / "inline.go")],
                   env=env, check=True, timeout=120)
    return out / "inline"


def test_go_inlined_functions_are_frames_and_stacks_whole(daemon, workloads, go_inline):
    pid = workloads.start(go_inline, 30).pid
    stacks, _ = daemon.profile(pid, 500)
    inlined = share(stacks, lambda f: user_frames(f, inlined=True)[-2:] ==
                    ("main.work", "main.less_[i]"))
    assert inlined > 0.4, sorted(stacks.items(), key=lambda kv: -kv[1])[:3]
    # work() keeps no frame pointer of its own (a leaf): a frame-pointer walk from it skips
    # main.main, which auto must notice.
    assert share(stacks, lambda f: "main.main" in f) > 0.95
