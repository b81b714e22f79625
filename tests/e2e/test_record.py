"""`aperture record`: with no daemon and no mount, runs a command under the cpu collector from
its first instruction, follows its forks, writes cpu.folded, flame.svg and cpu.pprof, prints
the top functions, and exits with the command's status."""
import gzip
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

from helpers import (APERTURE, REPO, WORKLOADS, parse_folded, samples_in, user_frames,
                     wait_for)

HZ = 499


def record(*args, cwd=None, timeout=60):
    return subprocess.run([str(APERTURE), "record", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def folded(out):
    return parse_folded((out / "cpu.folded").read_text())


def parse_top(stderr):
    """The top rows record prints: {function: (self%, total%)}."""
    rows = {}
    for line in stderr.splitlines():
        fields = line.split(None, 4)
        if len(fields) == 5 and fields[2].isdigit() and fields[3].isdigit():
            rows[fields[4]] = (float(fields[0]), float(fields[1]))
    return rows


def test_records_cpu_split_from_its_first_instruction(tmp_path):
    out = tmp_path / "out"
    r = record("-F", HZ, "-o", out, "--", WORKLOADS / "cpu_split", 3)
    assert r.returncode == 0, r.stderr
    stacks = folded(out)
    total = sum(stacks.values())
    # 3 s of one busy thread; the machine is shared, so only a loose floor.
    assert 0.1 * 3 * HZ <= total <= 1.1 * 3 * HZ, f"{total} samples"
    in_b = samples_in(stacks, lambda f: "b" in user_frames(f))
    in_c = samples_in(stacks, lambda f: "c" in user_frames(f))
    assert in_b + in_c >= 0.95 * total, stacks
    share = 100 * in_b / (in_b + in_c)
    assert 65 <= share <= 75, f"b's share of b+c is {share:.1f} %, expected 70 +- 5"
    # Every sample is cpu_split's own, named from the exec'd binary: nothing of the held
    # child before exec beyond a few samples of the exec itself (more under ASan, whose
    # instrumented child takes longer to get there).
    assert samples_in(stacks, lambda f: f[0] == "cpu_split") >= 0.99 * total
    assert f"{total} samples at {HZ} Hz" in r.stderr, r.stderr
    top = parse_top(r.stderr)
    assert abs(top["b"][1] - 100 * in_b / total) < 0.01 and top["main"][1] > 95, top
    # The other two files hold the same samples: the pprof decoded by protoc against the
    # published field numbers, the SVG parsed as XML.
    assert pprof_total(out / "cpu.pprof") == total
    svg = (out / "flame.svg").read_text()
    ET.fromstring(svg)
    assert "cpu_split" in svg and re.search(r">b \(\d+ samples", svg), "b in the flame graph"


def pprof_total(path):
    """The sum of each sample's first value (samples), decoded by protoc."""
    text = subprocess.run(["protoc", "--decode=perftools.profiles.Profile",
                           "-I", str(REPO / "views"), "profile.proto"],
                          input=gzip.decompress(path.read_bytes()), capture_output=True,
                          check=True).stdout.decode()
    total, in_sample, first = 0, False, False
    for line in text.splitlines():
        if line == "sample {":
            in_sample, first = True, True
        elif line == "}":
            in_sample = False
        elif in_sample and first and line.strip().startswith("value:"):
            total += int(line.split(":")[1])
            first = False
    return total


def test_follows_forked_children(tmp_path):
    out = tmp_path / "out"
    r = record("-F", HZ, "-o", out, "--", WORKLOADS / "forks", 2, 7)
    assert r.returncode == 7, r.stderr
    stacks = folded(out)
    # Each process's samples match the CPU time it says it used (the command's stdout is
    # its own: record writes only to stderr).
    cpu = dict(line.split() for line in r.stdout.splitlines())
    for comm, fn, key in (("forks-child", "child_work", "child_cpu_s"),
                          ("forks", "parent_work", "parent_cpu_s")):
        n = samples_in(stacks, lambda f: f[0] == comm and fn in f)
        expected = float(cpu[key])
        assert abs(n - expected * HZ) <= 0.15 * expected * HZ + 10, (comm, n, expected, stacks)
        assert expected > 0.1, f"{comm} had too little CPU to tell: {expected} s"
    assert samples_in(stacks, lambda f: f[0] == "forks-child" and "parent_work" in f) == 0


def test_follows_exec_in_a_forked_child(tmp_path):
    """sh forks a child that execs cpu_other: its frames are named from the new binary."""
    out = tmp_path / "out"
    r = record("-F", HZ, "-o", out, "--", "sh", "-c",
               f"{WORKLOADS / 'cpu_other'} 1; exit 3")
    assert r.returncode == 3, r.stderr
    stacks = folded(out)
    other = samples_in(stacks, lambda f: f[0] == "cpu_other" and
                       user_frames(f)[-2:] == ("other_outer", "other_inner"))
    assert other >= 0.1 * HZ and other >= 0.95 * sum(stacks.values()), stacks


def from_libc_to_main(user):
    """Whether libc's start calls main: the root of a frame-pointer walk, or the middle of
    one unwound from CFI (_start;__libc_start_main;__libc_start_call_main;main)."""
    return "main" in user and user[:user.index("main")][-1:] == ("__libc_start_call_main",)


def test_names_short_lived_children(tmp_path):
    """Ten cpu_splits of 0.1 s each, run one after the other by sh: each exits long before
    a 250 ms drain could read its mappings, so they are read when the kernel reports its
    exec. Every frame of their samples is named, libc's included."""
    out = tmp_path / "out"
    loop = f"for i in 1 2 3 4 5 6 7 8 9 10; do {WORKLOADS / 'cpu_split'} 0.1; done"
    r = record("-F", 999, "-o", out, "--", "sh", "-c", loop)
    assert r.returncode == 0, r.stderr
    stacks = folded(out)
    split = samples_in(stacks, lambda f: f[0] == "cpu_split")
    named = samples_in(stacks, lambda f: f[0] == "cpu_split" and "[unknown]" not in f and
                       from_libc_to_main(user_frames(f)))
    assert split >= 0.1 * 999, stacks
    # A sample taken inside exec itself still has the old program's user stack: allow a few.
    assert named >= 0.95 * split - 3, f"{named} of {split} named: {stacks}"


def test_exit_status_and_signals_pass_through(tmp_path):
    assert record("-o", tmp_path / "a", "sh", "-c", "exit 42").returncode == 42
    assert record("-o", tmp_path / "b", "sh", "-c", "kill -KILL $$").returncode == 128 + 9
    # SIGTERM to aperture reaches the command; the profile is written all the same.
    proc = subprocess.Popen([str(APERTURE), "record", "-F", str(HZ), "-o", str(tmp_path / "c"),
                             str(WORKLOADS / "cpu_split")], stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(
        open(f"/proc/{p}/comm").read().strip() == "cpu_split" for p in children(proc.pid)),
        10, "cpu_split to run under record")
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=20)[1]
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert sum(folded(tmp_path / "c").values()) > 0.2 * HZ


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except OSError:
        return []


def test_default_directory(tmp_path):
    r = record("-F", HZ, WORKLOADS / "cpu_split", 0.5, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    made = [p for p in tmp_path.iterdir() if p.name.startswith("aperture-cpu_split-")]
    assert len(made) == 1, list(tmp_path.iterdir())
    assert sorted(p.name for p in made[0].iterdir()) == ["cpu.folded", "cpu.pprof", "flame.svg"]
    assert sum(folded(made[0]).values()) > 0


def test_bad_usage_fails_clearly(tmp_path):
    cases = [
        (["-F", "0", "true"], 125, "-F 0: the frequency is a whole number of Hz"),
        (["-F", "10001", "true"], 125, "from 1 to 10000"),
        (["-F"], 125, "-F needs a value"),
        (["-x", "true"], 125, "unknown option -x"),
        ([], 125, "no command given"),
        (["-o", "/etc/passwd", "true"], 125, "/etc/passwd: Not a directory"),
        (["-o", tmp_path / "nf", "/nonexistent/cmd"], 127, "/nonexistent/cmd: No such file"),
        (["-o", tmp_path / "nx", "/etc/passwd"], 126, "/etc/passwd: Permission denied"),
    ]
    for args, rc, message in cases:
        r = record(*args)
        assert r.returncode == rc and message in r.stderr, (args, r.returncode, r.stderr)
    # A command that never ran leaves no output directory behind.
    assert not (tmp_path / "nf").exists() and not (tmp_path / "nx").exists()
    assert not os.listdir(tmp_path)
