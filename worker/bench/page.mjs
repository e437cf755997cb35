// What the page benches share: their options from the command line, and a browser (a fresh
// profile, the repo served with cross-origin isolation) on a bench page.
import { launch } from '../../tests/browser/harness.mjs';

/** The value after `name` on the command line, or `dflt`. */
export function opt(name, dflt) {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
}

/** Runs `window.run(options)` on the page at `path` and returns what it resolves to. */
export async function runPage(path, options) {
  const b = await launch();
  try {
    await b.page.goto(`${b.server.url}${path}`);
    await b.page.waitForFunction(() => window.ready === true);
    return await b.page.evaluate(
      (o) => window.run(o).catch((e) => { throw new Error(`${e.code ?? ''} ${e.message}`); }),
      options,
    );
  } finally {
    await b.close();
  }
}
