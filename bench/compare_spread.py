#!/usr/bin/env python3
"""How a bench_compare --dump's runs spread, and what a test on k runs a side could find (modelled).

Reads the dump (bench/compare_dump.h) and prints, per phase, from the A/A pairs (no change
between the sides), the spread (standard deviation of the log of a median, robust: 1.4826 x
the median absolute deviation, so a run in another machine state does not set it) at three
distances in time:
  - within a run: the medians of its first and second half of steps;
  - the two sides' runs of one repeat (A1 and B1, taken one after the other);
  - one side's runs i and i+1 (with the other side's run between them);
then each A/A comparison's couples (A_i, B_i): the standard deviation of their k log
differences, as a typical comparison's (the median over the comparisons, divided by the
median of a sample standard deviation on k - 1 degrees of freedom in units of its sigma, so
it estimates sigma where every comparison had the same) and as their root mean square (a
comparison in another machine state weighs in). Last, a model, not a measurement: how often
a change of --slowdown would be found by a paired z test on k couples that knew that spread
exactly (no degree of freedom spent on estimating it): a reference for what k runs a side of
this spread allow, not a bound (compare's probe rules cut steps taken in another machine
state, which narrows the spread this reads). Steps' values only; the probe is not read.

Usage: compare_spread.py DUMP [--slowdown 0.05]
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict

PHASES = ("train", "infer")


def robust_sd(diffs):
    """The standard deviation of one of two values whose differences are `diffs`."""
    if len(diffs) < 2:
        return float("nan")
    mid = statistics.median(diffs)
    mad = statistics.median(abs(d - mid) for d in diffs)
    return 1.4826 * mad / math.sqrt(2)


def normal_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def read_dump(path):
    """{(kind, pair, side, run, phase): [ns per sample, ...]}, in the file's order."""
    runs = defaultdict(list)
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or header[:6] != ["kind", "pair", "side", "run", "phase", "ns_per_sample"]:
            raise ValueError(f"{path}: not a bench_compare --dump (its header must start "
                             "kind,pair,side,run,phase,ns_per_sample)")
        for line, row in enumerate(reader, start=2):
            if len(row) < 6:
                raise ValueError(f"{path} line {line}: {len(row)} fields, a dump has 8")
            if row[4] not in PHASES:
                continue  # a probe reading during the run
            try:
                key = (row[0], int(row[1]), row[2], int(row[3]), row[4])
                runs[key].append(float(row[5]))
            except ValueError:
                raise ValueError(f"{path} line {line}: pair, run and ns_per_sample must be numbers")
    return runs


def log_median(values):
    return math.log(statistics.median(values))


def spreads(runs, phase, slowdown):
    halves, repeat, consecutive, couples_sd = [], [], [], []
    sides = defaultdict(dict)  # (pair) -> {(side, run): log median}
    for (kind, pair, side, run, ph), steps in runs.items():
        if kind != "AA" or ph != phase or len(steps) < 4:
            continue
        h = len(steps) // 2
        halves.append(log_median(steps[:h]) - log_median(steps[h:]))
        sides[pair][(side, run)] = log_median(steps)
    k_seen = set()
    for pair, med in sides.items():
        diffs = []
        for (side, run), m in med.items():
            if side == "A" and ("B", run) in med:
                diffs.append(med[("B", run)] - m)
            if (side, run + 1) in med:
                consecutive.append(med[(side, run + 1)] - m)
        repeat.extend(diffs)
        if len(diffs) >= 2:
            k_seen.add(len(diffs))
            couples_sd.append(statistics.stdev(diffs))
    if not couples_sd:
        return None
    k = min(k_seen)
    df = k - 1  # Wilson-Hilferty: the median of chi-square on df degrees of freedom
    median_chi2 = df * (1 - 2 / (9 * df)) ** 3
    typical_sd = statistics.median(couples_sd) / math.sqrt(median_chi2 / df)
    rms_sd = math.sqrt(statistics.fmean(s * s for s in couples_sd))
    delta = math.log(1 + slowdown)

    def found(sd):
        return normal_cdf(delta / (sd / math.sqrt(k)) - 1.959964)

    return {
        "comparisons": len(couples_sd), "k": k,
        "within": robust_sd(halves), "repeat": robust_sd(repeat), "consecutive": robust_sd(consecutive),
        "typical": typical_sd, "rms": rms_sd, "found_typical": found(typical_sd), "found_rms": found(rms_sd),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump")
    ap.add_argument("--slowdown", type=float, default=0.05, help="the change the model is for (0.05: 5%%)")
    args = ap.parse_args()
    if not (args.slowdown > 0 and math.isfinite(args.slowdown)):
        print("--slowdown must be a positive fraction, e.g. 0.05", file=sys.stderr)
        return 2
    try:
        runs = read_dump(args.dump)
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    pct = lambda x: f"{100 * x:.2f}%"
    print(f"{args.dump}: spread of a log median (robust sd), A/A pairs; steps only, the probe not read")
    print("phase  comparisons  within a run  A_i vs B_i  side's i vs i+1  couples' sd typical  rms"
          f"  modelled: {100 * args.slowdown:g}% found at typical, rms")
    ok = False
    for phase in PHASES:
        s = spreads(runs, phase, args.slowdown)
        if s is None:
            continue
        ok = True
        print(f"{phase:6} {s['comparisons']:11}  {pct(s['within']):>12}  {pct(s['repeat']):>10}  "
              f"{pct(s['consecutive']):>15}  {pct(s['typical']):>19}  {pct(s['rms']):>6}  "
              f"{pct(s['found_typical']):>8}, {pct(s['found_rms'])} (z test, {s['k']} couples, spread known)")
    if not ok:
        print(f"{args.dump}: no A/A pair with 2 runs or more a side", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
