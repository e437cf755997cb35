//! The database a Worker serves: cairn's SQL engine over the paged store in an OPFS file.
//!
//! A statement's result is encoded into one buffer in wasm memory (`Encoder`), which the Worker
//! reads into the flat array the page gets (`worker/result.js`, docs/protocol.md): one call
//! across the wasm boundary per statement rather than one per value.

use cairn_sql::Paged;
use cairn_sql::{Output, Statement, Value};
use cairn_store::{BlockFile, Durability, OpfsFile, Options};
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
#[cfg(feature = "sync")]
use wasm_bindgen::JsCast;

/// Modes of `execute` (0 is every row, the default).
const MODE_RUN: u8 = 1;
const MODE_FIRST: u8 = 2;

const COL_ARRAY: u8 = 0;
const COL_F64: u8 = 1;
const COL_I32: u8 = 2;

/// Largest integer a JavaScript number holds exactly.
const MAX_SAFE: i64 = (1 << 53) - 1;

/// A JavaScript `Error` with a stable `code`, and for a syntax error `extra: {line, column}`.
fn error(code: &str, message: &str, extra: Option<(u32, u32)>) -> JsValue {
    let err = js_sys::Error::new(message);
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    if let Some((line, column)) = extra {
        let o = Object::new();
        let _ = Reflect::set(&o, &"line".into(), &line.into());
        let _ = Reflect::set(&o, &"column".into(), &column.into());
        let _ = Reflect::set(&err, &"extra".into(), &o);
    }
    err.into()
}

fn sql_error(e: cairn_sql::Error) -> JsValue {
    let pos = match &e {
        cairn_sql::Error::Syntax { line, column, .. } => Some((*line, *column)),
        _ => None,
    };
    error(e.code(), &e.to_string(), pos)
}

/// The JavaScript error for a storage error: an `Error` with `code` set.
pub(crate) fn store_error(e: cairn_store::Error) -> JsValue {
    error(e.code(), &e.to_string(), None)
}

/// A JavaScript array of strings, built here rather than returned as `Vec<String>`: that would
/// link wasm-bindgen's conversion of a value slice (and its glue) for two rarely used calls.
fn strings(lines: &[String]) -> Array {
    let out = Array::new();
    for l in lines {
        out.push(&JsValue::from_str(l));
    }
    out
}

// Tags of worker/protocol.js's encoding, in which the Worker hands over a statement's parameters:
// one buffer read here rather than a call across the wasm boundary for each value and each test
// of its type (docs/protocol.md, "Parameters").
const P_NULL: u8 = 0;
const P_TRUE: u8 = 1;
const P_FALSE: u8 = 2;
const P_I32: u8 = 3;
const P_F64: u8 = 4;
const P_STR: u8 = 5;
const P_BYTES: u8 = 6;
const P_BIGINT: u8 = 7;
const P_ARRAY: u8 = 8;
const P_OBJECT: u8 = 9;
const P_UNDEFINED: u8 = 12;
/// A `bigint` outside 64 bits, which the encoding does not carry.
const P_WIDE: u8 = 13;

enum Params {
    Positional(Vec<Value>),
    Named(Vec<(String, Value)>),
}

/// Reads the encoded parameters.
struct ParamReader<'a>(&'a [u8]);

impl<'a> ParamReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], JsValue> {
        if self.0.len() < n {
            return Err(error(
                "INVALID_INPUT",
                "the parameters' encoding is cut short",
                None,
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, JsValue> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<usize, JsValue> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn u64(&mut self) -> Result<u64, JsValue> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8], JsValue> {
        let n = self.u32()?;
        self.take(n)
    }
    fn string(&mut self) -> Result<String, JsValue> {
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|_| error("INVALID_INPUT", "a parameter's text is not UTF-8", None))
    }

    /// One parameter's value; `what` names it for an error.
    fn value(&mut self, what: &dyn Fn() -> String) -> Result<Value, JsValue> {
        Ok(match self.u8()? {
            P_NULL | P_UNDEFINED => Value::Null,
            P_TRUE => Value::Integer(1),
            P_FALSE => Value::Integer(0),
            P_I32 => Value::Integer(i64::from(self.u32()? as u32 as i32)),
            P_F64 => {
                let n = f64::from_bits(self.u64()?);
                if n.fract() == 0.0 && n.abs() <= MAX_SAFE as f64 {
                    Value::Integer(n as i64)
                } else if n.is_nan() {
                    Value::Null
                } else {
                    Value::Real(n)
                }
            }
            P_STR => Value::Text(self.string()?),
            P_BYTES => Value::Blob(self.bytes()?.to_vec()),
            P_BIGINT => Value::Integer(self.u64()? as i64),
            P_WIDE => {
                return Err(error(
                    "TYPE",
                    &format!("{} does not fit in a 64-bit integer", what()),
                    None,
                ))
            }
            _ => {
                return Err(error(
                    "TYPE",
                    &format!(
                        "{} must be null, a number, a bigint, a string, a boolean or a Uint8Array",
                        what()
                    ),
                    None,
                ))
            }
        })
    }

    /// The parameters: none, an array (positional) or an object (named).
    fn params(mut self) -> Result<Params, JsValue> {
        if self.0.is_empty() {
            return Ok(Params::Positional(Vec::new()));
        }
        match self.u8()? {
            P_NULL | P_UNDEFINED => Ok(Params::Positional(Vec::new())),
            P_ARRAY => {
                let n = self.u32()?;
                let mut out = Vec::with_capacity(n.min(self.0.len()));
                for i in 0..n {
                    out.push(self.value(&|| format!("parameter {}", i + 1))?);
                }
                Ok(Params::Positional(out))
            }
            P_OBJECT => {
                let n = self.u32()?;
                let mut out = Vec::new();
                for _ in 0..n {
                    let name = self.string()?;
                    let v = self.value(&|| format!("parameter {name:?}"))?;
                    out.push((name, v));
                }
                Ok(Params::Named(out))
            }
            _ => Err(error(
                "INVALID_INPUT",
                "parameters must be an array (positional) or an object (named)",
                None,
            )),
        }
    }
}

// Value tags of an encoded result (worker/result.js reads them).
const T_NULL: u8 = 0;
const T_NUMBER: u8 = 1;
const T_BIGINT: u8 = 2;
const T_TEXT: u8 = 3;
const T_BLOB: u8 = 4;

/// Results of this many rows or more cross column by column, numeric columns as typed arrays;
/// smaller ones as row-major values. A typed array costs more to clone between threads than a
/// few numbers (an `ArrayBuffer` to allocate on each side), and small results are the statements
/// whose round trip matters most.
const COLUMNS_MIN_ROWS: usize = 16;

/// Encodes a statement's result for the Worker, which turns it into the message the page gets
/// (docs/protocol.md, "Results"). One buffer in wasm memory, read by `worker/result.js`, instead
/// of a JavaScript array built by a call across the boundary per value. Little-endian:
///
/// - mode 1 (run): `f64 changes`, value `lastInsertRowid`;
/// - modes 0 and 2: `u32 rowCount`, `f64 changes`, value `lastInsertRowid`, `u32 columnCount`,
///   each name (`u32` length, UTF-8), then `u8 layout`: `0` and every value row by row, or `1`
///   and per column a kind (`0` values, `1` f64s, `2` i32s) and its `rowCount` items.
///
/// A value is a tag and its payload: null; number (f64: an INTEGER within ±2^53 or a REAL);
/// bigint (i64); text and blob (`u32` length, bytes).
struct Encoder(Vec<u8>);

impl Encoder {
    fn u32(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u32).to_le_bytes());
    }
    fn f64(&mut self, x: f64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len());
        self.0.extend_from_slice(b);
    }
    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.0.push(T_NULL),
            Value::Integer(i) if i.unsigned_abs() <= MAX_SAFE as u64 => {
                self.0.push(T_NUMBER);
                self.f64(*i as f64);
            }
            Value::Integer(i) => {
                self.0.push(T_BIGINT);
                self.0.extend_from_slice(&i.to_le_bytes());
            }
            Value::Real(r) => {
                self.0.push(T_NUMBER);
                self.f64(*r);
            }
            Value::Text(s) => {
                self.0.push(T_TEXT);
                self.bytes(s.as_bytes());
            }
            Value::Blob(b) => {
                self.0.push(T_BLOB);
                self.bytes(b);
            }
        }
    }

    /// One column of a large result, as the cheapest kind that holds it exactly.
    fn column(&mut self, rows: &[Vec<Value>], c: usize) {
        let all_i32 = rows
            .iter()
            .all(|r| matches!(r[c], Value::Integer(i) if i32::try_from(i).is_ok()));
        let all_f64 = rows.iter().all(|r| match r[c] {
            Value::Integer(i) => i.unsigned_abs() <= MAX_SAFE as u64,
            Value::Real(_) => true,
            _ => false,
        });
        if all_i32 {
            self.0.push(COL_I32);
            for r in rows {
                if let Value::Integer(i) = r[c] {
                    self.0.extend_from_slice(&(i as i32).to_le_bytes());
                }
            }
        } else if all_f64 {
            self.0.push(COL_F64);
            for r in rows {
                match r[c] {
                    Value::Integer(i) => self.f64(i as f64),
                    Value::Real(x) => self.f64(x),
                    _ => {}
                }
            }
        } else {
            self.0.push(COL_ARRAY);
            for r in rows {
                self.value(&r[c]);
            }
        }
    }

    fn result(&mut self, out: Output, mode: u8, last_rowid: i64) {
        self.0.clear();
        let (columns, mut rows, changes) = match out {
            Output::Rows { columns, rows } => (columns, rows, 0),
            Output::Changes { changes, .. } => (Default::default(), Vec::new(), changes),
            Output::Done => (Default::default(), Vec::new(), 0),
        };
        if mode == MODE_RUN {
            self.f64(changes as f64);
            self.value(&Value::Integer(last_rowid));
            return;
        }
        if mode == MODE_FIRST {
            rows.truncate(1);
        }
        self.u32(rows.len());
        self.f64(changes as f64);
        self.value(&Value::Integer(last_rowid));
        self.u32(columns.len());
        for c in columns.iter() {
            self.bytes(c.as_bytes());
        }
        if rows.len() < COLUMNS_MIN_ROWS {
            self.0.push(0);
            for r in &rows {
                for v in r {
                    self.value(v);
                }
            }
        } else {
            self.0.push(1);
            for c in 0..columns.len() {
                self.column(&rows, c);
            }
        }
    }
}

#[wasm_bindgen]
pub struct Database {
    db: cairn_sql::Database,
    /// Prepared statements by id; the Worker also keeps its statements by SQL text here.
    stmts: Vec<Option<Statement>>,
    /// The last result, encoded; kept to reuse its allocation.
    out: Encoder,
    #[cfg(feature = "sync")]
    sync: cairn_replicated::Sync,
}

fn js_now() -> u64 {
    js_sys::Date::now() as u64
}

#[cfg(feature = "sync")]
fn author(hex: &str) -> Result<cairn_sync::AuthorId, JsValue> {
    cairn_sync::AuthorId::from_hex(hex).ok_or_else(|| {
        error(
            "INVALID_INPUT",
            &format!("{hex:?} is not an author id (64 hex digits)"),
            None,
        )
    })
}

/// An array of author ids (the Worker makes each a string), read here rather than taken as
/// `Vec<String>`: wasm-bindgen's conversion of a string array is more glue.
#[cfg(feature = "sync")]
fn authors(writers: &JsValue) -> Result<Vec<cairn_sync::AuthorId>, JsValue> {
    let list = writers
        .dyn_ref::<Array>()
        .ok_or_else(|| error("INVALID_INPUT", "writers must be an array", None))?;
    list.iter()
        .map(|w| author(&w.as_string().unwrap_or_default()))
        .collect()
}

#[cfg(feature = "sync")]
fn byte_arrays(v: Vec<Vec<u8>>) -> Array {
    v.into_iter()
        .map(|m| JsValue::from(Uint8Array::from(m.as_slice())))
        .collect()
}

#[wasm_bindgen]
impl Database {
    /// Opens the database in `handle`, the `FileSystemSyncAccessHandle` the Worker took for the
    /// file `name` in cairn's OPFS directory (`name` is for messages). With sync, `key_handle`
    /// is the sync access handle of the database's key file (`cairn-keys/<name>`), its key
    /// store (docs/sync.md 10b); the plain build takes none. The database owns the handles
    /// from here on, also when opening fails.
    pub fn open(
        handle: JsValue,
        name: &str,
        durability: &str,
        cache_pages: u32,
        key_handle: JsValue,
    ) -> Result<Database, JsValue> {
        #[cfg(feature = "sync")]
        let keys = cairn_replicated::FileKeys::new(OpfsFile::from_handle(
            key_handle,
            &format!("the key file of {name}"),
        ));
        #[cfg(not(feature = "sync"))]
        let _ = key_handle;
        let file = OpfsFile::from_handle(handle, name);
        let durability = match durability {
            "full" => Durability::Full,
            "relaxed" => Durability::Relaxed,
            other => {
                return Err(error(
                    "INVALID_INPUT",
                    &format!("durability must be \"full\" or \"relaxed\", not {other:?}"),
                    None,
                ))
            }
        };
        let defaults = Options::default();
        let opts = Options {
            durability,
            cache_pages: if cache_pages > 0 {
                cache_pages as usize
            } else {
                defaults.cache_pages
            },
            ..defaults
        };
        let store = Paged::open(Box::new(file) as Box<dyn BlockFile>, opts).map_err(sql_error)?;
        let mut db = cairn_sql::Database::open(Box::new(store)).map_err(sql_error)?;
        cairn_sql::set_clock(js_now);
        // random() and uuid7() draw from this; two devices must not share a sequence.
        let mut seed = [0u8; 8];
        getrandom::getrandom(&mut seed)
            // The code, not the text: getrandom's `Display` carries every platform's messages.
            .map_err(|e| {
                error(
                    "INTERNAL",
                    &format!("no secure randomness (getrandom error {})", e.code()),
                    None,
                )
            })?;
        db.set_random_seed(u64::from_le_bytes(seed) | 1);
        #[cfg(feature = "sync")]
        let sync =
            cairn_replicated::Sync::attach(&mut db, js_now, Box::new(keys)).map_err(sql_error)?;
        Ok(Database {
            db,
            stmts: Vec::new(),
            out: Encoder(Vec::new()),
            #[cfg(feature = "sync")]
            sync,
        })
    }

    /// Runs a parameter-free script of one or more statements.
    pub fn exec(&mut self, sql: &str) -> Result<(), JsValue> {
        self.db.exec_script(sql).map(|_| ()).map_err(sql_error)
    }

    /// Prepares a statement and returns its id.
    pub fn prepare(&mut self, sql: &str) -> Result<u32, JsValue> {
        let stmt = self.db.prepare(sql).map_err(sql_error)?;
        match self.stmts.iter().position(Option::is_none) {
            Some(i) => {
                self.stmts[i] = Some(stmt);
                Ok(i as u32)
            }
            None => {
                self.stmts.push(Some(stmt));
                Ok(self.stmts.len() as u32 - 1)
            }
        }
    }

    /// Runs a prepared statement with `params` in worker/protocol.js's encoding (`ParamReader`;
    /// empty for none). Returns where in wasm memory its encoded result starts (`Encoder`),
    /// valid until the next call.
    #[wasm_bindgen(js_name = executePrepared)]
    pub fn execute_prepared(&mut self, id: u32, params: &[u8], mode: u8) -> Result<u32, JsValue> {
        let stmt = self
            .stmts
            .get(id as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| error("FINALIZED", "no prepared statement has that id", None))?;
        let db = &mut self.db;
        let out = match ParamReader(params).params()? {
            Params::Positional(p) => stmt.execute(db, &p),
            Params::Named(p) => {
                let named: Vec<(&str, Value)> =
                    p.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
                stmt.execute_named(db, &named)
            }
        }
        .map_err(sql_error)?;
        self.out.result(out, mode, db.last_insert_rowid());
        Ok(self.out.0.as_ptr() as usize as u32)
    }

    pub fn finalize(&mut self, id: u32) {
        if let Some(slot) = self.stmts.get_mut(id as usize) {
            *slot = None;
        }
    }

    /// What the commits since the last call changed, for live queries (worker/watch.js): empty
    /// when nothing did, else `[commits, schema, table, inserted, updated, deleted, table, ...]`
    /// (`schema` 1 when a table or an index was made, altered or dropped). Numbers and strings
    /// in one array: one call across the boundary, no glue for a struct.
    #[wasm_bindgen(js_name = takeChanged)]
    pub fn take_changed(&mut self) -> Array {
        let out = Array::new();
        let c = self.db.take_changed();
        if c.is_empty() {
            return out;
        }
        out.push(&JsValue::from(c.commits as f64));
        out.push(&JsValue::from(u32::from(c.schema)));
        for t in c.tables {
            out.push(&JsValue::from_str(&t.table));
            for n in [t.inserted, t.updated, t.deleted] {
                out.push(&JsValue::from(n as f64));
            }
        }
        out
    }

    /// The tables the query `sql` reads (a live query runs again when one of them changes).
    #[wasm_bindgen(js_name = tablesRead)]
    pub fn tables_read(&self, sql: &str) -> Result<Array, JsValue> {
        let tables = self.db.tables_read(sql).map_err(sql_error)?;
        Ok(strings(&tables))
    }

    #[wasm_bindgen(js_name = inTransaction)]
    pub fn in_transaction(&self) -> bool {
        self.db.in_transaction()
    }

    /// Every problem the integrity check finds, as strings (empty when sound).
    pub fn check(&mut self) -> Result<Array, JsValue> {
        let problems = self.db.integrity_check().map_err(sql_error)?;
        Ok(strings(&problems))
    }

    /// `[{ type, name, table, sql }]` for every table and index.
    pub fn schema(&self) -> Array {
        let out = Array::new();
        for e in self.db.schema() {
            let o = Object::new();
            let _ = Reflect::set(&o, &"type".into(), &e.kind.into());
            let _ = Reflect::set(&o, &"name".into(), &e.name.into());
            let _ = Reflect::set(&o, &"table".into(), &e.table.into());
            let _ = Reflect::set(&o, &"sql".into(), &e.sql.into());
            out.push(&o);
        }
        out
    }

    /// The database file as of the last commit.
    #[wasm_bindgen(js_name = exportBytes)]
    pub fn export_bytes(&mut self) -> Result<Uint8Array, JsValue> {
        let bytes = self.db.export().map_err(sql_error)?;
        Ok(Uint8Array::from(&bytes[..]))
    }

    /// Closes the database and releases its file.
    pub fn close(self) {}

    /// Refuses `bytes` unless they are a sound cairn database: opened and checked in memory, so
    /// the Worker writes nothing to OPFS for a file it would refuse.
    #[wasm_bindgen(js_name = checkImport)]
    pub fn check_import(bytes: Vec<u8>) -> Result<(), JsValue> {
        let store = Paged::open_existing(
            // Boxed like the OPFS file, so the store's code is compiled once, not per file type.
            Box::new(cairn_store::MemoryFile::from_bytes(bytes)) as Box<dyn BlockFile>,
            Options::default(),
        )
        .map_err(sql_error)?;
        let mut db = cairn_sql::Database::open(Box::new(store)).map_err(sql_error)?;
        let problems = db.integrity_check().map_err(sql_error)?;
        if !problems.is_empty() {
            return Err(error(
                "CORRUPT",
                &format!(
                    "the file is damaged: {}",
                    cairn_value::text::join(&problems, "; ")
                ),
                None,
            ));
        }
        Ok(())
    }

    /// Writes checked bytes into `handle` (a new file's sync access handle, for messages named
    /// `name`), flushes and closes it.
    #[wasm_bindgen(js_name = writeImport)]
    pub fn write_import(handle: JsValue, name: &str, bytes: &[u8]) -> Result<(), JsValue> {
        let mut f = OpfsFile::from_handle(handle, name);
        f.write(0, bytes)
            .and_then(|_| f.flush())
            .map_err(store_error)
    }
}

/// Sync (docs/sync.md): only in `cairn-sync.wasm`. `cairn.wasm` has none of these exports, and
/// its Worker script (`cairn-worker.js`) answers the sync requests with `NO_SYNC` itself.
#[cfg(feature = "sync")]
#[wasm_bindgen]
impl Database {
    /// This database's author id, 64 hex digits (the key pair is made on first use).
    #[wasm_bindgen(js_name = syncId)]
    pub fn sync_id(&mut self) -> Result<String, JsValue> {
        Ok(self.sync.id(&mut self.db).map_err(sql_error)?.to_hex())
    }
    #[wasm_bindgen(js_name = syncExportKey)]
    pub fn sync_export_key(&mut self) -> Result<Uint8Array, JsValue> {
        let k = self.sync.export_key(&mut self.db).map_err(sql_error)?;
        Ok(Uint8Array::from(k.as_slice()))
    }
    #[wasm_bindgen(js_name = syncImportKey)]
    pub fn sync_import_key(&mut self, bytes: Vec<u8>) -> Result<(), JsValue> {
        self.sync
            .import_key(&mut self.db, &bytes)
            .map_err(sql_error)
    }
    #[wasm_bindgen(js_name = syncSetOwner)]
    pub fn sync_set_owner(&mut self, owner: &str) -> Result<(), JsValue> {
        let owner = author(owner)?;
        self.sync.set_owner(&mut self.db, owner).map_err(sql_error)
    }
    /// `writers`: an array of author ids.
    #[wasm_bindgen(js_name = syncAuthorize)]
    pub fn sync_authorize(&mut self, scope: &str, writers: JsValue) -> Result<(), JsValue> {
        let writers = authors(&writers)?;
        self.sync
            .authorize(&mut self.db, scope, writers)
            .map_err(sql_error)
    }
    /// `writers` as for `syncAuthorize`.
    #[wasm_bindgen(js_name = syncRevoke)]
    pub fn sync_revoke(&mut self, scope: &str, writers: JsValue) -> Result<(), JsValue> {
        let writers = authors(&writers)?;
        self.sync
            .revoke(&mut self.db, scope, writers)
            .map_err(sql_error)
    }
    /// Opens a link: `[id, hello]`.
    #[wasm_bindgen(js_name = syncConnect)]
    pub fn sync_connect(&mut self) -> Result<Array, JsValue> {
        let (id, hello) = self.sync.connect(&mut self.db).map_err(sql_error)?;
        let out = Array::new();
        out.push(&JsValue::from(id));
        out.push(&Uint8Array::from(hello.as_slice()).into());
        Ok(out)
    }
    /// Handles a peer's message; returns the messages to send back.
    #[wasm_bindgen(js_name = syncReceive)]
    pub fn sync_receive(&mut self, link: u32, bytes: Vec<u8>) -> Result<Array, JsValue> {
        let out = self
            .sync
            .receive(&mut self.db, link, &bytes)
            .map_err(sql_error)?;
        Ok(byte_arrays(out))
    }
    #[wasm_bindgen(js_name = syncPoll)]
    pub fn sync_poll(&mut self, link: u32) -> Result<Array, JsValue> {
        let out = self.sync.poll(&mut self.db, link).map_err(sql_error)?;
        Ok(byte_arrays(out))
    }
    #[wasm_bindgen(js_name = syncDisconnect)]
    pub fn sync_disconnect(&mut self, link: u32) {
        self.sync.disconnect(link);
    }
    /// Events since the last call, each `[kind, code, detail]`.
    #[wasm_bindgen(js_name = syncEvents)]
    pub fn sync_events(&mut self) -> Array {
        self.sync
            .take_events()
            .into_iter()
            .map(|e| {
                let a = Array::new();
                a.push(&e.kind.into());
                a.push(&e.code.into());
                a.push(&e.detail.into());
                JsValue::from(a)
            })
            .collect()
    }
    /// Problems `verify()` found in the stored history, as text (empty when sound).
    #[wasm_bindgen(js_name = syncVerify)]
    pub fn sync_verify(&mut self) -> Result<Array, JsValue> {
        let f = self.sync.verify(&mut self.db).map_err(sql_error)?;
        let lines: Vec<String> = f
            .iter()
            .map(|f| {
                format!(
                    "{} seq {}: {} {}",
                    &f.author.to_hex()[..12],
                    f.seq,
                    f.reason.code(),
                    f.detail
                )
            })
            .collect();
        Ok(strings(&lines))
    }
    /// Answers a relay's CHALLENGE frame with the AUTH frame (docs/relay.md, sec. 2): this
    /// database's key and its signature over the nonce and the relay's id.
    #[wasm_bindgen(js_name = syncRelayAuth)]
    pub fn sync_relay_auth(&mut self, challenge: Vec<u8>) -> Result<Uint8Array, JsValue> {
        if challenge.len() != 72 || challenge[..4] != [0x43, 0x52, 1, 1] {
            return Err(error(
                "MALFORMED",
                "the relay's first frame is not a version 1 CHALLENGE",
                None,
            ));
        }
        let mut msg = b"cairn-relay auth v1".to_vec();
        msg.extend_from_slice(&challenge[4..68]);
        let sig = self.sync.sign(&mut self.db, &msg).map_err(sql_error)?;
        let id = self.sync.id(&mut self.db).map_err(sql_error)?;
        let mut frame = vec![0x43, 0x52, 1, 2];
        frame.extend_from_slice(&id.0);
        frame.extend_from_slice(&sig);
        Ok(Uint8Array::from(frame.as_slice()))
    }
    /// Seals pending records into signed blocks and saves them (the Worker calls it once
    /// statements have been idle for a while); the number of blocks made.
    #[wasm_bindgen(js_name = syncSeal)]
    pub fn sync_seal(&mut self) -> Result<u32, JsValue> {
        let n = self.sync.seal(&mut self.db).map_err(sql_error)?;
        Ok(n as u32)
    }
    /// Records committed and not yet sealed into a signed block.
    #[wasm_bindgen(js_name = syncPending)]
    pub fn sync_pending(&mut self) -> Result<u32, JsValue> {
        Ok(self.sync.pending_records() as u32)
    }
    /// A digest of the merged rows, hex: equal on replicas holding the same changes.
    #[wasm_bindgen(js_name = syncDigest)]
    pub fn sync_digest(&mut self) -> Result<String, JsValue> {
        let d = self.sync.state_digest(&mut self.db).map_err(sql_error)?;
        Ok(d.iter().map(|b| format!("{b:02x}")).collect())
    }
    /// Drops history every known peer has acknowledged; the number of records dropped.
    #[wasm_bindgen(js_name = syncCompact)]
    pub fn sync_compact(&mut self) -> Result<u32, JsValue> {
        let n = self.sync.compact(&mut self.db).map_err(sql_error)?;
        Ok(n as u32)
    }
    /// Purges the row of `table` whose primary key is `key` (its values, an array in
    /// worker/protocol.js's parameter encoding): whether the row existed.
    #[wasm_bindgen(js_name = syncPurge)]
    pub fn sync_purge(&mut self, table: &str, key: &[u8]) -> Result<bool, JsValue> {
        let Params::Positional(pk) = ParamReader(key).params()? else {
            return Err(error(
                "INVALID_INPUT",
                "purge takes the key's values as an array",
                None,
            ));
        };
        self.sync.purge(&mut self.db, table, &pk).map_err(sql_error)
    }
}
