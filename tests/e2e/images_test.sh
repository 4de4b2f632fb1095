#!/usr/bin/env bash
# The container images, built and run here daemonless (buildah, vfs, chroot isolation):
#   - scripts/build-images --prebuilt BUILD_DIR --make-base builds the coordinator and CPU agent
#     images from docker/Dockerfile.{server,agent-cpu} with this build's binaries (compiling inside
#     the image takes ~25 min per image on 2 cores: scripts/build-images without --prebuilt does it
#     on demand); a second clean build of the coordinator image gives the same digest;
#   - the builds leave no untagged images behind, and no downloaded .deb stays in an image;
#   - every binary's shared libraries resolve inside its image, and the images run as a non-root user;
#   - the coordinator runs from its image and the agent from its image (`buildah run`, host network,
#     loopback only); the image's CLI submits a small job, which succeeds with stored samples.
# SKIPPED (exit 77) with the probe's output when buildah cannot build or run containers here.
#   images_test.sh REPO_DIR BUILD_DIR
set -uo pipefail
REPO=$1 BUILD=$2
source "$(dirname "$0")/lib.sh"
e2e_begin images

B=(buildah --storage-driver vfs)
if ! probe=$("${B[@]}" --version 2>&1 && ctr=$("${B[@]}" from scratch 2>&1) && "${B[@]}" rm "$ctr" 2>&1); then
  echo "SKIPPED: buildah cannot make containers on this machine; the probe printed:"
  echo "$probe" | tail -n 5
  ok=1
  exit 77
fi

CTRS=()
GROUPS_TO_STOP=()
images_cleanup() {
  for g in "${GROUPS_TO_STOP[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  sleep 0.5
  for g in "${GROUPS_TO_STOP[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  for c in "${CTRS[@]}"; do "${B[@]}" rm "$c" >/dev/null 2>&1 || true; done
  e2e_cleanup
}
trap images_cleanup EXIT

cd "$REPO"
SECONDS=0
# A missing base is named with the command that makes it, and nothing is built.
bash scripts/build-images --prebuilt "$BUILD" --base localhost/hetbench-no-such-base:1 >"$WORK/nobase.log" 2>&1
code=$?
[[ $code == 3 ]] && grep -F "scripts/build-images --make-base --base localhost/hetbench-no-such-base:1" \
  "$WORK/nobase.log" >/dev/null || fail "a missing base gave exit $code: $(head -c 300 "$WORK/nobase.log")"
dangling_before=$("${B[@]}" images -q --filter dangling=true | wc -l)
bash scripts/build-images --prebuilt "$BUILD" --make-base --images server --check-reproducible \
  >"$WORK/build-server.log" 2>&1 || fail "the coordinator image did not build reproducibly"
bash scripts/build-images --prebuilt "$BUILD" --images agent-cpu >"$WORK/build-agent.log" 2>&1 ||
  fail "the CPU agent image did not build"
cat "$WORK/build-server.log" "$WORK/build-agent.log"
grep -q "reproducible: a second clean build gave the same digest" "$WORK/build-server.log" ||
  fail "no reproducibility line"
dangling_after=$("${B[@]}" images -q --filter dangling=true | wc -l)
((dangling_after <= dangling_before)) ||
  fail "the builds left $((dangling_after - dangling_before)) untagged images in vfs storage"
VERSION=$(sed -n 's/^project(hetbench VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
echo "images built in ${SECONDS} s"

SRV=$("${B[@]}" from -q --pull-never "localhost/hetbench/server:$VERSION") || fail "no server container"
CTRS+=("$SRV")
AGT=$("${B[@]}" from -q --pull-never "localhost/hetbench/agent-cpu:$VERSION") || fail "no agent container"
CTRS+=("$AGT")
in_srv() { "${B[@]}" run --isolation chroot "$SRV" -- "$@"; }
in_agt() { "${B[@]}" run --isolation chroot "$AGT" -- "$@"; }

# Every binary's libraries resolve inside its image; the images run as the hetbench user.
for bin in /usr/bin/hetbench-server /usr/bin/hetbench; do
  in_srv ldd "$bin" >"$WORK/ldd.txt" 2>&1 || fail "ldd $bin failed in the server image"
  if grep "not found" "$WORK/ldd.txt"; then fail "$bin misses libraries in the server image"; fi
done
in_agt ldd /usr/bin/hetbench-agent >"$WORK/ldd.txt" 2>&1 || fail "ldd failed in the agent image"
if grep "not found" "$WORK/ldd.txt"; then fail "hetbench-agent misses libraries in the agent image"; fi
debs=$(in_agt sh -c 'find /var/cache/apt/archives -name "*.deb" | wc -l')
[[ $debs == 0 ]] || fail "the agent image keeps $debs downloaded .deb files"
echo "shared libraries: all resolve ($(wc -l <"$WORK/ldd.txt") for the agent)"
[[ $(in_srv id -un) == hetbench && $(in_agt id -u) == 10001 ]] || fail "the images do not run as hetbench (uid 10001)"
labels=$("${B[@]}" inspect --format '{{.OCIv1.Config.Labels}}' "localhost/hetbench/server:$VERSION")
[[ $labels == *org.opencontainers.image.revision:* && $labels == *io.hetbench.packages:libgrpc* ]] ||
  fail "labels missing: $labels"
in_srv cat /usr/share/hetbench/packages.txt | grep '^libgrpc++1.51 ' >/dev/null || fail "no package versions recorded"

# The coordinator from its image, the agent from its image, a job across them on loopback.
PORT=$(ports_below_ephemeral 10000 1 20000)
setsid "${B[@]}" run --isolation chroot "$SRV" -- hetbench-server --listen "127.0.0.1:$PORT" \
  --metrics-listen "" --db /var/lib/hetbench/jobs.db >"$WORK/server.log" 2>&1 &
GROUPS_TO_STOP+=($!)
wait_for 30 in_srv hetbench --server "127.0.0.1:$PORT" health || fail "the coordinator image did not serve"
setsid "${B[@]}" run --isolation chroot "$AGT" -- hetbench-agent --server "127.0.0.1:$PORT" \
  --agent-id image-cpu --threads 1 >"$WORK/agent.log" 2>&1 &
GROUPS_TO_STOP+=($!)
wait_for 60 in_srv hetbench --server "127.0.0.1:$PORT" get agents -o json ||
  fail "the server image's CLI cannot list agents"
deadline=$((SECONDS + 60))
until in_srv hetbench --server "127.0.0.1:$PORT" get agents -o json | grep '"image-cpu"' >/dev/null; do
  ((SECONDS < deadline)) || fail "the agent from its image never connected"
  sleep 0.5
done
in_srv hetbench --server "127.0.0.1:$PORT" submit --wait -m mlp -t cpu -b 64 --warmup-steps 1 \
  --min-steps 10 --min-duration 0 --infer-max-batches 2 -o json >"$WORK/job.json" 2>"$WORK/submit.err" ||
  fail "the job across the images failed: $(head -c 400 "$WORK/submit.err")"
jq -e '.state == "JOB_STATE_SUCCEEDED" and (.tasks | length == 1)
       and .tasks[0].state == "TASK_STATE_SUCCEEDED"
       and (.tasks[0].result.samples_stored | tonumber) >= 10' "$WORK/job.json" >/dev/null ||
  fail "the job did not succeed: $(head -c 400 "$WORK/job.json")"
agent=$(jq -r '.tasks[0].agent_id' "$WORK/job.json")
[[ $agent == image-cpu ]] || fail "the task ran on '$agent', not the agent from its image"
echo "a job ran from image to image: $(jq -r '.id' "$WORK/job.json") on $agent," \
  "$(jq -r '.tasks[0].result.samples_stored' "$WORK/job.json") samples stored"
ok=1
echo "e2e.images passed in ${SECONDS} s"
