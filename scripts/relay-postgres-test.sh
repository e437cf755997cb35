#!/usr/bin/env bash
# Runs the relay's PostgreSQL test (crates/relay/tests/postgres.rs) against a throwaway cluster
# on a loopback port, removed afterwards. Installs Debian's postgresql when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

port=${CAIRN_PG_PORT:-55432}
dir=$(mktemp -d)
# initdb refuses to run as root: the cluster then belongs to the postgres user.
pg() {
  if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; runuser -u postgres -- "$@"; else "$@"; fi
}
cleanup() {
  pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
pg "$bin/initdb" -D "$dir/data" -A trust -U cairn >/dev/null
pg "$bin/pg_ctl" -D "$dir/data" -o "-h 127.0.0.1 -p $port -k $dir" -l "$dir/log" -w start >/dev/null

CAIRN_RELAY_POSTGRES_URL="host=127.0.0.1 port=$port user=cairn dbname=postgres" \
  cargo test -p cairn-relay --features postgres --test postgres -- --nocapture
