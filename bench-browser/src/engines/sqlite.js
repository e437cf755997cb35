import { workerDb } from './worker-db.js';
export const open = (name) => workerDb(new URL('/sqlite-worker.js', location.href), name);
