//! cairn's SQL engine: a hand-written lexer and parser, a planner that uses indexes, and a
//! push-based executor, over a small byte-oriented storage trait ([`StorageCore`], with the
//! fast paths in [`Storage`]).
//!
//! The crate is laid out by stage, each a private module whose `mod.rs` says what it hands on:
//! `parse/` (text to AST), `plan/` (AST to plan: binding, join order, access paths, write
//! plans, EXPLAIN), `exec/` (plans run: scans and joins, aggregation, sorting, writes, the
//! capture of changes for replication, expression evaluation), `ddl.rs` (CREATE, DROP),
//! `alter.rs` (ALTER TABLE), `fk.rs` (foreign keys), `fts/` (full-text search: fts5 tables,
//! their index, MATCH, ranking), `schema.rs` (the catalog), `introspect.rs` (what describes the
//! schema: `sqlite_schema`, the pragma functions, `PRAGMA`) and `storage/` (the traits and the
//! memory and paged stores). This file holds [`Database`] and [`Statement`] and re-exports what other crates
//! use.
//!
//! # The life of a statement
//!
//! Take `db.execute("SELECT name FROM users WHERE id = ?", &[Value::Integer(7)])`:
//!
//! 1. [`Database::execute`] calls [`Database::prepare`], which hands the text to
//!    `parse::parse`. The parser asks [`tokenize`] (`parse/lexer.rs`) for tokens (each with its
//!    line and column, for error messages) and builds an `ast::Statement` by recursive descent
//!    (`Parser::statement` in `parse/parser.rs`, `Parser::select` in `parse/query.rs`,
//!    precedence climbing in `Parser::binary` in `parse/expr.rs`).
//! 2. `Database::plan` runs the `Planner` (`plan/planner.rs`) over the AST against the
//!    in-memory [`Catalog`]. `Planner::query` reaches `Planner::core_query_in_scope`, which
//!    runs the stages in order: binding (`plan/bind.rs`: `Planner::resolve` resolves names to
//!    frame slots, `Planner::expr` plans expressions into `plan::PExpr`; `bind_from`,
//!    `output_items`, `conjuncts` and `output` bind the clauses), join order (`plan/join.rs`:
//!    `reorder_joins`, then `place_conjuncts` puts each WHERE conjunct on a join level) and
//!    access paths (`plan/access.rs`: `choose_accesses` calls `choose_access` per level; here
//!    `id = ?` matches the primary key, so the level becomes
//!    `Access::Index { index: None, probes: [[?1]] }`). It also records which columns the query
//!    needs (`name`, `id`), and which of them the level's filters need first (`id`).
//! 3. The [`Statement`] keeps the plan with the schema epoch it was made for; running it
//!    again with new parameters skips steps 1 and 2 unless the schema changed.
//! 4. `Database::run` checks the parameter count and calls `exec::run_query`
//!    (`exec/query.rs`), which runs the body (`run_body` -> `run_core`, then `run_levels` in
//!    `exec/scan.rs`). The equality names the whole primary key, so the level builds that key
//!    (`point_keys`: the parameter, encoded as `cairn_value::codec::encode_key_value` keys it)
//!    and reads the row with one [`StorageCore::get`]; a range or an index would instead hand
//!    the bounds from `index_ranges` to [`Storage::scan_each`], which passes its entries on a
//!    leaf at a time. At the start of a scan the level's filters that compare one column with
//!    values fixed for the scan become `ColTest`s (`exec/eval/coltest.rs`, prepared in
//!    `RowFilter::new`). For each row (`primary_row`) the record header is walked once
//!    (`cairn_value::codec::Layout::read`), those tests run on the columns where they lie in
//!    the page, the other filters on decoded columns (`eval_bool`, `exec/eval/mod.rs`); only a
//!    row that passes has the rest of what is needed decoded, and the frame is pushed on. The
//!    sink evaluates the projection and collects the row into [`Output::Rows`]. Grouping and
//!    aggregates are in `exec/aggregate.rs`, ORDER BY's comparison in `exec/sort.rs`. A query
//!    with window calls (planned by `Planner::window_call` and `window_step`, `plan/window.rs`)
//!    has `run_core` collect the core's rows for `exec/window.rs`, which sorts them per window,
//!    appends each call's values and projects.
//!    `EXPLAIN` prints the plan instead (`plan/explain.rs`).
//! 5. A write (`INSERT`/`UPDATE`/`DELETE`) goes through `exec::Writer` (`exec/write/`): it
//!    collects its targets first, then checks types, computes generated columns
//!    (`generated.rs`), checks NOT NULL, CHECK, primary key and UNIQUE constraints per row and writes records and index entries with [`StorageCore::put`]. An
//!    INSERT (`exec/write/insert.rs`) stores its record with [`Storage::put_new`], which finds
//!    a primary key conflict in the same descent of the tree (`Writer::insert_tail`); an upsert
//!    whose DO UPDATE can rewrite the row in place uses [`Storage::put_new_or_rewrite`]
//!    instead, which in that descent either puts the row or rewrites the one holding its key
//!    (`Writer::put_upserting`). Its input rows are its targets: a SELECT's are read in full
//!    first, VALUES rows without a subquery are evaluated one at a time as they are inserted.
//!    An `INSERT ... SELECT *` whose source rows are already the target's copies the stored
//!    records (`Writer::insert_copy`). An UPDATE (`exec/write/update.rs`) that sets no key or
//!    indexed column (`plan::WritePlan::keys_only`) rewrites each row where it is stored
//!    (`Writer::update_in_place`, through [`Storage::update_each`]): a range of keys
//!    (`WHERE id BETWEEN ? AND ?`, the whole table) is walked once with the filters tested on
//!    each row there, keys named outright (`Writer::point_targets`) are visited one by one;
//!    only the columns the SET expressions read are decoded, and
//!    `cairn_value::codec::Fields::rewrite_into` replaces the set columns' bytes (in a copy of
//!    the record, when the new values are as long as the old ones). A replicated table's
//!    UPDATE takes this path too when it sets no scope column and the table has no counters,
//!    its capture fed from the key, scope and set columns read there ([`Changes`],
//!    `exec/capture.rs`). `Database::atomic` wraps it: outside a transaction it is `begin` ..
//!    `commit` (or `rollback` on error); inside one, a [`StorageCore::savepoint`] that an
//!    error rolls back to, so a failed statement has no effect and the transaction stays
//!    usable. CREATE, DROP and ALTER have no plan: `Database::ddl` (`ddl.rs`) runs them from
//!    the AST inside the same `atomic`, and so does `Database::pragma` (`introspect.rs`) a
//!    `PRAGMA` that sets the user version. A query of `sqlite_schema` or of a pragma function
//!    (`PRAGMA table_info(t)` is parsed as one) reads rows the planner made from the catalog
//!    (`Planner::introspection`), as it reads a subquery's.
//!
//! Errors are one enum, [`Error`], each variant with a stable [`Error::code`].

#![forbid(unsafe_code)]

mod alter;
mod ddl;
mod error;
mod exec;
mod fk;
mod fts;
#[doc(hidden)]
pub mod fuzzing;
mod generated;
mod introspect;
mod maintenance;

mod parse;
mod plan;
mod savepoint;
mod schema;
mod storage;
mod types;
mod watch;

pub use cairn_value::Value;
pub use error::{Error, Result};
pub use exec::eval::set_clock;
#[cfg(feature = "sink")]
pub use exec::CaptureSink;
pub use exec::{
    same_row, Change, Changes, ChangesMark, Correction, ElemKind, ElemOp, EncodedRow, ForcedRow,
    RefusedRow, SetPart,
};
pub use maintenance::SchemaEntry;
pub use parse::display::value as sql_literal;
pub use parse::lexer::{tokenize, Tok};
pub use parse::parse_statements;
pub use schema::{quote_ident, Catalog, Key, Merged, Table};
pub use storage::Paged;
pub use storage::{
    conformance, Cursor, Each, Memory, Rewrite, Storage, StorageCore, TreeId, SYSTEM_TREES,
};
pub use types::fmt_real;
pub use watch::{Changed, TableChange};

use exec::eval::{self, Cache};
use parse::{ast, Params};
use plan::{explain, InsertPlan, PExpr, Planner, QueryPlan, WritePlan};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A query's (or RETURNING clause's) result.
    Rows {
        /// Shared with the prepared statement: an execution does not copy the names.
        columns: Rc<[String]>,
        rows: Vec<Vec<Value>>,
    },
    /// A write without RETURNING.
    Changes {
        changes: u64,
        last_insert_rowid: i64,
    },
    /// DDL and transaction control.
    Done,
}

impl Output {
    /// The rows of a query result (empty for other outputs).
    pub fn rows(&self) -> &[Vec<Value>] {
        match self {
            Output::Rows { rows, .. } => rows,
            _ => &[],
        }
    }
}

enum Prepared {
    Query(Rc<QueryPlan>),
    Insert(InsertPlan, Vec<PExpr>),
    Update(WritePlan, Vec<PExpr>),
    Delete(WritePlan),
    Explain(Vec<String>),
    /// DDL and transaction control run from the AST.
    Direct,
}

/// A parsed statement with its plan, to be run many times with different parameters.
pub struct Statement {
    sql: String,
    ast: ast::Statement,
    params: Params,
    /// The plan, with the (database, schema epoch) it was made for.
    plan: RefCell<Option<(SchemaStamp, Rc<Prepared>)>>,
    /// How many times the statement has been planned (once, unless the schema changed).
    plans: std::cell::Cell<u64>,
}

/// (database id, schema epoch): names the catalog's content. The epoch moves with every change
/// of the schema (and with a rollback that undoes one), the id differs between databases.
pub type SchemaStamp = (u64, u64);

impl Statement {
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// How many times the statement has been planned: 1 after [`Database::prepare`], and one
    /// more each time it runs after a schema change (or on another database).
    pub fn times_planned(&self) -> u64 {
        self.plans.get()
    }

    /// How many parameters the statement takes: the largest parameter number (see
    /// `parse::Params`).
    pub fn param_count(&self) -> usize {
        self.params.count
    }

    /// The 0-based position of a named parameter (`:name`, `$name`, `@name`, prefix included).
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params
            .names
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, i)| *i)
    }

    /// Runs the statement on `db` with positional parameters.
    pub fn execute(&self, db: &mut Database, params: &[Value]) -> Result<Output> {
        db.run(self, params)
    }

    /// Runs the statement with named parameters.
    pub fn execute_named(&self, db: &mut Database, params: &[(&str, Value)]) -> Result<Output> {
        let mut vals = vec![Value::Null; self.params.count];
        let mut bound = vec![false; self.params.count];
        for (name, v) in params {
            let i = self.param_index(name).ok_or_else(|| {
                Error::ParamCount(format!("the statement has no parameter {name}"))
            })?;
            vals[i] = v.clone();
            bound[i] = true;
        }
        if let Some(i) = bound.iter().position(|b| !b) {
            return Err(Error::ParamCount(format!(
                "parameter {} is not bound",
                i + 1
            )));
        }
        db.run(self, &vals)
    }
}

/// A database: a catalog and a storage engine. Single-threaded, as it runs inside one Worker.
pub struct Database {
    store: Box<dyn Storage>,
    catalog: Catalog,
    in_tx: bool,
    /// The catalog as it was at BEGIN, restored by ROLLBACK.
    tx_catalog: Option<Catalog>,
    rng: Cell<u64>,
    last_rowid: i64,
    /// Which database this is (a plan made for one is never run on another) and how many
    /// times its schema changed (a plan made before is made again).
    id: u64,
    epoch: u64,
    /// Writes to replicated tables since the transaction began, for the commit hook.
    changes: Changes,
    /// False while rows from a peer are applied (they are not new local changes).
    capture: bool,
    hook: Option<Box<dyn CommitHook>>,
    /// INSERT's row buffers, kept from one statement to the next (`exec::RowBufs`).
    bufs: exec::RowBufs,
    /// What this transaction changed so far, and what committed since the host last asked
    /// (`take_changed`).
    tx_changed: watch::Changed,
    changed: watch::Changed,
    /// Open savepoints, oldest first.
    savepoints: Vec<savepoint::Savepoint>,
    /// `PRAGMA foreign_keys` (`fk.rs`), and whether a write of this transaction touched a
    /// deferred foreign key, to be checked at COMMIT.
    foreign_keys: bool,
    fk_pending: bool,
}

/// Sees every commit that changed replicated tables (the sync layer records them). Runs inside
/// the transaction, before it commits, so what it writes commits atomically with the rows.
pub trait CommitHook {
    /// `changes` is never empty; they are cleared after (the buffers are kept for the next
    /// transaction). `schema` names the catalog's content: a commit with the stamp of an
    /// earlier one has the same catalog. Returns rows to
    /// correct before the commit (applied unrecorded, in the same transaction). An error rolls
    /// the whole transaction back.
    fn before_commit(
        &mut self,
        store: &mut dyn Storage,
        catalog: &Catalog,
        schema: SchemaStamp,
        changes: &Changes,
    ) -> Result<Vec<Correction>>;
    /// Whether the commit that `before_commit` (or `flush`) prepared reached the storage.
    fn after_commit(&mut self, committed: bool);
    /// Whether the hook holds in memory alone what it would otherwise have written with the
    /// commits (it may, over a volatile storage: [`Storage::volatile`]), for
    /// [`CommitHook::flush`] to write.
    fn unwritten(&self) -> bool {
        false
    }
    /// Writes what [`CommitHook::unwritten`] says is held in memory alone, inside a
    /// transaction the database opened for it and commits after ([`Database::flush`]).
    fn flush(&mut self, store: &mut dyn Storage, catalog: &Catalog) -> Result<()> {
        let _ = (store, catalog);
        Ok(())
    }
    /// The schema changed (a table made, altered or dropped, or a transaction that did so
    /// rolled back): `catalog` is the new one, and the next commit's stamp is another. (For
    /// the capture's sink, in the builds that have one.)
    #[cfg(feature = "sink")]
    fn schema_changed(&mut self, _catalog: &Catalog) {}
}

static NEXT_DATABASE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Database {
    /// Opens a database over `store`, reading the catalog it holds.
    pub fn open(store: Box<dyn Storage>) -> Result<Database> {
        let catalog = Catalog::load(store.as_ref())?;
        Ok(Database {
            store,
            catalog,
            in_tx: false,
            tx_catalog: None,
            rng: Cell::new(0x2545_F491_4F6C_DD1D),
            last_rowid: 0,
            id: NEXT_DATABASE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            epoch: 0,
            changes: Changes::default(),
            capture: true,
            hook: None,
            bufs: exec::RowBufs::default(),
            tx_changed: watch::Changed::default(),
            changed: watch::Changed::default(),
            savepoints: Vec::new(),
            foreign_keys: false,
            fk_pending: false,
        })
    }

    /// A database in memory.
    pub fn memory() -> Database {
        Database::open(Box::new(Memory::new())).expect("an empty memory store opens")
    }

    /// Seeds `random()`; the engine never takes randomness from anywhere else.
    pub fn set_random_seed(&mut self, seed: u64) {
        self.rng.set(seed);
    }

    pub fn in_transaction(&self) -> bool {
        self.in_tx
    }

    /// Installs the hook that sees commits to replicated tables (one per database). A hook
    /// that holds anything in memory alone ([`CommitHook::unwritten`]) is to be flushed
    /// ([`Database::flush`]) before another replaces it.
    pub fn set_commit_hook(&mut self, hook: Box<dyn CommitHook>) {
        self.hook = Some(hook);
    }

    /// Hands the changes of the replicated tables `sink` takes to it as statements make them
    /// (for the commit hook's own use), instead of holding them for the hook.
    #[cfg(feature = "sink")]
    pub fn set_capture_sink(&mut self, sink: Box<dyn CaptureSink>) {
        self.changes.set_sink(sink);
    }

    /// Runs `f` with writes to replicated tables not recorded as local changes: for applying
    /// rows that arrived from a peer. Foreign keys are off meanwhile: a write no peer hears of
    /// must not cascade into other rows (docs/sync.md, 10b, "Constraints").
    pub fn without_capture<T>(&mut self, f: impl FnOnce(&mut Database) -> Result<T>) -> Result<T> {
        let was = std::mem::replace(&mut self.capture, false);
        let fks = std::mem::replace(&mut self.foreign_keys, false);
        let out = f(self);
        self.capture = was;
        self.foreign_keys = fks;
        out
    }

    /// Makes the tables hold these rows (or none at these keys), unrecorded, inside the open
    /// transaction: for rows merged from peers. Returns the rows left out because they break
    /// the table's constraints (see `exec::Writer::force_rows`).
    pub fn force_rows(&mut self, rows: Vec<exec::ForcedRow>) -> Result<Vec<exec::RefusedRow>> {
        if !self.in_tx {
            return Err(Error::Transaction(
                "force_rows runs inside a transaction".into(),
            ));
        }
        let mut w = exec::Writer {
            store: self.store.as_mut(),
            params: &[],
            rng: &self.rng,
            capture: None,
            bufs: &mut self.bufs,
        };
        w.force_rows(rows, &mut self.tx_changed)
    }

    /// The storage, for a layer that keeps its own trees beside the tables (tree ids at or
    /// above [`storage::SYSTEM_TREES`]) and writes them inside the database's transactions.
    pub fn storage_mut(&mut self) -> &mut dyn Storage {
        self.store.as_mut()
    }

    /// Commits the storage's open transaction, first handing the changes it made to replicated
    /// tables to the hook. On error nothing is committed and no transaction is left open.
    fn commit_store(&mut self) -> Result<()> {
        let mut changes = std::mem::take(&mut self.changes);
        let r = self.commit_changes(&changes);
        changes.clear();
        // The buffers serve the next transaction, unless a very large one grew them.
        if changes.footprint() <= 4 << 20 {
            self.changes = changes;
        } else {
            changes.give_sink(&mut self.changes);
        }
        r
    }

    fn commit_changes(&mut self, changes: &Changes) -> Result<()> {
        let hook = match self.hook.as_mut() {
            Some(h) if !changes.is_empty() => Some(h),
            _ => None,
        };
        let Some(hook) = hook else {
            if !changes.is_empty() {
                // Nobody would record these changes: they would never reach another replica.
                self.store.rollback()?;
                return Err(Error::NotReplicable(
                    "writes to replicated tables need the sync layer, which this database was \
                     opened without (in the browser: open it with { sync: true })"
                        .into(),
                ));
            }
            return self.store.commit();
        };
        let schema = (self.id, self.epoch);
        let fixed = hook
            .before_commit(self.store.as_mut(), &self.catalog, schema, changes)
            .and_then(|corrections| {
                if corrections.is_empty() {
                    // Nothing merged differently (the common case).
                    return Ok(());
                }
                let mut rows = Vec::new();
                for c in corrections {
                    rows.push((self.catalog.table(&c.table)?.clone(), c.pk, c.row));
                }
                let mut w = exec::Writer {
                    store: self.store.as_mut(),
                    params: &[],
                    rng: &self.rng,
                    capture: None,
                    bufs: &mut self.bufs,
                };
                w.force_rows(rows, &mut self.tx_changed).map(|_| ())
            });
        let hook = self.hook.as_mut().expect("invariant: checked above");
        if let Err(e) = fixed {
            hook.after_commit(false);
            self.store.rollback()?;
            return Err(e);
        }
        let r = self.store.commit();
        hook.after_commit(r.is_ok());
        r
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn storage(&self) -> &dyn Storage {
        self.store.as_ref()
    }

    /// Checks that every row decodes, has the table's shape and types, and that every index
    /// holds exactly one entry per row (and nothing else). Returns the problems found, empty
    /// when the database is consistent.
    pub fn check(&self) -> Result<Vec<String>> {
        use std::ops::Bound::Unbounded;
        let mut problems = Vec::new();
        for t in self.catalog.tables.values() {
            // Sorted lists rather than sets: an index scan yields its keys sorted already.
            let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); t.indexes.len()];
            let mut rows = 0u64;
            let mut cur = self.store.scan(t.tree, Unbounded, Unbounded, false)?;
            while cur.next()? {
                rows += 1;
                let vals = match cairn_value::codec::decode_record(cur.value()) {
                    Ok(v) => v,
                    Err(e) => {
                        problems.push(format!("table {}: a row does not decode: {e}", t.name));
                        continue;
                    }
                };
                if vals.len() > t.columns.len() {
                    problems.push(format!(
                        "table {}: a row has {} columns, the table {}",
                        t.name,
                        vals.len(),
                        t.columns.len()
                    ));
                    continue;
                }
                let mut vals = vals;
                vals.resize(t.columns.len(), Value::Null);
                for (c, v) in t.columns.iter().zip(&vals) {
                    if c.ty.coerce(v.clone(), &c.name).is_err() {
                        problems.push(format!(
                            "table {}: column {} holds a {} value",
                            t.name,
                            c.name,
                            v.type_name()
                        ));
                    }
                }
                for (i, ix) in t.indexes.iter().enumerate() {
                    let mut k = Vec::new();
                    if let Err(e) = exec::index_parts(ix, &vals, &mut k) {
                        problems.push(format!(
                            "index {}: a row's key does not evaluate: {e}",
                            ix.name
                        ));
                        continue;
                    }
                    k.extend_from_slice(cur.key());
                    expected[i].push(k);
                }
            }
            drop(cur);
            for (i, ix) in t.indexes.iter().enumerate() {
                let mut found = Vec::new();
                let mut cur = self.store.scan(ix.tree, Unbounded, Unbounded, false)?;
                while cur.next()? {
                    found.push(cur.key().to_vec());
                }
                cairn_store::sort::sort(&mut expected[i]);
                let (missing, extra) = sorted_differences(&expected[i], &found);
                if missing > 0 || extra > 0 {
                    problems.push(format!(
                        "index {} on {}: {missing} entries missing, {extra} entries without a row ({rows} rows)",
                        ix.name, t.name
                    ));
                }
            }
        }
        for f in &self.catalog.fts {
            problems.extend(fts::verify(self.store.as_ref(), f)?);
        }
        Ok(problems)
    }

    /// Closes the database and hands back its storage (to reopen it, or to inspect it). An
    /// open transaction is rolled back, then what the commit hook holds in memory alone is
    /// written ([`Database::flush`]); should that fail, the error comes back instead and the
    /// database is dropped (call `flush` first to see such an error with the database open).
    pub fn into_storage(mut self) -> Result<Box<dyn Storage>> {
        if self.in_tx {
            // Handed back whatever the rollback says (a store that cannot roll back is
            // opened again from what it holds).
            let _ = self.execute("ROLLBACK", &[]);
            self.in_tx = false;
        }
        self.flush()?;
        Ok(self.store)
    }

    /// Has the commit hook write what it holds in memory alone ([`CommitHook::unwritten`]:
    /// over a volatile storage, the sync layer keeps its records in memory until the storage
    /// is read whole), in a transaction of its own. [`Database::export`] and
    /// [`Database::into_storage`] call it; nothing to do without such a hook. Needs no open
    /// transaction (`TRANSACTION` else, when there is something to write).
    pub fn flush(&mut self) -> Result<()> {
        let Some(hook) = self.hook.as_mut().filter(|h| h.unwritten()) else {
            return Ok(());
        };
        if self.in_tx {
            return Err(Error::Transaction(
                "the sync layer's records are written between transactions; commit or roll back \
                 first"
                    .into(),
            ));
        }
        self.store.begin()?;
        if let Err(e) = hook.flush(self.store.as_mut(), &self.catalog) {
            hook.after_commit(false);
            self.store.rollback()?;
            return Err(e);
        }
        let r = self.store.commit();
        hook.after_commit(r.is_ok());
        r
    }

    pub fn last_insert_rowid(&self) -> i64 {
        self.last_rowid
    }

    /// A new schema epoch, which the commit hook hears of in builds with the capture sink.
    fn schema_moved(&mut self) {
        self.epoch += 1;
        #[cfg(feature = "sink")]
        if let Some(h) = self.hook.as_mut() {
            h.schema_changed(&self.catalog);
        }
    }

    /// What a plan is made for: the schema, and whether foreign keys are on (their checks are
    /// in the plan). Database ids never reach the top bit.
    fn plan_stamp(&self) -> SchemaStamp {
        (self.id | (self.foreign_keys as u64) << 63, self.epoch)
    }

    /// Parses and plans one statement.
    pub fn prepare(&self, sql: &str) -> Result<Statement> {
        let (ast, params) = parse::parse(sql)?;
        self.prepare_ast(sql.to_string(), ast, params)
    }

    fn prepare_ast(&self, sql: String, ast: ast::Statement, params: Params) -> Result<Statement> {
        // A table's CHECK and DEFAULT are kept with its definition and evaluated by every later
        // statement, which has its own parameters: SQLite refuses parameters there, and so does
        // cairn (here, not in the parser, so that a definition stored before still loads).
        if params.count > 0
            && matches!(
                ast,
                ast::Statement::CreateTable(_) | ast::Statement::AlterTable { .. }
            )
        {
            return Err(Error::Invalid(
                "a table definition cannot have parameters: CHECK and DEFAULT take constants"
                    .into(),
            ));
        }
        let prepared = self.plan(&ast)?;
        Ok(Statement {
            sql,
            ast,
            params,
            plan: RefCell::new(Some((self.plan_stamp(), Rc::new(prepared)))),
            plans: std::cell::Cell::new(1),
        })
    }

    /// Parses, plans and runs one statement.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Output> {
        let stmt = self.prepare(sql)?;
        self.run(&stmt, params)
    }

    /// Runs every statement in `sql` (no parameters), returning each one's output; stops at the
    /// first error.
    pub fn exec_script(&mut self, sql: &str) -> Result<Vec<Output>> {
        let mut outs = Vec::new();
        for (ast, text, params) in parse::parse_statements(sql)? {
            let stmt = self.prepare_ast(text, ast, params)?;
            outs.push(self.run(&stmt, &[])?);
        }
        Ok(outs)
    }

    fn plan(&self, stmt: &ast::Statement) -> Result<Prepared> {
        let mut p = Planner::new(&self.catalog);
        p.foreign_keys = self.foreign_keys;
        let prepared = match stmt {
            ast::Statement::Select(q) => Prepared::Query(Rc::new(p.query(q)?)),
            ast::Statement::Insert(i)
                if self.catalog.fts(&i.table).is_some_and(|f| {
                    i.columns
                        .first()
                        .is_some_and(|c| c.eq_ignore_ascii_case(&f.name))
                }) =>
            {
                Prepared::Direct
            }
            ast::Statement::Insert(i) => {
                let plan = p.insert(i)?;
                let mut checks = table_checks(&mut p, &plan.table)?;
                if self.foreign_keys {
                    checks.extend(fk::child_checks(&mut p, &self.catalog, &plan.table, None)?);
                }
                Prepared::Insert(plan, checks)
            }
            ast::Statement::Update(u) => {
                let plan = p.update(u)?;
                let mut checks = table_checks(&mut p, &plan.table)?;
                if self.foreign_keys {
                    let set: Vec<String> = u.set.iter().map(|(c, _)| c.clone()).collect();
                    let t = &plan.table;
                    checks.extend(fk::child_checks(&mut p, &self.catalog, t, Some(&set))?);
                }
                Prepared::Update(plan, checks)
            }
            ast::Statement::Delete(d) => Prepared::Delete(p.delete(d)?),
            ast::Statement::Explain(inner) => {
                let prep = self.plan(inner)?;
                let mut lines = Vec::new();
                match &prep {
                    Prepared::Query(q) => explain::query(q, 0, &mut lines),
                    Prepared::Update(w, _) | Prepared::Delete(w) => {
                        lines.push(format!(
                            "{} {}",
                            if matches!(prep, Prepared::Delete(_)) {
                                "DELETE FROM"
                            } else {
                                "UPDATE"
                            },
                            w.table.name
                        ));
                        explain::core(&w.scan, 1, &mut lines);
                    }
                    Prepared::Insert(i, _) => {
                        lines.push(format!("INSERT INTO {}", i.table.name));
                        if let plan::InsertRows::Query(q) = &i.rows {
                            explain::query(q, 1, &mut lines);
                        }
                    }
                    _ => lines.push("(no plan: runs directly)".into()),
                }
                Prepared::Explain(lines)
            }
            _ => Prepared::Direct,
        };
        Ok(prepared)
    }

    fn run(&mut self, stmt: &Statement, params: &[Value]) -> Result<Output> {
        // EXPLAIN runs nothing, so its parameters may be left unbound (as in SQLite): the plan
        // does not depend on their values.
        let explain_unbound = params.is_empty() && matches!(stmt.ast, ast::Statement::Explain(_));
        if params.len() != stmt.params.count && !explain_unbound {
            return Err(Error::ParamCount(format!(
                "the statement takes {} parameters, {} were given",
                stmt.params.count,
                params.len()
            )));
        }
        let prepared = {
            let mut slot = stmt.plan.borrow_mut();
            match &*slot {
                Some((v, p)) if *v == self.plan_stamp() => p.clone(),
                _ => {
                    let p = self.plan(&stmt.ast)?;
                    stmt.plans.set(stmt.plans.get() + 1);
                    let p = Rc::new(p);
                    *slot = Some((self.plan_stamp(), p.clone()));
                    p
                }
            }
        };
        match &*prepared {
            Prepared::Query(q) => {
                let cache = Cache::default();
                cache.borrow_mut().memo = true;
                let cx = eval::Cx {
                    store: self.store.as_ref(),
                    params,
                    outer: None,
                    rng: &self.rng,
                    cache: &cache,
                    regroup: None,
                };
                Ok(Output::Rows {
                    columns: q.columns.clone(),
                    rows: exec::collect_rows(q, &cx)?,
                })
            }
            Prepared::Explain(lines) => Ok(Output::Rows {
                columns: Rc::from(["plan".to_string()]),
                rows: lines.iter().map(|l| vec![Value::Text(l.clone())]).collect(),
            }),
            Prepared::Insert(..) | Prepared::Update(..) | Prepared::Delete(_)
                if self.foreign_keys =>
            {
                self.fk_statement(&stmt.ast, &prepared, params)
            }
            Prepared::Insert(plan, checks) => {
                let res = self.atomic(false, |db| db.writer(params).insert(plan, checks))?;
                if let Some(r) = res.last_rowid {
                    self.last_rowid = r;
                }
                let inserted = res.changes - res.updated;
                self.note_rows(&plan.table.name, inserted, res.updated, 0);
                Ok(write_output(res, &plan.returning_names, self.last_rowid))
            }
            Prepared::Update(plan, checks) => {
                let res = self.atomic(false, |db| db.writer(params).update(plan, checks))?;
                self.note_rows(&plan.table.name, 0, res.changes, 0);
                Ok(write_output(res, &plan.returning_names, self.last_rowid))
            }
            Prepared::Delete(plan) => {
                let res = self.atomic(false, |db| db.writer(params).delete(plan))?;
                self.note_rows(&plan.table.name, 0, 0, res.changes);
                Ok(write_output(res, &plan.returning_names, self.last_rowid))
            }
            Prepared::Direct => self.direct(&stmt.ast),
        }
    }

    fn writer<'a>(&'a mut self, params: &'a [Value]) -> exec::Writer<'a> {
        exec::Writer {
            store: self.store.as_mut(),
            params,
            rng: &self.rng,
            capture: if self.capture {
                Some(&mut self.changes)
            } else {
                None
            },
            bufs: &mut self.bufs,
        }
    }

    /// Runs `f` so that it has no effect if it fails: its own transaction outside BEGIN, a
    /// savepoint inside one.
    fn atomic<T>(&mut self, ddl: bool, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let saved = if ddl {
            Some(self.catalog.clone())
        } else {
            None
        };
        let restore = |db: &mut Self| {
            if let Some(c) = saved.clone() {
                db.catalog = c;
            }
        };
        let mark = self.changes.mark();
        if self.in_tx {
            let sp = self.store.savepoint()?;
            match f(self) {
                Ok(v) => {
                    self.store.release(sp)?;
                    Ok(v)
                }
                Err(e) => {
                    self.changes.back_to(mark);
                    self.store.rollback_to(sp)?;
                    self.store.release(sp)?;
                    restore(self);
                    Err(e)
                }
            }
        } else {
            self.store.begin()?;
            match f(self) {
                Ok(v) => {
                    if let Err(e) = self.commit_store() {
                        self.tx_changed = watch::Changed::default();
                        restore(self);
                        return Err(e);
                    }
                    Ok(v)
                }
                Err(e) => {
                    self.changes.back_to(mark);
                    self.store.rollback()?;
                    restore(self);
                    Err(e)
                }
            }
        }
    }

    fn direct(&mut self, stmt: &ast::Statement) -> Result<Output> {
        match stmt {
            ast::Statement::Begin => {
                if self.in_tx {
                    return Err(Error::Transaction(
                        "cannot start a transaction within a transaction".into(),
                    ));
                }
                self.store.begin()?;
                self.in_tx = true;
                self.tx_catalog = Some(self.catalog.clone());
                Ok(Output::Done)
            }
            ast::Statement::Commit => {
                if !self.in_tx {
                    return Err(Error::Transaction(
                        "cannot commit - no transaction is active".into(),
                    ));
                }
                self.commit_tx()
            }
            ast::Statement::Savepoint(name) => self.savepoint(name),
            ast::Statement::Release(name) => self.release(name),
            ast::Statement::RollbackTo(name) => self.rollback_to(name),
            ast::Statement::Rollback => {
                if !self.in_tx {
                    return Err(Error::Transaction(
                        "cannot rollback - no transaction is active".into(),
                    ));
                }
                self.savepoints.clear();
                self.fk_pending = false;
                self.store.rollback()?;
                self.changes.clear();
                self.tx_changed = watch::Changed::default();
                self.in_tx = false;
                if let Some(c) = self.tx_catalog.take() {
                    self.catalog = c;
                    self.schema_moved();
                }
                Ok(Output::Done)
            }
            ast::Statement::Pragma { name, value } => self.pragma(name, value.as_deref()),
            ast::Statement::Insert(i) => {
                self.fts_insert_command(i)
                    .unwrap_or_else(|| Err(Error::Invalid("invariant: fts5 command".into())))?;
                Ok(Output::Changes {
                    changes: 0,
                    last_insert_rowid: self.last_rowid,
                })
            }
            other => {
                self.atomic(true, |db| {
                    db.ddl(other)?;
                    // A content table dropped, created again or altered: its full-text
                    // indexes follow it (an ALTER that drops a column one reads fails).
                    if !db.catalog.fts.is_empty() {
                        db.catalog.attach_fts()?;
                    }
                    Ok(())
                })?;
                self.schema_moved();
                self.tx_changed.schema = true;
                if !self.in_tx {
                    self.changed.commit(&mut self.tx_changed);
                }
                Ok(Output::Done)
            }
        }
    }

    /// Commits the open transaction (COMMIT, or RELEASE of the savepoint that began it).
    fn commit_tx(&mut self) -> Result<Output> {
        // A deferred foreign key broken fails the COMMIT and leaves the transaction open.
        if self.fk_pending && self.foreign_keys {
            self.fk_check_deferred()?;
        }
        self.fk_pending = false;
        self.savepoints.clear();
        if let Err(e) = self.commit_store() {
            // The transaction is over either way: nothing of it was committed.
            self.in_tx = false;
            self.tx_changed = watch::Changed::default();
            if let Some(c) = self.tx_catalog.take() {
                self.catalog = c;
                self.schema_moved();
            }
            return Err(e);
        }
        self.in_tx = false;
        self.tx_catalog = None;
        self.changed.commit(&mut self.tx_changed);
        Ok(Output::Done)
    }
}

fn table_checks(p: &mut Planner, t: &Table) -> Result<Vec<PExpr>> {
    let mut out = Vec::new();
    for c in &t.checks {
        out.push(p.table_expr(t, &c.expr)?);
    }
    Ok(out)
}

fn write_output(res: exec::WriteResult, names: &Rc<[String]>, last: i64) -> Output {
    if names.is_empty() {
        Output::Changes {
            changes: res.changes,
            last_insert_rowid: last,
        }
    } else {
        Output::Rows {
            columns: names.clone(),
            rows: res.returned,
        }
    }
}

/// How many entries of `a` are not in `b`, and of `b` not in `a`; both sorted (a repeated entry
/// counts once for each time it is there more often than in the other).
fn sorted_differences(a: &[Vec<u8>], b: &[Vec<u8>]) -> (usize, usize) {
    let (mut i, mut j, mut only_a, mut only_b) = (0, 0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                only_a += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                only_b += 1;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    (only_a + a.len() - i, only_b + b.len() - j)
}

#[cfg(test)]
mod tests {
    use super::sorted_differences;

    #[test]
    fn sorted_differences_count_each_side() {
        let v = |xs: &[u8]| xs.iter().map(|&x| vec![x]).collect::<Vec<_>>();
        assert_eq!(sorted_differences(&v(&[]), &v(&[])), (0, 0));
        assert_eq!(sorted_differences(&v(&[1, 2, 3]), &v(&[1, 2, 3])), (0, 0));
        assert_eq!(
            sorted_differences(&v(&[1, 3, 5]), &v(&[2, 3, 4, 6])),
            (2, 3)
        );
        assert_eq!(sorted_differences(&v(&[1, 2]), &v(&[])), (2, 0));
        assert_eq!(sorted_differences(&v(&[]), &v(&[7])), (0, 1));
    }
}
