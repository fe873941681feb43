#!/usr/bin/env bash
# Makes sure this checkout has its own cluster credentials in ./.env:
# LEVEE_CLUSTER_SECRET and LEVEE_CLUSTER_ADMIN_TOKEN, each 32 random bytes
# from `bin/levee secret -env`. `make run` (scripts/run-local.sh) reads
# them, and so does docker compose (it loads .env from the project dir).
# It runs once per checkout: an existing value is kept, a missing one is
# added. .env is in .gitignore; never commit it. Delete it to rotate both
# (then restart every node of a cluster at once: they must agree).
set -euo pipefail
cd "$(dirname "$0")/.."
file=${ENV_FILE:-.env}
keys=(LEVEE_CLUSTER_SECRET LEVEE_CLUSTER_ADMIN_TOKEN)

has() { [[ -f $file ]] && grep -q "^$1=" "$file"; }
missing=()
for k in "${keys[@]}"; do has "$k" || missing+=("$k"); done
((${#missing[@]})) || exit 0
[[ -x bin/levee ]] || { echo "dotenv: bin/levee is missing: run make build" >&2; exit 1; }

umask 077 # the file holds credentials: owner only
fresh=$(bin/levee secret -env)
if [[ ! -e $file ]]; then
  tmp=$(mktemp "$file.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  {
    echo "# This checkout's Levee credentials, made by scripts/dotenv.sh with"
    echo "# \`levee secret -env\`. Read by make run and docker compose. Never commit it."
    echo "$fresh"
  } >"$tmp"
  # ln fails if another run created the file meanwhile; its values win.
  if ln "$tmp" "$file" 2>/dev/null; then
    echo "dotenv: wrote a fresh cluster secret and admin token to $file" >&2
  fi
  exit 0
fi
for k in "${missing[@]}"; do
  grep "^$k=" <<<"$fresh" >>"$file"
  echo "dotenv: added a fresh $k to $file" >&2
done
