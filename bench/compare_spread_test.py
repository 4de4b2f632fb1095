#!/usr/bin/env python3
"""compare_spread.py on synthetic dumps whose spreads are known: it must read them back.

Runs of 200 steps; each run's steps shifted by one draw of the run's own drift (sd 2%), a
step's own noise 1% (so a half's median moves by about 0.09%): the couples' differences
spread by 2% x sqrt(2) = 2.83%, the same side's runs by 2% each, a run's halves barely.
A second dump whose runs' first halves move by a draw of sd 3% against their second halves
reads that as a spread within a run of 3% / sqrt(2) (a half's median's share). On a third,
whose machine drifts as a random walk and whose runs start slow, both estimators of the change
recover an injected 5% and the boundaries' spread less. A file that is not a dump is refused with exit 2.
Usage: compare_spread_test.py COMPARE_SPREAD_PY
"""
import math
import os
import random
import re
import subprocess
import sys
import tempfile

HEADER = "kind,pair,side,run,phase,ns_per_sample,probe_before_ns,probe_after_ns\n"


def write_dump(path, rng, half_sd):
    with open(path, "w") as f:
        f.write(HEADER)
        for kind in ("AA", "AB"):
            for pair in range(150):
                change = rng.uniform(0, 0.2) if kind == "AB" else 0.0  # A/B pairs, any change: not read
                for run in (1, 2, 3):
                    for side in ("A", "B"):
                        slowed = change if side == "B" else 0.0
                        level = 50_000 * math.exp(slowed + rng.gauss(0, 0.02))
                        half_shift = rng.gauss(0, half_sd)
                        for phase in ("train", "infer"):
                            for step in range(200):
                                shift = half_shift if step < 100 else 0.0
                                v = level * math.exp(shift + rng.gauss(0, 0.01))
                                f.write(f"{kind},{pair},{side},{run},{phase},{v:.1f},1000,1000\n")
                        f.write(f"{kind},{pair},{side},{run},probe-train,0,1000,5\n")


def write_drifting_dump(path, rng):
    """The machine drifts as a random walk over the steps in the order taken (0.2% a step, so
    about 2.8% over a run of 200 steps), each run's first 50 steps 10% slower (a start-of-run
    effect), A/B pairs' B side 5% slower; runs taken A B, B A, A B."""
    with open(path, "w") as f:
        f.write(HEADER)
        for kind in ("AA", "AB"):
            for pair in range(150):
                drift = 0.0
                for run in (1, 2, 3):
                    for side in (("A", "B") if run != 2 else ("B", "A")):
                        slowed = math.log(1.05) if kind == "AB" and side == "B" else 0.0
                        for step in range(200):
                            drift += rng.gauss(0, 0.002)
                            start = math.log(1.10) if step < 50 else 0.0
                            v = 50_000 * math.exp(drift + slowed + start + rng.gauss(0, 0.01))
                            f.write(f"{kind},{pair},{side},{run},train,{v:.1f},1000,1000\n")


def estimator_rows(out):
    """{(phase, estimator): (A/A sd, A/B median)} as fractions."""
    got = {}
    for line in out.splitlines():
        m = re.match(r"^(train|infer)\s+(couples|boundaries \(\d+ steps\))\s+\d+\s+\d+\s+([-0-9.]+)%\s+([-0-9.]+)%", line)
        if m:
            got[(m.group(1), m.group(2).split()[0])] = (float(m.group(3)) / 100, float(m.group(4)) / 100)
    return got


def rows(out):
    """{phase: [within, repeat, consecutive, typical, rms]} as fractions."""
    got = {}
    for line in out.splitlines():
        m = re.match(r"^(train|infer)\s+\d+\s+(.*)$", line)
        if m:
            got[m.group(1)] = [float(x) / 100 for x in re.findall(r"([0-9.]+)%", m.group(2))[:5]]
    return got


def near(name, value, want, rel):
    if abs(value - want) > rel * want:
        sys.exit(f"{name}: {value:.4f}, expected {want:.4f} within {100 * rel:.0f}%")


def main():
    script = sys.argv[1]
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as d:
        dump = os.path.join(d, "runs.csv")
        write_dump(dump, rng, 0.0)
        out = subprocess.run([sys.executable, script, dump], check=True, capture_output=True, text=True).stdout
        got = rows(out)
        if set(got) != {"train", "infer"}:
            sys.exit(f"expected a train and an infer row, got:\n{out}")
        for phase, (within, repeat, consecutive, typical, rms) in got.items():
            if within > 0.003:
                sys.exit(f"{phase}: within a run {within:.4f}, the halves share their run's drift")
            near(f"{phase} A_i vs B_i", repeat, 0.02, 0.15)
            near(f"{phase} side's i vs i+1", consecutive, 0.02, 0.15)
            near(f"{phase} couples' typical sd", typical, 0.02 * math.sqrt(2), 0.15)
            near(f"{phase} couples' rms sd", rms, 0.02 * math.sqrt(2), 0.15)
        if "modelled:" not in out:
            sys.exit("the detection figure must say it is modelled")

        write_dump(dump, rng, 0.03)
        got = rows(subprocess.run([sys.executable, script, dump], check=True, capture_output=True,
                                  text=True).stdout)
        for phase, spread in got.items():
            near(f"{phase} within a run, halves moving 3%", spread[0], 0.03 / math.sqrt(2), 0.15)

        # Estimators of the change: both recover the 5% (the boundaries despite the slow start of
        # every run), and on a drifting machine the boundaries, steps close in time, spread less.
        write_drifting_dump(dump, rng)
        out = subprocess.run([sys.executable, script, dump, "--boundary-steps", "50"], check=True,
                             capture_output=True, text=True).stdout
        est = estimator_rows(out)
        if set(est) != {("train", "couples"), ("train", "boundaries")}:
            sys.exit(f"expected the couples' and the boundaries' rows for train, got:\n{out}")
        for name in ("couples", "boundaries"):
            ab = est[("train", name)][1]
            if abs(ab - 0.05) > 0.007:
                sys.exit(f"{name}: A/B median {ab:.4f}, the injected change is 0.05")
        couples_sd, boundaries_sd = est[("train", "couples")][0], est[("train", "boundaries")][0]
        if not boundaries_sd < 0.75 * couples_sd:
            sys.exit(f"a drifting machine: the boundaries' A/A spread {boundaries_sd:.4f} should be well below "
                     f"the couples' {couples_sd:.4f}")

        bad = os.path.join(d, "bad.csv")
        with open(bad, "w") as f:
            f.write("kind,pair\nAA,0\n")
        r = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)
        if r.returncode != 2 or "not a bench_compare --dump" not in r.stderr:
            sys.exit(f"a file that is not a dump: exit {r.returncode}, {r.stderr!r}")
    print("compare_spread read the synthetic dumps' spreads back")


if __name__ == "__main__":
    main()
