// The OPFS flush probe: time n writes of 4 KiB, each followed by flush() on a sync access handle,
// the same kind of flush the engines pay for at every commit.
self.onmessage = async (e) => {
  const n = e.data.n || 3;
  try {
    const root = await navigator.storage.getDirectory();
    const fh = await root.getFileHandle('.bench-flush-probe', { create: true });
    const h = await fh.createSyncAccessHandle();
    const buf = new Uint8Array(4096).fill(7);
    const readings = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      h.write(buf, { at: 0 });
      h.flush();
      readings.push(performance.now() - t0);
    }
    h.close();
    await root.removeEntry('.bench-flush-probe');
    self.postMessage({ readings });
  } catch (err) {
    self.postMessage({ error: String(err && err.message || err) });
  }
};
