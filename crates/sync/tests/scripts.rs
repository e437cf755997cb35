//! Golden scripts (testscripts/*.txt): the merge rules and the protocol told as a story. Each
//! line is a command; lines starting with `→ ` are its expected output. `UPDATE_GOLDEN=1`
//! rewrites the files from what the code does.
//!
//! Commands (`R` a replica name, `S` a scope written `owner:name`):
//!   replica R                       a new replica with the todo and user tables
//!   time MS                         sets the wall clock every replica sees
//!   R set S TABLE KEY col=v ...     one commit (v: integer, `null`, or text)
//!   R add S TABLE KEY col=N         add to a counter
//!   R delete S TABLE KEY  /  R purge S TABLE KEY
//!   R writers NAME R2 ...           R signs a writer list for its scope NAME
//!   sync R1 R2                      connect and exchange until quiet
//!   R rows TABLE                    visible rows (and rows hidden by a unique conflict)
//!   R history                       per chain: seqs held, and whether values were redacted
//!   R verify / R compact            verify() failures / records dropped

mod common;

use cairn_sync::change::OpBody;
use cairn_sync::{Config, Identity, Link, Op, Payload, Replica, ScopeId, Value};
use common::schemas;
use std::collections::BTreeMap;
use std::path::PathBuf;

struct World {
    replicas: BTreeMap<String, Replica>,
    now: u64,
}

impl World {
    fn r(&mut self, name: &str) -> &mut Replica {
        self.replicas
            .get_mut(name)
            .unwrap_or_else(|| panic!("no replica {name}"))
    }
    fn name_of(&self, id: &cairn_sync::AuthorId) -> String {
        self.replicas
            .iter()
            .find(|(_, r)| r.id() == *id)
            .map_or("?".into(), |(n, _)| n.clone())
    }
    fn scope(&self, s: &str) -> ScopeId {
        let (owner, name) = s.split_once(':').expect("scope is owner:name");
        ScopeId::new(self.replicas[owner].id(), name)
    }
}

fn value(s: &str) -> Value {
    if s == "null" {
        Value::Null
    } else if let Ok(i) = s.parse() {
        Value::Integer(i)
    } else {
        Value::Text(s.into())
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => format!(
            "x'{}'",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}

/// `sync a b`: until both are quiet; `b` takes snapshots from `a` (it bootstraps from it).
fn sync(w: &mut World, a: &str, b: &str) -> Vec<String> {
    let now = w.now;
    let mut ra = w.replicas.remove(a).expect("replica");
    let mut rb = w.replicas.remove(b).expect("replica");
    let (mut la, mut lb) = (Link::new(), Link::snapshot_source());
    let mut to_b = vec![ra.open_link(&mut la, now)];
    let mut to_a = vec![rb.open_link(&mut lb, now)];
    let mut out = Vec::new();
    let mut note = |who: &str, events: Vec<cairn_sync::Event>| {
        for e in events {
            if let cairn_sync::Event::Rejected { reason, .. } = e {
                out.push(format!("{who} rejected {}", reason.code()));
            }
        }
    };
    for _ in 0..100 {
        if to_a.is_empty() && to_b.is_empty() {
            to_b = ra.poll(&mut la, now);
            to_a = rb.poll(&mut lb, now);
            if to_a.is_empty() && to_b.is_empty() {
                break;
            }
        }
        for m in std::mem::take(&mut to_b) {
            let o = rb.handle(&mut lb, now, &m);
            to_a.extend(o.send);
            note(b, o.events);
        }
        for m in std::mem::take(&mut to_a) {
            let o = ra.handle(&mut la, now, &m);
            to_b.extend(o.send);
            note(a, o.events);
        }
    }
    w.replicas.insert(a.into(), ra);
    w.replicas.insert(b.into(), rb);
    out
}

fn run(w: &mut World, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let now = w.now;
    match words.as_slice() {
        ["replica", name] => {
            let secret = *blake3::hash(name.as_bytes()).as_bytes();
            let mut r = Replica::in_memory(Identity::from_secret(secret), Config::default());
            for s in schemas() {
                r.register_table(s).expect("valid schema");
            }
            w.replicas.insert(name.to_string(), r);
            vec![]
        }
        ["time", ms] => {
            w.now = 1_700_000_000_000 + ms.parse::<u64>().expect("time in ms");
            vec![]
        }
        ["sync", a, b] => sync(w, a, b),
        [r, "writers", name, writers @ ..] => {
            let ids = writers.iter().map(|n| w.replicas[*n].id()).collect();
            w.r(r).sign_writers(name.as_bytes(), 1, ids);
            vec![]
        }
        [r, verb @ ("set" | "add" | "delete" | "purge"), scope, table, key, cols @ ..] => {
            let scope = w.scope(scope);
            let schema = w.r(r).table(table).expect("known table").clone();
            let col = |c: &str| schema.column(c).unwrap_or_else(|| panic!("no column {c}"));
            let payload = match *verb {
                "set" => Payload::Set(
                    cols.iter()
                        .map(|c| {
                            let (k, v) = c.split_once('=').expect("col=value");
                            (col(k), value(v))
                        })
                        .collect(),
                ),
                "add" => {
                    let (k, v) = cols[0].split_once('=').expect("col=delta");
                    Payload::Add(col(k), v.parse().expect("a delta"))
                }
                "delete" => Payload::Delete,
                _ => Payload::Purge,
            };
            let op = Op::new(*table, vec![Value::Text(key.to_string())], payload);
            match w.r(r).commit(now, &scope, vec![op]) {
                Ok(_) => vec![],
                Err(e) => vec![format!("error {e}")],
            }
        }
        [r, "rows", table] => {
            let (shown, hidden) = w.r(r).visible(table);
            let schema = w.r(r).table(table).expect("known table").clone();
            let fmt = |row: &cairn_sync::merge::VisibleRow| {
                let cols: Vec<String> = schema
                    .columns
                    .iter()
                    .zip(&row.values)
                    .map(|((n, _), v)| format!("{n}={}", show(v)))
                    .collect();
                format!("{} {}", show(&row.pk[0]), cols.join(" "))
            };
            let mut out: Vec<String> = shown.iter().map(fmt).collect();
            out.extend(hidden.iter().map(|r| format!("hidden: {}", fmt(r))));
            if out.is_empty() {
                out.push("(none)".into());
            }
            out
        }
        [r, "history"] => {
            let r = &w.replicas[*r];
            r.chains()
                .map(|((author, scope), log)| {
                    let seqs: Vec<String> = log
                        .blocks
                        .iter()
                        .flat_map(|b| b.records.iter())
                        .chain(log.pending.iter())
                        .map(|rec| {
                            let red = rec
                                .ops
                                .iter()
                                .any(|o| matches!(o.body, OpBody::Redacted { .. }));
                            format!("{}{}", rec.seq, if red { "(redacted)" } else { "" })
                        })
                        .collect();
                    format!(
                        "{} in {}:{}: base {} records [{}]",
                        w.name_of(author),
                        w.name_of(&scope.owner),
                        String::from_utf8_lossy(&scope.name),
                        log.base.as_ref().map_or(0, |c| c.seq),
                        seqs.join(" ")
                    )
                })
                .collect()
        }
        [r, "verify"] => {
            let f = w.r(r).verify();
            vec![if f.is_empty() {
                "ok".into()
            } else {
                format!("{f:?}")
            }]
        }
        [r, "compact"] => vec![format!("dropped {}", w.r(r).compact())],
        _ => panic!("unknown command: {line}"),
    }
}

#[test]
fn golden_scripts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testscripts");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("testscripts/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read script");
        let mut w = World {
            replicas: BTreeMap::new(),
            now: 1_700_000_000_000,
        };
        let mut actual = String::new();
        for line in text.lines() {
            if line.starts_with("→ ") {
                continue;
            }
            actual.push_str(line);
            actual.push('\n');
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            for out in run(&mut w, line) {
                actual.push_str(&format!("→ {out}\n"));
            }
        }
        if std::env::var("UPDATE_GOLDEN").is_ok() {
            std::fs::write(&path, &actual).expect("write script");
        } else {
            assert_eq!(actual, text, "{}", path.display());
        }
    }
}
