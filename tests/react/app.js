// A React page over cairn-db/react, bundled by tests/browser/watch.test.mjs: a list of the rows
// of `todo` that `useQuery` keeps current, and how many times it rendered.
import { createElement as h } from 'react';
import { createRoot } from 'react-dom/client';
import { useQuery } from '../../dist/react.js';

export const renders = { count: 0 };

function Todos({ db, done }) {
  const { data, error, loading } = useQuery(db, 'SELECT id, title FROM todo WHERE done = ? ORDER BY id', [done]);
  renders.count++;
  if (error) return h('p', { id: 'error' }, error.code);
  if (loading) return h('p', { id: 'loading' }, 'loading');
  return h('ul', { id: 'todos' }, data.map((t) => h('li', { key: t.id }, t.title)));
}

/** Renders the list of `db` into `el`; returns the root, to unmount. */
export function mount(db, el, done = 0) {
  const root = createRoot(el);
  root.render(h(Todos, { db, done }));
  return root;
}
