"""Part 3: time to `cat cpu.folded` and `cat cpu.top` of a profile with >= 10,000 distinct
stacks, from a real workload (bench/workloads/gen_paths.py: 2**14 call paths).

The workload is sampled at a high rate until cpu.folded has enough lines, then stopped
(SIGSTOP) so every cat renders the same profile. Each cat is a fresh process, timed from
spawn to exit, as a user's shell would see it; a cat of a regular file of the same size is the
floor no view can beat. The peer figure is perf's own way from its recording of the same
workload, for the same time at the same rate, to the same two outputs: `perf script report
stackcollapse` (folded) and `perf report --children --sort symbol` (a top table)."""
import os
import signal
import subprocess
import time

from common import Daemon, Gated, folded_stats, holds_perf_events, median, read_text, \
    wait_until

HZ = 4999


def time_cmd(argv, n):
    """Wall seconds of n runs of argv, output to /dev/null."""
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.monotonic() - t0)
    return times


def stats(times):
    return {"median_ms": 1e3 * median(times), "max_ms": 1e3 * max(times), "n": len(times)}


def aperture_side(binary, paths, want_stacks, cats, tmp, log):
    d = Daemon(binary)
    w = subprocess.Popen([paths], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        d.set_hz(HZ)
        d.write_enable(w.pid)
        folded = d.path("targets", str(w.pid), "cpu.folded")
        t0 = time.monotonic()
        lines = 0
        while lines < want_stacks and time.monotonic() - t0 < 90:
            time.sleep(1)
            lines = folded_stats(read_text(folded))[0]
        sampled_s = time.monotonic() - t0
        w.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # the last drain
        text = read_text(folded)
        lines, samples = folded_stats(text)
        out = {"sampled_s": sampled_s, "stacks": lines, "samples": samples,
               "folded_bytes": len(text.encode()),
               "top_bytes": len(read_text(d.path("targets", str(w.pid), "cpu.top")).encode()),
               "drops": int(d.status()["drops"])}
        log(f"  aperture: {lines} stacks, {samples} samples after {sampled_s:.1f} s")
        out["folded"] = stats(time_cmd(["cat", folded], cats))
        out["top"] = stats(time_cmd(["cat", d.path("targets", str(w.pid), "cpu.top")], cats))
        floor = os.path.join(tmp, "same-size")
        with open(floor, "w") as f:
            f.write(text)
        out["floor"] = stats(time_cmd(["cat", floor], cats))
        return out
    finally:
        w.kill()
        w.wait()
        d.stop()


def perf_side(paths, seconds, runs, tmp, log):
    """perf records `paths` for as long as aperture sampled it. The workload starts at its
    gate, after perf holds its events, as in part 1."""
    data = os.path.join(tmp, "render-perf.data")
    w = Gated([paths], tmp, "render")
    try:
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-F", str(HZ),
                                "-p", str(w.pid), "-o", data], stderr=subprocess.DEVNULL)
        wait_until(lambda: holds_perf_events(rec.pid) != 0, 30)
        time.sleep(0.3)
        w.release()
        time.sleep(seconds)
        rec.send_signal(signal.SIGINT)
        rec.wait(60)
    finally:
        w.proc.kill()
        w.proc.wait()
    folded = subprocess.run(["perf", "script", "report", "stackcollapse", "-i", data],
                            capture_output=True, text=True, check=True).stdout
    lines, samples = folded_stats(folded)
    log(f"  perf: {lines} stacks, {samples} samples in {seconds:.1f} s")
    out = {"stacks": lines, "samples": samples, "data_bytes": os.path.getsize(data)}
    out["folded"] = stats(time_cmd(["perf", "script", "report", "stackcollapse", "-i", data], runs))
    out["top"] = stats(time_cmd(["perf", "report", "-i", data, "--stdio", "--children",
                                 "--sort", "symbol", "-g", "none"], runs))
    return out


def run(binary, paths, paths_big, want_stacks, cats, perf_runs, tmp, log):
    """The target's case with its perf peer, then aperture alone at 2.5x the stacks (a
    15-level `paths`), to show how render time grows."""
    ap = aperture_side(binary, paths, want_stacks, cats, tmp, log)
    out = {"aperture": ap, "perf": perf_side(paths, ap["sampled_s"], perf_runs, tmp, log)}
    out["aperture_big"] = aperture_side(binary, paths_big, int(2.5 * want_stacks), cats, tmp, log)
    return out
