// The corpus that decides what stays in cairn.wasm (scripts/corpus.mjs) is SQL users write, and
// none of it is this benchmark's: the split is judged here, so it must not be drawn from here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { corpus, benchStatements, typical } from '../../scripts/corpus.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('the split corpus holds no statement of the workloads, and the common kinds of SQL', () => {
  const inBench = benchStatements(root);
  // The guard recognises the workloads' own statements, whatever their spacing and case.
  assert.ok(inBench('SELECT * FROM t1 WHERE id = ?'));
  assert.ok(inBench('select  count(*) AS n FROM t1'));
  assert.ok(!inBench('SELECT * FROM t1 WHERE id = 1'));
  const all = corpus(root).flatMap((s) => s.statements.map((x) => x.sql));
  assert.ok(all.length > 1000, `${all.length} statements`);
  assert.deepEqual(all.filter(inBench), []);
  for (const shape of [/\bJOIN\b/i, /\bLEFT JOIN\b/i, /\bGROUP BY\b/i, /\bEXISTS\s*\(/i, /\bIN\s*\(\s*SELECT\b/i, /\bOFFSET\b/i, /\bCASE\b/i, /^INSERT\b/i, /^UPDATE\b/i, /^DELETE\b/i, /^BEGIN\b/i]) {
    assert.ok(all.some((s) => shape.test(s)), `the corpus has ${shape}`);
  }
  for (const rare of ['EXPLAIN SELECT 1', 'ALTER TABLE t ADD COLUMN x', 'PRAGMA user_version', "SELECT hex('a')", 'SELECT * FROM sqlite_schema', 'SAVEPOINT a', "SELECT body ->> 'a' FROM doc", 'SELECT rank() OVER (ORDER BY x) FROM t']) {
    assert.equal(typical(rare), false, rare);
    assert.ok(!all.includes(rare));
  }
  // Every source is read: the README's and the example's statements are there.
  const sources = corpus(root).map((s) => s.source);
  for (const f of ['README.md', 'examples/todo/src/index.js']) assert.ok(sources.includes(f), f);
  const names = readdirSync(join(root, 'crates/sql/testscripts/diff')).filter((f) => f.endsWith('.sql'));
  assert.equal(sources.filter((s) => s.includes('testscripts/diff/')).length, names.length);
  assert.ok(readFileSync(join(root, 'scripts/split.mjs'), 'utf8').includes("from './corpus.mjs'"), 'the split runs the corpus');
});
