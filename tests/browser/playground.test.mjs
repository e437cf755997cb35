// The playground, driven as a person would: fill the form, press Run, read the table on screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { launch } from './harness.mjs';

test('the playground runs a storage round trip and shows the result', async () => {
  const b = await launch();
  try {
    const { page } = b;
    await page.goto(`${b.server.url}/`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('input[name="pages"]', '64');
    await page.click('#roundtrip button');
    await page.waitForSelector('#result:not([hidden])');
    const cells = await page.$$eval('#result tr', (rows) => Object.fromEntries(rows.map((r) => [r.cells[0].textContent, r.cells[1].textContent])));
    assert.equal(cells['pages written'], '64');
    assert.equal(cells['file length'], `${64 * 4096} bytes`);
    assert.equal(cells['pages that differ'], '0');
    assert.deepEqual(await page.$$eval('#files li', (li) => li.map((x) => x.textContent)), ['playground.db']);
    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/playground.png', fullPage: true });
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});
