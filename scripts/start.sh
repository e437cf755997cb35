#!/usr/bin/env bash
# Builds the browser package and serves the playground on 127.0.0.1 (PORT, default 8080).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
bash scripts/setup.sh --no-browser
node scripts/build.mjs
exec node scripts/serve.mjs --port "${PORT:-8080}"
