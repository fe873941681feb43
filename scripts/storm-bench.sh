#!/usr/bin/env bash
# A 429 storm, seen from the upstream (docs/benchmarks.md): the same open-
# loop load and the same storm (every call answered 429 + Retry-After for a
# while) against
#   pause          a 3-node Levee cluster of this checkout (host pause on)
#   nopause        a 3-node Levee cluster of $OLD, the release before the
#                  pause (retries with backoff, each call obeying its own
#                  Retry-After)
#   nginx          one nginx, proxy_cache + proxy_next_upstream, one peer
#   nginx2         the same nginx with the provider's host as two peers
#                  (a name with two addresses), so proxy_next_upstream and
#                  max_fails have something to act on
# each in front of a fresh demo upstream, whose call log gives the calls per
# second it received. bench/storm/README.md explains the scenario and the
# nginx configuration.
#
# Needs go, git, taskset and nginx on PATH. Builds this checkout into $WORK
# and $OLD with `make build` in a worktree at $NOPAUSE (removed at the end
# when this script made it). Every process it starts is stopped on exit.
# Output: $WORK/<run>.json, $WORK/table.md (also printed), logs per run.
set -euo pipefail
cd "$(dirname "$0")/.."

OLD=${OLD:-79b8327}
NOPAUSE=${NOPAUSE:-/tmp/nopause}
WORK=${WORK:-$(mktemp -d /tmp/storm.XXXXXX)}
RUNS=${RUNS:-"pause nopause nginx nginx2"}
CPU_LOAD=${CPU_LOAD:-0}   # load generator and demo upstream
CPU_PROXY=${CPU_PROXY:-1} # the proxies under test: Levee nodes or nginx
STORM_FLAGS=${STORM_FLAGS:-} # more `storm run` flags, e.g. "-rate 150"
UP_PORT=${UP_PORT:-19000}
HTTP_BASE=${HTTP_BASE:-18081}     # Levee node i: HTTP_BASE+i-1
GOSSIP_BASE=${GOSSIP_BASE:-17947} # gossip GOSSIP_BASE+i-1
RAFT_BASE=${RAFT_BASE:-18301}     # Raft and peer messages RAFT_BASE+i-1
NGINX_PORT=${NGINX_PORT:-18090}
UPSTREAM=http://127.0.0.1:$UP_PORT

pids=()
made_worktree=0
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if ((made_worktree)) && [[ -z ${KEEP_WORKTREE:-} ]]; then
    git worktree remove --force "$NOPAUSE"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build() {
  mkdir -p "$WORK/bin"
  CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/levee" ./cmd/node
  CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/demo-upstream" ./cmd/demo-upstream
  go build -o "$WORK/bin/storm" ./bench/storm
  if [[ $RUNS == *nopause* && ! -x $NOPAUSE/bin/levee ]]; then
    if [[ ! -e $NOPAUSE ]]; then
      git worktree add --detach "$NOPAUSE" "$OLD"
      made_worktree=1
    fi
    make -C "$NOPAUSE" build
  fi
}

# start_on CPU LOG CMD...: CMD in the background, pinned to CPU, output
# to LOG; its pid joins pids (taskset execs CMD, so it is CMD's pid).
start_on() {
  local cpu=$1 log=$2
  shift 2
  taskset -c "$cpu" "$@" >"$log" 2>&1 &
  pids+=($!)
}

start_upstream() {
  # The log must keep every call of a run (about 3,000 here).
  start_on "$CPU_LOAD" "$1/upstream.log" "$WORK/bin/demo-upstream" -listen "127.0.0.1:$UP_PORT" -log-size 200000
  "$WORK/bin/storm" wait -targets "$UPSTREAM"
}

# levee_config DIR I: node I's config. The comments route of
# scripts/run-local.sh with a 1 s fresh window and no stale window, so
# most requests need the upstream (stale_if_error still serves what was
# cached when the upstream fails); host caps far above the load, so
# what is measured is the pause, not a token bucket (both releases read
# route limits; this release makes them the host's, cluster-wide).
levee_config() {
  local dir=$1 i=$2 join=""
  for j in 1 2 3; do join+="${join:+, }127.0.0.1:$((GOSSIP_BASE + j - 1))"; done
  cat <<YAML
node:
  name: n$i
  http: 127.0.0.1:$((HTTP_BASE + i - 1))
  data_dir: $dir/n$i
  gossip: 127.0.0.1:$((GOSSIP_BASE + i - 1))
  raft: 127.0.0.1:$((RAFT_BASE + i - 1))
  join: [$join]
  bootstrap_expect: 3
cache:
  persist: false
routes:
  - name: comments
    prefix: /comments/
    upstream: $UPSTREAM/api/
    tenant_header: X-Tenant
    cache: {fresh: 1s, stale: 0s, stale_if_error: 10m}
    limits: {inflight: 1024, rate: 2000, burst: 2000}
YAML
}

# start_levee DIR BIN: a 3-node cluster of BIN, ready with a Raft leader;
# sets targets. (Not run in $(...): the pids must reach this shell.)
start_levee() {
  local dir=$1 bin=$2
  targets=""
  # A fresh secret per run, in the environment only (no file holds it).
  LEVEE_CLUSTER_SECRET=$("$WORK/bin/levee" secret -env | sed -n 's/^LEVEE_CLUSTER_SECRET=//p')
  export LEVEE_CLUSTER_SECRET
  for i in 1 2 3; do
    levee_config "$dir" "$i" >"$dir/n$i.yaml"
    start_on "$CPU_PROXY" "$dir/n$i.log" "$bin" -config "$dir/n$i.yaml"
    targets+="${targets:+,}http://127.0.0.1:$((HTTP_BASE + i - 1))"
  done
  "$WORK/bin/storm" wait -members 3 -targets "$targets"
}

# nginx_config DIR PEERS: a careful operator's cache in front of the same
# upstream (bench/storm/README.md walks through it). PEERS server lines:
# 2 models a provider name with two addresses.
nginx_config() {
  local dir=$1 peers=$2 servers="" nginx_user=""
  # As root, the workers would switch to nobody, who cannot enter $dir.
  if ((EUID == 0)); then nginx_user="user root root;"; fi
  for _ in $(seq 1 "$peers"); do
    servers+="        server 127.0.0.1:$UP_PORT max_fails=1 fail_timeout=5s;"$'\n'
  done
  cat <<NGINX
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 8192;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
$nginx_user
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    proxy_cache_path $dir/cache levels=1:2 keys_zone=api:10m max_size=256m inactive=10m use_temp_path=off;

    upstream demo {
        zone demo 64k;
$servers        keepalive 64;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location /comments/ {
            proxy_pass http://demo/api/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 2s;
            proxy_send_timeout 10s;
            proxy_read_timeout 10s;

            proxy_next_upstream error timeout http_429 http_503;
            proxy_next_upstream_tries 2;
            proxy_next_upstream_timeout 20s;

            proxy_cache api;
            proxy_cache_key \$scheme\$proxy_host\$request_uri\$http_x_tenant;
            proxy_cache_valid 200 1s;
            proxy_cache_revalidate on;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 5s;
            proxy_cache_use_stale error timeout updating http_429 http_500 http_502 http_503 http_504;
            add_header X-Cache \$upstream_cache_status always;
        }
    }
}
NGINX
}

# start_nginx DIR PEERS: nginx with PEERS upstream peers; sets targets.
start_nginx() {
  local dir=$1 peers=$2
  mkdir -p "$dir/tmp" "$dir/cache"
  nginx_config "$dir" "$peers" >"$dir/nginx.conf"
  nginx -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/nginx-error.log"
  start_on "$CPU_PROXY" "$dir/nginx.log" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/nginx-error.log"
  targets=http://127.0.0.1:$NGINX_PORT
  "$WORK/bin/storm" wait -targets "$targets"
}

# measure RUN LABEL TARGETS: the storm against TARGETS, result in $WORK/RUN.json.
measure() {
  local run=$1 label=$2 targets=$3
  # shellcheck disable=SC2086 # STORM_FLAGS is a list of flags
  taskset -c "$CPU_LOAD" "$WORK/bin/storm" run -label "$label" -targets "$targets" \
    -upstream "$UPSTREAM" -out "$WORK/$run.json" $STORM_FLAGS
}

one_run() {
  local run=$1 dir=$WORK/$1 label targets=""
  mkdir -p "$dir"
  start_upstream "$dir"
  case $run in
  pause) start_levee "$dir" "$WORK/bin/levee"; label="levee pause" ;;
  nopause) start_levee "$dir" "$NOPAUSE/bin/levee"; label="levee $OLD" ;;
  nginx) start_nginx "$dir" 1; label="nginx 1 peer" ;;
  nginx2) start_nginx "$dir" 2; label="nginx 2 peers" ;;
  *) echo "unknown run $run (pause, nopause, nginx, nginx2)" >&2; exit 2 ;;
  esac
  measure "$run" "$label" "$targets"
  stop_all
}

build
echo "work dir: $WORK"
results=()
for run in $RUNS; do
  one_run "$run"
  results+=("$WORK/$run.json")
done
"$WORK/bin/storm" table "${results[@]}" | tee "$WORK/table.md"
