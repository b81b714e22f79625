#!/usr/bin/env python3
"""Flame graph rendering against flamegraph.pl, and the sizes of the views.

One folded input of 20,000 distinct stacks (about 30 frames deep, names shared the way call
trees share them; fixed seed) is rendered to SVG by `aperture render svg` and by
brendangregg/FlameGraph's flamegraph.pl (CDDL, never committed here: give its path in
FLAMEGRAPH_PL, default /tmp/FlameGraph/flamegraph.pl; without it that column is skipped).
Reported: median wall time of each (a fresh process each run, parsing included), the ratio,
the SVG sizes, and the sizes of cpu.pprof and cpu.json against the folded text.
Writes bench/results/flame-<date>.{json,txt}.

    bench/flame.py [--aperture build/aperture] [--stacks 20000] [--runs 5]
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_folded(n, depth, seed=1):
    """n distinct stacks: a few threads, then levels whose names come from vocabularies that
    grow with depth, so the top of the tree is shared and the leaves are many."""
    rng = random.Random(seed)
    stacks = {}
    while len(stacks) < n:
        d = max(4, int(rng.gauss(depth, 6)))
        frames = [f"thread-{rng.randrange(4)}"]
        for level in range(1, d):
            vocab = min(4 + level * level * 4, 3000)
            frames.append(f"mod{level % 7}::fn_{rng.randrange(vocab)}")
        if rng.random() < 0.2:
            frames += [f"sys_call_{rng.randrange(40)}_[k]", f"kfunc_{rng.randrange(200)}_[k]"]
        stacks[";".join(frames)] = rng.randrange(1, 100)
    return "".join(f"{s} {c}\n" for s, c in stacks.items())


def timed(argv, stdin_path, out_path, runs):
    """Medians of wall and CPU (user + system) seconds of runs of argv < stdin_path >
    out_path, each run's figures, and the output's size. CPU time is the steadier figure on
    a shared machine: waiting for a CPU counts in wall time only."""
    walls, cpus = [], []
    for _ in range(runs):
        with open(stdin_path, "rb") as f, open(out_path, "wb") as out:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            subprocess.run(argv, stdin=f, stdout=out, check=True)
            walls.append(time.monotonic() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"median_s": statistics.median(walls), "cpu_median_s": statistics.median(cpus),
            "times_s": walls, "cpu_s": cpus, "bytes": Path(out_path).stat().st_size}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aperture", default=str(HERE.parent / "build" / "aperture"))
    ap.add_argument("--stacks", type=int, default=20000)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    fg = Path(os.environ.get("FLAMEGRAPH_PL", "/tmp/FlameGraph/flamegraph.pl"))

    res = {"stacks": args.stacks, "mean_depth": args.depth, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "in.folded"
        folded.write_text(make_folded(args.stacks, args.depth))
        res["folded_bytes"] = folded.stat().st_size
        res["frames"] = sum(line.count(";") + 1 for line in folded.read_text().splitlines())

        out = Path(tmp) / "out"
        res["aperture_svg"] = timed([args.aperture, "render", "svg"], folded, out, args.runs)
        for fmt in ("pprof", "json"):
            res[f"aperture_{fmt}"] = timed([args.aperture, "render", fmt, "--hz", "99"],
                                           folded, out, args.runs)
        if fg.is_file():
            runs = max(1, min(args.runs, 3))  # seconds each
            res["flamegraph_pl"] = dict(timed(["perl", str(fg)], folded, out, runs),
                                        path=str(fg))
        else:
            print(f"flame.py: no flamegraph.pl at {fg} (FLAMEGRAPH_PL): its column is skipped",
                  file=sys.stderr)

    a = res["aperture_svg"]
    lines = [f"# flame graph render, {args.stacks} stacks ({res['frames']} frames, "
             f"{res['folded_bytes']} bytes folded), median of {args.runs} runs "
             f"(flamegraph.pl: {min(args.runs, 3)}), load average {os.getloadavg()[0]:.1f}",
             f"{'':20}  {'wall ms':>9}  {'CPU ms':>9}  {'bytes':>10}",
             f"{'aperture render svg':20}  {1e3 * a['median_s']:9.1f}  "
             f"{1e3 * a['cpu_median_s']:9.1f}  {a['bytes']:>10}"]
    if "flamegraph_pl" in res:
        f = res["flamegraph_pl"]
        res["speedup_wall"] = f["median_s"] / a["median_s"]
        res["speedup_cpu"] = f["cpu_median_s"] / a["cpu_median_s"]
        res["svg_size_ratio"] = a["bytes"] / f["bytes"]
        lines += [f"{'flamegraph.pl':20}  {1e3 * f['median_s']:9.1f}  "
                  f"{1e3 * f['cpu_median_s']:9.1f}  {f['bytes']:>10}",
                  f"speed-up {res['speedup_wall']:.1f}x wall, {res['speedup_cpu']:.1f}x CPU "
                  f"(target >= 20x: {'met' if res['speedup_wall'] >= 20 else 'MISSED'} in "
                  f"wall time); SVG size {100 * res['svg_size_ratio']:.1f} % of flamegraph.pl's"]
    for fmt in ("pprof", "json"):
        r = res[f"aperture_{fmt}"]
        res[f"{fmt}_size_ratio"] = r["bytes"] / res["folded_bytes"]
        lines.append(f"cpu.{fmt:<5} {r['bytes']:>10} bytes = {100 * res[f'{fmt}_size_ratio']:.1f} %"
                     f" of the folded text ({1e3 * r['median_s']:.1f} ms wall)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"flame-{stamp}.txt").write_text(text)
    (out / f"flame-{stamp}.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
