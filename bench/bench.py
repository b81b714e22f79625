#!/usr/bin/python3
"""Runs the three parts of aperture's bench side by side and prints one table.
bench/run builds everything and calls this; see bench/README.md for what each figure means."""
import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_cost  # noqa: E402
import overhead  # noqa: E402
import render_time  # noqa: E402
from common import Daemon, median_diff_ci  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def meta(binary):
    def git(*args):
        return subprocess.run(["git", "-C", HERE, *args], capture_output=True,
                              text=True).stdout.strip()
    others = subprocess.run(["pgrep", "-c", "-x", "aperture"], capture_output=True,
                            text=True).stdout.strip()
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "commit": git("rev-parse", "--short", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "..")),
            "kernel": platform.release(), "cpus": os.cpu_count(),
            "loadavg_at_start": os.getloadavg()[0], "aperture": binary,
            "aperture_daemons_running_at_start": int(others or 0)}


def pct(ratio):
    return f"{100 * (ratio - 1):+.2f}%"


def table_overhead(rows, workload_s):
    out = [f"1. Slowdown of a CPU-bound workload (1 thread, {workload_s:.1f} s measured phase), "
           f"{rows[0]['pairs']} ABBA pairs per row, medians",
           f"{'profiler':<20}{'wall ratio':>11}{'[min - max]':>17}{'cpu ratio':>11}"
           f"{'samples':>9}{'attach':>10}{'prof CPU run':>14}{'prof CPU all':>14}"]
    for r in rows:
        out.append(f"{r['profiler']:<20}{r['wall_ratio']:>11.4f}"
                   f"{'[%.3f - %.3f]' % (r['wall_ratio_min'], r['wall_ratio_max']):>17}"
                   f"{r['cpu_ratio']:>11.4f}{r['samples']:>9.0f}"
                   f"{1e3 * r['attach_s']:>8.1f}ms{1e3 * r['prof_cpu_steady_s']:>12.1f}ms"
                   f"{1e3 * r['prof_cpu_total_s']:>12.1f}ms"
                   + (f"  !{r['warning']}" if "warning" in r else ""))
    for hz in sorted({r["hz"] for r in rows}):
        at = {r["profiler"].split()[0]: r for r in rows if r["hz"] == hz}
        ap = at["aperture"]
        verdicts = []
        for peer in ("perf", "bcc"):
            if ap["wall_ratio"] <= at[peer]["wall_ratio"]:
                continue
            lo, hi = median_diff_ci(ap["ratios"], at[peer]["ratios"])
            verdicts.append(f"{'WORSE' if lo > 0 else 'worse'} than {peer} by "
                            f"{100 * (ap['wall_ratio'] - at[peer]['wall_ratio']):.2f} pts, "
                            f"95% CI [{100 * lo:+.2f}, {100 * hi:+.2f}]"
                            + ("" if lo > 0 else " includes 0: not resolved by this run"))
        missed = any(v.startswith("WORSE") for v in verdicts)
        out.append(f"   {hz} Hz slowdown: aperture {pct(ap['wall_ratio'])}, perf "
                   f"{pct(at['perf']['wall_ratio'])}, bcc {pct(at['bcc']['wall_ratio'])}; "
                   f"cpu: aperture {pct(ap['cpu_ratio'])}, perf {pct(at['perf']['cpu_ratio'])}, "
                   f"bcc {pct(at['bcc']['cpu_ratio'])} -> target "
                   + ("MISSED" if missed else "met" if not verdicts else "not resolved"))
        out += [f"     aperture {v}" for v in verdicts]
    return out


def table_kernel(rows):
    out = ["   in-kernel sampling cost (kernel.bpf_stats_enabled; aperture and BCC attached at once"
           f" to one busy target, 3 s, median of {rows[0]['reps']}):"]
    for r in rows:
        out.append(f"   {r['profiler']:<20} {r['ns_per_target_sample']:>7.0f} ns per target sample"
                   f" ({r['ns_per_run']:.0f} ns per program run, {r['runs']:.0f} runs) = "
                   f"{r['target_cpu_pct']:.2f}% of the target's CPU time"
                   + (f"; {r['vs_bcc']:.2f}x BCC's, paired" if "vs_bcc" in r else ""))
    return out


def table_daemon(rows):
    out = ["2. Daemon cost, fresh daemon per row, window = enable + "
           f"{rows[0]['window_s']:.0f} s",
           f"{'targets':>7} {'workload':<9}{'Hz':>5}{'samples':>9}{'CPU ms/1k':>11}"
           f"{'steady':>8}{'BPF ns/run':>12}{'BPF ms/1k':>11}{'VmHWM idle->peak':>20}"
           f"{'enable max':>12}{'drops':>7}"]
    for r in rows:
        out.append(f"{r['targets']:>7} {r['workload']:<9}{r['hz']:>5}{r['samples']:>9}"
                   f"{r['cpu_ms_per_1k']:>11.2f}{r['steady_cpu_ms_per_1k']:>8.2f}"
                   f"{r['bpf_ns_per_run']:>12.0f}{r['bpf_ms_per_1k']:>11.2f}"
                   f"{'%.1f -> %.1f MB' % (r['hwm_idle_kb'] / 1024, r['hwm_kb'] / 1024):>20}"
                   f"{1e3 * r['enable_s_max']:>10.1f}ms{r['drops']:>7}")
    return out


def table_render(res):
    ap, pf = res["aperture"], res["perf"]
    out = [f"3. Render time: aperture profile of {ap['stacks']} distinct stacks "
           f"({ap['samples']} samples, {ap['folded_bytes'] / 1e6:.1f} MB folded); perf's "
           f"recording of the same workload: {pf['stacks']} stacks, {pf['samples']} samples",
           f"{'view':<12}{'aperture cat median/max':>26}{'cat same-size file':>20}"
           f"{'perf median/max':>22}{'perf/aperture':>15}"]
    for view, peer in (("folded", "perf script report stackcollapse"),
                       ("top", "perf report --children --sort symbol")):
        a, p = ap[view], pf[view]
        out.append(f"{'cpu.' + view:<12}"
                   f"{'%.1f / %.1f ms' % (a['median_ms'], a['max_ms']):>26}"
                   f"{'%.1f ms' % ap['floor']['median_ms']:>20}"
                   f"{'%.0f / %.0f ms' % (p['median_ms'], p['max_ms']):>22}"
                   f"{p['median_ms'] / a['median_ms']:>14.1f}x  ({peer})")
    big = res["aperture_big"]
    for view in ("folded", "top"):
        out.append(f"{'cpu.' + view:<12}"
                   f"{'%.1f / %.1f ms' % (big[view]['median_ms'], big[view]['max_ms']):>26}"
                   f"{'%.1f ms' % big['floor']['median_ms']:>20}"
                   f"  (aperture alone, {big['stacks']} stacks, "
                   f"{big['folded_bytes'] / 1e6:.1f} MB folded)")
    worst = max(ap["folded"]["max_ms"], ap["top"]["max_ms"])
    out.append(f"   target < 50 ms: " + ("met" if worst < 50 else "MISSED")
               + f" (worst of {ap['folded']['n']} cats each: {worst:.1f} ms)")
    return out


def write_summary(path, res):
    """The summary, small enough to commit: five significant digits; the per-pair ratios
    stay in the .raw.json."""
    def trim(x):
        if isinstance(x, float):
            return float(f"{x:.5g}")
        if isinstance(x, dict):
            return {k: trim(v) for k, v in x.items() if k != "ratios"}
        return [trim(v) for v in x] if isinstance(x, list) else x
    slim = trim(res)
    with open(path, "w") as f:
        json.dump(slim, f, separators=(",", ":"))
        f.write("\n")


def main():
    # Started in the background, this process may have SIGINT ignored, and an ignored signal
    # stays ignored across exec: BCC's profile would never hear the SIGINT that ends it.
    # SIGTERM runs the finally blocks, which stop daemons and kill workloads.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--aperture", required=True, help="the aperture binary")
    ap.add_argument("--workloads", required=True, help="folder with spin and paths")
    ap.add_argument("--parts", default="overhead,daemon,render")
    ap.add_argument("--runs", type=int, default=16, help="ABBA pairs per configuration")
    ap.add_argument("--rounds", type=int, default=11_000_000, help="spin's work (~1.2 s here)")
    ap.add_argument("--rates", default="99,999")
    ap.add_argument("--window", type=float, default=10, help="daemon-cost window, seconds")
    ap.add_argument("--stacks", type=int, default=10_000)
    ap.add_argument("--cats", type=int, default=15)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    spin = os.path.join(args.workloads, "spin")
    paths = os.path.join(args.workloads, "paths")
    parts = args.parts.split(",")
    res = {"meta": meta(args.aperture)}
    raw = {}
    table = []
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aperture-bench-") as tmp:
        if "overhead" in parts:
            log("part 1: slowdown")
            d = Daemon(args.aperture)  # one daemon for the whole part, as in production
            try:
                rates = [int(x) for x in args.rates.split(",")]
                res["overhead"], raw["overhead"] = overhead.run(d, spin, args.rounds, args.runs,
                                                                rates, tmp, log)
                res["kernel_cost"] = overhead.kernel_cost(d, spin, rates, 3, 5, tmp, log)
                res["overhead_daemon_hwm_kb"] = d.hwm_kb()
            finally:
                d.stop()
            table += table_overhead(res["overhead"], res["overhead"][0]["base_wall_s"])
            table += table_kernel(res["kernel_cost"]) + [""]
        if "daemon" in parts:
            log("part 2: daemon cost")
            res["daemon"] = daemon_cost.run(args.aperture, spin, paths, args.window, log)
            table += table_daemon(res["daemon"]) + [""]
        if "render" in parts:
            log("part 3: render time")
            res["render"] = render_time.run(args.aperture, paths, paths + "15", args.stacks,
                                            args.cats, 5, tmp, log)
            table += table_render(res["render"]) + [""]
    res["meta"]["duration_s"] = time.monotonic() - t_start
    m = res["meta"]
    head = (f"aperture bench {m['date']}  commit {m['commit']}{' (dirty tree)' if m['dirty'] else ''}"
            f"  kernel {m['kernel']}  {m['cpus']} CPUs  load at start {m['loadavg_at_start']:.2f}"
            f"  took {m['duration_s'] / 60:.1f} min")
    print("\n".join([head, ""] + table))
    os.makedirs(args.results, exist_ok=True)
    stem = os.path.join(args.results, m["date"].replace(":", ""))
    write_summary(stem + ".json", res)
    with open(stem + ".raw.json", "w") as f:  # per-run records; not committed (.gitignore)
        json.dump(raw, f)
    with open(stem + ".txt", "w") as f:
        f.write("\n".join([head, ""] + table))
    log(f"wrote {stem}.json, .txt, .raw.json")


if __name__ == "__main__":
    main()
