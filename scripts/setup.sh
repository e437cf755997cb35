#!/usr/bin/env bash
# Installs what building and testing cairn needs, skipping what is already there:
# the wasm target, rustfmt and clippy, the wasm-bindgen CLI at the version Cargo.lock pins,
# Debian's Chromium, firefox-esr and WebKitGTK's WebDriver under Xvfb (unless --no-browser), and
# the npm packages from the lockfiles (the repository's: playwright-core, puppeteer-core,
# selenium-webdriver drive the browsers, kysely and drizzle-orm for the ORM entries' tests; the
# benchmark's; the bundler tests' Vite and webpack; React for the hook's test).
# Fails loudly when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

browser=1
for arg in "$@"; do
  case "$arg" in
    --no-browser) browser=0 ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

say() { printf '\n== setup: %s\n' "$*"; }
die() { printf '\nsetup FAILED: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi; }

command -v cargo >/dev/null || die "cargo is not installed (install Rust with rustup first)"
command -v node >/dev/null || die "node is not installed (Node.js 20 or newer)"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown || die "rustup target add wasm32-unknown-unknown"
fi
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    say "adding $component"
    rustup component add "$component" || die "rustup component add $component"
  fi
done

# The CLI must match the wasm-bindgen crate exactly; Cargo.lock is the source of truth.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
[ -n "$want" ] || die "could not read the wasm-bindgen version from Cargo.lock"
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (found: ${have:-none}); this takes a few minutes once"
  # Not --locked: one of its locked dependencies is not in every registry mirror.
  CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo install wasm-bindgen-cli --version "$want" --force \
    || die "cargo install wasm-bindgen-cli --version $want"
fi

# The browsers the tests drive (docs/browsers.md): Chromium, firefox-esr, and WebKitGTK's
# WebDriver with the X server it runs under. Only the missing ones are installed.
if [ "$browser" = 1 ]; then
  missing=()
  [ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
  [ -x "${FIREFOX:-/usr/bin/firefox-esr}" ] || missing+=(firefox-esr)
  [ -x "${WEBKIT_DRIVER:-/usr/bin/WebKitWebDriver}" ] || missing+=(webkit2gtk-driver)
  [ -x /usr/bin/Xvfb ] || missing+=(xvfb)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian's ${missing[*]}"
    command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} (or set CHROMIUM, FIREFOX, WEBKIT_DRIVER to their paths)"
    as_root apt-get update -qq || die "apt-get update"
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]}"
  fi
fi

# npm ci only when the lockfile changed since the last install (a hash of it is kept beside).
npm_ci() { # dir
  local dir=$1 sum
  sum=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$dir/node_modules/.lock-sha256" 2>/dev/null)" != "$sum" ]; then
    say "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in $dir"
    echo "$sum" > "$dir/node_modules/.lock-sha256"
  fi
}
npm_ci .
if [ -f bench-browser/package-lock.json ]; then npm_ci bench-browser; fi
# The local-first suite's peers (Yjs, Automerge, Loro, TinyBase, PouchDB, RxDB, GUN): its own lock file.
if [ -f bench-browser/localfirst/package-lock.json ]; then npm_ci bench-browser/localfirst; fi
# Vite and webpack for the bundler tests (tests/bundlers/).
npm_ci tests/bundlers
# React for the test of cairn-db/react (tests/browser/watch.test.mjs).
npm_ci tests/react
say "ready"
