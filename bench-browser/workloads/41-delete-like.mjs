export default {
  name: 'delete-like', group: 'delete', title: "Delete by pattern (c LIKE '%fifty%')",
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) { await db.run("DELETE FROM t1 WHERE c LIKE '%fifty%'", []); },
  check: (db, ctx) => ctx.tableCheck(db),
};
