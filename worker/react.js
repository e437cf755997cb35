// `cairn-db/react`: a React hook over `db.watch`. React is the page's (a peer dependency); the
// core package (cairn.js) has nothing of React.
import { useEffect, useState } from 'react';

// Parameters as a dependency of the effect: equal values, equal key (bigints and blobs too).
const keyOf = (params) => JSON.stringify(params ?? null, (_, v) =>
  typeof v === 'bigint' ? `${v}n` : ArrayBuffer.isView(v) ? Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)) : v);

/**
 * The result of `sql` with `params` on `db` (a cairn Database, or null while it opens), kept
 * current: `{ data, error, loading }`. `data` is undefined until the first result; `error` the
 * query's last error (cleared by the next result). `options.rowMode` as for `db.query`.
 */
export function useQuery(db, sql, params, options) {
  const [state, setState] = useState({ data: undefined, error: undefined, loading: true });
  const key = keyOf(params);
  const rowMode = options?.rowMode;
  useEffect(() => {
    if (!db) return undefined;
    setState((s) => (s.loading ? s : { ...s, loading: true }));
    return db.watch(sql, params, (data) => setState({ data, error: undefined, loading: false }), {
      rowMode,
      onError: (error) => setState((s) => ({ data: s.data, error, loading: false })),
    });
    // `params` by value (`key`): a new array of the same values each render starts nothing.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [db, sql, key, rowMode]);
  return state;
}
