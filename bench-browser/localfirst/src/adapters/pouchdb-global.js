// PouchDB's browser build (pouchdb/dist/pouchdb.js, the one its docs load with a script tag),
// made the global its memory adapter plugin (pouchdb/dist/pouchdb.memory.js) registers with.
import PouchDB from 'pouchdb/dist/pouchdb.js';

globalThis.PouchDB = PouchDB;
export default PouchDB;
