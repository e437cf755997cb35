// Within one edit (insertion, deletion or substitution) of each other.
function oneEdit(a, b) {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return a.slice(i + 1) === b.slice(i + 1) || a.slice(i) === b.slice(i + 1) || a.slice(i + 1) === b.slice(i);
}

// cairn's `word~1`; SQLite and PGlite have no typo-tolerant query, so they get what an app
// would send them instead: an OR of the vocabulary's words within one edit, found in JS.
export default {
  name: 'fts-typo', group: 'fts', tables: ['docs_fts', 'docs'], title: '50 one-word queries with a typo (one edit), top 20 by rank',
  async setup(db, ctx) { ctx.d = await ctx.fts.loadDocs(db, ctx); },
  run: (db, ctx) => ctx.fts.top20(db, ctx, ctx.fts.pickWords(ctx.d, 50).map((w) => {
    const typo = `${w[0]}${w[1]}${w.slice(1)}`;
    const near = ctx.engine === 'cairn' ? [] : ctx.d.vocab.filter((v) => oneEdit(v, typo));
    return { fts: ctx.engine === 'cairn' ? `${typo}~1` : near.join(' OR '), pg: near.join(' | ') };
  })),
  check: (db, ctx, out) => out,
};
