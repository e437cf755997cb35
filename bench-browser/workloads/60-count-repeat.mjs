export default {
  name: 'count-repeat', group: 'app', title: '50 x SELECT count(*) of the whole table',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    let s = 0;
    for (let i = 0; i < 50; i++) s += Number((await db.query('SELECT count(*) AS n FROM t1', []))[0].n);
    return { s };
  },
  check: (db, ctx, out) => out,
};
