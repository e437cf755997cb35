// What every workload's setup, run and check get besides the database: the row count, the data,
// and the loaders of t1 and the join tables. Plain JS, so it runs in the page and in Node.
import { t1Rows, ints, words, mulberry32, T1_SCHEMA } from './data.js';
import * as fts from './fts.js';

export function makeCtx(engine, rows) {
  const ctx = {
    engine,
    rows,
    /** n scaled with the row count (n is the count at 10,000 rows), at least 1. */
    scale: (n) => Math.max(1, Math.round((n * rows) / 10000)),
    data: { t1Rows, ints, words, mulberry32 },
    /** The full-text workloads' documents, indexes and queries (src/fts.js). */
    fts,
    T1_SCHEMA,
    pick: (variants) => (engine in variants ? variants[engine] : variants.default),
    num: (x) => (x === null || x === undefined ? x : Number(x)),
    /** Multi-row INSERTs of `per` rows each, in the current transaction (or none). */
    async insertRows(db, table, ncols, rowsArr, per = 200) {
      let stmtSql = null; let stmtN = 0;
      for (let i = 0; i < rowsArr.length; i += per) {
        const chunk = rowsArr.slice(i, i + per);
        if (chunk.length !== stmtN) {
          const one = '(' + new Array(ncols).fill('?').join(',') + ')';
          stmtSql = `INSERT INTO ${table} VALUES ` + new Array(chunk.length).fill(one).join(',');
          stmtN = chunk.length;
        }
        await db.run(stmtSql, chunk.flat());
      }
    },
    /** Untimed setup: t1 with `count` rows, loaded with multi-row inserts in one transaction. */
    async loadT1(db, { table = 't1', count = rows, seed = 1, indexB = false } = {}) {
      await db.exec(T1_SCHEMA.replace('t1', table));
      await db.transaction((tx) => ctx.insertRows(tx, table, 5, t1Rows(count, seed)));
      if (indexB) await db.exec(`CREATE INDEX ${table}_b ON ${table}(b)`);
    },
    /** Untimed check of a table: row count and column sums, as numbers. */
    async tableCheck(db, table = 't1') {
      const [r] = await db.query(`SELECT count(*) AS n, sum(a) AS sa, sum(b) AS sb, sum(g) AS sg, sum(length(c)) AS sc FROM ${table}`, []);
      return { n: ctx.num(r.n), sa: ctx.num(r.sa), sb: ctx.num(r.sb), sg: ctx.num(r.sg), sc: ctx.num(r.sc) };
    },
    /** Untimed setup: 100 customers, orders (5,000 at 10,000 rows) with an index on customer_id. */
    async loadJoin(db) {
      await db.exec('CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT)');
      await db.exec('CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER, note TEXT)');
      const rnd = mulberry32(11);
      const customers = [];
      for (let i = 1; i <= 100; i++) customers.push([i, 'customer ' + words(i), 'city ' + (i % 17)]);
      const orders = [];
      const n = ctx.scale(5000);
      for (let i = 1; i <= n; i++) {
        const amount = Math.floor(rnd() * 10000);
        orders.push([i, 1 + Math.floor(rnd() * 100), amount, words(amount)]);
      }
      await db.transaction(async (tx) => {
        await ctx.insertRows(tx, 'customers', 3, customers);
        await ctx.insertRows(tx, 'orders', 4, orders);
      });
      await db.exec('CREATE INDEX orders_customer ON orders(customer_id)');
    },
  };
  return ctx;
}
