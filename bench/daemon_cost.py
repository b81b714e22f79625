"""Part 2: what the daemon itself costs: CPU time per 1,000 samples and peak RSS, with 1 and
with 20 targets enabled.

Each case gets a fresh daemon, so its VmHWM (peak RSS over the process's life) belongs to that
case alone. The targets are CPU-bound processes that run until killed: with 20 of them on the
cores of this machine every target is busy and sampled, which is the heaviest case for the
daemon per target. The window starts just before the enables (so it includes reading each
target's mappings and naming its stacks for the first time); `steady` leaves out the first
WARM_S seconds."""
import os
import subprocess
import time

from common import Daemon, bpf_prog_stats, kill_all, set_bpf_stats

WARM_S = 2.0


def one_case(binary, argv, ntargets, hz, window_s):
    d = Daemon(binary)
    procs = []
    try:
        d.set_hz(hz)
        hwm_idle = d.hwm_kb()
        procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(ntargets)]
        time.sleep(0.2)  # let them exec before their mappings are read at enable
        cpu0, samples0, bpf0 = d.cpu_s(), d.samples(), bpf_prog_stats(d.pid)
        enable_s = [d.write_enable(p.pid) for p in procs]
        time.sleep(WARM_S)
        cpu1, samples1 = d.cpu_s(), d.samples()
        time.sleep(window_s)
        cpu2, samples2, bpf2 = d.cpu_s(), d.samples(), bpf_prog_stats(d.pid)
        st = d.status()
        out = {
            "targets": ntargets, "hz": hz, "workload": os.path.basename(argv[0]),
            "window_s": WARM_S + window_s, "samples": samples2 - samples0,
            "cpu_s": cpu2 - cpu0,
            "cpu_ms_per_1k": 1e6 * (cpu2 - cpu0) / max(samples2 - samples0, 1),
            "steady_cpu_ms_per_1k": 1e6 * (cpu2 - cpu1) / max(samples2 - samples1, 1),
            "hwm_idle_kb": hwm_idle, "hwm_kb": d.hwm_kb(), "rss_kb": d.rss_kb(),
            "enable_s_max": max(enable_s),
            "drops": int(st.get("drops", 0)),
            "bpf_runs": bpf2[0] - bpf0[0],
            "bpf_ns_per_run": (bpf2[1] - bpf0[1]) / max(bpf2[0] - bpf0[0], 1),
        }
        # The kernel side of the same work: BPF time per 1,000 target samples (the program
        # also runs, and returns at once, on ticks of processes that are not targets).
        out["bpf_ms_per_1k"] = 1e-6 * (bpf2[1] - bpf0[1]) / max(out["samples"], 1) * 1000
        return out
    finally:
        kill_all(procs)
        d.stop()


def run(binary, spin, paths, window_s, log):
    """Cases: 1 and 20 spin targets at 99 and 999 Hz, and 1 target of the many-stacks
    workload at 999 Hz (every drain brings stacks never named before)."""
    cases = [([spin], 1, 99), ([spin], 1, 999), ([spin], 20, 99), ([spin], 20, 999),
             ([paths], 1, 999)]
    was_on = set_bpf_stats(True)
    try:
        results = []
        for argv, n, hz in cases:
            r = one_case(binary, argv, n, hz, window_s)
            log(f"  {n:2d} x {r['workload']} {hz} Hz: {r['samples']} samples, "
                f"{r['cpu_ms_per_1k']:.2f} ms/1k, HWM {r['hwm_kb']} kB")
            results.append(r)
        return results
    finally:
        set_bpf_stats(was_on)
