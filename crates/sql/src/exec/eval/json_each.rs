//! The table-valued `json_each(json[, root])` and `json_tree(json[, root])`: a row per member
//! of the value at `root` (json_each), or per value under it, itself first, in document order
//! (json_tree). A FROM level (`plan::Source::Json`) makes the rows again for each row of the
//! levels before it, whose columns its arguments may read (`FROM doc, json_each(doc.body)`).

use super::json::{self, J};
use crate::error::Result;
use crate::types::{to_text, Affinity};
use cairn_value::Value;
use std::borrow::Cow;

/// The columns, SQLite's, the two hidden ones (the arguments) last.
pub const COLUMNS: [&str; 10] = [
    "key", "value", "type", "atom", "id", "parent", "fullkey", "path", "json", "root",
];
pub const HIDDEN: usize = 2;

pub fn columns() -> Vec<(String, Affinity)> {
    COLUMNS
        .iter()
        .map(|c| (c.to_string(), Affinity::None))
        .collect()
}

struct Walk<'a> {
    tree: bool,
    wanted: u16,
    json: &'a Value,
    root: &'a str,
    rows: Vec<Vec<Value>>,
    /// `id` of the next row: rows are numbered in document order. (SQLite's ids are offsets
    /// into its binary form; docs/sql.md.)
    next_id: i64,
}

impl Walk<'_> {
    fn row(&mut self, key: Value, j: &J, parent: Option<i64>, fullkey: &str, path: &str) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let want = |c: usize| self.wanted & (1 << c) != 0;
        let mut row = vec![Value::Null; COLUMNS.len()];
        if want(0) {
            row[0] = key;
        }
        if want(1) {
            row[1] = json::to_sql(j);
        }
        if want(2) {
            row[2] = Value::Text(json::type_name(j).into());
        }
        if want(3) && !matches!(j, J::Arr(_) | J::Obj(_)) {
            row[3] = json::to_sql(j);
        }
        row[4] = Value::Integer(id);
        row[5] = parent.map_or(Value::Null, Value::Integer);
        if want(6) {
            row[6] = Value::Text(fullkey.into());
        }
        if want(7) {
            row[7] = Value::Text(path.into());
        }
        if want(8) {
            row[8] = self.json.clone();
        }
        if want(9) {
            row[9] = Value::Text(self.root.into());
        }
        self.rows.push(row);
        id
    }

    /// The members of the container `j` at `fullkey` (whose row, in a tree, is `id`).
    fn members(&mut self, j: &J, id: Option<i64>, fullkey: &str) {
        // An element's full key is made only when a column shows it or its members' rows name
        // it (`fullkey`, or `path` in a tree): json_each over a column reads neither.
        let each = |w: &mut Self, key: Value, elem: &dyn Fn() -> String, v: &J| {
            let shown = w.wanted & (1 << 6) != 0 || (w.tree && matches!(v, J::Arr(_) | J::Obj(_)));
            let full = if shown {
                format!("{fullkey}{}", elem())
            } else {
                String::new()
            };
            let parent = if w.tree { id } else { None };
            let vid = w.row(key, v, parent, &full, fullkey);
            if w.tree && matches!(v, J::Arr(_) | J::Obj(_)) {
                w.members(v, Some(vid), &full);
            }
        };
        match j {
            J::Arr(a) => {
                for (i, v) in a.iter().enumerate() {
                    each(self, Value::Integer(i as i64), &|| format!("[{i}]"), v);
                }
            }
            J::Obj(m) => {
                for (k, v) in m {
                    let elem = || {
                        let b = k.as_bytes();
                        let plain = b.first().is_some_and(u8::is_ascii_alphabetic)
                            && b.iter().all(u8::is_ascii_alphanumeric);
                        if plain {
                            format!(".{k}")
                        } else {
                            format!(".\"{k}\"")
                        }
                    };
                    each(self, Value::Text(json::unescape(k)), &elem, v);
                }
            }
            _ => {}
        }
    }
}

/// How SQLite splits a root path into the path and the key of the root's own row: in a tree,
/// at its last step when that is `[0]` (SQLite finds the parent of a first element only),
/// else after the `$`; json_each's root row keeps the whole path and has no key.
fn root_split(tree: bool, root: &str) -> (String, Value) {
    if !tree {
        return (root.to_string(), Value::Null);
    }
    let j = match root.rfind('[') {
        Some(i) if i > 0 && &root[i..] == "[0]" => i,
        _ => 1,
    };
    let path = root[..j.min(root.len())].to_string();
    let rest = root.get(j..).unwrap_or("");
    let key = if rest.is_empty() {
        Value::Null
    } else if let Some(r) = rest.strip_prefix('[') {
        let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
        Value::Integer(digits.parse().unwrap_or(0))
    } else if rest.as_bytes().get(1) == Some(&b'"') {
        Value::Text(rest.get(2..rest.len() - 1).unwrap_or("").into())
    } else {
        Value::Text(rest[1..].into())
    };
    (path, key)
}

/// The rows for the arguments `json` and `root` (None: `$`), with the columns whose bit is set
/// in `wanted` (the others NULL: what the query does not read is not made).
pub fn rows(
    tree: bool,
    json_arg: &Value,
    root: Option<&Value>,
    wanted: u16,
) -> Result<Vec<Vec<Value>>> {
    let text: Cow<str> = match json_arg {
        Value::Null => return Ok(Vec::new()),
        Value::Blob(_) => return Err(json::malformed()),
        Value::Text(s) => Cow::Borrowed(s),
        // SQLite reads an infinite REAL's text (`Inf`) as JSON5's Infinity, written 9e999.
        Value::Real(r) if r.is_infinite() => {
            Cow::Borrowed(if *r > 0.0 { "9e999" } else { "-9e999" })
        }
        v => Cow::Owned(to_text(v).unwrap_or_default()),
    };
    let root = match root {
        None => "$".to_string(),
        Some(v) => match to_text(v) {
            None => return Ok(Vec::new()),
            Some(r) => r,
        },
    };
    let Some(rest) = root.strip_prefix('$') else {
        return Err(json::bad_path(&root));
    };
    // Only the value at the root is built.
    let start = if rest.is_empty() {
        json::parse(&text).ok_or_else(json::malformed)?
    } else {
        match json::locate(&text, rest) {
            json::Located::Malformed => return Err(json::malformed()),
            json::Located::BadPath => return Err(json::bad_path(&root)),
            json::Located::Found(None) => return Ok(Vec::new()),
            json::Located::Found(Some((a, b))) => {
                json::parse(&text[a..b]).ok_or_else(json::malformed)?
            }
        }
    };
    let start = &start;
    let mut w = Walk {
        tree,
        wanted,
        json: json_arg,
        root: &root,
        rows: Vec::new(),
        next_id: 1,
    };
    let container = matches!(start, J::Arr(_) | J::Obj(_));
    if tree || !container {
        // The value at the root is a row of its own.
        let (path, key) = root_split(tree, &root);
        let id = w.row(key, start, None, &root, &path);
        if tree {
            w.members(start, Some(id), &root);
        }
    } else {
        w.members(start, None, &root);
    }
    Ok(w.rows)
}
