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

A second table asks whether another estimate of the change, from the same runs, would spread
less: each estimator's robust standard deviation over the A/A comparisons (the noise it
leaves), its median over the A/B pairs (it must recover the injected change), and how often
a z test that knew that spread would find --slowdown (modelled, as above):
  - couples: the mean of the couples' log differences (what compare estimates; its ratio);
  - boundaries: where a run of one side follows one of the other (the dump's rows are in the
    order the runs were taken), the median of the later run's first --boundary-steps steps
    against the earlier run's last ones, signed for B over A; the mean of the A-to-B
    boundaries and that of the B-to-A ones averaged, so a start-of-run effect common to
    both sides cancels. Steps close in time share more of the machine's drift than whole
    runs do, at the price of fewer steps.

Usage: compare_spread.py DUMP [--slowdown 0.05] [--boundary-steps 200]
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict

PHASES = ("train", "infer")


def mad_sd(values):
    """A robust standard deviation of `values`: 1.4826 x their median absolute deviation."""
    mid = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - mid) for v in values)


def robust_sd(diffs):
    """The standard deviation of one of two values whose differences are `diffs`."""
    if len(diffs) < 2:
        return float("nan")
    return mad_sd(diffs) / math.sqrt(2)


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


def modelled_found(delta, se):
    """How often a two-sided 5% z test whose standard error is `se` finds a change of `delta`."""
    return normal_cdf(delta / se - 1.959964) if se > 0 else 1.0


def comparisons(runs, phase):
    """{(kind, pair): ({(side, run): steps}, [(side, run), ...] in the order taken)} of `phase`'s runs with 4
    steps or more (the dump's rows are in the order the runs were taken)."""
    out = defaultdict(lambda: ({}, []))
    for (kind, pair, side, run, ph), steps in runs.items():
        if ph != phase or len(steps) < 4:
            continue
        c = out[(kind, pair)]
        c[0][(side, run)] = steps
        c[1].append((side, run))
    return out


def couple_diffs(steps):
    """log median(B_i) - log median(A_i) of each couple of a comparison's runs, in run order."""
    return [log_median(steps[("B", r)]) - log_median(steps[("A", r)])
            for (s, r) in sorted(steps) if s == "A" and ("B", r) in steps]


def spreads(runs, phase, slowdown):
    halves, repeat, consecutive, couples_sd = [], [], [], []
    k_seen = set()
    for (kind, pair), (steps, _) in comparisons(runs, phase).items():
        if kind != "AA":
            continue
        for (side, run), values in steps.items():
            h = len(values) // 2
            halves.append(log_median(values[:h]) - log_median(values[h:]))
            if (side, run + 1) in steps:
                consecutive.append(log_median(steps[(side, run + 1)]) - log_median(values))
        diffs = couple_diffs(steps)
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
        return modelled_found(delta, sd / math.sqrt(k))

    return {
        "comparisons": len(couples_sd), "k": k,
        "within": robust_sd(halves), "repeat": robust_sd(repeat), "consecutive": robust_sd(consecutive),
        "typical": typical_sd, "rms": rms_sd, "found_typical": found(typical_sd), "found_rms": found(rms_sd),
    }


def boundary_estimate(order, steps, m):
    """The boundaries' estimate of log(B/A) over runs taken in `order` [(side, run), ...]."""
    by_direction = {"A": [], "B": []}  # keyed by the later run's side
    for (s0, r0), (s1, r1) in zip(order, order[1:]):
        if s0 == s1:
            continue
        before, after = steps[(s0, r0)], steps[(s1, r1)]
        n = min(m, len(before) // 2, len(after) // 2)
        if n < 2:
            continue
        d = log_median(after[:n]) - log_median(before[-n:])
        by_direction[s1].append(d if s1 == "B" else -d)
    means = [statistics.fmean(v) for v in by_direction.values() if v]
    return statistics.fmean(means) if means else None


def estimators(runs, phase, slowdown, m):
    """{estimator: (A/A robust sd, A/B median, modelled found, A/A count, A/B count)} over the comparisons
    with 2 couples or more."""
    estimates = {"couples": ([], []), "boundaries": ([], [])}  # name -> (A/A estimates, A/B estimates)
    for (kind, pair), (steps, order) in comparisons(runs, phase).items():
        diffs = couple_diffs(steps)
        if len(diffs) < 2:
            continue
        into = 0 if kind == "AA" else 1
        estimates["couples"][into].append(statistics.fmean(diffs))
        b = boundary_estimate(order, steps, m)
        if b is not None:
            estimates["boundaries"][into].append(b)
    delta = math.log(1 + slowdown)
    out = {}
    for name, (aa, ab) in estimates.items():
        if len(aa) < 2:
            continue
        sd = mad_sd(aa)
        out[name] = (sd, statistics.median(ab) if ab else float("nan"), modelled_found(delta, sd), len(aa), len(ab))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump")
    ap.add_argument("--slowdown", type=float, default=0.05, help="the change the model is for (0.05: 5%%)")
    ap.add_argument("--boundary-steps", type=int, default=200,
                    help="steps each side of a boundary between runs (at most half a run's)")
    args = ap.parse_args()
    if not (args.slowdown > 0 and math.isfinite(args.slowdown)):
        print("--slowdown must be a positive fraction, e.g. 0.05", file=sys.stderr)
        return 2
    if args.boundary_steps < 2:
        print("--boundary-steps must be 2 or more, e.g. 200", file=sys.stderr)
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
    print(f"estimates of the change from the same runs: A/A spread (robust sd of the log), A/B median;"
          f" modelled: {100 * args.slowdown:g}% found by a z test that knew that spread")
    print("phase  estimator                  A/A  A/B     A/A sd  A/B median  modelled found")
    for phase in PHASES:
        for name, (sd, ab, found, n_aa, n_ab) in estimators(runs, phase, args.slowdown, args.boundary_steps).items():
            label = name if name == "couples" else f"boundaries ({args.boundary_steps} steps)"
            print(f"{phase:6} {label:24} {n_aa:5} {n_ab:4} {pct(sd):>10}  {pct(math.expm1(ab)):>10}  {pct(found):>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
