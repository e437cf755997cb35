// A to-do list kept in cairn: one table in the origin's OPFS, durable across reloads.
import { open } from 'cairn-db';

const db = await open('todo');
await db.exec(`CREATE TABLE IF NOT EXISTS todo (
  id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0)`);
// For the console (and the example's test): `app.db.query('SELECT * FROM todo')`.
window.app = { db };

const list = document.querySelector('#list');
const status = document.querySelector('#status');

async function render() {
  const todos = await db.query('SELECT id, title, done FROM todo ORDER BY id');
  list.replaceChildren(...todos.map((t) => {
    const li = document.createElement('li');
    li.className = t.done ? 'done' : '';
    li.dataset.id = t.id;
    const box = Object.assign(document.createElement('input'), { type: 'checkbox', checked: !!t.done });
    box.onchange = () => db.run('UPDATE todo SET done = ? WHERE id = ?', [box.checked ? 1 : 0, t.id]).then(render);
    const title = Object.assign(document.createElement('span'), { textContent: t.title });
    const remove = Object.assign(document.createElement('button'), { textContent: 'Delete' });
    remove.onclick = () => db.run('DELETE FROM todo WHERE id = ?', [t.id]).then(render);
    li.append(box, title, remove);
    return li;
  }));
  const { remaining } = await db.get('SELECT count(*) AS remaining FROM todo WHERE done = 0');
  status.textContent = `${remaining} left · saved on this device`;
}

document.querySelector('#add').onsubmit = async (e) => {
  e.preventDefault();
  const input = e.target.elements.title;
  await db.run('INSERT INTO todo (title) VALUES (?)', [input.value.trim()]);
  input.value = '';
  await render();
};

await render();
window.appReady = true;
