// Window functions in the browser: the Worker runs them (from cairn-rest.wasm, which the first
// window query waits for), EXPLAIN shows the window step, and a misused call fails with its code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('window functions: ranks, a running total, a moving frame, EXPLAIN and an error', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const db = await cairn.open('window');
      await db.exec('CREATE TABLE s (id INTEGER PRIMARY KEY, team TEXT, pts INTEGER)');
      await db.transaction(async (tx) => {
        for (let i = 1; i <= 8; i++) await tx.run('INSERT INTO s VALUES (?, ?, ?)', [i, i % 2 ? 'a' : 'b', (i * 7) % 10]);
      });
      const rows = await db.query(
        `SELECT id, rank() OVER (PARTITION BY team ORDER BY pts DESC) AS r,
                sum(pts) OVER (ORDER BY id) AS running,
                avg(pts) OVER w AS moving
         FROM s WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)
         ORDER BY id`,
      );
      const plan = (await db.query('EXPLAIN SELECT row_number() OVER (ORDER BY pts) FROM s')).map((x) => Object.values(x)[0]);
      let err;
      try {
        await db.query('SELECT id FROM s WHERE row_number() OVER () > 1');
      } catch (e) {
        err = [e.code, e.message];
      }
      await db.close();
      return { rows, plan, err };
    });
    // pts by id: 7 4 1 8 5 2 9 6; team a = odd ids, b = even ids.
    assert.deepEqual(
      r.rows.map((x) => [x.id, x.r, x.running, x.moving]),
      [
        [1, 2, 7, 5.5],
        [2, 3, 11, 4],
        [3, 4, 12, 13 / 3],
        [4, 1, 20, 14 / 3],
        [5, 3, 25, 5],
        [6, 4, 27, 16 / 3],
        [7, 1, 36, 17 / 3],
        [8, 2, 42, 7.5],
      ],
    );
    assert.ok(r.plan.includes('WINDOW row_number() OVER (ORDER BY 1 key)'), r.plan.join('\n'));
    assert.deepEqual(r.err, ['INVALID', 'misuse of window function row_number()']);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
