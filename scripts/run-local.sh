#!/usr/bin/env bash
# Starts the demo upstream and NODES Levee nodes as plain processes on
# loopback, each with its own generated config and data dir under
# ./data/local. Ctrl-C stops all of them cleanly.
# Credentials: LEVEE_CLUSTER_SECRET and LEVEE_CLUSTER_ADMIN_TOKEN from the
# environment, else this checkout's .env (ENV_FILE; scripts/dotenv.sh
# creates it on first use with bin/levee secret). Nothing fixed is used.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-3}
BASE_HTTP=${BASE_HTTP:-8080}
BASE_GOSSIP=${BASE_GOSSIP:-7946}   # node i gossips on BASE_GOSSIP+i
BASE_RAFT=${BASE_RAFT:-8300}       # node i speaks Raft on BASE_RAFT+i
UPSTREAM=${UPSTREAM:-127.0.0.1:9000}
DIR=${DIR:-./data/local}
if (( NODES < 1 || NODES > 9 )); then echo "NODES must be 1..9" >&2; exit 2; fi

# LEVEE_SECRET and LEVEE_ADMIN_TOKEN are this script's older names.
secret=${LEVEE_CLUSTER_SECRET:-${LEVEE_SECRET:-}}
admin=${LEVEE_CLUSTER_ADMIN_TOKEN:-${LEVEE_ADMIN_TOKEN:-}}
admin_from="your environment"
if [[ -z $secret || -z $admin ]]; then
  scripts/dotenv.sh
  # The last KEY=value line, one pair of surrounding quotes dropped.
  dotenv() { sed -n "s/^$1=//p" "${ENV_FILE:-.env}" | tail -n 1 | sed -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"; }
  secret=${secret:-$(dotenv LEVEE_CLUSTER_SECRET)}
  [[ -n $admin ]] || admin=$(dotenv LEVEE_CLUSTER_ADMIN_TOKEN) admin_from="${ENV_FILE:-.env} (LEVEE_CLUSTER_ADMIN_TOKEN)"
fi
# YAML single quotes: the only character to escape is the quote itself.
yq() { local s=${1//\'/\'\'}; printf "'%s'" "$s"; }

mkdir -p "$DIR"
pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping ${#pids[@]} processes..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

bin/demo-upstream -listen "$UPSTREAM" >"$DIR/demo-upstream.log" 2>&1 &
pids+=($!)

join=""
for i in $(seq 1 "$NODES"); do
  join+="${join:+, }127.0.0.1:$((BASE_GOSSIP + i))"
done
for i in $(seq 1 "$NODES"); do
  name="n$i"
  cat >"$DIR/$name.yaml" <<YAML
node:
  name: $name
  http: 127.0.0.1:$((BASE_HTTP + i - 1))
  data_dir: $DIR/$name
  gossip: 127.0.0.1:$((BASE_GOSSIP + i))
  raft: 127.0.0.1:$((BASE_RAFT + i))
  join: [$join]
  bootstrap_expect: $(( NODES >= 3 ? 3 : NODES ))
cluster:
  secret: $(yq "$secret")
  admin_token: $(yq "$admin")
routes:
  - name: comments
    prefix: /comments/
    upstream: http://$UPSTREAM/api/
    tenant_header: X-Tenant
  - name: users
    prefix: /users/
    upstream: http://$UPSTREAM/api/users/
    tenant_header: X-Tenant
    cache: {fresh: 5m, stale: 1h, stale_if_error: 24h}
YAML
  bin/levee -config "$DIR/$name.yaml" >"$DIR/$name.log" 2>&1 &
  pids+=($!)
done

for i in $(seq 1 "$NODES"); do
  url="http://127.0.0.1:$((BASE_HTTP + i - 1))/-/healthz"
  for _ in $(seq 1 100); do bin/levee health -url "$url" 2>/dev/null && break; sleep 0.1; done
done

echo "demo upstream: http://$UPSTREAM   (faults: curl -XPOST http://$UPSTREAM/-/faults -d '{\"mode\":\"down\"}')"
for i in $(seq 1 "$NODES"); do
  echo "levee n$i:      http://127.0.0.1:$((BASE_HTTP + i - 1))   (log $DIR/n$i.log)"
done
echo "try: curl -si http://127.0.0.1:$BASE_HTTP/comments/stories/1/comments -H 'X-Tenant: acme'"
echo "admin token: from $admin_from; for levee leave/remove: export LEVEE_ADMIN_TOKEN=<it>. Ctrl-C stops everything."
wait -n "${pids[@]}" || true
echo "a process exited; see logs in $DIR" >&2
