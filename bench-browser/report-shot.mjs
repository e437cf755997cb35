#!/usr/bin/env node
// Opens www/report/ in headless Chromium on a results file and saves a full-page screenshot,
// to check that the charts render.
// usage: node report-shot.mjs [results/NAME.json] [--png FILE] [--page localfirst.html]
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from './server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..');

export async function shot(resultsFile = join(HERE, 'results', 'all-10k.json'), png = join(HERE, 'results', 'report.png'), pageName = 'index.html') {
  const server = await serve({ '/': REPO }, { cache: false });
  const profile = mkdtempSync(join(tmpdir(), 'cairn-report-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 900, height: 1200 },
  });
  try {
    const page = context.pages()[0] || (await context.newPage());
    const data = '/' + relative(REPO, resolve(resultsFile)).split('\\').join('/');
    await page.goto(`${server.url}/www/report/${pageName}?data=${encodeURIComponent(data)}`);
    await page.waitForSelector('body[data-rendered]', { timeout: 30_000 });
    const state = await page.evaluate(() => ({ rendered: document.body.dataset.rendered, charts: document.querySelectorAll('svg.chart').length, bars: document.querySelectorAll('svg.chart rect').length }));
    if (state.rendered !== 'true') throw new Error('report did not render: ' + (await page.textContent('#status')));
    await page.screenshot({ path: png, fullPage: true });
    console.log(`${png}: ${state.charts} charts, ${state.bars} bars`);
    return state;
  } finally {
    await context.close();
    await server.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--png');
  const png = i >= 0 ? resolve(args.splice(i, 2)[1]) : undefined;
  const j = args.indexOf('--page');
  const pageName = j >= 0 ? args.splice(j, 2)[1] : undefined;
  await shot(args[0] ? resolve(args[0]) : undefined, png, pageName);
}
