#!/usr/bin/env python3
"""compare_spread.py on synthetic dumps whose spreads are known: it must read them back.

Runs of 200 steps; each run's steps shifted by one draw of the run's own drift (sd 2%), a
step's own noise 1% (so a half's median moves by about 0.09%): the couples' differences
spread by 2% x sqrt(2) = 2.83%, the same side's runs by 2% each, a run's halves barely.
A second dump whose runs' first halves move by a draw of sd 3% against their second halves
reads that as a spread within a run of 3% / sqrt(2) (a half's median's share). A file that is not a dump is refused with exit 2.
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

        bad = os.path.join(d, "bad.csv")
        with open(bad, "w") as f:
            f.write("kind,pair\nAA,0\n")
        r = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)
        if r.returncode != 2 or "not a bench_compare --dump" not in r.stderr:
            sys.exit(f"a file that is not a dump: exit {r.returncode}, {r.stderr!r}")
    print("compare_spread read the synthetic dumps' spreads back")


if __name__ == "__main__":
    main()
