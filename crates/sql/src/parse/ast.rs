//! The abstract syntax tree the parser produces and the planner consumes. Names are kept as
//! written; the planner resolves them case-insensitively against the catalog.

use cairn_value::Value;

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Box<Select>),
    Insert(Box<Insert>),
    Update(Box<Update>),
    Delete(Box<Delete>),
    CreateTable(CreateTable),
    /// `CREATE VIRTUAL TABLE ... USING fts5(...)` (`crate::fts`).
    CreateVirtual(CreateVirtual),
    DropTable {
        name: String,
        if_exists: bool,
    },
    CreateIndex(CreateIndex),
    DropIndex {
        name: String,
        if_exists: bool,
    },
    AlterTable {
        table: String,
        action: AlterAction,
    },
    /// `PRAGMA name = value` (or `(value)`), and a `PRAGMA` this dialect does not know; the
    /// pragmas that read (`table_info`, `user_version`, ...) are parsed as the SELECT that
    /// reads their table-valued function.
    Pragma {
        name: String,
        value: Option<String>,
    },
    Begin,
    Commit,
    Rollback,
    /// `SAVEPOINT name`, `RELEASE [SAVEPOINT] name`, `ROLLBACK [TRANSACTION] TO [SAVEPOINT] name`.
    Savepoint(String),
    Release(String),
    RollbackTo(String),
    Explain(Box<Statement>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterAction {
    AddColumn(ColumnDef),
    RenameTo(String),
    RenameColumn { from: String, to: String },
    DropColumn(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateVirtual {
    pub name: String,
    pub if_not_exists: bool,
    pub module: String,
    /// Each argument's words.
    pub args: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: String,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    /// Table-level `PRIMARY KEY (a, b)`.
    pub primary_key: Option<Vec<String>>,
    /// Table-level `UNIQUE (a, b)`.
    pub uniques: Vec<Vec<String>>,
    /// How many UNIQUE constraints (column-level ones, then table-level ones, as written)
    /// come before the PRIMARY KEY: SQLite numbers the indexes of both in that order.
    pub primary_key_after: usize,
    pub checks: Vec<Expr>,
    /// `FOREIGN KEY` constraints and columns' `REFERENCES`, in the order written.
    pub foreign_keys: Vec<ForeignKey>,
    /// `REPLICATED [(SCOPE col, COUNTER col, SET col, MAP col, ...)]` after the column list.
    pub replicated: Option<Replicated>,
}

/// What a foreign key does to the child rows when their parent's key is deleted or changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FkAction {
    #[default]
    NoAction,
    Restrict,
    SetNull,
    SetDefault,
    Cascade,
}

impl FkAction {
    /// As SQLite words it (`pragma_foreign_key_list`, the table's SQL).
    pub fn sql(self) -> &'static str {
        match self {
            FkAction::NoAction => "NO ACTION",
            FkAction::Restrict => "RESTRICT",
            FkAction::SetNull => "SET NULL",
            FkAction::SetDefault => "SET DEFAULT",
            FkAction::Cascade => "CASCADE",
        }
    }
}

/// `FOREIGN KEY (columns) REFERENCES parent (parent_columns) ...`, or a column's `REFERENCES`
/// (its `columns` empty: the column itself).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub parent: String,
    /// Empty: the parent's primary key.
    pub parent_columns: Vec<String>,
    pub on_delete: FkAction,
    pub on_update: FkAction,
    /// `DEFERRABLE INITIALLY DEFERRED`: checked at COMMIT rather than after each statement.
    pub deferred: bool,
}

/// A replicated table's options (docs/sql.md, "Replicated tables").
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Replicated {
    /// The column whose value names the scope a row belongs to (one scope per table if None).
    pub scope: Option<String>,
    /// Columns merged as counters (each author's additions sum) rather than last writer wins.
    pub counters: Vec<String>,
    /// Columns merged as observed-remove sets (read as JSON arrays).
    pub sets: Vec<String>,
    /// Columns merged as maps, key by key (read as JSON objects).
    pub maps: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    /// The declared type as written (`VARCHAR(20)`), or None.
    pub type_name: Option<String>,
    pub primary_key: bool,
    pub primary_key_desc: bool,
    pub not_null: bool,
    pub unique: bool,
    pub default: Option<DefaultValue>,
    pub check: Option<Expr>,
    pub references: Option<Box<ForeignKey>>,
    /// `AS (expr)` / `GENERATED ALWAYS AS (expr)`, `VIRTUAL` or `STORED`.
    pub generated: Option<Box<Generated>>,
}

/// A generated column's expression, over the other columns of its row. cairn stores the value
/// of both kinds in the row (`crate::generated`); `stored` is kept for what SQLite shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub expr: Expr,
    pub stored: bool,
}

/// A column's DEFAULT, with its text as written (inside the parentheses, for the form that has
/// them), which `PRAGMA table_info` shows as SQLite does.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultValue {
    pub expr: Expr,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndex {
    pub name: String,
    pub table: String,
    pub unique: bool,
    pub if_not_exists: bool,
    pub columns: Vec<String>,
    /// An index on expressions (`ON doc (json_extract(body, '$.a'))`): every key part, a plain
    /// column as an `Expr::Column`; `columns` is then empty.
    pub exprs: Vec<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct With {
    pub ctes: Vec<Cte>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cte {
    pub name: String,
    pub columns: Vec<String>,
    pub query: Select,
}

/// A full query: `WITH`, a chain of `UNION`ed cores, `ORDER BY`, `LIMIT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub with: Option<With>,
    pub body: SelectBody,
    pub order_by: Vec<OrderItem>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SelectBody {
    Core(Box<SelectCore>),
    /// `VALUES (...), (...)`.
    Values(Vec<Vec<Expr>>),
    Union {
        all: bool,
        left: Box<SelectBody>,
        right: Box<SelectBody>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SelectCore {
    pub distinct: bool,
    pub columns: Vec<SelectItem>,
    pub from: Vec<FromItem>,
    pub where_: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`
    All,
    /// `t.*`
    TableAll(String),
    Expr {
        expr: Expr,
        alias: Option<String>,
        /// The expression as written: the column's name when there is no alias.
        text: String,
    },
}

/// One entry of the FROM list; the first has `join` None.
#[derive(Debug, Clone, PartialEq)]
pub struct FromItem {
    pub source: TableSource,
    pub alias: Option<String>,
    pub join: Option<JoinKind>,
    pub on: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TableSource {
    Table(String),
    Subquery(Box<Select>),
    /// A table-valued function, `pragma_table_info('t')`.
    Function {
        name: String,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// `,` or `[INNER|CROSS] JOIN`.
    Inner,
    Left,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    pub expr: Expr,
    pub desc: bool,
    /// `NULLS FIRST` (Some(true)) / `NULLS LAST` (Some(false)); SQLite's default puts NULLs first
    /// ascending and last descending.
    pub nulls_first: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    Abort,
    Replace,
    Ignore,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub with: Option<With>,
    pub or: Conflict,
    pub table: String,
    pub columns: Vec<String>,
    pub source: InsertSource,
    pub upsert: Option<Upsert>,
    pub returning: Vec<SelectItem>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertSource {
    Values(Vec<Vec<Expr>>),
    Select(Box<Select>),
    DefaultValues,
}

/// `SET a = x, b = y`.
pub type SetList = Vec<(String, Expr)>;

#[derive(Debug, Clone, PartialEq)]
pub struct Upsert {
    pub target: Vec<String>,
    /// None: `DO NOTHING`.
    pub update: Option<(SetList, Option<Expr>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub with: Option<With>,
    pub or: Conflict,
    pub table: String,
    pub alias: Option<String>,
    pub set: Vec<(String, Expr)>,
    pub where_: Option<Expr>,
    pub returning: Vec<SelectItem>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub with: Option<With>,
    pub table: String,
    pub alias: Option<String>,
    pub where_: Option<Expr>,
    pub returning: Vec<SelectItem>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Is,
    IsNot,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Concat,
    BitAnd,
    BitOr,
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Pos,
    Not,
    BitNot,
}

/// A parameter with the 1-based number the parser gave it (see [`crate::parse::Params`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// `?` or `?NNN`.
    Index(u32),
    /// `:name`, `$name`, `@name`, prefix included.
    Named(String, u32),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Value),
    Param(Param),
    /// `[table.]column`
    Column {
        table: Option<String>,
        name: String,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    InSelect {
        expr: Box<Expr>,
        query: Box<Select>,
        negated: bool,
    },
    Exists {
        query: Box<Select>,
        negated: bool,
    },
    Subquery(Box<Select>),
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: Option<Box<Expr>>,
        negated: bool,
    },
    Glob {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        else_: Option<Box<Expr>>,
    },
    Cast {
        expr: Box<Expr>,
        type_name: String,
    },
    Function {
        name: String,
        args: Vec<Expr>,
        distinct: bool,
        /// `count(*)`
        star: bool,
    },
    /// A window function call: `func` is the [`Expr::Function`], over the window `over`, its
    /// rows narrowed by `filter` (aggregates only).
    Window {
        func: Box<Expr>,
        filter: Option<Box<Expr>>,
        over: Box<crate::parse::window::WindowDef>,
    },
}

/// The body of [`Expr::each_child`] and [`Expr::each_child_mut`], written once for both.
macro_rules! each_child {
    ($e:expr, $f:expr, $iter:ident $(, $m:tt)?) => {
        match $e {
            Expr::Unary(_, a)
            | Expr::IsNull { expr: a, .. }
            | Expr::Cast { expr: a, .. }
            | Expr::InSelect { expr: a, .. } => $f(a),
            Expr::Binary(_, a, b)
            | Expr::Glob {
                expr: a,
                pattern: b,
                ..
            } => {
                $f(a);
                $f(b);
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                $f(expr);
                $f(pattern);
                if let Some(x) = escape {
                    $f(x);
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                $f(expr);
                $f(low);
                $f(high);
            }
            Expr::InList { expr, list, .. } => {
                $f(expr);
                list.$iter().for_each(|x| $f(x));
            }
            Expr::Case {
                operand,
                whens,
                else_,
            } => {
                if let Some(o) = operand {
                    $f(o);
                }
                for (a, b) in whens {
                    $f(a);
                    $f(b);
                }
                if let Some(x) = else_ {
                    $f(x);
                }
            }
            Expr::Function { args, .. } => args.$iter().for_each(|x| $f(x)),
            Expr::Window { func, filter, over } => {
                $f(func);
                if let Some(c) = filter {
                    $f(c);
                }
                over.partition.$iter().for_each(|x| $f(x));
                over.order.$iter().for_each(|o| $f(&$($m)? o.expr));
            }
            Expr::Literal(_)
            | Expr::Param(_)
            | Expr::Column { .. }
            | Expr::Exists { .. }
            | Expr::Subquery(_) => {}
        }
    };
}

impl Expr {
    /// Calls `f` on each expression this one holds directly, in the order the SQL names them;
    /// subqueries are not expressions of this one (their own walks go through them).
    pub fn each_child(&self, f: &mut dyn FnMut(&Expr)) {
        each_child!(self, f, iter)
    }

    /// [`Expr::each_child`], for a walk that may change what it visits.
    pub fn each_child_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        each_child!(self, f, iter_mut, mut)
    }
}
