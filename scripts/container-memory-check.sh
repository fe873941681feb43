#!/usr/bin/env bash
# A node in a container with a memory limit keeps to it (issue 25): the
# FROM-scratch image (Dockerfile) runs with `docker run --memory $LIMIT`,
# its cache.max_bytes left at the default so that it follows the
# container's limit (README, *Memory*), and is filled with $FILL_MIB MiB
# of distinct answers, several times what the limit holds. The check
# passes when the container was never OOM-killed and is still running,
# and answers asked for again are hits; it prints the peak memory the
# cgroup saw.
#
# The upstream is python3's http.server on the host, serving $N files of
# $SIZE (hard links to one file: distinct URLs, distinct cache keys), so a
# fill takes a minute, not the hours 1 KiB answers would. The node uses
# the host's network.
#
# Needs docker, python3, curl and go; builds bin/levee (make build) and
# the image levee:memcheck. Not part of make test: it takes a few minutes
# and a docker daemon. Usage:
#   scripts/container-memory-check.sh                 # 1g limit, 3 GiB of answers
#   LIMIT=512m FILL_MIB=1536 scripts/container-memory-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT=${LIMIT:-1g}
FILL_MIB=${FILL_MIB:-3072}   # total bytes of distinct answers, in MiB
SIZE_KIB=${SIZE_KIB:-256}    # each answer
PORT=${PORT:-19300}          # the node
UP_PORT=${UP_PORT:-19301}    # the upstream
WORK=${WORK:-$(mktemp -d /tmp/container-memory.XXXXXX)}
N=$((FILL_MIB * 1024 / SIZE_KIB))
NAME=levee-memcheck-$$

cleanup() {
	docker rm -f "$NAME" >/dev/null 2>&1 || true
	[[ -n "${up_pid:-}" ]] && kill "$up_pid" 2>/dev/null || true
}
trap cleanup EXIT

echo "building bin/levee and the image"
make build >/dev/null
docker build -q -t levee:memcheck . >/dev/null

echo "upstream: $N answers of $SIZE_KIB KiB in $WORK/files"
mkdir -p "$WORK/files"
head -c $((SIZE_KIB * 1024)) /dev/urandom >"$WORK/files/0"
for ((i = 1; i < N; i++)); do ln -f "$WORK/files/0" "$WORK/files/$i"; done
python3 -m http.server "$UP_PORT" --bind 127.0.0.1 --directory "$WORK/files" >"$WORK/upstream.log" 2>&1 &
up_pid=$!

cat >"$WORK/levee.yaml" <<EOF
node:
  http: 127.0.0.1:$PORT
  data_dir: /data
cache:
  persist: false
routes:
  - name: files
    prefix: /files/
    upstream: http://127.0.0.1:$UP_PORT/
    cache: {fresh: 1h, stale: 1h, stale_if_error: 1h}
EOF
docker run -d --name "$NAME" --network host --memory "$LIMIT" --memory-swap "$LIMIT" \
	-v "$WORK/levee.yaml:/etc/levee/levee.yaml:ro" levee:memcheck >/dev/null
for ((i = 0; i < 100; i++)); do
	curl -fsS "http://127.0.0.1:$PORT/-/readyz" >/dev/null 2>&1 && break
	sleep 0.2
done
docker logs "$NAME" 2>&1 | grep -m1 '"garbage collector"' || true

echo "filling $FILL_MIB MiB"
start=$(date +%s)
seq 0 $((N - 1)) | xargs -P 8 -I{} curl -fsS -o /dev/null "http://127.0.0.1:$PORT/files/{}" ||
	echo "some fills failed"
echo "filled in $(($(date +%s) - start)) s"

# A full cache admits a new answer only over one asked for less often
# (otter's W-TinyLFU): each of 50 answers is asked for 4 times, and the
# 4th must be a hit.
hits=0
for ((i = 0; i < 50; i++)); do
	for ((j = 0; j < 3; j++)); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/files/$i"; done
	if curl -fsS -o /dev/null -D - "http://127.0.0.1:$PORT/files/$i" | grep -qi '^x-cache: HIT'; then
		hits=$((hits + 1))
	fi
done

id=$(docker inspect -f '{{.Id}}' "$NAME")
state=$(docker inspect -f 'oom_killed={{.State.OOMKilled}} running={{.State.Running}}' "$NAME")
peak=""
for f in /sys/fs/cgroup/memory/docker/$id/memory.max_usage_in_bytes /sys/fs/cgroup/system.slice/docker-$id.scope/memory.peak; do
	[[ -r $f ]] && peak=$(cat "$f") && break
done
metrics=$(curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -E '^levee_cache_(bytes|entries) ' || true)
echo "$state; peak memory: ${peak:-unknown} bytes (limit $LIMIT); answers asked for 4 times: $hits of 50 hits"
echo "$metrics"
docker stats --no-stream --format 'now: {{.MemUsage}}' "$NAME"
if [[ $state != "oom_killed=false running=true" || $hits -lt 50 ]]; then
	echo "FAIL"
	exit 1
fi
echo "PASS"
