#!/usr/bin/env bash
# Hits against nginx and Varnish (docs/benchmarks.md, `make bench-compare`):
# the same keys through
#   ceiling   bare Go net/http answering the hot key's body and a hit's
#             headers, nothing else (bench/ceiling): Go's ceiling
#   nginx     one worker, proxy_cache (files in $WORK), proxy_cache_lock on
#   varnish   varnishd -F, malloc storage, default thread pools
#   levee     one Levee node of this checkout
#   cluster   three Levee nodes of this checkout, requests through node 1
#             (the cold burst: spread over the three)
# and, only when named in SERVERS, two more constant servers like the
# ceiling, on Go servers that are not net/http (bench/frontends, its own
# module; built only then):
#   fasthttp  valyala/fasthttp: a goroutine per connection, no allocation
#   gnet      panjf2000/gnet: one epoll event loop, as nginx; no HTTP
#             parser (counts request heads), so a floor, not a server
# each in front of one demo upstream whose answers say
# `Cache-Control: public, max-age=600` (all four caches keep them 10 min)
# and are about 1 KiB (bench/compare/doc.go says how). Cases:
#   hot    warm one key, then wrk -t1 -c64 -d$DURATION --latency on it
#   10k    warm 10,000 keys, then the same wrk drawing uniformly from them
#          (a Lua script): every request is a hit
#          (both: an unrecorded wrk run first, $WARMUP for the hot key and
#          $WARMUP_10K for 10k keys, to grow the server's connections,
#          threads and heap, and to let a cluster settle: after the fill
#          its owners are still pushing each new entry to its replica, and
#          the near copies of node 1 are not yet renewed; the upstream's
#          calls during the measured run are counted: 0 says all were hits)
#   cold   500 connections opened, then one request each, sent together,
#          for a key no one asked for; the upstream answers such keys in
#          $COLD_LATENCY. Upstream calls for the key, p99 of the 500.
# Per round, per case, each server is started fresh (empty cache), pinned
# to core $CPU_SERVER, measured, and stopped; the servers' order rotates
# from round to round. wrk, the Go load tool (bench/compare) and the demo
# upstream share core $CPU_LOAD: the upstream is idle while hits are
# measured, and core $CPU_SERVER stays the server's alone.
#
# It is the benchmark, not a test: nothing gates on its numbers, and they
# mean little on a machine other work shares.
#
# Needs go, taskset, curl, wrk, nginx and varnishd on PATH; run as root,
# it installs the missing ones (go aside) with apt-get; installing nginx
# or varnish also starts their system services (ports 80 and 6081), which
# this script does not use. Builds levee, demo-upstream, ceiling, compare
# and storm (for `storm wait`) into $WORK/bin. Every process it starts is
# stopped on exit. Output: $WORK/results.tsv (a row per measurement),
# $WORK/table.md (also printed), configs and logs per measurement.
#
# With the defaults (3 rounds, 5 s per wrk run) it takes about 7 minutes.
# Shorter: DURATION=2s ROUNDS=1 CASES="hot cold" SERVERS="nginx levee".
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-$(mktemp -d /tmp/bench-compare.XXXXXX)}
DURATION=${DURATION:-5s}  # each wrk run
WARMUP=${WARMUP:-1s}      # the unrecorded wrk run before it; 0: none
WARMUP_10K=${WARMUP_10K:-5s} # the same before the 10k case
ROUNDS=${ROUNDS:-3}
CASES=${CASES:-"hot 10k cold"}
SERVERS=${SERVERS:-"ceiling nginx varnish levee cluster"}
CONNS=${CONNS:-64}      # wrk connections
KEYS=${KEYS:-10000}     # the 10k case's keys
COLD_N=${COLD_N:-500}   # the cold case's concurrent requests
COLD_LATENCY=${COLD_LATENCY:-100ms} # the upstream's answer time for cold keys
CPU_SERVER=${CPU_SERVER:-0} # the server under test, all its processes
CPU_LOAD=${CPU_LOAD:-1}     # wrk, bench/compare and the demo upstream
VARNISH_PARAMS=${VARNISH_PARAMS:-} # more varnishd flags, e.g. "-p thread_pools=1"
FRONT_PORT=${FRONT_PORT:-19120}   # fasthttp and gnet
UP_PORT=${UP_PORT:-19100}
CEILING_PORT=${CEILING_PORT:-19101}
NGINX_PORT=${NGINX_PORT:-19102}
VARNISH_PORT=${VARNISH_PORT:-19103}
LEVEE_PORT=${LEVEE_PORT:-19104}
HTTP_BASE=${HTTP_BASE:-19105}     # cluster node i: HTTP_BASE+i-1
GOSSIP_BASE=${GOSSIP_BASE:-19110} # gossip GOSSIP_BASE+i-1
RAFT_BASE=${RAFT_BASE:-19115}     # Raft and peer messages RAFT_BASE+i-1
UPSTREAM=http://127.0.0.1:$UP_PORT
RESULTS=$WORK/results.tsv

pids=()    # the server under test
up_pid=""  # the demo upstream, for the whole run
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [[ -n $up_pid ]]; then
    kill -TERM "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ensure_tools: the commands this run needs; as root, apt-get installs
# the missing ones.
ensure_tools() {
  local need=() pair cmd pkg
  if ! command -v go >/dev/null; then
    echo "go is not on PATH (this checkout needs the version go.mod names)" >&2
    exit 1
  fi
  for pair in taskset:util-linux curl:curl wrk:wrk nginx:nginx-light varnishd:varnish; do
    cmd=${pair%%:*} pkg=${pair##*:}
    [[ $cmd == nginx && $SERVERS != *nginx* ]] && continue
    [[ $cmd == varnishd && $SERVERS != *varnish* ]] && continue
    command -v "$cmd" >/dev/null || need+=("$pkg")
  done
  ((${#need[@]})) || return 0
  if ((EUID != 0)) || ! command -v apt-get >/dev/null; then
    echo "missing: ${need[*]} (as root: apt-get install -y ${need[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
}

build() {
  mkdir -p "$WORK/bin"
  CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/levee" ./cmd/node
  CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/demo-upstream" ./cmd/demo-upstream
  CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/ceiling" ./bench/ceiling
  go build -o "$WORK/bin/compare" ./bench/compare
  go build -o "$WORK/bin/storm" ./bench/storm
  if [[ " $SERVERS " == *" fasthttp "* || " $SERVERS " == *" gnet "* ]]; then
    (cd bench/frontends && CGO_ENABLED=0 go build -trimpath -o "$WORK/bin/frontends" .)
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

# start_upstream: the demo upstream for the whole run. Answers carry
# max-age=600, their content never changes during a run (so every body
# keeps its size), and cold keys (prefix c-) take COLD_LATENCY, through
# a "slow" fault limited to them: warm-ups stay fast.
start_upstream() {
  taskset -c "$CPU_LOAD" "$WORK/bin/demo-upstream" -listen "127.0.0.1:$UP_PORT" \
    -max-age 10m -change-every 24h >"$WORK/upstream.log" 2>&1 &
  up_pid=$!
  "$WORK/bin/storm" wait -targets "$UPSTREAM"
  curl -fsS -XPOST "$UPSTREAM/-/faults" \
    -d "{\"mode\":\"slow\",\"delay\":\"$COLD_LATENCY\",\"paths\":[\"/api/stories/c-\"]}" >/dev/null
}

start_ceiling() {
  start_on "$CPU_SERVER" "$1/ceiling.log" "$WORK/bin/ceiling" \
    -listen "127.0.0.1:$CEILING_PORT" -from "$UPSTREAM$HOT"
  targets=http://127.0.0.1:$CEILING_PORT
  "$WORK/bin/storm" wait -targets "$targets"
}

# nginx_config DIR: one worker, the cache in DIR. keepalive_requests is
# raised from its default 1000 so nginx, like Go and Varnish, never closes
# a client's connection for its request count.
nginx_config() {
  local dir=$1 nginx_user=""
  # As root, the worker would switch to nobody, who cannot enter $dir.
  if ((EUID == 0)); then nginx_user="user root root;"; fi
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
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    proxy_cache_path $dir/cache levels=1:2 keys_zone=api:10m max_size=256m inactive=10m use_temp_path=off;

    upstream demo {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location /api/ {
            proxy_pass http://demo;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache api;
            proxy_cache_valid 200 10m;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 5s;
            add_header X-Cache \$upstream_cache_status always;
        }
    }
}
NGINX
}

start_nginx() {
  local dir=$1
  mkdir -p "$dir/tmp" "$dir/cache"
  nginx_config "$dir" >"$dir/nginx.conf"
  nginx -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/nginx-error.log"
  start_on "$CPU_SERVER" "$dir/nginx.log" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/nginx-error.log"
  targets=http://127.0.0.1:$NGINX_PORT
  "$WORK/bin/storm" wait -targets "$targets"
}

# varnish_vcl: the demo upstream as the backend, the answers' own TTL
# (10 min) made explicit, no grace (Levee's stale window is 0 too), and
# X-Cache as the others send it.
varnish_vcl() {
  cat <<VCL
vcl 4.1;
backend demo {
    .host = "127.0.0.1";
    .port = "$UP_PORT";
}
sub vcl_backend_response {
    set beresp.ttl = 10m;
    set beresp.grace = 0s;
}
sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
VCL
}

# start_varnish DIR: taskset pins the manager, and every thread of the
# child it forks inherits the mask. -j none: as root the default jail
# would run the child as varnish's user, who cannot read $WORK.
start_varnish() {
  local dir=$1
  varnish_vcl >"$dir/default.vcl"
  # shellcheck disable=SC2086 # VARNISH_PARAMS is a list of flags
  start_on "$CPU_SERVER" "$dir/varnish.log" varnishd -F -j none -T none \
    -a "127.0.0.1:$VARNISH_PORT" -f "$dir/default.vcl" -s malloc,256m -n "$dir/varnish" $VARNISH_PARAMS
  targets=http://127.0.0.1:$VARNISH_PORT
  "$WORK/bin/storm" wait -targets "$targets"
}

# levee_config NAME HTTP DIR [GOSSIP RAFT JOIN]: one node's config. The
# route keeps answers 10 min, like the upstream's max-age; the host's caps
# are far above any load here, so a warm-up is never held by a bucket.
levee_config() {
  local name=$1 http=$2 dir=$3 gossip=${4:-} raft=${5:-} join=${6:-}
  cat <<YAML
node:
  name: $name
  http: 127.0.0.1:$http
  data_dir: $dir/$name
YAML
  if [[ -n $gossip ]]; then
    cat <<YAML
  gossip: 127.0.0.1:$gossip
  raft: 127.0.0.1:$raft
  join: [$join]
  bootstrap_expect: 3
YAML
  fi
  cat <<YAML
cache:
  persist: false
hosts:
  $UPSTREAM: {inflight: 256, rate: 100000, burst: 100000}
routes:
  - name: api
    prefix: /api/
    upstream: $UPSTREAM/api/
    cache: {fresh: 10m, stale: 0s}
YAML
}

start_levee() {
  local dir=$1
  levee_config n1 "$LEVEE_PORT" "$dir" >"$dir/n1.yaml"
  start_on "$CPU_SERVER" "$dir/n1.log" "$WORK/bin/levee" -config "$dir/n1.yaml"
  targets=http://127.0.0.1:$LEVEE_PORT
  "$WORK/bin/storm" wait -members 1 -targets "$targets"
}

start_fasthttp() { start_frontend "$1" fasthttp; }
start_gnet() { start_frontend "$1" gnet; }
start_frontend() {
  start_on "$CPU_SERVER" "$1/$2.log" "$WORK/bin/frontends" -server "$2" \
    -listen "127.0.0.1:$FRONT_PORT" -from "$UPSTREAM$HOT"
  targets=http://127.0.0.1:$FRONT_PORT
  "$WORK/bin/storm" wait -targets "$targets"
}

# constant SERVER: whether SERVER answers one constant hit (no cache, no
# upstream): the ceiling and the frontends.
constant() { [[ $1 == ceiling || $1 == fasthttp || $1 == gnet ]]; }

# start_cluster DIR: three nodes, all on CPU_SERVER, ready with a Raft
# leader; sets targets (node 1 first). (Not run in $(...): the pids must
# reach this shell.)
start_cluster() {
  local dir=$1 join="" i
  targets=""
  for i in 1 2 3; do join+="${join:+, }127.0.0.1:$((GOSSIP_BASE + i - 1))"; done
  for i in 1 2 3; do
    levee_config "n$i" $((HTTP_BASE + i - 1)) "$dir" $((GOSSIP_BASE + i - 1)) $((RAFT_BASE + i - 1)) "$join" >"$dir/n$i.yaml"
    start_on "$CPU_SERVER" "$dir/n$i.log" "$WORK/bin/levee" -config "$dir/n$i.yaml"
    targets+="${targets:+,}http://127.0.0.1:$((HTTP_BASE + i - 1))"
  done
  "$WORK/bin/storm" wait -members 3 -targets "$targets"
}

# wrk_row CASE SERVER ROUND DIR URL [WRK FLAGS...]: a warm-up, then one
# pinned wrk run, parsed into a row of $RESULTS with the upstream's calls
# during it (not for a constant server, which has no upstream).
wrk_row() {
  local case=$1 server=$2 round=$3 dir=$4 url=$5 count=() warmup=$WARMUP
  shift 5
  [[ $case == 10k ]] && warmup=$WARMUP_10K
  if [[ $warmup != 0 ]]; then
    taskset -c "$CPU_LOAD" wrk -t1 -c"$CONNS" -d"$warmup" "$@" "$url" >"$dir/wrk-warmup.txt"
  fi
  if ! constant "$server"; then
    curl -fsS -XPOST "$UPSTREAM/-/stats/reset" >/dev/null
    count=(-upstream "$UPSTREAM")
  fi
  taskset -c "$CPU_LOAD" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "$@" "$url" >"$dir/wrk.txt"
  "$WORK/bin/compare" wrk -row "$case,$server,$round" -out "$RESULTS" "${count[@]}" "$dir/wrk.txt"
}

# measure ROUND CASE SERVER: start SERVER fresh, run CASE, stop it.
measure() {
  local round=$1 case=$2 server=$3 dir=$WORK/r$1-$2-$3 base
  mkdir -p "$dir"
  "start_$server" "$dir"
  base=${targets%%,*} # node 1 of the cluster
  case $case in
  hot)
    constant "$server" || taskset -c "$CPU_LOAD" "$WORK/bin/compare" warm -base "$base" -keys 1
    wrk_row hot "$server" "$round" "$dir" "$base$HOT"
    ;;
  10k)
    constant "$server" || taskset -c "$CPU_LOAD" "$WORK/bin/compare" warm -base "$base" -keys "$KEYS" -c "$CONNS"
    wrk_row 10k "$server" "$round" "$dir" "$base" -s "$WORK/keys.lua"
    ;;
  cold)
    taskset -c "$CPU_LOAD" "$WORK/bin/compare" cold -targets "$targets" -name "r$round-$server" \
      -n "$COLD_N" -upstream "$UPSTREAM" -row "cold,$server,$round" -out "$RESULTS"
    ;;
  *) echo "unknown case $case (hot, 10k, cold)" >&2; exit 2 ;;
  esac
  # The node's own account of the run (near-cache and forward counts), for
  # reading a cluster's ratio; the ceiling and nginx/Varnish have none.
  [[ $server == levee || $server == cluster ]] && curl -fsS "$base/metrics" >"$dir/metrics.txt"
  stop_all
  tail -n 1 "$RESULTS" | awk -F'\t' '{printf "round %s %-4s %-8s req/s %8.0f  p99 %8.2f ms  upstream calls %s  errors %s\n", $3, $1, $2, $4, $5, ($6 < 0 ? "-" : $6), $7}'
}

# rotated ROUND: SERVERS, starting one further each round.
rotated() {
  local -a s
  read -r -a s <<<"$SERVERS"
  local n=${#s[@]} i
  for ((i = 0; i < n; i++)); do echo "${s[$(((i + $1 - 1) % n))]}"; done
}

versions() {
  local v=()
  [[ $SERVERS == *nginx* ]] && v+=("$(nginx -v 2>&1 | sed 's|.*nginx/|nginx |')")
  [[ $SERVERS == *varnish* ]] && v+=("$(varnishd -V 2>&1 | sed -n 's/.*(varnish-\([0-9.]*\).*/Varnish \1/p' | head -n 1)")
  v+=("Levee $(git describe --tags --always --dirty 2>/dev/null || echo dev)" "$(go env GOVERSION)")
  local IFS=,
  echo "${v[*]}" | sed 's/,/, /g'
}

ensure_tools
build
echo "work dir: $WORK"
HOT=$("$WORK/bin/compare" path hot)
"$WORK/bin/compare" lua -keys "$KEYS" >"$WORK/keys.lua"
LEVEE_CLUSTER_SECRET=$("$WORK/bin/levee" secret -env | sed -n 's/^LEVEE_CLUSTER_SECRET=//p')
export LEVEE_CLUSTER_SECRET # a fresh one per run, in the environment only
: >"$RESULTS"
start_upstream
for round in $(seq 1 "$ROUNDS"); do
  for case in $CASES; do
    for server in $(rotated "$round"); do
      [[ $case == cold ]] && constant "$server" && continue # nothing to coalesce
      measure "$round" "$case" "$server"
    done
  done
done
{
  echo "<!-- make bench-compare: $(date -u +%Y-%m-%d), $(versions); servers on core $CPU_SERVER, wrk -t1 -c$CONNS -d$DURATION (after $WARMUP unrecorded, $WARMUP_10K for 10k keys) and the upstream on core $CPU_LOAD; $ROUNDS rounds, medians; cold: $COLD_N requests, upstream latency $COLD_LATENCY -->"
  echo
  "$WORK/bin/compare" table "$RESULTS"
} >"$WORK/table.md"
cat "$WORK/table.md"
