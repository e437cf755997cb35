#!/usr/bin/env bash
# Runs the relay's PostgreSQL tests (crates/relay/tests/postgres.rs) against a throwaway cluster
# on a loopback port, removed afterwards. Installs Debian's postgresql when it is missing.
#   scripts/relay-postgres-test.sh              the tests
#   scripts/relay-postgres-test.sh bench [N..]  the load bench: one relay, then two, over the cluster
# The tests get the cluster's URL in CAIRN_RELAY_POSTGRES_URL and, in CAIRN_PG_CTL, a command
# that stops (`stop`, fast mode) or starts (`start`) it again on the same port.
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
start="$bin/pg_ctl -D $dir/data -o '-h 127.0.0.1 -p $port -k $dir' -l $dir/log -w start"
pg bash -c "$start" >/dev/null

# What the restart test runs: the same cluster, port and user as above.
cat >"$dir/pg-ctl" <<EOF
#!/usr/bin/env bash
set -euo pipefail
run() { if [ "\$(id -u)" = 0 ]; then runuser -u postgres -- "\$@"; else "\$@"; fi; }
case "\${1:-}" in
  stop) run "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
  start) run bash -c "$start" >/dev/null ;;
  *) echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
EOF
chmod 755 "$dir/pg-ctl"

export CAIRN_RELAY_POSTGRES_URL="host=127.0.0.1 port=$port user=cairn dbname=postgres"
export CAIRN_PG_CTL="$dir/pg-ctl"
if [ "${1:-}" = bench ]; then
  shift
  cargo bench -p cairn-relay --features postgres --bench load -- --two-relays "$@"
else
  # One at a time: the restart test stops the cluster the others use.
  cargo test -p cairn-relay --features postgres --test postgres -- --nocapture --test-threads=1
fi
