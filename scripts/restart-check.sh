#!/usr/bin/env bash
# The whole-cluster restart check: `make run`, Ctrl-C, `make run` again on
# the same data dirs, ROUNDS times. Each round must end with one leader that
# every node agrees on, holding every node as a voter, within BOUND seconds.
# Usage: scripts/restart-check.sh [ROUNDS] (NODES=3|5, KILL=1 for SIGKILL).
# Needs bin/ (make build). Uses its own ports and data dir, so it runs next
# to a `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-10}
NODES=${NODES:-3}
BOUND=${BOUND:-15}
export NODES BASE_HTTP=${BASE_HTTP:-18080} BASE_GOSSIP=${BASE_GOSSIP:-17946} BASE_RAFT=${BASE_RAFT:-18300}
export UPSTREAM=${UPSTREAM:-127.0.0.1:19000} DIR=${DIR:-./data/restart-check}
rm -rf "$DIR"; mkdir -p "$(dirname "$DIR")"

want=$(seq -s, -f 'n%g' 1 "$NODES")
# agreed prints "leader term" once every node names the same leader and
# holds exactly the voters n1..nN; it fails otherwise.
agreed() {
  local leader="" term=""
  for i in $(seq 1 "$NODES"); do
    local st
    st=$(curl -sf --max-time 1 "http://127.0.0.1:$((BASE_HTTP + i - 1))/-/cluster") || return 1
    local l v t
    l=$(sed -n 's/.*"leader": *"\([^"]*\)".*/\1/p' <<<"$st" | head -1)
    t=$(sed -n 's/.*"term": *\([0-9]*\).*/\1/p' <<<"$st" | head -1)
    v=$(tr -d ' \n' <<<"$st" | sed -n 's/.*"voters":\[\([^]]*\)\].*/\1/p' | tr -d '"')
    [[ -n $l && $v == "$want" ]] || return 1
    [[ -z $leader || $leader == "$l" ]] || return 1
    leader=$l term=$t
  done
  echo "$leader $term"
}

fail=0
for round in $(seq 1 "$ROUNDS"); do
  scripts/run-local.sh >"$DIR.round.log" 2>&1 &
  runner=$!
  start=$(date +%s%N) got=""
  while [[ -z $got ]] && (( ($(date +%s%N) - start) / 1000000 < BOUND * 1000 )); do
    got=$(agreed || true)
    [[ -n $got ]] || sleep 0.2
  done
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ -n $got ]]; then
    printf 'round %2d: leader %s (term %s), voters %s, after %d ms\n' "$round" ${got} "$want" "$took_ms"
  else
    printf 'round %2d: NO agreed leader within %ss\n' "$round" "$BOUND"
    for i in $(seq 1 "$NODES"); do
      echo "n$i: $(curl -s --max-time 1 "http://127.0.0.1:$((BASE_HTTP + i - 1))/-/cluster" | tr -d '\n' | sed -n 's/.*\("raft".*\)/\1/p')"
    done
    fail=1
  fi
  if [[ ${KILL:-0} == 1 ]]; then
    pkill -KILL -f "levee -config $DIR/" || true
  fi
  kill -TERM "$runner" 2>/dev/null || true  # what Ctrl-C does to `make run` (a background script ignores SIGINT)
  wait "$runner" 2>/dev/null || true
  ((fail)) && break
done
((fail)) && { echo "FAILED (logs in $DIR)"; exit 1; }
echo "all $ROUNDS rounds agreed ($NODES nodes)"
