export default {
  name: 'first-open', group: 'startup', kind: 'first-open',
  title: 'First open: fetch the engine, open a new database, first query',
};
