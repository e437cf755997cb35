// The records API (`db.records(table)`, docs/records.md): calls that read and write one record by
// its key, or select records by a small query object, over a table keyed by one column. Each call
// is one SQL statement, so one round trip and at most one commit; the SQL each runs is in
// docs/records.md. Bundled into cairn-extra.js (worker/extra.js), loaded on a page's first call.
//
// Records read or written here are kept in a page-side cache, so that a `get` of a record the
// page has seen costs no round trip. It is kept coherent by the commit notices of live queries
// (worker/watch.js): a notice of a commit that changed a table, from any session other than the
// one these calls use, empties that table's cache. The rules that make that sound:
// - a result is cached only when the notices were on when its request left and no notice for its
//   table came between the request and the reply (a commit made after the read may have its
//   notice arrive before the read's reply: shared-memory replies and notices travel apart);
// - a write through these calls drops its record before its request leaves and caches what its
//   RETURNING gives; its own notice (the committing session is this module's) is not news;
// - while the notices are off (before the Worker took the subscription, after a take-over or an
//   engine restart) nothing is answered from the cache, and it is emptied.
import { MODE_ROWS, MODE_RUN } from './protocol.js';

// The most records kept per table; the oldest goes first.
const CACHE_MAX = 10_000;

// `where` operators and their SQL. `$ne` is null-safe: a NULL field differs from a value.
const OPS = { $eq: '=', $ne: 'IS NOT', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=', $like: 'like' };

// The calls a handle has (docs/records.md).
const CALLS = new Set(['insert', 'get', 'has', 'update', 'set', 'swap', 'inc', 'add', 'remove', 'delete', 'select', 'count', 'watch']);

const quote = (name) => `"${name.replace(/"/g, '""')}"`;

/** SQLite's affinity of a declared type (docs/sql.md): what `inc` may add to. */
function affinity(type) {
  const t = type.toLowerCase();
  if (t.includes('int')) return 'integer';
  if (/char|clob|text/.test(t)) return 'text';
  if (t === '' || t.includes('blob')) return 'any';
  if (/real|floa|doub/.test(t)) return 'real';
  return 'numeric';
}

/** The kinds `REPLICATED (...)` gives columns, from the table's SQL in `sqlite_schema`:
 * lower-case name -> 'scope' | 'counter' | 'set' | 'map'. Null for a table that is not
 * replicated. */
function replicatedKinds(sql) {
  const m = /\)\s*REPLICATED\s*(?:\(([^]*)\))?\s*$/i.exec(sql ?? '');
  if (!m) return null;
  const kinds = new Map();
  const item = /([A-Za-z]+)\s+("(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|[^\s,()]+)/g;
  for (const [, kind, name] of (m[1] ?? '').matchAll(item)) {
    const bare = /^["`[]/.test(name) ? name.slice(1, -1).replace(/""/g, '"').replace(/``/g, '`') : name;
    kinds.set(bare.toLowerCase(), kind.toLowerCase());
  }
  return kinds;
}

/** The content table of an fts5 table, from its CREATE VIRTUAL TABLE text (which cairn
 * writes with `content='...'` quoted as a SQL string); null for none. */
function ftsContent(sql) {
  const m = /^\s*CREATE\s+VIRTUAL\s+TABLE\b[^]*\bUSING\s+fts5\s*\([^]*\bcontent\s*=\s*'((?:[^']|'')*)'/i.exec(sql ?? '');
  return m ? m[1].replace(/''/g, "'") : null;
}

/** Whether the parentheses of an fts5 query, outside its "strings", balance: only then may it
 * be put inside a column filter's `( ... )` without changing what the filter covers. */
function balanced(q) {
  let depth = 0;
  for (const [, s, p] of q.matchAll(/("(?:[^"]|"")*"?)|([()])/g)) {
    if (s) continue;
    depth += p === '(' ? 1 : -1;
    if (depth < 0) return false;
  }
  return depth === 0;
}

/** A database's records calls in this tab, over every table (`db.records(t)`). */
export class Records {
  #db;
  #opts;
  #session;
  #tables = new Map(); // lower-case table name -> { p, info, cache, epoch }
  #gen = 0; // moves when every cache is emptied (notices off, schema changed)
  #l;
  /** `opts` as Live has them (`{ CairnError, decodeRows, tab }`); `live` is the tab's Live,
   * whose change notices keep the cache coherent. */
  constructor(db, opts, live) {
    this.#db = db;
    this.#opts = opts;
    // A session of its own: its commits are the ones the cache already holds. Negative, never one
    // of the client's (which count up from 1).
    this.#session = -1 - Math.floor(Math.random() * 2 ** 30);
    this.#l = { on: false, raw: (c, s) => this.#change(c, s), reset: () => this.#reset(false) };
    live._listen(this.#l);
  }

  #error(code, message, extra) {
    return new this.#opts.CairnError(code, message, extra);
  }

  /** `db.records(table)[method](...args)`. */
  call(table, method, args) {
    if (!CALLS.has(method)) {
      const e = this.#error('INVALID_INPUT', `records have no call ${JSON.stringify(String(method))}`);
      if (method === 'watch') throw e;
      return Promise.reject(e);
    }
    const key = table.toLowerCase();
    let t = this.#tables.get(key);
    if (!t) this.#tables.set(key, (t = { name: table, p: null, info: null, cache: new Map(), epoch: 0 }));
    // The hot path: a record in the cache, with no promise of our own in between.
    if (method === 'get' && t.info && this.#l.on) {
      const hit = t.cache.get(args[0]);
      if (hit !== undefined) return Promise.resolve(hit ?? undefined);
    }
    if (method === 'watch') return this.#watch(t, ...args);
    return this.#info(t).then((info) => this[`_${method}`](t, info, ...args));
  }

  // ---- The table's columns ---------------------------------------------------------------------

  /** The table's columns, key and kinds: asked of the engine once (one round trip), kept until a
   * commit changes the schema. */
  #info(t, again = false) {
    if (again) t.p = null;
    return (t.p ??= this.#load(t).then(
      (info) => (t.info = info),
      (e) => {
        t.p = null;
        throw e;
      },
    ));
  }

  async #load(t) {
    // The table's columns, and every fts5 table's (rootpage 0), to find the full-text indexes
    // over this table, in the same round trip.
    const all = await this.#rows(
      "SELECT m.name AS t, m.sql AS s, m.rootpage AS r, p.name AS c, p.type AS ty, p.pk AS pk, p.dflt_value AS d " +
        "FROM sqlite_schema m, pragma_table_info(m.name) p WHERE m.type = 'table' AND (lower(m.name) = lower(?) OR m.rootpage = 0)",
      [t.name],
    );
    const rows = all.filter((r) => r.t.toLowerCase() === t.name.toLowerCase());
    if (rows.length === 0) throw this.#error('UNKNOWN_TABLE', `no table named ${JSON.stringify(t.name)}`);
    const fts = new Map(); // lower-case fts5 table name -> { name, cols: Set of lower-case names }
    for (const r of all) {
      if (r.r !== 0 || ftsContent(r.s)?.toLowerCase() !== rows[0].t.toLowerCase()) continue;
      const key = r.t.toLowerCase();
      if (!fts.has(key)) fts.set(key, { name: r.t, cols: new Set() });
      fts.get(key).cols.add(r.c.toLowerCase());
    }
    const kinds = replicatedKinds(rows[0].s);
    const cols = new Map();
    const keys = [];
    for (const r of rows) {
      const col = { name: r.c, affinity: affinity(r.ty), kind: kinds?.get(r.c.toLowerCase()) ?? null, dflt: r.d };
      cols.set(r.c.toLowerCase(), col);
      if (r.pk > 0) keys.push(col);
    }
    if (keys.length !== 1) {
      throw this.#error('UNSUPPORTED', `records need a table keyed by one column; ${rows[0].t} has ${keys.length === 0 ? 'no primary key' : 'a key of several columns'}`);
    }
    return { table: quote(rows[0].t), name: rows[0].t, cols, key: keys[0], replicated: kinds !== null, fts };
  }

  /** The columns of `fields`, by name without case; a name that is no column is looked up once
   * more (the schema may have changed since), then refused with UNKNOWN_FIELD. A name in
   * `texts` (a `$text` condition's field) may also name an fts5 table over this one. */
  async #columns(t, info, fields, texts = null) {
    const known = (i, f) => i.cols.has(String(f).toLowerCase()) || (texts?.has(f) && i.fts.has(f.toLowerCase()));
    const miss = fields.find((f) => !known(info, f));
    if (miss === undefined) return info;
    const fresh = await this.#info(t, true);
    const still = fields.find((f) => !known(fresh, f));
    if (still !== undefined) {
      throw this.#error('UNKNOWN_FIELD', `${fresh.name} has no column ${JSON.stringify(String(still))}`, { field: String(still) });
    }
    return fresh;
  }

  /** A field's value as a statement's parameter; FIELD_TYPE for what no column can hold. */
  #value(field, v, col) {
    if (v === null || typeof v === 'number' || typeof v === 'string' || typeof v === 'bigint' || typeof v === 'boolean') return v;
    if (v instanceof Uint8Array) return v;
    if (v instanceof ArrayBuffer) return new Uint8Array(v);
    if (Array.isArray(v) && col?.kind === 'set') return JSON.stringify(v);
    if (col?.kind === 'map' && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return JSON.stringify(v);
    const what = v === undefined ? 'undefined' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? `an object (${v.constructor?.name ?? 'null prototype'})` : `a ${typeof v}`;
    throw this.#error('FIELD_TYPE', `field ${JSON.stringify(field)}: ${what} cannot be stored; give null, a number, a bigint, a string, a boolean or a Uint8Array`, { field });
  }

  /** `fields` given as `[column, value]`, values checked; undefined ones left out. */
  async #fields(t, info, obj, what) {
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
      throw this.#error('INVALID_INPUT', `${what} takes an object of fields`);
    }
    const names = Object.keys(obj);
    info = await this.#columns(t, info, names);
    const out = [];
    for (const f of names) {
      if (obj[f] === undefined) continue;
      const col = info.cols.get(f.toLowerCase());
      out.push([col, this.#value(f, obj[f], col)]);
    }
    return [info, out];
  }

  // ---- Statements ------------------------------------------------------------------------------

  #send(sql, params, mode) {
    return this.#db._send('execute', this.#session, [sql, params, mode]);
  }

  async #rows(sql, params) {
    return this.#opts.decodeRows(await this.#send(sql, params, MODE_ROWS));
  }

  /** A write's rows; the engine's TYPE error for a column becomes FIELD_TYPE naming the field. */
  async #write(info, sql, params) {
    try {
      return await this.#rows(sql, params);
    } catch (e) {
      const m = e?.code === 'TYPE' && /column (?:\S+\.)?(\S+)$/.exec(e.message);
      if (m) {
        const col = info.cols.get(m[1].toLowerCase());
        const field = col?.name ?? m[1];
        throw this.#error('FIELD_TYPE', `field ${JSON.stringify(field)}: ${e.message}`, { field, cause: e });
      }
      throw e;
    }
  }

  // ---- The cache -------------------------------------------------------------------------------

  /** Where the cache stands as a request leaves: the reply may be cached only if it still does. */
  #mark(t) {
    return this.#l.on ? { gen: this.#gen, epoch: t.epoch } : null;
  }

  #keep(t, m, key, row) {
    if (!m || m.gen !== this.#gen || m.epoch !== t.epoch || !this.#l.on) return;
    t.cache.delete(key);
    t.cache.set(key, row);
    if (t.cache.size > CACHE_MAX) t.cache.delete(t.cache.keys().next().value);
  }

  /** Rows as records: frozen (the cache shares them), SET columns as arrays. */
  #record(info, row) {
    for (const col of info.cols.values()) {
      if (col.kind === 'set' || col.kind === 'map') {
        const v = row[col.name];
        if (typeof v === 'string') {
          try {
            row[col.name] = JSON.parse(v);
          } catch {
            // not JSON: left as the engine gave it
          }
        }
      }
    }
    return Object.freeze(row);
  }

  /** A commit notice (worker/extra.js, Live): what changed, and the session that committed. */
  #change(change, session) {
    if (change.schema) return this.#reset(true);
    const own = String(session) === this.#opts.tab() + this.#session;
    // A call here writes one row of one table in one commit, and caches what it wrote.
    const mine = own && change.commits === 1 && change.tables.length === 1 &&
      change.tables[0].inserted + change.tables[0].updated + change.tables[0].deleted <= 1;
    if (mine) return;
    for (const { table } of change.tables) {
      const t = this.#tables.get(table.toLowerCase());
      if (!t) continue;
      t.epoch++;
      t.cache.clear();
    }
  }

  /** Empties every cache (and with `schema`, forgets the tables' columns). */
  #reset(schema) {
    this.#gen++;
    for (const t of this.#tables.values()) {
      t.cache.clear();
      if (schema) t.p = t.info = null;
    }
  }

  // ---- The calls (`call` dispatches to `_name(t, info, ...args)`) -----------------------------

  async _get(t, info, id) {
    const m = this.#mark(t);
    const [row] = await this.#rows(`SELECT * FROM ${info.table} WHERE ${quote(info.key.name)} = ?`, [this.#value('key', id)]);
    const rec = row ? this.#record(info, row) : null;
    this.#keep(t, m, id, rec);
    return rec ?? undefined;
  }

  async _has(t, info, id) {
    if (this.#l.on && t.cache.has(id)) return t.cache.get(id) !== null;
    const rows = await this.#rows(`SELECT 1 FROM ${info.table} WHERE ${quote(info.key.name)} = ?`, [this.#value('key', id)]);
    return rows.length > 0;
  }

  /** Caches the record a write returned (or that `id` has none), after the write. */
  #wrote(t, m, info, id, rows) {
    if (rows.length === 0) {
      if (id !== undefined) this.#keep(t, m, id, null);
      return undefined;
    }
    const rec = this.#record(info, rows[0]);
    const key = rec[info.key.name];
    if (id !== undefined && id !== key) t.cache.delete(id);
    this.#keep(t, m, key, rec);
    return rec;
  }

  async _insert(t, info, obj) {
    let fields;
    [info, fields] = await this.#fields(t, info, obj, 'insert');
    const cols = fields.map(([c]) => quote(c.name));
    const vals = fields.map(() => '?');
    const k = info.key;
    // A text key with no value and no default of its own: a version 7 UUID.
    if (k.affinity === 'text' && k.dflt === null && !fields.some(([c]) => c === k)) {
      cols.unshift(quote(k.name));
      vals.unshift('uuid7()');
    }
    const given = fields.find(([c]) => c === k);
    if (given) t.cache.delete(given[1]);
    const sql = cols.length === 0 ? `INSERT INTO ${info.table} DEFAULT VALUES RETURNING *`
      : `INSERT INTO ${info.table} (${cols.join(', ')}) VALUES (${vals.join(', ')}) RETURNING *`;
    const m = this.#mark(t);
    const rows = await this.#write(info, sql, fields.map(([, v]) => v));
    return this.#wrote(t, m, info, undefined, rows)[k.name];
  }

  async _update(t, info, id, obj) {
    let fields;
    [info, fields] = await this.#fields(t, info, obj, 'update');
    if (fields.length === 0) return this._has(t, info, id);
    const key = this.#value('key', id);
    t.cache.delete(id);
    const m = this.#mark(t);
    const sets = fields.map(([c]) => `${quote(c.name)} = ?`).join(', ');
    const rows = await this.#write(info, `UPDATE ${info.table} SET ${sets} WHERE ${quote(info.key.name)} = ? RETURNING *`,
      [...fields.map(([, v]) => v), key]);
    return this.#wrote(t, m, info, id, rows) !== undefined;
  }

  async _set(t, info, id, obj) {
    let fields;
    [info, fields] = await this.#fields(t, info, obj, 'set');
    const given = new Map(fields);
    const k = info.key;
    const cols = [quote(k.name)];
    const vals = ['?'];
    const params = [this.#value('key', id)];
    const sets = [];
    for (const col of info.cols.values()) {
      if (col === k) continue;
      cols.push(quote(col.name));
      if (given.has(col)) {
        vals.push('?');
        params.push(given.get(col));
      } else vals.push(col.dflt === null ? 'null' : `(${col.dflt})`);
      sets.push(`${quote(col.name)} = excluded.${quote(col.name)}`);
    }
    const conflict = sets.length ? `DO UPDATE SET ${sets.join(', ')}` : 'DO NOTHING';
    t.cache.delete(id);
    const m = this.#mark(t);
    const rows = await this.#write(info, `INSERT INTO ${info.table} (${cols.join(', ')}) VALUES (${vals.join(', ')}) ` +
      `ON CONFLICT (${quote(k.name)}) ${conflict} RETURNING *`, params);
    if (rows.length > 0) this.#wrote(t, m, info, id, rows);
  }

  async _swap(t, info, id, expected, next) {
    let want, fields;
    [info, want] = await this.#fields(t, info, expected, 'swap (expected)');
    [info, fields] = await this.#fields(t, info, next, 'swap (next)');
    if (fields.length === 0) throw this.#error('INVALID_INPUT', 'swap needs at least one field to write');
    const sets = fields.map(([c]) => `${quote(c.name)} = ?`).join(', ');
    const conds = want.map(([c]) => ` AND ${quote(c.name)} IS ?`).join('');
    t.cache.delete(id);
    const m = this.#mark(t);
    const rows = await this.#write(info, `UPDATE ${info.table} SET ${sets} WHERE ${quote(info.key.name)} = ?${conds} RETURNING *`,
      [...fields.map(([, v]) => v), this.#value('key', id), ...want.map(([, v]) => v)]);
    if (rows.length === 0) return false;
    this.#wrote(t, m, info, id, rows);
    return true;
  }

  async _inc(t, info, id, field, n = 1) {
    info = await this.#columns(t, info, [field]);
    const col = info.cols.get(String(field).toLowerCase());
    // A replicated table's counters merge as sums; another column would merge as last writer
    // wins, and lose concurrent increments. A plain table's numeric columns add up as they are.
    const counts = info.replicated ? col.kind === 'counter' : col !== info.key && col.affinity !== 'text' && col.affinity !== 'any' && col.kind === null;
    if (!counts) {
      throw this.#error('NOT_COUNTER', `${info.name}.${col.name} is not a counter${info.replicated ? ': declare it with REPLICATED (COUNTER ...)' : ''}`, { field: col.name });
    }
    if (!(typeof n === 'bigint' || (typeof n === 'number' && Number.isFinite(n)))) {
      throw this.#error('FIELD_TYPE', `field ${JSON.stringify(col.name)}: inc takes a finite number or a bigint`, { field: col.name });
    }
    const c = quote(col.name);
    t.cache.delete(id);
    const m = this.#mark(t);
    const rows = await this.#write(info, `UPDATE ${info.table} SET ${c} = coalesce(${c}, 0) + ? WHERE ${quote(info.key.name)} = ? RETURNING *`,
      [n, this.#value('key', id)]);
    return this.#wrote(t, m, info, id, rows)?.[col.name];
  }

  async #setOp(t, info, id, field, value, fn) {
    info = await this.#columns(t, info, [field]);
    const col = info.cols.get(String(field).toLowerCase());
    if (col.kind !== 'set') {
      throw this.#error('NOT_SET', `${info.name}.${col.name} is not a set: declare it with REPLICATED (SET ...)`, { field: col.name });
    }
    const v = this.#value(col.name, value);
    const c = quote(col.name);
    t.cache.delete(id);
    const m = this.#mark(t);
    const rows = await this.#write(info, `UPDATE ${info.table} SET ${c} = ${fn}(${c}, ?) WHERE ${quote(info.key.name)} = ? RETURNING *`,
      [v, this.#value('key', id)]);
    return this.#wrote(t, m, info, id, rows) !== undefined;
  }

  _add(t, info, id, field, value) {
    return this.#setOp(t, info, id, field, value, 'set_add');
  }

  _remove(t, info, id, field, value) {
    return this.#setOp(t, info, id, field, value, 'set_remove');
  }

  async _delete(t, info, id) {
    const key = this.#value('key', id);
    t.cache.delete(id);
    const m = this.#mark(t);
    const [changes] = await this.#send(`DELETE FROM ${info.table} WHERE ${quote(info.key.name)} = ?`, [key], MODE_RUN);
    this.#keep(t, m, id, null);
    return changes > 0;
  }

  /** The SQL and parameters of a query object: `{ where, orderBy, limit, offset }`. */
  async #query(t, info, query, head) {
    query ??= {};
    if (typeof query !== 'object' || Array.isArray(query)) throw this.#error('INVALID_INPUT', 'a query is an object: { where, orderBy, limit, offset }');
    for (const k of Object.keys(query)) {
      if (!['where', 'orderBy', 'limit', 'offset'].includes(k)) throw this.#error('INVALID_INPUT', `a query has no ${JSON.stringify(k)}: it takes where, orderBy, limit and offset`);
    }
    const { where, orderBy, limit, offset } = query;
    const order = orderBy === undefined ? [] : (Array.isArray(orderBy) ? orderBy : [orderBy]).map((o) => (Array.isArray(o) ? o : [o, 'asc']));
    if (where !== undefined && where !== null && (typeof where !== 'object' || Array.isArray(where))) {
      throw this.#error('INVALID_INPUT', 'where is an object: { field: value | { $eq, $ne, $gt, $gte, $lt, $lte, $in, $like, $text } }');
    }
    const isOps = (cond) => cond !== null && typeof cond === 'object' && !ArrayBuffer.isView(cond) && !(cond instanceof ArrayBuffer) && !Array.isArray(cond);
    const texts = new Set(Object.entries(where ?? {}).filter(([, c]) => isOps(c) && '$text' in c).map(([f]) => f));
    info = await this.#columns(t, info, [...Object.keys(where ?? {}), ...order.map(([f]) => f)], texts);
    const params = [];
    const parts = [];
    for (const [f, cond] of Object.entries(where ?? {})) {
      const col = info.cols.get(f.toLowerCase());
      if (!col) {
        // The name of an fts5 table over this one (#columns let it through): `$text` alone.
        const extra = Object.keys(cond).find((op) => op !== '$text');
        if (extra) throw this.#error('INVALID_INPUT', `field ${JSON.stringify(f)}: an fts5 table takes $text alone, not ${extra}`, { field: f });
        info = await this.#text(t, info, f, null, cond.$text, parts, params);
        continue;
      }
      const c = quote(col.name);
      const ops = isOps(cond);
      if (!ops) {
        if (cond === null) parts.push(`${c} IS NULL`);
        else {
          parts.push(`${c} = ?`);
          params.push(this.#value(f, cond));
        }
        continue;
      }
      const entries = Object.entries(cond);
      if (entries.length === 0) throw this.#error('INVALID_INPUT', `field ${JSON.stringify(f)}: an empty condition`, { field: f });
      for (const [op, v] of entries) {
        if (op === '$in') {
          if (!Array.isArray(v)) throw this.#error('INVALID_INPUT', `field ${JSON.stringify(f)}: $in takes an array`, { field: f });
          parts.push(v.length ? `${c} IN (${v.map(() => '?').join(', ')})` : '0');
          for (const x of v) params.push(this.#value(f, x));
        } else if (op === '$text') {
          info = await this.#text(t, info, f, col, v, parts, params);
        } else if (op in OPS) {
          if (v === null && (op === '$eq' || op === '$ne')) parts.push(`${c} IS ${op === '$ne' ? 'NOT ' : ''}NULL`);
          else {
            parts.push(`${c} ${OPS[op]} ?`);
            params.push(this.#value(f, v));
          }
        } else {
          throw this.#error('INVALID_INPUT', `field ${JSON.stringify(f)}: no operator ${JSON.stringify(op)} (${Object.keys(OPS).join(' ')} $in $text)`, { field: f });
        }
      }
    }
    let sql = `${head} FROM ${info.table}`;
    if (parts.length) sql += ` WHERE ${parts.join(' AND ')}`;
    if (order.length) {
      sql += ' ORDER BY ' + order.map(([f, dir]) => {
        const d = String(dir).toLowerCase();
        if (d !== 'asc' && d !== 'desc') throw this.#error('INVALID_INPUT', `orderBy ${JSON.stringify(f)}: the direction is 'asc' or 'desc'`, { field: f });
        return `${quote(info.cols.get(f.toLowerCase()).name)} ${d}`;
      }).join(', ');
    }
    const count = (n, what) => {
      if (!Number.isInteger(n) || n < 0) throw this.#error('INVALID_INPUT', `${what} is a whole number, 0 or more`);
      return n;
    };
    if (limit !== undefined || offset !== undefined) {
      sql += ' LIMIT ?';
      params.push(limit === undefined ? -1 : count(limit, 'limit'));
      if (offset !== undefined) {
        sql += ' OFFSET ?';
        params.push(count(offset, 'offset'));
      }
    }
    return [info, sql, params];
  }

  /** A `$text` condition on field `f`: the key among the rows an fts5 table over this table
   * matches. `col` is the column searched (the first fts5 table indexing it, in the order they
   * were made, through a column filter), or null when `f` names the fts5 table (all its
   * columns). No such index: NO_TEXT_INDEX, after the schema is read once more. */
  async #text(t, info, f, col, q, parts, params) {
    if (typeof q !== 'string') throw this.#error('FIELD_TYPE', `field ${JSON.stringify(f)}: $text takes a string, an fts5 query`, { field: f });
    const find = (i) => (col ? [...i.fts.values()].find((x) => x.cols.has(col.name.toLowerCase())) : i.fts.get(f.toLowerCase()));
    let index = find(info);
    if (!index) {
      info = await this.#info(t, true);
      index = find(info);
    }
    if (!index) {
      throw this.#error('NO_TEXT_INDEX', `field ${JSON.stringify(f)}: no fts5 table over ${info.name} indexes it; make one with ` +
        `CREATE VIRTUAL TABLE ${info.name}_fts USING fts5(${col ? col.name : '...'}, content='${info.name.replace(/'/g, "''")}')`, { field: f });
    }
    const fts = quote(index.name);
    parts.push(`${quote(info.key.name)} IN (SELECT rowid FROM ${fts} WHERE ${fts} MATCH ?)`);
    // A column filter keeps the search to the field; a query whose parentheses do not balance
    // is sent as it is after the filter, for the engine to refuse with its SYNTAX error.
    const filter = col ? `"${col.name.replace(/"/g, '""')}" : ` : '';
    params.push(col && balanced(q) ? `${filter}(${q})` : filter + q);
    return info;
  }

  async _select(t, info, query) {
    const [i, sql, params] = await this.#query(t, info, query, 'SELECT *');
    const m = this.#mark(t);
    const rows = await this.#rows(sql, params);
    return rows.map((r) => {
      const rec = this.#record(i, r);
      this.#keep(t, m, rec[i.key.name], rec);
      return rec;
    });
  }

  async _count(t, info, where) {
    const [, sql, params] = await this.#query(t, info, { where }, 'SELECT count(*) AS n');
    const [{ n }] = await this.#rows(sql, params);
    return Number(n);
  }

  /** A live `select`: `cb(records)` now and after each commit that changes them (db.watch).
   * Returns the function that stops it; errors go to `onError`, else are the page's. */
  #watch(t, query, cb, options = {}) {
    if (typeof cb !== 'function') throw this.#error('INVALID_INPUT', 'watch(query, callback, options): the callback is not a function');
    let stop = null;
    let stopped = false;
    const fail = (e) => {
      if (options.onError) options.onError(e);
      else queueMicrotask(() => { throw e; });
    };
    this.#info(t)
      .then((info) => this.#query(t, info, query, 'SELECT *'))
      .then(([info, sql, params]) => {
        if (stopped) return;
        stop = this.#db.watch(sql, params, (rows) => cb(rows.map((r) => this.#record(info, r))), { onError: options.onError });
      }, fail);
    return () => {
      stopped = true;
      stop?.();
    };
  }
}
