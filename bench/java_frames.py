#!/usr/bin/python3
"""Java frames in cpu.folded against a JFR recording of the same JVM over the same seconds
(async-profiler can't be fetched here: only Debian and npm are reachable). One run; needs
root, a JDK and build/aperture.

The workload is tests/workloads/java/CpuTree.java: its thread "cpu-tree" spends 3/4 of its
time in heavy() and 1/4 in light(), both in spin(). For aperture and for JFR's
jdk.ExecutionSample events of that thread: samples, the share with Java frames rooted at
Thread.run, and the heavy share; plus the daemon's CPU time per sample in this mode.

Writes bench/results/java-frames-<date>.{json,txt}."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from common import Daemon, read_text, task_cpu_s, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
APERTURE = os.environ.get("APERTURE", os.path.join(TOP, "build", "aperture"))
SECONDS = 10


def aperture_shares(folded):
    total = rooted = heavy = light = 0
    for line in folded.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = [f[:-4] if f.endswith("_[j]") else f for f in stack.split(";")]
        if frames[0] != "cpu-tree":
            continue
        n = int(n)
        total += n
        java = [f for f in frames[1:] if not f.endswith("_[k]")]
        if java and java[0] == "java.lang.Thread.run":
            rooted += n
            heavy += n * ("CpuTree.heavy" in java)
            light += n * ("CpuTree.light" in java)
    return {"samples": total, "rooted_share": rooted / total,
            "heavy_share": heavy / max(heavy + light, 1)}


def jfr_shares(path):
    text = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample", path],
                          capture_output=True, text=True, check=True).stdout
    total = rooted = heavy = light = 0
    for event in text.split("jdk.ExecutionSample")[1:]:
        if '"cpu-tree"' not in event:
            continue
        total += 1
        frames = re.findall(r"^\s+([\w.$/]+)\(", event, re.M)
        # JFR prints at most 5 frames, leaf first: the root is out of sight when deeper.
        rooted += bool(frames)
        heavy += "CpuTree.heavy" in frames
        light += "CpuTree.light" in frames
    return {"samples": total, "rooted_share": rooted / max(total, 1),
            "heavy_share": heavy / max(heavy + light, 1)}


def main():
    classes = tempfile.mkdtemp(prefix="aperture-bench-java-")
    subprocess.run(["javac", "-d", classes,
                    os.path.join(TOP, "tests", "workloads", "java", "CpuTree.java")], check=True)
    jfr = os.path.join(classes, "run.jfr")
    d = Daemon(APERTURE)
    p = subprocess.Popen(["java", "-cp", classes, "CpuTree"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(3)  # past the JIT's first compilations
        d.write_enable(p.pid)
        jvm_status = d.path("targets", str(p.pid), "jvm", "status")
        assert wait_until(lambda: "java_frames: on" in read_text(jvm_status), 20)
        with open(d.path("targets", str(p.pid), "reset"), "w") as f:
            f.write("1")
        subprocess.run(["jcmd", str(p.pid), "JFR.start", "name=bench", "settings=profile",
                        f"filename={jfr}"], check=True, capture_output=True)
        cpu0 = task_cpu_s(d.pid)
        time.sleep(SECONDS)
        subprocess.run(["jcmd", str(p.pid), "JFR.stop", "name=bench"], check=True,
                       capture_output=True)
        cpu = task_cpu_s(d.pid) - cpu0
        folded = read_text(d.path("targets", str(p.pid), "cpu.folded"))
        status = read_text(jvm_status)
        total = int(d.status(p.pid)["samples"])
    finally:
        p.kill()
        p.wait()
        d.stop()
    res = {"aperture": aperture_shares(folded), "jfr": jfr_shares(jfr),
           "daemon_cpu_us_per_sample": cpu / max(total, 1) * 1e6, "all_samples": total,
           "java_frames_status": re.search(r"java_frames: (.*)", status)[1]}
    stamp = time.strftime("%Y-%m-%dT%H%M%S", time.gmtime())
    out = os.path.join(HERE, "results", f"java-frames-{stamp}")
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=2)
    a, j = res["aperture"], res["jfr"]
    text = (f"Java frames, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{SECONDS} s of CpuTree (ground truth: heavy 75 % of cpu-tree's time)\n"
            f"aperture cpu.folded: {a['samples']} cpu-tree samples, "
            f"{a['rooted_share']:.1%} with Java frames from Thread.run, "
            f"heavy {a['heavy_share']:.1%}\n"
            f"JFR jdk.ExecutionSample (settings=profile): {j['samples']} cpu-tree samples, "
            f"{j['rooted_share']:.1%} with Java frames, heavy {j['heavy_share']:.1%}\n"
            f"daemon CPU per sample (dwarf copy, unwinding, matching): "
            f"{res['daemon_cpu_us_per_sample']:.0f} us over {total} samples\n"
            f"agent: {res['java_frames_status']}\n")
    with open(out + ".txt", "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
