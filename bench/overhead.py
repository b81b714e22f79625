"""Part 1: slowdown of a CPU-bound workload under aperture, `perf record -g` and BCC's
profile at the same rate.

Every profiler attaches by PID to a workload blocked at its gate, so attach time is not
slowdown. Runs are paired, baseline and profiled, in ABBA order (the order flips every
round), and the configurations take turns round by round, so a drift of the machine's speed
lands on all of them alike. The figure is the median over pairs of profiled / baseline."""
import os
import signal
import subprocess
import time

from common import Gated, bpf_prog_stats, folded_stats, holds_perf_events, median, read_text, \
    set_bpf_stats, task_cpu_s, wait_until

SETTLE_S = 0.3  # after attach, before release: the profiler finishes its set-up


def reap(proc, timeout):
    """Waits for proc and returns its user+sys (rusage): what the profiler spent in all."""
    end = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = status
            return ru.ru_utime + ru.ru_stime
        if time.monotonic() > end:
            proc.kill()
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = status
            return ru.ru_utime + ru.ru_stime
        time.sleep(0.01)


class Aperture:
    """The daemon runs all along; attach is the write of 1 to enable."""

    def __init__(self, daemon, hz):
        self.d, self.hz = daemon, hz
        self.name = f"aperture {hz} Hz"

    def attach(self, pid, tmp):
        self.pid = pid
        self.d.set_hz(self.hz)
        self.cpu0 = self.d.cpu_s()
        return self.d.write_enable(pid)

    def begin(self):
        self.cpu_b, self.samples_b = self.d.cpu_s(), self.d.samples()

    def end(self):
        self.cpu_e, self.samples_e = self.d.cpu_s(), self.d.samples()

    def finish(self):
        # The daemon drains the kernel maps once a second: wait for the last drain, then
        # read the profile once, as a user would; that render is part of its total.
        time.sleep(1.2)
        lines, counted = folded_stats(read_text(self.d.path("targets", str(self.pid),
                                                            "cpu.folded")))
        cpu_total = self.d.cpu_s() - self.cpu0
        # With no target left the daemon closes its perf events; the next baseline run must
        # not pay for idle sampling.
        idle = wait_until(lambda: self.d.status().get("cpu") != "sampling", 5, 0.05)
        return {"samples": self.samples_e - self.samples_b, "samples_in_profile": counted,
                "stacks": lines, "cpu_steady": self.cpu_e - self.cpu_b, "cpu_total": cpu_total,
                "went_idle": idle}


class External:
    """A profiler process started for each run and attached with -p PID."""

    def attach(self, pid, tmp):
        self.out = os.path.join(tmp, "profiler.out")
        t0 = time.monotonic()
        with open(self.out, "w") as out, open(self.out + ".err", "w") as err:
            self.proc = subprocess.Popen(self.argv(pid, tmp), stdout=out, stderr=err,
                                         start_new_session=True)
        if not wait_until(lambda: holds_perf_events(self.proc.pid) != 0, 60):
            self.proc.kill()
            raise RuntimeError(f"{self.name} did not attach: {read_text(self.out + '.err')}")
        return time.monotonic() - t0

    def begin(self):
        self.cpu_b = task_cpu_s(self.proc.pid)

    def end(self):
        self.cpu_e = task_cpu_s(self.proc.pid)


class Perf(External):
    def __init__(self, hz):
        self.hz = hz
        self.name = f"perf -g {hz} Hz"

    def argv(self, pid, tmp):
        self.data = os.path.join(tmp, "perf.data")
        # -e cpu-clock: the same event as the other two, named (with no hardware PMU perf's
        # default falls back to cpu-clock:ppp).
        return ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-F", str(self.hz),
                "-p", str(pid), "-o", self.data]

    def finish(self):
        # perf record -p ends by itself when its target exits: it has written perf.data.
        cpu_total = reap(self.proc, 30)
        stats = subprocess.run(["perf", "report", "-i", self.data, "--stats"],
                               capture_output=True, text=True).stdout
        samples = next((int(l.split()[2]) for l in stats.splitlines()
                        if l.strip().startswith("SAMPLE events:")), 0)
        return {"samples": samples, "cpu_steady": self.cpu_e - self.cpu_b,
                "cpu_total": cpu_total, "data_bytes": os.path.getsize(self.data)}


class Bcc(External):
    def __init__(self, hz):
        self.hz = hz
        self.name = f"bcc profile {hz} Hz"

    def argv(self, pid, tmp):
        return ["profile-bpfcc", "-F", str(self.hz), "-p", str(pid), "-f"]

    def finish(self):
        # It aggregates in the kernel until told to stop, then symbolizes and prints.
        self.proc.send_signal(signal.SIGINT)
        cpu_total = reap(self.proc, 60)
        lines, counted = folded_stats(read_text(self.out))
        return {"samples": counted, "stacks": lines, "cpu_steady": self.cpu_e - self.cpu_b,
                "cpu_total": cpu_total}


def run_once(workload, profiler, tmp, tag):
    w = Gated(workload, tmp, tag)
    rec = {}
    try:
        if profiler:
            rec["attach_s"] = profiler.attach(w.pid, tmp)
            time.sleep(SETTLE_S)
            profiler.begin()
        w.release()
        rec.update(w.finish())
    except BaseException:
        w.proc.kill()
        raise
    if profiler:
        profiler.end()
        rec.update(profiler.finish())
    return rec


def summarize(name, hz, pairs):
    base = [b for b, _ in pairs]
    prof = [p for _, p in pairs]
    ratios = [p["wall"] / b["wall"] for b, p in pairs]
    out = {
        "profiler": name, "hz": hz, "pairs": len(pairs),
        "base_wall_s": median([b["wall"] for b in base]),
        "prof_wall_s": median([p["wall"] for p in prof]),
        "wall_ratio": median(ratios), "wall_ratio_min": min(ratios), "wall_ratio_max": max(ratios),
        "cpu_ratio": median([p["self_cpu"] / b["self_cpu"] for b, p in pairs]),
        "ratios": [round(r, 4) for r in ratios],
        "attach_s": median([p["attach_s"] for p in prof]),
        "samples": median([p["samples"] for p in prof]),
        "prof_cpu_steady_s": median([p["cpu_steady"] for p in prof]),
        "prof_cpu_total_s": median([p["cpu_total"] for p in prof]),
    }
    if any(p.get("went_idle") is False for p in prof):
        out["warning"] = "daemon kept sampling after its target exited"
    # A profiler that silently sampled less would look cheap: check against the rate asked.
    if out["samples"] < 0.8 * hz * out["prof_wall_s"]:
        out["warning"] = f"only {out['samples']:.0f} samples, expected ~{hz * out['prof_wall_s']:.0f}"
    return out


def run(daemon, spin, rounds, runs, rates, tmp, log):
    """Returns (summaries, raw records). `runs` pairs per configuration."""
    workload = [spin, str(rounds)]
    configs = []
    for hz in rates:
        configs += [Aperture(daemon, hz), Perf(hz), Bcc(hz)]
    pairs = {c.name: [] for c in configs}
    raw = []
    for i in range(runs):
        for c in configs:
            order = (None, c) if i % 2 == 0 else (c, None)
            recs = {}
            for j, p in enumerate(order):
                recs[p is not None] = run_once(workload, p, tmp, f"{i}-{j}")
            pairs[c.name].append((recs[False], recs[True]))
            raw.append({"profiler": c.name, "round": i, "base": recs[False], "prof": recs[True]})
            log(f"  round {i + 1}/{runs} {c.name:20s} ratio "
                f"{recs[True]['wall'] / recs[False]['wall']:.4f}")
    return [summarize(c.name, c.hz, pairs[c.name]) for c in configs], raw


def kernel_cost(daemon, spin, rates, seconds, reps, tmp, log):
    """In-kernel cost of aperture's and BCC's sampling programs, from the kernel's own BPF
    run-time statistics: too small a slowdown to see through a shared machine's noise, but
    exact. Both are attached to the same busy `spin` at once, so both programs run under the
    same conditions (load, caches) and their ratio is steady even when the machine is not.
    Normalized by the target's CPU time: at a fixed rate per CPU, target samples are
    hz x target CPU seconds (aperture's own count agrees). The totals include the programs'
    quick exits on ticks of other processes, which both pay alike. Medians of `reps`."""
    was_on = set_bpf_stats(True)
    runs = {}
    try:
        for _ in range(reps):
            for hz in rates:
                for name, r in bpf_time(daemon, spin, hz, seconds, tmp).items():
                    runs.setdefault((name, hz), []).append(r)
    finally:
        set_bpf_stats(was_on)
    rows = []
    for (name, hz), rs in runs.items():
        rows.append({"profiler": name, "hz": hz, "reps": len(rs),
                     "runs": median([r["runs"] for r in rs]),
                     "ns_per_run": median([r["ns"] / r["runs"] for r in rs]),
                     "ns_per_target_sample": median([r["ns"] / (hz * r["cpu"]) for r in rs]),
                     "target_cpu_pct": median([100 * r["ns"] / 1e9 / r["cpu"] for r in rs])})
        if name.startswith("bcc"):
            ap = runs[(f"aperture {hz} Hz", hz)]
            rows[-2]["vs_bcc"] = median([a["ns"] / b["ns"] for a, b in zip(ap, rs)])
        log(f"  {name:20s} {rows[-1]['ns_per_target_sample']:.0f} ns per target sample")
    return rows


def bpf_time(daemon, spin, hz, seconds, tmp):
    """BPF program runs and nanoseconds of aperture and BCC, and the target's CPU seconds,
    over `seconds` of one busy target both profile at once."""
    w = subprocess.Popen([spin], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ap, bcc = Aperture(daemon, hz), Bcc(hz)
    try:
        ap.attach(w.pid, tmp)
        bcc.attach(w.pid, tmp)
        holders = {ap.name: daemon.pid, bcc.name: bcc.proc.pid}
        time.sleep(1)
        before, c0 = {n: bpf_prog_stats(p) for n, p in holders.items()}, task_cpu_s(w.pid)
        time.sleep(seconds)
        after, c1 = {n: bpf_prog_stats(p) for n, p in holders.items()}, task_cpu_s(w.pid)
    finally:
        w.kill()
        w.wait()
        if hasattr(bcc, "proc"):
            bcc.proc.kill()
            reap(bcc.proc, 10)
    return {n: {"runs": max(after[n][0] - before[n][0], 1), "ns": after[n][1] - before[n][1],
                "cpu": max(c1 - c0, 1e-9)} for n in holders}
