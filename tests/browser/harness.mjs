// Shared set-up for the browser tests: a server on 127.0.0.1 and Debian's Chromium driven by
// playwright-core, each browser in a fresh profile directory so OPFS starts empty.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/**
 * Starts a server and a browser with a new profile. `profile` reuses a directory and `port` a
 * port (a restart: OPFS belongs to the origin, and the port is part of it). `build: 'test'` loads
 * the test build (dist/test/: the shipped one plus the storage layer's block files).
 */
export async function launch({ isolated = true, profile, port = 0, build } = {}) {
  const server = await startServer({ isolated, port });
  const dir = profile ?? mkdtempSync(join(tmpdir(), 'cairn-profile-'));
  const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: ARGS });
  const errors = [];
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${server.url}/tests/browser/page.html${build ? `?build=${build}` : ''}`);
  await page.waitForFunction(() => window.cairnReady === true);
  return {
    page,
    context,
    server,
    profile: dir,
    errors,
    /** Closes the browser; keeps the profile when `keepProfile` (to start again on it). */
    async close({ keepProfile = false } = {}) {
      await context.close();
      await server.close();
      if (!keepProfile) rmSync(dir, { recursive: true, force: true });
    },
  };
}
