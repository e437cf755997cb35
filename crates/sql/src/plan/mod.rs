//! The planner: resolves names in an AST statement against the catalog and turns it into a plan
//! ([`crate::plan`]) for the executor. Choices it makes:
//!
//! - WHERE and ON are split into conjuncts; each is checked at the first join level where every
//!   table it names is bound (LEFT JOIN: WHERE conjuncts on the right side wait until the NULL row
//!   is decided).
//! - For each level, an access path: the primary key or a secondary index when equality, IN or
//!   range conjuncts fit a prefix of its columns; a covering index when the index holds every
//!   column the query needs; a hash join when an equality join condition has no index; otherwise
//!   a scan. An index whose order matches ORDER BY is used to skip the sort.
//! - Only the columns a query needs are decoded, and the columns the level's filters need are
//!   decoded first, so rows that fail are never fully decoded.
//!
//! The plan types live here; the stages that make them are its modules: [`planner`] runs a
//! SELECT through [`bind`], [`join`] and [`access`]; [`write`] plans INSERT, UPDATE and
//! DELETE; [`explain`] prints a plan.
//!
//! Plans are what the planner hands to the executor ([`crate::exec`]).
//! Names are resolved to frame slots, functions to [`Func`], tables to access paths.

mod access;
mod bind;
pub(crate) mod explain;
mod join;
mod planner;
mod walk;
pub(crate) mod window;
mod write;

pub(crate) use access::{access_columns, prefix_successor};
pub(crate) use planner::Planner;
pub(crate) use walk::{has_subquery, walk};
pub(crate) use window::{Bound, WinCall, WinFunc, WindowPlan};

use crate::parse::ast::{BinOp, Conflict};
use crate::schema::Table;
use crate::types::{Affinity, Arith, ColType};
use cairn_value::Value;
use std::rc::Rc;

/// A planned expression. Columns are slots in the current frame ([`PExpr::Col`]) or in an
/// enclosing query's frame ([`PExpr::Outer`], for correlated subqueries).
#[derive(Debug, Clone, PartialEq)]
pub enum PExpr {
    Lit(Value),
    /// 0-based parameter index.
    Param(usize),
    Col(usize),
    /// (how many query levels up, slot).
    Outer(usize, usize),
    Neg(Box<PExpr>),
    Pos(Box<PExpr>),
    Not(Box<PExpr>),
    BitNot(Box<PExpr>),
    Arith(Arith, Box<PExpr>, Box<PExpr>),
    Concat(Box<PExpr>, Box<PExpr>),
    Bit(BinOp, Box<PExpr>, Box<PExpr>),
    /// A comparison, with the affinity to apply to each side first (SQLite's comparison rules).
    Cmp(BinOp, Box<PExpr>, Box<PExpr>, Affinity, Affinity),
    And(Box<PExpr>, Box<PExpr>),
    Or(Box<PExpr>, Box<PExpr>),
    IsNull(Box<PExpr>, bool),
    /// expr, list, negated, affinity applied to the left side's comparisons.
    InList(Box<PExpr>, Vec<PExpr>, bool, Affinity),
    /// expr, subquery, negated, affinity applied to expr, affinity applied to the subquery's values.
    InSub(Box<PExpr>, Rc<QueryPlan>, bool, Affinity, Affinity),
    Exists(Rc<QueryPlan>, bool),
    /// `EXISTS (SELECT ... WHERE inner = outer.col)` as a hash semi-join ([`join::semi_join`]):
    /// the outer column's slot, the subquery without that equality (yielding `inner`, run once
    /// into a set), negated, the affinity applied to the outer value, and to the inner values.
    /// Last, when a key or an index serves the equality, the subquery as planned with it: run
    /// per outer row until those runs have cost about what the set costs to build, so a few
    /// outer rows stay a few lookups and many become one scan ([`join::probes_outer`]); with
    /// the table every row of which is an outer row, when that is known
    /// ([`join::hint_semi_joins`]).
    SemiHash(
        usize,
        Rc<QueryPlan>,
        bool,
        Affinity,
        Affinity,
        Option<(Rc<QueryPlan>, Option<crate::storage::TreeId>)>,
    ),
    Scalar(Rc<QueryPlan>),
    Like {
        expr: Box<PExpr>,
        pattern: Box<PExpr>,
        escape: Option<Box<PExpr>>,
        negated: bool,
    },
    Glob {
        expr: Box<PExpr>,
        pattern: Box<PExpr>,
        negated: bool,
    },
    Case {
        operand: Option<Box<PExpr>>,
        whens: Vec<(PExpr, PExpr)>,
        else_: Option<Box<PExpr>>,
    },
    Cast(Box<PExpr>, ColType),
    /// Applies an affinity (as a comparison would) to an index probe value.
    Affine(Box<PExpr>, Affinity),
    Func(Func, Vec<PExpr>),
    /// An aggregate's result, only while planning an aggregate query.
    AggRef(usize),
    /// A window call's result, only while planning a query with window calls.
    WinRef(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Abs,
    Coalesce,
    IfNull,
    NullIf,
    Iif,
    Length,
    Lower,
    Upper,
    Substr,
    Trim,
    LTrim,
    RTrim,
    Replace,
    Instr,
    Round,
    Min,
    Max,
    Typeof,
    Hex,
    Char,
    Random,
    Uuid7,
    Sign,
    /// `date`, `time`, `datetime`, `julianday`, `unixepoch`, `strftime`.
    Date(crate::exec::eval::DateFn),
    /// The JSON functions and the `->`, `->>` operators.
    Json(crate::exec::eval::JsonFn),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Total,
    Avg,
    Min,
    Max,
    GroupConcat,
    /// `json_group_array(x)`: every value, NULL too, as a JSON array.
    JsonArray,
    /// `json_group_object(k, v)`: a JSON object of the rows whose label is not NULL.
    JsonObject,
    /// A bare column in an aggregate query: the value from the group's last row, as SQLite.
    Last,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AggSpec {
    pub func: AggFunc,
    pub args: Vec<PExpr>,
    pub distinct: bool,
}

/// A query: a body (one or more cores), then sort, offset and limit on its output rows.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    pub columns: Rc<[String]>,
    pub body: Body,
    /// Sort keys over the body's rows (which may carry extra trailing sort columns).
    pub order: Vec<SortKey>,
    /// Each output column's affinity (a plain column's), for comparisons with its values.
    pub affinities: Vec<Affinity>,
    /// Output width: the body's rows are cut to this after sorting.
    pub width: usize,
    pub limit: Option<PExpr>,
    pub offset: Option<PExpr>,
    /// Refers to an enclosing query's columns, so it cannot be cached between outer rows.
    pub correlated: bool,
    /// A correlated single-core query whose result depends only on the enclosing queries'
    /// columns listed here, as (levels up, slot): a SELECT runs it once per distinct list of
    /// their values (a customer's average for each of its orders is worked out once).
    pub memo: Option<Rc<[(usize, usize)]>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Core(Box<Core>),
    Values(Vec<Vec<PExpr>>),
    Union {
        all: bool,
        left: Box<Body>,
        right: Box<Body>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub col: usize,
    pub desc: bool,
    pub nulls_first: bool,
}

/// One SELECT core: a join pipeline over levels, then aggregation, projection, DISTINCT.
#[derive(Debug, Clone, PartialEq)]
pub struct Core {
    pub levels: Vec<Level>,
    pub frame_len: usize,
    /// Conditions that reference no table (checked once before the scan).
    pub const_filters: Vec<PExpr>,
    pub agg: Option<AggPlan>,
    /// Output expressions (plus trailing sort-only expressions).
    pub project: Vec<PExpr>,
    /// The `project` entries (bit i for entry i) that are a column of the last level and the
    /// only mention of it in `project`: the value is moved out of the frame into the row,
    /// not copied, as the level writes the slot again before the next row reads it.
    pub moves: u64,
    pub distinct: bool,
    /// The scan already yields rows in the ORDER BY order, so the sort can be skipped.
    pub ordered: bool,
    /// Window calls: `project` then gives the step's input rows, and the step projects.
    pub window: Option<Box<WindowPlan>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AggPlan {
    pub group_by: Vec<PExpr>,
    pub aggs: Vec<AggSpec>,
    /// The query's only min()/max(), if it has exactly one: bare columns then come from the
    /// row that gave the min or max, as in SQLite.
    pub minmax: Option<usize>,
    /// The scan yields rows grouped (ordered by the GROUP BY columns): each group is finished
    /// when the next begins, with no hash table.
    pub streamed: bool,
    /// Evaluated on the aggregate frame: group values, then aggregate results.
    pub having: Option<PExpr>,
    /// The slots of the input frame the query's subqueries read, each with where the
    /// aggregate frame holds its value (a group value, or the column's value in a row of the
    /// group): a subquery in the output or HAVING is evaluated for the input row rebuilt so.
    pub regroup: Vec<(usize, usize)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Table(Rc<Table>),
    /// A subquery or CTE in FROM, materialized once per execution.
    Query(Rc<QueryPlan>),
    /// `json_each` (or with `tree`, `json_tree`) of its arguments, evaluated on the frame of
    /// the levels before it for each of their rows.
    Json {
        tree: bool,
        args: Vec<PExpr>,
    },
    /// An fts5 table (`crate::fts::rows`): the query (NULL: every row), or the branches of
    /// an OR (`fts::rewrite::branches`: None for a MATCH, else a row id comparison), and the
    /// auxiliary calls, evaluated on the frame of the levels before it.
    Fts {
        fts: Rc<crate::fts::Fts>,
        query: Vec<(Option<String>, PExpr)>,
        aux: Vec<(String, Vec<PExpr>)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub name: String,
    pub source: Source,
    /// First frame slot of this level's columns.
    pub base: usize,
    pub width: usize,
    pub access: Access,
    pub left: bool,
    /// Checked on each candidate row (ON conditions and pushed-down WHERE conjuncts).
    pub filters: Vec<PExpr>,
    /// WHERE conjuncts that must see a LEFT JOIN's NULL row, checked after it is decided.
    pub after: Vec<PExpr>,
    /// Columns (table-relative) the filters need, decoded first.
    pub pre_cols: Vec<usize>,
    /// The other columns the query needs, decoded only for rows that pass.
    pub post_cols: Vec<usize>,
    /// Write the row's primary key bytes (as a blob) into the slot after the row (UPDATE and
    /// DELETE find rows this way).
    pub key_slot: bool,
    /// ORDER BY ... LIMIT over this (only) level, sorting first on this table column: once the
    /// top-k buffer is full, a row whose column sorts after the current k-th row cannot make
    /// the result, so it is dropped before its other columns are decoded. The column is in
    /// `pre_cols`.
    pub topk: Option<SortKey>,
}

/// How a level's rows are found.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Every row of the primary tree (or the materialized rows of a subquery).
    Scan { reverse: bool },
    /// Rows of the primary tree (index None) or of a secondary index: for each probe (an
    /// equality prefix of the key columns), the keys with that prefix, narrowed by a range on
    /// the next key column.
    Index {
        index: Option<usize>,
        probes: Vec<Vec<PExpr>>,
        lower: Option<(PExpr, bool)>,
        upper: Option<(PExpr, bool)>,
        reverse: bool,
        /// Every needed column is in the index key: the table is never read.
        covering: bool,
        /// `col IN (SELECT ...)` on the first key column: the probes are the subquery's values
        /// (run once, with this affinity applied), instead of `probes`.
        sub_probe: Option<(Rc<QueryPlan>, Affinity)>,
    },
    /// No index fits the join condition: the inner rows are hashed once on `build`, and
    /// looked up with `probe`, evaluated on the outer frame.
    Hash { build: PExpr, probe: PExpr },
}

#[derive(Debug, Clone, PartialEq)]
pub struct InsertPlan {
    pub table: Rc<Table>,
    /// For each table column, the source position in an input row, or its default.
    pub columns: Vec<ColSource>,
    pub rows: InsertRows,
    pub or: Conflict,
    pub upsert: Option<UpsertPlan>,
    pub returning: Vec<PExpr>,
    pub returning_names: Rc<[String]>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ColSource {
    Input(usize),
    Default(Option<PExpr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertRows {
    Values(Vec<Vec<PExpr>>),
    Query(Rc<QueryPlan>),
}

/// Column assignments and an optional WHERE.
pub type UpsertSet = (Vec<(usize, PExpr)>, Option<PExpr>);

#[derive(Debug, Clone, PartialEq)]
pub struct UpsertPlan {
    /// The unique index (Some) or primary key (None) whose conflict the clause handles; None
    /// target with `any` handles every conflict.
    pub target: Option<Option<usize>>,
    /// DO UPDATE: (column, expression over [existing row ++ excluded row]), and its WHERE.
    pub set: Option<UpsertSet>,
}

/// UPDATE and DELETE: a single-table scan plan, then per-row changes.
#[derive(Debug, Clone, PartialEq)]
pub struct WritePlan {
    pub table: Rc<Table>,
    pub scan: Core,
    /// UPDATE: column index and new value expression, over the old row. Empty for DELETE.
    pub set: Vec<(usize, PExpr)>,
    pub or: Conflict,
    pub returning: Vec<PExpr>,
    pub returning_names: Rc<[String]>,
    /// The scan gives each row's key and leaves its columns undecoded, because the write needs
    /// no more. DELETE: no index entry, RETURNING or replication reads the row. UPDATE: the
    /// rows are rewritten in place, reading only `set_reads`: no key column and no indexed
    /// column is set, no SET expression has a subquery, and no CHECK, RETURNING or replication
    /// reads the whole row (a replicated table's scope column is not set, it has no counters).
    pub keys_only: bool,
    /// UPDATE with `keys_only`: the columns the SET expressions read, and of a replicated
    /// table those its capture reads (the key, the scope column and the columns set), ascending.
    pub set_reads: Vec<usize>,
}
