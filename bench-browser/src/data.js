// Deterministic data for every engine and every run: t1 and the join tables.
// Everything here is plain JS so it runs in the page (and in Node for tests).

export function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten',
  'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen'];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];

/** n (0 <= n < 1,000,000) spelled in lower-case English words. */
export function words(n) {
  if (n < 20) return ONES[n];
  if (n < 100) return TENS[Math.floor(n / 10)] + (n % 10 ? ' ' + ONES[n % 10] : '');
  if (n < 1000) return ONES[Math.floor(n / 100)] + ' hundred' + (n % 100 ? ' ' + words(n % 100) : '');
  return words(Math.floor(n / 1000)) + ' thousand' + (n % 1000 ? ' ' + words(n % 1000) : '');
}

/** Rows of t1: [id, a, b, c, g]; ids start at `start` (default 1). Same seed, same rows. */
export function t1Rows(count, seed = 1, start = 1) {
  const rnd = mulberry32(seed);
  const rows = new Array(count);
  for (let i = 0; i < count; i++) {
    const b = Math.floor(rnd() * 100000);
    const g = Math.floor(rnd() * 100);
    rows[i] = [start + i, start + i, b, words(b), g];
  }
  return rows;
}

/** Random integers in [0, max) from a fixed seed (keys, ranges for the timed parts). */
export function ints(count, max, seed = 7) {
  const rnd = mulberry32(seed);
  const out = new Array(count);
  for (let i = 0; i < count; i++) out[i] = Math.floor(rnd() * max);
  return out;
}

export const T1_SCHEMA = 'CREATE TABLE t1(id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c TEXT, g INTEGER)';
