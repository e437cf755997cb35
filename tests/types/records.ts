// Compiled (not run) by the test command: the records API's types, generic over the record.
import { open, type CairnError, type Unsubscribe } from '../../worker/cairn';

interface Todo {
  id: string;
  title: string;
  done: number;
  likes: number;
}

async function example(): Promise<void> {
  const db = await open('app', { sync: true });
  const todos = db.records<Todo>('todo');
  const id = await todos.insert({ title: 'milk' });
  const t = await todos.get(id);
  const title: string | undefined = t?.title;
  // @ts-expect-error: records come back read-only
  if (t) t.title = 'x';
  const found: boolean = await todos.update(id, { done: 1 });
  await todos.set(id, { title: 'oat milk' });
  const wrote: boolean = await todos.swap(id, { done: 1 }, { done: 0 });
  const likes = await todos.inc(id, 'likes', 2);
  // @ts-expect-error: a field the record type does not have
  await todos.inc(id, 'colour');
  const rows: readonly Todo[] = await todos.select({
    where: { done: 0, likes: { $gte: 1, $in: [1, 2] }, title: { $like: 'o%' } },
    orderBy: ['likes', ['title', 'desc']],
    limit: 10,
    offset: 0,
  });
  const n: number = await todos.count({ done: { $ne: null } });
  // Full-text conditions: on a field, and on the fts5 table named in the type's second argument.
  await todos.select({ where: { title: { $text: 'milk OR bread' }, done: 0 }, orderBy: 'title' });
  const searched = db.records<Todo, 'todo_fts'>('todo');
  const hits: number = await searched.count({ todo_fts: { $text: 'milk' }, likes: { $gt: 0 } });
  // @ts-expect-error: a name the type does not give as an fts5 table
  await todos.count({ todo_fts: { $text: 'milk' } });
  // @ts-expect-error: an fts5 table takes $text alone
  await searched.count({ todo_fts: { $like: 'milk' } });
  console.log(hits);
  const stop: Unsubscribe = todos.watch({ where: { done: 0 } }, (list) => console.log(list.length), {
    onError: (e: CairnError) => console.log(e.code, e.field),
  });
  stop();
  const gone: boolean = await todos.delete(id);
  const dropped: number = await db.sync.compact();
  const purged: boolean = await db.sync.purge('todo', id);
  const off: () => void = db.sync.on('event', (e) => console.log(e.kind, e.code, e.detail));
  off();
  console.log(title, found, wrote, likes, rows, n, gone, dropped, purged, await todos.has(id));
}
void example;
