// Compiled (not run) by the test command: the types of live queries and of `cairn-db/react`.
import { open, type Change, type Row, type Unsubscribe } from '../../worker/cairn';
import { useQuery } from '../../worker/react';

async function example(): Promise<void> {
  const db = await open('app');
  const stop: Unsubscribe = db.watch('SELECT id, title FROM todo WHERE done = ?', [0], (rows: Row[]) => console.log(rows.length), {
    onError: (e) => console.log(e.code),
  });
  db.watch('SELECT title FROM todo', undefined, (r) => console.log(r.columns, r.values.length), { rowMode: 'array' });
  // @ts-expect-error: rows are objects unless a rowMode says otherwise
  db.watch('SELECT 1', [], (r: { columns: string[] }) => r);
  const off = db.onChange((c: Change) => {
    const origin: 'local' | 'tab' | 'sync' = c.origin;
    console.log(origin, c.commits, c.schema, c.tables.map((t) => t.table + (t.inserted + t.updated + t.deleted)));
  });
  stop();
  off();
  const { data, error, loading } = useQuery(db, 'SELECT id FROM todo WHERE done = ?', [0]);
  const ids: unknown[] | undefined = data?.map((r) => r.id);
  const code: string | undefined = error?.code;
  const cols = useQuery(null, 'SELECT id FROM todo', [], { rowMode: 'columns' }).data?.values;
  console.log(ids, code, loading, cols);
}
void example;
