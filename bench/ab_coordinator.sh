#!/bin/bash
# A B A B: the same bench_fleet (new) against the old and new coordinator binaries.
# OLD: a build of the earlier commit (git worktree add /tmp/old 2e8e3a3; cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo; ninja hetbench-server bench_ingest).
# NEW: this tree's build. Usage: bench/ab_coordinator.sh [NEW_BUILD] [OLD_BUILD]
NEW=${1:-build}; OLD=${2:-/tmp/old/build}
for mode in "idle --agents 1000 --devices 4 --seconds 10" "dispatch --agents 1000 --devices 4 --seconds 10 --clients 16" "ingest --agents 64 --seconds 12"; do
  for round in 1 2; do
    for side in old new; do
      bin=$([[ $side == old ]] && echo $OLD || echo $NEW)/server/hetbench-server
      echo "=== $side round $round: --mode $mode"
      $NEW/bench/bench_fleet --mode $mode --server-binary $bin 2>&1 | tail -6
    done
  done
done
for round in 1 2; do
  echo "=== old bench_ingest round $round"; $OLD/bench/bench_ingest 2>&1 | tail -4
  echo "=== new bench_ingest round $round"; $NEW/bench/bench_ingest 2>&1 | tail -4
done
