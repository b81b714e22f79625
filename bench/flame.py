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


def timed(argv, stdin_path, runs):
    """Median and all wall seconds of runs of argv < stdin_path, and the last output."""
    times, out = [], b""
    for _ in range(runs):
        with open(stdin_path, "rb") as f:
            t0 = time.monotonic()
            r = subprocess.run(argv, stdin=f, stdout=subprocess.PIPE, check=True)
            times.append(time.monotonic() - t0)
        out = r.stdout
    return statistics.median(times), times, out


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

        t, times, svg = timed([args.aperture, "render", "svg"], folded, args.runs)
        res["aperture_svg"] = {"median_s": t, "times_s": times, "bytes": len(svg)}
        for fmt in ("pprof", "json"):
            t, times, out = timed([args.aperture, "render", fmt, "--hz", "99"], folded, args.runs)
            res[f"aperture_{fmt}"] = {"median_s": t, "times_s": times, "bytes": len(out)}
        if fg.is_file():
            runs = max(1, min(args.runs, 3))  # seconds each
            t, times, svg = timed(["perl", str(fg)], folded, runs)
            res["flamegraph_pl"] = {"median_s": t, "times_s": times, "bytes": len(svg),
                                    "path": str(fg)}
        else:
            print(f"flame.py: no flamegraph.pl at {fg} (FLAMEGRAPH_PL): its column is skipped",
                  file=sys.stderr)

    a = res["aperture_svg"]
    lines = [f"# flame graph render, {args.stacks} stacks ({res['frames']} frames, "
             f"{res['folded_bytes']} bytes folded), median of {args.runs} runs",
             f"aperture render svg : {1e3 * a['median_s']:8.1f} ms  {a['bytes']:>10} bytes"]
    if "flamegraph_pl" in res:
        f = res["flamegraph_pl"]
        res["speedup"] = f["median_s"] / a["median_s"]
        res["svg_size_ratio"] = a["bytes"] / f["bytes"]
        lines += [f"flamegraph.pl       : {1e3 * f['median_s']:8.1f} ms  {f['bytes']:>10} bytes",
                  f"speed-up {res['speedup']:.1f}x (target >= 20x: "
                  f"{'met' if res['speedup'] >= 20 else 'MISSED'}); "
                  f"SVG size {100 * res['svg_size_ratio']:.1f} % of flamegraph.pl's"]
    for fmt in ("pprof", "json"):
        r = res[f"aperture_{fmt}"]
        res[f"{fmt}_size_ratio"] = r["bytes"] / res["folded_bytes"]
        lines.append(f"cpu.{fmt:<5} {r['bytes']:>10} bytes = {100 * res[f'{fmt}_size_ratio']:.1f} %"
                     f" of the folded text ({1e3 * r['median_s']:.1f} ms)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"flame-{stamp}.txt").write_text(text)
    (out / f"flame-{stamp}.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
