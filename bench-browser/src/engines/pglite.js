import { workerDb, toDollarParams } from './worker-db.js';
export const open = (name) => workerDb(new URL('/pglite-worker.js', location.href), name, { rewrite: toDollarParams });
