//! The catalog: tables and indexes, kept in memory and persisted in the storage's schema tree
//! ([`crate::storage::SCHEMA_TREE`]) as SQLite keeps `sqlite_schema`: one row per object with
//! its kind, name, table, tree id and the SQL that recreates it. Opening a database reads these
//! rows and parses the SQL again; no row data is touched.

use crate::error::{Error, Result};
use crate::parse;
use crate::parse::ast::{self, ColumnDef, DefaultValue, Expr};
use crate::storage::{Storage, TreeId, SCHEMA_TREE};
use crate::types::ColType;
use cairn_value::codec::{decode_record, encode_key, encode_record};
use cairn_value::text::join;
use cairn_value::Value;
use std::ops::Bound;
use std::rc::Rc;

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    pub decl: Option<String>,
    pub not_null: bool,
    pub default: Option<DefaultValue>,
    /// A generated column's expression (`crate::generated`).
    pub generated: Option<Box<ast::Generated>>,
}

/// A CHECK constraint, with the column whose definition holds it (None: a table constraint).
/// DROP COLUMN drops a column's own CHECKs with it, as SQLite does.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub expr: Expr,
    pub column: Option<usize>,
}

/// How a table's rows are keyed in its tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// By a 64-bit row id: hidden (None) or aliased by an INTEGER PRIMARY KEY column.
    Rowid(Option<usize>),
    /// By the primary key columns' values.
    Columns(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub name: String,
    /// The key columns; of an index on expressions, the columns its expressions read (what a
    /// write must change for its entries to change), ascending.
    pub columns: Vec<usize>,
    /// Of an index on expressions, its key parts (empty for an index on columns).
    pub exprs: Vec<IndexExpr>,
    pub unique: bool,
    pub tree: TreeId,
    /// Created for a UNIQUE constraint in CREATE TABLE (dropped with the table, not by name).
    pub auto: bool,
}

/// A key part of an index on expressions: as written, and planned over the table's row (slot
/// `i` is column `i`).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexExpr {
    pub ast: Expr,
    pub plan: crate::plan::PExpr,
}

impl Index {
    /// How many values each entry's key holds before the row's key.
    pub fn width(&self) -> usize {
        if self.exprs.is_empty() {
            self.columns.len()
        } else {
            self.exprs.len()
        }
    }
}

/// Plans the key parts of an index on expressions over `t`, and the columns they read.
/// SQLite's rules: no subquery, nothing that changes from one call to the next.
pub fn index_exprs(t: &Table, exprs: &[Expr]) -> Result<(Vec<IndexExpr>, Vec<usize>)> {
    use crate::plan::{Func, PExpr};
    let catalog = Catalog::default();
    let mut planner = crate::plan::Planner::new(&catalog);
    let mut out = Vec::with_capacity(exprs.len());
    let mut columns = Vec::new();
    for e in exprs {
        // Unqualified, as SQLite requires: the text stays right when the table is renamed.
        let mut qualified = false;
        crate::alter::each_column(&mut e.clone(), &mut |table, _| qualified |= table.is_some());
        if qualified {
            return Err(Error::Invalid(
                "the \".\" operator prohibited in index expressions".into(),
            ));
        }
        let plan = planner.table_expr(t, e)?;
        // What SQLite refuses in one, with its messages.
        let mut bad = crate::plan::has_subquery(&plan).then_some("subqueries");
        crate::plan::walk(&plan, &mut |x| match x {
            PExpr::Func(Func::Random | Func::Uuid7 | Func::Date(_), _) => {
                bad = Some("non-deterministic functions")
            }
            PExpr::Param(_) => bad = Some("parameters"),
            PExpr::Col(c) => columns.push(*c),
            _ => {}
        });
        if let Some(what) = bad {
            return Err(Error::Invalid(format!(
                "{what} prohibited in index expressions"
            )));
        }
        out.push(IndexExpr {
            ast: e.clone(),
            plan,
        });
    }
    cairn_store::sort::sort(&mut columns);
    columns.dedup();
    Ok((out, columns))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub key: Key,
    pub tree: TreeId,
    /// CHECK constraints, table and column level, over the table's columns.
    pub checks: Vec<Check>,
    pub indexes: Vec<Index>,
    /// Foreign keys, in the order written (`pragma_foreign_key_list` numbers them backwards,
    /// as SQLite does); child columns by name, resolved when enforced (`fk.rs`).
    pub foreign_keys: Vec<ast::ForeignKey>,
    /// Set when the table is a sync replica (`CREATE TABLE ... REPLICATED`).
    pub replicated: Option<Replication>,
    /// The full-text indexes over this table's rows, which its writes keep (`crate::fts`).
    pub fts: Vec<Rc<crate::fts::Fts>>,
    /// The generated columns and their expressions planned over the row, in the order they are
    /// computed (`crate::generated::plan`).
    pub generated: Vec<(usize, crate::plan::PExpr)>,
}

/// How a replicated table's rows merge: by scope column, and which columns are counters, sets
/// and maps (every other column outside the key is last-writer-wins).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Replication {
    pub scope: Option<usize>,
    pub counters: Vec<usize>,
    pub sets: Vec<usize>,
    pub maps: Vec<usize>,
}

/// How a column of a replicated table merges, for what its writes record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    Lww,
    Counter,
    Set,
    Map,
}

impl Replication {
    /// How column `c` (not of the key) merges.
    pub fn kind(&self, c: usize) -> Merged {
        if self.counters.contains(&c) {
            Merged::Counter
        } else if self.sets.contains(&c) {
            Merged::Set
        } else if self.maps.contains(&c) {
            Merged::Map
        } else {
            Merged::Lww
        }
    }
    /// Whether a column merges otherwise than last writer wins: a write then records what
    /// changed, from the row before it, and the merged row may differ from what it wrote.
    pub fn has_merged(&self) -> bool {
        !self.counters.is_empty() || !self.sets.is_empty() || !self.maps.is_empty()
    }
}

impl Table {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The positions of the named columns, or `UnknownColumn` for the first that is missing. A
    /// loop rather than `collect::<Result<Vec<_>>>()`, which is a copy of the iterator code per
    /// call site.
    pub fn columns_named(&self, names: &[String]) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for n in names {
            out.push(
                self.column(n)
                    .ok_or_else(|| Error::UnknownColumn(n.clone()))?,
            );
        }
        Ok(out)
    }

    /// The columns the primary tree is keyed by (empty for a hidden row id).
    pub fn key_columns(&self) -> Vec<usize> {
        match &self.key {
            Key::Rowid(Some(c)) => vec![*c],
            Key::Rowid(None) => vec![],
            Key::Columns(c) => c.clone(),
        }
    }

    /// SQL that recreates the table (kept in the catalog, shown by `.schema`).
    pub fn sql(&self) -> String {
        // Pushes and `concat`, not `format!`: CREATE TABLE is a common statement, and without a
        // `format!` on the common paths core's formatting stays out of cairn.wasm.
        let mut s = ["CREATE TABLE ", &quote_ident(&self.name), " ("].concat();
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&quote_ident(&c.name));
            if let Some(d) = &c.decl {
                s.push(' ');
                s.push_str(d);
            }
            if matches!(self.key, Key::Rowid(Some(k)) if k == i) {
                s.push_str(" PRIMARY KEY");
            }
            if c.not_null {
                s.push_str(" NOT NULL");
            }
            if let Some(d) = &c.default {
                // As written, so that `PRAGMA table_info` shows it as SQLite does; it parsed
                // as this expression, so in parentheses it parses as the same again.
                s.push_str(" DEFAULT (");
                s.push_str(&d.text);
                s.push(')');
            }
            if let Some(g) = &c.generated {
                s.push_str(&crate::generated::sql(&g.expr, g.stored));
            }
            for c in self.checks.iter().filter(|c| c.column == Some(i)) {
                s.push_str(" CHECK (");
                s.push_str(&crate::parse::display::expr(&c.expr));
                s.push(')');
            }
        }
        if let Key::Columns(cols) = &self.key {
            let names: Vec<_> = cols
                .iter()
                .map(|&c| quote_ident(&self.columns[c].name))
                .collect();
            s.push_str(", PRIMARY KEY (");
            s.push_str(&join(&names, ", "));
            s.push(')');
        }
        for ix in self.indexes.iter().filter(|i| i.auto) {
            let names: Vec<_> = ix
                .columns
                .iter()
                .map(|&c| quote_ident(&self.columns[c].name))
                .collect();
            s.push_str(", UNIQUE (");
            s.push_str(&join(&names, ", "));
            s.push(')');
        }
        for c in self.checks.iter().filter(|c| c.column.is_none()) {
            s.push_str(", CHECK (");
            s.push_str(&crate::parse::display::expr(&c.expr));
            s.push(')');
        }
        if !self.foreign_keys.is_empty() {
            self.foreign_keys_sql(&mut s);
        }
        s.push(')');
        if let Some(r) = &self.replicated {
            s.push_str(" REPLICATED");
            let mut opts: Vec<String> = Vec::new();
            if let Some(c) = r.scope {
                opts.push(format!("SCOPE {}", quote_ident(&self.columns[c].name)));
            }
            for &c in &r.counters {
                opts.push(format!("COUNTER {}", quote_ident(&self.columns[c].name)));
            }
            for &c in &r.sets {
                opts.push(format!("SET {}", quote_ident(&self.columns[c].name)));
            }
            for &c in &r.maps {
                opts.push(format!("MAP {}", quote_ident(&self.columns[c].name)));
            }
            if !opts.is_empty() {
                s.push_str(&format!(" ({})", join(&opts, ", ")));
            }
        }
        s
    }

    /// The table's foreign keys as table constraints, each action written out.
    #[inline(never)]
    fn foreign_keys_sql(&self, s: &mut String) {
        let names = |v: &[String]| {
            let q: Vec<String> = v.iter().map(|c| quote_ident(c)).collect();
            join(&q, ", ")
        };
        for fk in &self.foreign_keys {
            s.push_str(", FOREIGN KEY (");
            s.push_str(&names(&fk.columns));
            s.push_str(") REFERENCES ");
            s.push_str(&quote_ident(&fk.parent));
            if !fk.parent_columns.is_empty() {
                s.push_str(" (");
                s.push_str(&names(&fk.parent_columns));
                s.push(')');
            }
            s.push_str(" ON DELETE ");
            s.push_str(fk.on_delete.sql());
            s.push_str(" ON UPDATE ");
            s.push_str(fk.on_update.sql());
            if fk.deferred {
                s.push_str(" DEFERRABLE INITIALLY DEFERRED");
            }
        }
    }

    /// What a UNIQUE error names for index `ix`: its columns, or for an index on expressions
    /// the index, as SQLite.
    pub fn index_part_names(&self, ix: &Index) -> String {
        if !ix.exprs.is_empty() {
            return format!("index '{}'", ix.name);
        }
        let names: Vec<String> = (ix.columns.iter())
            .map(|&c| format!("{}.{}", self.name, self.columns[c].name))
            .collect();
        join(&names, ", ")
    }

    pub fn index_sql(&self, ix: &Index) -> String {
        let names: Vec<_> = if ix.exprs.is_empty() {
            ix.columns
                .iter()
                .map(|&c| quote_ident(&self.columns[c].name))
                .collect()
        } else {
            ix.exprs
                .iter()
                .map(|e| parse::display::expr(&e.ast))
                .collect()
        };
        [
            "CREATE ",
            if ix.unique { "UNIQUE " } else { "" },
            "INDEX ",
            &quote_ident(&ix.name),
            " ON ",
            &quote_ident(&self.name),
            " (",
            &join(&names, ", "),
            ")",
        ]
        .concat()
    }
}

pub fn quote_ident(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain && !parse::is_keyword(s) {
        s.to_string()
    } else {
        cairn_value::text::quote(s, '"')
    }
}

/// The name of the `n`th index a table's constraints make (1-based), as SQLite names it.
pub fn auto_index_name(table: &str, n: usize) -> String {
    ["sqlite_autoindex_", table, "_", &n.to_string()].concat()
}

pub fn column_from_def(def: &ColumnDef) -> Column {
    Column {
        name: def.name.clone(),
        ty: ColType::from_decl(def.type_name.as_deref()),
        decl: def.type_name.clone(),
        not_null: def.not_null,
        default: def.default.clone(),
        generated: def.generated.clone(),
    }
}

/// Builds a table from its definition; index trees are numbered from `next_tree` on.
pub fn table_from_ast(
    ct: &ast::CreateTable,
    tree: TreeId,
    next_tree: &mut TreeId,
) -> Result<Table> {
    let mut columns: Vec<Column> = Vec::new();
    for def in &ct.columns {
        if columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&def.name))
        {
            return Err(Error::AlreadyExists(format!("column {}", def.name)));
        }
        columns.push(column_from_def(def));
    }
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let find = |n: &str| -> Result<usize> {
        names
            .iter()
            .position(|c| c.eq_ignore_ascii_case(n))
            .ok_or_else(|| Error::UnknownColumn(format!("{}.{n}", ct.name)))
    };
    let find_all = |ns: &[String]| -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for n in ns {
            out.push(find(n)?);
        }
        Ok(out)
    };
    let col_pk: Vec<usize> = ct
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.primary_key)
        .map(|(i, _)| i)
        .collect();
    let pk: Vec<usize> = match (&ct.primary_key, col_pk.len()) {
        (Some(_), n) if n > 0 => {
            return Err(Error::Invalid(format!(
                "table {} has more than one primary key",
                ct.name
            )))
        }
        (_, n) if n > 1 => {
            return Err(Error::Invalid(format!(
                "table {} has more than one primary key",
                ct.name
            )))
        }
        (Some(names), _) => find_all(names)?,
        (None, _) => col_pk,
    };
    let key = if pk.len() == 1
        && columns[pk[0]]
            .decl
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("INTEGER"))
        && !ct.columns[pk[0]].primary_key_desc
    {
        Key::Rowid(Some(pk[0]))
    } else if pk.is_empty() {
        Key::Rowid(None)
    } else {
        for &c in &pk {
            // SQLite lets NULL into a non-integer primary key only by an old bug; cairn refuses.
            columns[c].not_null = true;
        }
        Key::Columns(pk)
    };
    let mut checks: Vec<Check> = Vec::new();
    for (i, c) in ct.columns.iter().enumerate() {
        if let Some(e) = &c.check {
            checks.push(Check {
                expr: e.clone(),
                column: Some(i),
            });
        }
    }
    checks.extend(ct.checks.iter().map(|e| Check {
        expr: e.clone(),
        column: None,
    }));
    let mut uniques: Vec<Vec<usize>> = Vec::new();
    for (i, c) in ct.columns.iter().enumerate() {
        if c.unique {
            uniques.push(vec![i]);
        }
    }
    for u in &ct.uniques {
        uniques.push(find_all(u)?);
    }
    let mut indexes: Vec<Index> = Vec::new();
    // The constraints' indexes are numbered as SQLite numbers them: in the order the
    // definition gives the constraints, a primary key that keys the table by its columns
    // taking its number too (cairn keeps no index for it; `introspect` names it).
    let key_cols = Table::key_cols_of(&key);
    let mut n = 0;
    for (i, cols) in uniques.into_iter().enumerate() {
        if i == ct.primary_key_after && matches!(key, Key::Columns(_)) {
            n += 1;
        }
        // A UNIQUE constraint on exactly the primary key, or on an earlier one's columns,
        // adds nothing.
        if cols == key_cols || indexes.iter().any(|ix| ix.columns == cols) {
            continue;
        }
        let t = *next_tree;
        *next_tree += 1;
        n += 1;
        indexes.push(Index {
            exprs: Vec::new(),
            name: auto_index_name(&ct.name, n),
            columns: cols,
            unique: true,
            tree: t,
            auto: true,
        });
    }
    let replicated = match &ct.replicated {
        None => None,
        Some(r) => Some(replication(ct, &columns, &key, r, &find)?),
    };
    for fk in &ct.foreign_keys {
        for c in &fk.columns {
            if find(c).is_err() {
                return Err(Error::Invalid(format!(
                    "unknown column \"{c}\" in foreign key definition"
                )));
            }
        }
        if !fk.parent_columns.is_empty() && fk.parent_columns.len() != fk.columns.len() {
            return Err(Error::Invalid(format!(
                "number of columns in foreign key does not match the number of columns in the \
                 referenced table {}",
                fk.parent
            )));
        }
    }
    let mut t = Table {
        name: ct.name.clone(),
        columns,
        key,
        tree,
        checks,
        indexes,
        foreign_keys: ct.foreign_keys.clone(),
        replicated,
        fts: Vec::new(),
        generated: Vec::new(),
    };
    crate::generated::plan(&mut t)?;
    Ok(t)
}

/// Checks a replicated table's definition: rows need keys that are unique on every device, so a
/// row-id table is refused; counters are INTEGER columns outside the key.
fn replication(
    ct: &ast::CreateTable,
    columns: &[Column],
    key: &Key,
    r: &ast::Replicated,
    find: &dyn Fn(&str) -> Result<usize>,
) -> Result<Replication> {
    if let Some(c) = columns.iter().find(|c| c.generated.is_some()) {
        // A peer's row is applied as merged, column by column; a value computed from the
        // writer's row could then disagree with the merged columns it was computed from.
        return Err(Error::NotReplicable(format!(
            "{}.{} is a generated column, which a replicated table cannot have \
             (docs/sync.md, 10b): compute it in the query instead",
            ct.name, c.name
        )));
    }
    let pk = match key {
        Key::Columns(c) => c.clone(),
        Key::Rowid(_) => {
            return Err(Error::NotReplicable(format!(
                "table {} is keyed by an integer row id, which two devices would both hand out; \
                 give it a globally unique primary key, e.g. id TEXT PRIMARY KEY DEFAULT (uuid7())",
                ct.name
            )))
        }
    };
    let scope = r.scope.as_deref().map(find).transpose()?;
    let mut counters = Vec::new();
    for n in &r.counters {
        let c = find(n)?;
        if pk.contains(&c) || Some(c) == scope {
            return Err(Error::NotReplicable(format!(
                "{}.{n} is part of the key or the scope and cannot be a counter",
                ct.name
            )));
        }
        if columns[c].ty != ColType::Integer {
            return Err(Error::NotReplicable(format!(
                "counter column {}.{n} must be INTEGER",
                ct.name
            )));
        }
        if counters.contains(&c) {
            return Err(Error::NotReplicable(format!(
                "counter column {}.{n} is listed twice",
                ct.name
            )));
        }
        counters.push(c);
    }
    let (mut sets, mut maps) = (Vec::new(), Vec::new());
    for (names, out, kind) in [(&r.sets, &mut sets, "SET"), (&r.maps, &mut maps, "MAP")] {
        for n in names {
            let c = find(n)?;
            if pk.contains(&c) || Some(c) == scope || counters.contains(&c) {
                return Err(Error::NotReplicable(format!(
                    "{}.{n} is part of the key, the scope or a counter and cannot be a {kind}",
                    ct.name
                )));
            }
            if !matches!(columns[c].ty, ColType::Text | ColType::Any) {
                return Err(Error::NotReplicable(format!(
                    "{kind} column {}.{n} must be TEXT (it reads as JSON text)",
                    ct.name
                )));
            }
            if out.contains(&c) {
                return Err(Error::NotReplicable(format!(
                    "{kind} column {}.{n} is listed twice",
                    ct.name
                )));
            }
            out.push(c);
        }
    }
    if let Some(c) = sets.iter().find(|c| maps.contains(c)) {
        return Err(Error::NotReplicable(format!(
            "{}.{} cannot be both a SET and a MAP",
            ct.name, columns[*c].name
        )));
    }
    Ok(Replication {
        scope,
        counters,
        sets,
        maps,
    })
}

impl Table {
    fn key_cols_of(key: &Key) -> Vec<usize> {
        match key {
            Key::Rowid(Some(c)) => vec![*c],
            Key::Rowid(None) => vec![],
            Key::Columns(c) => c.clone(),
        }
    }
}

/// The in-memory catalog.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    pub tables: Tables,
    pub next_tree: TreeId,
    /// `PRAGMA user_version`, kept here (and in the storage) so that a plan that reads it is
    /// made again when it changes, as with any change to the catalog.
    pub user_version: i32,
    /// fts5 tables, resolved against their content tables (`Catalog::attach_fts`).
    pub fts: Vec<Rc<crate::fts::Fts>>,
}

/// The tables by lower-cased name, in name order. A sorted list searched by halves: a catalog is
/// small and read far more often than changed, and the wasm module then carries one `BTreeMap`
/// type fewer.
#[derive(Debug, Default, Clone)]
pub struct Tables(Vec<(String, Rc<Table>)>);

impl Tables {
    fn find(&self, key: &str) -> std::result::Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Rc<Table>> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Adds or replaces the table under `key`, returning the one it replaced.
    pub fn insert(&mut self, key: String, table: Rc<Table>) -> Option<Rc<Table>> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, table)),
            Err(i) => {
                self.0.insert(i, (key, table));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Rc<Table>> {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }

    /// The tables in name order.
    pub fn values(&self) -> impl Iterator<Item = &Rc<Table>> {
        self.0.iter().map(|(_, t)| t)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&str> for Tables {
    type Output = Rc<Table>;

    fn index(&self, key: &str) -> &Rc<Table> {
        self.get(key).expect("no table by that name")
    }
}

/// The error for a table the catalog does not hold: one of the tables that describe the schema
/// (`sqlite_schema`, ...) is there, but only to be read.
#[inline(never)]
fn missing_table(name: &str) -> Error {
    if crate::introspect::table(&Catalog::default(), name).is_some() {
        return Error::Invalid(
            [
                "table ",
                name,
                " describes the schema: it can be read, not changed",
            ]
            .concat(),
        );
    }
    Error::UnknownTable(name.to_string())
}

const KIND_TABLE: &str = "table";
const KIND_INDEX: &str = "index";
/// An fts5 table's row; its tree is the documents tree, the postings one before it.
const KIND_FTS: &str = "fts5";

impl Catalog {
    pub fn table(&self, name: &str) -> Result<&Rc<Table>> {
        self.tables
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| missing_table(name))
    }

    /// Finds the table owning the index `name`.
    pub fn index_owner(&self, name: &str) -> Option<(&Rc<Table>, usize)> {
        self.tables.values().find_map(|t| {
            t.indexes
                .iter()
                .position(|i| i.name.eq_ignore_ascii_case(name))
                .map(|p| (t, p))
        })
    }

    /// Reads the catalog from the schema tree.
    pub fn load(store: &dyn Storage) -> Result<Catalog> {
        let mut cat = Catalog {
            next_tree: 1,
            user_version: crate::introspect::load_user_version(store)?,
            ..Default::default()
        };
        let mut tables: Vec<(String, TreeId, String)> = Vec::new();
        let mut indexes: Vec<(String, TreeId, String, bool)> = Vec::new();
        let mut virtuals: Vec<(TreeId, String)> = Vec::new();
        let mut cur = store.scan(SCHEMA_TREE, Bound::Unbounded, Bound::Unbounded, false)?;
        while cur.next()? {
            let rec = decode_record(cur.value())?;
            let text = |i: usize| -> Result<String> {
                match rec.get(i) {
                    Some(Value::Text(s)) => Ok(s.clone()),
                    _ => Err(Error::Storage(cairn_store::Error::Corrupt(
                        "schema row is malformed".into(),
                    ))),
                }
            };
            let tree = match rec.get(3) {
                Some(Value::Integer(t)) if *t >= 0 => *t as TreeId,
                _ => {
                    return Err(Error::Storage(cairn_store::Error::Corrupt(
                        "schema row has no tree id".into(),
                    )))
                }
            };
            cat.next_tree = cat.next_tree.max(tree + 1);
            let kind = text(0)?;
            if kind == KIND_TABLE {
                tables.push((text(1)?, tree, text(4)?));
            } else if kind == KIND_FTS {
                virtuals.push((tree, text(4)?));
            } else {
                let auto = matches!(rec.get(5), Some(Value::Integer(1)));
                indexes.push((text(2)?, tree, text(4)?, auto));
            }
        }
        drop(cur);
        for (_, tree, sql) in tables {
            let (ast::Statement::CreateTable(ct), _) = parse::parse(&sql)? else {
                return Err(Error::Storage(cairn_store::Error::Corrupt(
                    "schema row holds no CREATE TABLE".into(),
                )));
            };
            let mut dummy = 0;
            let mut t = table_from_ast(&ct, tree, &mut dummy)?;
            // Index trees come from their own rows.
            t.indexes.clear();
            cat.tables.insert(t.name.to_ascii_lowercase(), Rc::new(t));
        }
        for (table, tree, sql, auto) in indexes {
            let (ast::Statement::CreateIndex(ci), _) = parse::parse(&sql)? else {
                return Err(Error::Storage(cairn_store::Error::Corrupt(
                    "schema row holds no CREATE INDEX".into(),
                )));
            };
            let t = cat.table(&table)?;
            let mut t2 = (**t).clone();
            let (exprs, columns) = if ci.exprs.is_empty() {
                (Vec::new(), t2.columns_named(&ci.columns)?)
            } else {
                index_exprs(&t2, &ci.exprs)?
            };
            t2.indexes.push(Index {
                name: ci.name,
                columns,
                exprs,
                unique: ci.unique,
                tree,
                auto,
            });
            cat.tables.insert(table.to_ascii_lowercase(), Rc::new(t2));
        }
        for (tree, sql) in virtuals {
            let (ast::Statement::CreateVirtual(cv), _) = parse::parse(&sql)? else {
                return Err(Error::Storage(cairn_store::Error::Corrupt(
                    "schema row holds no CREATE VIRTUAL TABLE".into(),
                )));
            };
            cat.fts
                .push(Rc::new(crate::fts::define(&cv, tree.saturating_sub(1))?));
        }
        if !cat.fts.is_empty() {
            cat.attach_fts()?;
        }
        Ok(cat)
    }

    /// Writes (`Some`) or deletes the catalog row of an fts5 table.
    pub fn save_fts(
        store: &mut dyn Storage,
        name: &str,
        f: Option<&crate::fts::Fts>,
    ) -> Result<()> {
        let key = encode_key(&[
            Value::Text(KIND_FTS.into()),
            Value::Text(name.to_ascii_lowercase()),
        ]);
        let Some(f) = f else {
            store.delete(SCHEMA_TREE, &key)?;
            return Ok(());
        };
        let rec = encode_record(&[
            Value::Text(KIND_FTS.into()),
            Value::Text(f.name.clone()),
            Value::Text(f.name.clone()),
            Value::Integer(f.tree as i64 + 1),
            Value::Text(f.sql()),
            Value::Integer(0),
        ]);
        store.put(SCHEMA_TREE, &key, &rec)?;
        Ok(())
    }

    /// Writes a table's catalog rows (and its indexes'), replacing what was there.
    pub fn save_table(store: &mut dyn Storage, t: &Table) -> Result<()> {
        let key = encode_key(&[
            Value::Text(KIND_TABLE.into()),
            Value::Text(t.name.to_ascii_lowercase()),
        ]);
        let rec = encode_record(&[
            Value::Text(KIND_TABLE.into()),
            Value::Text(t.name.clone()),
            Value::Text(t.name.clone()),
            Value::Integer(t.tree as i64),
            Value::Text(t.sql()),
            Value::Integer(0),
        ]);
        store.put(SCHEMA_TREE, &key, &rec)?;
        for ix in &t.indexes {
            let key = encode_key(&[
                Value::Text(KIND_INDEX.into()),
                Value::Text(ix.name.to_ascii_lowercase()),
            ]);
            let rec = encode_record(&[
                Value::Text(KIND_INDEX.into()),
                Value::Text(ix.name.clone()),
                Value::Text(t.name.clone()),
                Value::Integer(ix.tree as i64),
                Value::Text(t.index_sql(ix)),
                Value::Integer(ix.auto as i64),
            ]);
            store.put(SCHEMA_TREE, &key, &rec)?;
        }
        Ok(())
    }

    pub fn delete_table_rows(store: &mut dyn Storage, t: &Table) -> Result<()> {
        store.delete(
            SCHEMA_TREE,
            &encode_key(&[
                Value::Text(KIND_TABLE.into()),
                Value::Text(t.name.to_ascii_lowercase()),
            ]),
        )?;
        for ix in &t.indexes {
            Self::delete_index_row(store, &ix.name)?;
        }
        Ok(())
    }

    pub fn delete_index_row(store: &mut dyn Storage, name: &str) -> Result<()> {
        store.delete(
            SCHEMA_TREE,
            &encode_key(&[
                Value::Text(KIND_INDEX.into()),
                Value::Text(name.to_ascii_lowercase()),
            ]),
        )?;
        Ok(())
    }
}
