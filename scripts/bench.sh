#!/usr/bin/env bash
# The full browser benchmark: cairn (over shared memory and over postMessage), SQLite WASM and PGlite,
# every workload, at 10,000 and at 100,000 rows, then a screenshot of the report page rendered from the results.
#   npm run bench [-- extra options for bench-browser/run.mjs, e.g. --samples 3]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
bash scripts/setup.sh
node scripts/build.mjs
cd bench-browser
node run.mjs --rows 10000 --out all-10k "$@"
node run.mjs --rows 100000 --out all-100k "$@"
node report-shot.mjs results/all-10k.json
echo "report: www/report/index.html?data=/bench-browser/results/all-10k.json (npm start serves it)"
