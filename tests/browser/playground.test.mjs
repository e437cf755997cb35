// The playground, driven as a person would: type statements, press Run, read the table on screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { launch } from './harness.mjs';

test('the playground runs SQL typed into its console and shows results, errors and tables', async () => {
  const b = await launch();
  try {
    const { page } = b;
    await page.goto(`${b.server.url}/`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#sql', `CREATE TABLE fruit (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL);
INSERT INTO fruit (name, price) VALUES ('apple', 1.25), ('pear', 2), ('fig', NULL);
SELECT name, price FROM fruit ORDER BY price DESC;`);
    await page.click('#go');
    await page.waitForSelector('#output .result:nth-child(3) table');
    const table = await page.$$eval('#output .result:nth-child(3) tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
    assert.deepEqual(table, [['name', 'price'], ['pear', '2'], ['apple', '1.25'], ['fig', 'NULL']]);
    const heads = await page.$$eval('#output .result .head', (h) => h.map((x) => x.textContent));
    assert.ok(heads.every((h) => / ms$/.test(h)), `every statement shows its time: ${heads}`);
    assert.match(await page.textContent('#output .result:nth-child(2)'), /3 changes/);
    assert.match(await page.textContent('#schema'), /CREATE TABLE fruit/);

    // An error shows its code and where it is.
    await page.fill('#sql', 'SELECT name\nFROM fruit WHERE price >>> 1;');
    await page.click('#go');
    await page.waitForSelector('#output .result.failed');
    const err = await page.textContent('#output .result.failed pre');
    assert.match(err, /^SYNTAX: /);
    assert.match(err, /line 2, column \d+/);

    // EXPLAIN shows the plan.
    await page.fill('#sql', 'CREATE INDEX fruit_price ON fruit (price);\nEXPLAIN SELECT name FROM fruit WHERE price > 1;');
    await page.click('#go');
    await page.waitForSelector('#output .result:nth-child(2) table');
    assert.match(await page.textContent('#output .result:nth-child(2) table'), /fruit_price/);

    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/playground.png', fullPage: true });
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});

test('the server refuses a path that is not one, and goes on serving', async () => {
  const { startServer } = await import('../../scripts/serve.mjs');
  const server = await startServer({ isolated: false });
  try {
    const status = async (path) => (await fetch(`${server.url}${path}`)).status;
    assert.equal(await status('//'), 400);
    assert.equal(await status('/%E0%A4'), 400);
    assert.equal(await status('/'), 200);
    assert.equal(await status('/dist/cairn-extra.js'), 200);
  } finally {
    await server.close();
  }
});
