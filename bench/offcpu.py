#!/usr/bin/python3
"""Slowdown of a context-switch ping-pong (workloads/pingpong.c) under aperture's off-CPU
collector and under the off-CPU tracers it competes with.

    sudo bench/offcpu.py [--aperture build/aperture] [--pairs 5] [--trips 100000]

BCC's offcputime attaches a kprobe to finish_task_switch: on a kernel without kprobes (this
one) it cannot run, and the script records its error. bcc_offcpu.py is its method through
BCC on the sched_switch tracepoint (stack ids at switch-out, time summed in the kernel by
thread and stack ids), the runnable stand-in. Runs are baseline/profiled pairs in ABBA order, configurations taking
turns; the figure is the median over pairs of profiled / baseline wall time (and of the
workload's own user+sys, where in-kernel tracing cost is charged). Results go to
bench/results/offcpu-<date>.{txt,json}."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Daemon, Gated, fds_of_kind, folded_stats, median, read_text,  # noqa
                    set_bpf_stats, stop, task_cpu_s, wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))
BYSTANDER = "switches of a process that is not a target, aperture offcpu.folded"
CFLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
          "-fno-optimize-sibling-calls", "-pthread"]
class Aperture:
    name = "aperture offcpu.folded"

    def __init__(self, daemon, suffix=""):
        self.d = daemon
        self.name += suffix

    def attach(self, pid, tmp):
        self.pid = pid
        return self.d.write_enable(pid)

    def begin(self):
        self.cpu_b = self.d.cpu_s()

    def finish(self):
        cpu_run = self.d.cpu_s() - self.cpu_b
        time.sleep(1.2)  # the last drain
        lines, us = folded_stats(read_text(self.d.path("targets", str(self.pid),
                                                       "offcpu.folded")))
        wait_until(lambda: self.d.status().get("offcpu") == "idle", 5, 0.05)
        return {"prof_cpu_run": cpu_run, "stacks": lines, "offcpu_us": us}


class External:
    def attach(self, pid, tmp):
        self.out = os.path.join(tmp, "tracer.out")
        t0 = time.monotonic()
        with open(self.out, "w") as out, open(self.out + ".err", "w") as err:
            self.proc = subprocess.Popen(self.argv(pid), stdout=out, stderr=err,
                                         start_new_session=True)
        if not wait_until(lambda: self.ready() or self.proc.poll() is not None, 60):
            self.proc.kill()
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name}: {read_text(self.out + '.err')[-300:]}")
        return time.monotonic() - t0

    def begin(self):
        self.cpu_b = task_cpu_s(self.proc.pid)

    def finish(self):
        cpu_run = task_cpu_s(self.proc.pid) - self.cpu_b
        stop(self.proc, signal.SIGTERM, 60)
        return {"prof_cpu_run": cpu_run, "out_bytes": os.path.getsize(self.out)}


class BccMethod(External):
    name = "BCC, offcputime's method"
    min_us = 1

    def argv(self, pid):
        return [os.path.join(HERE, "bcc_offcpu.py"), str(pid), str(self.min_us)]

    def ready(self):
        return "attached" in read_text(self.out)


class BccMethodMin1ms(BccMethod):
    name = "BCC's method, min 1 ms"
    min_us = 1000


class ApertureMin1ms(Aperture):
    """config/offcpu_min_us 1000: waits under 1 ms are dropped in the kernel."""
    name = "aperture offcpu.folded, min 1 ms"

    def attach(self, pid, tmp):
        with open(self.d.path("config", "offcpu_min_us"), "w") as f:
            f.write("1000")
        return super().attach(pid, tmp)

    def finish(self):
        rec = super().finish()
        with open(self.d.path("config", "offcpu_min_us"), "w") as f:
            f.write("1")
        return rec


class Offcputime(External):
    name = "BCC offcputime-bpfcc -p"

    def argv(self, pid):
        return ["offcputime-bpfcc", "-f", "-p", str(pid)]

    def ready(self):
        # It prints nothing until it ends; it is attached once it holds its programs.
        return fds_of_kind(self.proc.pid, "bpf-prog") > 0


# The programs that run at sched_switch, by their names (bpftool's, from BTF): aperture's and
# bcc_offcpu.py's TRACEPOINT_PROBE.
SWITCH_PROGS = ("offcpu_switch", "tracepoint__sched__sched_switch")


def switch_prog_stats(pid):
    """(sched_switch runs, run_time_ns of all) of the tracepoint and raw_tracepoint programs
    pid holds: its sched_switch program, aperture's sched_exit_tp program where stacks are
    taken at switch-in (it runs on every switch as well: its time is part of a switch's
    cost), and exec hooks that run a few times."""
    cnt = ns = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            info = dict(l.split(":\t", 1) for l in
                        read_text(f"/proc/{pid}/fdinfo/{fd}").splitlines() if ":\t" in l)
        except OSError:
            continue
        if info.get("prog_type", "").strip() in ("5", "17") and "run_cnt" in info:
            ns += int(info["run_time_ns"])
            show = subprocess.run(["bpftool", "-j", "prog", "show", "id",
                                   info["prog_id"].strip()], capture_output=True, text=True)
            if show.returncode == 0 and json.loads(show.stdout).get("name") in SWITCH_PROGS:
                cnt += int(info["run_cnt"])
    return cnt, ns


def paired_ns(argv, a, b, tmp, reps, bystander=False):
    """Both tracers attached at once to the same runs, kernel.bpf_stats_enabled on: their
    programs run on the same switches under the same load, so the ratio of their times is
    the ratio of their costs per switch, free of the machine's drift between runs. The
    attach order alternates. bystander: both trace a sleeping process instead, so the
    ping-pong's switches are those of a process that is not a target (what every other
    process of the node pays). Returns per rep (a's ns/run, b's ns/run)."""
    out = []
    for r in range(reps):
        w = Gated(argv, tmp, f"paired-{r}")
        first, second = (a, b) if r % 2 == 0 else (b, a)
        sleeper = subprocess.Popen(["sleep", "600"]) if bystander else None
        traced = sleeper.pid if bystander else w.pid
        try:
            first.attach(traced, tmp)
            second.attach(traced, tmp)
            time.sleep(1.0)
            owners = [t.d.pid if isinstance(t, Aperture) else t.proc.pid for t in (a, b)]
            before = [switch_prog_stats(o) for o in owners]
            set_bpf_stats(True)
            w.release()
            w.finish()
        finally:
            set_bpf_stats(False)
            if w.proc.poll() is None:
                w.proc.kill()
            if sleeper:
                sleeper.kill()
                sleeper.wait()
        after = [switch_prog_stats(o) for o in owners]
        for t in (a, b):
            t.begin()
            t.finish()
        out.append(tuple((t1 - t0) / (c1 - c0) if c1 > c0 else float("nan")
                         for (c0, t0), (c1, t1) in zip(before, after)))
    return out


def run_once(argv, tracer, tmp, tag):
    w = Gated(argv, tmp, tag)
    rec = {}
    try:
        if tracer:
            rec["attach_s"] = tracer.attach(w.pid, tmp)
            time.sleep(1.0)  # the tracer finishes its set-up
            tracer.begin()
        w.release()
        rec.update(w.finish())
    except BaseException:
        w.proc.kill()
        w.proc.wait()
        raise
    if tracer:
        rec.update(tracer.finish())
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aperture", default=os.path.join(HERE, "..", "build", "aperture"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--trips", type=int, default=100000)
    ap.add_argument("--paired", type=int, default=6,
                    help="runs with both tracers attached at once, for the cost per switch")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="aperture-offcpu-bench-")
    binary = os.path.join(tmp, "pingpong")
    subprocess.run(["clang", *CFLAGS, "-I", os.path.join(HERE, "workloads"), "-o", binary,
                    os.path.join(HERE, "workloads", "pingpong.c")], check=True)
    argv = [binary, str(args.trips)]
    daemon = Daemon(os.path.abspath(args.aperture))
    # The method of kernels without sched_exit_tp (before 6.16): stacks at every switch-out.
    daemon_out = Daemon(os.path.abspath(args.aperture),
                        env={"APERTURE_OFFCPU_AT_SWITCH_OUT": "1"})
    # The off-CPU collector alone: what is measured is its cost.
    for d in (daemon, daemon_out):
        with open(d.path("config", "collectors"), "w") as f:
            f.write("offcpu")
    tracers = [Aperture(daemon), BccMethod(), ApertureMin1ms(daemon), BccMethodMin1ms(),
               Offcputime()]
    at_out = " (stacks at switch-out)"
    pairs = {t.name: [] for t in tracers}
    errors = {}
    try:
        for r in range(args.pairs):
            for k, t in enumerate(tracers):
                if t.name in errors:
                    continue
                try:
                    runs = [None, t] if r % 2 == 0 else [t, None]
                    recs = [run_once(argv, x, tmp, f"{r}-{k}-{i}") for i, x in enumerate(runs)]
                except (RuntimeError, OSError) as e:
                    errors[t.name] = str(e).strip().splitlines()[-1]
                    continue
                base, prof = recs if r % 2 == 0 else recs[::-1]
                pairs[t.name].append((base, prof))
                print(f"pair {r} {t.name}: {prof['wall'] / base['wall']:.3f}", flush=True)
        paired = {}
        for ap_t, bcc_t in ((tracers[0], tracers[1]), (tracers[2], tracers[3]),
                            (Aperture(daemon_out, at_out), tracers[1]),
                            (ApertureMin1ms(daemon_out, at_out), tracers[3])):
            if ap_t.name not in errors and bcc_t.name not in errors and args.paired:
                paired[ap_t.name] = (bcc_t.name, paired_ns(argv, ap_t, bcc_t, tmp,
                                                           args.paired))
        if tracers[0].name not in errors and tracers[1].name not in errors and args.paired:
            paired[BYSTANDER] = (tracers[1].name, paired_ns(argv, tracers[0], tracers[1], tmp,
                                                            args.paired, bystander=True))
    finally:
        daemon.stop()
        daemon_out.stop()
    rows = {}
    for name, ps in pairs.items():
        if not ps:
            continue
        wall = [p["wall"] / b["wall"] for b, p in ps]
        cpu = [p["self_cpu"] / b["self_cpu"] for b, p in ps]
        rows[name] = {"pairs": len(ps), "wall_ratio": median(wall), "wall_min": min(wall),
                      "wall_max": max(wall), "cpu_ratio": median(cpu),
                      "base_wall_s": median([b["wall"] for b, _ in ps]),
                      "prof_cpu_run_s": median([p["prof_cpu_run"] for _, p in ps]),
                      "attach_s": median([p["attach_s"] for _, p in ps])}
        if "offcpu_us" in ps[0][1]:
            rows[name]["offcpu_s_in_profile"] = median([p["offcpu_us"] / 1e6 for _, p in ps])
    lines = [f"context-switch ping-pong, {args.trips} round trips, {args.pairs} ABBA pairs, "
             f"{os.cpu_count()} CPUs, kernel {os.uname().release}",
             f"{'tracer':32} {'wall ratio (min-max)':24} {'cpu ratio':>9} {'tracer CPU':>10}"]
    for name, r in rows.items():
        lines.append(f"{name:32} {r['wall_ratio']:.3f} ({r['wall_min']:.3f}-{r['wall_max']:.3f})"
                     f"{'':5} {r['cpu_ratio']:9.3f} {r['prof_cpu_run_s']:9.2f}s")
    lines.append("wall/cpu ratio: median over pairs of traced / untraced (cpu: the workload's "
                 "own user+sys, where in-kernel tracing is charged)")
    lines.append(f"in-kernel cost per switch, both attached to the same {args.paired} runs "
                 "(kernel.bpf_stats_enabled; the mean time of each sched_switch program run, "
                 "every switch of the machine runs both):")
    for ap_name, (peer, reps) in paired.items():
        ratios = [x / y for x, y in reps]
        # the program attached first runs first on each switch and meets the cold caches
        first, second = median(ratios[0::2]), median(ratios[1::2])
        lines.append(f"  {ap_name}: {median([x for x, _ in reps]):.0f} ns, {peer}: "
                     f"{median([y for _, y in reps]):.0f} ns; aperture / BCC "
                     f"{first:.3f} attached first, {second:.3f} second, geometric mean "
                     f"{(first * second) ** 0.5:.3f}")
    for name, why in errors.items():
        lines.append(f"{name:32} could not run: {why}")
    for ap_name, peer in (("aperture offcpu.folded", "BCC, offcputime's method"),
                          ("aperture offcpu.folded, min 1 ms", "BCC's method, min 1 ms")):
        if ap_name in rows and peer in rows:
            a, b = rows[ap_name]["wall_ratio"], rows[peer]["wall_ratio"]
            lines.append(f"{ap_name}'s slowdown / {peer}'s: "
                         f"{(a - 1) / (b - 1) if b != 1 else float('nan'):.2f} "
                         f"(wall ratios {a:.3f} vs {b:.3f})")
    text = "\n".join(lines) + "\n"
    print(text)
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"offcpu-{stamp}.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(HERE, "results", f"offcpu-{stamp}.json"), "w") as f:
        json.dump({"rows": rows, "errors": errors, "trips": args.trips,
                   "paired_ns": paired}, f, indent=1)


if __name__ == "__main__":
    main()
