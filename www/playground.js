import { startWorker, openFile } from '/dist/cairn.js';

const worker = await startWorker();
const $ = (sel) => document.querySelector(sel);

async function listFiles() {
  const names = await worker.call('fileList');
  $('#files').replaceChildren(...names.map((n) => Object.assign(document.createElement('li'), { textContent: n })));
}

function show(rows) {
  $('#result').hidden = false;
  $('#result tbody').replaceChildren(
    ...rows.map(([k, v]) => {
      const tr = document.createElement('tr');
      tr.append(Object.assign(document.createElement('th'), { textContent: k }), Object.assign(document.createElement('td'), { textContent: v }));
      return tr;
    }),
  );
}

$('#roundtrip').addEventListener('submit', async (e) => {
  e.preventDefault();
  const form = new FormData(e.target);
  const pages = Number(form.get('pages'));
  $('#error').hidden = true;
  try {
    const file = await openFile(worker, String(form.get('file')));
    const page = (p) => Uint8Array.from({ length: 4096 }, (_, i) => (p * 31 + i * 7) % 251);
    let t = performance.now();
    for (let p = 0; p < pages; p++) await file.write(p * 4096, page(p));
    const writeMs = performance.now() - t;
    t = performance.now();
    await file.flush();
    const flushMs = performance.now() - t;
    t = performance.now();
    let bad = 0;
    for (let p = 0; p < pages; p++) {
      const got = await file.read(p * 4096, 4096);
      const want = page(p);
      if (!got.every((b, i) => b === want[i])) bad++;
    }
    const readMs = performance.now() - t;
    const len = await file.len();
    await file.close();
    show([
      ['pages written', pages],
      ['file length', `${len} bytes`],
      ['write', `${writeMs.toFixed(1)} ms`],
      ['flush', `${flushMs.toFixed(2)} ms`],
      ['read back', `${readMs.toFixed(1)} ms`],
      ['pages that differ', bad],
    ]);
  } catch (err) {
    $('#error').hidden = false;
    $('#error').textContent = `${err.code ?? 'ERROR'}: ${err.message}`;
  }
  await listFiles();
});

await listFiles();
document.body.dataset.ready = 'true';
