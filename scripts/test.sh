#!/usr/bin/env bash
# Runs every test of cairn: formatting, lints (native and wasm), the Rust tests, the browser build
# with its size table, and the browser tests in headless Chromium over real OPFS, then on Firefox
# and WebKitGTK (docs/browsers.md).
# Installs what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
export CARGO_TERM_COLOR=never

step() { local name=$1; shift; printf '\n== test: %s\n' "$name"; "$@" || { printf '\ntest FAILED at: %s\n' "$name" >&2; exit 1; }; }

step setup bash scripts/setup.sh
# The docs against the sources: every error code in its table, every file and function a doc names.
step "docs" node --test tests/docs/
step "cargo fmt" cargo fmt --all --check
step "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
# The native shell and the relay (tokio) have no wasm build; everything else must lint clean for the browser.
step "cargo clippy (wasm)" cargo clippy --workspace --exclude cairn-cli --exclude cairn-relay --target wasm32-unknown-unknown -- -D warnings
step "cargo clippy (wasm, sync)" cargo clippy -p cairn-wasm --features sync --target wasm32-unknown-unknown -- -D warnings
step "cargo clippy (wasm, testing)" cargo clippy -p cairn-wasm --features testing --target wasm32-unknown-unknown -- -D warnings
step "cargo test" cargo test --workspace
# Two relays sharing one PostgreSQL (a throwaway cluster on a loopback port; installs postgresql when missing).
step "relay over PostgreSQL" bash scripts/relay-postgres-test.sh
step "build and size" node scripts/build.mjs
step "types" node_modules/.bin/tsc -p tests/types
step "types (Drizzle's entry)" node_modules/.bin/tsc -p tests/types/tsconfig.drizzle.json
# cairn-db/node: the same engine in Node.js over node:fs files, and its files in the native shell.
step "node tests" node --test tests/node/
step "browser tests" node --test --test-concurrency=1 tests/browser/
# The packed package in apps built by Vite and webpack 5 with no configuration, and examples/todo
# (also offline, from a service worker's cache).
step "bundlers and the example" npm --prefix tests/bundlers test
# The same tests on Firefox (docs/browsers.md), all of them: the tests of a file share one browser.
step "browser tests on Firefox" env CAIRN_BROWSER=firefox node --test --test-concurrency=1 tests/browser/
# WebKitGTK refuses OPFS sync access handles: open() must refuse with UNSUPPORTED_BROWSER, not hang.
step "WebKitGTK: the clear refusal" node --test --test-timeout=120000 tests/webkit/
# One sample of every workload for every engine, small: proves the harness and its checks, times nothing.
step "benchmark smoke pass" npm --prefix bench-browser test
